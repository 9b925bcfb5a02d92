"""Recording, replay, reports (docs/replay.md)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import can
import numpy as np
import pytest

from exo_rt.bus import cia402 as c
from exo_rt.errors import LogError
from exo_rt.record.recorder import read_cycle_log
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.runtime.replay import replay, replay_can_log, replay_plant

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "exo_leg.yaml"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A 3 s recorded run of the default controller."""
    out = tmp_path_factory.mktemp("runs") / "run"
    result = Controller(load_top(CONFIG), "sim").run(3.0, out)
    assert result.summary["final_state"] == "SHUTDOWN"
    return out


@pytest.mark.slow
def test_controller_replay_gives_identical_commands(recorded):
    r = replay(recorded, "controller")
    assert r["max_abs_command_diff_A"] == 0.0 and r["first_diff_cycle"] is None
    assert json.loads((recorded / "replay-controller.json").read_text()) == r


def test_controller_replay_reports_a_changed_gain(recorded, tmp_path):
    changed = tmp_path / "ct.yaml"
    changed.write_text((ROOT / "configs" / "controllers" / "computed_torque.yaml").read_text()
                       .replace("hip: {kp: 400", "hip: {kp: 440"))
    r = replay(recorded, "controller", controller=changed)
    records, _ = read_cycle_log(recorded / "cycles.exolog")
    run = int(np.flatnonzero(records["state"] == 4)[0])  # RUN: the first cycle the law runs
    # the law first acts in RUN (the session; at its very first cycle the error is still zero)
    assert run <= r["first_diff_cycle"] <= run + 5
    assert 0.0 < r["max_abs_command_diff_A"] <= 20.0 and r["cycles_with_differences"] > 1000


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_plant_replay_predicts_the_measurements(recorded):
    r = replay(recorded, "plant")
    for j in r["joints"].values():
        assert j["rms_error_deg"] <= 0.01
    # a deliberately wrong friction: the prediction error grows and the divergence is reported
    top = load_top(CONFIG)
    wrong = dataclasses.replace(top.robot, transmissions=tuple(
        dataclasses.replace(t, drive=dataclasses.replace(t.drive, load_friction=0.0,
                                                         static=0.0, coulomb=0.0))
        for t in top.robot.transmissions))
    bad = replay_plant(recorded, robot=wrong)
    assert max(j["rms_error_deg"] for j in bad["joints"].values()) > 10 * max(
        j["rms_error_deg"] for j in r["joints"].values())
    assert bad["first_diff_cycle"] is not None


@pytest.mark.slow
def test_closed_loop_replay_reruns_the_scenario(recorded):
    r = replay(recorded, "closed-loop")
    assert r["final_state"] == r["recorded_final_state"] == "SHUTDOWN"
    for j in r["joints"].values():
        assert j["max_error_deg"] <= 1e-9  # the lockstep simulation is deterministic


def test_can_log_reads_back_frame_for_frame(recorded):
    frames = list(can.LogReader(str(recorded / "can.blf")))
    records, _ = read_cycle_log(recorded / "cycles.exolog")
    syncs = [m for m in frames if m.arbitration_id == c.SYNC]
    tpdos = [m for m in frames if m.arbitration_id in (0x181, 0x182)]
    # one SYNC per cycle (+ the enabling cycles and the first SYNC before the loop)
    assert len(syncs) >= len(records) and len(tpdos) >= 2 * len(records)
    # the knee TPDOs after the loop's start decode to the cycle log's knee positions
    knee = [c.decode_tpdo1(bytes(m.data))[1] * 2 * np.pi / 65536 / -100 for m in tpdos
            if m.arbitration_id == 0x182]
    tail = np.array(knee[-len(records) + 1 :])
    np.testing.assert_allclose(tail, records["q"][1:, 1], atol=1e-12)


def test_a_bare_can_log_replays(recorded):
    r = replay_can_log(recorded / "can.blf", CONFIG)
    assert r["cycles"] > 2500
    for j in r["joints"].values():
        assert j["rms_error_deg"] <= 0.01


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [".asc", ".log"])
def test_other_can_log_formats(tmp_path, fmt):
    ctl = Controller(load_top(CONFIG), "sim")
    ctl.can_format = fmt
    ctl.run(0.2, tmp_path / "r")
    assert sum(1 for _ in can.LogReader(str(tmp_path / "r" / f"can{fmt}"))) > 1000


