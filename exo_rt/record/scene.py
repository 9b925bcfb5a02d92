"""The 3D scene of a run: the robot's URDF, its links' transforms and the scene's entities.

Made in the recording process from the cycle's rows (:mod:`exo_rt.record.writer`), for
run.mcap and live telemetry alike — the control process does nothing for it. Three channels,
JSON with Foxglove's schema names, so Foxglove's 3D panel draws them:

============================ ==================================================================
topic                        what
============================ ==================================================================
``/robot_description``       ``std_msgs/msg/String``: the URDF (:meth:`RobotScene.urdf`),
                             generated from the Mechanism with primitive geometry — a cylinder
                             per exoskeleton link, a drive housing per joint, the wearer's
                             segments as wider translucent cylinders and the feet as boxes; at
                             the start and every :data:`STATIC_S` s (a viewer that seeks finds
                             it)
``/tf``                      ``foxglove.FrameTransforms``: ``world`` → base (the pelvis), each
                             drawn body from its parent (its joint's origin and rotation) and
                             each foot's frame from its body; every cycle in run.mcap, every
                             5th live
``/scene``                   ``foxglove.SceneUpdate``: the floor and the seat (static, every
                             :data:`STATIC_S` s); the centre of mass and — when the run records
                             ground reactions — each foot's contact point and reaction arrow,
                             :data:`ARROW_N_PER_M` N per metre of arrow (every
                             :data:`SCENE_EVERY_S` s)
============================ ==================================================================

What the scene reads besides the joints' ``q``, when a run records it (a world run; a
run on the test stand has none of it, and its pelvis hangs at :attr:`RobotScene.base_height`
above the floor, where the soles touch it at q = 0):

- column ``base`` (3): the pelvis's pose in the world, x (m, forward), z (m, up) and pitch
  (rad, about y) — the sagittal base of docs/world.md;
- column ``foot_force`` (3 per foot): the floor's force on each foot, world frame (N);
- column ``foot_point`` (3 per foot): where it acts (m, world; else the sole's middle);
- metadata ``feet``: the feet's names in those columns' order (else the scene's own order,
  :attr:`RobotScene.feet`); metadata ``seat``: ``{"center": [x, y, z], "size": [sx, sy, sz]}``
  (m, world), a box drawn as the seat.

The rotors (bodies on a transmission's mimic joint) are not drawn: they turn inside the drive
housings. The URDF is for display and kinematics: it carries no inertia.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.model.mechanism import JOINT_PRISMATIC, JOINT_REVOLUTE, Mechanism

ARROW_N_PER_M = 1000.0  # N of ground reaction per metre of arrow (a 95 kg wearer: 0.94 m)
SCENE_EVERY_S = 0.01  # s of run time between the scene's dynamic entities in run.mcap
LIVE_SCENE_EVERY_S = 0.02  # … and live (50 Hz)
STATIC_S = 1.0  # s of run time between repeats of the URDF and the static entities
LOADED_N = 1.0  # N: a foot with less reaction than this shows no contact point or arrow
WORLD = "world"

# colours (r, g, b, a)
STEEL = (0.62, 0.66, 0.72, 1.0)
DRIVE = (0.20, 0.24, 0.30, 1.0)
SKIN = (0.93, 0.75, 0.62, 0.45)
FLOOR = (0.55, 0.58, 0.55, 1.0)
SEAT = (0.55, 0.40, 0.25, 1.0)
COM = (0.90, 0.10, 0.10, 1.0)
CONTACT = (0.10, 0.30, 0.90, 1.0)
ARROW = (0.10, 0.65, 0.20, 1.0)

WEARER_RADIUS = {"thigh": 0.075, "shank": 0.05}  # m: drawn radii of the wearer's segments
LINK_RADIUS = 0.02  # m: an exoskeleton link's tube
DRIVE_RADIUS, DRIVE_LENGTH = 0.045, 0.05  # m: a joint's drive housing


# ----------------------------------------------------------------------------- the model
@dataclass
class Foot:
    """A foot: its frame (a link the Mechanism lumped into ``body``, or the body itself), and
    its sole's heel and toe points in the body's frame (m)."""

    name: str
    body: int
    rotation: np.ndarray  # the foot frame in the body frame
    offset: np.ndarray
    heel: np.ndarray
    toe: np.ndarray


@dataclass
class Shape:
    """A visual of a body: ``kind`` cylinder (``a`` → ``b``, ``radius``), box (``centre``,
    ``size``) or sphere; points in the body's frame (m)."""

    kind: str
    a: np.ndarray
    b: np.ndarray = field(default_factory=lambda: np.zeros(3))
    radius: float = 0.0
    size: tuple = (0.0, 0.0, 0.0)
    color: tuple = STEEL
    name: str = "steel"


