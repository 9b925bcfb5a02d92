"""The whole real-time cycle in one compiled call, where every part of it can be compiled:
CiA 402 buses (one or more) on ports whose batches are compiled (socketcan, udp_multicast),
the board on a serial descriptor or none, no injected faults.

:func:`run` does, in the order of :meth:`exo_rt.runtime.controller.Controller._cycle`: the
board's poll (:func:`firmware_bridge.fastdecode.poll`) → the drives' frames in
(:func:`exo_rt.bus.pdo_cycle.gather`, bus after bus) → the cycle's inputs by state (time,
time in ALIGN, the gait phase) → the recording row's slot →
:func:`exo_rt.runtime.cycle.control_step` → the row published → the drives disabled once SAFE
has ramped out → the commands, SYNC and heartbeat out (:func:`exo_rt.bus.pdo_cycle.command`,
each bus's RPDOs and SYNC in one system call, bus after bus: the buses' SYNCs leave one
system call apart, as in the call-by-call cycle's order). Python then keeps only what is not
numeric: state changes, events, the board's heartbeat.

Why: each compiled call costs its dispatcher's work on every argument and, on a machine whose
caches the rest of the machine keeps cold between two cycles, ~2 µs more; the Python between
four calls was ~140 interpreted lines a cycle. One call, one system call each way per bus
(docs/performance.md, "The cycle in one compiled call").

It hands back to Python, mid-cycle, only what Python owns — and resumes where it stopped
(``io[IO_STAGE]``): the board's rare frames and heel strikes (:data:`BACK_BOARD`), the bus's
EMCY, error and other devices' frames (:data:`BACK_FRAMES`). Its arguments never change
within a run; what changes per cycle is in ``io``. They travel as one object,
:class:`CycleArgs` (a numba structref made once, :func:`prepare`): numba's dispatcher unboxes
every array of an argument on every call (~0.1 µs each on a cold cache, and the cycle has
~115), but a structref in one step.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.experimental import structref

from exo_rt.bus import cia402 as c
from exo_rt.bus import fastio, pdo_cycle
from exo_rt.control import trajectory
from exo_rt.jit import njit
from exo_rt.runtime import cycle as cy
from exo_rt.runtime.states import ALIGN, RUN, SAFE
from firmware_bridge import fastdecode as fd

# io: float64 values the control thread and the compiled cycle share
IO_K = 0  # in: the cycle's index
IO_STAGE = 1  # where the cycle resumes: 0 from its start, 1 at the frames in (0 when done)
IO_T_SYNC = 2  # s, monotonic: when the last SYNC left (the feedback's sample time; the wall
# clock's, which the frames' time stamps compare with, is the bus's ``sync_time``)
IO_K0_ALIGN = 3  # the cycle ALIGN began
IO_K0_RUN = 4  # the cycle RUN began
IO_EVENTS = 5  # 1: the gait phase follows the wearer's heel strikes
IO_BOARD = 6  # 1: a board link to poll
IO_LINK_TIMEOUT = 7  # s without a board status: link lost
IO_NEWS = 8  # out: what the board's poll brought (fastdecode.N_*), for Python
IO_NOW = 9  # out: when (monotonic s)
IO_PENDING = 10  # out: frames Python must take (the bus's python rows)
IO_DEADLINE = 11  # monotonic s: the frames in wait until then at most (0.7 periods)
# out, monotonic s: when the cycle began and each part ended (the board's poll, the frames in,
# the cycle kernel; the commands' end is IO_T_SYNC) — where a cycle's time went
# (tools/bench_rt_parts.py); a clock read costs ~0.03 µs
IO_T_START, IO_T_BOARD, IO_T_IN, IO_T_KERNEL = 12, 13, 14, 15
IO_BUS = 16  # the bus whose frames are being gathered (out: whose frames Python must take)
IO_WIDTH = 17

BACK_DONE, BACK_BOARD, BACK_FRAMES = 0, 1, 2  # what run returns
DEADLINE_PERIODS = 0.7  # the drives' answers are waited for this much of a period at most
NO_RECORDS = np.zeros(8, np.int64)  # a recording ring's header where nothing is recorded


class _Bundle(types.StructRef):
    """A numba structref type whose fields are typed from what it was made of."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


@structref.register
class CycleArgsType(_Bundle):
    """The numba type of :class:`CycleArgs`."""


class CycleArgs(structref.StructRefProxy):
    """:func:`whole_cycle`'s arguments in one object, for :func:`run` (made by :func:`prepare`)."""


@structref.register
class BusArgsType(_Bundle):
    """The numba type of :class:`BusArgs`."""


