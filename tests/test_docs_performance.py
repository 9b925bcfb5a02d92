"""docs/performance.md holds the current figures, one table per subject, every table with the
machine its figures were taken on and a command that exists; the history of experiments lives
in dated notes under docs/notes/. Extends tests/test_docs_links.py (the relative links of
README.md and docs/*.md) to the notes, to GitHub's exact heading anchors (a heading's `code`
kept as text, repeated headings numbered), to the `docs/….md` paths named in prose, and to
the references code and docs make to a section of these pages by name —
`docs/performance.md, "Start-up"` — which no link checker sees."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.test_docs_links import FENCE, _headings, _links, _slug

ROOT = Path(__file__).resolve().parents[1]
PERF = ROOT / "docs" / "performance.md"
NOTES = sorted((ROOT / "docs" / "notes").glob("*.md"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# one section per subject, each with its table and the command that measures it
SUBJECTS = ("Real time", "The cycle in one compiled call", "Lockstep whole cycle", "Start-up",
            "Dynamics from Python", "Frame I/O", "Recording", "Replay", "Machine notes")
SPAN = re.compile(r"`([^`\n]+)`")
# a command a reader can run (its environment first): a tool, the CLI, a test file, Python
COMMAND = re.compile(r"`(?:[A-Z_]+=(?:\$\([^)]*\)|\S+) )*"
                     r"(?:python tools/\w+\.py|exo-rt \w|pytest tests/"
                     r"|python -m timeit |time python )")
# a page and a section named in prose: docs/performance.md, "Start-up" (the quote may wrap)
SECTION_REF = re.compile(r"((?:docs/)?(?:performance|notes/[\w.-]+)\.md),\s+\"([^\"]+)\"")
SOURCES = ("README.md", "docs/**/*.md", "exo_rt/**/*.py", "tools/*.py", "tests/*.py",
           "firmware_bridge/**/*.py", "configs/**/*.yaml", "tests/data/*.yaml")


def test_slug_is_githubs():
    assert _slug("Real time (the 1 kHz loop, the control process alone on its CPU)") == \
        "real-time-the-1-khz-loop-the-control-process-alone-on-its-cpu"
    assert _slug("Figures (`python tools/bench_board.py`)") == "figures-python-toolsbench_boardpy"
    assert (_slug("2026-11-26: the machine's floor — counted")
            == "2026-11-26-the-machines-floor--counted")


def test_performance_page_has_a_table_per_subject():
    text = PERF.read_text()
    sections = re.split(r"^## ", FENCE.sub("", text), flags=re.M)[1:]
    for subject in SUBJECTS:
        body = next((s for s in sections if s.startswith(subject)), None)
        assert body is not None, f"docs/performance.md: no '## {subject}…' section"
        assert re.search(r"^\|.*\|\s*$", body, re.M), f"'{subject}': no table"
        assert re.search(r"python tools/\w+\.py|`exo-rt \w", body), f"'{subject}': no command"
    for s in sections:
        assert "VM" in s or "machine" in s.lower(), f"'{s.splitlines()[0]}': on which machine?"


def _machines(text: str) -> list[str]:
    """The machines the page names in its first table (``| **NAME** | what | when |``)."""
    first = re.search(r"^\|.*\|\s*\n\|[-| ]+\|\s*\n((?:\|.*\|\s*\n)+)", text, re.M)
    assert first, "docs/performance.md opens with a table of the machines"
    return re.findall(r"^\| \*\*([^*]+)\*\* \|", first.group(1), re.M)


def _tables(text: str):
    """Each table after the machines' with its context: the lines from the heading or the
    previous table down to its last row."""
    lines = FENCE.sub("", text).splitlines()
    start, i, tables = 0, 0, []
    while i < len(lines):
        if lines[i].startswith("#"):
            start = i
        if lines[i].startswith("|"):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            tables.append((i + 1, "\n".join(lines[start:end])))
            start, i = end, end
            continue
        i += 1
    return tables[1:]


def test_every_table_says_its_machine_and_its_command():
    """For every figure the machine it was taken on and the command that makes it: in its row,
    its table's column, or the text just above the table (after the heading or the table
    before)."""
    text = PERF.read_text()
    machines = _machines(text)
    assert "VM" in machines
    tables = _tables(text)
    assert len(tables) >= 12
    for line, context in tables:
        assert COMMAND.search(context), (
            f"docs/performance.md:{line}: a table without the command that makes its figures")
        assert any(m in context for m in machines), (
            f"docs/performance.md:{line}: on which machine ({', '.join(machines)})?")
    assert "no tool" not in text, "docs/performance.md: a figure without its command"


def test_the_table_check_can_fail():
    page = ("| name | what | when |\n|---|---|---|\n| **VM** | a VM | today |\n\n## A\n\n"
            "On the VM, `python tools/bench_x.py`:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
            "| c | d |\n|---|---|\n| 3 | 4 |\n")
    assert _machines(page) == ["VM"]
    (_, first), (_, second) = _tables(page)
    assert COMMAND.search(first) and "VM" in first
    assert not COMMAND.search(second) and "VM" not in second


def test_the_history_is_in_dated_notes_linked_from_the_page():
    assert NOTES, "docs/notes/ holds the dated history of docs/performance.md"
    linked = {t.partition("#")[0] for t in _links(PERF)}
    for note in NOTES:
        assert re.match(r"\d{4}-\d{2}-", note.name), f"{note.name}: name it YYYY-MM-subject.md"
        assert f"notes/{note.name}" in linked, f"docs/performance.md does not link {note.name}"
        dated = [h for h in _headings(note)[1:] if re.match(r"\d{4}-\d{2}-\d{2}", h)]
        assert dated, f"{note.name}: no dated entry (## YYYY-MM-DD: what)"


@pytest.mark.parametrize("md", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_docs_named_in_the_text_exist(md):
    """A page named in prose (``docs/…md``, not a link: tests/test_docs_links.py checks those)
    exists."""
    bad = [path for path in re.findall(r"(?<![\w./-])docs/[\w./-]+?\.md\b",
                                       FENCE.sub("", md.read_text()))
           if not (ROOT / path).exists()]
    assert not bad, f"{md.relative_to(ROOT)}: named, no such file: {', '.join(bad)}"


def _section_refs():
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(errors="replace")
            for m in SECTION_REF.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                yield path, line, m.group(1), " ".join(m.group(2).split())


def test_sections_named_in_prose_exist():
    refs = list(_section_refs())
    assert any(p.suffix == ".py" for p, *_ in refs), "the pattern no longer finds the code's refs"
    bad = []
    for path, line, page, section in refs:
        md = ROOT / "docs" / page.removeprefix("docs/")
        heads = [h.replace("`", "") for h in _headings(md)] if md.exists() else []
        if not any(h.startswith(section.replace("`", "")) for h in heads):
            bad.append(f"{path.relative_to(ROOT)}:{line}: {page}, \"{section}\"")
    assert not bad, "no such section (a heading that begins so):\n" + "\n".join(bad)


def _commands() -> list[str]:
    spans = SPAN.findall(FENCE.sub("", PERF.read_text()))
    return [s for s in spans if "tools/" in s or s.startswith("exo-rt ")]


@cache
def _help(*words: str) -> str:
    res = subprocess.run([sys.executable, "-m", "exo_rt", *words, "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _flags(args: str) -> set[str]:
    return {f.split("=")[0] for f in re.findall(r"--[a-z][\w-]*", args)}


def test_every_tool_and_option_named_exists():
    tools = [(m.group(1), m.group(2)) for c in _commands()
             for m in [re.search(r"tools/(\w+\.py)(.*)", c)] if m]
    assert len(tools) > 10
    for name, args in tools:
        tool = ROOT / "tools" / name
        assert tool.exists(), f"docs/performance.md names tools/{name}: no such file"
        source = tool.read_text()
        for flag in _flags(args):
            assert f'"{flag}"' in source, f"tools/{name} has no option {flag}"


def test_every_exo_rt_command_and_option_named_exists():
    commands = [c.split(None, 2) for c in _commands() if c.startswith("exo-rt ")]
    assert len(commands) > 3
    subcommands = set(re.findall(r"^    (\w[\w-]*)\s", _help(), re.M))
    assert {"run", "warmup"} <= subcommands
    for words in commands:
        sub = words[1]
        assert sub in subcommands, f"`exo-rt {sub}` is not a command of `exo-rt --help`"
        missing = _flags(words[2] if len(words) > 2 else "") - _flags(_help(sub))
        assert not missing, f"`exo-rt {sub}` has no option {sorted(missing)}"
