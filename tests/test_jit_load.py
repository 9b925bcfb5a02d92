"""Kernels loaded from numba's cache without numba's compiling registries (``exo_rt/jit.py``,
``_LoadCache``): what a warm start needs and no more, with the same results.

A fixture module of kernels, through ``exo_rt.jit``'s ``njit`` and ``cfunc``, each using what
loading must still provide — the runtime (arrays allocated), the hash secret (a string's
hash, a dict), a C callback passed as a value (its numba type from ``typeof``), a callee with
no Python entry — is compiled in one process (cold: numba's cache filled), then loaded and
called in another (warm): the same results to the bit, nothing compiled, and
``numba.np.arraymath`` (one of the registries, 0.2 s with the others) never imported. A
kernel compiled after that still compiles: the registries come with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

KERNELS = '''
import numpy as np
from numba import types
from exo_rt.jit import cfunc, njit

@cfunc(types.float64(types.float64), cache=True)
def half(x):
    return 0.5 * x

@njit(python=False, cache=True)
def _inner(a, out):
    for i in range(a.size):
        out[i] = a[i] * a[i] + 1.0

@njit(cache=True)
def squares(a):
    out = np.empty_like(a)  # allocated: the runtime's NRT_* functions
    _inner(a, out)
    return out

@njit(cache=True)
def keyed(names):
    d = {}  # a typed dict: the hash secret's symbols
    for i, n in enumerate(names):
        d[n] = float(i) * 1.5
    return hash("exo") != 0, d["knee"]

@njit(cache=True)
def call_value(f, x):  # a C callback as a value: its type from typeof
    return f(x) + 1.0
'''

PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import kernels as k
a = np.linspace(-1.0, 2.0, 7)
names = ("hip", "knee")
out = {"squares": k.squares(a).tolist(), "keyed": list(k.keyed(names)),
       "call_value": k.call_value(k.half, 3.0), "half": k.half.ctypes(5.0)}
out["registries"] = "numba.np.arraymath" in sys.modules
out["compiled"] = sum(sum(d.stats.cache_misses.values())
                      for d in (k.squares, k.keyed, k.call_value))
from exo_rt.jit import njit

@njit
def later(x):
    return np.sum(x * 2.0)

out["later"] = later(a)
print(json.dumps(out))
'''


def _run(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "mod")], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_warm_kernels_load_without_the_registries(tmp_path):
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "kernels.py").write_text(KERNELS)
    cold = _run(tmp_path)
    warm = _run(tmp_path)
    assert cold["compiled"] == 3 and warm["compiled"] == 0  # warm: all from the cache
    assert cold["registries"] is True  # compiling imported them
    assert warm["registries"] is False  # loading did not
    for key in ("squares", "keyed", "call_value", "half", "later"):
        assert warm[key] == cold[key], key  # to the bit (JSON keeps a float's 17 digits)
    assert warm["squares"][0] == 2.0 and warm["keyed"] == [True, 1.5]
    assert warm["call_value"] == 2.5 and warm["half"] == 2.5


def test_a_numba_release_not_checked_loads_as_numba_does(monkeypatch):
    """On a numba release outside ``LOAD_CHECKED`` (or with ``EXO_RT_NUMBA_OWN_LOAD=1``) a
    kernel keeps numba's own cache, whose load refreshes the target first: a release whose
    load needs more than ``_LoadCache`` makes costs time, never a crash."""
    from numba.core.caching import FunctionCache

    from exo_rt import jit

    def kernel(x):
        return x + 1.0

    assert type(jit.njit(cache=True)(kernel)._cache) is jit._LoadCache
    monkeypatch.setattr(jit, "LOAD_LAZILY", False)
    assert type(jit.njit(cache=True)(kernel)._cache) is FunctionCache
    assert jit._numba_release() >= (0, 59)  # pyproject's lower bound: the parse reads it
