"""Thermal derating is announced when it begins (docs/assistance.md, "Thermal protection"): an
event in events.jsonl, a line on standard error and an entry per joint in summary.json — all
before the SAFE ``winding_temperature`` it may lead to, which before was its first sign.

The winding is heated quickly as tests/test_winding_protection.py does, by the config: the
shipped run on a hot day (ambient 88 °C) with the warning at 90 °C and the limit at 92 °C —
the hip, which carries the leg, passes the warning 2.4 s in and reaches the limit 0.5 s later.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt.record.recorder import read_cycle_log

ROOT = Path(__file__).resolve().parents[1]
WARNING, LIMIT = 90.0, 92.0


def _hot_config(tmp_path: Path) -> Path:
    """The shipped top config, its files named by absolute path, the thermal levels added."""
    text = (ROOT / "configs" / "exo_leg.yaml").read_text()
    for key in ("robot", "buses", "controller"):
        text = re.sub(rf"(?m)^{key}: ", f"{key}: {ROOT / 'configs'}/", text)
    text = text.replace("safety:\n", "safety:\n  thermal: {ambient: 88.0, warning: "
                        f"{WARNING}, limit: {LIMIT}}}\n", 1)
    path = tmp_path / "hot.yaml"
    path.write_text(text)
    return path


@pytest.mark.slow
@pytest.mark.hazard("H-DERATING-SILENT")
def test_derating_is_announced_before_the_winding_limit(tmp_path):
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                          str(_hot_config(tmp_path)), "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 1, res.stderr[-2000:]  # SAFE at the limit
    assert "Traceback" not in res.stderr
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    derating = [e for e in events if e["event"] == "derating"]
    fault = next(e for e in events if e["event"] == "fault")
    assert fault["cause"] == "winding_temperature" and fault["joint"] == "hip"
    assert [e["joint"] for e in derating] == ["hip"]  # the knee stays below its warning
    ev = derating[0]
    assert events.index(ev) < events.index(fault)
    assert ev["state"] == "RUN" and ev["cycle"] < fault["cycle"] - 100
    assert WARNING < ev["winding_C"] < WARNING + 0.05
    # seen within a cycle of the cycle log's first derated record (two joints, one a cycle)
    records, meta = read_cycle_log(out / "cycles.exolog")
    hip = meta["joint_names"].index("hip")
    first = int(np.argmax(records["derate"][:, hip] < 1.0))
    assert records["derate"][first, hip] < 1.0
    assert 0 <= ev["cycle"] - first <= 1
    # the terminal line
    line = next(x for x in res.stderr.splitlines() if "past its warning level" in x)
    assert line.startswith(f"exo-rt: warning: t = {ev['t']:.3f} s (RUN): the hip motor's")
    assert "where the run stops SAFE (winding_temperature)" in line
    # the summary: when, and how far
    summary = json.loads((out / "summary.json").read_text())
    entry = summary["derating"]
    assert list(entry) == ["hip"]
    hip_entry = entry["hip"]
    assert (hip_entry["t"], hip_entry["cycle"]) == (ev["t"], ev["cycle"])
    assert hip_entry["t"] < summary["faults"][0]["t"]
    assert LIMIT <= hip_entry["highest_winding_C"] < LIMIT + 0.05  # SAFE at the limit
    assert records["winding"][:, hip].max() == pytest.approx(hip_entry["highest_winding_C"],
                                                             abs=0.02)
    assert hip_entry["lowest_factor"] == pytest.approx(ev["floor"], abs=1e-4)  # the floor
    assert hip_entry["lowest_factor"] == pytest.approx(records["derate"][:, hip].min(),
                                                       abs=1e-4)
    assert hip_entry["lowest_current_limit_A"] == pytest.approx(
        hip_entry["lowest_factor"] * ev["current_limit_A"], abs=1e-3)
