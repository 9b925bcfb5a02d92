"""The documentation stands alone: every relative link in README.md and docs/ resolves to a
file inside the repository (and its #anchor to a heading there); nothing points outside it.
Tools import nothing from tests/."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # the dated notes too
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.M)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
# what a reader who cloned only this repository does not have: the project's design notes and
# source papers by their working names, and development machines' paths (built from parts so
# that this file does not match itself)
OUTSIDE = re.compile("|".join((
    r"\.\./" + "shared", "DESIGN" + r"(\.md| §)", r"\b[Ss]eed " + r"0\d\d\b", r"seeds" + "/",
    "reference" + " notes", r"(?<![\w.])/" + r"(work|root|home)/")))
TEXT = (".py", ".md", ".yaml", ".yml", ".toml", ".c", ".h", ".txt", ".cfg", ".eds", ".dcf")


def _headings(md: Path) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$",
                                                      FENCE.sub("", md.read_text()), re.M)]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: the text (a code span's too) in lower case, every
    character but letters, digits, '_', '-' and spaces dropped, spaces → hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(md: Path) -> frozenset[str]:
    """Every anchor GitHub gives md's headings, a repeated one numbered -1, -2 …"""
    seen: dict[str, int] = {}
    out = set()
    for h in _headings(md):
        slug = _slug(h)
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(out)


def _links(md: Path):
    text = CODE.sub("", md.read_text())
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # http(s):, mailto: … — not a file of the repository
        yield target


def test_there_are_docs_to_check():
    assert (ROOT / "README.md").exists() and len(DOCS) > 5
    assert any(True for _ in _links(ROOT / "README.md"))


@pytest.mark.parametrize("md", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_relative_links_resolve_inside_the_repository(md):
    bad = []
    for target in _links(md):
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if ROOT not in dest.parents and dest != ROOT:
            bad.append(f"{target}: outside the repository")
        elif not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not bad, f"{md.relative_to(ROOT)}: " + "; ".join(bad)


def test_nothing_cites_what_is_not_in_the_repository():
    for md in DOCS:
        assert not OUTSIDE.search(md.read_text()), md




def _repository_files():
    """Every file of the repository (git's list where there is one, else the tree)."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
        return [ROOT / f for f in out]
    except (OSError, subprocess.CalledProcessError):
        skip = {".venv", ".git", "runs", "__pycache__", "build", "dist"}
        return [p for p in ROOT.rglob("*") if p.is_file()
                and not skip.intersection(p.relative_to(ROOT).parts)]


def test_no_line_refers_to_a_file_outside_the_repository():
    bad = []
    for path in _repository_files():
        if path.suffix not in TEXT or not path.exists():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:90]}")
    assert not bad, "cite docs/references.md or a docs/ page instead:\n" + "\n".join(bad)


def test_tools_do_not_import_tests():
    for tool in sorted((ROOT / "tools").glob("*.py")):
        text = tool.read_text()
        assert not re.search(r"^\s*(from tests\b|import tests\b)", text, re.M), tool.name
