"""``import exo_rt`` has no side effect: it writes no file (in the cache home or the source
tree), imports no numba and leaves numba's environment as it was; the settings are made by
``exo_rt.numba_settings.apply`` when the first kernel module is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import json, os, sys; before = {k: v for k, v in os.environ.items() "
         "if k.startswith('NUMBA_')}; import exo_rt; print(json.dumps({'before': before, "
         "'after': {k: v for k, v in os.environ.items() if k.startswith('NUMBA_')}, "
         "'numba': 'numba' in sys.modules}))")


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), PYTHONDONTWRITEBYTECODE="1")
    return env


def test_import_exo_rt_writes_no_file_and_sets_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    tree = _files(ROOT / "exo_rt")
    out = subprocess.run([sys.executable, "-c", PROBE], env=_env(home), cwd=tmp_path,
                         capture_output=True, text=True, check=True, timeout=60)
    seen = json.loads(out.stdout)
    assert seen["after"] == seen["before"] == {}
    assert seen["numba"] is False
    assert list(home.rglob("*")) == []
    assert _files(ROOT / "exo_rt") == tree


def test_the_first_kernel_module_makes_the_settings(tmp_path):
    """Importing exo_rt.jit (every kernel module does) keys the cache under the cache home
    and sets the code generation, as numba_settings says; the user's own variables win."""
    home = tmp_path / "home"
    env = dict(_env(home), NUMBA_OPT="3")
    code = ("import json, os, exo_rt.jit, numba.core.config as c; print(json.dumps("
            "[os.environ['NUMBA_CACHE_DIR'], c.CACHE_DIR, int(c.OPT), int(c.LOOP_VECTORIZE)]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True, timeout=120)
    cache, numba_cache, opt, vectorize = json.loads(out.stdout)
    assert cache == numba_cache
    assert Path(cache).parent == home / "cache" / "exo-rt" and Path(cache).is_dir()
    assert Path(cache).name.startswith("numba-") and len(Path(cache).name) == 6 + 16
    assert (opt, vectorize) == (3, 0)


BLAS_PROBE = ("import json, os, numpy; from threadpoolctl import threadpool_info; "
              "before = [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']; "
              "import exo_rt.jit; print(json.dumps([before, [p['num_threads'] for p in "
              "threadpool_info() if p['user_api'] == 'blas'], os.environ.get('OMP_NUM_THREADS'), "
              "os.environ.get('OPENBLAS_NUM_THREADS')]))")


def test_the_first_kernel_module_puts_blas_at_one_thread_unless_the_user_set_it(tmp_path):
    """numpy loaded first (its BLAS at its default threads: one a CPU), then exo_rt.jit: the
    loaded BLAS at one thread and the variables set for the processes it starts
    (docs/performance.md, "BLAS at one thread"); a user's OPENBLAS_NUM_THREADS is kept."""
    env = {k: v for k, v in _env(tmp_path / "home").items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True, timeout=120)
    before, after, omp, openblas = json.loads(out.stdout)
    assert before and all(n >= 1 for n in before)
    assert after == [1] * len(before) and omp == openblas == "1"
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE],
                         env=dict(env, OPENBLAS_NUM_THREADS="2"), cwd=tmp_path,
                         capture_output=True, text=True, check=True, timeout=120)
    before, after, _omp, openblas = json.loads(out.stdout)
    assert after == before and openblas == "2"
