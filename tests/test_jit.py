"""exo_rt.jit: a kernel compiled for compiled callers only (``njit(python=False)``)."""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.jit import CompiledCallersOnly, njit


@njit(python=False)
def _twice(x):
    return 2.0 * x


@njit
def _caller(a):
    for i in range(a.shape[0]):
        a[i] = _twice(a[i])


def test_compiled_callers_reach_it_and_python_gets_a_clear_error():
    a = np.array([1.5, -2.0])
    _caller(a)
    np.testing.assert_array_equal(a, [3.0, -4.0])
    assert isinstance(_twice, CompiledCallersOnly)
    with pytest.raises(TypeError, match=r"test_jit\._twice is compiled for compiled callers"):
        _twice(1.0)  # (numba itself would crash the interpreter: no Python wrapper)
    # and its compiled code has no Python wrapper, where the caller's has one
    for kernel, wrapped in ((_twice, False), (_caller, True)):
        (cres,) = kernel.overloads.values()
        assert (cres.fndesc.llvm_cpython_wrapper_name in cres.library.get_llvm_str()) == wrapped


def test_a_signature_is_refused():
    with pytest.raises(TypeError, match="keyword options only"):
        njit("f8(f8)", python=False)
