#!/usr/bin/env python3
"""The safety case's hazard table: each hazard of ``docs/hazards.yaml`` with its cause, what
stops it and the tests that show it, written into ``docs/safety.md`` between
``<!-- hazards:begin -->`` and ``<!-- hazards:end -->``.

    python tools/hazard_table.py            # print the table
    python tools/hazard_table.py --write    # regenerate it in docs/safety.md
    python tools/hazard_table.py --check    # exit 1 unless it is current and complete

A test shows a hazard when it carries ``@pytest.mark.hazard("H-…")``: on the function, on
its class, or in a ``pytestmark`` assignment of its module or class (also inside
``pytest.param(…, marks=…)`` of its decorators). The markers are read from the test files'
syntax trees (:mod:`ast`): no test is imported or run. ``--check`` fails when the table is not
what ``--write`` would write, when a marker names a hazard that is not listed, or when a listed
hazard has no test; ``tests/test_hazards.py`` checks the same three.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HAZARDS = Path("docs/hazards.yaml")
SAFETY = Path("docs/safety.md")
TESTS = Path("tests")
BEGIN, END = "<!-- hazards:begin -->", "<!-- hazards:end -->"
FIELDS = ("hazard", "cause", "stops")
REGENERATE = "run `python tools/hazard_table.py --write`"


class HazardError(Exception):
    """A hazard list, test file or safety page the table cannot be made from: what, where
    (``file:line``) and how to fix it, in one line."""


@dataclass(frozen=True)
class Hazard:
    """One entry of the hazard list."""

    id: str
    hazard: str
    cause: str
    stops: str


@dataclass(frozen=True)
class Marker:
    """A ``pytest.mark.hazard(ID)`` on a test: the hazard's id, the test (``file::name``) and
    the marker's line."""

    id: str
    test: str
    line: int


