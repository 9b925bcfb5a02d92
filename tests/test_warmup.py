"""The numba warm-up registry (exo_rt/warmup.py) and the cache key (exo_rt/__init__.py).

The registry must cover what the run compiles: after ``exo-rt warmup`` into an empty cache, a
run in a fresh process compiles nothing (numba's compile events count it). No timings here —
speed is measured by tools/bench_startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from exo_rt import kernel_files, kernel_key, warmup

ROOT = Path(__file__).resolve().parents[1]

RUN_AND_COUNT = textwrap.dedent("""
    import json, sys
    from numba.core import event

    compiled = []

    class Count(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):
            d = ev.data["dispatcher"]
            compiled.append(f"{d.py_func.__module__}.{d.py_func.__qualname__}")

    event.register("numba:compile", Count())
    from exo_rt.cli import main

    rc = main(["run", "--duration", "0.05", "--out", sys.argv[1], "--no-rt-setup"])
    print("COMPILED " + json.dumps({"rc": rc, "kernels": compiled}))
""")


def test_registry_is_consistent():
    """Every ``after`` names an entry, groups are known, and there is no cycle."""
    for e in warmup.ENTRIES.values():
        assert e.group in warmup.GROUPS, e.name
        assert set(e.after) <= set(warmup.ENTRIES), (e.name, set(e.after) - set(warmup.ENTRIES))
    names = warmup.select()
    prio = warmup._priorities(names)  # recursion through `after`: a cycle never ends
    assert set(prio) == set(names)
    assert set(warmup.select(warmup.RUN_GROUPS)) >= {"controller.warm_up", "plant.step"}


def test_the_plan_follows_the_dependencies_and_beats_the_critical_path_order(monkeypatch):
    """_makespan models compile_entries' list scheduling; the planned order of _priorities
    never ends later than the plain critical-path order, and is never shorter than what two
    processes can do (half the work, the longest chain)."""
    def entry(name, after=()):
        monkeypatch.setitem(warmup.ENTRIES, name, warmup.Entry(name, "dynamics", None, after))

    # a(3) → c(1), b(2), d(2) on two processes: a | b then d, then c when a ends: 4 s
    for name, after in (("t.a", ()), ("t.b", ()), ("t.c", ("t.a",)), ("t.d", ())):
        entry(name, after)
    todo = ["t.a", "t.b", "t.c", "t.d"]
    cost = {"t.a": 3.0, "t.b": 2.0, "t.c": 1.0, "t.d": 2.0}
    assert warmup._makespan(todo, cost, warmup._critical_paths(todo, cost), 2) == 4.0
    assert warmup._makespan(todo, cost, warmup._critical_paths(todo, cost), 1) == 8.0
    # the run's own entries at made-up costs: planned ≤ critical path order, ≥ the bounds
    names = warmup.select(warmup.RUN_GROUPS)
    monkeypatch.setattr(warmup, "_measured", lambda: {n: 0.1 + sum(map(ord, n)) % 17 / 10
                                                      for n in names})
    cost = warmup._costs(names)
    chain = warmup._critical_paths(names, cost)
    plain = warmup._makespan(names, cost, chain, 2)
    planned = warmup._makespan(names, cost, warmup._priorities(names, 2), 2)
    assert max(sum(cost.values()) / 2, max(chain.values())) - 1e-9 <= planned <= plain


def test_workers_started_ahead_serve_the_warm_up(tmp_path, monkeypatch):
    """On a cold cache `exo-rt run` starts the compile workers first thing; the warm-up then
    uses them (its context sent on first use), and a warm cache starts none."""
    from exo_rt import compile_workers

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setenv("EXO_RT_WARMUP_JOBS", "2")
    assert compile_workers.cold()
    assert compile_workers.prestart() == 1
    spare = compile_workers._SPARE[0]
    (worker,) = compile_workers.workers(1)
    assert worker is spare and not compile_workers._SPARE
    try:
        res = worker.run("estimate.velocity_update", warmup.Context().spec())
    finally:
        worker.close()
    assert res["error"] is None and res["compiled"] == [
        "exo_rt.control.estimate.velocity_update"], res
    warmup._mark({"estimate.velocity_update@tree"})
    assert not compile_workers.cold() and compile_workers.prestart() == 0


@pytest.mark.slow
def test_after_warmup_a_run_compiles_nothing(tmp_path):
    """``exo-rt warmup`` of the run's groups into an empty cache (in parallel processes), then
    ``exo-rt run`` in another process with the parallel warm-up off: it loads every kernel
    from the cache and compiles none."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"), EXO_RT_WARMUP_JOBS="2")
    warm = subprocess.run([sys.executable, "-m", "exo_rt", "warmup", "--group", "controller",
                           "--group", "plant"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert warm.returncode == 0, warm.stderr
    assert "kernels compiled" in warm.stderr and "FAILED" not in warm.stderr, warm.stderr
    run = subprocess.run([sys.executable, "-c", RUN_AND_COUNT, str(tmp_path / "run")],
                         env=dict(env, EXO_RT_WARMUP="0"), cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    line = next((x for x in run.stdout.splitlines() if x.startswith("COMPILED ")), None)
    assert line is not None, run.stdout + run.stderr
    out = json.loads(line.removeprefix("COMPILED "))
    assert out["rc"] == 0, run.stdout + run.stderr
    assert len(out["kernels"]) == 0, f"compiled after the warm-up: {out['kernels']}"
    again = subprocess.run([sys.executable, "-m", "exo_rt", "warmup", "--group", "controller",
                            "--group", "plant"], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0 and "already warm" in again.stderr, again.stderr


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return pkg


KERNEL = """
    import numpy as np
    from numba import njit

    from pkg.consts import WIDTH
    from pkg.laws import law
    from pkg import helpers

    ROWS = WIDTH + 1  # read by the kernel: frozen into its compiled code


    @njit(cache=True)
    def step(x):
        return law(x) * ROWS


    def describe():
        return helpers.text()  # Python only: the kernel never sees it
"""


def test_kernel_key_follows_what_kernels_read(tmp_path):
    """The key covers kernel modules, the njit functions they call and the constants they
    read (also through module-level expressions) — and nothing that only imports them or
    that only their Python code uses."""
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "kernel.py": KERNEL,
        "consts.py": "WIDTH = 3\n",
        "laws.py": "from numba import njit\n\n\n@njit(cache=True)\ndef law(x):\n    return x\n",
        "helpers.py": "def text():\n    return 'x'\n",
        "app.py": "from pkg.kernel import step\n\n\ndef main():\n    return step(1.0)\n",
        "sub/__init__.py": "",
        "sub/cli.py": "from pkg import app\n",
    })
    names = {p.relative_to(pkg).as_posix() for p in kernel_files(pkg)}
    assert names == {"__init__.py", "kernel.py", "consts.py", "laws.py"}
    before = kernel_key(pkg)
    for untouched in ("app.py", "helpers.py", "sub/cli.py"):
        (pkg / untouched).write_text((pkg / untouched).read_text() + "# edited\n")
        assert kernel_key(pkg) == before, untouched
    (pkg / "consts.py").write_text("WIDTH = 4\n")
    assert kernel_key(pkg) != before
    before = kernel_key(pkg)
    (pkg / "laws.py").write_text((pkg / "laws.py").read_text().replace("x\n", "x + 1\n"))
    assert kernel_key(pkg) != before


def test_a_kernel_module_that_takes_its_decorator_from_the_package_is_in_the_key(tmp_path):
    """A module whose text never names numba — it imports ``njit`` from the package's own
    wrapper (exo_rt/jit.py) — is a kernel module all the same, and so is that wrapper."""
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "jit.py": "from numba import njit as _njit\n\n\ndef njit(*a, **k):\n"
                  "    return _njit(*a, **k)\n",
        "kernel.py": "from pkg.jit import njit\n\n\n@njit(cache=True)\ndef f(x):\n"
                     "    return x\n",
        "app.py": "from pkg.kernel import f\n",
    })
    assert {p.name for p in kernel_files(pkg)} == {"__init__.py", "jit.py", "kernel.py"}
    before = kernel_key(pkg)
    (pkg / "kernel.py").write_text((pkg / "kernel.py").read_text().replace("x\n", "x + 1\n"))
    assert kernel_key(pkg) != before


