"""The safety case's hazard table (docs/safety.md, "Hazards and the tests that show them"):
every hazard of docs/hazards.yaml has a test that carries its marker, every marker names a
listed hazard, and the table in docs/safety.md is what ``tools/hazard_table.py --write`` makes
of them. Then the tool itself, on a small tree of its own: where it finds markers, and its
one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import hazard_table as ht

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def findings():
    return ht.examine(ROOT)


def test_every_listed_hazard_has_a_test(findings):
    assert findings.untested == [], (
        f"hazards of docs/hazards.yaml no test shows: {findings.untested} — mark the test "
        f"that shows each with @pytest.mark.hazard(\"ID\")")


def test_every_marker_names_a_listed_hazard(findings):
    assert ht._unknown_lines(findings) == []


def test_the_safety_page_holds_the_current_table(findings):
    page = (ROOT / ht.SAFETY).read_text(encoding="utf-8")
    assert ht.current(page, ht.SAFETY, findings.table), \
        "docs/safety.md's hazard table is not current: run python tools/hazard_table.py --write"


def test_the_earlier_fault_tests_carry_their_hazards(findings):
    """The tests of docs/safety.md's layers (foreign master, the controller's death, injected
    faults, the board) are in the table."""
    shown: dict[str, set[str]] = {}
    for m in findings.markers:
        shown.setdefault(m.id, set()).add(m.test)
    assert "tests/test_foreign_master.py::test_another_master_is_a_fault_within_three_cycles" \
        in shown["H-FOREIGN-MASTER"]
    assert "tests/test_runtime.py::test_every_injected_fault_is_caught_within_three_cycles" \
        in shown["H-FAULT-INJECTED"]
    assert {"tests/test_firmware_bridge.py::test_runtime_reacts_to_the_board"} \
        == shown["H-ESTOP"] == shown["H-BOARD-LINK"]
    assert len(shown["H-CONTROLLER-DEAD"]) == 6


# -- the tool on a tree of its own

HAZARDS = """\
H-A:
  hazard: a
  cause: ca
  stops: sa | pipe
