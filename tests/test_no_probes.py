"""The run's objects are typed, not probed: no ``hasattr()`` or ``getattr()`` call in
``exo_rt/runtime``, ``exo_rt/session`` or ``exo_rt/hil`` — a board, a bus set, a session's
source or sink says what it is by its protocol (:mod:`exo_rt.session.roles`,
:mod:`exo_rt.runtime.rig`, :mod:`exo_rt.runtime.buses`), with no-op defaults, instead of
being asked what it has. The only exceptions are a module's attribute by name, each with its
reason (:data:`ALLOWED`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("exo_rt/runtime", "exo_rt/session", "exo_rt/hil")
PROBES = ("hasattr", "getattr")

# (file, the call's source text) → why it may stay: a module's attribute by name
ALLOWED = {
    ("exo_rt/runtime/loop.py", 'getattr(os, "SCHED_RESET_ON_FORK", 0)'):
        "the os module defines SCHED_RESET_ON_FORK on Linux only",
}


def probes(path: Path) -> list[tuple[int, str]]:
    """(line, source text) of every hasattr()/getattr() call in the file at ``path``."""
    text = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in PROBES):
            out.append((node.lineno, ast.get_source_segment(text, node)))
    return out


def found() -> dict[tuple[str, str], int]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, call in probes(path):
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
