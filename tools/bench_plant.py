#!/usr/bin/env python3
"""One plant step (1 ms with its sub-steps) of the default leg, inside njit and from Python,
and the accuracy behind the default sub-step count: ``python tools/bench_plant.py [--quick]``.

Timing regimes: rotors stuck (zero current, the leg held by its drives), driven (sinusoidal
currents: sliding, reversals, stick–slip, the supply's voltage limit), frictionless and
coasting (every rotor free). Accuracy: the largest joint-angle difference over 1 s of hard
driving against 200 sub-steps, and the energy drift of a 2 s frictionless fall, per count.
Medians of repeated runs (this VM is noisy).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from exo_rt.model import load_mechanism
from exo_rt.sim.plant import SUBSTEPS, Plant, plant_run

ROOT = Path(__file__).resolve().parents[1]
KNEE_HORIZONTAL = (0.0, math.pi / 2)


def driving(steps: int, dt: float = 1e-3) -> np.ndarray:
    """Hard driving: up to ±11 A on both motors, reversals, a square component."""
    t = np.arange(steps) * dt
    return np.stack([8 * np.sin(2 * np.pi * t),
                     -10 * np.sin(3 * np.pi * t) + np.sign(np.sin(1.4 * np.pi * t))], 1)


def run(plant: Plant, currents: np.ndarray) -> np.ndarray:
    log = np.zeros((len(currents), plant.n_joints))
    plant_run(*plant.args, currents, log)
    return log


def time_njit(mech, currents, *, friction=True, substeps=SUBSTEPS, repeats=5,
              power=True) -> float:
    """Median µs per plant_step (one period) inside njit."""
    plant = Plant(mech, substeps=substeps, friction=friction, hysteresis=friction)
    times = []
    for r in range(repeats + 1):
        plant.reset(KNEE_HORIZONTAL)
        plant.power(power)
        t0 = time.perf_counter()
        run(plant, currents)
        if r:  # the first run compiles or loads the cache
            times.append((time.perf_counter() - t0) / len(currents) * 1e6)
    return statistics.median(times)


def time_python(mech, steps: int, repeats: int = 5) -> float:
    """Median µs per Plant.step() from Python (the facade's call overhead included)."""
    plant = Plant(mech)
    cmd = np.zeros(len(mech.transmissions))
    times = []
    for _ in range(repeats):
        plant.reset(KNEE_HORIZONTAL)
        t0 = time.perf_counter()
        for _ in range(steps):
            plant.step(cmd)
        times.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(times)


def energy_drift(mech, substeps: int, steps: int = 2000) -> float:
    """Frictionless fall from the knee horizontal, drives off: max |E − E0| / max kinetic."""
    plant = Plant(mech, substeps=substeps, friction=False, hysteresis=False)
    plant.reset(KNEE_HORIZONTAL)
    plant.power(False)
    e0, drift, kinetic = plant.energy(), 0.0, 0.0
    for _ in range(steps):
        plant.step()
        drift = max(drift, abs(plant.energy() - e0))
        kinetic = max(kinetic, plant._e2[0])
    return drift / kinetic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default=str(ROOT / "configs" / "robots" / "exo_leg.yaml"))
    ap.add_argument("--quick", action="store_true", help="timing only, no accuracy table")
    args = ap.parse_args(argv)
    mech = load_mechanism(args.robot)
    steps = 2000
    push = driving(steps)
    zero = np.zeros_like(push)
    rows = [("rotors stuck, zero current", time_njit(mech, zero)),
            ("driven (slip, stick, V limit)", time_njit(mech, push)),
            ("frictionless, coasting", time_njit(mech, zero, friction=False, power=False))]
    print(f"plant step of {mech.name} ({mech.nq} joints, {len(mech.transmissions)} drives): "
          f"1 ms = {SUBSTEPS} RK4 sub-steps, median µs per step")
    print(f"  {'regime':<32} {'µs/step':>8} {'sim s / wall s':>15}")
    for name, us in rows:
        print(f"  {name:<32} {us:8.1f} {1e3 / us:15.1f}")
    us = time_python(mech, steps)
    print(f"  {'from Python (Plant.step), stuck':<32} {us:8.1f} {1e3 / us:15.1f}")
    if args.quick:
        return 0
    print("\naccuracy per sub-step count (1 s of hard driving vs 200 sub-steps; 2 s fall):")
    print(f"  {'sub-steps':>9} {'h (ms)':>7} {'catalogue (deg)':>16} {'frictionless (deg)':>19}"
          f" {'energy drift':>13} {'µs/step':>8}")
    short = push[:1000]
    reference = {f: run(_plant(mech, 200, f), short) for f in (True, False)}
    for n in (2, 3, 5, 7, 10, 20):
        err = {f: np.degrees(np.abs(run(_plant(mech, n, f), short) - reference[f]).max())
               for f in (True, False)}
        print(f"  {n:9d} {1 / n:7.3f} {err[True]:16.2e} {err[False]:19.2e} "
              f"{energy_drift(mech, n):13.2e} {time_njit(mech, push, substeps=n, repeats=3):8.1f}")
    return 0


def _plant(mech, substeps: int, friction: bool) -> Plant:
    plant = Plant(mech, substeps=substeps, friction=friction, hysteresis=friction)
    plant.reset(KNEE_HORIZONTAL)
    return plant


if __name__ == "__main__":
    sys.exit(main())
