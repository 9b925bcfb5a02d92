"""The numba warm-up (exo_rt/warmup.py, exo_rt/compile_workers.py) and the cache key
(exo_rt/numba_settings.py).

The warm-up must cover what the run compiles: after ``exo-rt warmup`` into an empty cache, a
run in a fresh process compiles nothing (numba's compile events count it) — by construction,
each entry building its component as the runtime does. No timings of the compile here (speed
is measured by tools/bench_startup.py); a warm cache's cost is bounded.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from exo_rt import compile_workers, warmup
from exo_rt.numba_settings import kernel_files, kernel_key
from exo_rt.runtime.config import load_top

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"

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

    rc = main(["run", "--duration", sys.argv[2], "--out", sys.argv[1], "--no-rt-setup"])
    print("COMPILED " + json.dumps({"rc": rc, "kernels": compiled}))
""")
LINE = re.compile(r"^  (?P<name>\S+) +(\d+\.\d\d s  (\d+ kernels? compiled|loaded)|FAILED: .+)"
                  r"  \[ *\d+\.\d s, worker \d+\]$")


def test_the_registry_is_components_by_group():
    """Every entry is in a known group; a run's groups hold the cycle and the plant; the
    registry refuses an unknown group and a name twice."""
    assert {e.group for e in warmup.ENTRIES.values()} == set(warmup.GROUPS)
    assert {"cycle", "plant"} <= set(warmup.select(warmup.RUN_GROUPS))
    assert {"cycle", "cycle.buses", "bus.io"} <= set(warmup.select(warmup.REAL_BUS_GROUPS))
    assert "cycle.buses" not in warmup.select(warmup.RUN_GROUPS)
    assert warmup.select((), ["timing", "cycle"]) == ["cycle", "timing"]  # registry order
    with pytest.raises(ValueError, match="unknown warm-up group 'nope'"):
        warmup.entry("t.x", "nope")
    with pytest.raises(ValueError, match="'cycle' is registered twice"):
        warmup.entry("cycle", "controller")
    with pytest.raises(KeyError, match="no warm-up entry t.missing"):
        warmup.select((), ["t.missing"])


def test_a_line_per_entry_and_only_what_ran_is_marked(tmp_path, monkeypatch):
    """``warm_up`` prints a header, one line per entry (compiled, loaded or FAILED) and a
    summary; the marker gets the entries that ran, not the failed one; a partly warm cache
    runs its cold entries only; ``main`` says 1 for a failed entry."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # the marker (numba's own stays)

    def broken(c):
        raise RuntimeError("a component's constructor changed\nsecond line")

    monkeypatch.setitem(warmup.ENTRIES, "t.broken", warmup.Entry("t.broken", "sim", broken))
    ctx = warmup.Context(config=CONFIGS / "exo_leg.yaml")
    out = io.StringIO()
    res = warmup.warm_up((), names=["timing", "gait_phase", "t.broken"], ctx=ctx, jobs=1,
                         stream=out)
    lines = [x for x in out.getvalue().splitlines() if not x.startswith("  … ")]  # heartbeats
    assert lines[0] == "numba: warming 3 components up in 1 process …", lines
    entries = [LINE.match(x) for x in lines[1:-1]]
    assert all(entries) and len(entries) == 3, lines
    assert [m["name"] for m in entries] == ["gait_phase", "timing", "t.broken"]
    assert "FAILED: RuntimeError: a component's constructor changed (test_warmup.py:" in lines[3]
    assert re.match(r"numba: warm-up done in \d+\.\d s, \d+ kernels compiled, 1 entries "
                    r"FAILED \(cache ", lines[-1]), lines[-1]
    assert [r["error"] is None for r in res] == [True, True, False]
    assert compile_workers.warm_set() == {"gait_phase@tree", "timing@tree"}
    # warm now but for the broken entry: that one runs again, alone
    assert warmup.warm_up((), names=["timing"], ctx=ctx, stream=out) == []
    again = warmup.warm_up((), names=["timing", "t.broken"], ctx=ctx, jobs=1, stream=out)
    assert [r["name"] for r in again] == ["t.broken"]
    assert warmup.main((), config=CONFIGS / "exo_leg.yaml", names=["t.broken"], jobs=1) == 1


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_ensure_on_a_warm_cache_is_a_file_lookup(tmp_path, monkeypatch):
    """With the run's entries marked warm, ``ensure`` runs nothing, prints nothing and takes
    well under 50 ms (a marker read; the first call pays the imports)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    top = load_top(CONFIGS / "exo_leg.yaml")
    compile_workers.mark(warmup._tags(warmup.select(warmup.RUN_GROUPS), warmup.Context(top)))

    def no_pool(*a, **k):
        raise AssertionError("a warm cache ran the warm-up")

    monkeypatch.setattr(compile_workers, "pool", no_pool)
    monkeypatch.setattr(compile_workers.compiles(), "report", None)  # (ensure sets it)
    out = io.StringIO()
    warmup.ensure(top, warmup.RUN_GROUPS, stream=out)
    t0 = time.perf_counter()
    warmup.ensure(top, warmup.RUN_GROUPS, stream=out)
    took = time.perf_counter() - t0
    assert out.getvalue() == "" and took < 0.05, took
    with pytest.raises(AssertionError, match="ran the warm-up"):  # … and io is cold
        warmup.ensure(top, warmup.REAL_BUS_GROUPS, stream=out)


