"""The real-time simulated drives (``exo-rt drives --bus udp_multicast:GROUP``) heard by any
python-can client: a plain ``can.Bus(interface="udp_multicast", channel=GROUP)`` — python-can's
defaults, as the ``canopen`` package opens it — talks to them both ways; and the rehearsal of
docs/deploy.md (the drives started by hand, then the controller on their bus and board) ends
SHUTDOWN because the drives take the real-time scheduling they need themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import can
import pytest

# alone on the CPUs (tests/cpu_share.py): udp_multicast buses
pytestmark = pytest.mark.exclusive

canopen = pytest.importorskip("canopen", reason="the canopen package (the test extra) is "
                                                "the plain client here")

ROOT = Path(__file__).resolve().parents[1]
ROBOT = ROOT / "configs" / "robots" / "exo_leg.yaml"
BUSES = ROOT / "configs" / "buses" / "exo_leg.yaml"
VM_CONFIG = ROOT / "tests" / "data" / "exo_leg_vm.yaml"  # room for a VM's stalls (see there)
DEVICE_TYPE = 0x00020192  # 1000h of the shipped EDS (exo_drive.eds): CiA 402, servo drive
NODES = (1, 2)  # the leg's drives (configs/buses/exo_leg.yaml)


def unique_group() -> str:
    """A multicast group no other test or run uses (administratively scoped 239/8)."""
    x = uuid.uuid4().int
    return f"239.{110 + x % 40}.{(x >> 8) % 250 + 1}.{(x >> 16) % 250 + 1}"


class Drives:
    """``exo-rt drives --bus udp_multicast:GROUP [--board]`` started as a person starts it
    (no --parent): its set-up lines and ready line read, stopped with SIGTERM."""

    def __init__(self, group: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exo_rt", "drives", "--config", str(ROBOT), "--buses",
             str(BUSES), "--bus", f"udp_multicast:{group}", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
            cwd=ROOT)
        self.lines: list[str] = []
        for line in self.proc.stdout:  # set-up lines, then the ready line
            self.lines.append(line.strip())
            if line.startswith("serving"):
                break
        assert self.lines and self.lines[-1].startswith("serving"), self.stop()
        self.served = dict(w.split("=", 1) for w in self.lines[-1].split()[1:])

    def run_controller(self, group: str, duration: float, out: Path):
        """``exo-rt run`` on these drives' bus and board (the VM config: room for a host's
        stalls), as docs/deploy.md's rehearsal types it; the finished process."""
        return subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                               str(VM_CONFIG), "--bus", f"udp_multicast:{group}", "--board",
                               self.served["board"], "--duration", str(duration), "--out",
                               str(out)], capture_output=True, text=True, timeout=300,
                              cwd=ROOT)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _out, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        return err


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_a_plain_canopen_master_reads_and_syncs_the_realtime_drives():
    """canopen's Network on python-can's default udp_multicast bus: SDO upload of 1000h from
    each drive (the request must reach the drives, the answer come back), then NMT start and a
    SYNC: each drive's TPDO1 comes back."""
    group = unique_group()
    drives = Drives(group)
    network = canopen.Network(can.Bus(interface="udp_multicast", channel=group))
    try:
        network.connect()
        tpdos: dict[int, bytes] = {}
        got = threading.Event()

        def on_tpdo(cob: int, data: bytearray, _t: float) -> None:
            tpdos[cob] = bytes(data)
            if len(tpdos) == len(NODES):
                got.set()

        for node in NODES:
            network.subscribe(0x180 + node, on_tpdo)
            remote = network.add_node(node, str(ROOT / "exo_rt" / "bus" / "exo_drive.eds"))
            remote.sdo.RESPONSE_TIMEOUT = 2.0  # a loaded 2-CPU machine
            raw = remote.sdo.upload(0x1000, 0)
            assert int.from_bytes(raw, "little") == DEVICE_TYPE, raw.hex()
        network.nmt.state = "OPERATIONAL"  # broadcast: every drive sends its TPDO on SYNC
        time.sleep(0.05)
        for _ in range(20):  # a SYNC now and then until both answered (at most 1 s)
            network.sync.transmit()
            if got.wait(0.05):
                break
        assert sorted(tpdos) == [0x180 + n for n in NODES], tpdos
        assert all(len(d) == 8 for d in tpdos.values()), tpdos  # statusword, position, current
    finally:
        network.disconnect()
        err = drives.stop()
    assert "frames in" in err  # its own figures on exit


