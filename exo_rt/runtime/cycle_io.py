"""The Python side of the one compiled cycle (:mod:`exo_rt.cycle.cycle_call`): its
arguments made once, and what Python does when the cycle hands back mid-cycle — the board's
news, a bus's frames for Python, the buses of a protocol read and written in Python (a
simulated or python-can bus), the board's poll on the simulated clock, injected NaNs.

Each bus's drives fill the cycle's arrays in place where their joints are contiguous (the
others are gathered); the commands leave bus after bus.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from exo_rt.bus.host import HostDrives
from exo_rt.cycle import cycle_call as cc
from exo_rt.cycle.layout import V_T_REPORTED
from exo_rt.cycle.states import SAFE
from exo_rt.cycle.step import Cycle
from exo_rt.runtime.injections import InjectionPlan
from exo_rt.runtime.rig import Board
from exo_rt.runtime.script import HeelStrikes
from exo_rt.unraisable import Swallowed


@dataclass(frozen=True)
class CycleParts:
    """What the Python side of the compiled cycle works on: the ``cycle`` (its model, data
    and arrays by name), every bus's ``drives`` in the cycle's order, the ``board``
    (:class:`~exo_rt.runtime.rig.NoBoard`: none), whether the run is on the wall clock
    (``realtime``) and its period ``dt`` (s)."""

    cycle: Cycle
    drives: list[HostDrives]
    board: Board
    realtime: bool
    dt: float


class CycleIO:
    """The compiled cycle of one run: its ``parts``, the injections' ``plan`` (NaN positions
    injected here), the board's ``heels`` (heel strikes into the gait phase), and
    ``sync_instant`` — when cycle k's SYNC left (None: the scheduler's clock, given to
    :meth:`prepare`; a recording knows its own)."""

    def __init__(self, parts: CycleParts, plan: InjectionPlan, heels: HeelStrikes,
                 sync_instant: Callable[[int], float] | None = None) -> None:
        self.parts, self.plan, self.heels = parts, plan, heels
        self.s = parts.cycle.s
        self.values = np.zeros(cc.IO_WIDTH)  # io: what Python and the compiled cycle share
        self.call = None  # cycle_call.run's arguments, made before the drives are enabled
        self.buses: list = []  # the compiled buses, in the cycle's order
        self.t_sync = 0.0  # when the last SYNC left (the drives sampled then)
        self.instant = sync_instant
        self.swallowed = Swallowed()  # (installed by prepare: the run's cycles are next)
        self.wire()

    def wire(self) -> None:
        """Each bus's drives onto the cycle's arrays (views where their joints are
        contiguous); the order in which their commands go out."""
        c = self.parts.cycle
        self.gathers, self.commands = [], []
        for d in self.parts.drives:
            idx = d.joint_index
            if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
                lo, hi = int(idx[0]), int(idx[0]) + len(idx)
                d.position, d.current, d.flags = c.q[lo:hi], c.i_meas[lo:hi], c.flags[lo:hi]
                self.commands.append((d, c.cur[lo:hi]))
            else:
                self.gathers.append(d)
                self.commands.append((d, None))
        # write()'s order: every other bus's RPDOs, the last bus's RPDOs and SYNC together,
        # then the other buses' SYNCs (split once: no list made per cycle)
        self.commands_first = self.commands[:-1]
        self.commands_last = self.commands[-1] if self.commands else None

    def prepare(self, recording, instant: Callable[[int], float],
                compiled_io: bool = True) -> list[str]:
        """The cycle's arguments made and :func:`~exo_rt.cycle.cycle_call.run` compiled —
        or loaded from numba's cache — now, before any drive is enabled. In real time, CiA
        402 buses on compiled ports filling the cycle's arrays in place are read and written
        inside it, and a board on a descriptor polled there; everything else is handed to
        Python mid-cycle (everything with ``compiled_io`` False, to compare the two).
        ``recording``: the run's (its rings; None: not recorded); ``instant``: the
        scheduler's clock of SYNCs, where the rig has none. Returns the set-up's lines."""
        parts, io, c = self.parts, self.values, self.parts.cycle
        board, realtime = parts.board, parts.realtime
        buses: tuple = ()
        if (compiled_io and realtime and parts.drives and not self.gathers
                and not self.plan.onsets):
            buses = tuple(d.compiled_cycle(view) for d, view in self.commands)
            if any(bus is None for bus in buses):
                buses = ()
        # the board's poll on its descriptor (None: Python's, or no board); the buses
        # Python's, the board's poll too (none of it compiled)
        compiled = board.compiled_poll() if (realtime and compiled_io and buses) else None
        io[cc.IO_PY_BUSES] = not buses
        io[cc.IO_BOARD] = board.present
        io[cc.IO_PY_BOARD] = board.present and compiled is None
        io[cc.IO_EVENTS] = self.heels.from_events and board.present
        io[cc.IO_LINK_TIMEOUT] = board.link_timeout  # (no board: 0, never compared)
        poll_args, status_time = compiled if compiled is not None else (
            cc.no_board() if buses else None, np.zeros(1))
        rec = recording
        if rec is None:
            header, capacity, rows = cc.NO_RECORDS, 0, c.no_rows
        else:
            header, capacity, rows = rec.records.header, rec.records.capacity, rec.records.rows
        c.set_rows(rows)
        self.call = cc.prepare(board=poll_args, status_time=status_time, buses=buses or None,
                               model=c.model, data=c.data, rec_header=header,
                               rec_capacity=capacity, io=io, ts=np.zeros(2, np.int64),
                               phase_state=self.heels.phase_state)
        self.buses = [d for d, _view in self.commands] if buses else []
        if self.instant is None:
            self.instant = instant
        self.swallowed.install()
        return ["cycle: one compiled call (board, frames in, control, frames out)"] \
            if buses else []

    def run(self, k: int) -> None:
        """Cycle k: the compiled cycle, and Python between its calls for what it owns; a step
        that raised marks the cycle broken (:class:`Swallowed`): SAFE from the next cycle."""
        io, call, board = self.values, self.call, self.parts.board
        io[cc.IO_K] = k
        try:
            self._run(k, io, call, board)
        finally:
            if self.swallowed.count and not self.s["broken"]:
                self.s["broken"] = 1.0
                print(f"exo-rt: the cycle's compiled step raised at cycle {k}: "
                      f"{self.swallowed.first!r} — SAFE (cycle_exception)", file=sys.stderr)

    def _run(self, k, io, call, board) -> None:
        back = cc.run(call)
        while back:  # what Python owns, mid-cycle; then the cycle goes on where it stopped
            if back == cc.BACK_FRAMES:
                self.buses[int(io[cc.IO_BUS])].handed_back(int(io[cc.IO_PENDING]))
            elif back == cc.BACK_COLLECT:
                self.collect(k)
            elif back == cc.BACK_POLL:
                self.s["board"] = board.poll()  # 1: e-stop, 2: link lost, 4: power off
                self.heels.take()
            elif back == cc.BACK_BOARD:
                board.take_news(int(io[cc.IO_NEWS]), io[cc.IO_NOW])
                self.heels.take()
            else:  # BACK_SEND: the cycle's last step
                self.send(k)
                return
            back = cc.run(call)

    def collect(self, k: int) -> None:
        """The drives' frames, read by their protocols in Python; injected NaN positions."""
        parts = self.parts
        deadline = None if not parts.realtime else time.monotonic() + 0.7 * parts.dt
        reported = parts.cycle.v[V_T_REPORTED]
        for d in parts.drives:
            d.collect(deadline)
            reported[d.joint_index] = d.temperature  # (NaN where a protocol has none)
        if self.gathers:
            self.gather()
        plan = self.plan
        if plan.any_nan:
            for k0, k1, j in plan.nan:
                if k0 <= k < k1:
                    parts.cycle.q[j] = float("nan")

    def gather(self) -> None:
        """Measurements of drives whose joints are not contiguous (the others fill in place)."""
        c = self.parts.cycle
        for d in self.gathers:
            c.q[d.joint_index] = d.position
            c.i_meas[d.joint_index] = d.current
            c.flags[d.joint_index] = d.flags

    def send(self, k: int) -> None:
        """Cycle k's commands sent by the protocols in Python (the drives disabled once SAFE
        has ramped out); the drives sample at their SYNC."""
        s = self.s
        if s["state"] == SAFE and s["disable"]:
            for d in self.parts.drives:
                d.request_disable()
        self.write(k)

    def write(self, k: int) -> None:
        """Cycle k's commands on every bus (current clamped in the encoder), then every bus's
        SYNC: the last bus's commands and SYNC go together (one system call where its port
        allows). k = −1: the first SYNC, before cycle 0."""
        cur = self.parts.cycle.cur
        first = self.commands_first
        for d, view in first:
            d.send_rpdos(cur[d.joint_index] if view is None else view)
        if self.commands_last is not None:
            d, view = self.commands_last
            d.send_commands(cur[d.joint_index] if view is None else view)
        for d, _view in first:
            d.send_sync()
        self.t_sync = self.instant(k)  # the drives sample now
        self.values[cc.IO_T_SYNC] = self.t_sync

    def close(self) -> None:
        """The compiled cycle's sends the OS refused, counted; its arguments let go (they
        hold views of the recording's shared memory); the step's exceptions no longer ours."""
        self.swallowed.remove()
        if self.call is not None:
            for d in self.buses:
                d.count_send_errors()
        self.call = None
