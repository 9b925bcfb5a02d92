"""tools/bench_cycle.py --world (docs/world.md, "Cost"): the lockstep whole cycle on
``harmonic_drive``, the world's test stand and the world's floor, side by side — run as a user
runs it (``--quick``: exo_2leg, one short round). Not a timed test: it checks that every case
runs to SHUTDOWN (standing; the walking reference on harmonic_drive) and that the tool prints
its ratios, not what they are."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_cycle_world_runs_the_three_plants_side_by_side():
    out = subprocess.run([sys.executable, "tools/bench_cycle.py", "--world", "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    rows = re.findall(r"^  exo_2leg\s+(harmonic_drive|world test stand|world floor|walking)\s+"
                      r"p50\s+([\d.]+) /\s+([\d.]+)\s+p99\s+([\d.]+)\s+ratio ([\d.]+)"
                      r"(   plant period alone\s+([\d.]+) /\s+([\d.]+) µs \(ratio ([\d.]+)\))?"
                      r"(, of it the contact solve ≈\s+[\d.]+ µs)?$", out.stdout, re.M)
    assert [r[0] for r in rows] == ["harmonic_drive", "world test stand", "world floor",
                                    "walking"], out.stdout
    assert all(float(r[1]) > 0 for r in rows)
    assert float(rows[0][4]) == 1.0  # the ratios are to harmonic_drive's, standing
    assert all(float(r[6]) > 0 for r in rows[:3]) and not rows[3][5]  # the plant alone: standing
    assert [bool(r[9]) for r in rows] == [False, False, True, False]  # contacts: the floor's
    assert re.search(r"world floor standing / harmonic_drive walking .*: [\d.]+$", out.stdout,
                     re.M), out.stdout
    assert out.stdout.count("(SHUTDOWN)") == 4, out.stdout  # each case stood to the end
