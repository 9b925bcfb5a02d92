#!/usr/bin/env python3
"""Cost as the exoskeleton grows: the controller's real-time compute per cycle for 2, 4 and 12
joints (issue 34).

    python tools/bench_scale_joints.py [--duration S] [--rounds N]
                                       [--configs exo_leg exo_2leg exo_12dof] [--hog] [--out DIR]

Each config is run as tools/bench_rt.py runs it (``exo-rt run --realtime``: the control thread
SCHED_FIFO on its CPU, the simulation and the recording in their own processes, the board
emulator on), ``--rounds`` times, the configs taking turns (A B C A B C …) so that a change in
the machine's load falls on all of them alike. Per config it prints the joints, buses and the
controller-only cycle (``compute_us`` of the run's summary: bus I/O + the cycle kernel + state
handling) — p50, p99, p99.9 and max, the median over the rounds (max: the largest) — with the
overruns and how each run ended; then the least-squares line p50 ≈ a + b·joints over the
configs: what a joint adds to the cycle, buses included (exo_12dof has six buses, exo_2leg two,
exo_leg one). Figures depend on the machine's load: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

try:
    from tools import bench_rt
except ImportError:  # run as ``python tools/bench_scale_joints.py``: tools/ itself is on sys.path
    import bench_rt  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
PERCENTILES = ("p50", "p99", "p999", "max")


def config_path(config: str) -> Path:
    """A name in configs/ (``exo_12dof``) or a path to a top config."""
    return Path(config) if config.endswith(".yaml") else ROOT / "configs" / f"{config}.yaml"


def shape(config: str) -> tuple[int, int]:
    """(joints, buses) of a top config."""
    from exo_rt.runtime.config import load_top

    top = load_top(config_path(config))
    return top.robot.nq, len(top.buses)


def one_run(config: str, duration: float, out: Path, hog: bool) -> dict | None:
    """The run's summary, or None (said on stderr) when it wrote none."""
    try:
        return bench_rt.run(str(config_path(config)), duration, out, hog)["summary"]
    except (FileNotFoundError, ValueError) as exc:
        print(f"  {config}: the run wrote no readable summary ({exc}) — run `exo-rt run "
              f"--realtime --config {config_path(config)}` to see why", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0, help="s in RUN per run")
    ap.add_argument("--rounds", type=int, default=3, help="runs per config, taking turns")
    ap.add_argument("--configs", nargs="*", default=["exo_leg", "exo_2leg", "exo_12dof"],
                    help="names in configs/ or paths to top configs (.yaml)")
    ap.add_argument("--hog", action="store_true", help="a CPU hog on every other CPU")
    ap.add_argument("--out", default="/tmp/exo-rt-bench-scale-joints")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.duration <= 0:
        ap.error("--rounds must be ≥ 1 and --duration > 0")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"exo-rt run --realtime, {args.duration:g} s in RUN, {args.rounds} round(s), "
          f"recording and board emulator on{', CPU hog on the other CPUs' if args.hog else ''}"
          f" ({os.cpu_count()} CPUs, load {load}):")
    runs: dict[str, list[dict]] = {c: [] for c in args.configs}
    for r in range(args.rounds):
        for config in args.configs:
            s = one_run(config, args.duration, Path(args.out) / f"{Path(config).stem}-{r}",
                        args.hog)
            if s is not None:
                runs[config].append(s)
    print(f"  {'config':<12} {'joints':>6} {'buses':>5}   compute µs: {'p50':>6} {'p99':>6} "
          f"{'p99.9':>6} {'max':>7}   overruns  ended")
    xs, ys = [], []
    for config, summaries in runs.items():
        joints, buses = shape(config)
        if not summaries:
            print(f"  {Path(config).stem:<12} {joints:>6} {buses:>5}   no run ended with a "
                  "summary")
            continue
        c = {k: [s["timing"]["compute_us"][k] for s in summaries] for k in PERCENTILES}
        p50, p99, p999 = (float(np.median(c[k])) for k in ("p50", "p99", "p999"))
        overruns = sum(s["timing"]["overruns"] for s in summaries)
        cycles = max(sum(s["cycles"] for s in summaries), 1)
        ended = sorted({s["final_state"] for s in summaries})
        print(f"  {Path(config).stem:<12} {joints:>6} {buses:>5}   {'':>11} {p50:6.1f} "
              f"{p99:6.1f} {p999:6.1f} {max(c['max']):7.1f}   {overruns:>3} "
              f"({100 * overruns / cycles:.3f} %)  {'/'.join(ended)}")
        xs.append(joints)
        ys.append(p50)
    if len(set(xs)) >= 2:
        b, a = np.polyfit(xs, ys, 1)
        print(f"  p50 ≈ {a:.1f} µs + {b:.2f} µs per joint (least squares over "
              f"{len(xs)} configs, their buses included)")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
