"""Bench procedures on the simulated bus: bring-up and its clear failures, latency, abort."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt.bus import cia402 as c
from exo_rt.errors import BusError
from exo_rt.hil.procedures import Bench, bringup, latency, run_procedure
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    ctl = Controller(top, "sim", board=None, start_pose=[0.0, 0.4])
    return Bench(top, ctl.drives, ctl.world, ctl.dt)


def test_bringup_reports_nodes_heartbeats_and_load():
    r = bringup(_bench())
    (leg,) = r["buses"].values()
    assert leg["states_enabled"] == [c.OPERATION_ENABLED] * 2
    assert all(abs(p - 100.0) < 1.0 for p in leg["heartbeat_ms"].values())
    assert 0.45 <= leg["bus_load"] <= 0.6  # 52 % computed from the frame sizes
    assert leg["missing_frames"] == 0


def test_bringup_fails_clearly():
    b = _bench()  # a missing node
    b.world.endpoints["leg"].drives.pop()
    b.drives[0].sdo_timeout = 0.05
    with pytest.raises(BusError, match="drive 2 on bus 'leg' does not answer SDO"):
        bringup(b)
    b = _bench()  # a wrong mapping
    b.world.endpoints["leg"].drives[0][0].objects[(0x1A00, 3)][0] = 0x30D10120
    with pytest.raises(BusError, match="drive 1 on bus 'leg' has another PDO mapping"):
        bringup(b)
    b = _bench()  # a faulted drive
    b.world.inject("fault", "leg", 2)
    with pytest.raises(BusError, match="did not reach operation enabled.*FAULT"):
        bringup(b)


def test_latency_is_one_cycle_and_the_joints_move():
    r = latency(_bench())
    for j in r["joints"].values():
        assert j["current_cycles"] == 1  # RPDO latched at the SYNC, TPDO after that period


def test_abort_leaves_the_drives_disabled_inside_the_limits(tmp_path):
    b = _bench()
    calls = {"n": 0}
    cycle = b.cycle

    def interrupted(currents):
        calls["n"] += 1
        if calls["n"] == 30:
            raise KeyboardInterrupt
        cycle(currents)

    b.cycle = interrupted
    report = run_procedure("latency", b, tmp_path / "r")
    assert report["aborted"]
    for d in b.drives:
        d.cycle(np.zeros(d.n))
        assert all(c.state_of(int(sw)) == c.SWITCH_ON_DISABLED for sw in d.statusword)
    robot = b.top.robot
    q = b.world.plant.joint_positions
    assert np.all(q >= robot.lower) and np.all(q <= robot.upper)
    assert json.loads((tmp_path / "r" / "bench-latency.json").read_text())["aborted"]


def test_bench_command(tmp_path):
    res = subprocess.run([sys.executable, "-m", "exo_rt", "bench-test", "bringup", "--out",
                          str(tmp_path / "b")], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "no joint moves" in res.stdout and (tmp_path / "b" / "bench-bringup.json").exists()
