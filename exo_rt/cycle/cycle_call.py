"""The control cycle: one compiled call, the only cycle there is.

:func:`run` does: the board's poll (:func:`firmware_bridge.fastdecode.poll`) → the drives'
frames in (:func:`exo_rt.bus.pdo_cycle.gather`, bus after bus) → the cycle's inputs by
state (time; the stride period from the heel strikes) → the recording row's slot →
:func:`exo_rt.cycle.step.step` on the cycle's model and data → the row published → the
drives disabled once SAFE has ramped out → the commands, SYNC and heartbeat out
(:func:`exo_rt.bus.pdo_cycle.command`, each bus's RPDOs and SYNC in one system call, bus
after bus). Python then keeps only what is not numeric: state changes, events, the board's
heartbeat.

Where a part cannot be compiled — a bus whose protocol reads and writes its frames in Python
(the lockstep simulated bus, a python-can interface, the MIT and RMD-X protocols), a board
link on the simulated clock or pyserial's, injected faults — the cycle hands that part to
Python mid-cycle and resumes where it stopped (``io.stage``): :data:`BACK_POLL`,
:data:`BACK_COLLECT`, :data:`BACK_SEND` (:class:`exo_rt.runtime.cycle_io.CycleIO` does
them). It also hands back what Python owns: the board's rare frames and heel strikes
(:data:`BACK_BOARD`), a bus's EMCY, error and other devices' frames (:data:`BACK_FRAMES`).

Why one call: each compiled call costs its dispatcher's work on every argument and, on a
machine whose caches the rest of the machine keeps cold between two cycles, ~2 µs more; the
Python between four calls was ~140 interpreted lines a cycle (docs/performance.md, "The
cycle in one compiled call"). Its arguments never change within a run; what changes per
cycle is in ``io`` (one :data:`IO` record). They travel as one object, :class:`CycleArgs`
(a record of :mod:`exo_rt.structs`, made once by :func:`prepare`; every record it holds is
declared by name: :class:`BoardPoll`, :class:`~exo_rt.bus.pdo_cycle.CycleBus`, the cycle's
model and data): numba's dispatcher unboxes every array of an argument on every call
(~0.1 µs each on a cold cache), but a structref in one step.
"""

from __future__ import annotations

import inspect

import numba
import numpy as np
from numba import types
from numba.extending import overload

from exo_rt import structs
from exo_rt.bus import cia402 as c
from exo_rt.bus import fastio, pdo_cycle
from exo_rt.control import trajectory
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import RUN, SAFE
from exo_rt.jit import njit
from firmware_bridge import fastdecode as fd

# io: the float64 values the control thread and the compiled cycle share, one record by name
IO = np.dtype([
    ("k", "f8"),  # in: the cycle's index
    ("stage", "f8"),  # where the cycle resumes: STAGE_START, STAGE_IN, STAGE_KERNEL
    ("t_sync", "f8"),  # s, monotonic: when the last SYNC left (the feedback's sample time;
    # the wall clock's, which the frames' time stamps compare with, is the bus's sync_time)
    ("events", "f8"),  # 1: the stride period follows the wearer's heel strikes
    ("board", "f8"),  # 1: a board link to poll
    ("link_timeout", "f8"),  # s without a board status: link lost
    ("news", "f8"),  # out: what the board's poll brought (fastdecode.N_*), for Python
    ("now", "f8"),  # out: when (monotonic s)
    ("pending", "f8"),  # out: frames Python must take (the bus's python rows)
    ("deadline", "f8"),  # monotonic s: the frames in wait until then at most (0.7 periods)
    # out, monotonic s: when the cycle began and each part ended (the board's poll, the frames
    # in, the cycle kernel; the commands' end is t_sync) — where a cycle's time went
    # (tools/bench_rt_parts.py); a clock read costs ~0.03 µs
    ("t_start", "f8"), ("t_board", "f8"), ("t_in", "f8"), ("t_kernel", "f8"),
    ("bus", "f8"),  # the bus whose frames are being gathered (out: whose Python must take)
    ("py_board", "f8"),  # 1: the board's link is Python's to poll (BACK_POLL)
    ("py_buses", "f8"),  # 1: the buses are Python's to read and write (BACK_COLLECT, BACK_SEND)
])
IO_WIDTH = len(IO.names)  # (all float64: Python may hold io as a float64 vector, io_slot's)
STAGE_START, STAGE_IN, STAGE_KERNEL = 0.0, 1.0, 2.0  # io's stage: where the cycle resumes


