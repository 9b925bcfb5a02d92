"""Start-up time of ``exo-rt run`` to READY, cold (empty numba cache) and warm.

Each repeat points ``NUMBA_CACHE_DIR`` at a new empty folder, runs ``python -m exo_rt run``
once (cold: every kernel compiles) and once more on the same folder (warm: every kernel loads
from the cache), and reads ``startup_s.process_to_ready`` from the run's summary.json —
seconds from process start to READY, and the CPU seconds the run took (its worker processes
included). Medians over the repeats, against the targets: cold ≤ 8 s, warm ≤ 1 s (2-core
machine). A warm run that compiled after all (a ``numba:`` line: a kernel module edited
between the two runs, in a tree others edit) is marked and left out of the medians.

Python's bytecode is treated as an installed package's: each repeat points
``PYTHONPYCACHEPREFIX`` at a new empty folder and lets Python write there (whatever
``PYTHONDONTWRITEBYTECODE`` says), so the cold run compiles every module's source once and the
warm run reads the bytecode — as every run after ``pip install`` does (pip writes it; an
editable install's first import does, the README's ``exo-rt warmup`` for one).
``--bytecode off`` compiles every module's source at every start (an empty prefix, nothing
written), as in an environment with ``PYTHONDONTWRITEBYTECODE`` set and no bytecode.

``--cpu`` adds a third run a repeat, warm, whose control process prints its own CPU seconds
to READY: on a machine others load, a figure of the work rather than of the waits.

``--mode serial`` switches the parallel warm-up off (EXO_RT_WARMUP=0: numba's lazy compile,
kernel after kernel — the behaviour before exo_rt/warmup.py); ``both`` alternates the two
within each repeat, so that a machine shared with other work loads them alike. The machine
(CPU model, CPUs, load averages) is printed before and after: on a busy machine the
wall-clock figures mean little, the CPU ones more. ``--warmup`` also times ``exo-rt warmup``
(every group) into an empty cache. ``--before DIR`` also times the tree at DIR (a checkout of
an earlier commit: ``git worktree add DIR COMMIT``), alternately with this one within each
repeat, so that both see the same machine.

    python tools/bench_startup.py [--repeats 3] [--mode parallel|serial|both] [--warmup]
                                  [--before DIR] [--bytecode cached|off] [--cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"cold": 8.0, "warm": 1.0}  # s from process start to READY


# ``exo-rt run`` whose control process prints its own CPU seconds (user + system) when READY
# is reached (when Controller._activate returns): on a machine others load, a figure of the
# work itself, where the wall clock's also counts the waits for a CPU
PROBE = """
import resource, sys
from exo_rt.runtime import controller
activate = controller.Controller._activate
def probe(self, *args, **kwargs):
    out = activate(self, *args, **kwargs)
    use = resource.getrusage(resource.RUSAGE_SELF)
    print(f"cpu to READY {use.ru_utime + use.ru_stime:.3f}", file=sys.stderr, flush=True)
    return out
