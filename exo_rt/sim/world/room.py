"""The room: the exoskeleton and its wearer on the floor, a chair behind them (issue 44's
floor scene; docs/world.md, "The floor scene").

:func:`build_room` compiles a Mechanism — the plant's, with its rotors released — on the
sagittal base (the pelvis free in x, z and pitch) with the floor, a heel and a toe sphere
under each foot, a capsule along each thigh, a chair's seat and the wearer's upper body on
the pelvis. :func:`place` puts the pelvis where a posture's soles touch the floor and the seat
just under the thighs' lowest point.

Legs are found by their joints' names, as the shipped leg module names them: a body on a
joint named ``…hip`` is a thigh, its child on ``…knee`` the shank that carries the foot (the
ankle is fixed in the shipped legs). The soles are the robot file's (:func:`soles`): the ends
of the wearer's foot segment (heel = proximal, toe = distal) in the shank the loader lumped the
foot into, the ankle the foot link's origin; a robot file without a foot segment (a URDF) gets
the leg module's, :data:`SOLE` — the wearer's foot segment 0.07 m below the ankle, 0.42 m
below the knee, from 0.06 m behind the ankle to 0.19 m ahead of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from exo_rt.model.mechanism import Mechanism
from exo_rt.sim.world.build import World, build_world
from exo_rt.sim.world.scene import (
    THIGH_RADIUS,
    floor,
    seat,
    thighs,
    upper_body,
)

# the leg module's sole in the shank's frame (m): heel, toe, ankle (the module docstring), for a
# robot file that declares no foot segment
SOLE = ((-0.06, 0.0, -0.49), (0.19, 0.0, -0.49), (0.0, 0.0, -0.42))
# a one-leg exoskeleton's wearer stands on their other leg too: its hip this far to the other
# side of the pelvis frame (m; a stand-in for the hip joints' 0.2 m spacing), its thigh and
# shank as long as the exoskeleton's leg (the wearer's own, de Leva's masses)
OTHER_HIP = (0.0, -0.20, 0.0)
OTHER_JOINTS = ("wearer_hip", "wearer_knee")
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


def soles(mech: Mechanism) -> dict[str, tuple]:
    """{shank body: (heel, toe, ankle)} (m, in the shank's frame) of ``mech``'s legs: the
    robot file's wearer foot segments — heel the segment's proximal end, toe its distal, ankle
    the foot link's origin, all through the fixed joints the loader lumped the foot along into
    the shank — or, for a leg whose file declares none (a URDF, a robot without a wearer),
    :data:`SOLE`."""
    from exo_rt.errors import Where
    from exo_rt.model import robot_yaml, topology

    shanks = [shank for _, shank in legs(mech).pairs]
    out = {shank: SOLE for shank in shanks}
    path = Path(str(mech.source))
    if path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        return out
    parts = robot_yaml._read_parts(path, [path.resolve()])
    robot_yaml._apply_settings(parts)
    if parts.wearer is None:
        return out
    tree = topology.validate(parts.links, parts.joints, parts.base, Where(str(path)))
    owner, _ = topology.lump(tree, [], False)
    for seg in parts.wearer[0].segments or ():
        if seg.segment != "foot" or seg.body not in owner or isinstance(seg.distal, str):
            continue
        body, r, p = owner[seg.body]
        if body in out:
            out[body] = tuple(tuple(float(x) for x in p + r @ np.asarray(point, float))
                              for point in (seg.proximal, seg.distal, np.zeros(3)))
    return out


def build_room(mech: Mechanism, wearer: tuple[float, float, str], *, seat_height: float,
               timestep: float, ankles: bool = False) -> World:
    """``mech`` on the sagittal base in the room (the module docstring); ``wearer``: (mass kg,
    height m, sex) of the upper body on the pelvis; ``seat_height`` (m; 0: no chair). A
    one-leg exoskeleton gets the wearer's other leg (:func:`other_leg`), its sole the
    exoskeleton leg's. ``ankles``: each foot on a hinge of its own at the ankle
    (:func:`foot`), else fixed to its shank as the robot file has it."""
    found = legs(mech)
    sole = soles(mech)
    extras = [floor(),
              thighs({thigh: ((0.0, 0.0, 0.0), knee)
                      for (thigh, _), knee in zip(found.pairs, found.knees, strict=True)}),
              upper_body(*wearer)]
    for _, shank in found.pairs:
        extras.append(_on_shank(shank, wearer, ankles, sole[shank]))
    if len(found.pairs) == 1:
        extras.append(other_leg(wearer, found.knees[0], ankles, sole[found.pairs[0][1]]))
    if seat_height > 0.0:
        extras.append(seat(seat_height, 0.0))
    return build_world(mech, base="sagittal", timestep=timestep, extras=tuple(extras))


def _segment(wearer, name: str, proximal, distal) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass kg, COM m, inertia kg·m² about it) of the wearer's de Leva ``name`` segment from
    ``proximal`` to ``distal`` (m, a frame whose y is the flexion axis), as the robot file's
    loader straps it (:func:`exo_rt.model.anthropometry.segment_link`)."""
    from exo_rt.model import anthropometry

    mass, height, sex = wearer
    proximal, distal = np.asarray(proximal, float), np.asarray(distal, float)
    seg = anthropometry.segment(name, mass, height, sex, float(np.linalg.norm(distal - proximal)))
    lk = anthropometry.segment_link(seg, name, proximal, distal, np.array([0.0, 1.0, 0.0]))
    return lk.mass, np.asarray(lk.com, float), np.asarray(lk.inertia, float)


def _body_inertia(body) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, COM, inertia tensor about the COM) of an MjsBody with an explicit inertial."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(body.iquat, float))
    rot = rot.reshape(3, 3)
    return float(body.mass), np.array(body.ipos, float), rot @ np.diag(body.inertia) @ rot.T


