"""The ``Dynamics`` facade's two paths (compiled entry points, and the general path through
numba's dispatcher) give the kernels' results for every kind of argument, and refuse what the
entry points must never see."""

from __future__ import annotations

import numpy as np
import pytest

import exo_rt.dynamics as dynamics
from exo_rt.dynamics import Dynamics, kernels
from tools.bench_pinocchio import chain, two_legs


@pytest.fixture(scope="module")
def mech():
    return two_legs()


def _state(n, seed=3):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, n), rng.normal(0, 1, n), rng.normal(0, 1, n)


def _reference(mech, q, v, a):
    """Every facade result from the kernels themselves (numba's dispatcher, fresh arrays)."""
    model, n = mech.packed, mech.nq
    data = np.zeros(kernels.workspace_size(mech.n_bodies, mech.nz))
    q, v, a = (np.array(x, dtype=float) for x in (q, v, a))
    out = {"id": np.empty(n), "mass": np.empty((n, n)), "bias": np.empty(n),
           "gravity": np.empty(n), "fd": np.empty(n)}
    kernels.inverse_dynamics(model, data, q, v, a, out["id"])
    kernels.mass_matrix(model, data, q, out["mass"])
    kernels.bias_forces(model, data, q, v, out["bias"])
    kernels.gravity_forces(model, data, q, out["gravity"])
    kernels.forward_dynamics(model, data, q, v, a, out["fd"])
    return out


def _facade(dyn, q, v, a, outs=None):
    outs = outs or {}
    return {"id": dyn.inverse_dynamics(q, v, a, outs.get("id")),
            "mass": dyn.mass_matrix(q, outs.get("mass")),
            "bias": dyn.bias_forces(q, v, outs.get("bias")),
            "gravity": dyn.gravity(q, outs.get("gravity")),
            "fd": dyn.forward_dynamics(q, v, a, outs.get("fd"))}


def _same(got, ref):
    for k, r in ref.items():
        np.testing.assert_allclose(got[k], r, rtol=1e-14, atol=1e-14, err_msg=k)


def test_entry_points_reuse_kernel_overloads_compiled_with_the_nrt():
    """Each kernel holds an overload for its wrapper's exact signature, compiled before the
    wrapper: the NRT-less wrapper never compiled (and cached) an NRT-less kernel."""
    dynamics._entry_points()
    for key, (wrapper, kernel, sig) in dynamics._SIGNATURES.items():
        assert tuple(sig) in kernel.overloads, key
        assert tuple(sig) in wrapper.overloads, key


@pytest.mark.parametrize("make", [two_legs, lambda: chain(7)])
def test_preallocated_and_allocated_outputs(make):
    mech = make()
    dyn = Dynamics(mech)
    q, v, a = _state(mech.nq)
    ref = _reference(mech, q, v, a)
    _same(_facade(dyn, q, v, a), ref)
    n = mech.nq
    outs = {"id": np.empty(n), "mass": np.empty((n, n)), "bias": np.empty(n),
            "gravity": np.empty(n), "fd": np.empty(n)}
    for _ in range(2):  # the second time, the outputs are the remembered ones
        got = _facade(dyn, q, v, a, outs)
        assert all(got[k] is outs[k] for k in outs)
        _same(got, ref)


