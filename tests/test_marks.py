"""The marks that schedule a test sit on a test. ``exclusive`` (alone on the machine: it
measures wall-clock timing, tests/cpu_share.py) and ``slow`` on a helper class or function
are kept by pytest and act on nothing: the test beside it runs unmarked, side by side with
another worker's (it happened: a shared port class inserted between a timed test and its
mark took the mark)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SCHEDULING = ("exclusive", "slow")


def misplaced(source: str) -> list[tuple[int, str, str]]:
    """(line, mark, what it decorates) of every scheduling mark on something pytest does not
    collect as a test: a function not named test_…, a class not named Test…."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        collected = node.name.startswith("Test" if isinstance(node, ast.ClassDef) else "test")
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if (isinstance(target, ast.Attribute) and target.attr in SCHEDULING
                    and isinstance(target.value, ast.Attribute) and target.value.attr == "mark"
                    and not collected):
                out.append((dec.lineno, target.attr, node.name))
    return out


def test_every_scheduling_mark_is_on_a_test():
    found = {f.name: bad for f in sorted(TESTS.glob("test_*.py"))
             if (bad := misplaced(f.read_text(encoding="utf-8")))}
    assert not found, found


def test_a_mark_on_a_helper_is_found():
    source = ("import pytest\n\n\n@pytest.mark.exclusive  # timed\nclass _Port:\n    pass\n\n\n"
              "def test_timed():\n    pass\n\n\n@pytest.mark.slow(reason='x')\ndef helper():\n"
              "    pass\n\n\n@pytest.mark.exclusive\ndef test_ok():\n    pass\n\n\n"
              "@pytest.mark.slow\nclass TestOk:\n    pass\n")
    assert misplaced(source) == [(4, "exclusive", "_Port"), (13, "slow", "helper")]
