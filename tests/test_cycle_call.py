"""The one cycle (exo_rt.cycle.cycle_call) with its buses and board read and written in
compiled code against the same cycle handing them to Python (the drive protocols' own
collect and send, the board link's own poll — what a simulated or python-can bus does):
two controllers side by side, each on its own udp_multicast bus and its own board line (a
pty), fed the same drive answers and board frames cycle after cycle — READY, RUN (the session), an
EMCY that faults a drive, SAFE's ramp and the drives disabled — must put the same frames on
the wire and the same numbers in the cycle's data and in the recording's rings, and take the
board's rare frames and the EMCY in Python alike. With two buses (exo_2leg) as with one: the
frames compared bus by bus (compiled, each bus's RPDOs and SYNC leave together, bus after
bus; from Python every RPDO first)."""

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
from exo_rt.cycle import cycle_call
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import READY
from exo_rt.record.recorder import cycle_columns
from exo_rt.record.rings import FrameRing, RecordRing
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.runtime.cycle_io import CycleIO, CycleParts
from exo_rt.runtime.injections import InjectionPlan
from exo_rt.runtime.loop import Scheduler
from exo_rt.runtime.script import HeelStrikes
from exo_rt.session import session as sessions
from firmware_bridge import protocol as p
from firmware_bridge.link import BoardLink