def foot(shank, name: str, wearer, ankle_joint: bool, sole=SOLE) -> None:
    """The foot under ``shank`` (an MjsBody; ``sole``: its heel, toe and ankle in the shank's
    frame, m — :func:`soles`): a heel and a toe sphere named ``<name>_heel``/``<name>_toe`` —
    on the shank itself (the ankle fixed), or with ``ankle_joint`` on a body ``<name>_foot``
    hinged at the ankle about the shank's y, joint ``<name>_ankle``, carrying the wearer's de
    Leva foot, taken out of the shank where the loader lumped it (the exoskeleton's foot plate
    stays on the shank)."""
    from exo_rt.model.topology import lump_inertia
    from exo_rt.sim.world.scene import CONTACT_RADIUS, FLOOR_BIT, touching
    from exo_rt.sim.world.spec import _inertial

    heel, toe, ankle = (np.asarray(x, float) for x in sole)
    carrier, offset = shank, np.zeros(3)
    if ankle_joint:
        m_f, c_f, i_f = _segment(wearer, "foot", heel, toe)
        _inertial(shank, *lump_inertia(*_body_inertia(shank), -m_f, c_f, -i_f))
        carrier = shank.add_body(name=f"{name}_foot", pos=ankle)
        carrier.add_joint(name=f"{name}_ankle", type=mujoco.mjtJoint.mjJNT_HINGE,
                          axis=[0.0, 1.0, 0.0], limited=mujoco.mjtLimited.mjLIMITED_FALSE)
        _inertial(carrier, m_f, c_f - ankle, i_f)
        offset = ankle
    for tag, point in zip(("heel", "toe"), (heel, toe), strict=True):
        g = carrier.add_geom(name=f"{name}_{tag}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                             size=[CONTACT_RADIUS, 0, 0],
                             pos=np.asarray(point) - offset + (0.0, 0.0, CONTACT_RADIUS))
        touching(g, FLOOR_BIT, 1.0)


def _on_shank(shank: str, wearer, ankle_joint: bool, sole=SOLE):
    """The extra that puts :func:`foot` under the Mechanism's body ``shank``."""

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        foot(bodies[mech.body_names.index(shank)], shank, wearer, ankle_joint, sole)

    return add


def other_leg(wearer: tuple[float, float, str], knee, ankle_joint: bool = False, sole=SOLE):
    """The wearer's own other leg beside a one-leg exoskeleton: a thigh on hinge
    ``wearer_hip`` at :data:`OTHER_HIP` and a shank with the foot on ``wearer_knee`` (axes and
    lengths as the exoskeleton leg's: its knee at ``knee`` m in the thigh's frame, its heel,
    toe and ankle at ``sole``), de Leva 1996's thigh, shank and foot
    (:mod:`exo_rt.model.anthropometry`), its :func:`foot` and a thigh capsule as the
    exoskeleton leg has. Its joints are the wearer's: the plant moves them by the wearer's own
    torques (:func:`exo_rt.sim.world_plant._other_leg_target`)."""
    from exo_rt.model.topology import lump_inertia
    from exo_rt.sim.world.scene import SEAT_BIT, touching
    from exo_rt.sim.world.spec import _inertial

    knee = np.asarray(knee, dtype=float)
    heel, toe, ankle = (np.asarray(x, float) for x in sole)

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        thigh = bodies[0].add_body(name="wearer_thigh", pos=OTHER_HIP)
        thigh.add_joint(name=OTHER_JOINTS[0], type=mujoco.mjtJoint.mjJNT_HINGE,
                        axis=[0.0, -1.0, 0.0], limited=mujoco.mjtLimited.mjLIMITED_FALSE)
        _inertial(thigh, *_segment(wearer, "thigh", np.zeros(3), knee))
        g = thigh.add_geom(name="wearer_thigh_seat", type=mujoco.mjtGeom.mjGEOM_CAPSULE,
                           fromto=np.concatenate([np.zeros(3), knee]), size=[THIGH_RADIUS, 0, 0])
        touching(g, SEAT_BIT, 1.0)
        shank = thigh.add_body(name="wearer_shank", pos=knee)
        shank.add_joint(name=OTHER_JOINTS[1], type=mujoco.mjtJoint.mjJNT_HINGE,
                        axis=[0.0, 1.0, 0.0], limited=mujoco.mjtLimited.mjLIMITED_FALSE)
        _inertial(shank, *lump_inertia(*_segment(wearer, "shank", np.zeros(3), ankle),
                                       *_segment(wearer, "foot", heel, toe)))
        foot(shank, "wearer_shank", wearer, ankle_joint, sole)

    return add


