"""Closed chains against an independent computation (Hidalgo & Rocón §2.2, Coutinho 2015).

Reference: Lagrange multipliers on the *open* tree, with the tree's M and h from Pinocchio and
the constraint Jacobian and its bias γ = Φ̇_z ż from Pinocchio's joint placements, Jacobians
and classical accelerations — none of it from exo-rt's kernels:

    M z̈ + h − Φ_zᵀ λ = τ_z (τ_z = τ on the independent coordinates, 0 on the dependent ones)
    Φ_z z̈ = −γ
"""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics, loops
from exo_rt.errors import ModelError
from exo_rt.model.topology import JointSpec, LinkSpec, LoopSpec, build_mechanism
from tests.pinref import LagrangeReference

Z = np.array([0.0, 0.0, 1.0])


def _rod(name: str, mass: float, length: float) -> LinkSpec:
    """A slender rod along x: COM at mid-length, m L²/12 about y and z, a thin-rod axial term."""
    return LinkSpec(name, mass, np.array([length / 2, 0, 0]),
                    np.diag([1e-5, mass * length**2 / 12, mass * length**2 / 12 + 1e-5]))


def four_bar(gravity=(0.0, -9.81, 0.0)):
    """Crank–coupler–rocker four-bar in the xy plane, driven at the crank."""
    a, b, c, d = 0.10, 0.35, 0.30, 0.30
    links = [LinkSpec("ground", 1.0, np.zeros(3), np.eye(3) * 1e-3), _rod("crank", 1.0, a),
             _rod("coupler", 2.0, b), _rod("rocker", 1.5, c)]
    joints = [
        JointSpec("crank_joint", "revolute", "ground", "crank", axis=Z),
        JointSpec("coupler_joint", "revolute", "crank", "coupler", np.array([a, 0, 0]), axis=Z),
        JointSpec("rocker_joint", "revolute", "ground", "rocker", np.array([d, 0, 0]), axis=Z),
    ]
    lp = [LoopSpec("coupler_rocker", "revolute", "coupler", np.array([b, 0, 0]), "rocker",
                   np.array([c, 0, 0]), Z)]
    return build_mechanism("four_bar", links, joints, np.array(gravity), "test", loops=lp,
                           independent_q=("crank_joint",),
                           initial={"crank_joint": 1.2, "coupler_joint": -0.5, "rocker_joint": 1.8})


def five_bar(kind="point", gravity=(0.0, -9.81, 0.0)):
    """Coutinho 2015's 5R: two actuated base joints, distal links meeting at the end point."""
    l1, l2, base = 0.25, 0.35, 0.2
    links = [LinkSpec("ground", 1.0, np.zeros(3), np.eye(3) * 1e-3), _rod("left1", 1.0, l1),
             _rod("left2", 0.8, l2), _rod("right1", 1.0, l1), _rod("right2", 0.8, l2)]
    joints = [
        JointSpec("left_base", "revolute", "ground", "left1", np.array([-base / 2, 0, 0]), axis=Z),
        JointSpec("left_elbow", "revolute", "left1", "left2", np.array([l1, 0, 0]), axis=Z),
        JointSpec("right_base", "revolute", "ground", "right1", np.array([base / 2, 0, 0]), axis=Z),
        JointSpec("right_elbow", "revolute", "right1", "right2", np.array([l1, 0, 0]), axis=Z),
    ]
    lp = [LoopSpec("end_point", kind, "left2", np.array([l2, 0, 0]), "right2",
                   np.array([l2, 0, 0]), Z)]
    return build_mechanism(
        "five_bar", links, joints, np.array(gravity), "test", loops=lp,
        independent_q=("left_base", "right_base"),
        initial={"left_base": 2.0, "left_elbow": -1.2, "right_base": 1.1, "right_elbow": 1.2},
    )


@pytest.mark.slow
@pytest.mark.parametrize("build", [four_bar, five_bar, lambda: five_bar("revolute")],
                         ids=["four_bar", "five_bar_point", "five_bar_revolute"])
def test_closed_chain_inverse_dynamics_matches_lagrange_multipliers(build):
    mech = build()
    dyn = Dynamics(mech)
    ref = LagrangeReference(mech)
    rng = np.random.default_rng(3)
    q0 = mech.closure.reference[mech.closure.independent]
    for _ in range(10):
        q = q0 + rng.uniform(-0.15, 0.15, mech.nq)
        v = rng.normal(0, 2, mech.nq)
        a = rng.normal(0, 5, mech.nq)
        tau = dyn.inverse_dynamics(q, v, a)
        z, zd = dyn.complete(q, v)
        tau_ref, phi, _ = ref.inverse_dynamics(z, zd, a)
        assert np.max(np.abs(phi)) < 1e-10, "our closure violates Pinocchio's kinematics"
        scale = max(1.0, float(np.max(np.abs(tau_ref))))
        assert np.max(np.abs(tau - tau_ref)) <= 1e-8 * scale
        # forward dynamics inverts it
        np.testing.assert_allclose(dyn.forward_dynamics(q, v, tau), a, rtol=1e-9, atol=1e-9)


