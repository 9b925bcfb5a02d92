"""The real-time cycle in one compiled call (exo_rt.runtime.cycle_call) against the same cycle
call by call (Controller._cycle, whose parts have their own references): two controllers
side by side, each on its own udp_multicast bus and its own board line (a pty), fed the same
drive answers and board frames cycle after cycle — READY, ALIGN, RUN, an EMCY that faults a
drive, SAFE's ramp and the drives disabled — must put the same frames on the wire and the
same numbers in the cycle's arrays and in the recording's rings, and take the board's rare
frames and the EMCY in Python as the call-by-call cycle does."""

from __future__ import annotations

import os
import struct
import time
import tty
import uuid

import can
import numpy as np
import pytest

from exo_rt.bus.drives import Drives
from exo_rt.bus.port import loopback_bus
from exo_rt.record.recorder import cycle_columns
from exo_rt.record.rings import FrameRing, RecordRing
from exo_rt.runtime import cycle as cy
from exo_rt.runtime import cycle_call
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.runtime.injections import InjectionPlan
from exo_rt.runtime.loop import Scheduler
from exo_rt.runtime.states import READY, RUN
from firmware_bridge import protocol as p
from firmware_bridge.link import BoardLink

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pty (POSIX)")

CONFIG = "tests/data/exo_leg_vm.yaml"
RUN_AT, EMCY_AT, CYCLES = 40, 70, 140  # ALIGN from READY_CYCLES (20); SAFE ramps out after
# the values that are the loop's clock (they differ between two runs of the same cycle)
CLOCK_S = (cy.S_WAKE_US, cy.S_COMPUTE_US, cy.S_SAMPLE_T)
CLOCK_V = (cy.V_T_PREV,)


class Rings:
    """The recording's two rings, as the control process holds them (no writer process: the
    test reads them)."""

    def __init__(self, width: int) -> None:
        self.records = RecordRing(CYCLES + 8, width)
        self.frames = FrameRing(8 * CYCLES)

    def check(self, t: float) -> bool:
        return True

    def release(self) -> None:
        self.records.release()
        self.frames.release()


class Side:
    """A controller wired to a udp_multicast bus of its own (compiled I/O) and a board on a
    pty; the test plays the drives (``peer``) and the board (``line``)."""

    def __init__(self, one_call: bool) -> None:
        top = load_top(CONFIG)
        self.ctl = ctl = Controller(top, "sim", board=None)  # its arrays, laws and states
        group = f"239.76.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
        self.drives = Drives(can.Bus(interface="udp_multicast", channel=group), top.buses[0],
                             top.robot, period=ctl.dt)
        self.peer = loopback_bus(group)
        self.line, pc = os.openpty()
        tty.setraw(self.line)
        ctl.close_buses()
        ctl.drives = [self.drives]
        ctl._wire_buses()
        ctl.realtime = True
        ctl.board = BoardLink(f"fd:{pc}", link_timeout=0.5, heartbeat_hz=250.0)
        ctl.plan = InjectionPlan((), ctl.dt, top.safety.overrun_streak, top.robot.joint_names)
        ctl.sched = Scheduler(ctl.dt, capacity=CYCLES + 4)
        ctl.duration, ctl._next_check, ctl.k0 = 10.0, 10**9, {}
        ctl.recording = self.rings = Rings(ctl.width)
        self.drives.port.tap = self.rings.frames
        self.drives.controlword[:] = 0x000F  # OPERATION ENABLED (as enable() leaves it)
        self.cycle = ctl._one_call() if one_call else ctl._cycle
        assert self.cycle is not None
        ctl._go(READY, 0)
        self.drives.send_commands(ctl.cur)  # the first SYNC (run() does: _write)
        ctl._t_sync = ctl._io[cycle_call.IO_T_SYNC] = time.monotonic()
        self.wire()

    def wire(self) -> list[tuple[int, bytes]]:
        """The frames the controller sent since the last look."""
        out = []
        while (m := self.peer.recv(0.05 if not out else 0.002)) is not None:
            out.append((m.arbitration_id, bytes(m.data)))
        return out

    def close(self) -> None:
        ctl = self.ctl
        ctl._call = ctl._step = ctl._step_rows = None
        self.drives.port.tap = None
        self.drives._gather_args = self.drives._command_args = None
        ctl.board.close()
        os.close(self.line)
        self.drives.bus.shutdown()
        self.peer.shutdown()
        ctl.recording = None
        self.rings.release()


