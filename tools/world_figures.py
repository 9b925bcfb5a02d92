#!/usr/bin/env python3
"""The figures of docs/world.md: ``python tools/world_figures.py [--states N]``.

1. The model is built right: the largest relative error of MuJoCo's mass matrix and bias
   forces against exo-rt's dynamics over N random states (default 100) per case — the shipped
   exoskeletons with their wearer and rotors (base fixed and sagittal), 10 random trees, 10
   random trees with harmonic-drive rotors — and what armature alone would leave.
2. Standing: ``exo_2leg`` with its wearer on the floor, joints held by the PD stand-in, at
   1 ms and 0.5 ms, straight and flexed (hip = knee = 0.1 rad).
3. ``--floor``: the world plant's floor scene through exo-rt's drives (tests/test_world_floor.py):
   standing 60 s with and without 30 % body-weight support, seated on the chair, the drives
   switched off in stance, and the plant's period against the test stand's.

The cases are those of tests/test_world_model.py and tests/test_world_standing.py, from the
same helpers (exo_rt/sim/world/check.py, standing.py); the plain random trees here are
check.py's generator without rotors (the test draws its ten from tests/treegen.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism
from exo_rt.sim.world import build_world
from exo_rt.sim.world.check import (
    mujoco_terms,
    random_tree_with_rotors,
    rel_error,
    sagittal_mechanism,
    worst_errors,
)
from exo_rt.sim.world.standing import EXO_2LEG_FEET, stand, standing_world

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = ("configs/robots/exo_leg.yaml", "configs/robots/exo_2leg.yaml")


def sagittal_errors(path: str, states: int) -> tuple[float, float]:
    mech = load_mechanism(ROOT / path)
    base_pos = np.array([0.1, 0.0, 0.95])
    world = build_world(mech, base="sagittal", base_pos=base_pos)
    ref = sagittal_mechanism(mech, base_pos)
    dyn, data, rng = Dynamics(ref), world.new_data(), np.random.default_rng(45)
    wm = wh = 0.0
    for _ in range(states):
        z, zd = rng.uniform(-2.0, 2.0, ref.nq), rng.normal(0.0, 2.0, ref.nq)
        m, h = mujoco_terms(world, data, z[3:], zd[3:], z[:3], zd[:3])
        wm = max(wm, rel_error(m, dyn.mass_matrix(z)))
        wh = max(wh, rel_error(h, dyn.bias_forces(z, zd)))
    return wm, wh


def armature_only_error(path: str) -> float:
    """max |M_mujoco − M_exo-rt| over the rotors' cross entries had only N²·I_a been used:
    the dropped coupling k·I_a (kg·m²)."""
    mech = load_mechanism(ROOT / path)
    world = build_world(mech)
    return max(abs(r.multiplier * r.axial) for r in world.rigid.rotors if r.carrier != 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", type=int, default=100)
    ap.add_argument("--floor", action="store_true",
                    help="only the floor scene's figures (through the drives; about a minute)")
    args = ap.parse_args(argv)
    if args.floor:
        return floor_figures()
    n = args.states
    print(f"## The model against exo-rt's dynamics ({n} random states per case; worst "
          "relative error)\n")
    print("| case | M | h |\n|---|---|---|")
    for path in ROBOTS:
        mech = load_mechanism(ROOT / path)
        wm, wh = worst_errors(mech, build_world(mech), np.random.default_rng(44), n)
        print(f"| {Path(path).stem}, base fixed | {wm:.1e} | {wh:.1e} |")
        wm, wh = sagittal_errors(path, n)
        print(f"| {Path(path).stem}, sagittal base | {wm:.1e} | {wh:.1e} |")
    for label, rotors in (("random tree", False), ("random tree with rotors", True)):
        errs = []
        for seed in range(10):
            rng = np.random.default_rng(2000 + seed)
            mech = random_tree_with_rotors(rng, int(rng.integers(3, 13)), rotors)
            errs.append(worst_errors(mech, build_world(mech), np.random.default_rng(seed), n))
        errs = np.array(errs)
        print(f"| 10 × {label} (worst) | {errs[:, 0].max():.1e} | {errs[:, 1].max():.1e} |")
    print(f"\nArmature alone (N²·I_a): the knee rotor's coupling to the hip, "
          f"{armature_only_error(ROBOTS[0]):.3e} kg·m², is missing from M.\n")
    print("## Standing (exo_2leg, 75 kg wearer, 1 s settling, then 5 s)\n")
    print("| step | posture | total mass | reaction mean | worst reaction error | slip | "
          "pelvis drift | wall time |\n|---|---|---|---|---|---|---|---|")
    mech = load_mechanism(ROOT / "configs/robots/exo_2leg.yaml")
    for dt in (1e-3, 5e-4):
        world = standing_world(mech, EXO_2LEG_FEET, timestep=dt)
        for label, post in (("straight", (0.0, 0.0)), ("flexed 0.1 rad", (0.1, 0.1))):
            t0 = time.perf_counter()
            f = stand(world, np.tile(post, 2))
            wall = time.perf_counter() - t0
            print(f"| {dt * 1e3:g} ms | {label} | {f.total_mass:.2f} kg | "
                  f"{f.reaction_mean:.1f} N | {f.reaction_worst * 100:.3f} % | "
                  f"{f.slip * 1e3:.3f} mm | {f.pelvis_drift * 1e3:.2f} mm | {wall:.2f} s |")
    return 0


def floor_figures() -> int:
    """The floor scene's figures (docs/world.md, "The floor scene")."""
    from exo_rt.sim.plant import HarmonicDrivePlant
    from exo_rt.sim.world.standing import drives_off, drives_pd, stand_on_drives
    from exo_rt.sim.world_plant import Room, WorldPlant

    mech = load_mechanism(ROOT / "configs/robots/exo_2leg.yaml")
    standing, sitting = np.array([0.05] * 4), np.array([1.55] * 4)
    print("## Standing on the drives (exo_2leg, 75 kg wearer; 1 s settling, then 60 s)\n")
    print("| support | reaction mean | / weight | worst error | slip | pelvis drift |\n"
          "|---|---|---|---|---|---|")
    for support in (0.0, 0.3):
        plant = WorldPlant(mech, room=Room(scene="floor", wearer_damping=1.0, support=support))
        plant.reset(standing)
        f = stand_on_drives(plant, standing, seconds=60.0)
        w = plant.total_mass * 9.81
        print(f"| {support:.0%} | {f.reaction_mean:.2f} N | {f.reaction_mean / w:.5f} | "
              f"{f.reaction_worst:.1e} | "
              f"{f.slip * 1e3:.2f} mm | {f.pelvis_drift * 1e3:.2f} mm |")
    plant = WorldPlant(mech, room=Room(scene="floor", wearer_damping=1.0))
    plant.reset(sitting)
    for _ in range(2000):
        plant.step(drives_pd(plant, sitting))
    seat = sum(f[2] for g, f in plant.contact_forces().items() if g.endswith("_seat"))
    print(f"\nSeated (hip = knee = 1.55 rad), chair top {plant.seat[0]:.3f} m: the chair "
          f"carries {seat:.0f} N of {plant.total_mass * 9.81:.0f} N; currents "
          f"{np.round(plant.currents, 2)} A (hips' rating 3.29 A)\n")
    print("| drives off in stance at (hip, knee) | pelvis drop in 2 s | knee change |\n"
          "|---|---|---|")
    for post in ((0.05, 0.05), (0.4, 0.4)):
        q = np.array(post * 2)
        plant = WorldPlant(mech, room=Room(scene="floor", wearer_damping=1.0))
        plant.reset(q)
        drop, dq = drives_off(plant, q)
        print(f"| {post} rad | {drop * 1e3:.2f} mm | {np.degrees(dq[[1, 3]]).round(2)}° |")
    print("\n| plant period (exo_2leg, 10 sub-steps, best of 5 × 1000) | µs |\n|---|---|")
    for label, make in (("harmonic_drive", lambda: HarmonicDrivePlant(mech)),
                        ("world, test stand", lambda: WorldPlant(mech)),
                        ("world, floor", lambda: WorldPlant(mech, room=Room(
                            scene="floor", wearer_damping=1.0)))):
        plant = make()
        plant.reset(standing)
        cmd = drives_pd(plant, standing)
        for _ in range(200):
            plant.step(cmd)
        best = np.inf
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(1000):
                plant.step(cmd)
            best = min(best, (time.perf_counter() - t0) * 1e3)
        print(f"| {label} | {best:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
