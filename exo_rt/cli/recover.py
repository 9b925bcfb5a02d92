"""``exo-rt recover``: a crashed run's run.mcap made whole again."""

from __future__ import annotations

import argparse

from exo_rt.cli.common import Command


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")


def handle(args: argparse.Namespace) -> int:
    """Make a run folder's run.mcap whole after a crash (power loss, kill, full disk): every
    record that reached the disk whole, into a new file any MCAP reader reads; the damaged
    original kept as run.mcap.damaged. Exit 0 also when there is nothing to recover."""
    from exo_rt.record.runfolder import recover_folder

    done = recover_folder(args.run_dir)
    if not done:
        print(f"{args.run_dir}: run.mcap is whole, nothing to recover")
    for rec in done:
        print(rec.line())
    return 0


COMMAND = Command("recover", "make a crashed run's run.mcap whole again", setup, handle)