def test_kernel_key_is_conservative_when_unsure(tmp_path):
    """A star import widens the set to the whole module; an unparsable file to every file."""
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "kernel.py": "from numba import njit\nfrom pkg.consts import *\n",
        "consts.py": "A = 1\n",
        "other.py": "B = 2\n",
    })
    names = {p.name for p in kernel_files(pkg)}
    assert names == {"__init__.py", "kernel.py", "consts.py"}
    (pkg / "broken.py").write_text("from numba import njit\ndef (:\n")
    assert {p.name for p in kernel_files(pkg)} >= {"other.py", "broken.py"}


def test_the_package_key_excludes_the_runtime_glue():
    """In exo_rt itself: the laws, dynamics and plant are in the key; the CLI, the bus and
    this registry are not (editing them keeps the compiled kernels)."""
    pkg = ROOT / "exo_rt"
    names = {p.relative_to(pkg).as_posix() for p in kernel_files(pkg)}
    assert {"control/laws.py", "dynamics/kernels.py", "sim/plant.py",
            "model/mechanism.py"} <= names
    assert not names & {"cli.py", "warmup.py", "record/replay.py"}


def test_kernels_compile_without_the_c_callable_wrapper_and_with_the_package_settings():
    """exo_rt.jit's njit drops numba's C-callable wrapper (unless asked for), and importing the
    package sets LLVM's vectoriser off and -O2 for numba in a fresh process (a user's own
    environment wins)."""
    from exo_rt.jit import njit
    from exo_rt.sim.plant import plant_step

    assert plant_step.targetoptions["no_cfunc_wrapper"] is True
    assert njit(no_cfunc_wrapper=False)(lambda x: x).targetoptions["no_cfunc_wrapper"] is False
    code = ("import exo_rt, numba.core.config as c; "
            "print(int(c.OPT), int(c.LOOP_VECTORIZE))")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_OPT", "NUMBA_LOOP_VECTORIZE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["2", "0"]
    env["NUMBA_OPT"] = "3"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["3", "0"]


