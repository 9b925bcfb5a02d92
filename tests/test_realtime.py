"""Real time across processes: the frame ports, the recording rings and process, the
scheduling of helpers, and `exo-rt run --realtime` with the simulation in its own process."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import can
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exo_rt.bus.port import (
    CAN_ERR_FLAG,
    SocketcanPort,
    UdpMulticastPort,
    loopback_bus,
    open_port,
)
from exo_rt.record.rings import LOST, FrameRing, RecordRing

# alone on the CPUs (tests/cpu_share.py): stale cycles and overruns are wall-clock figures
pytestmark = pytest.mark.exclusive

ROOT = Path(__file__).resolve().parents[1]
VM_CONFIG = ROOT / "tests" / "data" / "exo_leg_vm.yaml"  # room for a VM's stalls (see there)

try:
    import msgpack  # noqa: F401 - python-can's udp_multicast needs it

    _bus = can.Bus(interface="udp_multicast", channel="239.74.250.1")
    _bus.shutdown()
    UDP = True
except (ImportError, OSError, can.CanError):
    UDP = False
needs_udp = pytest.mark.skipif(not UDP, reason="no multicast on the loopback here")


def _fifo_allowed() -> bool:
    try:
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        os.sched_setscheduler(0, before[0], before[1])
        return True
    except (OSError, AttributeError):
        return False


needs_fifo = pytest.mark.skipif(not _fifo_allowed(),
                                reason="SCHED_FIFO not permitted here (no CAP_SYS_NICE)")


# ---------------------------------------------------------------- frame ports
@needs_udp
def test_udp_port_speaks_python_cans_udp_multicast_both_ways():
    group = "239.74.250.2"
    ours = open_port(can.Bus(interface="udp_multicast", channel=group))
    theirs = loopback_bus(group)  # python-can's own bus, joined where the port talks
    try:
        assert isinstance(ours, UdpMulticastPort)
        ours.send(0x201, b"\x0f\x00\x10\x27")
        msg = theirs.recv(1.0)
        assert msg.arbitration_id == 0x201 and bytes(msg.data) == b"\x0f\x00\x10\x27"
        theirs.send(can.Message(arbitration_id=0x181, data=bytes(range(8)), is_extended_id=False))
        theirs.send(can.Message(arbitration_id=0x1ABCDE, data=b"\x01", is_extended_id=True))
        got = []
        end = time.monotonic() + 1.0
        while len(got) < 2 and time.monotonic() < end:
            f = ours.recv()
            if f is not None:
                got.append((f.arbitration_id, f.data, f.is_extended_id))
        # our own 0x201 came back through the group and was skipped
        assert got == [(0x181, bytes(range(8)), False), (0x1ABCDE, b"\x01", True)]
        sent = time.time()
        theirs.send(can.Message(arbitration_id=0x182, data=b"\x02", is_extended_id=False))
        time.sleep(0.05)  # read 50 ms late: the frame still says when it arrived
        f = ours.recv()
        assert f.arbitration_id == 0x182 and f.timestamp - sent < 0.02
    finally:
        ours.bus.shutdown()
        theirs.shutdown()


@needs_udp
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_udp_port_decoder_never_raises(raw):
    port = _UDP_PORT
    frame = port.decode(raw, 0.0)
    assert frame is None or 0 <= frame.arbitration_id < 1 << 29


_UDP_PORT = open_port(can.Bus(interface="udp_multicast", channel="239.74.250.3")) if UDP else None


def test_socketcan_port_writes_and_reads_the_kernels_can_frame():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # stands in for AF_CAN
    port = SocketcanPort(None, sock=a)
    before = time.time()
    port.send(0x201, b"\x0f\x00\x10\x27")
    can_id, dlc, data = struct.unpack("=IB3x8s", b.recv(16))
    assert (can_id, dlc, data[:dlc]) == (0x201, 4, b"\x0f\x00\x10\x27")
    b.send(struct.pack("=IB3x8s", 0x182, 8, bytes(range(8))))
    f = port.recv()
    assert (f.arbitration_id, f.data, f.is_error_frame) == (0x182, bytes(range(8)), False)
    assert before <= f.timestamp <= time.time()  # when it arrived
    b.send(struct.pack("=IB3x8s", CAN_ERR_FLAG | 0x40, 8, bytes(8)))  # bus-off error frame
    f = port.recv()
    assert f.is_error_frame and f.arbitration_id == 0x40
    assert port.recv() is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_socketcan_port_decoder_never_raises(raw):
    a, _b = _PAIR
    frame = SocketcanPort(None, sock=a).decode(raw, 0.0)
    assert frame is None or len(frame.data) <= 8


_PAIR = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


# ---------------------------------------------------------------- recording rings
def test_record_ring_hands_rows_across_and_never_waits_when_full():
    ring = RecordRing(8, 3)
    other = RecordRing(name=ring.name)  # the consumer's view, as in the recording process
    try:
        for k in range(5):
            ring.put(np.array([k, 2.0 * k, -k]))
        rows = other.take()
        assert rows[:, 0].tolist() == [0, 1, 2, 3, 4]
        for k in range(5, 20):  # 15 more into 8 slots: 8 published, 7 counted lost
            ring.put(np.array([k, 0.0, 0.0]))
        assert other.take()[:, 0].tolist() == list(range(5, 13))
        assert int(ring.header[LOST]) == 7
    finally:
        other.release()
        ring.release()


def test_frame_ring_carries_frames_with_direction_and_flags():
    ring = FrameRing(16)
    other = FrameRing(name=ring.name)
    try:
        ring.put(1.5, 0x201, b"\x01\x02", False)
        ring.put(1.6, 0x1ABCDE, b"", True, extended=True)
        (t0, a0, f0, n0, b0, d0), (t1, a1, f1, n1, b1, d1) = other.take()
        assert (t0, a0, f0, n0, d0[:n0]) == (1.5, 0x201, 0, 2, b"\x01\x02")
        assert (t1, a1, f1 & 3, n1) == (1.6, 0x1ABCDE, 3, 0)
    finally:
        other.release()
        ring.release()


# ---------------------------------------------------------------- scheduling
@needs_fifo
def test_a_thread_started_after_the_realtime_setup_is_not_fifo():
    code = textwrap.dedent("""
        import os, threading, subprocess, sys, json
        from exo_rt.runtime.loop import realtime_setup, realtime_teardown, last_cpu
        setup = realtime_setup(10, last_cpu(), lock_memory=False)
        out = {"main": os.sched_getscheduler(0)}
        def probe():
            out["thread"] = os.sched_getscheduler(0)
        t = threading.Thread(target=probe); t.start(); t.join()
        child = subprocess.run([sys.executable, "-c",
                                "import os; print(os.sched_getscheduler(0))"],
                               capture_output=True, text=True)
        out["process"] = int(child.stdout)
        realtime_teardown()
        print(json.dumps(out))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["main"] == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
    assert out["thread"] == os.SCHED_OTHER and out["process"] == os.SCHED_OTHER