def _ankle_ids(world: World) -> list[int]:
    m = world.model
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or "" for j in range(m.njnt)]
    return [j for j, n in enumerate(names) if n.endswith("_ankle")]


def ankle_joints(world: World) -> tuple[np.ndarray, np.ndarray]:
    """(qpos, dof) addresses of the world's ankle hinges (``…_ankle``; empty when the ankles
    are fixed), in the order of the model's joints."""
    m, ids = world.model, _ankle_ids(world)
    return (np.array([m.jnt_qposadr[j] for j in ids], np.int64),
            np.array([m.jnt_dofadr[j] for j in ids], np.int64))


def level_feet(world: World, data) -> np.ndarray:
    """Turn each ankle hinge in ``data`` so that its foot lies as it does under an upright
    shank (its sole level, the foot square to the floor whatever the shank's tilt: a foot set
    down flat), and update ``data``'s kinematics; the hinges' angles (rad, in
    :func:`ankle_joints`' order; empty with the ankles fixed). A hinge turns its foot about the
    shank's y, so the angle is minus the shank's pitch; a shank within 1e-12 rad of upright
    leaves it at 0."""
    m = world.model
    mujoco.mj_kinematics(m, data)
    angles = []
    for j in _ankle_ids(world):
        r = data.xmat[m.body_parentid[m.jnt_bodyid[j]]]  # the shank's orientation, row-major
        pitch = float(np.arctan2(r[2], r[8]))
        angles.append(0.0 if abs(pitch) < 1e-12 else -pitch)
        data.qpos[m.jnt_qposadr[j]] = angles[-1]
    if angles:
        mujoco.mj_kinematics(m, data)
    return np.array(angles)


def other_leg_joints(world: World) -> tuple[np.ndarray, np.ndarray]:
    """(qpos, dof) addresses of the wearer's other leg's hip and knee in the world (empty
    where the exoskeleton has both legs)."""
    m = world.model
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    if OTHER_JOINTS[0] not in names:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.array([m.joint(n).qposadr[0] for n in OTHER_JOINTS], np.int64),
            np.array([m.joint(n).dofadr[0] for n in OTHER_JOINTS], np.int64))


def mirrored(world: World) -> np.ndarray:
    """The Mechanism's coordinates (hip, knee) of its first leg: what the wearer's other leg
    copies at the start."""
    mech = world.mechanism
    thigh, shank = legs(mech).pairs[0]
    return np.array([int(mech.q_index[mech.body_names.index(thigh)]),
                     int(mech.q_index[mech.body_names.index(shank)])], np.int64)


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


def place(world: World, q, seat_height: float
          ) -> tuple[np.ndarray, float, float, float, np.ndarray]:
    """(base (x, z, pitch), seat top z m, seat front x m, the soles' middle x m, the ankle
    hinges' angles rad) for the Mechanism's posture ``q``:
    the pelvis upright at x = 0 (the trunk vertical: with the ankle fixed, a foot is flat where
    hip = knee; on ankle hinges each foot set down flat, :func:`level_feet`), as high as puts
    the lowest sole point on the floor; the chair's front edge :data:`SEAT_GAP` behind the
    foremost knee, its top at ``seat_height`` or, where the thighs are lower, just under them
    (a chair is never pushed into the wearer)."""
    data = world.new_data()
    q = np.asarray(q, float)
    other, _ = other_leg_joints(world)

    def pose(base: np.ndarray) -> np.ndarray:  # the posture over ``base``, feet set down
        world.set_state(data, q, np.zeros(len(q)), base, np.zeros(3))
        if len(other):
            data.qpos[other] = q[mirrored(world)]
        return level_feet(world, data)  # (the kinematics updated)

    base = np.zeros(3)
    pose(base)
    soles = np.concatenate([_geom_points(world, data, "_heel"), _geom_points(world, data, "_toe")])
    base[1] = -float(soles[:, 2].min())  # the pelvis raised to put the lowest on the floor
    ankles = pose(base)
    heels, toes = _geom_points(world, data, "_heel"), _geom_points(world, data, "_toe")
    pts = _geom_points(world, data, "_seat")
    knees = [data.xpos[world.bodies[world.mechanism.body_names.index(s)]][0]
             for _, s in legs(world.mechanism).pairs]
    front = float(max(knees)) - SEAT_GAP - THIGH_RADIUS
    over = pts[pts[:, 0] <= front] if len(pts) else pts
    top = seat_height
    if len(over):
        top = min(seat_height, float(over[:, 2].min()))
    feet = 0.5 * float(np.mean(heels[:, 0]) + np.mean(toes[:, 0]))
    return base, max(top, 0.0), front, feet, ankles



