#!/usr/bin/env python3
"""Real-time runs: the controller process alone on its CPU, the simulation and the recording
in their own processes — as on the exoskeleton.

    python tools/bench_rt.py [--duration S] [--configs exo_leg exo_2leg] [--hog] [--out DIR]
        [--simulation YAML ...] [--standing] [--rounds N] [--before DIR]

For each config it runs ``exo-rt run --realtime`` (recording on, board emulator on) and prints
the controller-only cycle (compute: bus I/O + the cycle kernel + state handling, from the
summary), the wake latency and the period (p50/p99/p99.9/max), the overruns as a fraction of
the cycles, the first 100 cycles after READY (wake + compute within the period?), and the
simulation's own figures. ``--hog`` runs a CPU hog on every CPU but the control thread's for
the whole run. Targets: compute median ≤ 40 µs (exo_leg) / ≤ 80 µs (exo_2leg), p99.9 ≤ 150 µs;
wake p99.9 ≤ 100 µs; overruns ≤ 0.01 %; no fault.

``--simulation '{plant: world, scene: floor}' '{plant: harmonic_drive}'`` runs each config
once per ``simulation:`` section given (a copy of the config with it); ``--standing`` runs a
session that stands for --duration (the floor scene cannot walk yet); ``--rounds N`` repeats
the whole set N times, the runs taking turns. Each run also counts its stale cycles (a joint's
feedback missing, late or malformed: the cycle log's flags) and their longest streak — what
the safety's ``stale_cycles`` trips on.

``--before DIR`` runs the tree at DIR (a checkout of an earlier commit: ``git worktree add DIR
COMMIT``) beside this one, each with its own code (``PYTHONPATH`` and the working directory
the tree; a config given by name or relative path is each tree's own file): first one short
run of each, discarded (its numba cache and the files it reads made warm), then ``--rounds``
rounds in which the trees take turns, DIR first, so that both see the same machine. It ends
with each tree's compute p50 of every run (the cycle log's ``compute_us``, the controller's own
work in a cycle, over every recorded cycle), their medians and spread, the ratio of the
medians (this tree / DIR) and whether it is within 5 %. The load averages are printed with
every run: on a shared machine the ratio and the spread are the figures, not the µs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET_P50 = {"exo_leg": 40.0, "exo_2leg": 80.0}
STANDING_SESSION = ("description: stand for --duration, end (tools/bench_rt.py --standing)\n"
                    "start: standing\n"
                    "steps:\n"
                    "  - {request: end, wait: duration}\n")


def hogs(control_cpu: int) -> list[subprocess.Popen]:
    cpus = sorted(os.sched_getaffinity(0) - {control_cpu}) or [control_cpu]
    return [subprocess.Popen([sys.executable, "-c",
                              f"import os\nos.sched_setaffinity(0, {{{c}}})\nwhile True: pass"])
            for c in cpus]


def with_simulation(path: Path, simulation: str, folder: Path) -> Path:
    """A copy of the top config ``path`` in ``folder`` with ``simulation`` (YAML) as its
    ``simulation:`` section, the files it names made absolute."""
    import yaml

    top = yaml.safe_load(path.read_text())
    for key in ("robot", "buses", "controller"):
        if isinstance(top.get(key), str):
            top[key] = str((path.parent / top[key]).resolve())
    top["simulation"] = yaml.safe_load(simulation)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{path.stem}.yaml"
    out.write_text(yaml.safe_dump(top, sort_keys=False))
    return out


def stale(records) -> tuple[int, int]:
    """(cycles with a joint's feedback missing, late or malformed; their longest streak)."""
    from exo_rt.bus.flags import F_LATE, F_MALFORMED, F_MISSING

    flags = np.atleast_2d(records["flags"].astype(np.int64).T).T
    bad = np.any(flags & (F_MISSING | F_MALFORMED | F_LATE), axis=1)
    streak = longest = 0
    for b in bad:
        streak = streak + 1 if b else 0
        longest = max(longest, streak)
    return int(bad.sum()), longest


def config_path(config: str, tree: Path) -> Path:
    """The top config ``config`` names in ``tree``: a name in its configs/, or a path (a
    relative one inside the tree)."""
    if not config.endswith(".yaml"):
        return tree / "configs" / f"{config}.yaml"
    return tree / config if not Path(config).is_absolute() else Path(config)


def run(config: str, duration: float, out: Path, hog: bool, simulation: str | None = None,
        session: Path | None = None, tree: Path = ROOT, wearer: Path | None = None) -> dict:
    """One ``exo-rt run --realtime`` of ``tree``'s code (its own package first on the path),
    its summary, cycle-log figures and the load averages before and after."""
    procs = hogs(max(os.sched_getaffinity(0))) if hog else []
    load = os.getloadavg()
    try:
        path = config_path(config, tree)
        if simulation is not None:
            path = with_simulation(path, simulation, out.parent / f"{out.name}-config")
        res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--realtime", "--config",
                              str(path), "--duration",
                              str(duration), "--out", str(out)]
                             + (["--session", str(session)] if session else [])
                             + (["--wearer", str(wearer)] if wearer else []),
                             capture_output=True, text=True, cwd=tree,
                             env=dict(os.environ, PYTHONPATH=str(tree)))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    if not (out / "summary.json").exists():
        raise SystemExit(f"exo-rt run ({tree}) failed ({res.returncode}):\n"
                         f"{res.stderr[-2000:]}")
    s = json.loads((out / "summary.json").read_text())
    sim = [line for line in res.stderr.splitlines() if line.startswith("simulation:")]
    from exo_rt.record.recorder import read_cycle_log

    records, _ = read_cycle_log(out / "cycles.exolog")
    n = min(100, len(records) - 1)  # (a run that ended SAFE early has fewer)
    first = records["wake_us"][:n] + records["compute_us"][1:n + 1]
    compute = records["compute_us"][records["compute_us"] > 0]
    first_max = float(first.max()) if n > 0 else float("nan")
    return {"summary": s, "sim": sim[-1] if sim else "", "first100_max_us": first_max,
            "records": len(records), "stale": stale(records),
            "compute_p50": float(np.median(compute)), "load": (load, os.getloadavg())}


