"""``exo-rt sweep``: gains × model errors × wearers in model-in-the-loop simulation."""

from __future__ import annotations

import argparse
import sys

from exo_rt.cli.common import MAX_JOBS, Command


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="CONFIG",
                   help="a controller file or name (configs/controllers/), or a top config")
    p.add_argument("--grid", required=True, metavar="KEY=VALUES,…",
                   help="GAIN=LO:HI:N scales that gain on every joint (1 = the file's); "
                        "JOINT.GAIN=V1/V2/… sets one joint's gain (docs/scale.md)")
    p.add_argument("--model-error", default="1.0", metavar="E1,E2,…",
                   help="the controller model's masses and inertias × each (default 1.0)")
    p.add_argument("--wearers", metavar="FILE",
                   help="YAML wearers: [{name, mass (kg), stiffness, damping}] (default: the "
                        "robot file's wearer, passive)")
    p.add_argument("--robot", metavar="FILE", help="robot file (default: the top config's, or "
                                                   "the shipped leg)")
    p.add_argument("--cycles", type=float, default=1.0, help="gait cycles per task (default 1)")
    p.add_argument("--max-saturation", type=float, default=0.01, metavar="FRACTION",
                   help="the best point saturates its current at most this fraction of cycles")
    p.add_argument("--jobs", type=int, default=1, help="tasks in parallel")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray (the cluster extra)")
    p.add_argument("--address", metavar="ray://HOST:10001",
                   help="with --engine ray: the cluster to use (default: a local Ray)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where the table and heat map go (default: "
                        "runs/sweep-<controller>-<date-time>/, beside the runs)")


def handle(args: argparse.Namespace) -> int:
    """Sweep gains × model errors × wearers in model-in-the-loop simulation; print the best
    point as a controller-file snippet."""
    from pathlib import Path

    from exo_rt.batch import sweep as sw

    errors = sw.parse_list(args.model_error, "--model-error")
    wearers = sw.load_wearers(args.wearers) if args.wearers else None
    out = Path(args.out) if args.out else sw.default_out(args.config)
    s = sw.run_sweep(args.config, args.grid, model_errors=errors, wearers=wearers,
                     robot=args.robot, cycles=args.cycles, engine=args.engine, jobs=args.jobs,
                     address=args.address, max_saturation=args.max_saturation, out=out)
    print(f"{len(s.points)} points × {len(errors)} model errors × {len(wearers or [0])} "
          f"wearers = {len(s.tasks)} tasks in {s.wall_s:.1f} s on {args.engine}")
    failed = [t for t in s.tasks if t["status"] != "ok"]
    for t in failed[:10]:
        print(f"exo-rt: error: point {s.points[t['point']]['label']} (model ×"
              f"{t['model_error']:g}, {t['wearer']}): {t['error']}", file=sys.stderr)
    print(sw.verdict(s))
    if s.best is not None:
        print(sw.snippet(s, s.best), end="")
    for f in s.files:
        print(f"wrote {f}")
    return 2 if failed else 0


COMMAND = Command(
    "sweep", "sweep gains in model-in-the-loop simulation", setup, handle,
    numbers={"cycles": (0.0, 1000.0, False, "gait cycles"),
             "max_saturation": (0.0, 1.0, True, ""), "jobs": (1, MAX_JOBS, True, "")})
