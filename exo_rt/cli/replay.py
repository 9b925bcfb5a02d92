"""``exo-rt replay``: recorded runs, or whole archives, replayed against the simulated bus."""

from __future__ import annotations

import argparse
import sys

from exo_rt.cli.common import MAX_JOBS, Command


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="ARCHIVE",
                   help="run folders, folders of runs (an archive, at any depth), or bare CAN "
                        "logs (.blf/.asc/.log) with --config")
    p.add_argument("--config", metavar="FILE",
                   help="top config naming the bus mapping, to replay a bare CAN log; for a "
                        "run folder, refused where it differs from the run's own copy")
    p.add_argument("--allow-config-change", action="store_true",
                   help="replay run folders with --config although it differs from the "
                        "config they recorded (each difference is printed)")
    p.add_argument("--mode", required=True, choices=("plant", "controller", "closed-loop"))
    p.add_argument("--controller", metavar="NAME|FILE",
                   help="controller to compare with (controller and closed-loop modes)")
    p.add_argument("--jobs", type=int, default=1,
                   help="replay several runs in parallel (local processes, or a local Ray's CPUs)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray (the cluster extra; docs/scale.md)")
    p.add_argument("--address", metavar="ray://HOST:10001",
                   help="with --engine ray: the cluster to use (default: a local Ray)")
    p.add_argument("--out", metavar="DIR",
                   help="write replay-summary.csv/.json/.png and the result cache here "
                        "(default: the archive, when a folder of runs is given)")
    p.add_argument("--force", action="store_true",
                   help="replay sessions whose result is already in the cache")
    p.add_argument("--no-mcap", action="store_true",
                   help="write no replay-<mode>.mcap (the replay's records and 3D scene, "
                        "about 0.4 MB per second of run) into the run folders")


def handle(args: argparse.Namespace) -> int:
    """Replay recorded runs (or whole archives) against the simulated bus, on local processes
    or Ray; writes replay-<mode>.json in each run and, for an archive or with --out, the
    batch's replay-summary table and plot. A failed session is reported and the others go
    on; the exit status is 2 when any failed."""
    from exo_rt.batch.replay import run_batch

    b = run_batch(args.run_dirs, args.mode, controller=args.controller, config=args.config,
                  engine=args.engine, jobs=args.jobs, address=args.address, out=args.out,
                  force=args.force, allow_config_change=args.allow_config_change,
                  mcap=not args.no_mcap)
    for row in b.results:
        r = row["result"]
        if r is None:
            continue
        for note in r.get("notes", ()):  # not finished, no snapshot, a changed config
            print(f"exo-rt: warning: {note}", file=sys.stderr)
        head = f"{row['path']}: {r['mode']} replay of {r['cycles']} cycles"
        if "joints" in r:
            head += "; " + ", ".join(f"{n} RMS {j['rms_error_deg']:.4f}° max "
                                     f"{j['max_error_deg']:.4f}°" for n, j in r["joints"].items())
        if "max_abs_command_diff_A" in r:
            head += f"; largest command difference {r['max_abs_command_diff_A']:.6g} A"
        if r.get("first_diff_cycle") is not None:
            head += f" (first at cycle {r['first_diff_cycle']})"
        if r.get("replay_ended_at_cycle") is not None:  # no command after it to compare
            head += f"; the replay ended at cycle {r['replay_ended_at_cycle']}"
        if r.get("mcap"):  # the replay's records and 3D scene, beside run.mcap
            head += f"; wrote {r['mcap']}"
        print(head)
    for row in b.failed:
        print(f"exo-rt: error: session {row['session']}: {row['error']}", file=sys.stderr)
    if b.out is not None:
        print(f"{len(b.results)} sessions ({len(b.computed)} replayed, {len(b.cached)} from the "
              f"cache), {len(b.failed)} failed, in {b.wall_s:.1f} s on {args.engine}")
        for f in b.files:
            print(f"wrote {f}")
    return 2 if b.failed else 0


COMMAND = Command("replay", "replay recorded runs against the simulated bus", setup, handle,
                  numbers={"jobs": (1, MAX_JOBS, True, "")})
