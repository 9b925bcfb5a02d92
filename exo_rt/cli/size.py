"""``exo-rt size``: per joint, the runs' torque, current and speed against the drives'
ratings (docs/sizing.md)."""

from __future__ import annotations

import argparse

from exo_rt.cli.common import Command


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="one or more run folders")
    p.add_argument("--robot", metavar="FILE",
                   help="the robot file whose drives to hold the runs against (default: the "
                        "first run's own copy of its robot file)")


def handle(args: argparse.Namespace) -> int:
    """Per joint, the runs' peak and RMS torque, current and speed against the drives'
    ratings (docs/sizing.md); exit 1 when a joint is over a rating."""
    from exo_rt.record.sizing import main as size

    return size(args.run_dirs, args.robot)


COMMAND = Command(
    "size", "per joint, the runs' torque, current and speed against the drives' ratings",
    setup, handle)
