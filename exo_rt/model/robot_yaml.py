"""Robot YAML → Mechanism; every error names file, line and key.

The file holds either ``urdf:`` (a URDF path) or inline ``bodies:``/``joints:`` in URDF
conventions, plus what URDF cannot say: ``transmissions`` (harmonic drives and motors),
``loops`` (closures) with ``independent``/``initial``, ``include`` (modules mounted on a
body), ``wearer`` (de Leva segments) and ``settings`` (joints fixed at a wearer's setting,
e.g. telescopic links). Its keys, types, ranges and defaults are declared once in
:mod:`exo_rt.schema.robot` (reference: ``docs/config-robot.md``); this module turns a read
file into loader-neutral specs, with the nodes' lines for the errors of
:func:`~exo_rt.model.topology.build_mechanism`.
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
from exo_rt.schema import core
from exo_rt.schema import robot as schema
from exo_rt.yamlio import Node, read_yaml

# the former key tables (key → required), for code that writes robot files: from the schema
_KEY_TABLES = {"BODY_KEYS": "Body", "JOINT_KEYS": "Joint", "TRANSMISSION_KEYS": "Transmission",
               "ROTOR_KEYS": "Rotor", "DRIVE_KEYS": "Drive", "MOTOR_KEYS": "Motor",
               "LOOP_KEYS": "Loop", "INCLUDE_KEYS": "Include", "WEARER_KEYS": "Wearer",
               "SEGMENT_KEYS": "Segment"}


def __getattr__(name: str):
    """``SEGMENT_KEYS`` and the like, read from the schema when asked for (not at import:
    the schema module may itself be importing this package)."""
    if name in _KEY_TABLES:
        return core.keys(getattr(schema, _KEY_TABLES[name]))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def _vec(v) -> np.ndarray:
    return np.array(v, dtype=float)


# ----------------------------------------------------------------------------- parts
@dataclass
class Parts:
    """Everything one file (and its includes) contributes to the robot."""

    links: list[LinkSpec] = field(default_factory=list)
    joints: list[JointSpec] = field(default_factory=list)
    transmissions: list[tuple[Node, schema.Transmission]] = field(default_factory=list)
    loops: list[LoopSpec] = field(default_factory=list)
    independent: list[str] = field(default_factory=list)
    initial: dict[str, float] = field(default_factory=dict)
    settings: list[tuple[str, float, Node]] = field(default_factory=list)
    wearer: tuple[schema.Wearer, Node] | None = None
    name: str = ""
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    base: str | None = None
    base_where: Where | None = None


def _inertia(i: schema.Inertia) -> np.ndarray:
    return inertia_matrix(i.ixx, i.iyy, i.izz, i.ixy, i.ixz, i.iyz)


def _body(b: schema.Body, node: Node) -> LinkSpec:
    m = node.value
    mass, com, inertia = b.mass, _vec(b.com), _inertia(b.inertia)
    for pm, item in _each(b.point_masses, m, "point_masses"):
        if pm[0] < 0:
            raise ModelError(f"point mass {pm[0]} kg is negative", item.where(),
                             "masses are ≥ 0 kg")
        mass, com, inertia = lump_inertia(mass, com, inertia, pm[0], _vec(pm[1:]),
                                          np.zeros((3, 3)))
    key = "mass" if "mass" in m else ("point_masses" if "point_masses" in m else "name")
    return LinkSpec(b.name, mass, com, inertia, Where(node.file, m[key].line, node.key),
                    _lines(m))


def _joint(j: schema.Joint, node: Node) -> JointSpec:
    m = node.value
    spec = JointSpec(j.name, j.type, j.parent, j.child, _vec(j.origin.xyz), _vec(j.origin.rpy),
                     _vec(j.axis), where=Where(node.file, m["name"].line, node.key),
                     lines=_lines(m))
    for k, sub in m["limit"].value.items() if "limit" in m else ():
        if spec.type == "continuous" and k in ("lower", "upper"):
            raise ModelError(f"a continuous joint has no {k} position limit", sub.where(),
                             "remove it, or make the joint revolute")
        setattr(spec, k, getattr(j.limit, k))
    if j.mimic is not None:
        spec.mimic = (j.mimic.joint, j.mimic.multiplier, j.mimic.offset)
    return spec


def _each(values: tuple, top: dict[str, Node], key: str):
    """(value, node) of each item of list ``key`` as read and as written."""
    return zip(values, top[key].value if key in top else (), strict=True)


def _urdf(parts: Parts, node: Node) -> None:
    path = Path(node.file).parent / node.value
    try:
        content = path.read_text(encoding="utf-8")
    except OSError:
        raise ModelError(f"URDF file '{node.value}' not found", node.where(),
                         "give the path relative to this YAML file") from None
    _name, links, joints = read_urdf(content, str(path))
    parts.links.extend(links)
    parts.joints.extend(joints)


def _harmonic_drive(d: schema.Drive, ratio: float) -> HarmonicDrive:
    values = {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}
    values["kinematic_error"] = tuple(tuple(float(x) for x in e) for e in d.kinematic_error)
    return HarmonicDrive(ratio=ratio, **values)


def _motor(m: schema.Motor) -> Motor:
    return Motor(**{f.name: getattr(m, f.name) for f in dataclasses.fields(m)})


def _check_safe_reaction(t: schema.Transmission, m: dict) -> None:
    """The declared SAFE reaction needs its part: a brake, dry gear friction, a winding
    resistance to short the phases through (docs/safety.md)."""
    need = {"brake": (t.motor.brake_torque > 0, "motor.brake_torque > 0 (the power-off "
                                                "brake's holding torque, N·m at the motor)"),
            "friction": (max(t.drive.static, t.drive.coulomb) > 0,
                         "drive.static or drive.coulomb > 0 (the gear's dry friction)"),
            "short_circuit": (t.motor.resistance > 0, "motor.resistance > 0 (the winding's "
                                                      "terminal resistance, Ω)")}
    if t.safe_reaction in need and not need[t.safe_reaction][0]:
        raise ModelError(f"safe_reaction '{t.safe_reaction}' on joint '{t.joint}' needs "
                         f"{need[t.safe_reaction][1]}", m["safe_reaction"].where(),
                         "give that value, or declare the reaction this drive has")


def _resolve_transmissions(parts: Parts) -> tuple[list[Transmission], list[Where]]:
    by_name = {j.name: j for j in parts.joints}
    out, wheres = [], []
    for item, t in parts.transmissions:
        m = item.value
        if (t.rotor is None) == (t.rotor_joint is None):
            raise ModelError("a transmission needs exactly one of 'rotor' (the rotor body, "
                             "added here) and 'rotor_joint' (a <mimic> joint already in the "
                             "URDF)", item.where(), "give one of them")
        if t.joint not in by_name:
            raise ModelError(f"transmission on missing joint '{t.joint}'", m["joint"].where(),
                             did_you_mean(t.joint, by_name) or "name a joint of the robot")
        if t.direction not in (-1.0, 1.0):
            raise ModelError(f"direction must be -1 or 1, got {t.direction}",
                             m["direction"].where(),
                             "-1: circular spline on the parent link, flexspline on the output")
        k = t.direction * t.ratio
        if t.rotor is not None:
            r = t.rotor
            rname = r.name or f"{t.joint}_rotor"
            parts.links.append(LinkSpec(rname, r.mass, _vec(r.com), _inertia(r.inertia),
                                        m["rotor"].value["mass"].where()))
            parts.joints.append(JointSpec(
                f"{rname}_joint", "continuous", by_name[t.joint].parent, rname,
                _vec(r.origin.xyz), _vec(r.origin.rpy), _vec(r.axis), mimic=(t.joint, k, 0.0),
                where=item.where("rotor")))
            rotor_joint, rotor_body = f"{rname}_joint", rname
        else:
            rotor_joint = t.rotor_joint
            if rotor_joint not in by_name:
                raise ModelError(f"rotor joint '{rotor_joint}' is not in the robot",
                                 m["rotor_joint"].where(),
                                 did_you_mean(rotor_joint, by_name) or "name the URDF mimic joint")
            rotor_body = by_name[rotor_joint].child
        _check_safe_reaction(t, m)
        out.append(Transmission(t.joint, rotor_joint, rotor_body, k,
                                _harmonic_drive(t.drive, t.ratio), _motor(t.motor),
                                t.motor_sign, t.safe_reaction))
        wheres.append(item.where())
    return out, wheres


def _include(parts: Parts, inc: schema.Include, item: Node, ctx) -> None:
    m = item.value
    path = Path(item.file).parent / inc.file
    if path.resolve() in ctx:
        chain = " → ".join(p.name for p in [*ctx, path.resolve()])
        raise ModelError(f"include cycle ({chain})", m["file"].where(),
                         "a module must not include itself, directly or through others")
    if not path.exists():
        raise ModelError(f"module file '{inc.file}' not found", m["file"].where(),
                         "give the path relative to this file")
    sub = _read_parts(path, [*ctx, path.resolve()])
    _mount(parts, sub, inc.mount, _vec(inc.origin.xyz), _vec(inc.origin.rpy), inc.prefix,
           item.where())


def _mount(parts: Parts, sub: Parts, mount: str, xyz, rpy, prefix: str, where: Where) -> None:
    """Add a module's parts, its base fixed to body ``mount`` (Chung & Yi's virtual joint)."""
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
    for item, t in sub.transmissions:
        parts.transmissions.append((item, dataclasses.replace(
            t, joint=p(t.joint), rotor_joint=None if t.rotor_joint is None else p(t.rotor_joint))))
    for lp in sub.loops:
        parts.loops.append(LoopSpec(p(lp.name), lp.kind, p(lp.body_a), lp.point_a,
                                    p(lp.body_b), lp.point_b, lp.axis, lp.where))
    parts.independent.extend(p(n) for n in sub.independent)
    parts.initial.update({p(k): v for k, v in sub.initial.items()})
    parts.settings.extend((p(k), v, n) for k, v, n in sub.settings)


def _read_parts(path: Path, ctx: list[Path]) -> Parts:
    """One robot file (and, recursively, its includes) read against the schema."""
    root = read_yaml(path)
    f = core.read(schema.RobotFile, root)
    top = root.value
    if "urdf" in top and ("bodies" in top or "joints" in top):
        raise ModelError("the file has both 'urdf' and inline 'bodies'/'joints'",
                         top["urdf"].where(), "use one of them (additions such as "
                         "transmissions go beside 'urdf')")
    parts = Parts(name=f.name, gravity=_vec(f.gravity), base=f.base,
                  base_where=top["base"].where() if "base" in top else None)
    for key in top:  # in the file's order (bodies and joints keep theirs)
        if key == "urdf":
            _urdf(parts, top["urdf"])
        elif key == "bodies":
            parts.links.extend(_body(b, n) for b, n in _each(f.bodies, top, "bodies"))
        elif key == "joints":
            parts.joints.extend(_joint(j, n) for j, n in _each(f.joints, top, "joints"))
        elif key == "transmissions":
            parts.transmissions.extend((n, t) for t, n in _each(f.transmissions, top,
                                                                   "transmissions"))
        elif key == "loops":
            parts.loops.extend(
                LoopSpec(lp.name, lp.type, lp.body_a, _vec(lp.point_a), lp.body_b,
                         _vec(lp.point_b), _vec(lp.axis),
                         Where(n.file, n.value["name"].line, n.key), _lines(n.value))
                for lp, n in _each(f.loops, top, "loops"))
        elif key == "independent":
            parts.independent.extend(f.independent)
        elif key == "initial":
            parts.initial.update(f.initial)
        elif key == "settings":
            parts.settings.extend((k, v, top["settings"].value[k])
                                  for k, v in f.settings.items())
        elif key == "include":
            for inc, item in _each(f.include, top, "include"):
                _include(parts, inc, item, ctx)
        elif key == "wearer":
            parts.wearer = (f.wearer, top["wearer"])
    return parts


# ----------------------------------------------------------------------------- wearer
def _identified(seg: anthropometry.Segment, s: schema.Segment,
                override: dict) -> anthropometry.Segment:
    """The segment with a bench-identified ``mass`` (kg) and ``com_fraction`` (of the
    proximal → distal length) instead of de Leva's (``exo-rt bench-test inertia``); the radii
    of gyration stay de Leva's, so the inertia scales with the mass."""
    changes = {}
    for key in ("mass", "com_fraction"):
        if key in override:
            changes[key] = float(override[key])
        elif getattr(s, key) is not None:
            changes[key] = getattr(s, key)
    return dataclasses.replace(seg, **changes) if changes else seg