def _answers(d: Drives, k: int, counts: np.ndarray) -> list[tuple[int, bytes]]:
    """The drives' TPDOs for cycle k (joints still at ``counts``: the velocity estimate needs
    no clock, and the gait's start is near enough for the tracking check), their
    heartbeats, and an EMCY (2310h, current) from the hip at EMCY_AT."""
    out = [(0x180 + int(node), struct.pack("<Hih", 0x0237, int(counts[j]),
                                          (37 * k + 11 * j) % 400 - 200))
           for j, node in enumerate(d.nodes)]
    if k % 20 == 0:  # their heartbeats (operational), every 100 ms of drive time
        out += [(0x700 + int(node), bytes([0x05])) for node in d.nodes]
    if k == EMCY_AT:
        out.append((0x080 + int(d.nodes[0]), bytes([0x10, 0x23, 1, 0, 0, 0, 0, 0])))
    return out


def _board_frames(k: int) -> bytes:
    """A status every cycle; a foot-sole pressure across the contact threshold (a heel strike)
    and an error report now and then (the board's frames Python takes)."""
    out = p.encode(p.Status(False, True, False, 24000), k & 0xFF)
    if k % 25 == 5:
        out += p.encode(p.Pressure((0, 0)), k & 0xFF) + p.encode(p.Pressure((300, 300)), k & 0xFF)
    if k == 33:
        out += p.encode(p.Error(7), k & 0xFF)
    return out


def test_the_cycle_in_one_call_equals_the_cycle_call_by_call():
    sides = [Side(one_call=False), Side(one_call=True)]
    try:
        scale = sides[0].drives._scale[:, 0]
        counts = np.round(sides[0].ctl.q_start / scale)  # the joints, still, at the gait's start
        for side in sides:
            side.ctl.q_prev[:] = counts * scale  # (as take_tpdos computes them)
        for k in range(CYCLES):
            for side in sides:
                for arb, data in _answers(side.drives, k, counts):
                    side.peer.send(can.Message(arbitration_id=arb, data=data,
                                               is_extended_id=False))
                os.write(side.line, _board_frames(k))
            time.sleep(0.003)  # every answer and byte arrived
            went_on = [side.cycle(k) for side in sides]
            wires = [side.wire() for side in sides]
            a, b = (side.ctl for side in sides)
            assert went_on[0] == went_on[1], k
            if not went_on[0]:  # SAFE has ramped out and disabled the drives: the run ends
                break
            assert wires[0] == wires[1], (k, wires)
            assert len(wires[0]) >= 3  # RPDOs + SYNC (+ the heartbeat every 10th)
            s_a, s_b = a.a.s.copy(), b.a.s.copy()
            s_a[list(CLOCK_S)] = s_b[list(CLOCK_S)] = 0.0
            assert np.array_equal(s_a, s_b), (k, np.flatnonzero(s_a != s_b))
            v_a, v_b = np.delete(a.a.v, CLOCK_V, axis=0), np.delete(b.a.v, CLOCK_V, axis=0)
            assert np.array_equal(v_a, v_b), (k, np.argwhere(v_a != v_b))
            assert np.array_equal(a.flags, b.flags) and np.array_equal(a.a.missing, b.a.missing)
            assert a.state == b.state, k
            for side in sides:  # what _advance does at the end of ALIGN (here sooner)
                if k == RUN_AT - 1:
                    side.ctl._go(RUN, k + 1)
        a, b = (side.ctl for side in sides)
        assert not went_on[0] and EMCY_AT < k < CYCLES - 1, (k, a.events)  # ended in SAFE
        assert a.events == b.events
        assert [e["state"] for e in a.events if e["event"] == "state"] == [
            "READY", "ALIGN", "RUN", "SAFE"]
        assert [f.cause for f in a.faults] == [f.cause for f in b.faults] == ["drive_fault"]
        assert sides[0].drives.emcy_codes == sides[1].drives.emcy_codes == [(1, 0x2310)]
        assert [e[1] for e in a.board.errors] == [e[1] for e in b.board.errors] == [7]
        strikes = sum(1 for j in range(k + 1) if j % 25 == 5)
        assert len(a.board.heel_strikes) == len(b.board.heel_strikes) == strikes >= 3
        for side in sides:  # SAFE ramped out: disable voltage
            assert (side.drives.controlword == 0).all()
        # the recording: a row per cycle, the same numbers (less the loop's clock readings);
        # the same frames each way, in the same order (less their time stamps)
        rows = [side.rings.records.rows[: int(side.rings.records.header[0])] for side in sides]
        assert len(rows[0]) == len(rows[1]) == k + 1
        cols = cycle_columns(a.n)
        keep = np.ones(rows[0].shape[1], bool)
        for name in ("wake_us", "compute_us", "sample_t"):
            keep[slice(*cols[name])] = False
        assert np.array_equal(rows[0][:, keep], rows[1][:, keep])
        frames = [[f[1:] for f in side.rings.frames.take()] for side in sides]
        assert frames[0] == frames[1] and len(frames[0]) > 4 * k
    finally:
        for side in sides:
            side.close()