def test_cpu_wake_latency_is_held_while_running_and_released_after():
    """With ``cpu_latency_us`` the set-up holds a PM QoS request (every CPU wakes within it)
    for as long as the loop runs; the teardown withdraws it. Reported either way."""
    code = textwrap.dedent("""
        import json, struct
        from exo_rt.runtime.loop import CPU_LATENCY_DEVICE, realtime_setup, realtime_teardown
        def now():
            try:
                with open(CPU_LATENCY_DEVICE, "rb") as f:
                    return struct.unpack("i", f.read(4))[0]
            except OSError:
                return None
        before = now()
        setup = realtime_setup(10, None, lock_memory=False, freeze_gc=False, cpu_latency_us=7)
        held = now()
        realtime_teardown()
        print(json.dumps({"item": setup.items["CPU wake-up latency"], "before": before,
                          "held": held, "after": now()}))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if out["item"].startswith("not available ("):  # not root: said so, and nothing held
        assert out["held"] == out["before"]
        return
    assert out["item"] == "in effect (every CPU wakes within 7 µs while running)"
    assert out["held"] == min(7, out["before"])
    assert out["after"] == out["before"]



def test_the_setup_says_whether_this_is_a_virtual_machine(tmp_path):
    """The set-up report names a virtual machine, from the x86 flag or the kernel's
    /sys/hypervisor/type, and says what it means for real time; bare metal: none seen."""
    from exo_rt.runtime.loop import machine_kind

    cpuinfo, hyp = tmp_path / "cpuinfo", tmp_path / "type"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor lahf_lm\n")
    said = machine_kind(str(cpuinfo), str(hyp))
    assert said.startswith("a virtual machine (the CPU's hypervisor flag)")
    assert "tools/bench_machine.py" in said
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu vme sse2 lahf_lm\n")
    assert machine_kind(str(cpuinfo), str(hyp)) == "no hypervisor seen"
    hyp.write_text("xen\n")
    assert machine_kind(str(cpuinfo), str(hyp)).startswith(
        "a virtual machine (/sys/hypervisor/type: xen)")
    assert machine_kind(str(tmp_path / "none"), str(tmp_path / "none")) == "no hypervisor seen"


# ---------------------------------------------------------------- whole runs
def _hog(cpu: int) -> subprocess.Popen:
    """A CPU hog pinned to ``cpu``."""
    return subprocess.Popen([sys.executable, "-c",
                             f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])


@needs_udp
@pytest.mark.slow
def test_realtime_run_with_the_simulation_in_its_own_process_and_a_cpu_hog(tmp_path):
    """10 s real time: simulation and recording each in their own process, a CPU hog on a
    helper CPU. The run ends SHUTDOWN with no fault, the recording process is reported
    SCHED_OTHER (the simulation, standing in for the drives, SCHED_FIFO below the control
    thread), and the first 100 cycles after READY are each within the period — all but two a
    VM's stalls may hit, at most one of them in the first 10. The run goes again, up to
    :data:`STALL_RUNS` runs in all, where a stall of the machine hit it: two of those cycles
    over the period (seen in 2 of about 6 whole-suite runs, never alone; on a slow day, 7 and
    then 2 in CI), or a SAFE after cycles overran by the dozen in its last second (seen in CI:
    the drives' SYNC watchdog tripped, drive_fault at 11.8 s, 36 overruns in that second
    against none in the 9 s before; on 2026-12-02 two such runs in a row in both of pytest's
    tries — drive_fault at 6.57 s, 55 overruns in the last second, the controller's own
    compute p99 786 µs against 151 — and then 4 of 4 alone, clean) — a start-up transient or
    a fault of the code fails every run. Each stalled run is named with the time the VM's host
    took from its CPUs meanwhile (/proc/stat's steal)."""
    for attempt in range(STALL_RUNS):
        run = _run_with_a_hog(tmp_path / f"run{attempt}")
        stalled = run.stalled_into_safe or np.sum(run.first >= run.period) > 1
        if not stalled or attempt == STALL_RUNS - 1:
            break
        warnings.warn(f"{np.sum(run.first >= run.period)} of the first 100 cycles over the "
                      f"period, ended {run.summary['final_state']} (a VM's stall; the host "
                      f"took {run.steal_ms:.0f} ms of the CPUs meanwhile): the run goes again",
                      stacklevel=1)
    run.check()


STALL_RUNS = 3  # runs of the test above at most, each after one a stall of the machine hit


def _steal_ms() -> float:
    """ms the VM's host has taken from this machine's CPUs since boot (/proc/stat's steal
    column, summed over the CPUs; NaN where the kernel does not say)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return float(fields[8]) * 1e3 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return math.nan


@dataclasses.dataclass
class _HogRun:
    """A run of the test above: its process, summary and cycle records."""

    out: Path
    res: subprocess.CompletedProcess
    summary: dict
    records: np.ndarray | None
    period: float  # µs
    steal_ms: float  # ms the VM's host took from the CPUs during the run (NaN: not said)

    @property
    def first(self) -> np.ndarray:
        """Each of the first 100 cycles' wake latency + compute (µs): a record holds its
        cycle's wake latency and the previous cycle's compute time."""
        return self.records["wake_us"][:100] + self.records["compute_us"][1:101]

    @property
    def stalled_into_safe(self) -> bool:
        """Ended SAFE after at least 10 overruns in its last second of cycles (a machine that
        held the control thread for several periods: the drives' watchdogs trip)."""
        if self.summary["final_state"] != "SAFE" or self.records is None:
            return False
        overruns = self.records["overruns"]
        return int(overruns[-1] - overruns[max(len(overruns) - 1000, 0)]) >= 10

    def check(self) -> None:
        s, res = self.summary, self.res
        assert res.returncode == 0 and s["final_state"] == "SHUTDOWN" and s["faults"] == [], \
            f"(the host took {self.steal_ms:.0f} ms of the CPUs in the run)\n" + res.stdout \
            + res.stderr
        helpers = {line.split(" process")[0]: line for line in s["setup"] if " process " in line}
        assert set(helpers) == {"simulation", "recording"}, s["setup"]
        assert "SCHED_OTHER" in helpers["recording"]  # a helper: never real-time
        # the simulated drives stand in for hardware: real time below the control thread
        assert "SCHED_FIFO 70" in helpers["simulation"]
        assert any(line.startswith("SCHED_FIFO: in effect (priority 80") for line in s["setup"])
        assert len(self.records) == s["cycles"]
        # no start-up transient: a VM's own stalls may still hit a cycle or two, anywhere
        # (tools/bench_machine.py; CI on 2026-12-02, the VM at half its speed: 7 cycles over
        # the period in a run, 2 in the run again, in both of pytest's tries; here 2, 1, 0 at
        # cycles 22, 83, 92) — a transient of the code is the first cycles, in every run
        first = self.first
        assert np.sum(first >= self.period) <= 2 and np.median(first) < self.period / 3, first
        assert np.sum(first[:10] >= self.period) <= 1, first


def _run_with_a_hog(out: Path) -> _HogRun:
    """The run of the test above into ``out`` (checked by :meth:`_HogRun.check`)."""
    from exo_rt.record.recorder import read_cycle_log

    cpus = sorted(os.sched_getaffinity(0))
    hog = _hog(cpus[0]) if len(cpus) > 1 else None
    steal = _steal_ms()
    try:
        res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--realtime", "--duration",
                              "10", "--config", str(VM_CONFIG), "--out", str(out)],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    summary = json.loads((out / "summary.json").read_text())
    records, meta = (read_cycle_log(out / "cycles.exolog")
                     if (out / "cycles.exolog").exists() else (None, {"rate_hz": 1000.0}))
    return _HogRun(out, res, summary, records, 1e6 / meta["rate_hz"], _steal_ms() - steal)