def io_slot(name: str) -> int:
    """The place of io's field ``name`` in its float64 vector (Python's view of the record)."""
    return IO.names.index(name)


# Python's indices into the io vector, by the record's field names
IO_K, IO_STAGE, IO_T_SYNC, IO_EVENTS = (io_slot(f) for f in ("k", "stage", "t_sync", "events"))
IO_BOARD, IO_LINK_TIMEOUT, IO_NEWS, IO_NOW = (io_slot(f) for f in ("board", "link_timeout",
                                                                    "news", "now"))
IO_PENDING, IO_DEADLINE, IO_BUS = (io_slot(f) for f in ("pending", "deadline", "bus"))
IO_T_START, IO_T_BOARD, IO_T_IN, IO_T_KERNEL = (io_slot(f) for f in ("t_start", "t_board",
                                                                      "t_in", "t_kernel"))
IO_PY_BOARD, IO_PY_BUSES = io_slot("py_board"), io_slot("py_buses")

# what run returns: done, or what Python must do before it calls again — the board's news
# (BACK_BOARD), a bus's frames for Python (BACK_FRAMES: io.bus's), the board's link to
# poll (BACK_POLL), every bus's frames to read (BACK_COLLECT) or commands to send (BACK_SEND)
BACK_DONE, BACK_BOARD, BACK_FRAMES, BACK_POLL, BACK_COLLECT, BACK_SEND = 0, 1, 2, 3, 4, 5
DEADLINE_PERIODS = 0.7  # the drives' answers are waited for this much of a period at most
NO_RECORDS = np.zeros(8, np.int64)  # a recording ring's header where nothing is recorded


def new_io() -> np.ndarray:
    """A zero io record (an array of one)."""
    return np.zeros(1, IO)


def io_record(io: np.ndarray) -> np.ndarray:
    """``io`` as the record the compiled cycle reads: an :data:`IO` array of one, or the same
    memory viewed so where Python holds it as its float64 vector (:data:`IO_WIDTH` values)."""
    if io.dtype == IO:
        return io
    if io.dtype != np.float64 or io.shape != (IO_WIDTH,) or not io.flags.c_contiguous:
        raise TypeError(f"io: {IO_WIDTH} contiguous float64 values, or an IO record")
    return io.view(IO)


class BoardPollType(structs.Struct):
    """The numba type of :class:`BoardPoll`."""


class BoardPoll(structs.Record):
    """The board's poll on its descriptor: :func:`firmware_bridge.fastdecode.poll`'s
    arguments, by its parameters' names (:data:`POLL_FIELDS`)."""


@njit(cache=True)
def _new_poll(*fields):
    return BoardPoll(*fields)


# fd.poll's parameters, in its order (its ``st``, the decoder's state, is ``state`` here: a
# structref's constructor has a variable of that name)
POLL_FIELDS = tuple("state" if p == "st" else p
                    for p in inspect.signature(fd.poll.py_func).parameters)
structs.declare(BoardPollType, BoardPoll, POLL_FIELDS, _new_poll)


def board_poll(args: tuple) -> BoardPoll:
    """The board link's compiled poll (:meth:`firmware_bridge.link.BoardLink.compiled_poll`:
    the arguments of :func:`~firmware_bridge.fastdecode.poll`, in its order) as its record."""
    return BoardPoll(**dict(zip(POLL_FIELDS, args, strict=True)))


class CycleArgsType(structs.Struct):
    """The numba type of :class:`CycleArgs`."""


class CycleArgs(structs.Record):
    """:func:`run`'s arguments in one object (made by :func:`prepare`)."""


@njit(cache=True)
def _new_args(*fields):
    return CycleArgs(*fields)


# the board's poll (BoardPoll, or None: Python's) and its last status's time (monotonic s, an
# array of one); the buses (a tuple of pdo_cycle.CycleBus, or None: Python's); the cycle's
# model and data; the recording ring's header and capacity (0: none); io (an IO record); the
# clock's scratch; the gait phase's state; the step (cy.STEP_VALUE, which prepare adds: run
# calls cy.step through its address, so that the step compiles apart — another process may
# compile it meanwhile — and its machine code is not emitted a second time into run's)
FIELDS = ("board", "status_time", "buses", "model", "data", "rec_header", "rec_capacity", "io",
          "ts", "phase_state", "step")