def move_seat(world: World, top: float, front: float, data=None) -> None:
    """Put the compiled chair's seat (body and geom ``seat``) with its top at ``top`` and its
    front edge at ``front`` (m): its box keeps its size and reaches below the floor if
    lowered. In the model (every new data starts there) and in ``data`` if given."""
    m = world.model
    g, b = m.geom("seat").id, m.body("seat").id
    depth, height = m.geom_size[g, 0], m.geom_size[g, 2]
    m.body_pos[b] = (front - depth, 0.0, top - height)
    if data is not None:
        data.mocap_pos[m.body_mocapid[b]] = m.body_pos[b]


def settle(world: World, q, base, *, joints, rotors, k, stabiliser=(0.0, 0.0),
           support: float = 0.0, ankle=(0.0, 0.0, 0.0), seconds: float = 0.3
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base (x, z, pitch), joint torques N·m) of the wearer at rest in the posture ``q`` (the
    released mechanism's coordinates, rad): MuJoCo steps the world ``seconds`` with each joint
    ``joints[t]`` held by a stiff PD at q (its rotor ``rotors[t]`` turned with it, k·q) and
    the pelvis free from ``base``, under the stabiliser (stiffness N·m/rad, damping N·m·s/rad
    towards the trunk upright, pitch 0) and the ``support`` force (N, up), until the floor and
    the chair carry the weight; the PD's torques are then what each joint must hold — what
    the plant's flexsplines are pre-twisted to carry. The contacts share a statically
    indeterminate load as the soft contacts settle it. Ankle hinges (:func:`foot`) are sprung
    by ``ankle`` (stiffness N·m/rad, damping N·m·s/rad, rest angle rad): their settled angles
    come third."""
    m = world.model
    d = mujoco.MjData(m)
    q = np.asarray(q, dtype=float)
    oq, od = other_leg_joints(world)  # a one-leg exoskeleton's wearer's other leg: held too
    target = np.concatenate([q[joints], q[mirrored(world)] if len(oq) else np.zeros(0)])
    jq = np.concatenate([world.qpos[joints], oq])
    jd = np.concatenate([world.dof[joints], od])
    rq, rd = world.qpos[rotors], world.dof[rotors]
    bq, bd = world.base_qpos, world.base_dof
    d.qpos[world.qpos] = q
    d.qpos[oq] = target[len(joints):]
    d.qpos[bq] = base
    level_feet(world, d)  # the feet set down flat, as :func:`place` put them
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    inertia = np.diag(full)[jd]
    kp = 1e5 * np.ones(len(jd))  # N·m/rad: 1 mrad per 100 N·m
    kd = 2.0 * np.sqrt(kp * inertia)  # critically damped
    n = len(joints)
    aq, ad = ankle_joints(world)
    for _ in range(int(round(seconds / m.opt.timestep))):
        d.qfrc_applied[:] = 0.0
        d.qfrc_applied[jd] = kp * (target - d.qpos[jq]) - kd * d.qvel[jd]
        d.qfrc_applied[ad] = -ankle[0] * (d.qpos[aq] - ankle[2]) - ankle[1] * d.qvel[ad]
        d.qfrc_applied[bd[1]] = support
        d.qfrc_applied[bd[2]] = (-stabiliser[0] * d.qpos[bq[2]]
                                 - stabiliser[1] * d.qvel[bd[2]])
        mujoco.mj_step(m, d)
        d.qpos[rq] = np.asarray(k) * d.qpos[jq[:n]]
        d.qvel[rd] = np.asarray(k) * d.qvel[jd[:n]]
    tau = kp * (target - d.qpos[jq]) - kd * d.qvel[jd]
    return np.array(d.qpos[bq]), tau[:n], np.array(d.qpos[aq])