def load_hazards(path: Path, name: str | None = None) -> list[Hazard]:
    """The hazard list, in its file's order; HazardError naming the line of a bad entry
    (``name``: the file as the messages name it, default ``path``)."""
    import yaml

    shown = name or path.as_posix()

    try:
        root = yaml.compose(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HazardError(f"{shown}: cannot read the hazard list ({exc.strerror})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise HazardError(f"{shown}:{line}: YAML syntax error ({exc.problem}) — fix the "
                          f"indentation or quoting there") from None
    if not isinstance(root, yaml.MappingNode):
        raise HazardError(f"{shown}:1: the hazard list is not a mapping — write "
                          f"'H-NAME: {{hazard: …, cause: …, stops: …}}' entries")
    out, seen = [], set()
    for key, value in root.value:
        hid, line = key.value, key.start_mark.line + 1
        if not isinstance(hid, str) or not hid.startswith("H-") or hid in seen:
            why = "is listed twice" if hid in seen else "does not start with 'H-'"
            raise HazardError(f"{shown}:{line}: hazard id '{hid}' {why} — give each hazard "
                              f"one id 'H-NAME'")
        seen.add(hid)
        fields = {}
        if isinstance(value, yaml.MappingNode):
            fields = {k.value: v for k, v in value.value}
        for name in FIELDS:
            node = fields.get(name)
            if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
                raise HazardError(f"{shown}:{line}: {hid} has no '{name}' — give it "
                                  f"{', '.join(FIELDS)} (one sentence each)")
        extra = sorted(set(fields) - set(FIELDS))
        if extra:
            raise HazardError(f"{shown}:{line}: {hid} has an unknown key '{extra[0]}' — its "
                              f"keys are {', '.join(FIELDS)}")
        out.append(Hazard(hid, *(str(fields[n].value).strip() for n in FIELDS)))
    return out


def _hazard_calls(tree: ast.AST, file: str) -> list[tuple[str, int, ast.Call]]:
    """Every ``….mark.hazard(…)`` call under ``tree``: (id, line, call)."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "hazard" and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "mark"):
            continue
        args = node.args
        if not args or node.keywords or not all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
            raise HazardError(f"{file}:{node.lineno}: a hazard marker takes hazard ids as "
                              f"string literals — write pytest.mark.hazard(\"H-NAME\")")
        out.extend((a.value, node.lineno, node) for a in args)
    return out


def _pytestmark(body: list[ast.stmt], file: str) -> list[tuple[str, int, ast.Call]]:
    """The hazard markers of a module's or class's ``pytestmark`` assignments."""
    out = []
    for stmt in body:
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, ast.AugAssign | ast.AnnAssign)
                   else [])
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets) \
                and stmt.value is not None:
            out.extend(_hazard_calls(stmt.value, file))
    return out


def _tests(body: list[ast.stmt], prefix: str, file: str, inherited, out, used) -> None:
    """Collect the markers of the test functions in ``body`` (a module's or a class's)."""
    inherited = inherited + _pytestmark(body, file)
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            own = [c for d in stmt.decorator_list for c in _hazard_calls(d, file)]
            _tests(stmt.body, f"{prefix}{stmt.name}::", file, inherited + own, out, used)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) \
                and stmt.name.startswith("test"):
            own = [c for d in stmt.decorator_list for c in _hazard_calls(d, file)]
            for hid, line, call in inherited + own:
                out.append(Marker(hid, f"{file}::{prefix}{stmt.name}", line))
                used.add(id(call))


def collect_markers(root: Path, tests: Path = TESTS) -> list[Marker]:
    """The hazard markers of every ``test_*.py`` under ``root/tests``, in file and line
    order. HazardError on a file that does not parse, on a marker with no literal id, and on
    one that marks no test (an alias, a marker on a helper), naming its line."""
    out: list[Marker] = []
    for path in sorted((root / tests).rglob("test_*.py")):
        file = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=file)
        except SyntaxError as exc:
            raise HazardError(f"{file}:{exc.lineno}: does not parse ({exc.msg}) — fix the "
                              f"test file") from None
        used: set[int] = set()
        _tests(tree.body, "", file, [], out, used)
        for _hid, line, call in _hazard_calls(tree, file):
            if id(call) not in used:
                raise HazardError(f"{file}:{line}: this hazard marker marks no test — put it "
                                  f"on a test function or class, or in 'pytestmark'")
    return out


def _cell(text: str) -> str:
    """Text made safe for one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def table(hazards: list[Hazard], markers: list[Marker]) -> str:
    """The Markdown table (with its generated-by note), one row per hazard in the list's
    order, its tests in file and line order."""
    lines = [f"<!-- generated by `python tools/hazard_table.py --write` from {HAZARDS.as_posix()}"
             f" and the tests' hazard markers: do not edit -->",
             "| id | hazard | cause | what stops it | tests that show it |",
             "|---|---|---|---|---|"]
    for h in hazards:
        tests = list(dict.fromkeys(m.test for m in markers if m.id == h.id))
        shown = "<br>".join(f"`{t}`" for t in tests) or "**no test yet**"
        lines.append(f"| {h.id} | {_cell(h.hazard)} | {_cell(h.cause)} | {_cell(h.stops)} "
                     f"| {shown} |")
    return "\n".join(lines) + "\n"


def _split(text: str, file: Path) -> tuple[str, str]:
    """``text`` before the begin marker (with it) and from the end marker on."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise HazardError(f"{file}: needs one '{BEGIN}' line and, after it, one '{END}' line "
                          f"— put them where the hazard table goes, then {REGENERATE}")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n", END + rest.split(END, 1)[1]


def current(page: str, file: Path, body: str) -> bool:
    """Whether ``page`` holds ``body`` between its markers."""
    head, tail = _split(page, file)
    return page == head + body + tail


def write(page: str, file: Path, body: str) -> str:
    """``page`` with ``body`` between its markers."""
    head, tail = _split(page, file)
    return head + body + tail


@dataclass(frozen=True)
class Findings:
    """What the table is made of and what is wrong with it."""

    hazards: list[Hazard]
    markers: list[Marker]
    table: str
    unknown: list[Marker]  # markers naming an id not in the list
    untested: list[str]  # listed ids no test shows


def examine(root: Path = ROOT) -> Findings:
    """Read the hazard list and the tests' markers under ``root``."""
    hazards = load_hazards(root / HAZARDS, HAZARDS.as_posix())
    markers = collect_markers(root)
    ids = {h.id for h in hazards}
    shown = {m.id for m in markers}
    return Findings(hazards, markers, table(hazards, markers),
                    [m for m in markers if m.id not in ids],
                    [h.id for h in hazards if h.id not in shown])


def _unknown_lines(f: Findings) -> list[str]:
    from difflib import get_close_matches

    out = []
    for m in f.unknown:
        close = get_close_matches(m.id, [h.id for h in f.hazards], n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"add it to {HAZARDS.as_posix()}"
        out.append(f"{m.test} (line {m.line}): hazard '{m.id}' is not in "
                   f"{HAZARDS.as_posix()} — {hint}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true",
                      help=f"regenerate the table in {SAFETY.as_posix()}")
    what.add_argument("--check", action="store_true",
                      help="exit 1 unless the table is current, every marker's hazard is "
                           "listed and every listed hazard has a test")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    a = p.parse_args(argv)
    try:
        f = examine(a.root)
        page_file = a.root / SAFETY
        if not (a.write or a.check):
            sys.stdout.write(f.table)
            return 0
        try:
            page = page_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise HazardError(f"{SAFETY.as_posix()}: cannot read it ({exc.strerror})") from None
        problems = _unknown_lines(f)
        if a.write:
            if problems:  # a table naming an unlisted hazard would be wrong: fix it first
                raise HazardError("\n".join(problems))
            new = write(page, SAFETY, f.table)
            if new != page:
                page_file.write_text(new, encoding="utf-8")
            print(f"{SAFETY.as_posix()}: {len(f.hazards)} hazards, {len(f.markers)} "
                  f"markers{'' if new != page else ' (unchanged)'}")
        else:
            if not current(page, SAFETY, f.table):
                problems.append(f"{SAFETY.as_posix()}: the hazard table is not current — "
                                f"{REGENERATE}")
        if f.untested:
            problems.append(f"hazards with no test: {', '.join(f.untested)} — mark the test "
                            f"that shows each with @pytest.mark.hazard(\"ID\")")
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems and a.check else 0
    except HazardError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