class BusArgs(structref.StructRefProxy):
    """One bus's part of the cycle in one object (:meth:`exo_rt.bus.drives.Drives.
    compiled_cycle`'s tuple, fields in :data:`BUS_FIELDS`' order): a tuple of these is a tuple
    of pointers, which the cycle indexes at run time without copying a bus's ~70 arrays."""


# gather's and command's arguments, the heartbeat counter, gather's ``when`` and ``done``, the
# controlwords, the last SYNC's send time (wall clock s)
BUS_FIELDS = ("bus_in", "bus_out", "hb", "when", "done", "controlword", "sync_time")
structref.define_proxy(BusArgs, BusArgsType, list(BUS_FIELDS))


FIELDS = ("board", "status_time", "buses", "kernel", "rec_header", "rec_capacity", "io", "ts",
          "phase_state")
structref.define_proxy(CycleArgs, CycleArgsType, list(FIELDS))


@njit(cache=True)
def _bundle(board, status_time, buses, kernel, rec_header, rec_capacity, io, ts, phase_state):
    return CycleArgs(board, status_time, buses, kernel, rec_header, rec_capacity, io, ts,
                     phase_state)


@njit(cache=True)
def _bus_bundle(bus_in, bus_out, hb, when, done, controlword, sync_time):
    return BusArgs(bus_in, bus_out, hb, when, done, controlword, sync_time)


def prepare(args: tuple) -> CycleArgs:
    """:func:`whole_cycle`'s arguments (in :data:`FIELDS`' order; ``buses`` a tuple of
    :meth:`~exo_rt.bus.drives.Drives.compiled_cycle` tuples) as one :class:`CycleArgs`, and
    :func:`run` for it compiled — or loaded from numba's cache — now: before the drives are
    enabled, whose heartbeat watchdog would not wait for a compiler."""
    args = list(args)
    i = FIELDS.index("buses")
    buses = []
    for bus in args[i]:
        _bus_bundle.compile(tuple(numba.typeof(a) for a in bus))
        buses.append(_bus_bundle(*bus))
    args[i] = tuple(buses)
    _bundle.compile(tuple(numba.typeof(a) for a in args))
    bundle = _bundle(*args)
    run.compile((numba.typeof(bundle),))
    return bundle


@njit(cache=True)
def run(a):
    """:func:`whole_cycle` on its arguments bundled (:class:`CycleArgs`): the cycle's one
    call."""
    return whole_cycle(a.board, a.status_time, a.buses, a.kernel, a.rec_header,
                       a.rec_capacity, a.io, a.ts, a.phase_state)


def warm_up(kernel: tuple, drives: list[int]) -> None:
    """Compile :func:`run` ahead of a run for a controller's :func:`~exo_rt.runtime.cycle.
    control_step` arguments ``kernel`` and CiA 402 buses of ``drives[b]`` drives each (on no
    socket; the types are a real bus's, :func:`exo_rt.bus.pdo_cycle.io_arguments`; the
    compiled cycle depends on the number of buses, not of drives)."""
    buses = []
    for n in drives:
        gather_args, command_args = pdo_cycle.io_arguments(n, fastio.WIRE_UDP)
        buses.append((gather_args, command_args, np.zeros(3, np.int64), gather_args[38],
                      gather_args[39], np.zeros(n, np.int64), np.zeros(1)))
    prepare((no_board(), np.zeros(1), tuple(buses), kernel, NO_RECORDS, 0,
             np.zeros(IO_WIDTH), np.zeros(2, np.int64), np.zeros(3)))


def no_board() -> tuple:
    """Poll arguments of the types a board's have (one compiled cycle for both), never
    polled: ``io[IO_BOARD]`` = 0."""
    from firmware_bridge.link import FIONREAD, READ_SIZE

    return (-1, FIONREAD, np.zeros(1, np.int32), np.zeros(READ_SIZE, np.uint8),
            *fd.new_state(), 200.0)


@njit(cache=True)
def record_slot(header, capacity):
    """The recording ring's row for this cycle (:class:`exo_rt.record.rings.RecordRing`'s
    ``slot_index``): ``capacity`` — the spare row, never published — when the ring is full."""
    head = header[fastio.RING_HEAD]
    if head - header[fastio.RING_TAIL] >= capacity:
        return capacity
    return head % capacity


@njit(cache=True)
def record_commit(header, capacity, slot):
    """The row is written: publish it (the head is stored after the row), or count it lost."""
    if slot == capacity:
        header[fastio.RING_LOST] += 1
    else:
        header[fastio.RING_HEAD] += 1


