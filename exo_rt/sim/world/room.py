"""The room: the exoskeleton and its wearer on the floor, a chair behind them (issue 44's
floor scene; docs/world.md, "The floor scene").

:func:`build_room` compiles a Mechanism — the plant's, with its rotors released — on the
sagittal base (the pelvis free in x, z and pitch) with the floor, a heel and a toe sphere
under each foot, a capsule along each thigh, a chair's seat and the wearer's upper body on
the pelvis. :func:`place` puts the pelvis where a posture's soles touch the floor and the seat
just under the thighs' lowest point.

Legs are found by their joints' names, as the shipped leg module names them: a body on a
joint named ``…hip`` is a thigh, its child on ``…knee`` the shank that carries the foot (the
ankle is fixed in the shipped legs). The soles are the leg module's (:data:`SOLE`): the
wearer's foot segment 0.07 m below the ankle, 0.42 m below the knee, from 0.06 m behind the
ankle to 0.19 m ahead of it (configs/robots/exo_2leg.yaml's ``wearer.segments``).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from exo_rt.model.mechanism import Mechanism
from exo_rt.sim.world.build import World, build_world
from exo_rt.sim.world.scene import (
    THIGH_RADIUS,
    feet,
    floor,
    seat,
    thighs,
    upper_body,
)

# the leg module's sole in the shank's frame (m): heel, toe (the module docstring)
SOLE = ((-0.06, 0.0, -0.49), (0.19, 0.0, -0.49))
SEAT_GAP = 0.08  # m: the seat's front edge this far behind the knee axis at the start


@dataclass(frozen=True)
class Legs:
    """The Mechanism's legs: (thigh body, shank body) names, and each thigh's knee point (m)."""

    pairs: tuple[tuple[str, str], ...]
    knees: tuple[tuple[float, float, float], ...]


def legs(mech: Mechanism) -> Legs:
    """The thighs (bodies on a ``…hip`` joint) and their shanks (``…knee``); ValueError if
    the Mechanism has none."""
    pairs, knees = [], []
    for b, joint in enumerate(mech.tree_joint_names):
        if not joint.endswith("hip"):
            continue
        for c in range(len(mech.body_names)):
            if int(mech.parent[c]) == b and mech.tree_joint_names[c].endswith("knee"):
                pairs.append((mech.body_names[b], mech.body_names[c]))
                knees.append(tuple(float(x) for x in mech.origin_xyz[c]))
    if not pairs:
        raise ValueError(f"'{mech.name}' has no leg the world knows (a body on a joint named "
                         "…hip carrying one on …knee): the floor scene needs its feet")
    return Legs(tuple(pairs), tuple(knees))


def build_room(mech: Mechanism, wearer: tuple[float, float, str], *, seat_height: float,
               timestep: float) -> World:
    """``mech`` on the sagittal base in the room (the module docstring); ``wearer``: (mass kg,
    height m, sex) of the upper body on the pelvis; ``seat_height`` (m; 0: no chair)."""
    found = legs(mech)
    extras = [floor(), feet({shank: SOLE for _, shank in found.pairs}),
              thighs({thigh: ((0.0, 0.0, 0.0), knee)
                      for (thigh, _), knee in zip(found.pairs, found.knees, strict=True)}),
              upper_body(*wearer)]
    if seat_height > 0.0:
        extras.append(seat(seat_height, 0.0))
    return build_world(mech, base="sagittal", timestep=timestep, extras=tuple(extras))


def _geom_points(world: World, data: mujoco.MjData, suffix: str) -> np.ndarray:
    """World positions of the lowest points of the geoms whose names end with ``suffix``."""
    m = world.model
    out = []
    for g in range(m.ngeom):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        if not name.endswith(suffix):
            continue
        r = m.geom_size[g, 0]
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE:
            half = m.geom_size[g, 1]
            axis = data.geom_xmat[g].reshape(3, 3)[:, 2]
            for s in (-half, half):
                out.append(data.geom_xpos[g] + s * axis - (0.0, 0.0, r))
        else:
            out.append(data.geom_xpos[g] - (0.0, 0.0, r))
    return np.array(out)


def place(world: World, q, seat_height: float) -> tuple[np.ndarray, float, float]:
    """(base (x, z, pitch), seat top z m, seat front x m) for the Mechanism's posture ``q``:
    the pelvis upright at x = 0 (the trunk vertical: with the ankle fixed, a foot is flat where
    hip = knee), as high as puts the lowest sole point on the floor; the chair's front
    edge :data:`SEAT_GAP` behind the foremost knee, its top at ``seat_height`` or, where the
    thighs are lower, just under them (a chair is never pushed into the wearer)."""
    data = world.new_data()
    base = np.zeros(3)
    world.set_state(data, np.asarray(q, float), np.zeros(len(q)), base, np.zeros(3))
    mujoco.mj_kinematics(world.model, data)
    heels, toes = _geom_points(world, data, "_heel"), _geom_points(world, data, "_toe")
    base[1] = -float(min(heels[:, 2].min(), toes[:, 2].min()))
    world.set_state(data, np.asarray(q, float), np.zeros(len(q)), base, np.zeros(3))
    mujoco.mj_kinematics(world.model, data)
    pts = _geom_points(world, data, "_seat")
    knees = [data.xpos[world.bodies[world.mechanism.body_names.index(s)]][0]
             for _, s in legs(world.mechanism).pairs]
    front = float(max(knees)) - SEAT_GAP - THIGH_RADIUS
    over = pts[pts[:, 0] <= front] if len(pts) else pts
    top = seat_height
    if len(over):
        top = min(seat_height, float(over[:, 2].min()))
    return base, max(top, 0.0), front



def move_seat(world: World, top: float, front: float) -> None:
    """Put the compiled chair's seat (geom ``seat``) with its top at ``top`` and its front
    edge at ``front`` (m): its box keeps its size and reaches below the floor if lowered."""
    m = world.model
    g = m.geom("seat").id
    depth, height = m.geom_size[g, 0], m.geom_size[g, 2]
    m.geom_pos[g] = (front - depth, 0.0, top - height)


def settle(world: World, q, base, *, joints, rotors, k, stabiliser=(0.0, 0.0),
           support: float = 0.0, seconds: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """(base (x, z, pitch), joint torques N·m) of the wearer at rest in the posture ``q`` (the
    released mechanism's coordinates, rad): MuJoCo steps the world ``seconds`` with each joint
    ``joints[t]`` held by a stiff PD at q (its rotor ``rotors[t]`` turned with it, k·q) and
    the pelvis free from ``base``, under the stabiliser (stiffness N·m/rad, damping N·m·s/rad
    towards the trunk upright, pitch 0) and the ``support`` force (N, up), until the floor and
    the chair carry the weight; the PD's torques are then what each joint must hold — what
    the plant's flexsplines are pre-twisted to carry. The contacts share a statically
    indeterminate load as the soft contacts settle it."""
    m = world.model
    d = mujoco.MjData(m)
    q = np.asarray(q, dtype=float)
    jq, jd = world.qpos[joints], world.dof[joints]
    rq, rd = world.qpos[rotors], world.dof[rotors]
    bq, bd = world.base_qpos, world.base_dof
    d.qpos[world.qpos] = q
    d.qpos[bq] = base
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    inertia = np.diag(full)[jd]
    kp = 1e5 * np.ones(len(joints))  # N·m/rad: 1 mrad per 100 N·m
    kd = 2.0 * np.sqrt(kp * inertia)  # critically damped
    for _ in range(int(round(seconds / m.opt.timestep))):
        d.qfrc_applied[:] = 0.0
        d.qfrc_applied[jd] = kp * (q[joints] - d.qpos[jq]) - kd * d.qvel[jd]
        d.qfrc_applied[bd[1]] = support
        d.qfrc_applied[bd[2]] = (-stabiliser[0] * d.qpos[bq[2]]
                                 - stabiliser[1] * d.qvel[bd[2]])
        mujoco.mj_step(m, d)
        d.qpos[rq] = np.asarray(k) * d.qpos[jq]
        d.qvel[rd] = np.asarray(k) * d.qvel[jd]
    tau = kp * (q[joints] - d.qpos[jq]) - kd * d.qvel[jd]
    return np.array(d.qpos[bq]), tau
