"""Internal identities of the dynamics on every shipped robot and on random trees."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism, load_urdf
from tests.treegen import random_tree

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs" / "robots").glob("*.yaml"))


def _mechanisms():
    for path in CONFIGS:
        yield pytest.param(lambda path=path: load_mechanism(path), id=path.stem)
    for seed in range(4):
        def build(seed=seed):
            rng = np.random.default_rng(200 + seed)
            return load_urdf(random_tree(rng, int(rng.integers(2, 12)))[0])
        yield pytest.param(build, id=f"random{seed}")


def _state(mech, rng):
    if mech.closure is not None:
        q = mech.closure.reference[mech.closure.independent] + rng.uniform(-0.05, 0.05, mech.nq)
    else:
        q = rng.uniform(-1.5, 1.5, mech.nq)
    return q, rng.normal(0, 1.5, mech.nq)


@pytest.mark.parametrize("build", list(_mechanisms()))
def test_identities(build):
    mech = build()
    dyn = Dynamics(mech)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, v = _state(mech, rng)
        m = dyn.mass_matrix(q)
        np.testing.assert_allclose(m, m.T, rtol=0, atol=1e-12 * np.abs(m).max())
        assert np.linalg.eigvalsh(m).min() > 0, "M is not positive definite"
        tau = rng.normal(0, 5, mech.nq)
        a = dyn.forward_dynamics(q, v, tau)
        np.testing.assert_allclose(dyn.inverse_dynamics(q, v, a), tau, rtol=1e-10,
                                   atol=1e-10 * max(1.0, np.abs(tau).max()))
        np.testing.assert_allclose(dyn.bias_forces(q, np.zeros(mech.nq)), dyn.gravity(q),
                                   rtol=1e-12, atol=1e-12)
        ke, _pe = dyn.energy(q, v)
        assert ke == pytest.approx(0.5 * v @ m @ v, rel=1e-12)
        # g = ∂V/∂q by central differences
        eps = 1e-6
        grad = np.array([(dyn.energy(q + eps * e, v)[1] - dyn.energy(q - eps * e, v)[1]) / (2 * eps)
                         for e in np.eye(mech.nq)])
        np.testing.assert_allclose(dyn.gravity(q), grad, rtol=1e-6,
                                   atol=1e-6 * max(1.0, np.abs(grad).max()))


def test_out_arguments_are_written_without_allocation():
    mech = load_mechanism(CONFIGS[0])
    dyn = Dynamics(mech)
    n = mech.nq
    q, v, a = np.full(n, 0.3), np.full(n, 0.2), np.full(n, 0.1)
    outs = {"M": np.empty((n, n)), "h": np.empty(n), "g": np.empty(n), "tau": np.empty(n),
            "acc": np.empty(n), "e": np.empty(2), "frames": np.empty((mech.n_bodies, 3))}

    def calls():
        assert dyn.mass_matrix(q, out=outs["M"]) is outs["M"]
        assert dyn.bias_forces(q, v, out=outs["h"]) is outs["h"]
        assert dyn.gravity(q, out=outs["g"]) is outs["g"]
        assert dyn.inverse_dynamics(q, v, a, out=outs["tau"]) is outs["tau"]
        assert dyn.forward_dynamics(q, v, a, out=outs["acc"]) is outs["acc"]
        dyn.energy(q, v, out=outs["e"])
        assert dyn.frame_positions(q, out=outs["frames"]) is outs["frames"]

    calls()  # compile
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(2000):
        calls()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename") if s.size_diff > 0)
    assert grown < 4096, f"{grown} bytes allocated over 2000 calls with out= arrays"
