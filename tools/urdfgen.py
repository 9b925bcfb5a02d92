"""URDF text for Pinocchio twins of benchmark mechanisms (tools only; not part of the package).

Two writers, on purpose independent of :mod:`exo_rt.model.urdf`'s exporter so that a twin
checks our loader and packing rather than repeating them:

- :func:`urdf_from_specs` writes the link/joint specs a mechanism was *built from*
  (before :func:`exo_rt.model.topology.build_mechanism` lumps, orders and packs them);
- :func:`urdf_from_mechanism` writes a built :class:`~exo_rt.model.mechanism.Mechanism`
  (one link per body, one joint per movable body), for mechanisms loaded from config files.

Joints are written depth-first from the base (Pinocchio's CRBA is silently wrong on trees
whose joints were added in topological but not depth-first order, docs/dynamics.md). Every number
is written with ``repr(float(x))``, which round-trips a float64 exactly (and never prints
``np.float64(…)``). ``continuous`` joints are written as ``revolute`` with wide limits:
Pinocchio parses continuous joints as unbounded (cos, sin) joints with nq = 2 and nv = 1,
which would break the one-to-one map of coordinates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from exo_rt.model.topology import JointSpec, LinkSpec, matrix_rpy

WIDE = 1.0e4  # stand-in for an absent (infinite) limit; limits do not enter the dynamics


def _f(x) -> str:
    return repr(float(x))


def _v(xs) -> str:
    return " ".join(_f(x) for x in np.asarray(xs, dtype=float).reshape(-1))


def _lim(x: float, default: float) -> str:
    return _f(x) if math.isfinite(x) else _f(default)


def _link_xml(name: str, mass: float, com, inertia) -> str:
    i = np.asarray(inertia, dtype=float)
    return (
        f'  <link name="{name}">\n'
        f"    <inertial>\n"
        f'      <origin xyz="{_v(com)}" rpy="0 0 0"/>\n'
        f'      <mass value="{_f(mass)}"/>\n'
        f'      <inertia ixx="{_f(i[0, 0])}" ixy="{_f(i[0, 1])}" ixz="{_f(i[0, 2])}" '
        f'iyy="{_f(i[1, 1])}" iyz="{_f(i[1, 2])}" izz="{_f(i[2, 2])}"/>\n'
        f"    </inertial>\n"
        f"  </link>\n"
    )


def _joint_xml(name: str, jtype: str, parent: str, child: str, xyz, rpy, axis,
               lower: float = -math.inf, upper: float = math.inf, velocity: float = math.inf,
               effort: float = math.inf, mimic: tuple[str, float, float] | None = None) -> str:
    if jtype == "continuous":
        jtype = "revolute"
    text = (
        f'  <joint name="{name}" type="{jtype}">\n'
        f'    <parent link="{parent}"/>\n'
        f'    <child link="{child}"/>\n'
        f'    <origin xyz="{_v(xyz)}" rpy="{_v(rpy)}"/>\n'
    )
    if jtype != "fixed":
        text += (
            f'    <axis xyz="{_v(axis)}"/>\n'
            f'    <limit lower="{_lim(lower, -WIDE)}" upper="{_lim(upper, WIDE)}" '
            f'velocity="{_lim(velocity, WIDE)}" effort="{_lim(effort, WIDE)}"/>\n'
        )
        if mimic is not None:
            text += (f'    <mimic joint="{mimic[0]}" multiplier="{_f(mimic[1])}" '
                     f'offset="{_f(mimic[2])}"/>\n')
    return text + "  </joint>\n"


def depth_first(joints: Sequence[JointSpec], base: str) -> list[JointSpec]:
    """The joints in depth-first (pre-order) order from ``base``, siblings in input order."""
    children: dict[str, list[JointSpec]] = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j)
    out: list[JointSpec] = []
    stack = list(reversed(children.get(base, [])))
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(reversed(children.get(j.child, [])))
    if len(out) != len(joints):
        raise ValueError(f"joints not reachable from '{base}' (or a cycle)")
    return out


def urdf_from_specs(name: str, links: Sequence[LinkSpec], joints: Sequence[JointSpec],
                    *, mimic: bool = False) -> str:
    """URDF text of a tree given as specs (URDF conventions), joints depth-first.

    The base is the one link that is nobody's child. With ``mimic=False`` (the default) mimic
    joints are written as independent joints; the caller maps coordinates itself.
    """
    children = {j.child for j in joints}
    roots = [lk.name for lk in links if lk.name not in children]
    if len(roots) != 1:
        raise ValueError(f"expected one root link, found {roots}")
    parts = [f'<?xml version="1.0"?>\n<robot name="{name}">\n']
    by_name = {lk.name: lk for lk in links}
    parts.append(_link_xml(roots[0], by_name[roots[0]].mass, by_name[roots[0]].com,
                           by_name[roots[0]].inertia))
    for j in depth_first(joints, roots[0]):
        lk = by_name[j.child]
        parts.append(_link_xml(lk.name, lk.mass, lk.com, lk.inertia))
        parts.append(_joint_xml(j.name, j.type, j.parent, j.child, j.origin_xyz, j.origin_rpy,
                                j.axis, j.lower, j.upper, j.velocity, j.effort,
                                j.mimic if mimic else None))
    parts.append("</robot>\n")
    return "".join(parts)


def urdf_from_mechanism(mech) -> str:
    """URDF text of a built tree mechanism: one link per body, its joint from the parent body.

    Mimic couplings (harmonic-drive rotors) are *not* written: every movable body gets an
    independent joint named as in ``mech.tree_joint_names``; map coordinates with
    ``mech.q_index``, ``mech.mimic_multiplier`` and ``mech.mimic_offset``.
    """
    nb = mech.n_bodies
    kids: dict[int, list[int]] = {}
    for i in range(1, nb):
        kids.setdefault(int(mech.parent[i]), []).append(i)
    order: list[int] = []
    stack = list(reversed(kids.get(0, [])))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(kids.get(i, [])))
    names = mech.body_names
    parts = [f'<?xml version="1.0"?>\n<robot name="{mech.name}">\n',
             _link_xml(names[0], mech.mass[0], mech.com[0], mech.inertia[0])]
    for i in order:
        jtype = "prismatic" if int(mech.joint_type[i]) == 2 else "revolute"
        parts.append(_link_xml(names[i], mech.mass[i], mech.com[i], mech.inertia[i]))
        parts.append(_joint_xml(mech.tree_joint_names[i], jtype, names[int(mech.parent[i])],
                                names[i], mech.origin_xyz[i], matrix_rpy(mech.origin_rot[i]),
                                mech.axis[i]))
    parts.append("</robot>\n")
    return "".join(parts)