def test_the_one_call_cycle_is_warm_per_number_of_buses():
    """The one-call cycle's compiled type has a part per bus: warming it for one bus does not
    mark it warm for two (a two-bus run then compiles it ahead, not after set-up); entries
    that do not depend on the buses share one mark."""
    one = warmup.Context(config=ROOT / "configs" / "exo_leg.yaml")
    two = warmup.Context(config=ROOT / "configs" / "exo_2leg.yaml")
    names = ["runtime.cycle_call", "safety.check"]
    assert warmup._tags(names, one) == {"runtime.cycle_call@tree/1buses", "safety.check@tree"}
    assert warmup._tags(names, two) == {"runtime.cycle_call@tree/2buses", "safety.check@tree"}


@pytest.mark.slow
def test_every_warm_up_entry_and_a_run_index_within_bounds(tmp_path):
    """Compiled code does not check its indices: a row past an array's end is written over
    the heap, silently, and the process aborts later, anywhere (the warm-up's own energy
    entry did). With numba's bounds checking on, every warm-up entry of every group and a
    default run index within their arrays (an IndexError would fail the entry or the run)."""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    warm = subprocess.run([sys.executable, "-m", "exo_rt", "warmup"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert warm.returncode == 0, warm.stderr
    assert "kernels compiled" in warm.stderr and "FAILED" not in warm.stderr, warm.stderr
    run = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", "0.5", "--out",
                          str(tmp_path / "run")], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "final state SHUTDOWN" in run.stdout + run.stderr, run.stdout + run.stderr
