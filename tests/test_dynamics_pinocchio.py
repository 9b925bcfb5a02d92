"""Cross-validation of the semirecursive dynamics against Pinocchio (docs/dynamics.md).

Random chains and branched trees of 1–20 bodies (branches listed in non-depth-first order,
random axes, rotated joint frames, prismatic and fixed joints, gravity in any direction), and
the shipped robot configs that are plain trees: M, h, g, inverse and forward dynamics,
energies and frame positions agree to 1e-9 relative.
"""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.model import load_urdf
from exo_rt.model.mechanism import P_AXIS_INDEX, P_ROT_IDENTITY
from tests.pinref import PinTwin, assert_close
from tests.treegen import random_tree

REL = 1e-9
SEEDS = range(40)


def _random_case(seed: int, aligned: bool = False):
    rng = np.random.default_rng(seed)
    n_bodies = int(rng.integers(2, 21))
    text, _info = random_tree(rng, n_bodies, prismatic=True, fixed=True, aligned=aligned)
    mech = load_urdf(text)
    gravity = rng.normal(size=3)
    mech = mech.with_gravity(9.81 * gravity / np.linalg.norm(gravity))
    return rng, mech, PinTwin(text, mech)


def _states(rng, nq, count=3):
    for _ in range(count):
        yield rng.uniform(-2, 2, nq), rng.normal(0, 2, nq), rng.normal(0, 3, nq)


@pytest.mark.parametrize("seed, aligned", [(s, False) for s in SEEDS]
                         + [pytest.param(s, True, id=f"aligned{s}") for s in range(12)])
def test_random_tree_matches_pinocchio(seed, aligned):
    """``aligned``: most joints about ±x/±y/±z with no origin rotation — the kernels' fast
    paths (``P_ROT_IDENTITY``, ``P_AXIS_INDEX``) — the rest general, in one tree."""
    rng, mech, ref = _random_case(seed, aligned)
    if aligned:  # the fast paths are taken, and not everywhere
        flags = mech.packed[1:-1, [P_ROT_IDENTITY, P_AXIS_INDEX]]
        assert flags[:, 0].any() and (flags[:, 1] >= 0).any()
    dyn = Dynamics(mech)
    for q, v, a in _states(rng, mech.nq):
        assert_close(dyn.mass_matrix(q), ref.crba(q), REL, "mass matrix")
        assert_close(dyn.bias_forces(q, v), ref.nle(q, v), REL, "bias forces")
        assert_close(dyn.gravity(q), ref.gravity(q), REL, "gravity")
        assert_close(dyn.inverse_dynamics(q, v, a), ref.rnea(q, v, a), REL, "inverse dynamics")
        tau = rng.normal(0, 5, mech.nq)
        assert_close(dyn.forward_dynamics(q, v, tau), ref.aba(q, v, tau), REL, "forward dyn.")
        assert_close(dyn.energy(q, v), ref.energy(q, v), REL, "energy")
        assert_close(dyn.frame_positions(q), ref.frame_positions(q), REL, "frame positions")


def test_trees_are_listed_non_depth_first():
    """The generator really produces trees whose file order is not depth-first."""
    found = 0
    for seed in SEEDS:
        _rng, mech, _ref = _random_case(seed)
        order = list(mech.parent[1:])
        # depth-first listing ⇔ every body's parent is the previous body or one of its ancestors
        for i in range(2, mech.n_bodies):
            anc, p = set(), i - 1
            while p >= 0:
                anc.add(p)
                p = mech.parent[p]
            if mech.parent[i] not in anc:
                found += 1
                break
        assert len(order) == mech.n_bodies - 1
    assert found >= 5, f"only {found} of {len(SEEDS)} random trees were non-depth-first"


def _shipped_tree_configs():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "configs" / "robots"
    return sorted(str(p) for p in root.glob("*.yaml"))


@pytest.mark.parametrize("path", _shipped_tree_configs())
def test_shipped_config_matches_pinocchio(path):
    """Every shipped robot: M, h and τ against Pinocchio on its unconstrained tree reduced by
    R_z (identity for plain trees; rotors of harmonic drives are mimic coordinates); closed
    chains against Lagrange multipliers on Pinocchio's open tree."""
    from exo_rt.model import load_mechanism
    from tests.pinref import LagrangeReference, TreeTwin

    mech = load_mechanism(path)
    dyn = Dynamics(mech)
    rng = np.random.default_rng(7)
    if mech.closure is not None:
        ref = LagrangeReference(mech)
        q0 = mech.closure.reference[mech.closure.independent]
        for _q, v, a in _states(rng, mech.nq):
            q = q0 + rng.uniform(-0.05, 0.05, mech.nq)
            tau = dyn.inverse_dynamics(q, v, a)
            z, zd = dyn.complete(q, v)
            tau_ref, phi, _ = ref.inverse_dynamics(z, zd, a)
            assert np.max(np.abs(phi)) < 1e-10
            assert_close(tau, tau_ref, 1e-8, f"{path}: closed-chain ID")
        return
    twin = TreeTwin(mech)
    for q, v, a in _states(rng, mech.nq):
        m_ref, h_ref, tau_ref = twin.reduced(q, v, a)
        assert_close(dyn.mass_matrix(q), m_ref, REL, f"{path}: mass matrix")
        assert_close(dyn.bias_forces(q, v), h_ref, REL, f"{path}: bias forces")
        assert_close(dyn.inverse_dynamics(q, v, a), tau_ref, REL, f"{path}: ID")


@pytest.mark.parametrize("n", [64, 128])
def test_long_chains_match_pinocchio(n):
    """Long chains: rounding must grow linearly along the chain (a regression: composing
    rotations about the world axis let orthogonality errors grow geometrically — 5e-4 at 128)."""
    from tests.pinref import TreeTwin
    from tools.bench_pinocchio import chain

    mech = chain(n)
    twin, dyn = TreeTwin(mech), Dynamics(mech)
    rng = np.random.default_rng(n)
    q, v, a = rng.uniform(-1, 1, n), rng.normal(0, 1, n), rng.normal(0, 1, n)
    m_ref, h_ref, tau_ref = twin.reduced(q, v, a)
    assert_close(dyn.inverse_dynamics(q, v, a), tau_ref, REL, "inverse dynamics")
    assert_close(dyn.mass_matrix(q), m_ref, REL, "mass matrix")
    rot = dyn.frame_rotations(q)[-1]
    assert np.max(np.abs(rot @ rot.T - np.eye(3))) < 1e-13
