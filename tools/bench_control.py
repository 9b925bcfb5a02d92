#!/usr/bin/env python3
"""One control-law step including its dynamics, inside njit, for every law on the default
leg (target ≤ 2 µs for computed torque): ``python tools/bench_control.py``."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from exo_rt.config import load_controller, transmission_rows
from exo_rt.control import laws, registry
from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism

ROOT = Path(__file__).resolve().parents[1]


@njit(cache=True)
def _steps(table, opts, model, data, gains, law_state, transmissions, q, qd, qr, qdr, qddr,
           assist, tau, cur, scratch, n):
    for _ in range(n):
        q[0] += 1e-9
        laws.law_torque(table, opts, model, data, model, data, gains, law_state, q, qd, qr, qdr,
                        qddr, assist, 1e-3, tau, scratch)
        laws.torque_to_current(tau, qd, qddr, transmissions, opts[0].friction_compensation, cur)


def main() -> int:
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    dyn = Dynamics(robot)
    n = robot.nq
    q, qd = np.array([0.3, 0.5]), np.array([0.2, -0.4])
    qr, qdr, qddr = q + 0.01, qd + 0.01, np.array([1.0, -2.0])
    print("one law step + torque → current, exo_leg, inside njit (median of 7 × 200 000):")
    for path in sorted((ROOT / "configs" / "controllers").glob("*.yaml")):
        cfg = load_controller(path, robot)
        args = (registry.table(), cfg.options(), dyn.packed, dyn.workspace, cfg.gains,
                laws.law_state(n),
                transmission_rows(robot, cfg), q, qd, qr, qdr, qddr, np.zeros(n), np.zeros(n),
                np.zeros(n), laws.law_scratch(n))
        _steps(*args, 10)
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            _steps(*args, 200000)
            times.append((time.perf_counter() - t0) / 200000 * 1e6)
        target = "  (target ≤ 2 µs)" if cfg.law == "computed_torque" else ""
        print(f"  {cfg.law:<16} {statistics.median(times):6.3f} µs{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
