"""``exo-rt size``: per joint, the runs' torque, current and speed against the drives'
ratings (docs/sizing.md)."""

from __future__ import annotations

import argparse
import math
import sys

from exo_rt.cli.common import Command


def _ratio(text: str) -> float:
    """A gear ratio N ≥ 1 (argparse's one-line error otherwise)."""
    try:
        n = float(text)
    except ValueError:
        n = math.nan
    if not (math.isfinite(n) and n >= 1.0):
        raise argparse.ArgumentTypeError(f"'{text}' is not a gear ratio (a number ≥ 1, e.g. 80)")
    return n


def _rotor(text: str) -> float:
    """A rotor inertia > 0 kg·m² (argparse's one-line error otherwise)."""
    try:
        j = float(text)
    except ValueError:
        j = math.nan
    if not (math.isfinite(j) and j > 0.0):
        raise argparse.ArgumentTypeError(f"'{text}' is not a rotor inertia (kg·m² > 0 at the "
                                         "motor, e.g. 1.7e-4)")
    return j


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="one or more run folders")
    p.add_argument("--robot", metavar="FILE",
                   help="the robot file whose drives to hold the runs against (default: the "
                        "first run's own copy of its robot file)")
    p.add_argument("--ratio", metavar="N", type=_ratio, nargs="+",
                   help="gear ratios to study: what the same motor would draw through each "
                        "for the runs' motion and link torques (docs/sizing.md)")
    p.add_argument("--rotor", metavar="KG_M2", type=_rotor, nargs="+",
                   help="other rotor inertias to study (kg·m² at the motor shaft, the gear's "
                        "wave generator included), beside the fitted one: the continuous "
                        "torque a motor with that rotor must give at each ratio")
    p.add_argument("--window", metavar=("T0", "T1"), type=float, nargs=2,
                   help="only the cycles whose run time lies in T0–T1 s (e.g. the walk "
                        "alone: its RMS is what a long walk heats the motors with)")


def handle(args: argparse.Namespace) -> int:
    """Per joint, the runs' peak and RMS torque, current and speed against the drives'
    ratings (docs/sizing.md), then the ratio study if asked; exit 1 when a joint is over a
    rating."""
    from exo_rt.record import regear, sizing

    window = None if args.window is None else tuple(args.window)
    if window is not None and not (math.isfinite(window[0]) and window[0] < window[1]):
        print(f"exo-rt size: --window {window[0]:g} {window[1]:g}: T0 must come before T1, "
              "T0 a number (seconds of the run's clock; T1 inf: to the run's end)",
              file=sys.stderr)
        return 2
    runs = sizing.load_runs(args.run_dirs, args.robot, window)  # (read once, for both)
    rc = sizing.main(runs)
    if args.ratio or args.rotor:  # the study informs: the exit status is the fitted drives'
        regear.main(runs, args.ratio or [], args.rotor or [])
    return rc


COMMAND = Command(
    "size", "per joint, the runs' torque, current and speed against the drives' ratings",
    setup, handle)
