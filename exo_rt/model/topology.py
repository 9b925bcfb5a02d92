"""Loader-neutral description of a kinematic tree and its reduction to a Mechanism.

Both loaders (URDF and robot YAML) produce :class:`LinkSpec` / :class:`JointSpec` lists in
URDF conventions (joint origin xyz + rpy in the parent frame, axis in the joint frame,
inertia about the COM in the link frame). :func:`build_mechanism` then checks everything
that is about physics and topology (one place for both formats), lumps fixed joints into
their parents, orders bodies parent-before-child and packs the arrays of
:class:`~exo_rt.model.mechanism.Mechanism`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from exo_rt.errors import ModelError, ModelWarning, Where
from exo_rt.schema.robot import JOINT_TYPES
from exo_rt.yamlio import did_you_mean as _did_you_mean


@dataclass
class LinkSpec:
    """One rigid link: mass (kg), COM (m, link frame), inertia about the COM (kg·m², link frame)."""

    name: str
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    where: Where | None = None
    lines: dict[str, int] = field(default_factory=dict)  # key → line, for precise errors


@dataclass
class JointSpec:
    """One joint between ``parent`` and ``child`` links, in URDF conventions.

    ``origin_xyz`` (m) and ``origin_rpy`` (rad, fixed-axis roll-pitch-yaw) place the joint
    frame in the parent link frame; ``axis`` is a unit vector in the joint frame. Limits are
    in SI (rad or m, rad/s or m/s, N·m or N); ``inf`` when absent. ``mimic`` = (master joint
    name, multiplier, offset) makes this a dependent coordinate q = k·q_master + c.
    """

    name: str
    type: str
    parent: str
    child: str
    origin_xyz: np.ndarray = field(default_factory=lambda: np.zeros(3))
    origin_rpy: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0]))
    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = math.inf
    effort: float = math.inf
    mimic: tuple[str, float, float] | None = None
    where: Where | None = None
    lines: dict[str, int] = field(default_factory=dict)  # key → line, for precise errors


@dataclass
class LoopSpec:
    """A loop closure between links ``body_a`` and ``body_b``.

    ``point_a`` / ``point_b`` (m) are in each link's frame and coincide when the loop is
    closed. ``kind`` = "point" (spherical pair, 3 rows) or "revolute" (point plus ``axis``,
    given in a's frame, kept aligned with b — 5 rows).
    """

    name: str
    kind: str
    body_a: str
    point_a: np.ndarray
    body_b: str
    point_b: np.ndarray
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    where: Where | None = None
    lines: dict[str, int] = field(default_factory=dict)  # key → line, for precise errors


def rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF rotation: R = Rz(yaw) · Ry(pitch) · Rx(roll)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp = math.cos(r), math.sin(r), math.cos(p), math.sin(p)
    cy, sy = math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_rpy(r: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw of a rotation matrix (inverse of :func:`rpy_matrix`)."""
    pitch = math.asin(-max(-1.0, min(1.0, float(r[2, 0]))))
    if abs(r[2, 0]) < 1.0 - 1e-12:
        roll = math.atan2(r[2, 1], r[2, 2])
        yaw = math.atan2(r[1, 0], r[0, 0])
    else:  # gimbal lock: put the whole rotation about z in yaw
        roll = 0.0
        yaw = math.atan2(-r[0, 1], r[1, 1])
    return np.array([roll, pitch, yaw])


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` (rad) about the unit ``axis`` (Rodrigues)."""
    u = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


def _where(spec, key: str) -> Where:
    """Where ``key`` of a spec was written: its own line if the loader recorded it."""
    w = spec.where
    if w is None:
        return Where("<memory>", 0, key)
    line = getattr(spec, "lines", {}).get(key, w.line)
    return Where(w.file, line, f"{w.key}.{key}" if w.key else key)


def _check_finite(spec, key: str, value) -> None:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ModelError(
            f"{key} of '{spec.name}' is not finite ({value!r})",
            _where(spec, key),
            "give a finite number",
        )


# Inertias within this of valid are rounding (CAD exports print ~6 significant digits):
# relative to the tensor's largest component, plus an absolute floor (kg·m²) far below any
# physical link.
INERTIA_RTOL = 1e-6
INERTIA_ATOL = 1e-12


def check_link(link: LinkSpec) -> None:
    """What makes a link's inertial data unusable: non-finite values, a negative mass, an
    asymmetric tensor (errors, wherever the link is)."""
    _check_finite(link, "mass", link.mass)
    _check_finite(link, "com", link.com)
    _check_finite(link, "inertia", link.inertia)
    if link.mass < 0:
        raise ModelError(
            f"mass of link '{link.name}' is negative ({link.mass} kg)",
            _where(link, "mass"),
            "masses are ≥ 0 kg",
        )
    inertia = np.asarray(link.inertia, dtype=float)
    scale = max(1e-12, float(np.abs(inertia).max()))
    if np.abs(inertia - inertia.T).max() > 1e-9 * scale:
        raise ModelError(
            f"inertia of link '{link.name}' is not symmetric",
            _where(link, "inertia"),
            "give ixx, iyy, izz, ixy, ixz, iyz (the tensor is symmetric)",
        )


def link_plausibility(link: LinkSpec) -> list[ModelWarning]:
    """What is physically implausible but finite in a moving link's inertia (loaded as written,
    with a warning; rounding-level violations pass): a tensor that is not positive
    semidefinite, principal moments outside the triangle inequality, inertia without mass."""
    inertia = np.asarray(link.inertia, dtype=float)
    tol = INERTIA_RTOL * float(np.abs(inertia).max()) + INERTIA_ATOL
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    out = []
    if eig[0] < -tol:
        out.append(ModelWarning(
            f"inertia of link '{link.name}' is not positive semidefinite "
            f"(principal moments {eig[0]:.6g}, {eig[1]:.6g}, {eig[2]:.6g} kg·m²)",
            _where(link, "inertia"),
            "check the signs of the products of inertia (URDF gives +ixy, not −ixy)"))
    elif eig[0] + eig[1] < eig[2] - tol:
        out.append(ModelWarning(
            f"inertia of link '{link.name}' violates the triangle inequality "
            f"(principal moments {eig[0]:.6g} + {eig[1]:.6g} < {eig[2]:.6g} kg·m²)",
            _where(link, "inertia"),
            "each principal moment must be at most the sum of the other two: export the "
            "inertia about the COM again (CAD), or check the units"))
    if link.mass == 0 and eig[2] > tol:
        out.append(ModelWarning(
            f"link '{link.name}' has inertia but zero mass",
            _where(link, "mass"),
            "give the link's mass, or remove its inertia"))
    return out


def check_joint(joint: JointSpec) -> None:
    """Validity of a joint's own fields: type, finite numbers, unit axis, ordered limits."""
    if joint.type not in JOINT_TYPES:
        raise ModelError(
            f"joint '{joint.name}' has unknown type '{joint.type}'",
            _where(joint, "type"),
            f"use one of {', '.join(JOINT_TYPES)}",
        )
    for key in ("origin_xyz", "origin_rpy", "axis"):
        _check_finite(joint, key, getattr(joint, key))
    for key in ("lower", "upper", "velocity", "effort"):
        v = getattr(joint, key)
        if math.isnan(v):
            raise ModelError(
                f"{key} of joint '{joint.name}' is NaN", _where(joint, key), "give a number"
            )
    if joint.type != "fixed":
        n = math.hypot(*(float(x) for x in joint.axis))  # no overflow warning on absurd values
        if n < 1e-9:
            raise ModelError(
                f"axis of joint '{joint.name}' is zero",
                _where(joint, "axis"),
                "give a unit vector, e.g. [0, 0, 1]",
            )
        if abs(n - 1.0) > 1e-6:
            raise ModelError(
                f"axis of joint '{joint.name}' is not a unit vector (norm {n:.6g})",
                _where(joint, "axis"),
                f"normalise it: {np.round(np.asarray(joint.axis) / n, 9).tolist()}",
            )
    if joint.lower > joint.upper:
        raise ModelError(
            f"limits of joint '{joint.name}' are reversed "
            f"(lower {joint.lower} > upper {joint.upper})",
            _where(joint, "lower"),
            "swap lower and upper",
        )
    if joint.velocity < 0 or joint.effort < 0:
        raise ModelError(
            f"velocity/effort limit of joint '{joint.name}' is negative",
            _where(joint, "velocity" if joint.velocity < 0 else "effort"),
            "limits on speed and effort are magnitudes (≥ 0)",
        )


def lump_inertia(
    m1: float, c1: np.ndarray, i1: np.ndarray, m2: float, c2: np.ndarray, i2: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Sum of two rigid inertias given in one frame: total mass, COM and inertia about it.

    Parallel-axis theorem: I_O = I_G + m (|c|² 1 − c cᵀ).
    """
    m = m1 + m2
    if m <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c = (m1 * c1 + m2 * c2) / m

    def shift(mass, com, inertia):
        d = com - c
        return inertia + mass * (float(d @ d) * np.eye(3) - np.outer(d, d))

    return m, c, shift(m1, c1, i1) + shift(m2, c2, i2)


def build_mechanism(
    name: str,
    links: list[LinkSpec],
    joints: list[JointSpec],
    gravity: np.ndarray,
    source: str,
    base: str | None = None,
    source_where: Where | None = None,
    transmissions: tuple = (),
    transmission_where: tuple = (),
    loops: tuple = (),
    independent_q: tuple = (),
    initial: dict | None = None,
    warnings: tuple = (),
    strict: bool = False,
):
    """Check a tree, lump fixed joints, order bodies and pack a :class:`Mechanism`.

    ``base`` names the root link (fixed to the world, its frame the world frame); by default
    the one link that is nobody's child. Movable joints keep the order in which they appear
    in ``joints``; that is the order of ``q`` (``Mechanism.joint_names``). With ``loops`` the
    tree is closed (:func:`exo_rt.dynamics.loops.close_loops`): ``independent_q`` optionally
    names the independent coordinates, ``initial`` the Newton start of the reference closure.

    Physically implausible but finite inertias of moving links load as written, with a
    :class:`~exo_rt.errors.ModelWarning` in ``Mechanism.warnings`` (after the loader's own
    ``warnings``); the links fixed to the base are not checked (their inertia never enters
    the dynamics). ``strict`` turns the first warning into a ModelError.

    Four stages: :func:`validate` (values and topology), :func:`lump` (fixed joints),
    :func:`order` (parents first) and :func:`pack` (the arrays); loops close the result.
    """
    here = source_where or Where(source)
    found = list(warnings)
    gravity = np.asarray(gravity, dtype=float)
    if gravity.shape != (3,) or not np.all(np.isfinite(gravity)):
        raise ModelError("gravity must be 3 finite numbers (m/s²)", Where(here.file, here.line,
                         "gravity"), "e.g. gravity: [0, 0, -9.81]")

    tree = validate(links, joints, base, here)
    owner, inert = lump(tree, found, strict)
    body_order = order(tree, owner)
    mech = pack(name, source, tree, owner, inert, body_order, gravity, here, transmissions,
                transmission_where, links, found)
    if not loops:
        return mech
    index = {b: i for i, b in enumerate(body_order)}
    return _close(mech, loops, owner, index, tree.links, here, tuple(independent_q), initial)


@dataclass
class Tree:
    """A checked tree: links by name, each link's parent joint, the base, the movable joints
    (file order) and the independent ones (the order of q)."""

    links: dict[str, LinkSpec]
    joints: list[JointSpec]
    parent_joint: dict[str, JointSpec]
    base: str
    movable: list[JointSpec]
    independent: list[str]


def validate(links: list[LinkSpec], joints: list[JointSpec], base: str | None,
             here: Where) -> Tree:
    """Every check of the links' and joints' own values and of the topology: unique names,
    known parents and children, one tree on one base (no cycle), mimics of independent
    movable joints, at least one movable joint."""
    link_by_name: dict[str, LinkSpec] = {}
    for link in links:
        if link.name in link_by_name:
            raise ModelError(
                f"link '{link.name}' is defined twice", _where(link, "name"),
                "give every link a unique name",
            )
        check_link(link)
        link_by_name[link.name] = link
    if not link_by_name:
        raise ModelError("the mechanism has no links", here, "define at least the base link")

    joint_names: set[str] = set()
    parent_joint: dict[str, JointSpec] = {}
    for j in joints:
        if j.name in joint_names:
            raise ModelError(
                f"joint '{j.name}' is defined twice", _where(j, "name"),
                "give every joint a unique name",
            )
        joint_names.add(j.name)
        check_joint(j)
        for role in ("parent", "child"):
            ln = getattr(j, role)
            if ln not in link_by_name:
                raise ModelError(
                    f"joint '{j.name}' names unknown {role} link '{ln}'",
                    _where(j, role),
                    _did_you_mean(ln, link_by_name) or "define that link, or fix the name",
                )
        if j.child in parent_joint:
            raise ModelError(
                f"link '{j.child}' is the child of two joints "
                f"('{parent_joint[j.child].name}' and '{j.name}')",
                _where(j, "child"),
                "a tree has one parent joint per link; close loops with `loops:` instead",
            )
        if j.parent == j.child:
            raise ModelError(
                f"joint '{j.name}' connects link '{j.child}' to itself", _where(j, "child"),
                "parent and child must differ",
            )
        parent_joint[j.child] = j

    roots = [n for n in link_by_name if n not in parent_joint]
    if base is None:
        if len(roots) != 1:
            if not roots:
                cyc = _find_cycle(parent_joint)
                raise ModelError(
                    f"the joints form a cycle ({' → '.join(cyc)})",
                    _where(parent_joint[cyc[0]], "parent"), "a tree has no cycles; "
                    "remove one joint or declare the closure under `loops:`",
                )
            raise ModelError(
                f"the mechanism has {len(roots)} root links ({', '.join(roots)})",
                here, "connect every link to the base by a joint (one tree)",
            )
        base = roots[0]
    elif base not in link_by_name:
        raise ModelError(f"base link '{base}' is not defined", Where(here.file, here.line, "base"),
                         _did_you_mean(base, link_by_name) or "name an existing link")
    elif base in parent_joint:
        raise ModelError(f"base link '{base}' is the child of joint '{parent_joint[base].name}'",
                         Where(here.file, here.line, "base"), "the base must be the tree's root")
    # every link must reach the base without a cycle
    for ln in link_by_name:
        seen = [ln]
        cur = ln
        while cur != base:
            if cur not in parent_joint:
                raise ModelError(
                    f"link '{ln}' is not connected to the base '{base}'",
                    _where(link_by_name[ln], "name"), "add a joint to attach it",
                )
            cur = parent_joint[cur].parent
            if cur in seen:
                cyc = seen[seen.index(cur):] + [cur]
                raise ModelError(
                    f"the joints form a cycle ({' → '.join(cyc)})",
                    _where(parent_joint[cur], "parent"), "a tree has no cycles; "
                    "declare closures under `loops:`",
                )
            seen.append(cur)

    movable = [j for j in joints if j.type != "fixed"]
    mov_names = {j.name for j in movable}
    for j in movable:
        if j.mimic is not None:
            master, mult, _off = j.mimic
            if master not in mov_names:
                raise ModelError(
                    f"joint '{j.name}' mimics unknown movable joint '{master}'",
                    _where(j, "mimic"),
                    _did_you_mean(master, mov_names) or "name a movable joint",
                )
            mj = next(x for x in movable if x.name == master)
            if mj.mimic is not None:
                raise ModelError(
                    f"joint '{j.name}' mimics '{master}', which is itself a mimic joint",
                    _where(j, "mimic"), f"mimic '{mj.mimic[0]}' directly",
                )
            if not math.isfinite(mult) or mult == 0.0:
                raise ModelError(
                    f"mimic multiplier of joint '{j.name}' is {mult}",
                    _where(j, "mimic"), "give a finite, non-zero multiplier",
                )
    independent = [j.name for j in movable if j.mimic is None]
    if not independent:
        raise ModelError("the mechanism has no movable joint", here,
                         "add a revolute, continuous or prismatic joint")
    return Tree(link_by_name, list(joints), parent_joint, base, movable, independent)


def lump(tree: Tree, found: list, strict: bool) -> tuple[dict, dict]:
    """Fixed joints merge each child into its parent: link → (body, rotation and position of
    the link in the body's frame), and body → [mass, COM, inertia about the COM] lumped
    (parallel-axis theorem). The moving links' inertias are checked for plausibility into
    ``found`` (``strict``: the first is an error)."""
    link_by_name, joints, base = tree.links, tree.joints, tree.base

    # --- lump fixed joints: each link maps to (body link, transform link→body)
    children: dict[str, list[JointSpec]] = {n: [] for n in link_by_name}
    for j in joints:
        children[j.parent].append(j)
    owner: dict[str, tuple[str, np.ndarray, np.ndarray]] = {base: (base, np.eye(3), np.zeros(3))}
    inert: dict[str, list] = {}
    stack = [base]
    order_visit: list[str] = []
    while stack:
        ln = stack.pop()
        order_visit.append(ln)
        for j in reversed(children[ln]):
            if j.type == "fixed":
                body, r_b, p_b = owner[ln]
                r_j = rpy_matrix(j.origin_rpy)
                owner[j.child] = (body, r_b @ r_j, p_b + r_b @ j.origin_xyz)
            else:
                owner[j.child] = (j.child, np.eye(3), np.zeros(3))
            stack.append(j.child)
    for ln in link_by_name:  # file order; the links fixed to the base are not checked
        if owner[ln][0] != base:
            found.extend(link_plausibility(link_by_name[ln]))
    if strict and found:
        more = f" (strict: 1 of {len(found)} warnings)" if len(found) > 1 else " (strict)"
        raise found[0].error(more)
    for ln, (body, r_b, p_b) in owner.items():
        lk = link_by_name[ln]
        c = p_b + r_b @ np.asarray(lk.com, float)
        inertia = r_b @ np.asarray(lk.inertia, float) @ r_b.T
        if body not in inert:
            inert[body] = [0.0, np.zeros(3), np.zeros((3, 3))]
        m0, c0, i0 = inert[body]
        with np.errstate(over="ignore", invalid="ignore"):  # absurd values: caught as non-finite
            inert[body] = list(lump_inertia(m0, c0, i0, float(lk.mass), c, inertia))

    return owner, inert


def order(tree: Tree, owner: dict) -> list[str]:
    """The bodies, base first, each after its parent (movable joints in file order)."""
    base, movable = tree.base, tree.movable
    # --- bodies: base first, then movable joints' children in an order where parents precede
    body_order = [base]
    placed = {base}
    pending = [j for j in movable]
    while pending:
        rest = []
        for j in pending:
            pb = owner[j.parent][0]
            if pb in placed:
                body_order.append(j.child)
                placed.add(j.child)
            else:
                rest.append(j)
        pending = rest
    return body_order


def pack(name: str, source: str, tree: Tree, owner: dict, inert: dict, body_order: list[str],
         gravity: np.ndarray, here: Where, transmissions: tuple, transmission_where: tuple,
         links: list[LinkSpec], found: list):
    """The :class:`~exo_rt.model.mechanism.Mechanism` arrays of the ordered, lumped bodies."""
    from exo_rt.model.mechanism import Mechanism  # local: mechanism imports this module

    movable, independent = tree.movable, tree.independent
    joint_of_body = {j.child: j for j in movable}
    nb = len(body_order)
    index = {b: i for i, b in enumerate(body_order)}

    parent = np.full(nb, -1, dtype=np.int64)
    jtype = np.zeros(nb, dtype=np.int64)
    qidx = np.full(nb, -1, dtype=np.int64)
    mimic_k = np.ones(nb)
    mimic_c = np.zeros(nb)
    origin_xyz = np.zeros((nb, 3))
    origin_rot = np.tile(np.eye(3), (nb, 1, 1))
    axis = np.zeros((nb, 3))
    mass = np.zeros(nb)
    com = np.zeros((nb, 3))
    inertia = np.zeros((nb, 3, 3))
    tree_joint_names = [""] * nb
    qpos = {n: i for i, n in enumerate(independent)}
    for b, i in index.items():
        mass[i], com[i], inertia[i] = inert.get(b, [0.0, np.zeros(3), np.zeros((3, 3))])
        if i == 0:
            continue
        j = joint_of_body[b]
        pbody, r_b, p_b = owner[j.parent]
        parent[i] = index[pbody]
        jtype[i] = PRISMATIC if j.type == "prismatic" else REVOLUTE
        origin_rot[i] = r_b @ rpy_matrix(j.origin_rpy)
        origin_xyz[i] = p_b + r_b @ np.asarray(j.origin_xyz, float)
        axis[i] = np.asarray(j.axis, float) / np.linalg.norm(j.axis)
        tree_joint_names[i] = j.name
        if j.mimic is None:
            qidx[i] = qpos[j.name]
        else:
            qidx[i] = qpos[j.mimic[0]]
            mimic_k[i] = float(j.mimic[1])
            mimic_c[i] = float(j.mimic[2])

    by_name = {j.name: j for j in movable}
    lim = np.array(
        [[by_name[n].lower, by_name[n].upper, by_name[n].velocity, by_name[n].effort]
         for n in independent]
    )
    mech = Mechanism(
        name=name,
        source=source,
        body_names=tuple(body_order),
        joint_names=tuple(independent),
        tree_joint_names=tuple(tree_joint_names),
        joint_types=tuple(by_name[n].type for n in independent),
        parent=parent,
        joint_type=jtype,
        q_index=qidx,
        mimic_multiplier=mimic_k,
        mimic_offset=mimic_c,
        origin_xyz=origin_xyz,
        origin_rot=origin_rot,
        axis=axis,
        mass=mass,
        com=com,
        inertia=inertia,
        gravity=gravity.copy(),
        lower=lim[:, 0].copy(),
        upper=lim[:, 1].copy(),
        velocity_limit=lim[:, 2].copy(),
        effort_limit=lim[:, 3].copy(),
        total_mass=float(sum(float(lk.mass) for lk in links)),
        transmissions=_check_transmissions(
            tuple(transmissions), tuple(transmission_where), by_name, independent, here
        ),
        warnings=tuple(found),
    )
    return mech


def _check_transmissions(transmissions, wheres, movable, independent, here):
    """Each transmission drives an independent joint through a rotor that mimics it."""
    seen: set[str] = set()
    for n, tr in enumerate(transmissions):
        w = wheres[n] if n < len(wheres) else Where(here.file, here.line, f"transmissions[{n}]")

        def at(key, w=w):
            return Where(w.file, w.line, f"{w.key}.{key}" if w.key else key)

        if tr.joint not in independent:
            raise ModelError(
                f"transmission drives unknown joint '{tr.joint}'", at("joint"),
                _did_you_mean(tr.joint, independent) or f"name one of {', '.join(independent)}",
            )
        if tr.joint in seen:
            raise ModelError(f"joint '{tr.joint}' has two transmissions", at("joint"),
                             "give each joint at most one transmission")
        seen.add(tr.joint)
        if not (tr.drive.ratio >= 1.0) or not math.isfinite(tr.drive.ratio):
            raise ModelError(
                f"ratio {tr.drive.ratio} of the transmission on '{tr.joint}' is below 1",
                at("ratio"), "a harmonic drive reduces speed: ratio N ≥ 1 (e.g. 100)",
            )
        rj = movable.get(tr.rotor_joint)
        if rj is None or rj.mimic is None or rj.mimic[0] != tr.joint:
            raise ModelError(
                f"rotor joint '{tr.rotor_joint}' of the transmission on '{tr.joint}' "
                f"is not a mimic of '{tr.joint}'", at("rotor_joint"),
                f"add <mimic joint=\"{tr.joint}\" multiplier=\"{tr.multiplier:g}\"/> to it",
            )
        if abs(rj.mimic[1] - tr.multiplier) > 1e-12 * abs(tr.multiplier):
            raise ModelError(
                f"rotor joint '{tr.rotor_joint}' mimics with multiplier {rj.mimic[1]:g}, "
                f"the transmission says {tr.multiplier:g}", at("ratio"),
                "make them equal (multiplier = −ratio for a harmonic drive)",
            )
        if tr.motor.torque_constant <= 0 or tr.motor.peak_current <= 0:
            raise ModelError(
                f"motor of the transmission on '{tr.joint}' needs a positive torque constant "
                "and peak current", at("motor"),
                "give torque_constant (N·m/A) and peak_current (A)",
            )
    return transmissions


REVOLUTE = 1
PRISMATIC = 2


def _find_cycle(parent_joint: dict[str, JointSpec]) -> list[str]:
    start = next(iter(parent_joint))
    seen = [start]
    cur = start
    while True:
        cur = parent_joint[cur].parent
        if cur in seen:
            return seen[seen.index(cur):] + [cur]
        seen.append(cur)


def _close(mech, loops, owner, index, link_by_name, here, independent_q, initial):
    """Turn loop specs into packed rows on the lumped bodies and close the mechanism: the
    dynamics' kinematics finds the reference closure and the partition
    (:func:`exo_rt.dynamics.loops.close_loops`), packed here as its :class:`Closure`."""
    import dataclasses

    from exo_rt.dynamics import loops as lmod
    from exo_rt.model.mechanism import Closure

    rows = []
    names = []
    wheres = []
    for n, lp in enumerate(loops):
        w = lp.where or Where(here.file, here.line, f"loops[{n}]")
        if lp.name in names:
            raise ModelError(f"loop '{lp.name}' is defined twice", w, "give loops unique names")
        if lp.kind not in ("point", "revolute"):
            raise ModelError(f"loop '{lp.name}' has unknown type '{lp.kind}'", w,
                             "use point or revolute")
        row = np.zeros(lmod.LOOP_WIDTH)
        row[lmod.LOOP_KIND] = lmod.KIND_REVOLUTE if lp.kind == "revolute" else lmod.KIND_POINT
        for key, body, point, col, bcol in (
            ("body_a", lp.body_a, lp.point_a, lmod.LOOP_PA, lmod.LOOP_A),
            ("body_b", lp.body_b, lp.point_b, lmod.LOOP_PB, lmod.LOOP_B),
        ):
            if body not in link_by_name:
                raise ModelError(
                    f"loop '{lp.name}' names unknown body '{body}'", _where(lp, key),
                    _did_you_mean(body, link_by_name) or "name a link of the tree",
                )
            _check_finite(lp, key.replace("body", "point"), point)
            ob, r_b, p_b = owner[body]
            row[bcol] = index[ob]
            row[col : col + 3] = p_b + r_b @ np.asarray(point, float)
            if key == "body_a":
                ax = np.asarray(lp.axis, float)
                if not np.all(np.isfinite(ax)) or np.linalg.norm(ax) < 1e-9:
                    raise ModelError(f"axis of loop '{lp.name}' is zero or not finite",
                                     Where(w.file, w.line, f"{w.key}.axis"), "give a unit vector")
                row[lmod.LOOP_NA : lmod.LOOP_NA + 3] = r_b @ (ax / np.linalg.norm(ax))
        if row[lmod.LOOP_A] == row[lmod.LOOP_B]:
            raise ModelError(f"loop '{lp.name}' connects body '{lp.body_a}' to itself", w,
                             "a loop closes between two different rigid bodies")
        rows.append(row)
        names.append(lp.name)
        wheres.append(w)
    closure = Closure(names=tuple(names), **lmod.close_loops(
        mech, np.array(rows), names, wheres, independent_q, initial, here))
    return dataclasses.replace(
        mech, joint_names=tuple(mech.coordinate_names[i] for i in closure.independent),
        coordinate_names=mech.coordinate_names, closure=closure,
    )