def test_inputs_of_every_kind(mech, monkeypatch):
    dyn = Dynamics(mech)
    n = mech.nq
    q, v, a = _state(n)
    ref = _reference(mech, q, v, a)
    big = np.zeros((3, 2 * n))
    big[0, ::2], big[1, ::2], big[2, ::2] = q, v, a
    ro = [x.copy() for x in (q, v, a)]
    for x in ro:
        x.setflags(write=False)
    raw = bytearray(8 * 3 * n + 1)  # float64 vectors at an odd address: unaligned
    un = [np.frombuffer(raw, dtype=np.float64, count=n, offset=1 + 8 * n * i) for i in range(3)]
    for x, val in zip(un, (q, v, a), strict=True):
        x[...] = val  # frombuffer of a bytearray is writable
    assert not un[0].flags.aligned
    kinds = {
        "strided": (big[0, ::2], big[1, ::2], big[2, ::2]),
        "reversed": tuple(x[::-1].copy()[::-1] for x in (q, v, a)),
        "read-only": tuple(ro),
        "unaligned": tuple(un),
        "lists": tuple(x.tolist() for x in (q, v, a)),
        "Fortran column": tuple(np.asfortranarray(np.stack([x, x], 1))[:, 0] for x in (q, v, a)),
    }
    general = Dynamics._general
    for name, (qq, vv, aa) in kinds.items():
        if name != "lists":  # float64 vectors of any layout take the entry points
            monkeypatch.setattr(Dynamics, "_general", None)
        got = _facade(dyn, qq, vv, aa)
        monkeypatch.setattr(Dynamics, "_general", general)
        for k, r in ref.items():
            np.testing.assert_allclose(got[k], r, rtol=1e-14, atol=1e-14, err_msg=f"{name} {k}")
    like = [_ArrayLike(x) for x in (q, v, a)]  # float64, 1-D, not an ndarray
    _same(_facade(dyn, *like), ref)
    qi = np.arange(n) % 2  # integers: converted on the general path
    ref_i = _reference(mech, qi, qi, qi)
    _same(_facade(dyn, qi, qi, qi), ref_i)
    assert dyn.energy(q.tolist(), v.tolist()) == dyn.energy(q, v)
    np.testing.assert_array_equal(dyn.frame_positions(q.tolist()), dyn.frame_positions(q))
    np.testing.assert_array_equal(dyn.frame_rotations(qi), dyn.frame_rotations(qi * 1.0))


class _ArrayLike:
    """Says float64 and 1-D like an ndarray, converts through ``__array__``."""

    dtype, ndim = np.dtype(np.float64), 1

    def __init__(self, x):
        self.x = x

    def __array__(self, dtype=None, copy=None):
        return np.array(self.x, dtype=dtype)


def test_outputs_the_entry_points_cannot_take(mech):
    dyn = Dynamics(mech)
    n = mech.nq
    q, v, a = _state(n)
    ref = _reference(mech, q, v, a)
    strided = np.zeros((2 * n, 2 * n))[::2, ::2]  # the general path writes it in place
    assert dyn.mass_matrix(q, strided) is strided
    np.testing.assert_allclose(strided, ref["mass"], rtol=1e-14, atol=1e-14)
    ro = np.zeros(n)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        dyn.inverse_dynamics(q, v, a, ro)
    assert not ro.any()
    with pytest.raises(TypeError, match="numpy array"):
        dyn.gravity(q, [0.0] * n)
    with pytest.raises(ValueError, match="2-D"):
        dyn.mass_matrix(q, np.empty(n * n))
    with pytest.raises(ValueError, match="1-D"):
        dyn.inverse_dynamics(q.reshape(1, n), v, a)
    with pytest.raises(ValueError):
        dyn.inverse_dynamics(q[:-1], v, a, np.empty(n))  # wrong length, fast path
    with pytest.raises(ValueError):
        dyn.mass_matrix(q, np.empty((n, n + 1)))  # wrong shape, fast path


def test_arrays_reshaped_in_place(mech):
    """An output the facade remembers, or an input, given another ndim in place is refused
    (the entry point would write its dimensions past the end of the native array)."""
    dyn = Dynamics(mech)
    n = mech.nq
    q, v, a = _state(n)
    m = np.empty((n, n))
    dyn.mass_matrix(q, m)
    m.shape = (n * n,)
    with pytest.raises(ValueError, match="2-D"):
        dyn.mass_matrix(q, m)
    tau = np.empty(n)
    dyn.inverse_dynamics(q, v, a, tau)
    tau.shape = (1, n)
    with pytest.raises(ValueError, match="1-D"):
        dyn.inverse_dynamics(q, v, a, tau)
    q2 = q.copy()
    dyn.bias_forces(q2, v)
    q2.shape = (1, n)
    with pytest.raises(ValueError, match="1-D"):
        dyn.bias_forces(q2, v)