def quat(r: np.ndarray) -> np.ndarray:
    """(x, y, z, w) of a rotation matrix (Shepperd's method: stable for every rotation)."""
    r = np.asarray(r, float)
    tr = r[0, 0] + r[1, 1] + r[2, 2]
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = [(r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, s / 4]
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
        q = [s / 4, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s, (r[2, 1] - r[1, 2]) / s]
    elif r[1, 1] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
        q = [(r[0, 1] + r[1, 0]) / s, s / 4, (r[1, 2] + r[2, 1]) / s, (r[0, 2] - r[2, 0]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
        q = [(r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, s / 4, (r[1, 0] - r[0, 1]) / s]
    q = np.array(q)
    return q / np.linalg.norm(q)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of (…, 4) quaternions (x, y, z, w)."""
    ax, ay, az, aw = np.moveaxis(np.asarray(a, float), -1, 0)
    bx, by, bz, bw = np.moveaxis(np.asarray(b, float), -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def rotations(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rotation matrices (n, 3, 3) about a unit ``axis`` by each ``angle`` (Rodrigues)."""
    x, y, z = axis
    c, s = np.cos(angle), np.sin(angle)
    t = 1.0 - c
    out = np.empty((len(angle), 3, 3))
    out[:, 0, 0] = c + x * x * t
    out[:, 0, 1] = x * y * t - z * s
    out[:, 0, 2] = x * z * t + y * s
    out[:, 1, 0] = y * x * t + z * s
    out[:, 1, 1] = c + y * y * t
    out[:, 1, 2] = y * z * t - x * s
    out[:, 2, 0] = z * x * t - y * s
    out[:, 2, 1] = z * y * t + x * s
    out[:, 2, 2] = c + z * z * t
    return out


def _frame_to_z(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A rotation whose z axis points from ``a`` to ``b``."""
    d = np.asarray(b, float) - np.asarray(a, float)
    n = np.linalg.norm(d)
    z = d / n if n > 0 else np.array([0.0, 0.0, 1.0])
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


def _f(x) -> str:
    return repr(float(x))


def _v(xs) -> str:
    return " ".join(_f(x) for x in np.asarray(xs, float).reshape(-1))


class RobotScene:
    """The scene of a Mechanism (with its robot file's feet and wearer segments, when known):
    its URDF, and the JSON bodies of /tf and /scene for batches of cycle rows."""

    def __init__(self, mech: Mechanism, feet: list[Foot] | None = None,
                 shapes: dict[int, list[Shape]] | None = None, seat: dict | None = None,
                 base_height: float | None = None) -> None:
        if mech.closure is not None:
            raise ValueError("the scene draws open trees (a closed chain's dependent "
                             "coordinates are not in the cycle's rows)")
        self.mech = mech
        coords = set(mech.coordinate_names)
        # drawn bodies: the base and every body on a joint of q (the rotors are not drawn)
        self.drawn = [0] + [i for i in range(1, mech.n_bodies)
                            if mech.tree_joint_names[i] in coords
                            and mech.joint_type[i] in (JOINT_REVOLUTE, JOINT_PRISMATIC)]
        drawn = set(self.drawn)
        for i in self.drawn[1:]:
            if int(mech.parent[i]) not in drawn:
                raise ValueError(f"body {mech.body_names[i]} hangs on a body that is not drawn")
        self.feet = list(feet or [])
        self.shapes = shapes if shapes is not None else default_shapes(mech, self.feet,
                                                                       self.drawn)
        self.seat = seat
        self.names = mech.body_names
        if base_height is None:
            base_height = self._rest_height()
        self.base_height = float(base_height)
        self.base = mech.body_names[0]
        self._origin_quat = np.array([quat(r) for r in mech.origin_rot])
        self._tf_fmt: str | None = None
        self._static_tf = ""

    # ---------------------------------------------------------------- kinematics (numpy)
    def _z(self, q: np.ndarray) -> np.ndarray:
        """Tree coordinates per row (n, n_bodies): each body's k·q + c (0 for the base)."""
        m = self.mech
        idx = np.maximum(m.q_index.astype(int), 0)
        z = q[:, idx] * m.mimic_multiplier + m.mimic_offset
        z[:, 0] = 0.0
        return z

    def kinematics(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World (= the base's frame) positions (n, nb, 3) and rotations (n, nb, 3, 3) of every
        body for rows of q (n, nq) — numpy, vectorised over the rows."""
        m = self.mech
        q = np.atleast_2d(np.asarray(q, float))
        n, nb = len(q), m.n_bodies
        z = self._z(q)
        pos = np.zeros((n, nb, 3))
        rot = np.zeros((n, nb, 3, 3))
        rot[:, 0] = np.eye(3)
        for i in range(1, nb):
            p = int(m.parent[i])
            rp, pp = rot[:, p], pos[:, p]
            r_o = rp @ m.origin_rot[i]
            o = pp + rp @ m.origin_xyz[i]
            if m.joint_type[i] == JOINT_REVOLUTE:
                rot[:, i] = r_o @ rotations(m.axis[i], z[:, i])
                pos[:, i] = o
            elif m.joint_type[i] == JOINT_PRISMATIC:
                rot[:, i] = r_o
                pos[:, i] = o + (r_o @ m.axis[i]) * z[:, i, None]
            else:
                rot[:, i] = r_o
                pos[:, i] = o
        return pos, rot

    def centre_of_mass(self, q: np.ndarray) -> np.ndarray:
        """The whole mechanism's centre of mass (n, 3), in the base's frame (m)."""
        m = self.mech
        pos, rot = self.kinematics(q)
        c = pos + np.einsum("nbij,bj->nbi", rot, m.com)
        return np.einsum("b,nbi->ni", m.mass, c) / float(np.sum(m.mass))

    def foot_positions(self, q: np.ndarray) -> np.ndarray:
        """Each foot frame's origin (n, n_feet, 3) in the base's frame (m)."""
        pos, rot = self.kinematics(q)
        return np.stack([pos[:, f.body] + rot[:, f.body] @ f.offset for f in self.feet], 1) \
            if self.feet else np.zeros((len(pos), 0, 3))

    def _sole_middles(self, q: np.ndarray) -> np.ndarray:
        pos, rot = self.kinematics(q)
        return np.stack([pos[:, f.body] + rot[:, f.body] @ (0.5 * (f.heel + f.toe))
                         for f in self.feet], 1)

    def _rest_height(self) -> float:
        """The pelvis's height above the floor when the lowest sole point (or body origin)
        touches it at q = 0 (clipped to the joint ranges)."""
        m = self.mech
        q0 = np.clip(np.zeros(m.nq), [m.lower[m.coordinate_names.index(n)]
                                      for n in m.joint_names],
                     [m.upper[m.coordinate_names.index(n)] for n in m.joint_names])
        pos, rot = self.kinematics(q0[None])
        zs = [float((pos[0, f.body] + rot[0, f.body] @ p)[2])
              for f in self.feet for p in (f.heel, f.toe)]
        if not zs:
            zs = [float(pos[0, i, 2]) for i in self.drawn]
        return max(0.0, -min(zs))

    # ---------------------------------------------------------------- URDF
    def urdf(self) -> str:
        """The robot's URDF: a link per drawn body and per foot frame, its joints from the
        Mechanism (origin, rotation, axis, range), primitive visuals (no inertia)."""
        from exo_rt.model.topology import matrix_rpy

        m = self.mech
        out = [f'<?xml version="1.0"?>\n<robot name="{m.name}">']
        materials = {}
        for shapes in self.shapes.values():
            for s in shapes:
                materials[s.name] = s.color
        for name, c in materials.items():
            out.append(f'  <material name="{name}"><color rgba="{_v(c)}"/></material>')
        for i in self.drawn:
            out.append(f'  <link name="{m.body_names[i]}">')
            for s in self.shapes.get(i, []):
                out.append(_visual(s, matrix_rpy))
            out.append("  </link>")
        for f in self.feet:
            if f.name not in m.body_names:
                out.append(f'  <link name="{f.name}"/>')
        for i in self.drawn[1:]:
            j = m.coordinate_names.index(m.tree_joint_names[i])
            kind = "prismatic" if m.joint_type[i] == JOINT_PRISMATIC else "revolute"
            lo, hi = float(m.lower[j]), float(m.upper[j])
            lo = lo if math.isfinite(lo) else -1e4
            hi = hi if math.isfinite(hi) else 1e4
            eff = float(m.effort_limit[j]) if math.isfinite(m.effort_limit[j]) else 1e4
            vel = float(m.velocity_limit[j]) if math.isfinite(m.velocity_limit[j]) else 1e4
            out.append(
                f'  <joint name="{m.tree_joint_names[i]}" type="{kind}">\n'
                f'    <parent link="{m.body_names[int(m.parent[i])]}"/>\n'
                f'    <child link="{m.body_names[i]}"/>\n'
                f'    <origin xyz="{_v(m.origin_xyz[i])}" '
                f'rpy="{_v(matrix_rpy(m.origin_rot[i]))}"/>\n'
                f'    <axis xyz="{_v(m.axis[i])}"/>\n'
                f'    <limit lower="{_f(lo)}" upper="{_f(hi)}" effort="{_f(eff)}" '
                f'velocity="{_f(vel)}"/>\n'
                f"  </joint>")
        for f in self.feet:
            if f.name in m.body_names:
                continue
            out.append(
                f'  <joint name="{f.name}_frame" type="fixed">\n'
                f'    <parent link="{m.body_names[f.body]}"/>\n'
                f'    <child link="{f.name}"/>\n'
                f'    <origin xyz="{_v(f.offset)}" rpy="{_v(matrix_rpy(f.rotation))}"/>\n'
                f"  </joint>")
        out.append("</robot>\n")
        return "\n".join(out)

    def description(self) -> str:
        """/robot_description's body: the URDF as a ``std_msgs/msg/String``."""
        return json.dumps({"data": self.urdf()})

    # ---------------------------------------------------------------- /tf
    def _build_tf(self) -> None:
        m = self.mech
        ts = '{"timestamp":{"sec":%d,"nsec":%d},'
        parts = [ts + f'"parent_frame_id":"{WORLD}","child_frame_id":{json.dumps(self.base)},'
                 '"translation":{"x":%r,"y":0.0,"z":%r},'
                 '"rotation":{"x":0.0,"y":%r,"z":0.0,"w":%r}}']
        for i in self.drawn[1:]:
            head = (ts + f'"parent_frame_id":{json.dumps(m.body_names[int(m.parent[i])])},'
                    f'"child_frame_id":{json.dumps(m.body_names[i])},')
            if m.joint_type[i] == JOINT_PRISMATIC:
                trans = '"translation":{"x":%r,"y":%r,"z":%r},'
            else:
                x, y, z = (_f(v) for v in m.origin_xyz[i])
                trans = f'"translation":{{"x":{x},"y":{y},"z":{z}}},'
            parts.append(head + trans + '"rotation":{"x":%r,"y":%r,"z":%r,"w":%r}}')
        for f in self.feet:
            if f.name in m.body_names:
                continue
            x, y, z = (_f(v) for v in f.offset)
            qx, qy, qz, qw = (_f(v) for v in quat(f.rotation))
            parts.append(ts + f'"parent_frame_id":{json.dumps(m.body_names[f.body])},'
                         f'"child_frame_id":{json.dumps(f.name)},'
                         f'"translation":{{"x":{x},"y":{y},"z":{z}}},'
                         f'"rotation":{{"x":{qx},"y":{qy},"z":{qz},"w":{qw}}}}}')
        self._tf_fmt = '{"transforms":[' + ",".join(parts) + "]}"
        self._n_static = len(self.feet) - sum(f.name in m.body_names for f in self.feet)

    def transforms(self, q: np.ndarray, times_ns, base: np.ndarray | None = None) -> list[str]:
        """/tf bodies for rows of q (n, nq) at their log times (ns); ``base``: the pelvis's
        (x, z, pitch) per row (a world run's), else the test stand's pose."""
        if self._tf_fmt is None:
            self._build_tf()
        m = self.mech
        q = np.atleast_2d(np.asarray(q, float))
        n = len(q)
        ns = np.asarray(times_ns, dtype=np.int64)
        sec, nsec = ns // 1_000_000_000, ns % 1_000_000_000
        z = self._z(q)
        cols = [sec, nsec]
        if base is None:
            cols += [np.zeros(n), np.full(n, self.base_height), np.zeros(n), np.ones(n)]
        else:
            base = np.asarray(base, float)
            cols += [base[:, 0], base[:, 1], np.sin(base[:, 2] / 2), np.cos(base[:, 2] / 2)]
        for i in self.drawn[1:]:
            cols += [sec, nsec]
            if m.joint_type[i] == JOINT_PRISMATIC:
                t = m.origin_xyz[i] + np.outer(z[:, i], m.origin_rot[i] @ m.axis[i])
                cols += [t[:, 0], t[:, 1], t[:, 2]]
                qr = np.broadcast_to(self._origin_quat[i], (n, 4))
            else:
                h = z[:, i] / 2
                s = np.sin(h)
                local = np.column_stack([m.axis[i][0] * s, m.axis[i][1] * s,
                                         m.axis[i][2] * s, np.cos(h)])
                qr = quat_mul(self._origin_quat[i], local)
            cols += [qr[:, 0], qr[:, 1], qr[:, 2], qr[:, 3]]
        for _ in range(self._n_static):
            cols += [sec, nsec]
        table = np.column_stack([np.asarray(c, float) for c in cols]).tolist()
        fmt = self._tf_fmt
        return [fmt % tuple(r) for r in table]

    # ---------------------------------------------------------------- /scene
    def static_scene(self, time_ns: int) -> str:
        """The floor (and the seat, when the run has one), forever."""
        ents = [_entity("floor", WORLD, time_ns, cubes=[_cube((0.0, 0.0, -0.005),
                                                                (6.0, 4.0, 0.01), FLOOR)])]
        if self.seat:
            ents.append(_entity("seat", WORLD, time_ns, cubes=[
                _cube(self.seat["center"], self.seat["size"], SEAT)]))
        return _update(ents)

    def dynamic_scene(self, q: np.ndarray, times_ns, base: np.ndarray | None = None,
                      force: np.ndarray | None = None, point: np.ndarray | None = None,
                      seat_x: np.ndarray | None = None) -> list[str]:
        """Per row: the centre of mass (a sphere, world frame) and, with ``force`` (n, feet,
        3; N, world), each loaded foot's contact point (``point``, else its sole's middle)
        and its reaction arrow (|F| / :data:`ARROW_N_PER_M` m long); with ``seat_x`` (n; m)
        the seat at that x (a chair kept behind the wearer moves along the floor)."""
        q = np.atleast_2d(np.asarray(q, float))
        com = self.to_world(self.centre_of_mass(q), base)
        if force is not None and point is None:
            point = self.to_world(self._sole_middles(q), base)
        out = []
        for k, ns in enumerate(np.asarray(times_ns, np.int64).tolist()):
            ents = [_entity("com", WORLD, ns, spheres=[_sphere(com[k], 0.05, COM)])]
            if seat_x is not None and self.seat and np.isfinite(seat_x[k]):
                centre = [float(seat_x[k]), *self.seat["center"][1:]]
                ents.append(_entity("seat", WORLD, ns, cubes=[
                    _cube(centre, self.seat["size"], SEAT)]))
            if force is not None:
                for f, foot in enumerate(self.feet):
                    ents.append(_entity(f"contact/{foot.name}", WORLD, ns,
                                        **_contact(point[k, f], force[k, f])))
            out.append(_update(ents))
        return out

    def to_world(self, p: np.ndarray, base: np.ndarray | None) -> np.ndarray:
        """Points in the base's frame (n, …, 3) → world (the pelvis at ``base`` or at rest)."""
        p = np.asarray(p, float)
        if base is None:
            return p + np.array([0.0, 0.0, self.base_height])
        base = np.asarray(base, float)
        c, s = np.cos(base[:, 2]), np.sin(base[:, 2])
        extra = (1,) * (p.ndim - 2)
        c, s = c.reshape(-1, *extra), s.reshape(-1, *extra)
        x, y, z = p[..., 0], p[..., 1], p[..., 2]
        return np.stack([base[:, 0].reshape(-1, *extra) + c * x + s * z, y,
                         base[:, 1].reshape(-1, *extra) - s * x + c * z], -1)


def _visual(s: Shape, matrix_rpy) -> str:
    if s.kind == "cylinder":
        a, b = np.asarray(s.a, float), np.asarray(s.b, float)
        length = float(np.linalg.norm(b - a))
        rpy = matrix_rpy(_frame_to_z(a, b))
        geom = f'<cylinder radius="{_f(s.radius)}" length="{_f(length)}"/>'
        xyz = 0.5 * (a + b)
    elif s.kind == "drive":  # a cylinder of its own length about an axis (b) at a
        rpy = matrix_rpy(_frame_to_z(np.zeros(3), s.b))
        geom = f'<cylinder radius="{_f(s.radius)}" length="{_f(s.size[0])}"/>'
        xyz = s.a
    elif s.kind == "box":
        rpy = np.zeros(3)
        geom = f'<box size="{_v(s.size)}"/>'
        xyz = s.a
    else:
        rpy = np.zeros(3)
        geom = f'<sphere radius="{_f(s.radius)}"/>'
        xyz = s.a
    return (f'    <visual><origin xyz="{_v(xyz)}" rpy="{_v(rpy)}"/>'
            f"<geometry>{geom}</geometry><material name=\"{s.name}\"/></visual>")


def default_shapes(mech: Mechanism, feet: list[Foot], drawn: list[int],
                   wearer: list[tuple[int, str, np.ndarray, np.ndarray]] = ()
                   ) -> dict[int, list[Shape]]:
    """Primitive visuals: a tube from each drawn body's origin to each drawn child's joint and
    to its foot frames, a drive housing at each joint, the pelvis as a box, the wearer's thigh
    and shank as translucent cylinders, each foot's sole as a box."""
    shapes: dict[int, list[Shape]] = {i: [] for i in drawn}
    children = {i: [c for c in drawn[1:] if int(mech.parent[c]) == i] for i in drawn}
    for i in drawn:
        ends = [mech.origin_xyz[c] for c in children[i]]
        ends += [f.offset for f in feet if f.body == i]
        if i == 0:
            ys = [float(e[1]) for e in ends] or [0.0]
            width = max(0.16, max(ys) - min(ys) + 0.1)
            shapes[i].append(Shape("box", np.array([-0.02, 0.5 * (max(ys) + min(ys)), 0.06]),
                                   size=(0.14, width, 0.12), color=STEEL, name="steel"))
            continue
        for e in ends:
            if np.linalg.norm(e) > 1e-6:
                shapes[i].append(Shape("cylinder", np.zeros(3), np.asarray(e, float),
                                       radius=LINK_RADIUS))
        if not ends:
            c = np.asarray(mech.com[i], float)
            if np.linalg.norm(c) > 1e-6:
                shapes[i].append(Shape("cylinder", np.zeros(3), 2 * c, radius=LINK_RADIUS))
        shapes[i].append(Shape("drive", np.zeros(3), np.asarray(mech.axis[i], float),
                               radius=DRIVE_RADIUS, size=(DRIVE_LENGTH, 0, 0), color=DRIVE,
                               name="drive"))
    for body, kind, a, b in wearer:
        if body in shapes and kind in WEARER_RADIUS:
            shapes[body].append(Shape("cylinder", a, b, radius=WEARER_RADIUS[kind],
                                      color=SKIN, name="wearer"))
    for f in feet:
        if f.body in shapes:
            heel, toe = f.heel, f.toe
            centre = 0.5 * (heel + toe) + np.array([0.0, 0.0, 0.02])
            length = float(np.linalg.norm(toe - heel))
            shapes[f.body].append(Shape("box", centre, size=(max(length, 0.05), 0.1, 0.04),
                                        color=SKIN, name="wearer"))
    return shapes


# ----------------------------------------------------------------------------- JSON pieces
_T = '{"sec":%d,"nsec":%d}'
_EMPTY = ("arrows", "cubes", "spheres", "cylinders", "lines", "triangles", "texts", "models")


def _color(c) -> dict:
    return {"r": c[0], "g": c[1], "b": c[2], "a": c[3]}


def _pose(p, o=(0.0, 0.0, 0.0, 1.0)) -> dict:
    return {"position": {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])},
            "orientation": {"x": float(o[0]), "y": float(o[1]), "z": float(o[2]),
                            "w": float(o[3])}}


def _cube(centre, size, color) -> dict:
    return {"pose": _pose(centre), "size": {"x": float(size[0]), "y": float(size[1]),
                                            "z": float(size[2])}, "color": _color(color)}


def _sphere(centre, d, color) -> dict:
    return {"pose": _pose(centre), "size": {"x": d, "y": d, "z": d}, "color": _color(color)}


def arrow_orientation(direction) -> tuple:
    """The quaternion (x, y, z, w) turning +x (an arrow's direction) onto ``direction``."""
    d = np.asarray(direction, float)
    d = d / np.linalg.norm(d)
    w = 1.0 + d[0]
    if w < 1e-12:
        return (0.0, 0.0, 1.0, 0.0)
    q = np.array([0.0, -d[2], d[1], w])
    q /= np.linalg.norm(q)
    return tuple(float(v) for v in q)


def arrow(point, force, color=ARROW) -> dict:
    """An ArrowPrimitive at ``point`` along ``force``: shaft + head = |F| / ARROW_N_PER_M m."""
    length = float(np.linalg.norm(force)) / ARROW_N_PER_M
    head = min(0.08, 0.3 * length)
    return {"pose": _pose(point, arrow_orientation(force)), "shaft_length": length - head,
            "shaft_diameter": 0.02, "head_length": head, "head_diameter": 0.05,
            "color": _color(color)}


def _contact(point, force) -> dict:
    if not (np.all(np.isfinite(force)) and np.all(np.isfinite(point))) or \
            float(np.linalg.norm(force)) < LOADED_N:
        return {}
    return {"spheres": [_sphere(point, 0.04, CONTACT)], "arrows": [arrow(point, force)]}


def _entity(ident: str, frame: str, time_ns: int, **prims) -> dict:
    e = {"timestamp": {"sec": int(time_ns) // 1_000_000_000,
                       "nsec": int(time_ns) % 1_000_000_000},
         "frame_id": frame, "id": ident, "lifetime": {"sec": 0, "nsec": 0},
         "frame_locked": False, "metadata": []}
    for k in _EMPTY:
        e[k] = prims.get(k, [])
    return e


def _update(entities: list[dict]) -> str:
    return json.dumps({"deletions": [], "entities": entities})


# ----------------------------------------------------------------------------- schemas
_NUM = {"type": "number"}
_VEC3 = {"type": "object", "properties": dict.fromkeys(("x", "y", "z"), _NUM)}
_QUAT = {"type": "object", "properties": dict.fromkeys(("x", "y", "z", "w"), _NUM)}
_TIME = {"type": "object", "properties": {"sec": {"type": "integer"},
                                           "nsec": {"type": "integer"}}}
_POSE = {"type": "object", "properties": {"position": _VEC3, "orientation": _QUAT}}
_COLOR = {"type": "object", "properties": dict.fromkeys(("r", "g", "b", "a"), _NUM)}


def scene_schemas() -> dict[str, tuple[str, dict]]:
    """(schema name, JSON schema) of /robot_description, /tf and /scene: Foxglove's names,
    the fields exo-rt writes."""
    transform = {"type": "object", "properties": {
        "timestamp": _TIME, "parent_frame_id": {"type": "string"},
        "child_frame_id": {"type": "string"}, "translation": _VEC3, "rotation": _QUAT}}
    prim = {"type": "object", "properties": {"pose": _POSE, "size": _VEC3, "color": _COLOR}}
    arrow_s = {"type": "object", "properties": {
        "pose": _POSE, "shaft_length": _NUM, "shaft_diameter": _NUM, "head_length": _NUM,
        "head_diameter": _NUM, "color": _COLOR}}
    entity = {"type": "object", "properties": {
        "timestamp": _TIME, "frame_id": {"type": "string"}, "id": {"type": "string"},
        "lifetime": _TIME, "frame_locked": {"type": "boolean"},
        "metadata": {"type": "array"}, "arrows": {"type": "array", "items": arrow_s},
        "cubes": {"type": "array", "items": prim}, "spheres": {"type": "array", "items": prim}}
        | {k: {"type": "array"} for k in ("cylinders", "lines", "triangles", "texts",
                                          "models")}}
    return {
        "/robot_description": ("std_msgs/msg/String", {
            "type": "object", "properties": {"data": {"type": "string"}}}),
        "/tf": ("foxglove.FrameTransforms", {
            "type": "object", "title": "foxglove.FrameTransforms",
            "properties": {"transforms": {"type": "array", "items": transform}}}),
        "/scene": ("foxglove.SceneUpdate", {
            "type": "object", "title": "foxglove.SceneUpdate",
            "properties": {"deletions": {"type": "array"},
                           "entities": {"type": "array", "items": entity}}}),
    }


SCENE_TOPICS = ("/robot_description", "/tf", "/scene")


def channels(context) -> dict:
    """The scene's Foxglove channels in ``context`` (JSON messages, Foxglove's schema names)."""
    import foxglove

    out = {}
    for topic, (name, schema) in scene_schemas().items():
        out[topic] = foxglove.Channel(topic, schema=foxglove.Schema(
            name=name, encoding="jsonschema", data=json.dumps(schema).encode()),
            message_encoding="json", context=context)
    return out


# ----------------------------------------------------------------------------- from a run
def robot_path(run_dir: Path | None, meta: dict) -> Path | None:
    """The robot file a run used: its own copy (run folder's config.yaml), else the top
    config its log names."""
    import yaml

    tops = []
    if run_dir is not None:
        tops.append(Path(run_dir) / "config.yaml")
    if meta.get("config"):
        tops.append(Path(meta["config"]))
    for top in tops:
        try:
            doc = yaml.safe_load(top.read_text())
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("robot"), str):
            path = top.parent / doc["robot"]
            if path.is_file():
                return path
    return None


def _lumped(path: Path):
    """(links, joints, owner, wearer segments) of a robot file: owner maps every link to
    (body link, rotation, position of the link in the body's frame)."""
    from exo_rt.errors import Where
    from exo_rt.model import robot_yaml, topology

    segments = []
    if path.suffix.lower() in (".urdf", ".xml"):
        from exo_rt.model.urdf import read_urdf

        _, links, joints = read_urdf(path.read_text(), str(path))
        base = None
    else:
        parts = robot_yaml._read_parts(path, [path.resolve()])
        robot_yaml._apply_settings(parts)
        links, joints, base = parts.links, parts.joints, parts.base
        if parts.wearer is not None:
            segments = list(parts.wearer[0].segments or ())
    tree = topology.validate(links, joints, base, Where(str(path)))
    owner, _ = topology.lump(tree, [], False)
    return links, joints, owner, segments


def scene_for_robot(path: str | Path, mech: Mechanism | None = None,
                    seat: dict | None = None) -> RobotScene:
    """The scene of a robot file (its Mechanism with the wearer, its feet and wearer
    segments): the wearer's foot segments are the feet (heel = proximal, toe = distal);
    a robot without any has its drawn leaf bodies as feet, their origins as heel and toe."""
    from exo_rt.model import load_mechanism

    path = Path(path)
    mech = mech if mech is not None else load_mechanism(path)
    links, joints, owner, segments = _lumped(path)
    body_of = {n: i for i, n in enumerate(mech.body_names)}
    joint_by = {j.name: j for j in joints}

    def in_body(link: str, point) -> tuple[int, np.ndarray] | None:
        if link not in owner or owner[link][0] not in body_of:
            return None
        body, r, p = owner[link]
        return body_of[body], p + r @ np.asarray(point, float)

    feet: list[Foot] = []
    wearer = []
    for s in segments:
        a = in_body(s.body, s.proximal)
        if isinstance(s.distal, str):
            j = joint_by.get(s.distal)
            b = in_body(j.parent, j.origin_xyz) if j is not None else None
        else:
            b = in_body(s.body, s.distal)
        if a is None or b is None or a[0] != b[0]:
            continue
        if s.segment == "foot":
            body, r, p = owner[s.body]
            feet.append(Foot(s.body, a[0], np.asarray(r, float), np.asarray(p, float),
                             a[1], b[1]))
        else:
            wearer.append((a[0], s.segment, a[1], b[1]))
    scene = RobotScene(mech, feet=None, shapes={}, seat=seat, base_height=0.0)
    if not feet:
        drawn = scene.drawn
        leaves = [i for i in drawn[1:] if not any(int(mech.parent[c]) == i for c in drawn)]
        feet = [Foot(mech.body_names[i], i, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3))
                for i in leaves]
    shapes = default_shapes(mech, feet, scene.drawn, wearer)
    return RobotScene(mech, feet=feet, shapes=shapes, seat=seat)


def scene_for_run(run_dir: Path | None, meta: dict) -> RobotScene:
    """The scene of a recorded run (its robot file: :func:`robot_path`), with the seat its
    metadata names. ValueError when the robot file cannot be found or drawn."""
    path = robot_path(run_dir, meta)
    if path is None:
        raise ValueError("the run's robot file was not found (neither the run folder's "
                         "config.yaml nor the config its log names)")
    scene = scene_for_robot(path, seat=meta.get("seat"))
    names = list(meta.get("joint_names") or [])
    if names and names != list(scene.mech.joint_names):
        raise ValueError(f"the robot file's joints {list(scene.mech.joint_names)} are not the "
                         f"run's {names}")
    return scene


class SceneColumns:
    """Where a record's optional scene columns are (``base``, ``foot_force``, ``foot_point``),
    in the scene's feet's order."""

    def __init__(self, columns: dict, meta: dict, scene: RobotScene) -> None:
        self.q = columns["q"]
        self.base = columns.get("base")
        nf = len(scene.feet)
        order = list(range(nf))
        names = meta.get("feet")
        if names:
            mine = [f.name for f in scene.feet]
            order = [names.index(n) if n in names else -1 for n in mine]
        self.order = order
        self.force = columns.get("foot_force")
        self.point = columns.get("foot_point")
        self.seat_x = columns.get("seat_x")  # the seat's centre x (m): a chair that moves
        per = len(names) if names else nf
        for key in ("force", "point"):
            c = getattr(self, key)
            if c is not None and c[1] - c[0] != 3 * per:
                setattr(self, key, None)
        if any(o < 0 for o in order):
            self.force = self.point = None

    def split(self, rows: np.ndarray):
        """(q, base, force, point) of rows: None where the record has no such column."""
        a, b = self.q
        q = rows[:, a:b]
        base = rows[:, self.base[0]:self.base[1]] if self.base else None
        force = point = None
        if self.force:
            f = rows[:, self.force[0]:self.force[1]].reshape(len(rows), -1, 3)
            force = f[:, self.order]
        if self.point:
            p = rows[:, self.point[0]:self.point[1]].reshape(len(rows), -1, 3)
            point = p[:, self.order]
        return q, base, force, point


class SceneLog:
    """The scene's messages for a batch of rows, through ``log(topic, body, time_ns)``: /tf
    for every row (``tf_every`` cycles: 1 in run.mcap), /scene's dynamic entities every
    ``scene_every_s``, /robot_description and the static entities at the first row and every
    :data:`STATIC_S` s of run time."""

    def __init__(self, scene: RobotScene, columns: dict, meta: dict,
                 scene_every_s: float = SCENE_EVERY_S) -> None:
        self.scene = scene
        self.cols = SceneColumns(columns, meta, scene)
        rate = float(meta.get("rate_hz", 1000.0))
        self.scene_every = max(1, int(round(scene_every_s * rate)))
        self.static_every = max(1, int(round(STATIC_S * rate)))
        self._next_static: float | None = None
        self.description = scene.description()
        self.counts = dict.fromkeys(SCENE_TOPICS, 0)

    def restart(self) -> None:
        """The URDF and the static entities again at the next row (a new file)."""
        self._next_static = None

    def rows(self, rows: np.ndarray, times_ns: np.ndarray, log, tf: bool = True,
             dynamic: bool = True, static: bool = True) -> None:
        if not len(rows):
            return
        cyc = np.nan_to_num(rows[:, 1]).astype(np.int64)
        finite = np.isfinite(rows[:, self.cols.q[0]:self.cols.q[1]]).all(axis=1)
        q, base, force, point = self.cols.split(rows)
        if static:
            k = 0 if self._next_static is None else -1
            while True:
                if k < 0:
                    hits = np.flatnonzero(cyc >= self._next_static)
                    if not len(hits):
                        break
                    k = int(hits[0])
                self._static(int(times_ns[k]), log)
                self._next_static = (int(cyc[k]) // self.static_every + 1) * self.static_every
                k = -1
        if base is not None:
            finite &= np.isfinite(base).all(axis=1)
        ok = np.flatnonzero(finite)
        if tf and len(ok):
            sel = ok
            bodies = self.scene.transforms(q[sel], times_ns[sel],
                                           None if base is None else base[sel])
            for k, body in zip(sel.tolist(), bodies, strict=True):
                log("/tf", body.encode(), int(times_ns[k]))
            self.counts["/tf"] += len(sel)
        if dynamic:
            sel = ok[cyc[ok] % self.scene_every == 0]
            if len(sel):
                seat = self.cols.seat_x
                bodies = self.scene.dynamic_scene(
                    q[sel], times_ns[sel], None if base is None else base[sel],
                    None if force is None else force[sel],
                    None if point is None else point[sel],
                    None if seat is None else rows[sel, seat[0]])
                for k, body in zip(sel.tolist(), bodies, strict=True):
                    log("/scene", body.encode(), int(times_ns[k]))
                self.counts["/scene"] += len(sel)

    def _static(self, ns: int, log) -> None:
        log("/robot_description", self.description.encode(), ns)
        log("/scene", self.scene.static_scene(ns).encode(), ns)
        self.counts["/robot_description"] += 1
        self.counts["/scene"] += 1