@pytest.mark.slow
def test_a_run_folder_given_again_holds_the_new_run_whole(tmp_path):
    """`--out DIR` a second time: every file of the run, run.mcap included, is the new run's
    (run.mcap was once refused as "File exists" while the rest was replaced)."""
    from exo_rt.record.mcap_log import read_mcap

    out = tmp_path / "r"
    for duration in (0.2, 0.4):
        ctl = Controller(load_top(CONFIG), "sim")
        result = ctl.run(duration, out)
        assert not [e for e in ctl.events if e.get("event") == "recording_error"]
    records, _ = read_mcap(out / "run.mcap")
    logged, _ = read_cycle_log(out / "cycles.exolog")
    assert len(records) == len(logged) == result.summary["cycles"]


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
@pytest.mark.slow
@pytest.mark.hazard("H-RECORD-LOST")
def test_kill_minus_nine_loses_at_most_100_ms(tmp_path):
    """The control process killed: the recording process, on its own, drains every record it
    was handed and closes a readable file (the loss is the cycle in flight, not 100 ms)."""
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "exo_rt", "run", "--realtime",
                             "--no-rt-setup", "--duration", "30", "--out", str(out),
                             "--config", str(ROOT / "tests" / "data" / "exo_leg_vm.yaml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    log = out / "cycles.exolog"
    deadline = time.time() + 60
    while time.time() < deadline and (not log.exists() or log.stat().st_size < 200_000):
        time.sleep(0.1)
    time.sleep(1.0)
    killed_at = time.time()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    report = out / "recording.json"
    deadline = time.time() + 20
    while time.time() < deadline and not report.exists():  # the recording process finishes
        time.sleep(0.1)
    assert json.loads(report.read_text())["ended"] == "control process gone"
    records, meta = read_cycle_log(log)
    assert meta["truncated_bytes"] == 0 and np.all(np.diff(records["cycle"]) == 1)
    # every cycle sends its SYNC after committing its record: the CAN log's SYNCs since the
    # loop started (one more: the SYNC before the first cycle) count the cycles that ran
    syncs = sum(1 for m in can.LogReader(str(out / "can.blf"))
                if m.arbitration_id == c.SYNC and not m.is_rx and m.timestamp >= meta["wall_start"])
    assert len(records) > 1000 and syncs - 1 - len(records) <= 1  # at most one cycle lost
    assert killed_at - meta["wall_start"] - len(records) / 1000.0 < 0.5  # it ran till the kill


def test_corrupt_and_truncated_logs(recorded, tmp_path):
    raw = (recorded / "cycles.exolog").read_bytes()
    cut = tmp_path / "cut.exolog"
    cut.write_bytes(raw[: len(raw) - 100])  # a record cut in half: dropped, the rest readable
    records, meta = read_cycle_log(cut)
    assert meta["truncated_bytes"] > 0 and len(records) > 1000
    bad = tmp_path / "bad.exolog"
    bad.write_bytes(b"NOTALOG!" + raw[8:])
    with pytest.raises(LogError, match="byte offset 0"):
        read_cycle_log(bad)
    broken = tmp_path / "broken.exolog"
    broken.write_bytes(raw[:20] + b"#" * 10 + raw[30:])
    with pytest.raises(LogError, match="byte offset 16"):
        read_cycle_log(broken)
    res = subprocess.run([sys.executable, "-m", "exo_rt", "replay", str(tmp_path),
                          "--mode", "plant"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no cycle log" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_report_and_export(tmp_path):
    out = tmp_path / "run"
    Controller(load_top(CONFIG), "sim").run(10.0, out)
    res = subprocess.run([sys.executable, "-m", "exo_rt", "report", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    # a lockstep run: no timing.png (its compute times are the simulation's: docs/replay.md)
    assert not (out / "timing.png").exists() and (out / "report.html").is_file()
    for name in ("tracking.png", "tracking_error.png", "currents.png"):
        png = (out / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", png[16:24])
        assert 400 <= width <= 2000 and 200 <= height <= 2000 and len(png) > 10_000
    assert "final state SHUTDOWN" in (out / "report.txt").read_text()
    res = subprocess.run([sys.executable, "-m", "exo_rt", "export", str(out), "--csv"],
                         capture_output=True, text=True, timeout=120)
    lines = (out / "cycles.csv").read_text().splitlines()
    assert res.returncode == 0 and lines[0].startswith("t,cycle,state") and len(lines) > 10000


def test_a_full_disk_is_an_event_not_a_crash(tmp_path):
    """The recording process meets a full disk: it notes the error and goes on; the rings and
    the control side never see it."""
    from exo_rt.record.recorder import cycle_columns, row_width, write_header
    from exo_rt.record.rings import FrameRing, RecordRing
    from exo_rt.record.writer import Writer

    cols = cycle_columns(2)
    width = row_width(cols)
    write_header(tmp_path / "cycles.exolog", cols, {"joint_names": ["hip", "knee"]})
    rows, frames = RecordRing(64, width), FrameRing(64)
    writer = Writer(rows.name, frames.name, tmp_path, ".blf", ["leg"], os.getppid(), False)
    writer.log.close()
    writer.log = open("/dev/full", "ab")  # noqa: SIM115 - every write fails with ENOSPC
    for k in range(500):  # far more than the ring holds: the producer never waits
        row = np.zeros(width)
        row[1] = k
        rows.put(row)
        if k % 50 == 0:
            writer.drain()
    rows.close()
    frames.close()
    writer.finish("closed")
    report = json.loads((tmp_path / "recording.json").read_text())
    # the first write error stops the recording whole (one line, one event): no record is
    # counted written, none is lost by the producer (the rings are still drained)
    assert report["stopped"]["errno"] == "ENOSPC" and "space" in report["stopped"]["error"]
    assert report["records"] == 0 and report["records_lost"] == 0
    rows.release()
    frames.release()


@pytest.mark.slow
@pytest.mark.hazard("H-RECORD-LOST")
def test_the_run_goes_on_when_the_recording_process_dies(tmp_path):
    """The recording process killed mid-run: the loop never waits for it, the run ends
    SHUTDOWN (not SAFE), and the summary says when recording stopped."""
    import threading

    ctl = Controller(load_top(CONFIG), "sim")
    result = {}
    runner = threading.Thread(target=lambda: result.update(r=ctl.run(6.0, tmp_path / "r")))
    runner.start()
    deadline = time.time() + 120
    while time.time() < deadline and (ctl.recording is None or ctl.cycles < 2000):
        time.sleep(0.01)
    os.kill(ctl.recording.process.pid, signal.SIGKILL)
    killed_at_cycle = ctl.cycles
    runner.join(180)
    s = result["r"].summary
    assert s["final_state"] == "SHUTDOWN" and s["faults"] == [] and s["cycles"] > 8000
    stopped = s["recording"]["stopped_at_s"]
    assert stopped is not None and killed_at_cycle / 1000 <= stopped <= killed_at_cycle / 1000 + 1.1
    events = (tmp_path / "r" / "events.jsonl").read_text()
    assert "recording_stopped" in events


@pytest.mark.slow
def test_a_recording_process_started_ahead_is_adopted_and_an_unused_one_ends(tmp_path):
    """`exo-rt run` starts its recording process ahead (it imports while the controller
    starts): the run's Recording adopts that very process and records everything; a process
    started ahead and never used ends with the controller's process."""
    from exo_rt import processes

    processes.request("exo_rt.record.writer")
    processes.start_requested()
    spare = processes._spares["exo_rt.record.writer"]
    ctl = Controller(load_top(CONFIG), "sim")
    result = ctl.run(0.2, tmp_path / "r")
    assert ctl.recording.process.proc is spare and not processes._spares
    report = json.loads((tmp_path / "r" / "recording.json").read_text())
    assert report["records"] == result.summary["cycles"] and report["records_lost"] == 0
    assert report["ended"] == "closed" and not report["errors"]
    probe = ("from exo_rt import processes; processes.request('exo_rt.record.writer'); "
             "processes.start_requested(); print(processes._spares['exo_rt.record.writer'].pid)")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    pid = int(res.stdout)
    deadline = time.time() + 10
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
