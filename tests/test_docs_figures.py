"""The figures and options the docs cite, compared with the output of the command that makes
them where that command takes seconds: every ``exo-rt`` command and option in docs/cli.md,
the built-in laws counted in docs/architecture.md, the MCAP file's length in run time, the
friction sweep's speeds in docs/bench.md and in the pre-flight checklist; and, marked slow (a
run, a 20 s procedure or some 35 interpreters each), every tool's ``--help`` description
whole, the chirp bandwidth of docs/bench.md (``exo-rt bench-test chirp``), the sizing tables
of docs/sizing.md (``exo-rt size`` on the runs it shows) and the run folder ``exo-rt run``
makes in a fresh directory (``./runs/``, as the README says)."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# a long option where it is named: `--live` does not name `--live-wait`
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)(?![\w-])")
WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def _run(argv: list[str], cwd: Path = ROOT, timeout: float = 120.0):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _all(argvs: list[list[str]], timeout: float = 120.0) -> list[subprocess.CompletedProcess]:
    """Each command line run, two at a time, in the repository."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda argv: _run(argv, timeout=timeout), argvs))


def _exo_rt(*words: str) -> list[str]:
    return [sys.executable, "-m", "exo_rt", *words]


# ------------------------------------------------------------------------- docs/cli.md
def _options(help_text: str) -> set[str]:
    return set(OPTION.findall(help_text)) - {"--help"}


def _missing(help_text: str, text: str) -> list[str]:
    """The options of a ``--help`` text that ``text`` does not name."""
    named = set(OPTION.findall(text))
    return sorted(_options(help_text) - named)


def _cli_rows(md: str) -> dict[str, str]:
    """docs/cli.md's table: command → its first cell (``exo-rt NAME [--option …]``)."""
    rows = {}
    for line in md.splitlines():
        m = re.match(r"\| `exo-rt ([\w-]+)", line)
        if m:
            rows.setdefault(m.group(1), re.split(r"(?<!\\)\|", line)[1])
    return rows


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_every_exo_rt_command_and_option_is_in_cli_md():
    top = _run(_exo_rt("--help")).stdout
    commands = re.findall(r"^    (\w[\w-]*)\s", top, re.M)
    assert {"run", "bench-test", "size"} <= set(commands), top
    md = (DOCS / "cli.md").read_text()
    rows = _cli_rows(md)
    assert not [c for c in commands if c not in rows], "docs/cli.md: a command without its row"
    assert not [c for c in rows if c not in commands], "docs/cli.md: a row of no command"
    assert not _missing(top, md), f"docs/cli.md does not name exo-rt's {_missing(top, md)}"
    helps = _all([_exo_rt(c, "--help") for c in commands])
    missing = {}
    for command, res in zip(commands, helps, strict=True):
        assert res.returncode == 0, res.stderr
        if _missing(res.stdout, rows[command]):
            missing[command] = _missing(res.stdout, rows[command])
    assert not missing, f"docs/cli.md's rows lack these options of their command: {missing}"


def test_the_option_check_can_fail():
    help_text = ("usage: exo-rt bench-test [-h] [--joint JOINT] [--lockstep]\n\n"
                 "  --joint JOINT  only this joint\n  --lockstep     drives in lockstep\n")
    assert _missing(help_text, "`exo-rt bench-test NAME [--joint J]`") == ["--lockstep"]
    assert _missing(help_text, "`exo-rt bench-test NAME [--joint J] [--lockstep]`") == []
    assert _missing("  --live-wait S", "[--live]") == ["--live-wait"]
    row = _cli_rows("| `exo-rt check FILE [--buses FILE]` | a \\| b |\n")["check"]
    assert row == " `exo-rt check FILE [--buses FILE]` "


# ------------------------------------------------------------------------- the tools
TOOLS = sorted(p for p in (ROOT / "tools").glob("*.py")
               if re.search(r"^if __name__ == .__main__.:", p.read_text(), re.M))


def _description(help_text: str) -> str:
    """What argparse prints between the usage and the arguments."""
    blocks = help_text.split("\n\n")
    assert blocks[0].startswith("usage:"), help_text[:300]
    return "\n\n".join(b for b in blocks[1:] if not re.match(r"(options|positional arguments):",
                                                             b.lstrip()))


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.slow
def test_every_tool_answers_help_with_its_whole_first_paragraph():
    """``python tools/X.py --help`` prints the usage and the docstring's first paragraph,
    whole (a sentence, not its first line), runs nothing else and exits 0."""
    assert len(TOOLS) > 30
    results = _all([[sys.executable, str(tool), "--help"] for tool in TOOLS])
    for tool, res in zip(TOOLS, results, strict=True):
        name = f"tools/{tool.name}"
        assert res.returncode == 0, f"{name} --help: {res.stderr[-500:]}"
        doc = ast.get_docstring(ast.parse(tool.read_text()))
        assert doc, f"{name}: no docstring"
        first = doc.split("\n\n")[0]
        assert first.rstrip().endswith((".", ".)")), f"{name}: its first paragraph is cut"
        description = _description(res.stdout)
        assert _squash(description).startswith(_squash(first)), (
            f"{name} --help does not print its first paragraph whole:\n{description}")


