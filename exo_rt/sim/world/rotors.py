"""The rotors' reflected inertia, counted once, as MuJoCo can hold it.

exo-rt's rigid model keeps every harmonic drive's rotor (motor rotor + wave generator) as a
body of its own on the circular spline's link P, turning about its axis u by the dependent
coordinate z_r = k·q_j of the output joint j (k = −N or +N; Hidalgo & Rocón, eqs. 23–27). Its
kinetic energy, with ω_P the carrier's angular velocity, I_a the rotor's axial moment and the
rotor's centre of mass on its axis, is

    T_r = T(rotor rigid on P) + k·I_a·q̇_j·(u·ω_P) + ½·k²·I_a·q̇_j².

MuJoCo has no dependent coordinate; its joint ``armature`` adds only the last term. The cross
term couples the joint to every joint above P (the knee's rotor to the hip: k·I_a =
−1.93e-3 kg·m² in ``exo_leg``, 1 % of that entry of M): armature alone misses it. It is
recovered exactly by a rotational inertia c·I_a·u uᵀ (c = k·s, s = u·u_j = ±1) carried by the
output link C, whose angular velocity is ω_P + u_j·q̇_j: its energy ½·c·I_a·(u·ω_P + s·q̇_j)²
holds the cross term, and what it adds elsewhere is taken back from the carrier (−c·I_a·u uᵀ
on P) and from the armature:

    P:  the rotor's mass, COM and inertia, rigid, plus −c·I_a·u uᵀ
    C:  +c·I_a·u uᵀ (no mass)
    j:  armature (k² − c)·I_a

The kinetic and potential energies are then exo-rt's as functions of (q, q̇), term by term, so
the mass matrix and the bias forces are the same (``tests/test_world_model.py``: 1e-9 relative).
This needs what a harmonic drive is: a revolute output joint whose axis is parallel to the
rotor's (coaxial or offset), a rotor axisymmetric about its axis with its centre of mass on
it, carried by the output joint's parent link and carrying nothing. A mimic joint that is not
such a rotor (a URDF ``<mimic>`` linkage) has no MuJoCo equivalent here and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exo_rt.errors import ModelError
from exo_rt.model.mechanism import JOINT_REVOLUTE, Mechanism
from exo_rt.model.topology import lump_inertia

PARALLEL_TOL = 1e-12  # |1 − |u·u_j||: coaxial or parallel axes
SHAPE_RTOL = 1e-9  # relative: the rotor's inertia axisymmetric, its COM on its axis


@dataclass(frozen=True)
class Rotor:
    """One rotor folded into its joint: where its inertia went (SI)."""

    body: int  # the rotor's body in the Mechanism
    joint: int  # the output joint's coordinate (index in q)
    carrier: int  # body P (the rotor's parent = the output joint's parent)
    output: int  # body C (the output joint's child)
    multiplier: float  # k: z_rotor = k·q_joint
    axial: float  # I_a, kg·m²: the rotor's moment about its own axis
    armature: float  # kg·m²: (k² − c)·I_a, on the joint
    link_share: float  # c = k·s: c·I_a·u uᵀ on the output link, −c·I_a·u uᵀ on the carrier


@dataclass(frozen=True)
class RigidBodies:
    """The Mechanism's bodies without its rotors: inertias with the rotors folded in.

    ``bodies`` are Mechanism body indices (the base first, parents before children);
    ``mass``, ``com``, ``inertia`` are per body of the Mechanism (rotor rows unused), in its
    body frames; ``armature`` is per coordinate of q (kg·m² or kg).
    """

    bodies: tuple[int, ...]
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    armature: np.ndarray
    rotors: tuple[Rotor, ...]


def _owner(mech: Mechanism) -> dict[int, int]:
    """Coordinate index → the body whose own joint it is (k = 1, c = 0)."""
    owner = {}
    for b in range(1, mech.n_bodies):
        name = mech.tree_joint_names[b]
        if name in mech.joint_names:
            owner[mech.joint_names.index(name)] = b
    return owner


def _axisymmetric(inertia: np.ndarray, u: np.ndarray) -> tuple[float, bool]:
    """(I_a, whether ``inertia`` = I_a·u uᵀ + I_t·(1 − u uᵀ)) for the unit axis ``u``."""
    axial = float(u @ inertia @ u)
    p = np.eye(3) - np.outer(u, u)
    transverse = 0.5 * float(np.trace(p @ inertia @ p))
    model = axial * np.outer(u, u) + transverse * p
    scale = max(float(np.abs(inertia).max()), 1e-300)
    return axial, bool(np.abs(inertia - model).max() <= SHAPE_RTOL * scale)


def fold_rotors(mech: Mechanism) -> RigidBodies:
    """The Mechanism's rigid bodies with each dependent (mimic) body folded in as a rotor.

    Raises :class:`~exo_rt.errors.ModelError` for what MuJoCo cannot hold this way: loop
    closures, and mimic bodies that are not harmonic-drive rotors (see the module's text).
    """
    if mech.closure is not None:
        raise ModelError(f"'{mech.name}': closed chains (loops:) have no MuJoCo world yet",
                         None, "use a tree")
    mass = np.array(mech.mass, dtype=float)
    com = np.array(mech.com, dtype=float)
    inertia = np.array(mech.inertia, dtype=float)
    armature = np.zeros(mech.nq)
    owner = _owner(mech)
    rotors, keep = [], [0]
    children = {b: [c for c in range(mech.n_bodies) if mech.parent[c] == b]
                for b in range(mech.n_bodies)}
    for b in range(1, mech.n_bodies):
        qi = int(mech.q_index[b])
        if owner.get(qi) == b:
            keep.append(b)
            continue
        rotors.append(_fold_one(mech, b, owner.get(qi), qi, children, mass, com, inertia,
                                armature))
    return RigidBodies(tuple(keep), mass, com, inertia, armature, tuple(rotors))


def _fold_one(mech, b, out, qi, children, mass, com, inertia, armature) -> Rotor:
    name = mech.body_names[b]

    def refuse(why: str):
        raise ModelError(f"'{mech.name}': body '{name}' follows '{mech.joint_names[qi]}' "
                         f"(a mimic joint) but {why}", None,
                         "MuJoCo holds a mimic body only as a harmonic drive's rotor: "
                         "docs/world.md")

    if out is None:
        refuse("no body owns that coordinate")
    if children[b]:
        refuse("carries other bodies")
    if mech.joint_type[b] != JOINT_REVOLUTE or mech.joint_type[out] != JOINT_REVOLUTE:
        refuse("the rotor or its output joint is not revolute")
    carrier = int(mech.parent[b])
    if int(mech.parent[out]) != carrier:
        refuse("it is not carried by the output joint's parent link")
    rot_r, rot_j = mech.origin_rot[b], mech.origin_rot[out]
    u = rot_r @ mech.axis[b]  # the rotor's axis in the carrier's frame
    s = float(u @ (rot_j @ mech.axis[out]))
    if abs(1.0 - abs(s)) > PARALLEL_TOL:
        refuse("its axis is not parallel to the output joint's")
    s = float(np.sign(s))
    ax_r = np.asarray(mech.axis[b], dtype=float)
    off_axis = mech.com[b] - ax_r * float(mech.com[b] @ ax_r)
    if np.linalg.norm(off_axis) > SHAPE_RTOL * max(1.0, float(np.linalg.norm(mech.com[b]))):
        refuse("its centre of mass is off its axis")
    i_a, symmetric = _axisymmetric(mech.inertia[b], ax_r)
    if not symmetric:
        refuse("its inertia is not axisymmetric about its axis")
    k = float(mech.mimic_multiplier[b])
    c = k * s
    # the rotor rigid on its carrier: COM and inertia in the carrier's frame
    m_p, c_p, i_p = lump_inertia(mass[carrier], com[carrier], inertia[carrier], mass[b],
                                 mech.origin_xyz[b] + rot_r @ mech.com[b],
                                 rot_r @ mech.inertia[b] @ rot_r.T)
    mass[carrier], com[carrier] = m_p, c_p
    inertia[carrier] = i_p - c * i_a * np.outer(u, u)
    u_out = np.asarray(mech.axis[out], dtype=float)  # ∥ u, in the output link's frame
    inertia[out] = inertia[out] + c * i_a * np.outer(u_out, u_out)
    arm = (k * k - c) * i_a
    armature[qi] += arm
    return Rotor(b, qi, carrier, int(out), k, i_a, arm, c)