def test_warmth_is_per_law_per_bus_count_per_plant(monkeypatch):
    """The law is warm per control law (the cycle's step is the same for every law), the
    cycle's one-call form per number of buses, the plant per plant model; the rest once per
    dynamics variant. A run that differs in one says so."""
    one = warmup.Context(config=CONFIGS / "exo_leg.yaml")
    two = warmup.Context(config=CONFIGS / "exo_2leg.yaml")
    law = one.top.controller.law
    names = ["cycle", "law", "cycle.buses", "plant", "timing"]
    assert warmup._tags(names, one) == {"cycle@tree", f"law@tree/{law}",
                                        "cycle.buses@tree/1buses",
                                        "plant@tree/harmonic_drive", "timing@tree"}
    assert warmup._tags(names, two) - warmup._tags(names, one) == {"cycle.buses@tree/2buses"}
    monkeypatch.setattr(warmup, "_warm_set", lambda: warmup._tags(names, one))
    assert warmup.why_cold(names, two) == \
        "the compile cache lacks the cycle for 2 buses (its first run)"
    monkeypatch.setattr(warmup, "_warm_set", lambda: {"timing@tree"})
    assert warmup.why_cold(names, one) == ("the compile cache lacks 4 of this run's "
                                           "components (cycle, law, cycle.buses …)")
    # a controller that assists: its law's entry compiles the wearer's torque too
    helps = replace(one.top.controller, gains=one.top.controller.gains.copy())
    helps.gains["assist"] = 0.3
    assisted = warmup.Context(replace(one.top, controller=helps))
    assert warmup._tags(["law"], assisted) == {f"law@tree/{law}+assist"}


def test_a_registered_plant_model_warms_without_an_entry_of_its_own(tmp_path, monkeypatch):
    """A plant model registered from outside (tests/test_plant_registry.py's, its kernel a
    fresh dispatcher here) and named in a top config: the ``plant`` entry compiles its step
    for exactly the types the simulated bus passes (a plant built as the bus builds it
    compiles nothing more), and it is warm for that model only."""
    from test_plant_registry import RigidGearPlant, _top, rigid_step

    from exo_rt.sim import plants

    step = njit(rigid_step.py_func)  # compiled by no process yet

    class Fresh(RigidGearPlant):
        kernel = staticmethod(step)

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    plants.model("fresh_gear_warmup", doc="rigid gears, a kernel of its own")(Fresh)
    try:
        ctx = warmup.Context(load_top(_top(tmp_path, "fresh_gear_warmup")))
        assert not step.signatures and "fresh_gear_warmup" not in str(list(warmup.ENTRIES))
        (res,) = warmup.warm_up(("plant",), ctx=ctx, jobs=1, stream=io.StringIO())
        assert res["error"] is None and "test_plant_registry.rigid_step" in res["compiled"]
        assert len(step.signatures) == 1
        plant = plants.create("fresh_gear_warmup", ctx.top.robot, dt=1e-3, substeps=10)
        plant.step(np.zeros_like(plant.cmd))
        assert len(step.signatures) == 1  # no specialisation other than the warmed one
        assert compile_workers.warm_set() == {"plant@tree/fresh_gear_warmup"}
        assert warmup.why_cold(["plant"], warmup.Context(config=CONFIGS / "exo_leg.yaml")) \
            == "the compile cache lacks plant model 'harmonic_drive' (its first run)"
    finally:
        plants.unregister("fresh_gear_warmup")