def test_the_help_check_can_fail():
    cut = "usage: x.py [-h]\n\nThe figures of docs/world.md: the\n\noptions:\n  -h, --help\n"
    assert _squash(_description(cut)) == _squash("The figures of docs/world.md: the")
    assert not _squash(_description(cut)).startswith(
        _squash("The figures of docs/world.md: the world's runs."))


# ------------------------------------------------------------------------- counts and ranges
def test_architecture_counts_the_built_in_laws():
    from exo_rt.control import registry

    text = (DOCS / "architecture.md").read_text()
    m = re.search(r"holds the\s+built-in (\w+)\)", text)
    assert m, "docs/architecture.md says how many laws exo_rt/control/laws.py holds"
    built_in = [n for n in registry.NAMES if registry.get(n).torque.__module__ in registry.BUILTIN]
    assert WORDS[m.group(1)] == len(built_in), (
        f"docs/architecture.md: '{m.group(1)}' built-in laws, there are {len(built_in)}")
    assert "ALIGN state (" not in text, "there is no ALIGN state"


def test_the_docs_give_the_mcap_files_length():
    from exo_rt.record.mcap_log import SEGMENT_S

    said = []
    for page in ("replay.md", "telemetry.md", "deploy.md"):
        text = " ".join((DOCS / page).read_text().split())
        found = re.findall(r"(?:after each|a file per) (\d+) minutes of run time", text)
        assert found, f"docs/{page}: how long a run's MCAP file is"
        said += [(page, float(f)) for f in found]
        assert "after each hour" not in text
    assert all(minutes * 60.0 == SEGMENT_S for _, minutes in said), said


def test_the_friction_sweeps_speeds_in_the_docs_and_the_checklist():
    """docs/bench.md's `friction` row, the checklist the command prints (the procedure's
    ``moves``) and the speeds it sweeps name the same range."""
    from exo_rt.hil import identify, registry

    row = next(line for line in (DOCS / "bench.md").read_text().splitlines()
               if line.startswith("| `friction` |"))
    m = re.search(r"sweeps at ([\d.]+) … ([\d.]+) rad/s over up to ±([\d.]+) rad", row)
    assert m, row
    low, high, span = (float(x) for x in m.groups())
    assert (low, high) == (identify.SPEEDS[0], identify.SPEEDS[-1])
    moves = registry.get("friction").moves
    c = re.search(r"±([\d.]+) rad at ([\d.]+) … ([\d.]+) rad/s", moves)
    assert c, moves
    assert (float(c[2]), float(c[3]), float(c[1])) == (low, high, span)


# ------------------------------------------------------------------------- slow: runs
@pytest.mark.slow
def test_the_chirp_bandwidth_is_the_commands(tmp_path):
    """docs/bench.md's shipped-leg chirp row is what ``exo-rt bench-test chirp --yes`` prints
    (Hz, two decimals) and its report gives against the design (%, one decimal)."""
    row = next(line for line in (DOCS / "bench.md").read_text().splitlines()
               if "`exo-rt bench-test chirp --yes`" in line)
    cited = {j: (hz, pct) for j, hz, pct in re.findall(r"(\w+) ([\d.]+) Hz \(\+([\d.]+) %\)",
                                                        row.rsplit("|", 2)[1])}
    assert set(cited) == {"hip", "knee"}, row
    out = tmp_path / "chirp"
    res = _run(_exo_rt("bench-test", "chirp", "--yes", "--out", str(out)), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    printed = dict(re.findall(r"^  (\w+)\s+([\d.]+)\s+[\d.]+$", res.stdout, re.M))
    report = json.loads((out / "bench-chirp.json").read_text())["joints"]
    for joint, (hz, pct) in cited.items():
        assert printed[joint] == hz, f"{joint}: docs {hz} Hz, exo-rt bench-test {printed[joint]}"
        r = report[joint]
        ratio = r["chirp"]["bandwidth_hz"] / r["expected"]["bandwidth_hz"] - 1.0
        assert f"{100 * ratio:.1f}" == pct, f"{joint}: docs +{pct} %, the report {ratio:+.2%}"


def _sizing_cases():
    """docs/sizing.md's ``exo-rt size runs/NAME`` blocks: (the run's command lines, NAME, the
    table after the block)."""
    lines = (DOCS / "sizing.md").read_text().splitlines()
    fences = [i for i, ln in enumerate(lines) if ln.startswith("```")]
    for start, end in zip(fences[::2], fences[1::2], strict=True):
        block = [ln.split("#")[0].strip() for ln in lines[start + 1:end]]
        size = next((ln for ln in block if ln.startswith("exo-rt size ")), None)
        if size is None:
            continue
        after = end + 1
        while after < len(lines) and not lines[after].strip():
            after += 1
        table = []
        while after < len(lines) and lines[after].startswith("|"):
            table.append(lines[after])
            after += 1
        name = size.split()[2].removeprefix("runs/")
        yield [ln for ln in block if ln.startswith("exo-rt run")], name, "\n".join(table)


def _md_table(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in
            table.splitlines() if not re.fullmatch(r"\|[-| ]+\|", line.strip())]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_sizing_cases()), ids=lambda c: c[1])
