"""exo_2leg on two buses with two different specs, across processes: the simulated legs served
by ``exo-rt drives --bus udp_multicast:GROUP`` (bus i on its own multicast group), the
controller started with ``--bus left=udp_multicast:A --bus right=udp_multicast:B``, and a
listener on each group: each bus's frames only on its own bus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from exo_rt.bus.port import loopback_bus

# alone on the CPUs (tests/cpu_share.py): udp_multicast buses in real time
pytestmark = pytest.mark.exclusive

ROOT = Path(__file__).resolve().parents[1]
POSE = ("0.2", "0.5", "0.2", "0.5")  # rad, inside the joints' limits (the knees' is 0)


class Listener:
    """Every arbitration id seen on one multicast group, from a thread."""

    def __init__(self, spec: str) -> None:
        # joined on the loopback interface, hearing its own group only (a plain python-can
        # bus would also hear every other group on the port: Linux's IP_MULTICAST_ALL)
        self.bus = loopback_bus(spec.split(":", 1)[1])
        self.ids: set[int] = set()
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.bus.recv(0.05)
            if msg is not None:
                self.ids.add(msg.arbitration_id)
                self.count += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.bus.shutdown()


@pytest.mark.slow
def test_two_legs_on_two_buses_each_frame_on_its_own_bus(tmp_path):
    # the right leg's drives on nodes 3 and 4: its frames are told from the left's by id
    buses = (ROOT / "configs" / "buses" / "exo_2leg.yaml").read_text()
    buses = buses.replace("{joint: right_hip, node: 1}", "{joint: right_hip, node: 3}")
    buses = buses.replace("{joint: right_knee, node: 2}", "{joint: right_knee, node: 4}")
    (tmp_path / "buses.yaml").write_text(buses)
    robot = ROOT / "configs" / "robots" / "exo_2leg.yaml"
    # the VM's allowances for the real-time stand-in (tests/data/exo_leg_vm.yaml)
    (tmp_path / "top.yaml").write_text(
        f"robot: {robot}\nbuses: {tmp_path / 'buses.yaml'}\n"
        f"controller: {ROOT / 'configs' / 'controllers' / 'computed_torque.yaml'}\n"
        "rate_hz: 1000\nstop: {duration: 0.5}\n"
        "safety: {stale_cycles: 50, overrun_streak: 50, board_timeout: 0.1, "
        "tracking_error: 0.3}\n")
    pid = os.getpid()
    group = f"239.{100 + (pid & 0x3F)}.{(pid >> 6) & 0xFF}.{(pid >> 14) & 0xFF or 1}"
    hw = subprocess.Popen([sys.executable, "-m", "exo_rt", "drives", "--config", str(robot),
                           "--buses", str(tmp_path / "buses.yaml"), "--bus",
                           f"udp_multicast:{group}", "--board", "--pose", *POSE],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT)
    listeners = []
    try:
        line = hw.stdout.readline()
        while line.startswith("set-up:"):  # the drives' own scheduling, said first
            line = hw.stdout.readline()
        assert line.startswith("serving"), line + hw.stderr.read()
        served = dict(item.split("=", 1) for item in line.split()[1:])
        assert served["left"] != served["right"]  # two different specs
        listeners = [Listener(served["left"]), Listener(served["right"])]
        out = tmp_path / "run"
        res = subprocess.run(
            [sys.executable, "-m", "exo_rt", "run", "--config", str(tmp_path / "top.yaml"),
             "--bus", f"left={served['left']}", "--bus", f"right={served['right']}",
             "--board", served["board"], "--duration", "0.5", "--out", str(out),
             "--no-rt-setup"],  # the buses' separation is the subject, not the scheduling
            capture_output=True, text=True, timeout=240, cwd=ROOT)
        assert res.returncode in (0, 1), res.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["bus"] == {"left": served["left"], "right": served["right"]}
        assert summary["cycles"] > 500, (summary["faults"], summary["final_state"], res.stdout)
    finally:
        for lst in listeners:
            lst.close()
        hw.terminate()
        hw.communicate(timeout=30)
    left, right = listeners
    assert left.count > 1000 and right.count > 1000
    nodes = {"left": {1, 2}, "right": {3, 4}}
    for name, lst in (("left", left), ("right", right)):
        drive_ids = {a for a in lst.ids if a & 0x780 in (0x180, 0x200, 0x700) and a & 0x7F
                     and a != 0x77F}  # TPDO, RPDO, heartbeats (not the controller's own)
        assert {a & 0x7F for a in drive_ids} == nodes[name], (name, sorted(map(hex, lst.ids)))
