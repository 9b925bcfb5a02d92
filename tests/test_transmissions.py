"""Harmonic-drive / mimic coupling in the rigid model (Hidalgo & Rocón eqs. 23–27).

A rotor (wave generator + motor rotor) is a body on the output joint's parent link whose
coordinate is z_rotor = k·q_joint with k = −N. Our reduced M and h must equal R_zᵀ M_tree R_z
and R_zᵀ h_tree of the *unconstrained* tree (the rotor an ordinary joint) computed by Pinocchio.
"""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.dynamics.couplings import coupling_matrix, released
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism
from exo_rt.model.transmission import HarmonicDrive, Motor, Transmission
from tests.pinref import TreeTwin, assert_close, pin


def _box_inertia(rng, mass):
    d = rng.uniform(0.03, 0.3, 3) ** 2
    r = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return r @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) * mass / 12 @ r.T


def _unit(rng):
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_tree_with_rotors(seed: int, *, rotor_com: float = 0.0, under_rotor: bool = False):
    """A random tree (branches out of depth-first order) with rotors on random joints: their
    centres of mass ``rotor_com`` (m, s.d.) off their axes, ``under_rotor``: a body hung on
    each rotor on a joint of its own (a body below the rotor)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    links = [LinkSpec("base", 2.0, np.zeros(3), np.eye(3) * 0.01)]
    joints = []
    for i in range(1, n + 1):
        m = float(rng.uniform(0.5, 3.0))
        links.append(LinkSpec(f"l{i}", m, rng.normal(0, 0.1, 3), _box_inertia(rng, m)))
        parent = f"l{int(rng.integers(0, i))}" if i > 1 else "base"
        parent = "base" if parent == "l0" else parent
        jt = "prismatic" if rng.random() < 0.15 else "revolute"
        joints.append(JointSpec(f"j{i}", jt, parent, f"l{i}", rng.normal(0, 0.2, 3),
                                rng.uniform(-np.pi, np.pi, 3), _unit(rng)))
    transmissions = []
    motor = Motor(torque_constant=0.05, rated_current=3.0, peak_current=10.0)
    for i in range(1, n + 1):
        if joints[i - 1].type != "revolute" or rng.random() < 0.3:
            continue
        ratio = float(rng.uniform(30, 160))
        k = -ratio if rng.random() < 0.7 else ratio
        mr = float(rng.uniform(0.05, 0.3))
        jz = float(rng.uniform(1e-5, 5e-5))  # a disc: axial m r²/2, transverse ≥ m r²/4
        links.append(LinkSpec(f"rotor{i}", mr, rng.normal(0, rotor_com, 3) if rotor_com else
                              np.zeros(3), np.diag([0.6 * jz, 0.6 * jz, jz])))
        joints.append(JointSpec(f"rotor{i}_joint", "revolute", joints[i - 1].parent, f"rotor{i}",
                                rng.normal(0, 0.1, 3), rng.uniform(-np.pi, np.pi, 3),
                                np.array([0.0, 0.0, 1.0]), mimic=(f"j{i}", k, 0.0)))
        transmissions.append(Transmission(f"j{i}", f"rotor{i}_joint", f"rotor{i}", k,
                                          HarmonicDrive(ratio=ratio), motor))
        if under_rotor:
            links.append(LinkSpec(f"disc{i}", 0.02, rng.normal(0, 0.01, 3), np.eye(3) * 1e-6))
            joints.append(JointSpec(f"disc{i}_joint", "revolute", f"rotor{i}", f"disc{i}",
                                    rng.normal(0, 0.02, 3), rng.uniform(-np.pi, np.pi, 3),
                                    np.array([0.0, 0.0, 1.0])))
    g = _unit(rng) * 9.81
    mech = build_mechanism(f"rotors{seed}", links, joints, g, "test",
                           transmissions=tuple(transmissions))
    return rng, mech


@pytest.mark.parametrize("seed", range(25))
def test_rotor_coupling_equals_reduced_pinocchio_tree(seed):
    rng, mech = random_tree_with_rotors(seed)
    dyn = Dynamics(mech)
    twin = TreeTwin(mech)
    for _ in range(3):
        q, v, a = rng.uniform(-1, 1, mech.nq), rng.normal(0, 1, mech.nq), rng.normal(0, 2, mech.nq)
        m_ref, h_ref, tau_ref = twin.reduced(q, v, a)
        assert_close(dyn.mass_matrix(q), m_ref, 1e-9, "reduced mass matrix")
        assert_close(dyn.bias_forces(q, v), h_ref, 1e-9, "reduced bias forces")
        assert_close(dyn.inverse_dynamics(q, v, a), tau_ref, 1e-9, "reduced inverse dynamics")


def test_coupling_matrix_matches_twin():
    _rng, mech = random_tree_with_rotors(4)
    rz = coupling_matrix(mech)
    assert rz.shape == (mech.n_bodies - 1, mech.nq)
    for tr in mech.transmissions:
        body = mech.tree_joint_names.index(tr.rotor_joint)
        assert rz[body - 1, mech.joint_index(tr.joint)] == tr.multiplier


def test_reflected_inertia_on_the_diagonal():
    """Only the rotor's axial moment J_r changes ⇒ M_jj changes by exactly J_r·N²."""
    rng, mech = random_tree_with_rotors(11)
    assert mech.transmissions
    q = rng.uniform(-1, 1, mech.nq)
    m_with = Dynamics(mech).mass_matrix(q)
    for tr in mech.transmissions:
        body = mech.body_names.index(tr.rotor_body)
        inertia = np.array(mech.inertia)
        j_axial = float(mech.axis[body] @ inertia[body] @ mech.axis[body])
        inertia[body] -= j_axial * np.outer(mech.axis[body], mech.axis[body])
        import dataclasses

        stripped = dataclasses.replace(mech, inertia=inertia)
        m_without = Dynamics(stripped).mass_matrix(q)
        j = mech.joint_index(tr.joint)
        diff = m_with - m_without
        assert diff[j, j] == pytest.approx(j_axial * tr.ratio**2, rel=1e-10)
        others = np.delete(np.delete(diff, j, 0), j, 1)
        assert np.max(np.abs(others)) < 1e-9 * np.max(np.abs(m_with))


