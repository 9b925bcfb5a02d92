"""The control cycle: one compiled call, the only cycle there is.

:func:`run` does: the board's poll (:func:`firmware_bridge.fastdecode.poll`) → the drives'
frames in (:func:`exo_rt.bus.pdo_cycle.gather`, bus after bus) → the cycle's inputs by
state (time; the stride period from the heel strikes) → the recording row's slot →
:func:`exo_rt.runtime.cycle.step` on the cycle's model and data → the row published → the
drives disabled once SAFE has ramped out → the commands, SYNC and heartbeat out
(:func:`exo_rt.bus.pdo_cycle.command`, each bus's RPDOs and SYNC in one system call, bus
after bus). Python then keeps only what is not numeric: state changes, events, the board's
heartbeat.

Where a part cannot be compiled — a bus whose protocol reads and writes its frames in Python
(the lockstep simulated bus, a python-can interface, the MIT and RMD-X protocols), a board
link on the simulated clock or pyserial's, injected faults — the cycle hands that part to
Python mid-cycle and resumes where it stopped (``io[IO_STAGE]``): :data:`BACK_POLL`,
:data:`BACK_COLLECT`, :data:`BACK_SEND` (:class:`exo_rt.runtime.cycle_io.CycleIO` does
them). It also hands back what Python owns: the board's rare frames and heel strikes
(:data:`BACK_BOARD`), a bus's EMCY, error and other devices' frames (:data:`BACK_FRAMES`).

Why one call: each compiled call costs its dispatcher's work on every argument and, on a
machine whose caches the rest of the machine keeps cold between two cycles, ~2 µs more; the
Python between four calls was ~140 interpreted lines a cycle (docs/performance.md, "The
cycle in one compiled call"). Its arguments never change within a run; what changes per
cycle is in ``io``. They travel as one object, :class:`CycleArgs` (a numba structref made
once, :func:`prepare`): numba's dispatcher unboxes every array of an argument on every call
(~0.1 µs each on a cold cache), but a structref in one step.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.experimental import structref
from numba.extending import overload

from exo_rt.bus import cia402 as c
from exo_rt.bus import fastio, pdo_cycle
from exo_rt.control import trajectory
from exo_rt.jit import njit
from exo_rt.runtime import cycle as cy
from exo_rt.runtime.states import RUN, SAFE
from firmware_bridge import fastdecode as fd

# io: float64 values the control thread and the compiled cycle share
IO_K = 0  # in: the cycle's index
IO_STAGE = 1  # where the cycle resumes: 0 from its start, 1 at the frames in (0 when done)
IO_T_SYNC = 2  # s, monotonic: when the last SYNC left (the feedback's sample time; the wall
# clock's, which the frames' time stamps compare with, is the bus's ``sync_time``)
IO_EVENTS = 3  # 1: the stride period follows the wearer's heel strikes
IO_BOARD = 4  # 1: a board link to poll
IO_LINK_TIMEOUT = 5  # s without a board status: link lost
IO_NEWS = 6  # out: what the board's poll brought (fastdecode.N_*), for Python
IO_NOW = 7  # out: when (monotonic s)
IO_PENDING = 8  # out: frames Python must take (the bus's python rows)
IO_DEADLINE = 9  # monotonic s: the frames in wait until then at most (0.7 periods)
# out, monotonic s: when the cycle began and each part ended (the board's poll, the frames in,
# the cycle kernel; the commands' end is IO_T_SYNC) — where a cycle's time went
# (tools/bench_rt_parts.py); a clock read costs ~0.03 µs
IO_T_START, IO_T_BOARD, IO_T_IN, IO_T_KERNEL = 10, 11, 12, 13
IO_BUS = 14  # the bus whose frames are being gathered (out: whose frames Python must take)
IO_PY_BOARD = 15  # 1: the board's link is Python's to poll (:data:`BACK_POLL`)
IO_PY_BUSES = 16  # 1: the buses are Python's to read and write (BACK_COLLECT, BACK_SEND)
STAGE_START, STAGE_IN, STAGE_KERNEL = 0.0, 1.0, 2.0  # io[IO_STAGE]: where the cycle resumes
IO_WIDTH = 17

# what run returns: done, or what Python must do before it calls again — the board's news
# (BACK_BOARD), a bus's frames for Python (BACK_FRAMES: io[IO_BUS]'s), the board's link to
# poll (BACK_POLL), every bus's frames to read (BACK_COLLECT) or commands to send (BACK_SEND)
BACK_DONE, BACK_BOARD, BACK_FRAMES, BACK_POLL, BACK_COLLECT, BACK_SEND = 0, 1, 2, 3, 4, 5
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
    """:func:`run`'s arguments in one object (made by :func:`prepare`)."""