controller.Controller._activate = probe
from exo_rt.cli import main
sys.exit(main(["run"] + sys.argv[1:]))
"""


def to_ready(env: dict, out: Path, duration: float, tree: Path = ROOT,
             probe: bool = False) -> tuple[float, float, bool, float | None]:
    """One ``exo-rt run`` of ``tree`` (its own exo_rt: ``-m`` puts the working directory first
    on the path): (process-to-READY seconds from summary.json, CPU seconds, whether numba
    compiled anything: a ``numba:`` line on its standard error, and with ``probe`` the control
    process's own CPU seconds to READY, :data:`PROBE`)."""
    before = os.times()
    head = ["-c", PROBE] if probe else ["-m", "exo_rt", "run"]
    res = subprocess.run([sys.executable, *head, "--duration", str(duration),
                          "--out", str(out)], env=env, cwd=tree, capture_output=True,
                         text=True)
    after = os.times()
    cpu = (after.children_user - before.children_user
           + after.children_system - before.children_system)
    summary = out / "summary.json"
    if res.returncode not in (0, 1) or not summary.exists():
        raise SystemExit(f"exo-rt run failed ({res.returncode}):\n{res.stderr[-2000:]}")
    lines = res.stderr.splitlines()
    own = next((float(x.split()[-1]) for x in lines if x.startswith("cpu to READY ")), None)
    return (float(json.loads(summary.read_text())["startup_s"]["process_to_ready"]), cpu,
            any(line.startswith("numba:") for line in lines), own)


def bytecode_env(env: dict, prefix: Path, mode: str) -> dict:
    """``env`` with Python's bytecode under ``prefix`` (new and empty per repeat): written
    there and read back (``cached``: an installed package's), or never written (``off``)."""
    env = dict(env, PYTHONPYCACHEPREFIX=str(prefix))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if mode == "off":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def machine() -> str:
    """The CPU model and how many CPUs this process may use, and the load averages."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{cpus} CPUs ({model}), load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def warmup_time(env: dict) -> float:
    """Wall seconds of ``exo-rt warmup`` (every group) into the empty cache of ``env``."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "exo_rt", "warmup"], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"exo-rt warmup failed ({res.returncode}):\n{res.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--duration", type=float, default=0.2, help="RUN seconds of each run")
    p.add_argument("--mode", choices=("parallel", "serial", "both"), default="parallel",
                   help="parallel warm-up on a cold cache (default), numba's lazy compile, or "
                        "both alternately")
    p.add_argument("--warmup", action="store_true", help="also time `exo-rt warmup` (cold)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--before", metavar="DIR", type=Path,
                   help="also time the tree at DIR (an earlier commit's checkout), alternately")
    p.add_argument("--cpu", action="store_true",
                   help="also a third run a repeat, warm, that prints the control process's own "
                        "CPU seconds to READY (a figure of the work, less of the machine's load)")
    p.add_argument("--bytecode", choices=("cached", "off"), default="cached",
                   help="Python's bytecode written by the cold run and read by the warm one, "
                        "as an install's (default), or compiled from source at every start")
    args = p.parse_args(argv)
    modes = ("parallel", "serial") if args.mode == "both" else (args.mode,)
    trees = {"": ROOT} | ({"before ": args.before.resolve()} if args.before else {})
    figures: dict = {t + m: {"cold": [], "warm": [], "cold_cpu": [], "warm_cpu": [],
                             "not_warm": [], "ready_cpu": []} for t in trees for m in modes}
    warmups: list[float] = []
    print(f"before: {machine()}; bytecode {args.bytecode}", flush=True)
    with tempfile.TemporaryDirectory(prefix="exo-rt-startup-") as tmp:
        for r in range(args.repeats):
            for (which, tree), mode in ((t, m) for t in trees.items() for m in modes):
                key = which + mode
                folder = f"{key}{r}".replace(" ", "")
                env = dict(os.environ, NUMBA_CACHE_DIR=str(Path(tmp) / f"numba-{folder}"))
                env = bytecode_env(env, Path(tmp) / f"pyc-{folder}", args.bytecode)
                env["EXO_RT_WARMUP"] = "0" if mode == "serial" else "1"
                for label in ("cold", "warm") + (("probe",) if args.cpu else ()):
                    t, cpu, compiled, own = to_ready(env, Path(tmp) / f"run-{folder}-{label}",
                                                     args.duration, tree, label == "probe")
                    note = ""
                    if label != "cold" and compiled:  # (a kernel module edited meanwhile)
                        figures[key]["not_warm"].append(t)
                        note = "  NOT WARM: numba compiled (left out)"
                    elif label == "probe":
                        figures[key]["ready_cpu"].append(own)
                        print(f"  repeat {r + 1}: {key:<15} warm, the control process's CPU "
                              f"to READY {own:.3f} s ({t:.2f} s wall)", flush=True)
                        continue
                    else:
                        figures[key][label].append(t)
                        figures[key][f"{label}_cpu"].append(cpu)
                    print(f"  repeat {r + 1}: {key:<15} {label:<4} {t:6.2f} s to READY "
                          f"({cpu:5.1f} s CPU, load {os.getloadavg()[0]:.2f}){note}", flush=True)
            if args.warmup:
                env = dict(os.environ, NUMBA_CACHE_DIR=str(Path(tmp) / f"warmup{r}"))
                warmups.append(warmup_time(env))
                print(f"  repeat {r + 1}: exo-rt warmup (every group, cold) {warmups[-1]:6.2f} s",
                      flush=True)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"start-up to READY, median of {args.repeats}; after: {machine()}")
    ok = True
    for key, fig in figures.items():
        for label, target in TARGETS.items():
            if not fig[label]:
                ok &= key != "parallel"
                print(f"  {key:<15} {label:<4} no warm run (each compiled: "
                      + ", ".join(f"{t:.2f}" for t in fig["not_warm"]) + ")")
                continue
            med = statistics.median(fig[label])
            ok &= med <= target or key != "parallel"
            print(f"  {key:<15} {label:<4} {med:6.2f} s  (target ≤ {target:g} s: "
                  f"{'met' if med <= target else 'MISSED'}, "
                  f"CPU {statistics.median(fig[f'{label}_cpu']):.1f} s)  runs: "
                  + ", ".join(f"{t:.2f}" for t in fig[label]))
        if fig["ready_cpu"]:
            print(f"  {key:<15} warm, the control process's CPU to READY "
                  f"{statistics.median(fig['ready_cpu']):.3f} s  runs: "
                  + ", ".join(f"{t:.3f}" for t in fig["ready_cpu"]))
    if warmups:
        print(f"  exo-rt warmup, every group, cold: {statistics.median(warmups):.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": cpus, "machine": machine(),
                                               "bytecode": args.bytecode, "modes": figures,
                                               "warmup": warmups}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
