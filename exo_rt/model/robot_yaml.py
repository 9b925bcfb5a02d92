"""Robot YAML → Mechanism (DESIGN §3.1, §3.3–§3.5); every error names file, line and key.

The file holds either ``urdf:`` (a URDF path) or inline ``bodies:``/``joints:`` in URDF
conventions, plus what URDF cannot say: ``transmissions`` (harmonic drives and motors),
``loops`` (closures) with ``independent``/``initial``, ``include`` (modules mounted on a body,
seed 002), ``wearer`` (de Leva segments, seed 001) and ``settings`` (joints fixed at a
wearer's setting, e.g. telescopic links). Each top-level section is one small parser
registered in :data:`SECTIONS`; the reference of every key is ``docs/config-robot.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.errors import ModelError, Where
from exo_rt.model import anthropometry
from exo_rt.model.parsing import did_you_mean, inertia_matrix
from exo_rt.model.topology import (
    JointSpec,
    LinkSpec,
    LoopSpec,
    axis_rotation,
    build_mechanism,
    lump_inertia,
    matrix_rpy,
    rpy_matrix,
)
from exo_rt.model.transmission import HarmonicDrive, Motor, Transmission
from exo_rt.model.urdf import read_urdf
from exo_rt.yamlio import Node, mapping, number, read_yaml, sequence, text, vector


def _lines(m: dict[str, Node]) -> dict[str, int]:
    """key → line of a mapping's entries, with nested origin/limit keys flattened."""
    lines = {k: v.line for k, v in m.items()}
    for outer, inner in (("origin", {"xyz": "origin_xyz", "rpy": "origin_rpy"}),
                         ("limit", {k: k for k in ("lower", "upper", "velocity", "effort")})):
        if outer in m and isinstance(m[outer].value, dict):
            for k, v in m[outer].value.items():
                if k in inner:
                    lines[inner[k]] = v.line
    return lines


def _opt(m: dict[str, Node], key: str, default, conv):
    return conv(m[key]) if key in m else default


# ----------------------------------------------------------------------------- parts
@dataclass
class Parts:
    """Everything one file (and its includes) contributes to the robot."""

    links: list[LinkSpec] = field(default_factory=list)
    joints: list[JointSpec] = field(default_factory=list)
    transmissions: list[tuple[Node, dict]] = field(default_factory=list)
    loops: list[LoopSpec] = field(default_factory=list)
    independent: list[str] = field(default_factory=list)
    initial: dict[str, float] = field(default_factory=dict)
    settings: list[tuple[str, float, Node]] = field(default_factory=list)
    wearer: Node | None = None
    name: str = ""
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    base: str | None = None
    base_where: Where | None = None


def _origin(m: dict[str, Node], key: str = "origin") -> tuple[np.ndarray, np.ndarray]:
    if key not in m:
        return np.zeros(3), np.zeros(3)
    o = mapping(m[key], {"xyz": False, "rpy": False}, key)
    return _opt(o, "xyz", np.zeros(3), vector), _opt(o, "rpy", np.zeros(3), vector)


