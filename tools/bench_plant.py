#!/usr/bin/env python3
"""One plant step (1 ms with its sub-steps) of the default leg inside njit, and the
simulated seconds per wall second: ``python tools/bench_plant.py``.

Three regimes: rotors stuck (zero current, leg held by the drives), rotors sliding (a current
drives the leg), frictionless and coasting (every rotor free).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from exo_rt.model import load_mechanism
from exo_rt.sim.plant import Plant, plant_step

ROOT = Path(__file__).resolve().parents[1]


@njit(cache=True)
def _run(pk, ws, tp, st, cmd, dt, substeps, sc, steps):
    for _ in range(steps):
        plant_step(pk, ws, tp, st, cmd, dt, substeps, sc)


def measure(plant: Plant, cmd, steps: int = 2000, repeats: int = 5) -> float:
    plant.cmd[:] = cmd
    args = (plant.pk, plant.ws, plant.tp, plant.state, plant.cmd, plant.dt, plant.substeps,
            plant.scratch)
    _run(*args, 1)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _run(*args, steps)
        times.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(times)


def main() -> int:
    mech = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    rows = []
    plant = Plant(mech)
    plant.reset([0.0, math.pi / 2])
    rows.append(("rotors stuck, zero current", measure(plant, [0.0, 0.0])))
    plant.reset([0.3, 0.5])
    rows.append(("rotors sliding, 2 A", measure(plant, [2.0, -2.0], steps=300)))
    free = Plant(mech, friction=False, hysteresis=False)
    free.reset([0.0, math.pi / 2])
    free.power(False)
    rows.append(("frictionless, coasting", measure(free, [0.0, 0.0], steps=300)))
    print(f"plant step of exo_leg ({plant.substeps} RK4 sub-steps per {plant.dt * 1e3:g} ms), "
          "inside njit, median:")
    for name, us in rows:
        print(f"  {name:<28} {us:8.1f} µs   {plant.dt * 1e6 / us:6.1f} simulated s per wall s")
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