def test_a_held_up_simulation_answers_the_newest_of_its_waiting_syncs_only():
    """The drives' process stopped (SIGSTOP: a host's hold, a busy CPU) while three SYNCs
    arrive: when it runs again it applies all three but sends each drive's TPDO for the
    newest only — a real drive would have answered the older ones periods ago, and sent now
    they would reach the controller as two answers to one cycle (``duplicate_answer``)."""
    import signal

    group = unique_group()
    drives = Drives(group, "--fifo", "0")
    bus = can.Bus(interface="udp_multicast", channel=group)
    try:
        bus.send(can.Message(arbitration_id=0x000, data=[0x01, 0], is_extended_id=False))
        time.sleep(0.2)  # NMT start for every node: TPDO1 on every SYNC
        while bus.recv(0.05) is not None:
            pass
        os.kill(drives.proc.pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                bus.send(can.Message(arbitration_id=0x080, data=b"", is_extended_id=False))
            time.sleep(0.05)
        finally:
            os.kill(drives.proc.pid, signal.SIGCONT)
        tpdos: list[int] = []
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            m = bus.recv(0.05)
            if m is not None and 0x180 < m.arbitration_id < 0x200:
                tpdos.append(m.arbitration_id)
    finally:
        bus.shutdown()
        err = drives.stop()
    assert sorted(tpdos) == [0x180 + n for n in NODES], tpdos
    assert f"{2 * len(NODES)} TPDOs superseded" in err, err


@pytest.mark.slow
def test_drives_take_sched_fifo_themselves_and_say_so():
    """Started by hand: SCHED_FIFO 70 (10 below the control thread's default 80), said in a
    set-up line; ``--fifo 0`` leaves the scheduling as started."""
    group = unique_group()
    d = Drives(group)
    try:
        policy = os.sched_getscheduler(d.proc.pid) & 0xFF
        prio = os.sched_getparam(d.proc.pid).sched_priority
    finally:
        d.stop()
    setup = [x for x in d.lines if x.startswith("set-up: ")]
    if "not available" in " ".join(setup):  # no privilege here: one clear line, SCHED_OTHER
        assert len(setup) == 1 and "chrt -f 70" in setup[0] and policy == os.SCHED_OTHER, setup
    else:
        assert setup == ["set-up: SCHED_FIFO: in effect (priority 70, reset on fork)"], setup
        assert (policy, prio) == (os.SCHED_FIFO, 70)
    d0 = Drives(unique_group(), "--fifo", "0")
    try:
        assert os.sched_getscheduler(d0.proc.pid) & 0xFF == os.SCHED_OTHER
    finally:
        d0.stop()
    assert d0.lines[0] == "set-up: scheduling: SCHED_OTHER as started (--fifo 0)", d0.lines


def test_without_the_privilege_the_drives_say_so_in_one_line(monkeypatch):
    from exo_rt.cli.drives import _drives_fifo

    def refuse(*_a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    line = _drives_fifo(None)
    assert line.startswith("set-up: SCHED_FIFO: not available (PermissionError: raise "
                           "LimitRTPRIO or run with CAP_SYS_NICE; see docs/deploy.md)")
    assert "chrt -f 70" in line and "\n" not in line


def test_a_bad_fifo_priority_is_one_line_and_exit_2():
    res = subprocess.run([sys.executable, "-m", "exo_rt", "drives", "--config", str(ROBOT),
                          "--buses", str(BUSES), "--bus", "udp_multicast", "--fifo", "120"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "--fifo 120 is not a SCHED_FIFO priority" in res.stderr


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_the_deploy_rehearsal_by_hand_ends_shutdown(tmp_path, attempt):
    """docs/deploy.md, "Rehearsing the exact control process": the drives and board started by
    hand, then ``exo-rt run --bus udp_multicast:GROUP --board PTY``; with the VM config's room
    for a host's stalls (tests/data/exo_leg_vm.yaml). Three times: it holds, not once by luck."""
    group = unique_group()
    drives = Drives(group, "--board")
    out = tmp_path / "run"
    try:
        # the drives stand in for hardware: real time below the control thread, by themselves
        assert (os.sched_getscheduler(drives.proc.pid) & 0xFF,
                os.sched_getparam(drives.proc.pid).sched_priority) == (os.SCHED_FIFO, 70)
        res = drives.run_controller(group, 2.0, out)
    finally:
        drives.stop()
    s = json.loads((out / "summary.json").read_text())
    assert res.returncode == 0 and s["final_state"] == "SHUTDOWN" and s["faults"] == [], \
        res.stdout + res.stderr
    assert drives.lines[0].startswith("set-up: SCHED_FIFO: in effect (priority 70"), drives.lines