@structref.register
class BusArgsType(_Bundle):
    """The numba type of :class:`BusArgs`."""


class BusArgs(structref.StructRefProxy):
    """One bus's part of the cycle in one object (:meth:`exo_rt.bus.drives.Drives.
    compiled_cycle`'s tuple, fields in :data:`BUS_FIELDS`' order): a tuple of these is a tuple
    of pointers, which the cycle indexes at run time without copying a bus's records."""


# the frame tables received and sent, the recording's tap, the bus's model and data
# (exo_rt.bus.pdo_cycle), the commands (A)
BUS_FIELDS = ("rx", "tx", "tap", "model", "data", "current")
structref.define_proxy(BusArgs, BusArgsType, list(BUS_FIELDS))


# the last field, the step (cy.STEP_VALUE), prepare adds: run calls cy.step through its
# address, so that the step compiles apart (another process may compile it meanwhile) and
# its machine code is not emitted a second time into run's
FIELDS = ("board", "status_time", "buses", "model", "data", "rec_header", "rec_capacity", "io",
          "ts", "phase_state", "step")
structref.define_proxy(CycleArgs, CycleArgsType, list(FIELDS))


@njit(cache=True)
def _bundle(*fields):
    return CycleArgs(*fields)


@njit(cache=True)
def _bus_bundle(*fields):
    return BusArgs(*fields)


def prepare(args: tuple) -> CycleArgs:
    """:func:`run`'s arguments (in :data:`FIELDS`' order but the step, which this adds;
    ``buses`` a tuple of :meth:`~exo_rt.bus.drives.Drives.compiled_cycle` tuples, or None
    with ``board`` None: both Python's) as one :class:`CycleArgs`, and :func:`run` for it
    compiled — or loaded from numba's cache — now: before the drives are enabled, whose
    heartbeat watchdog would not wait for a compiler."""
    args = _bundled_buses(args) + [cy.STEP_VALUE]
    bundle = _bundle(*args)
    run.compile((numba.typeof(bundle),))
    return bundle


def _bundled_buses(args: tuple) -> list:
    args = list(args)
    i = FIELDS.index("buses")
    if args[i] is not None:  # (None: the buses are Python's, and the board too)
        args[i] = tuple(_bus_bundle(*bus) for bus in args[i])
    return args


def warm_up(drives: list[int]) -> None:
    """Compile :func:`run` ahead of a run — from its arguments' types: neither a cycle nor
    its step is made or compiled here (``cy.warm`` compiles the step, maybe in another
    process meanwhile) — for CiA 402 buses of ``drives[b]`` drives each (on no socket; the
    types are a real bus's, :func:`exo_rt.bus.pdo_cycle.io_arguments`; the compiled cycle
    depends on the number of buses, not of drives; none: the buses are Python's)."""
    buses = tuple(pdo_cycle.io_arguments(n, fastio.WIRE_UDP) for n in drives) or None
    args = _bundled_buses((no_board() if buses else None, np.zeros(1), buses, None, None,
                           NO_RECORDS, 0, np.zeros(IO_WIDTH), np.zeros(2, np.int64),
                           np.zeros(3)))
    fields = [numba.typeof(v) for v in args] + [cy.STEP]
    fields[FIELDS.index("model")], fields[FIELDS.index("data")] = cy.CYCLE_MODEL, cy.CYCLE_DATA
    _bundle.compile((types.BaseTuple.from_types(fields),))  # (its *fields: one tuple)
    run.compile((CycleArgsType(list(zip(FIELDS, fields, strict=True))),))


