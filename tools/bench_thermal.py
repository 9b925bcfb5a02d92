#!/usr/bin/env python3
"""One cycle of the motor thermal model — :func:`~exo_rt.actuators.thermal.thermal_step` and
:func:`~exo_rt.actuators.thermal.derate` — inside njit (as the control cycle calls them) and
from Python, for the 2-joint leg and the 12-joint exoskeleton:
``python tools/bench_thermal.py``."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from exo_rt.actuators import thermal as th
from exo_rt.model import load_mechanism
from exo_rt.schema.top import SafetyConfig

ROOT = Path(__file__).resolve().parents[1]
N = 200000


@njit(cache=True)
def _cycles(params, temps, current, reported, factor, n):
    """n cycles of the model and the derating (the current varies so nothing is hoisted)."""
    hit = 0
    for k in range(n):
        current[0] = 3.0 + 1e-6 * k
        th.thermal_step(params, temps, current, reported, 1e-3)
        hit += th.derate(params, temps, factor)
    return hit


def _python(params, temps, current, reported, factor, n):
    """The same cycles, each kernel called from Python (its dispatch included)."""
    for _ in range(n):
        th.thermal_step(params, temps, current, reported, 1e-3)
        th.derate(params, temps, factor)


def _median_us(fn, args, reps=7) -> float:
    """Median time of one cycle (µs) over ``reps`` runs of N cycles."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args, N)
        times.append((time.perf_counter() - t0) / N * 1e6)
    return statistics.median(times)


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print(f"thermal_step + derate, one cycle (median of 7 × {N} cycles):")
    for name in ("exo_leg", "exo_12dof"):
        robot = load_mechanism(ROOT / "configs" / "robots" / f"{name}.yaml", wearer=False)
        params = th.thermal_rows(robot, SafetyConfig())
        n = len(params)
        args = (params, th.initial_temperatures(params), np.full(n, 2.0), np.full(n, np.nan),
                np.ones(n))
        _cycles(*args, 10)
        print(f"  {name:<10} {n:2d} joints: inside njit {_median_us(_cycles, args):6.3f} µs, "
              f"from Python {_median_us(_python, args, 3):6.3f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