def _apply_wearer(parts: Parts, overrides: dict | None = None) -> list:
    """Add the wearer's segments as links strapped to their bodies; returns
    [(segment name, body, :class:`~exo_rt.model.anthropometry.Segment`)]."""
    if parts.wearer is None:
        return []
    w, node = parts.wearer
    links = {lk.name: lk for lk in parts.links}
    joints = {j.name: j for j in parts.joints}
    added = []
    for s, item in zip(w.segments, node.value["segments"].value, strict=True):
        m = item.value
        seg_name = s.segment
        if seg_name not in anthropometry.DE_LEVA[w.sex]:
            raise ModelError(f"unknown segment '{seg_name}'", m["segment"].where(),
                             f"use one of {', '.join(anthropometry.DE_LEVA[w.sex])}")
        body = s.body
        if body not in links:
            raise ModelError(f"wearer segment on unknown body '{body}'", m["body"].where(),
                             did_you_mean(body, links) or "name a body of the exoskeleton")
        prox = _vec(s.proximal)
        if isinstance(s.distal, str):
            j = joints.get(s.distal)
            if j is None or j.parent != body:
                raise ModelError(f"distal joint '{s.distal}' is not a child joint of "
                                 f"'{body}'", m["distal"].where(), "name the joint at the "
                                 "segment's distal end, or give a point [x, y, z]")
            dist = np.asarray(j.origin_xyz, float)
        else:
            dist = _vec(s.distal)
        length = float(np.linalg.norm(dist - prox))
        if length <= 0:
            raise ModelError("the segment's proximal and distal points coincide", item.where(),
                             "give two different points")
        seg = _identified(anthropometry.segment(seg_name, w.mass, w.height, w.sex, length), s,
                          (overrides or {}).get(seg_name, {}))
        link = anthropometry.segment_link(seg, body, prox, dist, _vec(s.lateral), item.where())
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
