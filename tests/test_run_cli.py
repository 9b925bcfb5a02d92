"""What a new user meets first with ``exo-rt run`` (README, docs/cli.md): the README's fault
example fires while the leg walks, and the fault line says when."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_inject_example() -> str:
    """The ``--inject`` example the README shows."""
    m = re.search(r"`--inject ([^`]+)`", (ROOT / "README.md").read_text())
    assert m, "the README shows an --inject example"
    return m.group(1)


@pytest.mark.slow
def test_the_readmes_inject_example_fires_while_walking(tmp_path):
    """``--inject KIND:JOINT@T+D`` counts T from the start of RUN: the README's example ends
    SAFE in RUN, with the tracking figures of the gait walked before it (not nan / 0)."""
    spec = _readme_inject_example()
    t = float(spec.split("@")[1].split("+")[0])
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", str(t + 1.0),
                          "--inject", spec, "--out", str(out)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 1, res.stderr  # 1: ended SAFE
    s = json.loads((out / "summary.json").read_text())
    (fault,) = s["faults"]
    assert fault["t_run"] == t and fault["reaction_cycles"] <= 3
    states = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    order = [e["state"] for e in states if e.get("event") == "state"]
    assert order[-2:] == ["RUN", "SAFE"]
    for j in s["joints"].values():
        assert 0.0 < j["rms_error_deg"] < 1.0 and j["max_error_deg"] > 0.0
    assert f"RUN + {t:.3f} s" in res.stdout
    # the folder says what each of its files is
    guide = (out / "README.md").read_text()
    for f in out.iterdir():
        assert f"`{f.name}" in guide or f.name == "README.md", f.name
    # lockstep: no real-time figure (compute time, wake latency, overruns) in the final lines
    final = res.stdout[res.stdout.index("final state"):]
    assert "lockstep simulation" in final
    assert "overruns" not in final and "wake" not in final and "p99" not in final


def test_a_cold_cache_says_why(monkeypatch):
    """"cold" only when it is, saying which: an empty cache, or one that lacks this run's
    control law (another ``--controller``)."""
    from exo_rt import warmup
    from exo_rt.runtime.config import load_top

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    names = warmup.select(warmup.RUN_GROUPS, ())
    ctx = warmup.Context(top)
    monkeypatch.setattr(warmup, "_warm_set", lambda: set())
    assert "cache is empty" in warmup.why_cold(names, ctx)
    warm = warmup._tags(names, ctx)  # everything for computed_torque
    monkeypatch.setattr(warmup, "_warm_set", lambda: warm)
    other = warmup.Context(load_top(ROOT / "configs" / "exo_leg.yaml",
                                    controller="sliding_mode"))
    assert warmup.why_cold(names, other) == \
        "the compile cache lacks control law 'sliding_mode' (its first run)"


def test_summary_names_each_phase_and_the_start_up_parts():
    """``duration_s`` is the whole loop; ``phases_s`` says RUN is the session (homing ≥ 1 s,
    the walk asked for, its closing step), STOPPING after it; READY's wall time splits into
    compile, imports/open, bring-up."""
    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    s = Controller(top, "sim").run(0.7, None).summary
    ph = s["phases_s"]
    assert list(ph) == ["READY", "RUN", "STOPPING", "SHUTDOWN"]
    walk = 0.7  # s: --duration
    homing = 1.0  # s: the shortest HOME (the default session's first motion)
    stride = 1.971  # s: the wearer's default 0.4 m/s; the closing step ends ≤ 1 stride on
    assert homing + walk < ph["RUN"] <= homing + walk + stride + 0.05  # (its ramp, a cycle)
    assert ph["STOPPING"] == top.stop_s
    assert abs(sum(ph.values()) - s["duration_s"]) < 1e-9
    up = s["startup_s"]
    assert abs(up["compile"] + up["imports_and_open"] + up["bring_up"]
               - up["process_to_ready"]) < 2e-3  # (each rounded to 1 ms)


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
@pytest.mark.slow
def test_a_live_run_waits_for_its_viewer_and_goes_at_wall_clock_pace(tmp_path):
    """``--live``: the run waits (``--live-wait``) until a Foxglove client subscribes, then the
    lockstep simulation goes at the wall clock's pace — its wall time at least its simulated
    time — so a person can watch it; the client sees it from READY on."""
    import threading
    import time

    from tests.test_telemetry import _client

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "exo_rt", "run", "--duration", "0.5",
                             "--out", str(out), "--live", "127.0.0.1:0", "--live-wait", "60"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    url: list[str] = []

    def drain():
        for line in proc.stderr:
            lines.append(line)
            if "waiting up to 60 s for a Foxglove client on ws://" in line and not url:
                url.append(line.split(" on ", 1)[1].split()[0])

    threading.Thread(target=drain, daemon=True).start()
    end = time.monotonic() + 120
    while not url and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.01)
    assert url, "".join(lines)
    connected = time.monotonic()
    got: dict = {}
    _client(url[0], got)
    proc.communicate(timeout=120)
    wall = time.monotonic() - connected
    assert proc.returncode == 0, "".join(lines)
    s = json.loads((out / "summary.json").read_text())
    assert s["duration_s"] <= wall < 30.0, (s["duration_s"], wall)  # paced, and not waited out
    assert any("live: client connected, starting" in line for line in lines)
    t = [m["t"] for m in got["joints"]]
    assert t and t[0] < 0.1 and t[-1] > s["duration_s"] - 0.1  # READY to the end, watched


def test_a_real_time_run_whose_simulation_answered_late_says_so():
    """A real-time run on the simulated drives that ended on their silence (nothing injected)
    gets one line on what happened — the drives' stand-in did not get its CPU time — and what
    holds instead; a lockstep run, real buses, an injected fault or another cause get none."""
    from exo_rt.cli.run import _late_simulation_hint

    stale = {"faults": [{"cause": "stale_feedback"}], "timing": {"compute_us": {"p50": 82.4}}}
    line = _late_simulation_hint(stale, True, True, False)
    assert line.startswith("exo-rt: the simulated drives answered late")
    assert "compute p50 82 µs" in line and "without --realtime" in line
    assert "docs/world.md" in line
    assert _late_simulation_hint(stale, False, True, False) is None  # lockstep
    assert _late_simulation_hint(stale, True, False, False) is None  # real buses
    assert _late_simulation_hint(stale, True, True, True) is None  # --inject
    other = {"faults": [{"cause": "tracking_error"}]}
    assert _late_simulation_hint(other, True, True, False) is None
    assert _late_simulation_hint({"faults": []}, True, True, False) is None
