#!/usr/bin/env python3
"""One control-law step including its dynamics, inside njit, for every law on the default
leg (target ≤ 2 µs for computed torque): ``python tools/bench_control.py``."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from exo_rt.control import laws
from exo_rt.control.config import load_controller
from exo_rt.cycle import step as cy
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.schema.top import SafetyConfig

ROOT = Path(__file__).resolve().parents[1]


@njit(cache=True)
def _steps(m, d, n):
    """n law steps and torque → current, on the cycle's model and data (RUN's inputs)."""
    lm, ld = m.law, d.law
    for _ in range(n):
        ld.q[0] += 1e-9
        laws.law_torque(m.torque, lm, ld)
        laws.torque_to_current(ld.tau, ld.qd, ld.qddr, m.transmissions, m.p[0].friction_comp,
                               d.v[cy.V_CUR])


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    q, qd = np.array([0.3, 0.5]), np.array([0.2, -0.4])
    qr, qdr, qddr = q + 0.01, qd + 0.01, np.array([1.0, -2.0])
    print("one law step + torque → current, exo_leg, inside njit (median of 7 × 200 000):")
    for path in sorted((ROOT / "configs" / "controllers").glob("*.yaml")):
        try:
            cfg = load_controller(path, robot)
        except ConfigError:  # another robot's controller file (its joints)
            continue
        c = cy.build(robot, robot, cfg, SafetyConfig(), dt=1e-3)
        c.q[:], c.qd[:], c.qr[:], c.qdr[:], c.qddr[:] = q, qd, qr, qdr, qddr
        args = (c.model, c.data)
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