def _rk4_closed(dyn, q, v, dt, steps):
    """RK4 on the reduced equations in the independent coordinates (zero torque)."""
    tau = np.zeros_like(q)
    energies, violations = [], []

    def f(q, v):
        return v, dyn.forward_dynamics(q, v, tau)

    for k in range(steps):
        k1 = f(q, v)
        k2 = f(q + dt / 2 * k1[0], v + dt / 2 * k1[1])
        k3 = f(q + dt / 2 * k2[0], v + dt / 2 * k2[1])
        k4 = f(q + dt * k3[0], v + dt * k3[1])
        q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        if k % 50 == 0 or k == steps - 1:
            energies.append(sum(dyn.energy(q, v)))
            z, _ = dyn.complete(q, v)
            violations.append(_violation(dyn.mech, z))
    return np.array(energies), np.array(violations)


def _violation(mech, z):
    from exo_rt.dynamics.kernels import positions, workspace_size

    data = np.zeros(workspace_size(mech.n_bodies, mech.nz))
    n = mech.closure.n_rows
    phi, jac = np.zeros(n), np.zeros((n, mech.nz))
    positions(mech.packed, data, z)
    loops.constraints(mech.packed, data, mech.closure.packed, phi, jac, False)
    return float(np.max(np.abs(phi)))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("build", "v0"),
    [(four_bar, [0.5]), (lambda: five_bar(gravity=(0.0, 0.0, 0.0)), [0.2, -0.1])],
    ids=["four_bar_gravity", "five_bar_free"],
)
def test_passive_closed_chain_keeps_closure_and_energy(build, v0):
    """A passive closed chain for 5 s (RK4, 1 ms): the loops stay closed to 1e-9 and the total
    energy drifts by less than 1e-5 of its scale (|T| + |V| at the start). The four-bar swings
    under gravity; the 5R (whose potential minimum under in-plane
    gravity is its stretched, singular posture) moves freely, without gravity."""
    mech = build()
    dyn = Dynamics(mech)
    q = mech.closure.reference[mech.closure.independent].copy()
    v = np.array(v0, dtype=float)
    energies, violations = _rk4_closed(dyn, q, v, 1e-3, 5000)
    ke0, pe0 = dyn.energy(q, v)
    scale = abs(ke0) + abs(pe0)
    assert violations.max() <= 1e-9
    assert np.max(np.abs(energies - energies[0])) <= 1e-5 * scale


def test_loop_that_cannot_close_is_a_clear_error():
    Zc = Z
    links = [LinkSpec("ground", 1.0, np.zeros(3), np.eye(3) * 1e-3), _rod("a", 1.0, 0.1),
             _rod("b", 1.0, 0.1)]
    joints = [JointSpec("ja", "revolute", "ground", "a", axis=Zc),
              JointSpec("jb", "revolute", "ground", "b", np.array([1.0, 0, 0]), axis=Zc)]
    lp = [LoopSpec("too_far", "point", "a", np.array([0.1, 0, 0]), "b",
                   np.array([0.1, 0, 0]), Zc)]
    with pytest.raises(ModelError, match="loop 'too_far' cannot close"):
        build_mechanism("x", links, joints, np.zeros(3), "test", loops=lp)


def test_singular_partition_is_a_clear_error():
    """Choosing as independent the coupler joint of a four-bar at a configuration where it
    cannot drive the others (here: a joint the loop does not constrain away) is refused."""
    a, b, c, d = 0.10, 0.35, 0.30, 0.30
    links = [LinkSpec("ground", 1.0, np.zeros(3), np.eye(3) * 1e-3), _rod("crank", 1.0, a),
             _rod("coupler", 2.0, b), _rod("rocker", 1.5, c), _rod("extra", 0.5, 0.1)]
    joints = [
        JointSpec("crank_joint", "revolute", "ground", "crank", axis=Z),
        JointSpec("coupler_joint", "revolute", "crank", "coupler", np.array([a, 0, 0]), axis=Z),
        JointSpec("rocker_joint", "revolute", "ground", "rocker", np.array([d, 0, 0]), axis=Z),
        JointSpec("extra_joint", "revolute", "rocker", "extra", np.array([c, 0, 0]), axis=Z),
    ]
    lp = [LoopSpec("close", "revolute", "coupler", np.array([b, 0, 0]), "rocker",
                   np.array([c, 0, 0]), Z)]
    with pytest.raises(ModelError, match="singular partition"):
        build_mechanism("x", links, joints, np.zeros(3), "test", loops=lp,
                        independent_q=("crank_joint", "coupler_joint"),
                        initial={"crank_joint": 1.2, "coupler_joint": -0.5, "rocker_joint": 1.8})
