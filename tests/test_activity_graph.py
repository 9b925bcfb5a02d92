"""docs/sessions.md's picture of the activity graph: ``tools/activity_graph.py`` draws it from
an activities file — a valid PNG of a plausible size, one edge per motion from its start
posture to its end posture — and the committed picture is the one it draws."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "img" / "activities-exo_leg.png"
PNG = b"\x89PNG\r\n\x1a\n"


def _tool(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tools/activity_graph.py", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def _size(png: bytes) -> tuple[int, int]:
    """(width, height) px from a PNG's IHDR chunk (the first, right after the signature)."""
    assert png[:8] == PNG and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


@pytest.mark.parametrize("activities,robot", [
    ("configs/activities/exo_leg.yaml", "configs/exo_leg.yaml"),
    ("configs/activities/exo_2leg.yaml", "configs/robots/exo_2leg.yaml"),
])
@pytest.mark.slow
def test_the_graph_is_drawn_one_edge_per_motion(tmp_path, activities, robot):
    from exo_rt.cli.check import config_kind
    from exo_rt.model import load_mechanism
    from exo_rt.runtime.config import load_top
    from exo_rt.session.activities import load_activities

    out = tmp_path / "graph.png"
    res = _tool(activities, "--robot", robot, "--out", out)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    data = out.read_bytes()
    w, h = _size(data)
    assert 600 <= w <= 1200 and 400 <= h <= 900 and 15_000 <= len(data) <= 400_000
    assert data.endswith(b"IEND\xaeB`\x82")  # the last chunk, whole
    top = config_kind(ROOT / robot) == "top"
    mech = load_top(ROOT / robot).robot if top else load_mechanism(ROOT / robot)
    a = load_activities(ROOT / activities, mech)
    edges = [x for x in res.stdout.splitlines() if " → " in x]
    assert len(edges) == len(a.motions)
    for line, m in zip(edges, a.motions, strict=True):
        start = m.start or "no named posture"
        assert line.startswith(f"{start} → {m.end}: {m.name} ({m.kind}"), line
        assert ("GO held" in line) == m.hold_go
        assert ("STOP" in line) == m.stoppable


def test_the_committed_picture_is_the_tools_and_docs_show_it(tmp_path):
    res = _tool("--out", tmp_path / "again.png")
    assert res.returncode == 0, res.stderr
    assert _size(PICTURE.read_bytes()) == _size((tmp_path / "again.png").read_bytes())
    assert abs(len(PICTURE.read_bytes()) - (tmp_path / "again.png").stat().st_size) < 0.2 * \
        len(PICTURE.read_bytes())
    assert "](img/activities-exo_leg.png)" in (ROOT / "docs" / "sessions.md").read_text()


def test_a_bad_activities_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("postures:\n  standing: {hip: 0.0, knee: 0.05}\nmotions:\n"
                   "  walk: {kind: walk, from: standing, to: standin}\n")
    res = _tool(bad, "--out", tmp_path / "x.png")
    assert res.returncode == 2 and f"{bad}:4:" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "x.png").exists()