def side_by_side(p50: dict, before: Path) -> None:
    """Each config's compute p50 per run in both trees, the medians and their ratio."""
    print(f"compute p50 (the cycle log's compute_us, µs), each run, the trees alternated; "
          f"before: {before}")
    for config, trees in p50.items():
        med = {t: float(np.median(x)) for t, x in trees.items()}
        for t, x in trees.items():
            print(f"  {config:<9} {t:<6} " + " ".join(f"{v:6.1f}" for v in x)
                  + f"   median {med[t]:6.1f}  spread {min(x):.1f}–{max(x):.1f}")
        ratio = med["this"] / med["before"]
        print(f"  {config:<9} this / before: {ratio:.3f} ("
              f"{'within' if abs(ratio - 1) <= 0.05 else 'NOT within'} 5 %)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--configs", nargs="*", default=["exo_leg", "exo_2leg"],
                    help="names in configs/ or paths to top configs (.yaml)")
    ap.add_argument("--hog", action="store_true", help="a CPU hog on every other CPU")
    ap.add_argument("--out", default="/tmp/exo-rt-bench-rt")
    ap.add_argument("--simulation", nargs="*", default=None, metavar="YAML",
                    help="run each config once per simulation: section given, e.g. "
                         "'{plant: world, scene: floor}'")
    ap.add_argument("--standing", action="store_true",
                    help="a session that stands for --duration (not the default walk)")
    ap.add_argument("--wearer", type=Path, default=None, metavar="YAML",
                    help="a wearer profile for every run (e.g. configs/wearers/leading.yaml)")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the set, the runs alternated")
    ap.add_argument("--before", metavar="DIR", type=Path,
                    help="also run the tree at DIR (an earlier commit's checkout), the two "
                         "alternated, each warmed by a discarded run first; ends with each "
                         "tree's compute p50 per run and the ratio of the medians")
    args = ap.parse_args(argv)
    print(f"exo-rt run --realtime, {args.duration:g} s each, recording and board emulator on"
          f"{', CPU hog on the other CPUs' if args.hog else ''} ({os.cpu_count()} CPUs):")
    trees = {"this": ROOT}
    if args.before:
        trees = {"before": args.before.resolve(), "this": ROOT}
    p50: dict = {}
    session = None
    if args.standing:
        session = Path(args.out) / "standing.yaml"
        session.parent.mkdir(parents=True, exist_ok=True)
        session.write_text(STANDING_SESSION)
    runs = [(c, sim, tree) for c in args.configs for sim in (args.simulation or [None])
            for tree in trees]
    if args.before:  # each tree's kernels loaded and files read once, before any is timed
        for config, simulation, tree in runs:
            out = Path(args.out) / f"warm-{tree}-{Path(config).stem}"
            r = run(config, min(args.duration, 2.0), out, args.hog, simulation, session,
                    trees[tree], args.wearer)
            print(f"  {tree} {config}: warm-up run (discarded), compute p50 "
                  f"{r['compute_p50']:.1f} µs", flush=True)
    for rnd, (config, simulation, tree) in ((r, x) for r in range(args.rounds) for x in runs):
        label = Path(config).stem + (f"-{abs(hash(simulation)):x}" if simulation else "")
        label = (f"{tree}-" if args.before else "") + label
        out = Path(args.out) / (label + (f"-{rnd + 1}" if args.rounds > 1 else ""))
        r = run(config, args.duration, out, args.hog, simulation, session, trees[tree],
                args.wearer)
        p50.setdefault(label.removeprefix(f"{tree}-"), {t: [] for t in trees})[tree].append(
            r["compute_p50"])
        s = r["summary"]
        t = s["timing"]
        cycles = max(s["cycles"], 1)
        print(f"  {f'{tree}: ' if args.before else ''}{config}"
              f"{f' simulation: {simulation}' if simulation else ''}"
              f"{f' (round {rnd + 1})' if args.rounds > 1 else ''}: {s['final_state']}, "
              f"{s['cycles']} cycles, faults {[f['cause'] for f in s['faults']]}; stale cycles "
              f"{r['stale'][0]} ({100 * r['stale'][0] / cycles:.3f} %), longest streak "
              f"{r['stale'][1]}")
        for key, label in (("compute_us", "compute"), ("wake_latency_us", "wake"),
                           ("period_us", "period")):
            x = t[key]
            print(f"    {label:<8} p50 {x['p50']:7.1f}  p99 {x['p99']:7.1f}  p99.9 "
                  f"{x['p999']:7.1f}  max {x['max']:8.1f} µs")
        target = TARGET_P50.get(Path(config).stem.replace("_vm", ""))
        if target:
            print(f"    compute median / target {t['compute_us']['p50'] / target:.2f}; p99.9 / "
                  f"150 µs {t['compute_us']['p999'] / 150:.2f}; wake p99.9 / 100 µs "
                  f"{t['wake_latency_us']['p999'] / 100:.2f}")
        print(f"    overruns {t['overruns']} ({100 * t['overruns'] / cycles:.4f} %, target ≤ "
              f"0.01 %); first 100 cycles: worst wake + compute {r['first100_max_us']:.0f} µs "
              f"(period {1e6 / s['rate_hz']:.0f})")
        print(f"    {r['sim']}")
        for line in s.get("setup", []):
            if "process" in line:
                print(f"    {line}")
        print(f"    compute p50 from the cycle log {r['compute_p50']:.1f} µs; load average "
              + " ".join(f"{x:.2f}" for x in r["load"][0]) + " before, "
              + " ".join(f"{x:.2f}" for x in r["load"][1]) + " after", flush=True)
    if args.before:
        side_by_side(p50, trees["before"])
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