structs.declare(CycleArgsType, CycleArgs, FIELDS, _new_args)


def prepare(**args) -> CycleArgs:
    """:func:`run`'s arguments — every field of :data:`FIELDS` but the step, which this adds,
    by name; ``board`` a :class:`BoardPoll` or its arguments' tuple, None with ``buses`` None
    (both Python's); ``buses`` a tuple of :class:`~exo_rt.bus.pdo_cycle.CycleBus`; ``io`` an
    :data:`IO` record or its float64 vector — as one :class:`CycleArgs`, and :func:`run` for
    it compiled, or loaded from numba's cache, now: before the drives are enabled, whose
    heartbeat watchdog would not wait for a compiler."""
    args = _arguments(args)
    bundle = CycleArgs(**args, step=cy.STEP_VALUE)
    run.compile((numba.typeof(bundle),))
    return bundle


def _arguments(args: dict) -> dict:
    board = args.get("board")
    if isinstance(board, tuple):
        args["board"] = board_poll(board)
    args["io"] = io_record(args["io"])
    if args.get("buses") is not None:
        args["buses"] = tuple(args["buses"])
    return args


def argument_types(drives: list[int]) -> list[tuple[str, types.Type]]:
    """:func:`run`'s argument's fields and their numba types, as :data:`FIELDS` names them,
    for CiA 402 buses of ``drives[b]`` drives each (on no socket; the types are a real
    bus's, :func:`exo_rt.bus.pdo_cycle.io_arguments`; none: the buses are Python's) — the
    cycle's model and data as declared (:data:`exo_rt.cycle.step.CYCLE_MODEL`, ``DATA``)."""
    buses = tuple(pdo_cycle.io_arguments(n, fastio.WIRE_UDP) for n in drives) or None
    board = no_board()  # (its record's constructor compiled: a run's board link makes one)
    args = _arguments(dict(board=board if buses else None, status_time=np.zeros(1),
                           buses=buses, rec_header=NO_RECORDS, rec_capacity=0, io=new_io(),
                           ts=np.zeros(2, np.int64), phase_state=np.zeros(3)))
    typed = {name: numba.typeof(value) for name, value in args.items()}
    typed.update(model=cy.CYCLE_MODEL, data=cy.CYCLE_DATA, step=cy.STEP)
    return [(name, typed[name]) for name in FIELDS]


def warm_up(drives: list[int]) -> None:
    """Compile :func:`run` ahead of a run — from its arguments' types (:func:`argument_types`):
    neither a cycle nor its step is made or compiled here (``cy.warm`` compiles the step,
    maybe in another process meanwhile) — for CiA 402 buses of ``drives[b]`` drives each (the
    compiled cycle depends on the number of buses, not of drives; none: the buses are
    Python's)."""
    fields = argument_types(drives)
    _new_args.compile((types.BaseTuple.from_types([t for _, t in fields]),))  # (*fields)
    run.compile((CycleArgsType(fields),))


