"""exo_rt.jit: a kernel compiled for compiled callers only (``njit(python=False)``), and one
called through its address (``address``, ``call_at``)."""

from __future__ import annotations

import os

import numba
import numpy as np
import pytest

from exo_rt.jit import CompiledCallersOnly, address, call_at, njit


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


@njit(python=False)
def _scaled(a, k, out):
    if k < 0.0:
        raise ValueError("negative scale")
    for i in range(a.shape[0]):
        out[i] = k * a[i]


@njit
def _through(addr, a, k, out):
    call_at(addr, a, k, out)


def test_a_kernel_called_at_its_address():
    """What the plant's step does with its accelerations: the callee compiled apart, called
    through where it starts — the same numbers as a direct call, its exception propagated."""
    a, out = np.array([1.0, -2.5, 4.0]), np.zeros(3)
    addr = address(_scaled, (numba.typeof(a), numba.float64, numba.typeof(out)))
    _through(addr, a, 2.0, out)
    np.testing.assert_array_equal(out, [2.0, -5.0, 8.0])
    with pytest.raises(ValueError, match="negative scale"):
        _through(addr, a, -1.0, out)
    with pytest.raises(TypeError, match="returns a value"):
        address(_twice, (numba.float64,))


def test_the_plant_refuses_a_scratch_without_its_accelerations(exo_leg):
    from exo_rt.sim.plant import Plant, plant_step, scratch_shape

    plant = Plant(exo_leg)
    args = list(plant.args)
    args[-1] = np.zeros(scratch_shape(plant.mech.nq))  # (not new_scratch: no address)
    with pytest.raises(ValueError, match="new_scratch"):
        plant_step(*args)


UNROLLED = """
import numpy as np
from exo_rt.jit import njit

@njit
def scale(a, k):
    for i in range(a.shape[0]):  # a trip count known only at run time
        a[i] *= k

scale(np.ones(5), 2.0)
(cres,) = scale.overloads.values()
print("epil" in cres.library.get_llvm_str())  # LLVM's remainder loop of a runtime unroll
"""


@pytest.mark.slow
@pytest.mark.parametrize("keep, unrolled", [("0", "False"), ("1", "True")])
def test_loops_over_the_joints_are_not_unrolled_at_run_time(keep, unrolled):
    """Importing exo_rt.jit turns LLVM's runtime unrolling off (a loop over 2–12 joints gains
    nothing from 8 copies of its body, and compiles slower); EXO_RT_LLVM_UNROLL_RUNTIME=1
    keeps LLVM's default."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", UNROLLED], capture_output=True, text=True,
                         env={**os.environ, "EXO_RT_LLVM_UNROLL_RUNTIME": keep}, check=True)
    assert out.stdout.strip() == unrolled, out.stdout + out.stderr


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_a_plant_unpickled_in_another_process_points_at_its_own_accelerations(exo_leg,
                                                                               tmp_path):
    """The plant's scratch holds where its accelerations start — this process's address: a
    plant pickled (a batch's payload) and stepped in another process steps as here."""
    import pickle
    import subprocess
    import sys

    from exo_rt.sim.plant import Plant

    plant = Plant(exo_leg)
    plant.reset([0.3, 0.6])
    (tmp_path / "plant.pkl").write_bytes(pickle.dumps(plant))
    code = ("import pickle, sys, numpy as np; p = pickle.load(open(sys.argv[1], 'rb')); "
            "[p.step(np.array([1.0, -0.5])) for _ in range(20)]; print(repr(p.state.tobytes()))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "plant.pkl")],
                         capture_output=True, text=True, check=True).stdout.strip()
    for _ in range(20):
        plant.step(np.array([1.0, -0.5]))
    assert out == repr(plant.state.tobytes())
