"""How far a seated wearer's weight is behind their feet, and how much a trunk lean brings it
forward: docs/world.md, "Sit-to-stand: how much support".

To rise from a chair a person brings the whole body's centre of mass over their feet: they
draw the feet back and lean the trunk forward (Yoshioka et al. 2007). In the world the
exoskeleton's ankle holds each foot square to its shank (or on the orthosis's sprung hinge),
and the trunk is the pelvis's pitch. For each seated posture (hip, knee rad, flexion > 0) and
trunk lean (rad, forward > 0: the pelvis pitched, the hips' angle to the thighs unchanged
added to it — so a lean λ with the thighs level needs hip = knee + λ at the joints) the tool
places the exoskeleton and its wearer on the floor as a run does (:func:`exo_rt.sim.world.room.
place`: the soles down, each foot on its hinge set flat) and prints the centre of mass of
everything that moves (exoskeleton, wearer, rotors) against the middle of the soles, m
(negative: behind them), and the hip angle the lean asks of the exoskeleton against its range.

``python tools/seated_balance.py [--config FILE] [--sitting HIP KNEE ...] [--lean RAD ...]``
(default ``configs/exo_2leg_world.yaml``; seated at 1.55 1.55 — the shipped sitting, the
shanks upright — and 1.60 1.90 — the feet drawn back —; leans 0 … 0.8).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def leg_joints(world) -> np.ndarray:
    """The Mechanism's (hip, knee) coordinates, a row per leg."""
    from exo_rt.sim.world.room import legs

    mech = world.mechanism
    return np.array([[int(mech.q_index[mech.body_names.index(b)]) for b in pair]
                     for pair in legs(mech).pairs], np.int64)


def com_behind_feet(world, q: np.ndarray, lean: float) -> float:
    """The centre of mass's x less the soles' middle x (m) for the Mechanism's posture ``q``
    with the trunk leaning ``lean`` (rad) about the hips' axis (the pelvis frame's origin), the
    legs where the upright posture put them: the pelvis pitched by it, the hips flexed by it."""
    import mujoco

    from exo_rt.sim.world.room import level_feet, place

    base, _top, _front, feet, _ankles = place(world, q, 0.0)
    q = np.array(q, float)
    q[leg_joints(world)[:, 0]] += lean
    d = world.new_data()
    world.set_state(d, q, np.zeros(len(q)), np.array([base[0], base[1], lean]), np.zeros(3))
    level_feet(world, d)  # (each foot flat on its hinge, as placed; the kinematics updated)
    mujoco.mj_comPos(world.model, d)
    m = world.model
    com = (m.body_mass[:, None] * d.xipos).sum(axis=0) / m.body_mass.sum()
    return float(com[0] - feet)


def main(argv: list[str] | None = None) -> int:
    from exo_rt.runtime.config import load_top
    from exo_rt.sim import plants

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "exo_2leg_world.yaml",
                   help="a top config whose simulation is the world on the floor")
    p.add_argument("--sitting", type=float, nargs=2, action="append", metavar=("HIP", "KNEE"),
                   help="a seated posture (rad; repeat for more; default 1.55 1.55, the "
                        "shipped sitting, and 1.60 1.90, the feet drawn back)")
    p.add_argument("--lean", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.53, 0.8],
                   help="trunk leans (rad)")
    args = p.parse_args(argv)
    top = load_top(args.config)
    plant = plants.create(top.simulation.plant, top.robot, dt=1.0 / top.rate_hz,
                          room=top.simulation.plant_options())
    world = plant.world
    mech = world.mechanism  # (released: the rotors are coordinates too)
    joints = leg_joints(world)
    seated = args.sitting or [(1.55, 1.55), (1.60, 1.90)]
    hip_max = float(mech.upper[joints[0, 0]])
    print(f"{args.config.name}: {world.model.body_mass.sum():.1f} kg in all; the centre of "
          f"mass against the soles' middle, m (< 0: behind them); the hips' range to "
          f"{hip_max:.2f} rad")
    print(f"{'seated (hip, knee)':>20} " + " ".join(f"lean {x:4.2f}" for x in args.lean))
    for h, k in seated:
        q = np.zeros(mech.nq)
        q[joints[:, 0]], q[joints[:, 1]] = h, k
        cells = []
        for lean in args.lean:
            x = com_behind_feet(world, q, lean)
            cells.append(f"{x:+9.3f}" + ("*" if h + lean > hip_max else " "))
        print(f"{f'({h:.2f}, {k:.2f})':>20} " + " ".join(cells))
    print("* the lean flexes the hips beyond their range")
    return 0


if __name__ == "__main__":
    sys.exit(main())
