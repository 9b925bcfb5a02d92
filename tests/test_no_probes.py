"""The run's objects are typed, not probed: no ``hasattr()`` or ``getattr()`` call in
``exo_rt/runtime``, ``exo_rt/session`` or ``exo_rt/hil`` — a board, a bus set, a session's
source or sink says what it is by its protocol (:mod:`exo_rt.session.roles`,
:mod:`exo_rt.runtime.rig`, :mod:`exo_rt.runtime.buses`), with no-op defaults, instead of
being asked what it has. The only exceptions are a module's attribute by name, each with its
reason (:data:`ALLOWED`).

Nor is the run's board compared with None: a run without one has
:class:`~exo_rt.runtime.rig.NoBoard`, whose ``present`` says so (:data:`ALLOWED_NONE`: the
only exceptions, each with its reason)."""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("exo_rt/runtime", "exo_rt/session", "exo_rt/hil")
PROBES = ("hasattr", "getattr")

# (file, the call's source text) → why it may stay: a module's attribute by name
ALLOWED = {
    ("exo_rt/runtime/loop.py", 'getattr(os, "SCHED_RESET_ON_FORK", 0)'):
        "the os module defines SCHED_RESET_ON_FORK on Linux only",
}

# (file, the comparison's source text) → why it may stay: not the run's board
ALLOWED_NONE = {
    ("exo_rt/session/figures.py", "board is not None"):
        "the bus set's board emulator in this process (the simulation's, not the run's "
        "Board): only a run beside it has its buttons' figures",
}
BOARD = re.compile(r"(^|\.)board(_link)?$")  # a name or attribute that holds a board


def probes(path: Path) -> list[tuple[int, str]]:
    """(line, source text) of every hasattr()/getattr() call in the file at ``path``."""
    text = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in PROBES):
            out.append((node.lineno, ast.get_source_segment(text, node)))
    return out


def none_checks(path: Path) -> list[tuple[int, str]]:
    """(line, source text) of every ``is None``/``is not None`` comparison of a board (a
    name or attribute ``board`` or ``board_link``) in the file at ``path``."""
    text = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if not isinstance(node, ast.Compare):
            continue
        pairs = pairwise([node.left, *node.comparators])
        for op, (a, b) in zip(node.ops, pairs, strict=True):
            none = any(isinstance(x, ast.Constant) and x.value is None for x in (a, b))
            if isinstance(op, ast.Is | ast.IsNot) and none and any(
                    BOARD.search(ast.get_source_segment(text, x) or "") for x in (a, b)):
                out.append((node.lineno, ast.get_source_segment(text, node)))
    return out


def found(find=probes) -> dict[tuple[str, str], int]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, call in find(path):
                out[(rel, call)] = line
    return out


def test_no_hasattr_or_getattr_on_the_runs_objects():
    calls = found()
    left = sorted(f"{f}:{line}: {call}" for (f, call), line in calls.items()
                  if (f, call) not in ALLOWED)
    assert left == [], "probes left:\n" + "\n".join(left)


def test_every_allowed_probe_is_still_there():
    """An exception that no longer applies is dropped from the list, not kept."""
    calls = found()
    assert [k for k in ALLOWED if k not in calls] == []


def test_the_check_finds_a_probe(tmp_path):
    """The check sees both calls, however they are written (a method body, a lambda, a
    nested call)."""
    path = tmp_path / "m.py"
    path.write_text("class A:\n    def f(self, x):\n        return hasattr(x, 'a')\n"
                    "g = lambda y: getattr(getattr(y, 'b', None), 'c', 0)\n",
                    encoding="utf-8")
    assert sorted(line for line, _ in probes(path)) == [3, 4, 4]


def test_no_board_is_compared_with_none():
    checks = found(none_checks)
    left = sorted(f"{f}:{line}: {text}" for (f, text), line in checks.items()
                  if (f, text) not in ALLOWED_NONE)
    assert left == [], "the board compared with None:\n" + "\n".join(left)


def test_every_allowed_none_check_is_still_there():
    checks = found(none_checks)
    assert [k for k in ALLOWED_NONE if k not in checks] == []


def test_the_check_finds_a_board_compared_with_none(tmp_path):
    """Either side, ``is`` or ``is not``, a name or an attribute; other names and other
    comparisons of a board are not counted."""
    path = tmp_path / "m.py"
    path.write_text("def f(ctl, board, board_link, boards):\n"
                    "    a = ctl.board is None\n"
                    "    b = None is not board\n"
                    "    c = board_link is not None and boards is None\n"
                    "    d = ctl.board.present is None or board == 0\n",
                    encoding="utf-8")
    assert [line for line, _ in none_checks(path)] == [2, 3, 4]
