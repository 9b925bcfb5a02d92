#!/usr/bin/env python3
"""What the world's truth costs the simulation (docs/world.md, "What a world run records"):
``exo_2leg`` and its wearer standing on the floor (the world plant held by a joint PD on the
drives' currents), µs per physics period of the plant's step and of
:meth:`exo_rt.sim.world_truth.WorldTruth.update` (the pelvis, both feet's reactions and
centres of pressure — their contacts' loop compiled —, the seat, the links' angles, on the
simulated side), each the median of ``--rounds`` rounds of ``--periods`` periods, taken in
turns.

``python tools/bench_world_truth.py [--periods N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from exo_rt.model import load_mechanism
from exo_rt.sim.world.standing import drives_pd
from exo_rt.sim.world_plant import Room, WorldPlant
from exo_rt.sim.world_truth import WorldTruth

ROOT = Path(__file__).resolve().parents[1]
STANDING = np.array([0.0, 0.05, 0.0, 0.05])  # rad: the activities' standing posture


class _Clock:
    realtime, t = False, 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--periods", type=int, default=500, help="periods a round [500]")
    ap.add_argument("--rounds", type=int, default=5, help="rounds [5]")
    args = ap.parse_args(argv)
    plant = WorldPlant(load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml"),
                       room=Room(scene="floor", wearer_damping=1.0))
    plant.reset(STANDING)
    truth = WorldTruth(plant)
    for _ in range(200):  # settled on the floor; the kernels compiled
        plant.step(drives_pd(plant, STANDING))
    step, update = [], []
    for _ in range(args.rounds):
        cmds = [drives_pd(plant, STANDING) for _ in range(args.periods)]
        t0 = time.perf_counter()
        for c in cmds:
            plant.step(c)
        step.append((time.perf_counter() - t0) / args.periods * 1e6)
        t0 = time.perf_counter()
        for _ in range(args.periods):
            truth.update(_Clock)
        update.append((time.perf_counter() - t0) / args.periods * 1e6)
    s, u = statistics.median(step), statistics.median(update)
    print(f"plant period {s:.0f} µs, truth update {u:.0f} µs ({u / s:.0%} of the period); "
          f"{int(plant.mj_data.ncon)} contacts, feet {truth.soles()} N")


if __name__ == "__main__":
    main()
