"""Internal identities of the dynamics on every shipped robot and on random trees.

M symmetric positive definite; inverse_dynamics(q, v, forward_dynamics(q, v, τ)) = τ;
bias at v = 0 equals gravity; g = ∂V/∂q (central differences of the potential energy);
kinetic energy = ½ vᵀ M v; ``out=`` arrays are written and returned, and with them the
tree facade allocates nothing.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics, kernels
from exo_rt.model import load_mechanism
from exo_rt.model.mechanism import P_AXIS_INDEX, P_ROT_IDENTITY, _axis_index
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism
from tests.randmech import random_mechanism

ROBOTS = Path(__file__).resolve().parents[1] / "configs" / "robots"
CONFIGS = sorted(ROBOTS.rglob("*.yaml"))


def _mechanisms():
    for path in CONFIGS:
        yield pytest.param(lambda path=path: load_mechanism(path),
                           id=str(path.relative_to(ROBOTS).with_suffix("")))
    for seed in range(4):
        def build(seed=seed):
            rng = np.random.default_rng(200 + seed)
            return random_mechanism(rng, int(rng.integers(2, 13)), p_fixed=0.12)
        yield pytest.param(build, id=f"random{seed}")


MECHANISMS = list(_mechanisms())


def _state(mech, rng):
    if mech.closure is not None:  # stay near the closed reference configuration
        q = mech.closure.reference[mech.closure.independent] + rng.uniform(-0.05, 0.05, mech.nq)
    else:
        q = rng.uniform(-1.5, 1.5, mech.nq)
    return q, rng.normal(0, 1.5, mech.nq)


@pytest.mark.parametrize("build", MECHANISMS)
def test_identities(build):
    mech = build()
    dyn = Dynamics(mech)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, v = _state(mech, rng)
        m = dyn.mass_matrix(q)
        # symmetric (to rounding) and positive definite
        np.testing.assert_allclose(m, m.T, rtol=0, atol=1e-12 * np.abs(m).max())
        assert np.linalg.eigvalsh(m).min() > 0, "M is not positive definite"
        # inverse dynamics undoes forward dynamics, to 1e-10 of the size of τ
        tau = rng.normal(0, 5, mech.nq)
        a = dyn.forward_dynamics(q, v, tau)
        err = np.abs(dyn.inverse_dynamics(q, v, a) - tau).max() / np.abs(tau).max()
        assert err <= 1e-10, f"inverse(forward(τ)) − τ = {err:.1e} relative"
        # the bias at rest is gravity
        g = dyn.gravity(q)
        np.testing.assert_allclose(dyn.bias_forces(q, np.zeros(mech.nq)), g, rtol=1e-12,
                                   atol=1e-12 * max(1.0, np.abs(g).max()))
        # kinetic energy = ½ vᵀ M v
        ke, _pe = dyn.energy(q, v)
        assert ke == pytest.approx(0.5 * v @ m @ v, rel=1e-12)
        # g = ∂V/∂q by central differences (step 1e-6: truncation ~1e-12, rounding ~1e-10)
        eps = 1e-6
        grad = np.array([(dyn.energy(q + eps * e, v)[1] - dyn.energy(q - eps * e, v)[1])
                         / (2 * eps) for e in np.eye(mech.nq)])
        np.testing.assert_allclose(g, grad, rtol=0, atol=1e-6 * max(1.0, np.abs(grad).max()))


_METHODS = (  # name, inputs, output shape (n = nq, b = n_bodies)
    ("mass_matrix", "q", ("n", "n")),
    ("bias_forces", "qv", ("n",)),
    ("gravity", "q", ("n",)),
    ("inverse_dynamics", "qva", ("n",)),
    ("forward_dynamics", "qva", ("n",)),
    ("frame_positions", "q", ("b", 3)),
    ("frame_rotations", "q", ("b", 3, 3)),
)


def _calls(mech, dyn, rng):
    q, v = _state(mech, rng)
    x = {"q": q, "v": v, "a": rng.normal(0, 1, mech.nq)}
    dims = {"n": mech.nq, "b": mech.n_bodies}
    for name, inputs, shape in _METHODS:
        args = tuple(x[k] for k in inputs)
        yield name, getattr(dyn, name), args, tuple(dims.get(s, s) for s in shape)


@pytest.mark.parametrize("build", MECHANISMS)
def test_out_arguments_are_written_and_returned(build):
    mech = build()
    dyn = Dynamics(mech)
    for name, method, args, shape in _calls(mech, dyn, np.random.default_rng(2)):
        expected = method(*args)
        out = np.full(shape, np.nan)
        assert method(*args, out=out) is out, f"{name}(out=) returns another array"
        np.testing.assert_array_equal(out, expected, err_msg=name)
    q, v = _state(mech, np.random.default_rng(3))
    e = np.full(2, np.nan)
    assert dyn.energy(q, v, out=e) == dyn.energy(q, v)
    np.testing.assert_array_equal(e, dyn.energy(q, v))


def _peak_bytes(method, *args, repeat: int = 5, **kwargs) -> int:
    """Peak traced memory (numpy's array data included) above the start, over ``repeat`` calls
    of ``method(*args, **kwargs)``."""
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(repeat):
            method(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - start


def test_out_calls_allocate_no_array():
    """With out=, no call creates an array: on a 512-coordinate chain any new array of q's
    length is ≥ 4 KiB, far above the ~0.3 KiB of Python bookkeeping seen per call. The probe
    is calibrated on the same call without out=, which must show the array it allocates."""
    n = 512
    links = [LinkSpec("base")] + [
        LinkSpec(f"b{i}", 1.0, np.array([0.1, 0.0, 0.02]), np.diag([0.01, 0.02, 0.025]))
        for i in range(1, n + 1)
    ]
    joints = [
        JointSpec(f"j{i}", "prismatic" if i % 3 == 0 else "revolute", f"b{i - 1}" if i > 1
                  else "base", f"b{i}", origin_xyz=np.array([0.2, 0.0, 0.0]),
                  origin_rpy=np.array([0.1, 0.2, 0.3]), axis=np.array([0.0, 0.6, 0.8]))
        for i in range(1, n + 1)
    ]
    mech = build_mechanism("chain512", links, joints, np.array([0.0, 0.0, -9.81]), "<test>")
    dyn = Dynamics(mech)
    threshold = 2048
    for name, method, args, shape in _calls(mech, dyn, np.random.default_rng(4)):
        out = np.empty(shape)
        method(*args, out=out)  # compile / warm up
        method(*args)
        without = _peak_bytes(method, *args)
        with_out = _peak_bytes(method, *args, out=out)
        assert without >= 8 * n, f"probe blind for {name}: {without} B without out="
        assert with_out < threshold, f"{name}(out=) allocated: peak {with_out} B"
    q, v = _state(mech, np.random.default_rng(5))
    e = np.empty(2)
    dyn.energy(q, v, out=e)
    assert _peak_bytes(dyn.energy, q, v, out=e) < threshold


@pytest.mark.slow
@pytest.mark.parametrize("build", MECHANISMS)
def test_the_fast_paths_give_the_general_paths_values(build):
    """Joints about ±x/±y/±z with no origin rotation take the kernels' fast paths
    (``P_ROT_IDENTITY``, ``P_AXIS_INDEX``); the same model with both flags cleared takes the
    general matrix products and Rodrigues' formula. Every result agrees to rounding (the
    general path's 1 − cos + cos is not always exactly 1). A closed chain's kernels run on
    its spanning tree's coordinates z."""
    mech = build()
    general = np.array(mech.packed)
    general[:-1, P_ROT_IDENTITY] = 0.0
    general[:-1, P_AXIS_INDEX] = -1.0
    rng = np.random.default_rng(3)
    ws = np.zeros_like(Dynamics(mech).workspace)
    n = mech.nz
    for _ in range(3):
        q, v, a = rng.uniform(-1.5, 1.5, n), rng.normal(0, 1.5, n), rng.normal(0, 2, n)
        for model in (mech.packed, general):
            m, tau = np.empty((n, n)), np.empty(n)
            kernels.mass_matrix(model, ws, q, m)
            kernels.inverse_dynamics(model, ws, q, v, a, tau)
            if model is mech.packed:
                m_fast, tau_fast = m, tau
        np.testing.assert_allclose(m_fast, m, rtol=0, atol=1e-14 * np.abs(m).max())
        np.testing.assert_allclose(tau_fast, tau, rtol=0, atol=1e-14 * np.abs(tau).max())


def test_axis_index():
    assert [_axis_index(a) for a in ([1.0, 0, 0], [0, -1.0, 0], [-0.0, 0, 1.0])] == [0, 1, 2]
    assert [_axis_index(a) for a in ([0.6, 0.8, 0], [0, 0.5, 0], [0, 0, 0])] == [-1, -1, -1]
