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

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
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


def test_bench_rt_runs_a_config_on_another_simulation_and_counts_stale_cycles(tmp_path):
    """tools/bench_rt.py --simulation: a copy of the top config with that ``simulation:``
    section, the files it names made absolute, loads as the original with the room set; its
    stale-cycle count (feedback missing, late or malformed; the longest streak) reads the cycle
    log's flags, and a duplicate answer or a drive fault alone is not stale."""
    import numpy as np

    from exo_rt.bus.flags import F_DUPLICATE, F_FAULT, F_LATE, F_MALFORMED, F_MISSING
    from exo_rt.record.recorder import columns_dtype, cycle_columns
    from exo_rt.runtime.config import load_top
    from tools import bench_rt

    path = bench_rt.with_simulation(ROOT / "tests" / "data" / "exo_2leg_vm.yaml",
                                    "{plant: world, scene: floor, support: 0.3}", tmp_path)
    top = load_top(path)
    assert top.simulation.plant == "world"
    assert top.simulation.plant_options() == {"scene": "floor", "support": 0.3}
    assert top.safety.stale_cycles == 50 and top.robot.nq == 4  # the rest is the original's
    records = np.zeros(8, columns_dtype(cycle_columns(4)))
    records["flags"][[1, 2, 3], 0] = (F_MISSING, F_LATE, F_MALFORMED)
    records["flags"][5, 3] = F_MISSING
    records["flags"][[6, 7], 1] = (F_DUPLICATE, F_FAULT)
    assert bench_rt.stale(records) == (4, 3)
    one = np.zeros(3, columns_dtype(cycle_columns(1)))  # one joint: a scalar column
    one["flags"][2] = F_LATE
    assert bench_rt.stale(one) == (1, 1)
