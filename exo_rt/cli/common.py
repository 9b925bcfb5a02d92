"""What every ``exo-rt`` command shares: its declaration (:class:`Command`), the checks of the
numbers and joint angles it takes, and the one way a user's error ends it — one line on
standard error and exit 2 (``--debug`` adds the traceback), 130 on ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from exo_rt.errors import ExoError

MAX_JOBS = 1024  # the most parallel processes a --jobs option takes

# A numeric option's range: (low, high, low included, unit); high is always included.
Range = tuple[float, float, bool, str]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, its one-line help (also its --help description), what adds
    its arguments to its parser, and its handler (the exit status). ``numbers``: the range of
    each numeric option by its dest, checked after parsing (:func:`check_numbers`); ``pose``:
    the dest of its joint-angle option (rad, per joint), whose angles must be finite."""

    name: str
    help: str
    setup: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[argparse.Namespace], int]
    numbers: dict[str, Range] = field(default_factory=dict)
    pose: str | None = None


def option(dest: str) -> str:
    """The option an argparse dest comes from: ``live_wait`` → ``--live-wait``."""
    return "--" + dest.replace("_", "-")


def check_numbers(command: Command, args: argparse.Namespace) -> None:
    """Every numeric option of ``command`` finite and in its range, and its joint angles
    finite (their joint limits: :func:`check_pose`); ConfigError else."""
    import math

    from exo_rt.errors import ConfigError

    for dest, (lo, hi, closed, unit) in command.numbers.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        ok = math.isfinite(value) and (value >= lo if closed else value > lo) and value <= hi
        if not ok:
            bound = f"[{lo:g}, {hi:g}]" if closed else f"({lo:g}, {hi:g}]"
            raise ConfigError(f"{option(dest)} {value:g} is out of range", None,
                              f"give a finite number in {bound}{' ' + unit if unit else ''}")
    pose = getattr(args, command.pose, None) if command.pose is not None else None
    for x in pose or ():
        if not math.isfinite(x):
            raise ConfigError(f"{option(command.pose)} {x:g} is not a finite angle", None,
                              "give one finite angle (rad) per joint")


def check_pose(pose, mech, option: str) -> None:
    """A pose given on the command line: one angle per joint of ``mech``, each inside the
    robot's joint limits (rad); ConfigError else."""
    import numpy as np

    from exo_rt.errors import ConfigError

    if pose is None:
        return
    if len(pose) != mech.nq:
        raise ConfigError(f"{option} gives {len(pose)} angle(s) for {mech.nq} joints", None,
                          f"give one angle (rad) per joint: {', '.join(mech.joint_names)}")
    c = [mech.coordinate_names.index(n) for n in mech.joint_names]
    lo, hi = np.asarray(mech.lower)[c], np.asarray(mech.upper)[c]
    for j, name in enumerate(mech.joint_names):
        if not lo[j] <= pose[j] <= hi[j]:
            raise ConfigError(f"{option}: {name} {pose[j]:g} rad is outside its joint limits "
                              f"[{lo[j]:.4g}, {hi[j]:.4g}] rad", None,
                              "give a pose inside the robot's joint limits")


def default_config():
    """The test stand's top config, what a bench or check command uses without --config: the
    working directory's configs/, else the shipped ones."""
    from exo_rt.resources import default_config

    return default_config()


class LazyChoices:
    """An argument's choices, looked up only when argparse checks or shows them: building the
    parser for another command (``exo-rt run``) must not import what they come from."""

    def __init__(self, load: Callable[[], tuple[str, ...]]) -> None:
        self._load = load

    def __contains__(self, value: object) -> bool:
        return value in self._load()

    def __iter__(self):
        return iter(self._load())


def call(command: Command, args: argparse.Namespace) -> int:
    """Run ``command`` on its parsed ``args``: its exit status; a user's error
    (:class:`exo_rt.errors.ExoError`) one line and 2, ctrl-C one line and 130, a reader
    that closed the output pipe 141, quietly."""
    try:
        check_numbers(command, args)
        return command.handle(args)
    except ExoError as err:
        if args.debug:
            traceback.print_exc()
        print(f"exo-rt: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("exo-rt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # whoever read the output went away (`exo-rt size RUN | head`): stop as a shell tool
        # does, 128 + SIGPIPE, with no traceback — and none when Python flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
