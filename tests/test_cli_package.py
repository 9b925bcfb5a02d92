"""The ``exo-rt`` command as a package (exo_rt/cli/): every module but the shared one is a
command registered under its own name, each range it declares names one of its options, and
a number out of range or not finite is one line and exit 2 before anything runs."""

from __future__ import annotations

import argparse
import pkgutil
import re

import pytest

from exo_rt import cli
from exo_rt.cli.common import option

# The fewest arguments that parse, per command with numbers (a new one is added here).
MINIMAL = {
    "run": [],
    "check": ["configs/exo_leg.yaml"],
    "drives": ["--config", "robot.yaml", "--buses", "buses.yaml"],
    "replay": ["--mode", "plant", "runs"],
    "sweep": ["pd", "--grid", "kp=0.5:2:4"],
    "bench-test": ["step"],
    "warmup": [],
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_module_is_a_command_registered_under_its_name():
    modules = {m.name for m in pkgutil.iter_modules(cli.__path__)} - {"common"}
    assert modules == {name.replace("-", "_") for name in cli.COMMANDS}
    for name, command in cli.COMMANDS.items():
        assert getattr(cli, name.replace("-", "_")).COMMAND is command
    assert list(_subparsers()) == list(cli.COMMANDS)  # in the order --help lists them


def test_every_declared_range_and_pose_names_an_option_of_its_command():
    parsers = _subparsers()
    for name, command in cli.COMMANDS.items():
        dests = {a.dest for a in parsers[name]._actions}
        assert set(command.numbers) <= dests, name
        assert command.pose is None or command.pose in dests, name
        for lo, hi, _closed, _unit in command.numbers.values():
            assert lo < hi, name


def _out_of_range() -> list[tuple[str, str, str]]:
    """(command, dest, a value out of its range): below it, above it, and — where the
    option takes floats — nan and inf."""
    cases = []
    for name, parser in _subparsers().items():
        types = {a.dest: a.type for a in parser._actions}
        for dest, (lo, hi, closed, _unit) in cli.COMMANDS[name].numbers.items():
            step = 1 if types[dest] is int else 1e-3 * (hi - lo)
            values = [lo - step if closed else lo, hi + step]
            if types[dest] is float:
                values += [float("nan"), float("inf")]
            cases += [(name, dest, str(types[dest](v))) for v in values]
    return cases


@pytest.mark.parametrize("name,dest,value", _out_of_range())
def test_a_number_out_of_range_is_one_line_and_exit_2(capsys, name, dest, value):
    assert name in MINIMAL, f"give {name}'s fewest arguments in MINIMAL"
    code = cli.main([name, *MINIMAL[name], f"{option(dest)}={value}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert re.fullmatch(rf"exo-rt: error: {option(dest)} \S+ is out of range — give a finite "
                        r"number in [\[(]\S+, \S+\]( .+)?\n", err), err


@pytest.mark.parametrize("name", [n for n, c in cli.COMMANDS.items() if c.pose is not None])
def test_a_pose_angle_not_finite_is_one_line_and_exit_2(capsys, name):
    pose = cli.COMMANDS[name].pose
    code = cli.main([name, *MINIMAL[name], option(pose), "0.1", "nan"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err == f"exo-rt: error: {option(pose)} nan is not a finite angle — give one finite " \
                  "angle (rad) per joint\n"


def test_no_command_prints_the_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    out, _ = capsys.readouterr()
    assert out.startswith("usage: exo-rt") and all(f"    {n}" in out for n in cli.COMMANDS)