@njit(cache=True)
def whole_cycle(board, status_time, buses, kernel, rec_header, rec_capacity, io, ts,
                phase_state):
    """One cycle (or the rest of one, from ``io[IO_STAGE]``); returns :data:`BACK_DONE`, or
    what Python must handle before it calls again (:data:`BACK_BOARD`, :data:`BACK_FRAMES`:
    ``io[IO_BUS]``'s frames).

    ``board`` and ``kernel`` are the argument tuples of
    :func:`~firmware_bridge.fastdecode.poll` and :func:`~exo_rt.runtime.cycle.control_step`;
    ``buses`` one :class:`BusArgs` per bus — :func:`~exo_rt.bus.pdo_cycle.gather`'s and
    :func:`~exo_rt.bus.pdo_cycle.command`'s arguments, the heartbeat counter
    (:func:`~exo_rt.bus.pdo_cycle.sync_rows`), gather's ``when`` and ``done``, the
    controlwords and ``[0]`` the last SYNC's time (wall clock s); ``status_time[0]`` the
    board's last status (monotonic s),
    ``rec_header`` the recording ring's header (``rec_capacity`` 0: none)."""
    s = kernel[0]
    k = io[IO_K]
    if io[IO_STAGE] == 0.0:
        now = fastio.monotonic(ts)
        io[IO_T_START] = now
        io[IO_DEADLINE] = now + DEADLINE_PERIODS * s[cy.S_DT]
        io[IO_STAGE] = 1.0
        io[IO_BUS] = 0.0
        for bus in buses:
            when = bus.when
            when[0] = bus.sync_time[0]  # an answer stamped before the last SYNC answers
            when[1] = io[IO_DEADLINE]  # an older one
            when[2] = 1.0  # the cycle's first gather
        io[IO_T_BOARD] = now
        if io[IO_BOARD]:
            out = fd.poll(*board)
            if out & fd.N_STATUS:
                status_time[0] = now
            word = out >> fd.WORD_SHIFT
            if now - status_time[0] > io[IO_LINK_TIMEOUT]:
                word |= fd.B_LINK_LOST
            s[cy.S_BOARD] = word
            io[IO_T_BOARD] = fastio.monotonic(ts)
            if out & (fd.N_HEEL | fd.N_OTHER):
                io[IO_NEWS] = out
                io[IO_NOW] = now
                return BACK_BOARD
    if io[IO_STAGE] == 1.0:
        b = int(io[IO_BUS])
        while b < len(buses):
            bus = buses[b]
            pending = pdo_cycle.gather(*bus.bus_in)
            if pending:
                io[IO_PENDING] = pending
                return BACK_FRAMES  # (Python takes them, then calls again: gather goes on)
            if bus.done[0]:
                b += 1
                io[IO_BUS] = b
        io[IO_T_IN] = fastio.monotonic(ts)
    io[IO_STAGE] = 0.0
    s[cy.S_SAMPLE_T] = io[IO_T_SYNC]  # the feedback answers the last SYNC
    s[cy.S_K] = k
    s[cy.S_T] = k * s[cy.S_DT]
    state = int(s[cy.S_STATE])
    if state == ALIGN:
        s[cy.S_ALIGN_T] = (k - io[IO_K0_ALIGN]) * s[cy.S_DT]
    elif state == RUN:
        t = (k - io[IO_K0_RUN]) * s[cy.S_DT]
        phase = t / s[cy.S_PERIOD]
        if io[IO_EVENTS] and phase_state[trajectory.PH_COUNT] > 0:
            phase = trajectory.phase_from_events(phase_state, t)
        s[cy.S_PHASE] = phase
        s[cy.S_PERIOD] = phase_state[trajectory.PH_PERIOD]
    hist = kernel[-1]
    s[cy.S_HIST] = k if k < hist.shape[0] else -1.0
    slot = 0
    if rec_capacity > 0:
        slot = record_slot(rec_header, rec_capacity)
        s[cy.S_SLOT] = slot
    cy.control_step(*kernel)
    if rec_capacity > 0:
        record_commit(rec_header, rec_capacity, slot)
    io[IO_T_KERNEL] = fastio.monotonic(ts)
    disable = s[cy.S_STATE] == SAFE and s[cy.S_DISABLE]
    for bus in buses:
        if disable:  # the power stage off (Drives.request_disable)
            bus.controlword[:] = c.CW_DISABLE_VOLTAGE
        out_args = bus.bus_out
        extra = out_args[-1]
        extra[0] = pdo_cycle.sync_rows(bus.hb)
        bus.sync_time[0] = pdo_cycle.command(*out_args)
    io[IO_T_SYNC] = fastio.monotonic(ts)  # the drives sample now
    return BACK_DONE