def no_board() -> BoardPoll:
    """Poll arguments of the types a board's have (one compiled cycle for both), never
    polled: io's ``board`` = 0."""
    from firmware_bridge.link import FIONREAD, READ_SIZE

    state, partial, other, raw = fd.new_state()
    return BoardPoll(fd=-1, request=FIONREAD, count=np.zeros(1, np.int32),
                     data=np.zeros(READ_SIZE, np.uint8), state=state, partial=partial,
                     other=other, raw=raw, contact=200.0)


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
    """Every compiled bus's frames in, from ``io.bus`` on; :data:`BACK_FRAMES` where
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
        io, buses = a.io[0], a.buses
        b = int(io.bus)
        while b < len(buses):
            bus = buses[b]
            pending = pdo_cycle.gather(bus.rx, bus.tap, bus.model, bus.data)
            if pending:
                io.pending = pending
                return BACK_FRAMES  # (Python takes them, then calls again: gather goes on)
            if bus.data.done[0]:
                b += 1
                io.bus = b
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
        b = a.board
        return fd.poll(b.fd, b.request, b.count, b.data, b.state, b.partial, b.other, b.raw,
                       b.contact)
    return impl


@njit(cache=True, inline="always")
def _start(a):
    """The cycle's start: its clock, the deadline of the frames in, the board's poll (compiled
    on a descriptor; else handed to Python: :data:`BACK_POLL`)."""
    s, io = a.data.s[0], a.io[0]
    now = fastio.monotonic(a.ts)
    io.t_start = now
    io.deadline = now + DEADLINE_PERIODS * a.model.p[0].dt
    io.stage = STAGE_IN
    io.bus = 0.0
    _begin(a.buses, io.deadline)
    io.t_board = now
    if io.py_board:
        return BACK_POLL
    if io.board:
        out = _poll(a, now)
        status_time = a.status_time
        if out & fd.N_STATUS:
            status_time[0] = now
        word = out >> fd.WORD_SHIFT
        if now - status_time[0] > io.link_timeout:
            word |= fd.B_LINK_LOST
        s.board = word
        io.t_board = fastio.monotonic(a.ts)
        if out & fd.N_PYTHON:
            io.news = out
            io.now = now
            return BACK_BOARD
    return BACK_DONE


@njit(cache=True, inline="always")
def _frames_in(a):
    """Every bus's frames in, bus after bus (compiled; or all Python's: :data:`BACK_COLLECT`,
    after which Python sets ``io.stage`` on)."""
    io = a.io[0]
    if io.py_buses:
        io.stage = STAGE_KERNEL  # (Python reads them, then calls again)
        return BACK_COLLECT
    return _gather(a)


@njit(cache=True, inline="always")
def _inputs(a):
    """The cycle's inputs: its time, in RUN the stride period (with ``reference.phase:
    events``, the wearer's heel strikes'), the feedback's sample time, the history's row."""
    s, io, d = a.data.s[0], a.io[0], a.data
    dt = a.model.p[0].dt
    k = io.k
    s.sample_t = io.t_sync  # the feedback answers the last SYNC
    cy.clock(d, k, dt)
    if int(s.state) == RUN:
        phase_state = a.phase_state
        period = phase_state[trajectory.PH_PERIOD]
        if io.events and phase_state[trajectory.PH_COUNT] > 1:  # the wearer's cadence
            seg = d.seg[0]
            seg.a_period = seg.b_period = period
    s.hist = k if k < d.hist.shape[0] else -1.0


@njit(cache=True, inline="always")
def _frames_out(a):
    """Every bus's commands, SYNC and heartbeat out (compiled, each bus's in one system call,
    bus after bus; or Python's: :data:`BACK_SEND`) — the power stages off once SAFE has
    ramped out."""
    s, io = a.data.s[0], a.io[0]
    if io.py_buses:
        return BACK_SEND
    _command(a, s.state == SAFE and s.disable)
    io.t_sync = fastio.monotonic(a.ts)  # the drives sample now
    return BACK_DONE


@njit(cache=True)
def run(a):
    """One cycle (or the rest of one, from ``io.stage``); returns :data:`BACK_DONE`, or
    what Python must do (``BACK_*``; then it calls again, except after :data:`BACK_SEND`,
    the cycle's last step).

    ``a`` (:class:`CycleArgs`): the board's poll (:class:`BoardPoll`) and
    ``status_time[0]`` its last status (monotonic s); ``buses`` one :class:`~exo_rt.bus.
    pdo_cycle.CycleBus` per bus (None where the buses are Python's); the cycle's ``model``
    and ``data`` (:func:`exo_rt.cycle.step.build`); the recording ring's header
    (``rec_capacity`` 0: none); ``io`` (one :data:`IO` record); the clock's scratch ``ts``;
    the gait phase's state."""
    io, d = a.io[0], a.data
    if io.stage == STAGE_START:
        back = _start(a)
        if back:
            return back
    if io.stage == STAGE_IN:
        back = _frames_in(a)
        if back:
            return back
    io.t_in = fastio.monotonic(a.ts)  # (the frames in: compiled or Python's)
    _inputs(a)
    slot = 0
    if a.rec_capacity > 0:
        slot = record_slot(a.rec_header, a.rec_capacity)
        d.s[0].slot = slot
    a.step(a.model, d)  # (cy.step, called through its address: compiled apart)
    if a.rec_capacity > 0:
        record_commit(a.rec_header, a.rec_capacity, slot)
    io.t_kernel = fastio.monotonic(a.ts)
    io.stage = STAGE_START
    return _frames_out(a)  # (BACK_SEND: Python sends them, and the cycle is over)