@pytest.mark.parametrize("under_rotor", [False, True])
def test_rotor_inertias_equal_pinocchio(under_rotor):
    """What the cycle feeds forward per joint, k²·I_rotor — in closed form for a rotor with
    nothing below it (the parallel-axis theorem), by the mass-matrix kernel otherwise —
    against Pinocchio's mass matrix of the unconstrained tree at the rotor's coordinate."""
    from exo_rt.control.config import rotor_inertias

    for seed in range(8):
        _rng, mech = random_tree_with_rotors(seed, rotor_com=0.01, under_rotor=under_rotor)
        twin = TreeTwin(mech)
        m = pin.crba(twin.model, twin.data, np.zeros(twin.model.nq))
        expected = np.zeros(mech.nq)
        for tr in mech.transmissions:
            col = twin.model.idx_qs[twin.model.getJointId(tr.rotor_joint)]
            expected[mech.joint_index(tr.joint)] = tr.multiplier**2 * m[col, col]
        assert_close(rotor_inertias(mech), expected, 1e-9, f"k²·I_rotor, seed {seed}")
        assert np.count_nonzero(expected) == len(mech.transmissions)


def test_released_mechanism_frees_the_rotors():
    _rng, mech = random_tree_with_rotors(4)
    plant = released(mech)
    assert plant.nq == mech.nq + len(mech.transmissions)
    assert plant.joint_names[mech.nq:] == tuple(t.rotor_joint for t in mech.transmissions)
    # on the constraint manifold the released model gives the same energy as the rigid one
    rng = np.random.default_rng(0)
    q, v = rng.uniform(-1, 1, mech.nq), rng.normal(0, 1, mech.nq)
    qp = np.concatenate([q, [t.multiplier * q[mech.joint_index(t.joint)]
                             for t in mech.transmissions]])
    vp = np.concatenate([v, [t.multiplier * v[mech.joint_index(t.joint)]
                             for t in mech.transmissions]])
    np.testing.assert_allclose(Dynamics(plant).energy(qp, vp), Dynamics(mech).energy(q, v),
                               rtol=1e-12)