def _inertia(node: Node) -> np.ndarray:
    allowed = {k: False for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
    m = mapping(node, allowed, "inertia")
    return inertia_matrix(*(number(m[k]) if k in m else 0.0 for k in allowed))


def _point_masses(node: Node) -> tuple[float, np.ndarray, np.ndarray]:
    mass, com, inertia = 0.0, np.zeros(3), np.zeros((3, 3))
    for item in sequence(node, "point_masses"):
        m, x, y, z = vector(item, 4)
        if m < 0:
            raise ModelError(f"point mass {m} kg is negative", item.where(), "masses are ≥ 0 kg")
        mass, com, inertia = lump_inertia(mass, com, inertia, m, np.array([x, y, z]),
                                          np.zeros((3, 3)))
    return mass, com, inertia


BODY_KEYS = {"name": True, "mass": False, "com": False, "inertia": False, "point_masses": False}


def _body(node: Node) -> LinkSpec:
    m = mapping(node, BODY_KEYS, "a body")
    name = text(m["name"])
    mass = _opt(m, "mass", 0.0, number)
    com = _opt(m, "com", np.zeros(3), vector)
    inertia = _opt(m, "inertia", np.zeros((3, 3)), _inertia)
    if "point_masses" in m:
        mass, com, inertia = lump_inertia(mass, com, inertia, *_point_masses(m["point_masses"]))
    key = "mass" if "mass" in m else ("point_masses" if "point_masses" in m else "name")
    return LinkSpec(name, mass, com, inertia, Where(node.file, m[key].line, node.key),
                    _lines(m))


JOINT_KEYS = {"name": True, "type": True, "parent": True, "child": True, "origin": False,
              "axis": False, "limit": False, "mimic": False}


def _joint(node: Node) -> JointSpec:
    m = mapping(node, JOINT_KEYS, "a joint")
    xyz, rpy = _origin(m)
    spec = JointSpec(text(m["name"]), text(m["type"]), text(m["parent"]), text(m["child"]),
                     xyz, rpy, where=Where(node.file, m["name"].line, node.key), lines=_lines(m))
    if "axis" in m:
        spec.axis = vector(m["axis"])
    if "limit" in m:
        lim = mapping(m["limit"], {"lower": False, "upper": False, "velocity": False,
                                   "effort": False}, "limit")
        for k, sub in lim.items():
            if spec.type == "continuous" and k in ("lower", "upper"):
                raise ModelError(f"a continuous joint has no {k} position limit", sub.where(),
                                 "remove it, or make the joint revolute")
            setattr(spec, k, number(sub, allow_inf=True))
    if "mimic" in m:
        mm = mapping(m["mimic"], {"joint": True, "multiplier": False, "offset": False}, "mimic")
        spec.mimic = (text(mm["joint"]), _opt(mm, "multiplier", 1.0, number),
                      _opt(mm, "offset", 0.0, number))
    return spec


def _sec_name(parts: Parts, node: Node, ctx) -> None:
    parts.name = text(node)


def _sec_gravity(parts: Parts, node: Node, ctx) -> None:
    parts.gravity = vector(node)


def _sec_base(parts: Parts, node: Node, ctx) -> None:
    parts.base = text(node)
    parts.base_where = node.where()


def _sec_urdf(parts: Parts, node: Node, ctx) -> None:
    path = Path(node.file).parent / text(node)
    try:
        content = path.read_text(encoding="utf-8")
    except OSError:
        raise ModelError(f"URDF file '{node.value}' not found", node.where(),
                         "give the path relative to this YAML file") from None
    _name, links, joints = read_urdf(content, str(path))
    parts.links.extend(links)
    parts.joints.extend(joints)


def _sec_bodies(parts: Parts, node: Node, ctx) -> None:
    parts.links.extend(_body(b) for b in sequence(node, "bodies"))


def _sec_joints(parts: Parts, node: Node, ctx) -> None:
    parts.joints.extend(_joint(j) for j in sequence(node, "joints"))


TRANSMISSION_KEYS = {"joint": True, "type": False, "ratio": True, "direction": False,
                     "rotor": False, "rotor_joint": False, "drive": False, "motor": True,
                     "motor_sign": False}
ROTOR_KEYS = {"name": False, "mass": True, "inertia": True, "com": False, "origin": False,
              "axis": False}
DRIVE_KEYS = {"k1": False, "k2": False, "k3": False, "t1": False, "t2": False, "cubic": False,
              "hysteresis": False, "coulomb": False, "static": False, "viscous": False,
              "stribeck_velocity": False, "load_friction": False, "efficiency": False,
              "kinematic_error": False,
              "catalogue": False}
MOTOR_KEYS = {"name": False, "torque_constant": True, "rated_current": True,
              "peak_current": True, "resistance": False, "inductance": False, "voltage": False,
              "current_bandwidth_hz": False, "brake_torque": False}


def _sec_transmissions(parts: Parts, node: Node, ctx) -> None:
    for item in sequence(node, "transmissions"):
        m = mapping(item, TRANSMISSION_KEYS, "a transmission")
        kind = _opt(m, "type", "harmonic_drive", text)
        if kind != "harmonic_drive":
            raise ModelError(f"unknown transmission type '{kind}'", m["type"].where(),
                             "use harmonic_drive (a gear is a harmonic drive without compliance)")
        if ("rotor" in m) == ("rotor_joint" in m):
            raise ModelError("a transmission needs exactly one of 'rotor' (the rotor body, "
                             "added here) and 'rotor_joint' (a <mimic> joint already in the "
                             "URDF)", item.where(), "give one of them")
        parts.transmissions.append((item, m))


def _harmonic_drive(m: dict[str, Node], ratio: float) -> HarmonicDrive:
    args: dict = {"ratio": ratio}
    if "drive" in m:
        d = mapping(m["drive"], DRIVE_KEYS, "drive")
        for k, sub in d.items():
            if k == "catalogue":
                text(sub)
            elif k == "cubic":
                args[k] = bool(sub.value)
            elif k == "kinematic_error":
                args[k] = tuple(tuple(vector(e, 2))
                                for e in sequence(sub, "kinematic_error"))
            else:
                args[k] = number(sub, allow_inf=True)
                if args[k] < 0:
                    raise ModelError(f"{k} = {args[k]} is negative", sub.where(),
                                     "drive parameters are magnitudes (≥ 0)")
    return HarmonicDrive(**args)


def _motor(node: Node) -> Motor:
    m = mapping(node, MOTOR_KEYS, "motor")
    args = {k: (text(v) if k == "name" else number(v, allow_inf=True)) for k, v in m.items()}
    if args.get("brake_torque", 0.0) < 0.0 or args.get("brake_torque", 0.0) == float("inf"):
        raise ModelError(f"brake_torque = {args['brake_torque']} N·m is not a holding torque",
                         m["brake_torque"].where(), "write the brake's holding torque "
                         "(N·m at the motor shaft, ≥ 0; 0: no brake)")
    return Motor(**args)


def _resolve_transmissions(parts: Parts) -> tuple[list[Transmission], list[Where]]:
    by_name = {j.name: j for j in parts.joints}
    out, wheres = [], []
    for item, m in parts.transmissions:
        joint = text(m["joint"])
        if joint not in by_name:
            raise ModelError(f"transmission on missing joint '{joint}'", m["joint"].where(),
                             did_you_mean(joint, by_name) or "name a joint of the robot")
        ratio = number(m["ratio"])
        if not ratio >= 1.0:
            raise ModelError(f"ratio {ratio} is below 1", m["ratio"].where(),
                             "a harmonic drive reduces speed: ratio N ≥ 1 (e.g. 100)")
        direction = _opt(m, "direction", -1.0, number)
        if direction not in (-1.0, 1.0):
            raise ModelError(f"direction must be -1 or 1, got {direction}", m["direction"].where(),
                             "-1: circular spline on the parent link, flexspline on the output")
        k = direction * ratio
        if "rotor" in m:
            r = mapping(m["rotor"], ROTOR_KEYS, "rotor")
            rname = _opt(r, "name", f"{joint}_rotor", text)
            xyz, rpy = _origin(r)
            parts.links.append(LinkSpec(rname, number(r["mass"]), _opt(r, "com", np.zeros(3),
                                        vector), _inertia(r["inertia"]), r["mass"].where()))
            parts.joints.append(JointSpec(
                f"{rname}_joint", "continuous", by_name[joint].parent, rname, xyz, rpy,
                _opt(r, "axis", np.array([0.0, 0.0, 1.0]), vector), mimic=(joint, k, 0.0),
                where=item.where("rotor")))
            rotor_joint, rotor_body = f"{rname}_joint", rname
        else:
            rotor_joint = text(m["rotor_joint"])
            if rotor_joint not in by_name:
                raise ModelError(f"rotor joint '{rotor_joint}' is not in the robot",
                                 m["rotor_joint"].where(),
                                 did_you_mean(rotor_joint, by_name) or "name the URDF mimic joint")
            rotor_body = by_name[rotor_joint].child
        out.append(Transmission(joint, rotor_joint, rotor_body, k, _harmonic_drive(m, ratio),
                                _motor(m["motor"]), _opt(m, "motor_sign", 1.0, number)))
        wheres.append(item.where())
    return out, wheres


LOOP_KEYS = {"name": True, "type": False, "body_a": True, "point_a": True, "body_b": True,
             "point_b": True, "axis": False}


def _sec_loops(parts: Parts, node: Node, ctx) -> None:
    for item in sequence(node, "loops"):
        m = mapping(item, LOOP_KEYS, "a loop")
        parts.loops.append(LoopSpec(
            text(m["name"]), _opt(m, "type", "revolute", text), text(m["body_a"]),
            vector(m["point_a"]), text(m["body_b"]), vector(m["point_b"]),
            _opt(m, "axis", np.array([0.0, 0.0, 1.0]), vector),
            Where(item.file, m["name"].line, item.key), _lines(m)))


def _sec_independent(parts: Parts, node: Node, ctx) -> None:
    parts.independent.extend(text(n) for n in sequence(node, "independent"))


def _sec_initial(parts: Parts, node: Node, ctx) -> None:
    if not isinstance(node.value, dict):
        raise ModelError("initial must map joint names to values", node.where(),
                         "e.g. initial: {knee: 0.3}")
    parts.initial.update({k: number(v) for k, v in node.value.items()})


def _sec_settings(parts: Parts, node: Node, ctx) -> None:
    if not isinstance(node.value, dict):
        raise ModelError("settings must map joint names to values", node.where(),
                         "e.g. settings: {thigh_length: 0.03}")
    parts.settings.extend((k, number(v), v) for k, v in node.value.items())


def _sec_wearer(parts: Parts, node: Node, ctx) -> None:
    parts.wearer = node


INCLUDE_KEYS = {"file": True, "mount": True, "origin": False, "prefix": False}


def _sec_include(parts: Parts, node: Node, ctx) -> None:
    for item in sequence(node, "include"):
        m = mapping(item, INCLUDE_KEYS, "an include")
        path = Path(item.file).parent / text(m["file"])
        if path.resolve() in ctx:
            chain = " → ".join(p.name for p in [*ctx, path.resolve()])
            raise ModelError(f"include cycle ({chain})", m["file"].where(),
                             "a module must not include itself, directly or through others")
        if not path.exists():
            raise ModelError(f"module file '{m['file'].value}' not found", m["file"].where(),
                             "give the path relative to this file")
        sub = _read_parts(path, [*ctx, path.resolve()])
        prefix = _opt(m, "prefix", "", lambda n: str(n.value))
        _mount(parts, sub, text(m["mount"]), *_origin(m), prefix, item.where())


def _mount(parts: Parts, sub: Parts, mount: str, xyz, rpy, prefix: str, where: Where) -> None:
    """Add a module's parts, its base fixed to body ``mount`` (seed 002's virtual joint)."""
    if not sub.links:
        raise ModelError("the module has no bodies", where, "describe the module's bodies")
    children = {j.child for j in sub.joints}
    roots = [lk.name for lk in sub.links if lk.name not in children]
    base = sub.base or (roots[0] if len(roots) == 1 else None)
    if base is None:
        raise ModelError("the module has no single base body", where,
                         "give the module file a 'base:'")

    def p(n: str) -> str:
        return prefix + n

    for lk in sub.links:
        parts.links.append(LinkSpec(p(lk.name), lk.mass, lk.com, lk.inertia, lk.where))
    for j in sub.joints:
        mimic = None if j.mimic is None else (p(j.mimic[0]), j.mimic[1], j.mimic[2])
        parts.joints.append(JointSpec(p(j.name), j.type, p(j.parent), p(j.child), j.origin_xyz,
                                      j.origin_rpy, j.axis, j.lower, j.upper, j.velocity,
                                      j.effort, mimic, j.where))
    parts.joints.append(JointSpec(f"{p(base)}_mount", "fixed", mount, p(base), xyz, rpy,
                                  where=where))
    for item, m in sub.transmissions:
        renamed = dict(m)
        renamed["joint"] = Node(p(text(m["joint"])), m["joint"].file, m["joint"].line,
                                m["joint"].key)
        if "rotor_joint" in m:
            renamed["rotor_joint"] = Node(p(text(m["rotor_joint"])), m["rotor_joint"].file,
                                          m["rotor_joint"].line, m["rotor_joint"].key)
        parts.transmissions.append((item, renamed))
    for lp in sub.loops:
        parts.loops.append(LoopSpec(p(lp.name), lp.kind, p(lp.body_a), lp.point_a,
                                    p(lp.body_b), lp.point_b, lp.axis, lp.where))
    parts.independent.extend(p(n) for n in sub.independent)
    parts.initial.update({p(k): v for k, v in sub.initial.items()})
    parts.settings.extend((p(k), v, n) for k, v, n in sub.settings)


SECTIONS = {
    "name": _sec_name,
    "gravity": _sec_gravity,
    "base": _sec_base,
    "urdf": _sec_urdf,
    "bodies": _sec_bodies,
    "joints": _sec_joints,
    "transmissions": _sec_transmissions,
    "loops": _sec_loops,
    "independent": _sec_independent,
    "initial": _sec_initial,
    "settings": _sec_settings,
    "include": _sec_include,
    "wearer": _sec_wearer,
}


def _read_parts(path: Path, ctx: list[Path]) -> Parts:
    root = read_yaml(path)
    allowed = {k: k == "name" for k in SECTIONS}
    top = mapping(root, allowed, "the robot file")
    if "urdf" in top and ("bodies" in top or "joints" in top):
        raise ModelError("the file has both 'urdf' and inline 'bodies'/'joints'",
                         top["urdf"].where(), "use one of them (additions such as "
                         "transmissions go beside 'urdf')")
    parts = Parts()
    for key, node in top.items():
        SECTIONS[key](parts, node, ctx)
    return parts


# ----------------------------------------------------------------------------- wearer
WEARER_KEYS = {"mass": True, "height": True, "sex": True, "segments": True}
SEGMENT_KEYS = {"segment": True, "body": True, "proximal": False, "distal": True,
                "lateral": False, "mass": False, "com_fraction": False}


def _identified(seg: anthropometry.Segment, s: dict[str, Node],
                override: dict) -> anthropometry.Segment:
    """The segment with a bench-identified ``mass`` (kg) and ``com_fraction`` (of the
    proximal → distal length) instead of de Leva's (``exo-rt bench-test inertia``); the radii
    of gyration stay de Leva's, so the inertia scales with the mass."""
    changes = {}
    for key in ("mass", "com_fraction"):
        if key in override:
            changes[key] = float(override[key])
        elif key in s:
            changes[key] = number(s[key])
            if not (changes[key] > 0.0 if key == "mass" else 0.0 <= changes[key] <= 1.0):
                raise ModelError(f"wearer segment {key} {changes[key]} is out of range",
                                 s[key].where(), "give a mass > 0 kg and a com_fraction in 0…1")
    return dataclasses.replace(seg, **changes) if changes else seg


def _apply_wearer(parts: Parts, overrides: dict | None = None) -> list:
    """Add the wearer's segments as links strapped to their bodies; returns
    [(segment name, body, :class:`~exo_rt.model.anthropometry.Segment`)]."""
    node = parts.wearer
    if node is None:
        return []
    m = mapping(node, WEARER_KEYS, "wearer")
    mass, height = number(m["mass"]), number(m["height"])
    lo, hi = anthropometry.HEIGHT_RANGE
    if not lo <= height <= hi:
        raise ModelError(f"wearer height {height} m is outside {lo}–{hi} m", m["height"].where(),
                         "give the height in metres (e.g. 1.75); the de Leva tables are for adults")
    lo, hi = anthropometry.MASS_RANGE
    if not lo <= mass <= hi:
        raise ModelError(f"wearer mass {mass} kg is outside {lo}–{hi} kg", m["mass"].where(),
                         "give the body mass in kilograms (e.g. 75)")
    sex = text(m["sex"])
    if sex not in anthropometry.DE_LEVA:
        raise ModelError(f"sex '{sex}' is not in the de Leva table", m["sex"].where(),
                         "use male or female")
    links = {lk.name: lk for lk in parts.links}
    joints = {j.name: j for j in parts.joints}
    added = []
    for item in sequence(m["segments"], "segments"):
        s = mapping(item, SEGMENT_KEYS, "a wearer segment")
        seg_name = text(s["segment"])
        if seg_name not in anthropometry.DE_LEVA[sex]:
            raise ModelError(f"unknown segment '{seg_name}'", s["segment"].where(),
                             f"use one of {', '.join(anthropometry.DE_LEVA[sex])}")
        body = text(s["body"])
        if body not in links:
            raise ModelError(f"wearer segment on unknown body '{body}'", s["body"].where(),
                             did_you_mean(body, links) or "name a body of the exoskeleton")
        prox = _opt(s, "proximal", np.zeros(3), vector)
        dist_node = s["distal"]
        if isinstance(dist_node.value, str):
            j = joints.get(dist_node.value)
            if j is None or j.parent != body:
                raise ModelError(f"distal joint '{dist_node.value}' is not a child joint of "
                                 f"'{body}'", dist_node.where(), "name the joint at the segment's "
                                 "distal end, or give a point [x, y, z]")
            dist = np.asarray(j.origin_xyz, float)
        else:
            dist = vector(dist_node)
        length = float(np.linalg.norm(dist - prox))
        if length <= 0:
            raise ModelError("the segment's proximal and distal points coincide", item.where(),
                             "give two different points")
        seg = _identified(anthropometry.segment(seg_name, mass, height, sex, length), s,
                          (overrides or {}).get(seg_name, {}))
        link = anthropometry.segment_link(seg, body, prox, dist,
                                          _opt(s, "lateral", np.array([0.0, 1.0, 0.0]), vector),
                                          item.where())
        link.name = f"{body}_wearer_{seg_name}"
        parts.links.append(link)
        parts.joints.append(JointSpec(f"{link.name}_strap", "fixed", body, link.name,
                                      where=item.where()))
        added.append((seg_name, body, seg))
    return added


def _apply_settings(parts: Parts) -> None:
    """Joints fixed at a wearer's setting become fixed joints at that displacement."""
    by_name = {j.name: j for j in parts.joints}
    for name, value, node in parts.settings:
        j = by_name.get(name)
        if j is None or j.type == "fixed":
            raise ModelError(f"setting for unknown movable joint '{name}'", node.where(),
                             did_you_mean(name, by_name) or "name a revolute or prismatic joint")
        if not (j.lower <= value <= j.upper):
            raise ModelError(f"setting {value} of '{name}' is outside its limits "
                             f"[{j.lower}, {j.upper}]", node.where(), "choose a value in range")
        rot = rpy_matrix(j.origin_rpy)
        axis = np.asarray(j.axis, float) / max(np.linalg.norm(j.axis), 1e-300)
        if j.type == "prismatic":
            j.origin_xyz = np.asarray(j.origin_xyz, float) + rot @ axis * value
        else:
            j.origin_rpy = matrix_rpy(rot @ axis_rotation(axis, value))
        j.type = "fixed"


def wearer_segments(path: str | Path) -> list:
    """The wearer's segments of a robot file: [(segment, body, Segment)] with their masses (kg)
    and COM fractions as the file gives them (de Leva's, or identified values)."""
    path = Path(path)
    parts = _read_parts(path, [path.resolve()])
    _apply_settings(parts)
    return _apply_wearer(parts)


def load_robot_yaml(path: str | Path, *, wearer: bool = True, segments: dict | None = None,
                    strict: bool = False):
    """A :class:`Mechanism` from a robot YAML file (schema: docs/config-robot.md).

    ``wearer=False`` leaves the wearer's segments out: the exoskeleton alone (what a
    transparent law compensates). ``segments`` ({segment: {"mass": kg, "com_fraction": f}})
    overrides wearer segments' values (the inertia identification's candidates).
    """
    path = Path(path)
    parts = _read_parts(path, [path.resolve()])
    if not wearer:
        parts.wearer = None
    shown = str(path)
    if not parts.name:
        raise ModelError("the robot has no name", Where(shown, 1, "name"), "add 'name: …'")
    _apply_settings(parts)
    _apply_wearer(parts, segments)
    transmissions, t_where = _resolve_transmissions(parts)
    return build_mechanism(
        parts.name, parts.links, parts.joints, parts.gravity, shown, base=parts.base,
        source_where=Where(shown, 1), transmissions=tuple(transmissions),
        transmission_where=tuple(t_where), loops=tuple(parts.loops),
        independent_q=tuple(parts.independent), initial=parts.initial or None, strict=strict,
    )