H-B: {hazard: b, cause: cb, stops: sb}
"""

TESTS = '''\
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.hazard("H-A")]


@pytest.mark.hazard("H-B")
def test_one():
    pass


def helper():
    pass


@pytest.mark.hazard("H-B")
class TestGroup:
    pytestmark = pytest.mark.hazard("H-C")

    def test_two(self):
        pass

    def not_a_test(self):
        pass


@pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.hazard("H-D"))])
def test_three(x):
    pass
'''


def _tree(tmp_path: Path, tests: str = TESTS, hazards: str = HAZARDS) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "docs" / "hazards.yaml").write_text(hazards)
    (tmp_path / "docs" / "safety.md").write_text(f"# S\n\n{ht.BEGIN}\nold\n{ht.END}\nafter\n")
    (tmp_path / "tests" / "test_x.py").write_text(tests)
    return tmp_path


def test_markers_on_functions_classes_pytestmark_and_params(tmp_path):
    got = [(m.id, m.test, m.line) for m in ht.collect_markers(_tree(tmp_path))]
    f = "tests/test_x.py"
    assert got == [("H-A", f"{f}::test_one", 3), ("H-B", f"{f}::test_one", 6),
                   ("H-A", f"{f}::TestGroup::test_two", 3),
                   ("H-B", f"{f}::TestGroup::test_two", 15),
                   ("H-C", f"{f}::TestGroup::test_two", 17),
                   ("H-A", f"{f}::test_three", 3), ("H-D", f"{f}::test_three", 26)]


def test_write_then_check(tmp_path, capsys):
    root = _tree(tmp_path, tests=TESTS.replace("H-C", "H-A").replace("H-D", "H-B"))
    assert ht.main(["--check", "--root", str(root)]) == 1
    assert "the hazard table is not current" in capsys.readouterr().err
    assert ht.main(["--write", "--root", str(root)]) == 0
    page = (root / "docs" / "safety.md").read_text()
    assert page.startswith(f"# S\n\n{ht.BEGIN}\n<!-- generated") and page.endswith(
        f"{ht.END}\nafter\n")
    assert "| H-A | a | ca | sa \\| pipe | `tests/test_x.py::test_one`<br>" \
           "`tests/test_x.py::TestGroup::test_two`<br>`tests/test_x.py::test_three` |" in page
    assert ht.main(["--check", "--root", str(root)]) == 0
    assert ht.main(["--write", "--root", str(root)]) == 0
    assert "(unchanged)" in capsys.readouterr().out


def test_check_names_unlisted_and_untested_hazards(tmp_path, capsys):
    root = _tree(tmp_path, hazards=HAZARDS + "H-UNTESTED: {hazard: e, cause: ce, stops: se}\n")
    assert ht.main(["--write", "--root", str(root)]) == 2  # H-C, H-D are not listed
    err = capsys.readouterr().err.splitlines()
    assert err == ["tests/test_x.py::TestGroup::test_two (line 17): hazard 'H-C' is not in "
                   "docs/hazards.yaml — did you mean 'H-B'?",
                   "tests/test_x.py::test_three (line 26): hazard 'H-D' is not in "
                   "docs/hazards.yaml — did you mean 'H-B'?"]
    (root / "tests" / "test_x.py").write_text(TESTS.replace("H-C", "H-A").replace("H-D", "H-B"))
    assert ht.main(["--write", "--root", str(root)]) == 0  # written, H-UNTESTED said untested
    assert ht.main(["--check", "--root", str(root)]) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("hazards with no test: H-UNTESTED — ")
    page = (root / "docs" / "safety.md").read_text()
    assert "| H-UNTESTED | e | ce | se | **no test yet** |" in page


@pytest.mark.parametrize(("tests", "hazards", "message"), [
    ("import pytest\nX = pytest.mark.hazard('H-A')\n", HAZARDS,
     "tests/test_x.py:2: this hazard marker marks no test — put it on a test function or "
     "class, or in 'pytestmark'"),
    ("import pytest\nID = 'H-A'\n@pytest.mark.hazard(ID)\ndef test_a():\n    pass\n", HAZARDS,
     "tests/test_x.py:3: a hazard marker takes hazard ids as string literals — write "
     "pytest.mark.hazard(\"H-NAME\")"),
    ("def test_a(:\n", HAZARDS, "tests/test_x.py:1: does not parse"),
    ("", "H-A:\n  hazard: a\n  cause: c\n", "docs/hazards.yaml:1: H-A has no 'stops' — give "
     "it hazard, cause, stops (one sentence each)"),
    ("", HAZARDS + "H-A: {hazard: a, cause: c, stops: s}\n",
     "docs/hazards.yaml:6: hazard id 'H-A' is listed twice"),
    ("", "A: {hazard: a, cause: c, stops: s}\n", "docs/hazards.yaml:1: hazard id 'A' does not "
     "start with 'H-'"),
    ("", "H-A: {hazard: a, cause: c, stops: s, why: w}\n",
     "docs/hazards.yaml:1: H-A has an unknown key 'why'"),
    ("", "H-A: [a\n", "docs/hazards.yaml:2: YAML syntax error"),
])
def test_bad_files_are_one_line_with_file_and_line(tmp_path, capsys, tests, hazards, message):
    root = _tree(tmp_path, tests=tests, hazards=hazards)
    assert ht.main(["--check", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_page_without_its_markers_is_refused(tmp_path, capsys):
    root = _tree(tmp_path, tests="")
    (root / "docs" / "safety.md").write_text(f"# S\n{ht.END}\n{ht.BEGIN}\n")
    assert ht.main(["--write", "--root", str(root)]) == 2
    assert capsys.readouterr().err.startswith(
        f"docs/safety.md: needs one '{ht.BEGIN}' line and, after it, one '{ht.END}' line")