def test_the_sizing_tables_are_exo_rt_sizes(case, exo_rt_runs):
    """Each table is ``exo-rt size`` of the run its block makes (made once a session: the
    world's sessions are read by tests/test_world_session.py and tests/test_world_peaks.py
    too, tests/run_cache.py): each verdict as printed, each figure within 1 %, a peak within
    3 % (another machine's rounding: :data:`SIZING_REL`, :data:`SIZING_REL_PEAK`)."""
    runs, name, table = case
    assert len(runs) == 1, f"docs/sizing.md: runs/{name} comes from {len(runs)} exo-rt run lines"
    words = shlex.split(runs[0])[2:]  # (after "exo-rt run")
    at = words.index("--out")
    assert words[at + 1] == f"runs/{name}", runs[0]
    out, res = exo_rt_runs.run(*words[:at], *words[at + 2:])
    assert res.returncode == 0, res.stderr[-2000:]
    res = _run(_exo_rt("size", str(out)), timeout=120)
    assert res.returncode in (0, 1), res.stderr
    lines = res.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("joint "))
    columns = re.split(r"\s{2,}", lines[head].strip())
    printed = {}
    for ln in lines[head + 1:]:
        cells = re.split(r"\s{2,}", ln.strip())
        if len(cells) != len(columns):
            break
        printed[cells[0]] = dict(zip(columns, cells, strict=True))
    header, *rows = _md_table(table)
    assert rows
    for row in rows:
        got = printed[row[0]]
        for column, cited in zip(header[1:], row[1:], strict=True):
            key = next(k for k in columns if k.startswith(column))
            value = cited.split(" (")[0] if column == "verdict" else cited.split(" ")[0]
            # (a rating the robot file does not give: "—", which the docs leave out)
            rel = SIZING_REL_PEAK if column.startswith("peak") else SIZING_REL
            assert got[key] == value or got[key].startswith(value + "/") or _near(
                got[key], value, rel), (
                f"docs/sizing.md runs/{name}: {row[0]} {column} {cited}, exo-rt size {got[key]}")


# a world run's figure as another machine makes it: the contacts turn a difference in the last
# bit (numba and MuJoCo compile for the host's instruction set, e.g. fused multiply-adds) into
# one in the third digit over a session, each machine repeating its own run bit for bit.
# Measured between the machine that wrote docs/sizing.md and an AMD EPYC: RMS figures and
# windings 0.07–0.34 %; a peak, one cycle's extreme, up to 1.49 % (tqh20's left hip current,
# 21.53 → 21.21 A) — so 1 % and, for the peaks, 3 %
SIZING_REL = 0.01
SIZING_REL_PEAK = 0.03


def _near(got: str, cited: str, rel: float) -> bool:
    """``got`` and ``cited`` are numbers within ``rel`` of each other (relative)."""
    try:
        a, b = float(got), float(cited)
    except ValueError:
        return False
    return abs(a - b) <= rel * max(abs(a), abs(b))


@pytest.mark.slow
def test_a_run_from_any_directory_writes_its_folder_there(tmp_path):
    """The README: ``exo-rt run`` from any directory writes its run folder into ``./runs/``
    there (a source checkout's editable install as a wheel does), not into the checkout."""
    before = set((ROOT / "runs").iterdir()) if (ROOT / "runs").exists() else set()
    res = _run(_exo_rt("run", "--duration", "0.5"), cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    (folder,) = (tmp_path / "runs").iterdir()
    assert (folder / "summary.json").exists()
    after = set((ROOT / "runs").iterdir()) if (ROOT / "runs").exists() else set()
    assert after == before, f"a run folder in the checkout: {after - before}"


def test_run_folders_go_to_the_working_directory_for_a_shipped_config(tmp_path, monkeypatch):
    from exo_rt import resources

    monkeypatch.chdir(tmp_path)
    assert resources.runs_root(resources.config("exo_leg.yaml")) == tmp_path
    assert resources.runs_root(resources.default_config()) == tmp_path
    lab = tmp_path / "lab" / "configs" / "exo_leg.yaml"  # a config of the lab's own
    assert resources.runs_root(lab) == tmp_path / "lab"