def no_board() -> tuple:
    """Poll arguments of the types a board's have (one compiled cycle for both), never
    polled: ``io[IO_BOARD]`` = 0."""
    from firmware_bridge.link import FIONREAD, READ_SIZE

    return (-1, FIONREAD, np.zeros(1, np.int32), np.zeros(READ_SIZE, np.uint8),
            *fd.new_state(), 200.0)


@njit(cache=True, inline="always")
def record_slot(header, capacity):
    """The recording ring's row for this cycle (:class:`exo_rt.record.rings.RecordRing`'s
    ``slot_index``): ``capacity`` — the spare row, never published — when the ring is full."""
    head = header[fastio.RING_HEAD]
    if head - header[fastio.RING_TAIL] >= capacity:
        return capacity
    return head % capacity


@njit(cache=True, inline="always")
def record_commit(header, capacity, slot):
    """The row is written: publish it (the head is stored after the row), or count it lost."""
    if slot == capacity:
        header[fastio.RING_LOST] += 1
    else:
        header[fastio.RING_HEAD] += 1


# The cycle's compiled I/O, dispatched on its type: with the buses and the board Python's
# (``None``: the lockstep simulated bus, python-can ports, the reply protocols) none of the
# compiled bus and board code is generated — the cycle compiles in a third of the time.
def _begin(buses, deadline):
    """Every compiled bus's frames in from their start (the deadline: monotonic s)."""


def _gather(a):
    """Every compiled bus's frames in, from ``io[IO_BUS]`` on; :data:`BACK_FRAMES` where
    Python must take some first, else :data:`BACK_DONE`."""


def _command(a, disable):
    """Every compiled bus's commands, SYNC and heartbeat out (``disable``: the power stages
    off)."""


def _poll(a, now):
    """The board's poll on its descriptor: its news (fastdecode.N_*)."""


@overload(_begin, jit_options={"cache": True})
def _begin_impl(buses, deadline):
    if isinstance(buses, types.NoneType):
        return lambda buses, deadline: None

    def impl(buses, deadline):
        for bus in buses:
            pdo_cycle.begin(bus.data, deadline)  # the frames in wait until then at most
    return impl


@overload(_gather, jit_options={"cache": True})
def _gather_impl(a):
    if isinstance(a.field_dict["buses"], types.NoneType):
        return lambda a: BACK_DONE

    def impl(a):
        io, buses = a.io, a.buses
        b = int(io[IO_BUS])
        while b < len(buses):
            bus = buses[b]
            pending = pdo_cycle.gather(bus.rx, bus.tap, bus.model, bus.data)
            if pending:
                io[IO_PENDING] = pending
                return BACK_FRAMES  # (Python takes them, then calls again: gather goes on)
            if bus.data.done[0]:
                b += 1
                io[IO_BUS] = b
        return BACK_DONE
    return impl


@overload(_command, jit_options={"cache": True})
def _command_impl(a, disable):
    if isinstance(a.field_dict["buses"], types.NoneType):
        return lambda a, disable: None

    def impl(a, disable):
        for bus in a.buses:
            if disable:  # the power stage off (Drives.request_disable)
                bus.data.controlword[:] = c.CW_DISABLE_VOLTAGE
            pdo_cycle.command(bus.tx, bus.tap, bus.model, bus.data, bus.current)
    return impl


@overload(_poll, jit_options={"cache": True})
def _poll_impl(a, now):
    if isinstance(a.field_dict["board"], types.NoneType):
        return lambda a, now: 0

    def impl(a, now):
        return fd.poll(*a.board)
    return impl


@njit(cache=True, inline="always")
def _start(a):
    """The cycle's start: its clock, the deadline of the frames in, the board's poll (compiled
    on a descriptor; else handed to Python: :data:`BACK_POLL`)."""
    s, io = a.data.s[0], a.io
    now = fastio.monotonic(a.ts)
    io[IO_T_START] = now
    io[IO_DEADLINE] = now + DEADLINE_PERIODS * a.model.p[0].dt
    io[IO_STAGE] = STAGE_IN
    io[IO_BUS] = 0.0
    _begin(a.buses, io[IO_DEADLINE])
    io[IO_T_BOARD] = now
    if io[IO_PY_BOARD]:
        return BACK_POLL
    if io[IO_BOARD]:
        out = _poll(a, now)
        status_time = a.status_time
        if out & fd.N_STATUS:
            status_time[0] = now
        word = out >> fd.WORD_SHIFT
        if now - status_time[0] > io[IO_LINK_TIMEOUT]:
            word |= fd.B_LINK_LOST
        s.board = word
        io[IO_T_BOARD] = fastio.monotonic(a.ts)
        if out & fd.N_PYTHON:
            io[IO_NEWS] = out
            io[IO_NOW] = now
            return BACK_BOARD
    return BACK_DONE