pytestmark = [pytest.mark.exclusive,  # udp_multicast, wall-clock cycles (tests/cpu_share.py)
              pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pty (POSIX)")]

CONFIGS = ("tests/data/exo_leg_vm.yaml", "configs/exo_2leg.yaml")  # one bus, two buses
EMCY_AT, CYCLES = 70, 140  # RUN (the session) from READY_CYCLES (20); SAFE ramps out after
# the values that are the loop's clock (they differ between two runs of the same cycle)
CLOCK_S = ("wake_us", "compute_us", "sample_t")
CLOCK_V = (cy.V_T_PREV,)


class Rings:
    """The recording's two rings, as the control process holds them (no writer process: the
    test reads them)."""

    def __init__(self, width: int) -> None:
        self.records = RecordRing(CYCLES + 8, width)
        self.frames = FrameRing(8 * CYCLES)

    def check(self, t: float) -> bool:
        return True

    def pending(self) -> bool:  # (no session here: no events to hand over)
        return False

    def release(self) -> None:
        self.records.release()
        self.frames.release()


class Side:
    """A controller wired to udp_multicast buses of its own (compiled I/O) and a board on a
    pty; the test plays the drives (``peers``, one per bus) and the board (``line``)."""

    def __init__(self, compiled: bool, config: str) -> None:
        top = load_top(config)
        self.ctl = ctl = Controller(top, "sim", board=None)  # its arrays, laws and states
        self.buses, self.peers = [], []
        for bus in top.buses:
            group = f"239.76.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
            self.buses.append(Drives(can.Bus(interface="udp_multicast", channel=group), bus,
                                     top.robot, period=ctl.dt))
            self.peers.append(loopback_bus(group))
        self.drives = self.buses[0]  # the hip's bus (the EMCY's)
        self.line, pc = os.openpty()
        tty.setraw(self.line)
        ctl.close_buses()
        ctl.duration = 10.0
        ctl.session = sessions.for_run(sessions.SessionRun(  # (the default session: it
            ctl.cycle, top, ctl.events, ctl.dt, ctl.duration, ctl.k0,  # homes, then walks)
            lambda: ctl.state, ctl.board, ctl.rig.buttons, ctl.helper_cpus, ctl.setup_lines))
        ctl.drives = list(self.buses)
        ctl.realtime = True
        ctl.board = BoardLink(f"fd:{pc}", link_timeout=0.5, heartbeat_hz=250.0)
        ctl.plan = InjectionPlan((), ctl.dt, top.safety.overrun_streak, top.robot.joint_names)
        ctl.sched = Scheduler(ctl.dt, capacity=CYCLES + 4)
        ctl.duration, ctl._next_check, ctl.k0 = 10.0, 10**9, {}
        ctl.recording = self.rings = Rings(ctl.width)
        for i, d in enumerate(self.buses):
            d.port.tap = self.rings.frames
            d.port.channel_index = i
            d.controlword[:] = 0x000F  # OPERATION ENABLED (as enable() leaves it)
        ctl.heels = HeelStrikes(ctl.board, ctl.cfg.reference, ctl.s, ctl.phase_state)
        ctl.io = CycleIO(CycleParts(ctl.cycle, ctl.drives, ctl.board, True, ctl.dt), ctl.plan,
                         ctl.heels)
        ctl.io.prepare(ctl.recording, ctl.sched.instant, compiled_io=compiled)
        self.cycle = ctl._cycle
        assert bool(ctl.io.buses) == compiled
        ctl._go(READY, 0)
        for d, view in ctl.io.commands:  # the first SYNCs (run() does: io.write)
            d.send_commands(view)
        ctl.io.t_sync = ctl.io.values[cycle_call.IO_T_SYNC] = time.monotonic()
        self.wire()

    def wire(self) -> list[list[tuple[int, bytes]]]:
        """The frames the controller sent on each bus since the last look."""
        wires = []
        for peer in self.peers:
            out = []
            while (m := peer.recv(0.05 if not out else 0.002)) is not None:
                out.append((m.arbitration_id, bytes(m.data)))
            wires.append(out)
        return wires

    def close(self) -> None:
        ctl = self.ctl
        ctl.io.call = None
        ctl.cycle.set_rows(ctl.cycle.no_rows)
        for d in self.buses:
            d.port.tap = None
        ctl.board.close()
        os.close(self.line)
        for d, peer in zip(self.buses, self.peers, strict=True):
            d.bus.shutdown()
            peer.shutdown()
        ctl.recording = None
        self.rings.release()


def _answers(d: Drives, k: int, counts: np.ndarray, emcy: bool) -> list[tuple[int, bytes]]:
    """A bus's TPDOs for cycle k (joints still at ``counts``, the bus's own: the velocity
    estimate needs no clock, and standing is where the session holds),
    their heartbeats, and (``emcy``) an EMCY (2310h, current) from the hip at EMCY_AT."""
    out = [(0x180 + int(node), struct.pack("<Hih", 0x0237, int(counts[j]),
                                          (37 * k + 11 * j) % 400 - 200))
           for j, node in enumerate(d.nodes)]
    # their heartbeats (operational), every cycle: a kernel compiled mid-run on a cold cache
    # (seconds) is not to look like heartbeats lost
    out += [(0x700 + int(node), bytes([0x05])) for node in d.nodes]
    if emcy and k == EMCY_AT:
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


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_compiled_bus_io_equals_the_protocols_own(config):
    compiled = Side(compiled=True, config=config)  # first: it may compile its cycle (seconds,
    sides = [Side(compiled=False, config=config), compiled]  # which the other would not wait)
    try:
        # the joints, still, standing (the session homes there: no move, small commands)
        q_start = sides[0].ctl.session.machine.activities.posture_q("standing")
        counts = [np.round(q_start[d.joint_index] / d.model.scale[:, 0]) for d in sides[0].buses]
        for side in sides:
            for d, c in zip(side.buses, counts, strict=True):
                side.ctl.q_prev[d.joint_index] = c * d.model.scale[:, 0]  # (as take_tpdos does)
        for k in range(CYCLES):
            for side in sides:
                for b, (d, peer) in enumerate(zip(side.buses, side.peers, strict=True)):
                    for arb, data in _answers(d, k, counts[b], emcy=b == 0):
                        peer.send(can.Message(arbitration_id=arb, data=data,
                                              is_extended_id=False))
                os.write(side.line, _board_frames(k))
            time.sleep(0.015)  # every answer and byte arrived (3 ms was seen short under a
            # loaded suite: a board byte missed one side's first cycle)
            went_on = [side.cycle(k) for side in sides]
            wires = [side.wire() for side in sides]
            a, b = (side.ctl for side in sides)
            assert went_on[0] == went_on[1], k
            if not went_on[0]:  # SAFE has ramped out and disabled the drives: the run ends
                break
            assert wires[0] == wires[1], (k, wires)
            for d, wire in zip(sides[0].buses, wires[0], strict=True):  # RPDOs + SYNC (+ HB)
                assert len(wire) >= d.n + 1, (k, wire)
            s_a, s_b = a.cycle.s_array.copy(), b.cycle.s_array.copy()
            for name in CLOCK_S:
                s_a[name] = s_b[name] = 0.0
            assert s_a.tobytes() == s_b.tobytes(), (k, [n for n in s_a.dtype.names
                                                        if s_a[n] != s_b[n]])
            assert a.cycle.seg_array.tobytes() == b.cycle.seg_array.tobytes(), k
            v_a, v_b = (np.delete(c.cycle.v, CLOCK_V, axis=0) for c in (a, b))
            assert np.array_equal(v_a, v_b, equal_nan=True), (k, np.argwhere(v_a != v_b))
            assert np.array_equal(a.flags, b.flags)
            assert np.array_equal(a.cycle.streaks, b.cycle.streaks)
            assert a.state == b.state, k
        a, b = (side.ctl for side in sides)
        assert not went_on[0] and EMCY_AT < k < CYCLES - 1, (k, a.events)  # ended in SAFE
        assert a.events == b.events
        assert [e["state"] for e in a.events if e["event"] == "state"] == [
            "READY", "RUN", "SAFE"]
        assert [f.cause for f in a.faults] == [f.cause for f in b.faults] == ["drive_fault"]
        assert sides[0].drives.emcy_codes == sides[1].drives.emcy_codes == [(1, 0x2310)]
        assert [e[1] for e in a.board.errors] == [e[1] for e in b.board.errors] == [7]
        strikes = sum(1 for j in range(k + 1) if j % 25 == 5)
        assert strikes >= 3  # (in RUN the gait-phase estimate takes them; after, they wait)
        assert len(a.board.heel_strikes) == len(b.board.heel_strikes) < strikes
        assert a.cycle.gait[0]["heels"] == b.cycle.gait[0]["heels"] >= 1
        for side in sides:  # SAFE ramped out: disable voltage
            assert all((d.controlword == 0).all() for d in side.buses)
        # the recording: a row per cycle, the same numbers (less the loop's clock readings);
        # the same frames each way, in the same order (less their time stamps)
        rows = [side.rings.records.rows[: int(side.rings.records.header[0])] for side in sides]
        assert len(rows[0]) == len(rows[1]) == k + 1
        cols = cycle_columns(a.n)
        keep = np.ones(rows[0].shape[1], bool)
        for name in ("wake_us", "compute_us", "sample_t"):
            keep[slice(*cols[name])] = False
        assert np.array_equal(rows[0][:, keep], rows[1][:, keep], equal_nan=True)
        frames = [side.rings.frames.take() for side in sides]
        for b in range(len(sides[0].buses)):  # (t, id, flags, dlc, bus, data): bus by bus
            one = [[f[1:] for f in side_frames if f[4] == b] for side_frames in frames]
            assert one[0] == one[1] and len(one[0]) > 4 * k, b
    finally:
        for side in sides:
            side.close()
