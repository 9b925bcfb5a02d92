"""``exo-rt report``: a run's plots, text summary and the clinic's report.html, or a
wearer's progress page over an archive."""

from __future__ import annotations

import argparse
import sys

from exo_rt.cli.common import Command


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run folder; with --wearer, an archive (a folder of run folders)")
    p.add_argument("--wearer", metavar="NAME",
                   help="write the progress page of this wearer's sessions in the archive "
                        "(NAME: their profile's file name, configs/wearers/NAME.yaml)")


def handle(args: argparse.Namespace) -> int:
    """PNG plots, a text summary and the clinic's report.html of a run (needs the plot extra);
    with --wearer, a wearer's progress page over an archive's sessions."""
    from exo_rt.record.report import progress_report, report

    if args.wearer is not None:
        for f in progress_report(args.run_dir, args.wearer):
            print(f)
        return 0
    notes: list[str] = []
    files = report(args.run_dir, notes)
    for note in notes:  # a run that did not finish
        print(f"exo-rt: warning: {note}", file=sys.stderr)
    for f in files:
        print(f)
    return 0


COMMAND = Command("report", "PNG plots, a text summary and the clinic's report.html of a run",
                  setup, handle)