@njit(cache=True, inline="always")
def _frames_in(a):
    """Every bus's frames in, bus after bus (compiled; or all Python's: :data:`BACK_COLLECT`,
    after which Python sets ``io[IO_STAGE]`` on)."""
    io = a.io
    if io[IO_PY_BUSES]:
        io[IO_STAGE] = STAGE_KERNEL  # (Python reads them, then calls again)
        return BACK_COLLECT
    return _gather(a)


@njit(cache=True, inline="always")
def _inputs(a):
    """The cycle's inputs: its time, in RUN the stride period (with ``reference.phase:
    events``, the wearer's heel strikes'), the feedback's sample time, the history's row."""
    s, io, d = a.data.s[0], a.io, a.data
    dt = a.model.p[0].dt
    k = io[IO_K]
    s.sample_t = io[IO_T_SYNC]  # the feedback answers the last SYNC
    cy.clock(d, k, dt)
    if int(s.state) == RUN:
        phase_state = a.phase_state
        period = phase_state[trajectory.PH_PERIOD]
        if io[IO_EVENTS] and phase_state[trajectory.PH_COUNT] > 1:  # the wearer's cadence
            s.a_period = s.b_period = period
    s.hist = k if k < d.hist.shape[0] else -1.0


@njit(cache=True, inline="always")
def _frames_out(a):
    """Every bus's commands, SYNC and heartbeat out (compiled, each bus's in one system call,
    bus after bus; or Python's: :data:`BACK_SEND`) — the power stages off once SAFE has
    ramped out."""
    s, io = a.data.s[0], a.io
    if io[IO_PY_BUSES]:
        return BACK_SEND
    _command(a, s.state == SAFE and s.disable)
    io[IO_T_SYNC] = fastio.monotonic(a.ts)  # the drives sample now
    return BACK_DONE


@njit(cache=True)
def run(a):
    """One cycle (or the rest of one, from ``io[IO_STAGE]``); returns :data:`BACK_DONE`, or
    what Python must do (``BACK_*``; then it calls again, except after :data:`BACK_SEND`,
    the cycle's last step).

    ``a`` (:class:`CycleArgs`): the board's poll arguments (:func:`~firmware_bridge.
    fastdecode.poll`) and ``status_time[0]`` its last status (monotonic s); ``buses`` one
    :class:`BusArgs` per bus (compiled ports; empty where the buses are Python's); the cycle's
    ``model`` and ``data`` (:func:`exo_rt.runtime.cycle.build`); the recording ring's header
    (``rec_capacity`` 0: none); ``io``; the clock's scratch ``ts``; the gait phase's state."""
    io, d = a.io, a.data
    if io[IO_STAGE] == STAGE_START:
        back = _start(a)
        if back:
            return back
    if io[IO_STAGE] == STAGE_IN:
        back = _frames_in(a)
        if back:
            return back
    io[IO_T_IN] = fastio.monotonic(a.ts)  # (the frames in: compiled or Python's)
    _inputs(a)
    slot = 0
    if a.rec_capacity > 0:
        slot = record_slot(a.rec_header, a.rec_capacity)
        d.s[0].slot = slot
    a.step(a.model, d)  # (cy.step, called through its address: compiled apart)
    if a.rec_capacity > 0:
        record_commit(a.rec_header, a.rec_capacity, slot)
    io[IO_T_KERNEL] = fastio.monotonic(a.ts)
    io[IO_STAGE] = STAGE_START
    return _frames_out(a)  # (BACK_SEND: Python sends them, and the cycle is over)
