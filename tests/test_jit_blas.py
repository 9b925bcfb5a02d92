"""numba's BLAS check made without importing SciPy (``exo_rt/jit.py``, ``_DeferBLASCheck``).

numba imports ``scipy.linalg`` when it makes its target, to learn whether ``np.dot`` and
``np.linalg`` can compile; exo-rt's kernels call neither, and the import was 0.13–0.25 s of a
warm start. Checked here: the target made through ``exo_rt.jit`` leaves ``scipy.linalg``
unimported with numba's flag as its own check sets it; a kernel that does call BLAS still
compiles and agrees with NumPy (SciPy imported then, by numba); and no jitted function of the
package calls BLAS or LAPACK — else its first call would import SciPy, mid-run."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
import numpy as np
import exo_rt.jit
from numba import njit
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()  # numba's registries: numba.np.arraymath among them
import numba.np.arraymath as am
out = {"linalg_at_target": "scipy.linalg" in sys.modules, "have_blas": am._HAVE_BLAS}

@njit
def matmul(a, b):
    return a @ b

@njit
def convolve(a, b):
    return np.convolve(a, b)

a = np.arange(9.0).reshape(3, 3) / 7.0
b = np.linspace(-1.0, 2.0, 9).reshape(3, 3)
out["matmul"] = matmul(a, b).ravel().tolist()
out["matmul_numpy"] = (a @ b).ravel().tolist()
out["convolve"] = convolve(a[0], b[1]).tolist()
out["convolve_numpy"] = np.convolve(a[0], b[1]).tolist()
out["linalg_after"] = "scipy.linalg" in sys.modules
print(json.dumps(out))
"""


def _probe(tmp_path: Path, **env) -> dict:
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    run_env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1", **env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=run_env, cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_target_without_scipy_linalg_compiles_as_numba_would(tmp_path):
    pytest.importorskip("scipy")
    deferred = _probe(tmp_path)
    eager = _probe(tmp_path, EXO_RT_SCIPY_AT_START="1")
    assert deferred["linalg_at_target"] is False  # the 0.13–0.25 s not spent
    assert eager["linalg_at_target"] is True  # numba's own check, kept by the variable
    assert deferred["have_blas"] is eager["have_blas"] is True  # the same flag as numba's
    # a kernel calling BLAS compiles (SciPy imported by numba then) and agrees with NumPy
    assert deferred["linalg_after"] is True
    for probe in (deferred, eager):
        assert probe["matmul"] == pytest.approx(probe["matmul_numpy"], rel=1e-14, abs=1e-15)
        assert probe["convolve"] == pytest.approx(probe["convolve_numpy"], rel=1e-14,
                                                   abs=1e-15)
    # and to the bit as numba compiles it with SciPy imported at its target
    assert deferred["matmul"] == eager["matmul"]
    assert deferred["convolve"] == eager["convolve"]


# numpy names numba implements with BLAS or LAPACK (numba.np.linalg: ensure_blas/ensure_lapack)
BLAS_NAMES = {"dot", "vdot", "matmul", "linalg", "cov", "corrcoef", "roots", "polyfit",
              "lstsq", "solve", "inv", "pinv", "det", "slogdet", "eig", "eigh", "eigvals",
              "eigvalsh", "svd", "qr", "cholesky", "matrix_power", "matrix_rank", "norm",
              "cond", "kron", "outer", "tensordot"}
JIT_NAMES = {"njit", "jit", "cfunc", "register_jitable", "overload", "overload_method",
             "intrinsic", "generated_jit", "vectorize", "guvectorize", "stencil"}


def _numpy_attr(node: ast.AST) -> str | None:
    """``np.X`` / ``numpy.X`` / ``np.linalg.X`` → ``X``'s head name, else None."""
    if isinstance(node, ast.Attribute):
        base = node.value
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id in ("np", "numpy"):
            return node.attr
    return None


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_no_jitted_function_calls_blas_or_lapack():
    """A jitted function (decorated by a numba decorator) that calls ``np.dot``, ``@``,
    ``np.linalg.*`` …: numba binds SciPy's BLAS at its first call, which would then import
    ``scipy.linalg`` (0.13–0.25 s) in the middle of a run. None does; a new one belongs in
    the warm-up before READY (or SciPy imported at start: ``EXO_RT_SCIPY_AT_START=1``)."""
    found = []
    for path in sorted([*(ROOT / "exo_rt").rglob("*.py"),
                        *(ROOT / "firmware_bridge").rglob("*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = {n.id if isinstance(n, ast.Name) else n.attr
                     for d in fn.decorator_list for n in ast.walk(d)
                     if isinstance(n, (ast.Name, ast.Attribute))}
            if not names & JIT_NAMES:
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {fn.name}: @")
                elif (attr := _numpy_attr(node)) in BLAS_NAMES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {fn.name}: np.{attr}")
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr in ("dot", "vdot")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {fn.name}: .dot")
    assert found == []
