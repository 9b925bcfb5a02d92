"""The ``exo-rt`` command (every subcommand: docs/cli.md).

Each subcommand is a module of this package that declares its
:class:`~exo_rt.cli.common.Command` — its name, help, arguments, handler and the ranges of its
numbers — as ``COMMAND``; :data:`COMMANDS` lists them in the order ``exo-rt --help`` shows
them. A new command is a new module, imported and listed in :data:`COMMANDS` here. User errors
(:class:`exo_rt.errors.ExoError`) print one line and exit 2; ``--debug`` shows the traceback
(:func:`exo_rt.cli.common.call`).
"""

from __future__ import annotations

import argparse
import os

from exo_rt import __version__
from exo_rt.cli import (
    bench_test,
    check,
    drives,
    export,
    recover,
    replay,
    report,
    run,
    schema,
    size,
    sweep,
    warmup,
)
from exo_rt.cli.common import Command, call

COMMANDS: dict[str, Command] = {module.COMMAND.name: module.COMMAND for module in (
    run,
    check,
    replay,
    report,
    export,
    size,
    recover,
    drives,
    bench_test,
    warmup,
    schema,
    sweep,
)}


def build_parser() -> argparse.ArgumentParser:
    """The ``exo-rt`` parser: the global options, and a subparser per command of
    :data:`COMMANDS` (its help also its description)."""
    parser = argparse.ArgumentParser(
        prog="exo-rt",
        description="Real-time controller of a powered lower-limb exoskeleton.",
    )
    parser.add_argument("--version", action="version", version=f"exo-rt {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.setup(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``exo-rt`` command on ``argv`` (default: the process's arguments): its exit
    status."""
    # MuJoCo's import loads an OpenGL binding (glfw) for its renderer, which no command uses
    # (the 3D scene is Foxglove's): 0.06 s of a world run's start; a MUJOCO_GL set is kept
    os.environ.setdefault("MUJOCO_GL", "disable")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return call(COMMANDS[args.command], args)
