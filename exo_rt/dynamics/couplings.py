"""Constant couplings between tree coordinates: gears and harmonic drives (docs/dynamics.md).

In the controller's (rigid) model a rotor coordinate is dependent, z_rotor = k·q_joint + c,
a constant R_z handled inside the kernels. The plant's (compliant) model *releases* every
rotor into an independent coordinate; the flexspline's compliance then couples it to the joint
(Hidalgo & Rocón §2.3 and its compliant variant, Taghirad & Bélanger 1998).

``mech`` is an :class:`exo_rt.model.mechanism.Mechanism`, read by its attributes and copied
with :func:`dataclasses.replace`: the dynamics sits below the model (docs/architecture.md,
"Layers").
"""

from __future__ import annotations

import dataclasses

import numpy as np


def coupling_matrix(mech) -> np.ndarray:
    """R_z (n_tree × nq): tree velocities ż = R_z q̇, one row per moving body (body order)."""
    rz = np.zeros((mech.n_bodies - 1, mech.nq))
    for i in range(1, mech.n_bodies):
        rz[i - 1, mech.q_index[i]] = mech.mimic_multiplier[i]
    return rz


def released(mech):
    """The same tree with every transmission's rotor as an independent coordinate.

    The released coordinates follow the joints in q, in the order of ``mech.transmissions``
    (their names are the rotor joints'); they have no position limits. Other mimic joints
    (not transmissions) stay dependent. With loops, the rotors join the independent
    coordinates and the loops' partition is kept.
    """
    if not mech.transmissions:
        return mech
    q_index = mech.q_index.copy()
    k = mech.mimic_multiplier.copy()
    c = mech.mimic_offset.copy()
    names = list(mech.coordinate_names)
    types = list(mech.joint_types)
    for tr in mech.transmissions:
        body = mech.tree_joint_names.index(tr.rotor_joint)
        q_index[body] = len(names)
        k[body] = 1.0
        c[body] = 0.0
        names.append(tr.rotor_joint)
        types.append("continuous")
    extra = len(names) - mech.nz
    inf = np.full(extra, np.inf)
    closure = mech.closure
    joint_names = tuple(names)
    if closure is not None:
        # the rotors join the independent coordinates; the loops' partition is unchanged
        new = np.arange(mech.nz, len(names), dtype=np.int64)
        ind = np.concatenate([closure.independent, new])
        nd = len(closure.dependent)
        ref = np.concatenate([
            closure.reference,
            [tr.multiplier * closure.reference[mech.coordinate_names.index(tr.joint)]
             for tr in mech.transmissions],
        ])
        closure = dataclasses.replace(
            closure, independent=ind, reference=ref,
            index=np.concatenate([closure.index[: 2 * nd], ind]).astype(np.int64),
        )
        joint_names = tuple(names[i] for i in ind)
    return dataclasses.replace(
        mech,
        name=f"{mech.name} (released)",
        joint_names=joint_names,
        coordinate_names=tuple(names),
        closure=closure,
        joint_types=tuple(types),
        q_index=q_index,
        mimic_multiplier=k,
        mimic_offset=c,
        lower=np.concatenate([mech.lower, -inf]),
        upper=np.concatenate([mech.upper, inf]),
        velocity_limit=np.concatenate([mech.velocity_limit, inf]),
        effort_limit=np.concatenate([mech.effort_limit, inf]),
    )
