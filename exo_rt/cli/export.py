"""``exo-rt export``: a run's cycle log as CSV, or the run as MCAP."""

from __future__ import annotations

import argparse

from exo_rt.cli.common import Command


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--csv", action="store_true", help="write cycles.csv")
    what.add_argument("--mcap", action="store_true",
                      help="write run.mcap (runs recorded before exo-rt wrote it)")


def handle(args: argparse.Namespace) -> int:
    """The cycle log as CSV, or the run (cycle log and CAN log) as MCAP."""
    if args.mcap:
        from pathlib import Path

        from exo_rt.errors import LogError, Where
        from exo_rt.record.mcap_log import export_mcap

        if (Path(args.run_dir) / "run.mcap").is_symlink():  # never written through a link
            raise LogError("run.mcap is a symbolic link: nothing is written through it",
                           Where(str(Path(args.run_dir) / "run.mcap")),
                           "remove the link and export again")
        print(export_mcap(args.run_dir))
        return 0
    from exo_rt.record.report import export_csv

    print(export_csv(args.run_dir))
    return 0


COMMAND = Command("export", "export a run as CSV or MCAP", setup, handle)