@pytest.mark.slow
def test_workers_started_ahead_serve_the_warm_up(tmp_path, monkeypatch):
    """On a cold cache `exo-rt run` starts the compile workers first thing; the warm-up then
    uses them (its context sent on first use), and a warm cache starts none."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setenv("EXO_RT_WARMUP_JOBS", "2")
    assert compile_workers.cold()
    assert compile_workers.prestart() == 1
    spare = compile_workers._SPARE[0]
    (worker,) = compile_workers.workers(1)
    assert worker is spare and not compile_workers._SPARE
    try:
        res = worker.run("gait_phase", warmup.Context().spec())
    finally:
        worker.close()
    ours = [k for k in res["compiled"] if k.startswith("exo_rt.")]  # (and numba's own min)
    assert res["error"] is None and set(ours) == {
        "exo_rt.control.trajectory.phase_on_heel_strike",
        "exo_rt.control.trajectory.phase_from_events", "exo_rt.session.envelope.trace",
        "exo_rt.control.trajectory.gait",  # (a speed change's check starts on the gait)
        "exo_rt.cycle.segment.reference", "exo_rt.cycle.segment.fourier"}, res
    compile_workers.mark({"gait_phase@tree"})
    assert not compile_workers.cold() and compile_workers.prestart() == 0


@pytest.mark.slow
def test_after_warmup_a_run_compiles_nothing_and_every_entry_indexes_within_bounds(tmp_path):
    """``exo-rt warmup`` of the run's groups into an empty cache (in parallel processes), then
    ``exo-rt run`` in another process with the parallel warm-up off: it loads every kernel
    from the cache and compiles none; then the warm-up of every other group.

    All of it with numba's bounds checking on: compiled code does not check its indices, and
    a row past an array's end is written over the heap, silently, and the process aborts
    later, anywhere (the warm-up's own energy entry did). So every warm-up entry of every
    group and a default run to SHUTDOWN also index within their arrays (an IndexError would
    fail the entry or the run). (One cold cache for both: they were two tests, 95 s and 184
    s of compiling on the development machine.)"""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"), EXO_RT_WARMUP_JOBS="2")
    run_groups = ["--group", "controller", "--group", "plant"]
    warm = subprocess.run([sys.executable, "-m", "exo_rt", "warmup", *run_groups], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert warm.returncode == 0, warm.stderr
    assert "kernels compiled" in warm.stderr and "FAILED" not in warm.stderr, warm.stderr
    run = subprocess.run([sys.executable, "-c", RUN_AND_COUNT, str(tmp_path / "run"), "0.5"],
                         env=dict(env, EXO_RT_WARMUP="0"), cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    line = next((x for x in run.stdout.splitlines() if x.startswith("COMPILED ")), None)
    assert line is not None, run.stdout + run.stderr
    out = json.loads(line.removeprefix("COMPILED "))
    assert out["rc"] == 0, run.stdout + run.stderr
    assert "final state SHUTDOWN" in run.stdout + run.stderr, run.stdout + run.stderr
    assert len(out["kernels"]) == 0, f"compiled after the warm-up: {out['kernels']}"
    again = subprocess.run([sys.executable, "-m", "exo_rt", "warmup", *run_groups], env=env,
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "already warm" in again.stderr, again.stderr
    every = subprocess.run([sys.executable, "-m", "exo_rt", "warmup"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=900)
    assert every.returncode == 0, every.stderr
    assert "kernels compiled" in every.stderr and "FAILED" not in every.stderr, every.stderr


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
LAWS = "from numba import njit\n\n\n@njit(cache=True)\ndef law(x):\n    return x\n"


def test_kernel_key_follows_what_kernels_read(tmp_path):
    """The key covers kernel modules, the njit functions they call and the constants they
    read (also through module-level expressions) — and nothing that only imports them or
    that only their Python code uses."""
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "kernel.py": KERNEL,
        "consts.py": "WIDTH = 3\n",
        "laws.py": LAWS,
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


def test_the_key_s_memo_parses_only_what_was_edited(tmp_path, monkeypatch):
    """kernel_files' memo (kept on disk beside the key): the same files as a fresh analysis
    after each edit — one that makes a Python-only module a kernel's dependency included —
    while a call parses only the files edited since the last."""
    import ast

    pkg = _package(tmp_path, {
        "__init__.py": "",
        "kernel.py": KERNEL,
        "consts.py": "WIDTH = 3\n",
        "laws.py": LAWS,
        "helpers.py": "def text():\n    return 'x'\n",
        "app.py": "from pkg.kernel import step\n",
    })
    parsed: list[str] = []
    parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda src, name="<unknown>", *a, **k: (
        parsed.append(Path(name).name), parse(src, name, *a, **k))[1])
    memo: dict = {}

    def files() -> set[str]:
        return {p.name for p in kernel_files(pkg, memo)}

    assert files() == {p.name for p in kernel_files(pkg)} == \
        {"__init__.py", "kernel.py", "consts.py", "laws.py"}
    parsed.clear()
    memo = json.loads(json.dumps(memo))  # as read back from its file
    assert files() == {"__init__.py", "kernel.py", "consts.py", "laws.py"} and parsed == []
    (pkg / "laws.py").write_text("from numba import njit\nfrom pkg.helpers import text\n"
                                 "\nN = len(text())\n")
    assert files() == {"__init__.py", "kernel.py", "consts.py", "laws.py", "helpers.py"}
    assert sorted(parsed) == ["helpers.py", "laws.py"]  # the edited file, its new dependency
    assert files() == {p.name for p in kernel_files(pkg)}
    fresh = kernel_key(pkg)
    parsed.clear()
    assert kernel_key(pkg, memo) == fresh and parsed == []


def test_the_package_key_excludes_the_runtime_glue():
    """In exo_rt itself: the laws, dynamics and plant are in the key; the CLI, the bus and
    this registry are not (editing them keeps the compiled kernels)."""
    pkg = ROOT / "exo_rt"
    names = {p.relative_to(pkg).as_posix() for p in kernel_files(pkg)}
    assert {"control/laws.py", "dynamics/kernels.py", "sim/plant.py",
            "model/mechanism.py"} <= names
    assert not names & {"warmup.py", "runtime/replay.py"} and not [n for n in names if "cli/" in n]


def test_kernels_compile_without_the_c_callable_wrapper_and_with_the_package_settings():
    """exo_rt.jit's njit drops numba's C-callable wrapper (unless asked for), and importing it
    sets LLVM's vectoriser off and -O2 for numba in a fresh process, numba imported before it
    or not (a user's own environment wins)."""
    from exo_rt.jit import njit
    from exo_rt.sim.plant import plant_step

    assert plant_step.targetoptions["no_cfunc_wrapper"] is True
    assert njit(no_cfunc_wrapper=False)(lambda x: x).targetoptions["no_cfunc_wrapper"] is False
    code = ("import numba.core.config as c, exo_rt.jit; "
            "print(int(c.OPT), int(c.LOOP_VECTORIZE))")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_OPT", "NUMBA_LOOP_VECTORIZE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["2", "0"]
    env["NUMBA_OPT"] = "3"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["3", "0"]


def test_a_compile_reported_after_its_stream_closed_loses_the_line_not_the_compile(
        monkeypatch):
    """An in-process caller (a test's captured stderr, a notebook) sets the compile report up
    with its stderr, which is closed later: a kernel compiled after that loses its line —
    before, the report wrote to the closed stream and its ValueError, raised through numba's
    compile event, failed the compile it reported (seen in a fresh clone's CI, where kernels
    the warm-up does not cover compiled in later tests)."""
    from exo_rt import compile_workers

    c = compile_workers.compiles()
    monkeypatch.setattr(c, "report", c.report)  # (restored after the test)
    monkeypatch.setattr(c, "stream", c.stream)
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    compile_workers.report_compiles()
    c.report("numba: compiled f(array(float64, 1d, C)) in 0.01 s")
    assert "numba: compiled f(array(float64, 1d, C))" in first.getvalue()
    first.close()
    c.report("numba: compiled g() in 0.01 s")  # lost with its stream, and no error
