"""URDF → Mechanism, with file:line in every error.

Reads links (``<inertial>``: origin xyz rpy, mass, inertia) and joints (revolute,
continuous, prismatic, fixed: origin, axis, limit, mimic) with the standard library's expat
parser, which knows the line of every element. Visual, collision, transmission, gazebo and
material elements are ignored, as URDF consumers do. Physics and topology checks happen once,
in :func:`exo_rt.model.topology.build_mechanism`.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.errors import ModelError, ModelWarning, Where
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import inertia_matrix, to_float, to_vector
from exo_rt.model.topology import (
    JointSpec,
    LinkSpec,
    _did_you_mean,
    build_mechanism,
    rpy_matrix,
)
from exo_rt.schema.robot import JOINT_TYPES
from exo_rt.yamlio import check_size


@dataclass
class Element:
    """An XML element with the line it starts on."""

    tag: str
    attrib: dict[str, str]
    line: int
    children: list[Element] = field(default_factory=list)

    def find(self, tag: str) -> Element | None:
        return next((c for c in self.children if c.tag == tag), None)


def parse_xml(text: str, source: str) -> Element:
    """Parse XML text into :class:`Element` nodes; ModelError with file:line on bad XML."""
    parser = xml.parsers.expat.ParserCreate()
    stack: list[Element] = []
    root: list[Element] = []

    def start(tag, attrib):
        el = Element(tag, dict(attrib), parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(el)
        else:
            root.append(el)
        stack.append(el)

    def end(_tag):
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as exc:
        raise ModelError(
            f"malformed XML: {xml.parsers.expat.ErrorString(exc.code)}",
            Where(source, exc.lineno), "fix the XML syntax (unclosed tag, stray '<' or '&'?)",
        ) from None
    return root[0]


def _where(source: str, el: Element, key: str) -> Where:
    return Where(source, el.line, key)


def _attr(el: Element, name: str, source: str, key: str, default=None) -> str:
    if name in el.attrib:
        return el.attrib[name]
    if default is not None:
        return default
    raise ModelError(f"<{el.tag}> has no '{name}' attribute", _where(source, el, key),
                     f"add {name}=\"…\"")


def _origin(el: Element | None, source: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    if el is None:
        return np.zeros(3), np.zeros(3)
    xyz = to_vector(el.attrib.get("xyz", "0 0 0"), 3, _where(source, el, f"{key}.origin.xyz"))
    rpy = to_vector(el.attrib.get("rpy", "0 0 0"), 3, _where(source, el, f"{key}.origin.rpy"))
    return xyz, rpy


def _link(el: Element, source: str) -> LinkSpec:
    name = _attr(el, "name", source, "link")
    key = f"link[{name}]"
    spec = LinkSpec(name=name, where=_where(source, el, key), lines={"name": el.line})
    inertial = el.find("inertial")
    if inertial is None:
        return spec
    origin = inertial.find("origin")
    xyz, rpy = _origin(origin, source, f"{key}.inertial")
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise ModelError(f"<inertial> of link '{name}' has no <mass>",
                         _where(source, inertial, f"{key}.inertial"), "add <mass value=\"…\"/>")
    spec.mass = to_float(_attr(mass_el, "value", source, f"{key}.mass"),
                         _where(source, mass_el, f"{key}.mass"))
    spec.com = xyz
    frame_line = (origin if origin is not None else inertial).line
    spec.lines.update(mass=mass_el.line, com=frame_line, inertia=frame_line)
    in_el = inertial.find("inertia")
    if in_el is not None:
        comps = [
            to_float(_attr(in_el, c, source, f"{key}.inertia.{c}", "0"),
                     _where(source, in_el, f"{key}.inertia.{c}"))
            for c in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
        ]
        rot = rpy_matrix(rpy)  # the inertial frame's rpy turns the tensor into the link frame
        spec.inertia = rot @ inertia_matrix(*comps) @ rot.T
        spec.lines["inertia"] = in_el.line
    return spec


def _joint(el: Element, source: str, warnings: list[ModelWarning] | None = None) -> JointSpec:
    name = _attr(el, "name", source, "joint")
    key = f"joint[{name}]"
    w = _where(source, el, key)
    jtype = _attr(el, "type", source, key)
    if jtype in ("floating", "planar") and warnings is not None:
        # a free-flying base (humanoids, quadrupeds): exo-rt's mechanisms have a fixed base
        warnings.append(ModelWarning(
            f"joint '{name}' is {jtype}: loaded as a fixed joint (exo-rt fixes the base to "
            "the world)", _where(source, el, f"{key}.type"),
            "for a fixed-base model, make it type=\"fixed\" (or drop it)"))
        jtype = "fixed"
    if jtype not in JOINT_TYPES:
        hint = ("floating and planar joints are not supported (the base is fixed to the world)"
                if jtype in ("floating", "planar") else f"use one of {', '.join(JOINT_TYPES)}")
        raise ModelError(f"joint '{name}' has unsupported type '{jtype}'",
                         _where(source, el, f"{key}.type"), hint)
    links = {}
    for role in ("parent", "child"):
        r = el.find(role)
        if r is None:
            raise ModelError(f"joint '{name}' has no <{role}>", w, f"add <{role} link=\"…\"/>")
        links[role] = _attr(r, "link", source, f"{key}.{role}")
    xyz, rpy = _origin(el.find("origin"), source, key)
    spec = JointSpec(name=name, type=jtype, parent=links["parent"], child=links["child"],
                     origin_xyz=xyz, origin_rpy=rpy, where=w)
    for tag, keys in (("parent", ("parent",)), ("child", ("child",)),
                      ("origin", ("origin_xyz", "origin_rpy")), ("axis", ("axis",)),
                      ("limit", ("lower", "upper", "velocity", "effort")), ("mimic", ("mimic",))):
        sub = el.find(tag)
        if sub is not None:
            spec.lines.update({k: sub.line for k in keys})
    axis = el.find("axis")
    if axis is not None:
        spec.axis = to_vector(_attr(axis, "xyz", source, f"{key}.axis"), 3,
                              _where(source, axis, f"{key}.axis"))
    limit = el.find("limit")
    if limit is not None:
        for attr in ("lower", "upper", "velocity", "effort"):
            if attr in limit.attrib and not (jtype == "continuous" and attr in ("lower", "upper")):
                setattr(spec, attr, to_float(limit.attrib[attr],
                                             _where(source, limit, f"{key}.limit.{attr}")))
    mimic = el.find("mimic")
    if mimic is not None:
        mw = _where(source, mimic, f"{key}.mimic")
        spec.mimic = (
            _attr(mimic, "joint", source, f"{key}.mimic"),
            to_float(mimic.attrib.get("multiplier", "1"), mw),
            to_float(mimic.attrib.get("offset", "0"), mw),
        )
    return spec


def read_urdf(text: str, source: str) -> tuple[str, list[LinkSpec], list[JointSpec]]:
    """Robot name, link specs and joint specs of a URDF document."""
    _line, name, links, joints = _read_robot(text, source)
    return name, links, joints


def _read_robot(text: str, source: str, warnings: list[ModelWarning] | None = None
                ) -> tuple[int, str, list[LinkSpec], list[JointSpec]]:
    """Line of ``<robot>``, robot name, link specs and joint specs of a URDF document.
    With a ``warnings`` list, floating and planar joints load as fixed joints (one warning)."""
    root = parse_xml(text, source)
    if root.tag != "robot":
        raise ModelError(f"the root element is <{root.tag}>, not <robot>", Where(source, root.line),
                         "a URDF file starts with <robot name=\"…\">")
    links = [_link(el, source) for el in root.children if el.tag == "link"]
    found: list[ModelWarning] = []
    joints = [_joint(el, source, found if warnings is not None else None)
              for el in root.children if el.tag == "joint"]
    if warnings is not None and found:  # say it once
        first = found[0]
        more = f" (and {len(found) - 1} more such joints)" if len(found) > 1 else ""
        warnings.append(ModelWarning(first.what + more, first.where, first.fix))
    if warnings is not None:  # a mimic of a joint that is not there: independent (as Pinocchio)
        movable = {j.name for j in joints if j.type != "fixed"}
        for j in joints:
            if j.mimic is not None and j.type != "fixed" and j.mimic[0] not in movable:
                warnings.append(ModelWarning(
                    f"joint '{j.name}' mimics unknown movable joint '{j.mimic[0]}': loaded as "
                    "an independent joint", Where(source, j.lines.get("mimic", 0),
                                                  f"joint[{j.name}].mimic"),
                    _did_you_mean(j.mimic[0], movable) or "name a movable joint"))
                j.mimic = None
    return root.line, root.attrib.get("name", Path(source).stem), links, joints


def load_urdf(path_or_text: str | Path, *, source: str | None = None,
              gravity=(0.0, 0.0, -9.81), strict: bool = False) -> Mechanism:
    """A :class:`Mechanism` from a URDF file path or URDF text (gravity along −z by default).

    ``path_or_text`` is read as a path if it is a :class:`~pathlib.Path` or a one-line string
    not starting with ``<``; otherwise it is the URDF text itself, and ``source`` (default
    ``<urdf text>``) is the name errors give for it.

    As tolerant as Pinocchio, as strict as safety needs: non-finite numbers and negative
    masses are errors; implausible inertias of moving links and floating/planar joints (the
    base is fixed) load with warnings in ``Mechanism.warnings``, which ``strict`` refuses.
    """
    text, src = _read_text(path_or_text, source)
    warnings: list[ModelWarning] = []
    line, name, links, joints = _read_robot(text, src, warnings)
    return build_mechanism(name, links, joints, np.asarray(gravity, float), src,
                           source_where=Where(src, line), warnings=tuple(warnings),
                           strict=strict)


def _read_text(path_or_text, source: str | None) -> tuple[str, str]:
    s = str(path_or_text)
    if isinstance(path_or_text, Path) or (not s.lstrip().startswith("<") and "\n" not in s):
        path = Path(s)
        check_size(path, "URDF")  # refused before it is parsed (docs/config.md)
        try:
            return path.read_text(encoding="utf-8"), source or str(path)
        except FileNotFoundError:
            raise ModelError("file not found", Where(str(path)),
                             "check the path (relative paths start at the current directory)"
                             ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read the file ({exc})", Where(str(path)),
                             "give a readable UTF-8 text file") from None
    return s, source or "<urdf text>"


def write_urdf(mech, *, mimic: bool = True, limits: bool = True) -> str:
    """URDF text of a mechanism's tree, body by body (fixed joints already lumped).

    ``mimic=False`` writes dependent coordinates (rotors) as ordinary joints: the
    unconstrained tree, e.g. for an independent dynamics library. Joints without limits get
    wide ones (±1e9) rather than ``continuous``, so every joint has one configuration
    variable. Loop closures are not expressible in URDF and are left out.
    """
    from exo_rt.model.topology import matrix_rpy

    def f(v) -> str:
        return " ".join(repr(float(x)) for x in np.ravel(v))

    out = [f'<robot name="{mech.name}">']
    for i, b in enumerate(mech.body_names):
        j = [float(x) for x in np.ravel(mech.inertia[i])]
        out.append(
            f'  <link name="{b}">\n    <inertial>\n      <origin xyz="{f(mech.com[i])}"/>\n'
            f'      <mass value="{float(mech.mass[i])!r}"/>\n'
            f'      <inertia ixx="{j[0]!r}" ixy="{j[1]!r}" ixz="{j[2]!r}" iyy="{j[4]!r}" '
            f'iyz="{j[5]!r}" izz="{j[8]!r}"/>\n    </inertial>\n  </link>'
        )
    by_coord = {n: i for i, n in enumerate(mech.coordinate_names)}
    wide = '    <limit lower="-1e9" upper="1e9" effort="1e9" velocity="1e9"/>\n'
    for i in range(1, mech.n_bodies):
        name = mech.tree_joint_names[i]
        jt = "prismatic" if mech.joint_type[i] == 2 else "revolute"
        c = by_coord.get(name)
        if mimic and c is None:
            master = mech.coordinate_names[mech.q_index[i]]
            extra = (f'    <mimic joint="{master}" multiplier="{float(mech.mimic_multiplier[i])!r}"'
                     f' offset="{float(mech.mimic_offset[i])!r}"/>\n')
            extra = (wide if jt == "prismatic" else "") + extra
            jt = "continuous" if jt == "revolute" else jt
        elif limits and c is not None and np.isfinite(mech.lower[c]) and np.isfinite(mech.upper[c]):
            extra = (f'    <limit lower="{float(mech.lower[c])!r}" '
                     f'upper="{float(mech.upper[c])!r}" '
                     f'effort="{float(min(mech.effort_limit[c], 1e9))!r}" '
                     f'velocity="{float(min(mech.velocity_limit[c], 1e9))!r}"/>\n')
        else:
            extra = wide  # no limits (or unknown): wide ones keep every joint a 1-DOF joint
        out.append(
            f'  <joint name="{name}" type="{jt}">\n'
            f'    <parent link="{mech.body_names[mech.parent[i]]}"/>\n'
            f'    <child link="{mech.body_names[i]}"/>\n'
            f'    <origin xyz="{f(mech.origin_xyz[i])}" '
            f'rpy="{f(matrix_rpy(mech.origin_rot[i]))}"/>\n'
            f'    <axis xyz="{f(mech.axis[i])}"/>\n{extra}  </joint>'
        )
    out.append("</robot>")
    return "\n".join(out) + "\n"
