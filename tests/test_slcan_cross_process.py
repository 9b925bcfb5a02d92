"""Cross-process rehearsal: the controller's python-can ``slcan`` bus talks to ``exo-rt drives``
(another process) on a pseudo-terminal, through bring-up and 1000 cycles."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import can
import numpy as np
import pytest

from exo_rt.bus import cia402 as c
from exo_rt.bus.config import load_buses
from exo_rt.bus.drives import Drives
from exo_rt.model import load_mechanism
from exo_rt.sim.slcan_server import decode_command, encode_frame

ROOT = Path(__file__).resolve().parents[1]


def test_slcan_line_codec():
    msg = can.Message(arbitration_id=0x181, data=bytes.fromhex("3702feffffffe803"),
                      is_extended_id=False)
    assert encode_frame(msg) == b"t1818" + b"3702FEFFFFFFE803" + b"\r"
    back = decode_command("t1818" + "3702FEFFFFFFE803")
    assert back.arbitration_id == 0x181 and bytes(back.data) == bytes(msg.data)
    assert decode_command("t12") is None and decode_command("t1239") is None
    assert decode_command("O") == "O" and decode_command("?") is None


@pytest.mark.slow
def test_controller_and_drives_in_two_processes():
    robot_file = ROOT / "configs" / "robots" / "exo_leg.yaml"
    bus_file = ROOT / "configs" / "buses" / "exo_leg.yaml"
    server = subprocess.Popen(
        [sys.executable, "-m", "exo_rt", "drives", "--config", str(robot_file), "--buses",
         str(bus_file), "--pose", "0.2", "0.6"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert line.startswith("serving bus leg on "), line
        pty = line.rsplit(" ", 1)[1].strip()
        robot = load_mechanism(robot_file)
        (config,) = load_buses(bus_file, robot)
        bus = can.Bus(interface="slcan", channel=pty, sleep_after_open=0, bitrate=1_000_000)
        drives = Drives(bus, config, robot, sdo_timeout=2.0)
        drives.configure()
        drives.enable(max_cycles=200)
        missing = 0
        t0 = time.monotonic()
        for _ in range(1000):
            drives.cycle(np.zeros(2), deadline=time.monotonic() + 0.05)
            missing += int((drives.flags & 1).any())
        elapsed = time.monotonic() - t0
        assert missing == 0
        assert all(c.state_of(int(sw)) == c.OPERATION_ENABLED for sw in drives.statusword)
        # the joints hold at their pose (the drives hold by friction at zero current); the
        # motor encoders see the pose less the flexsplines' twist under gravity
        np.testing.assert_allclose(drives.position, [0.2, 0.6], atol=2e-3)
        assert elapsed < 30
        bus.shutdown()
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
def test_bench_procedures_over_slcan(tmp_path):
    """The bench procedures on the emulated drives in another process (``exo-rt drives``),
    through python-can's slcan interface: the same code and figures as in process —
    bring-up, latency, the chirp's bandwidth, the stiffness through the rig's fixture node
    and a step (the friction sweep, the longest, is tests/test_hil.py's in process)."""
    from exo_rt.hil.bench import Bench
    from exo_rt.hil.fixture import CanFixture
    from exo_rt.hil.procedures import run_procedure
    from exo_rt.runtime.config import load_top

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    server = subprocess.Popen(
        [sys.executable, "-m", "exo_rt", "drives", "--config", str(top.robot_path), "--buses",
         str(ROOT / "configs" / "buses" / "exo_leg.yaml"), "--pose", "0.3", "0.6"],
        stdout=subprocess.PIPE, text=True)
    try:
        pty = server.stdout.readline().rsplit(" ", 1)[1].strip()
        bus = can.Bus(interface="slcan", channel=pty, sleep_after_open=0, bitrate=1_000_000)
        drives = Drives(bus, top.buses[0], top.robot, sdo_timeout=2.0)
        bench = Bench(top, [drives], fixture=CanFixture([drives]), reply_timeout=0.05)
        r = run_procedure("bringup", bench, tmp_path)
        assert r["buses"]["leg"]["states_enabled"] == [c.OPERATION_ENABLED] * 2
        r = run_procedure("latency", bench, tmp_path, "hip")
        assert not r.get("aborted"), r.get("reason")
        assert r["joints"]["hip"]["current_cycles"] == 2
        r = run_procedure("chirp", bench, tmp_path, "hip")
        assert r["joints"]["hip"]["chirp"]["bandwidth_hz"] == pytest.approx(3.03, rel=0.10)
        # (friction: the same code as in process, tests/test_hil.py — 68 s over the pty, the
        # transport's figures are the chirp's and the fixture's)
        # the rig's fixture node (clamp and load cell), emulated with the served drives
        r = run_procedure("stiffness", bench, tmp_path, "knee")
        assert "knee" in r["joints"], r
        st = r["joints"]["knee"]["fit"]
        for key, value in (("k1", 1.6e4), ("k2", 2.5e4), ("k3", 2.9e4), ("hysteresis", 0.4)):
            assert st[key] == pytest.approx(value, rel=0.10), key
        r = run_procedure("step", bench, tmp_path, "knee")
        assert not r.get("aborted") and r["joints"]["knee"]["step"]["rise_time_s"] < 0.2
        drives.cycle(np.zeros(2), deadline=time.monotonic() + 0.05)
        assert all(c.state_of(int(sw)) == c.SWITCH_ON_DISABLED for sw in drives.statusword)
        bus.shutdown()
    finally:
        server.terminate()
        server.wait(timeout=10)
