"""A CiA 402 bus's cycle in compiled code, on records: the bus's :class:`BusModel` (fixed for
the run), its :class:`BusData` (what a cycle reads and writes), a port's frame tables
(:class:`exo_rt.bus.fastio.FrameBatch`) and the recording's :class:`exo_rt.bus.fastio.Tap`.

- :func:`take_tpdos`: a frame table's rows into the drives' arrays; :func:`collect_flags`:
  the flags of what did not come; :func:`take_frames`: one receive's rows and, at the end of
  the cycle's frames, the flags — the step every port's collection repeats, python-can's
  included (Python fills the table from its messages);
- :func:`put_rpdos`: the current commands into RPDO rows (every port's one encoder);
- on a port whose batches are compiled (socketcan, udp_multicast), the whole of a cycle's
  I/O in one call each way: :func:`gather` (receive, record, :func:`take_frames`) and
  :func:`command` (encode the RPDOs, send them with the SYNC in one system call, record).

The arithmetic is that of :class:`exo_rt.bus.drives.Drives`, in the same order and the same
IEEE operations (a controller replay stays bit-identical): joint angle = increments × rad per
increment, current = the mapped unit × A per unit, the glitch, saturation and staleness
flags, the heartbeat's time; and on the way out the encoder clamp — NaN/Inf → 0, the drive's
peak current, then the mapped target's integer range — the last line of the current limit.
Frames the compiled path does not own (EMCY, CAN error frames, another device's frames) are
handed back to Python by row index. The mapping of each drive is a field table
(:mod:`exo_rt.bus.pdo_fields`).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt import structs
from exo_rt.bus import fastio, pdo
from exo_rt.bus.flags import (
    F_DUPLICATE,
    F_FAULT,
    F_FOREIGN,
    F_GLITCH,
    F_HEARTBEAT,
    F_LATE,
    F_MALFORMED,
    F_MISSING,
    F_NOT_ENABLED,
    F_SATURATED,
)
from exo_rt.bus.pdo_fields import (
    RPDO_CONTROLWORD,
    RPDO_TARGET,
    TPDO_CURRENT,
    TPDO_POSITION,
    TPDO_QUANTITIES,
    TPDO_STATUSWORD,
    TPDO_VELOCITY,
    read,
    rpdo_fields,
    tpdo_fields,
    write,
)
from exo_rt.jit import njit

TPDO1, HEARTBEAT, EMCY, SYNC = 0x180, 0x700, 0x080, 0x080  # COB-ID bases (CiA 301)
NMT, RPDO1, RPDO4, SDO_REQUEST = 0x000, 0x200, 0x500, 0x600  # frames only a master sends
# a bus's foreign-master watch (BusData.foreign, int64[3]): the controller's node id, frames
# seen from another master this run, the first one's COB-ID (−1: none)
FOREIGN_OWN_NODE, FOREIGN_COUNT, FOREIGN_FIRST = range(3)
# the columns of BusModel.scale: rad per increment, A per unit, the largest step between two
# samples (rad), the speed limit (rad/s), the peak current (A)
SCALE_RAD, SCALE_AMP, SCALE_STEP, SCALE_SPEED, SCALE_PEAK = range(5)
SETTLE_CYCLES = 2  # cycles with an answer after a gap before the glitch check is its own again


# ---------------------------------------------------------------- the bus's records
class BusModelType(structs.Struct):
    """The numba type of :class:`BusModel`."""


class BusModel(structs.Record):
    """What a bus's cycle reads and never writes (made once, by :func:`bus_model`), per drive
    k of n: ``node_slot`` (int64[128]: node id → k, −1: not ours), ``tx``/``rx`` (the TPDO's
    and RPDO's field tables, :mod:`exo_rt.bus.pdo_fields`) and ``tx_size``/``rx_size`` (their
    bytes), ``cob`` (each RPDO's COB-ID), ``scale`` (n × 5, :data:`SCALE_RAD` …), ``permille``
    (target torque ‰ per A), ``period`` (s), ``heartbeat_timeout`` (s without a drive's
    heartbeat: :data:`F_HEARTBEAT`; 0: not watched), ``own_node`` (the controller's node
    id)."""


@njit(cache=True)
def _new_model(*fields):
    return BusModel(*fields)


structs.declare(BusModelType, BusModel,
                ("node_slot", "tx", "tx_size", "rx", "rx_size", "cob", "scale", "permille",
                 "period", "heartbeat_timeout", "own_node"), _new_model)


class BusDataType(structs.Struct):
    """The numba type of :class:`BusData`."""


class BusData(structs.Record):
    """What a bus's cycle reads and writes (made once, by :func:`bus_data`), per drive (n):
    ``seen`` (answered this cycle), ``flags`` (``F_*``), ``statusword``, ``position`` (rad),
    ``current`` (A), ``rx_time`` (its answer's stamp, s), ``sampled`` (the SYNC that answer
    answered, s), ``trusted``/``settle`` (the last answer's SYNC before a gap, and for how
    many more cycles), ``malformed_count``, ``missing_count``, ``extras`` (n × 3 raw: velocity,
    digital inputs, error code), ``heartbeat_time`` (s; NaN: none yet), ``commanded`` (last
    commands, A, after the clamp), ``controlword``; per bus: ``foreign`` (the foreign-master
    watch, :data:`FOREIGN_COUNT` …), ``hb`` (the controller's heartbeat counter,
    :func:`sync_rows`), ``now`` (the newest frame's stamp), ``expect`` (when the next cycle's
    TPDOs are due), ``sync_time`` (the last SYNC's send time, wall clock s; NaN: none),
    ``late_before`` (this cycle's: an answer stamped before it answers an older SYNC),
    ``deadline`` (monotonic s the frames are waited for; < 0: until the queue is empty) and
    ``start`` (1: the next :func:`take_frames` starts a cycle) — both set by :func:`begin` —,
    ``done`` (1: the cycle's frames are in), ``python_rows`` (the rows handed back to
    Python)."""


@njit(cache=True)
def _new_data(*fields):
    return BusData(*fields)


structs.declare(BusDataType, BusData,
                ("seen", "flags", "statusword", "position", "current", "rx_time", "sampled",
                 "trusted", "settle", "malformed_count", "missing_count", "extras",
                 "heartbeat_time", "commanded", "controlword", "foreign", "hb", "now",
                 "expect", "sync_time", "late_before", "deadline", "start", "done",
                 "python_rows"),
                _new_data)


class CycleBusType(structs.Struct):
    """The numba type of :class:`CycleBus`."""


class CycleBus(structs.Record):
    """One bus's part of the compiled cycle (:mod:`exo_rt.cycle.cycle_call`): the receiving
    and sending frame tables (``rx``, ``tx``), the recording's ``tap``, the bus's ``model`` and
    ``data``, and ``current``, the commands (A) read in place — :func:`gather`'s and
    :func:`command`'s arguments by name. A tuple of these is a tuple of pointers, which the
    cycle indexes at run time without copying a bus's records."""


@njit(cache=True)
def _new_cycle_bus(*fields):
    return CycleBus(*fields)


structs.declare(CycleBusType, CycleBus, ("rx", "tx", "tap", "model", "data", "current"),
                _new_cycle_bus)


def bus_model(nodes: np.ndarray, profiles: list[pdo.DriveProfile], torque_limits: list,
              scale: np.ndarray, permille: np.ndarray, *, period: float,
              heartbeat_timeout: float, own_node: int) -> BusModel:
    """A bus's model from its drives' node ids, PDO mappings and units (``torque_limits``:
    each target torque's range, ‰; ``scale``: n × 5, :data:`SCALE_RAD` …)."""
    tpdos = [pdo.Layout(p.tpdo) for p in profiles]
    rpdos = [pdo.Layout(p.rpdo) for p in profiles]
    rx = np.stack([rpdo_fields(r) for r in rpdos])
    target = rx[:, RPDO_TARGET]
    target["low"], target["high"] = np.array(torque_limits, np.int64).reshape(-1, 2).T
    node_slot = np.full(128, -1, np.int64)
    node_slot[np.asarray(nodes, np.int64) & 0x7F] = np.arange(len(nodes))
    return BusModel(node_slot=node_slot, tx=np.stack([tpdo_fields(t) for t in tpdos]),
                    tx_size=np.array([t.size for t in tpdos], np.int64), rx=rx,
                    rx_size=np.array([r.size for r in rpdos], np.int64),
                    cob=RPDO1 + np.asarray(nodes, np.int64),
                    scale=np.ascontiguousarray(scale, np.float64),
                    permille=np.ascontiguousarray(permille, np.float64), period=float(period),
                    heartbeat_timeout=float(heartbeat_timeout), own_node=int(own_node))


def bus_data(n: int, capacity: int, own_node: int, heartbeat_every: int = 0,
             controlword: int = 0) -> BusData:
    """A bus's data for ``n`` drives, frame tables of ``capacity`` rows received, the
    controller's heartbeat every ``heartbeat_every`` SYNCs (0: none)."""
    z, zi = np.zeros(n), np.zeros(n, np.int64)
    return BusData(seen=zi.copy(), flags=zi.copy(), statusword=zi.copy(), position=z.copy(),
                   current=z.copy(), rx_time=z.copy(), sampled=z.copy(), trusted=z.copy(),
                   settle=zi.copy(), malformed_count=zi.copy(), missing_count=zi.copy(),
                   extras=np.zeros((n, 3), np.int64), heartbeat_time=np.full(n, np.nan),
                   commanded=z.copy(), controlword=np.full(n, controlword, np.int64),
                   foreign=np.array([own_node, 0, -1], np.int64),
                   hb=np.array([heartbeat_every, 0, 0], np.int64), now=np.zeros(1),
                   expect=np.full(1, np.nan), sync_time=np.full(1, np.nan),
                   late_before=np.full(1, np.nan), deadline=np.full(1, -1.0),
                   start=np.zeros(1, np.int64), done=np.ones(1, np.int64),
                   python_rows=np.zeros(capacity, np.int64))


# ---------------------------------------------------------------- frames in
@njit(cache=True)
def take_tpdos(batch, n, model, data):
    """Rows 0 … n−1 of a received frame table into the drives' arrays (``data.now[0]``: the
    newest frame time seen); the rows Python must handle (EMCY, error frames, frames of other
    devices) are listed in ``data.python_rows``; returns their count.

    The controller is the only master on its buses, and a port never hands it its own
    frames: a SYNC, an NMT command or a heartbeat with the controller's node id
    (``model.own_node``) read here flags every drive of the bus :data:`F_FOREIGN`, an SDO
    request or an RPDO addressed to one of its drives flags that drive; each is counted in
    ``data.foreign`` with the first one's COB-ID (the safety check's ``foreign_master``).
    Another node's SYNC makes the drives answer twice a cycle (:data:`F_DUPLICATE`); its SDO
    write may change a drive's mode unseen otherwise.

    The glitch check: a joint moves at most its speed limit, plus a period, over the time
    between the SYNCs its answers answer — the drive samples its encoder at the SYNC — not
    between their arrivals: after the controller itself was held up, the answer to the SYNC
    before the hold-up arrives late and the next one a fraction of a period after it, with
    the whole hold-up's motion between them. ``data.late_before[0]`` is the last SYNC's send
    time, the sample instant of every answer accepted now; ``sampled`` keeps it per drive.
    While ``settle`` counts down after a gap in a drive's answers, the bound runs from the
    last answer before the gap (``trusted``): an answer read after a gap may be an older
    SYNC's (:func:`collect_flags`)."""
    ids, bflags, lengths, frames, times = (batch.arbitration_id, batch.flags, batch.length,
                                           batch.data, batch.time)
    node_slot, tx, tx_size, scale = model.node_slot, model.tx, model.tx_size, model.scale
    period, own_heartbeat = model.period, HEARTBEAT + model.own_node
    seen, flags, statusword, position = data.seen, data.flags, data.statusword, data.position
    current, rx_time, sampled, trusted = data.current, data.rx_time, data.sampled, data.trusted
    settle, extras, commanded = data.settle, data.extras, data.commanded
    now, python_rows, foreign = data.now, data.python_rows, data.foreign
    late_before = data.late_before[0]
    pending = 0
    for r in range(n):
        if bflags[r] & fastio.FB_ERROR:
            python_rows[pending] = r
            pending += 1
            continue
        t = times[r]
        arb = ids[r]
        if t > now[0]:
            now[0] = t
        base, node = arb & 0x780, arb & 0x7F
        k = node_slot[node]
        if not bflags[r] & fastio.FB_EXTENDED and (
                arb == NMT or arb == SYNC or arb == own_heartbeat):
            for d in range(flags.shape[0]):  # another master, for the whole bus
                flags[d] |= F_FOREIGN
            _foreign(foreign, arb)
            continue
        if k >= 0 and not bflags[r] & fastio.FB_EXTENDED and (
                base == SDO_REQUEST or RPDO1 <= base <= RPDO4):
            flags[k] |= F_FOREIGN  # another master writes to one of our drives
            _foreign(foreign, arb)
            continue
        if k < 0:
            python_rows[pending] = r  # another device's frame (a listener's)
            pending += 1
            continue
        if base == TPDO1:
            if lengths[r] != tx_size[k]:
                flags[k] |= F_MALFORMED
                data.malformed_count[k] += 1
                continue
            if t < late_before:
                flags[k] |= F_LATE  # it answers an earlier SYNC: stale
                continue
            if seen[k]:
                flags[k] |= F_DUPLICATE
            f = tx[k]
            sw = read(frames, r, f[TPDO_STATUSWORD])
            statusword[k] = sw
            q = read(frames, r, f[TPDO_POSITION]) * scale[k, SCALE_RAD]
            since = trusted[k] if settle[k] > 0 else sampled[k]
            if rx_time[k] > 0 and since == since and abs(q - position[k]) > max(
                    scale[k, SCALE_STEP],
                    scale[k, SCALE_SPEED] * (late_before - since + period)):  # (NaN: none)
                flags[k] |= F_GLITCH
            position[k] = q
            i = read(frames, r, f[TPDO_CURRENT]) * scale[k, SCALE_AMP]
            current[k] = i
            for x in range(TPDO_VELOCITY, TPDO_QUANTITIES):
                if f[x].offset >= 0:
                    extras[k, x - TPDO_VELOCITY] = read(frames, r, f[x])
            if sw & 0x6F == 0x27 and abs(commanded[k] - i) > 0.2 * scale[k, SCALE_PEAK]:
                flags[k] |= F_SATURATED  # OPERATION ENABLED, short of the command
            rx_time[k] = t
            sampled[k] = late_before
            seen[k] = 1
        elif base == HEARTBEAT:
            if lengths[r] == 1 and frames[r, 0] & 0x80 == 0:
                data.heartbeat_time[k] = t
        elif base == EMCY and arb != SYNC:
            python_rows[pending] = r
            pending += 1
    return pending


@njit(cache=True, inline="always")
def _foreign(foreign, arb):
    """Count a frame of another master, keeping the first one's COB-ID."""
    if foreign[FOREIGN_COUNT] == 0:
        foreign[FOREIGN_FIRST] = arb
    foreign[FOREIGN_COUNT] += 1


@njit(cache=True)
def collect_flags(model, data):
    """The flags a cycle's frames leave per drive (missing, fault, not enabled, heartbeat
    lost); ``data.expect[0]``: when the next cycle's TPDOs are due (the newest one seen + a
    period).

    A drive that did not answer this cycle leaves the sample instant of its last answer
    (``sampled``: the SYNC it answered) in ``trusted`` and :data:`SETTLE_CYCLES` in ``settle``:
    the answers that follow a gap may answer older SYNCs (a drive, or a machine, held up, then
    catching up), so until it has answered in that many cycles its glitch check bounds the
    motion from the last answer before the gap (:func:`take_tpdos`)."""
    seen, statusword, rx_time, flags = data.seen, data.statusword, data.rx_time, data.flags
    heartbeat_time, sampled, trusted, settle = (data.heartbeat_time, data.sampled,
                                                data.trusted, data.settle)
    now, timeout = data.now[0], model.heartbeat_timeout
    newest = -1.0
    for k in range(seen.shape[0]):
        last = heartbeat_time[k]
        if timeout > 0 and now - (0.0 if last != last else last) > timeout:
            flags[k] |= F_HEARTBEAT  # (NaN: none yet)
        sw = statusword[k]
        if not seen[k]:
            flags[k] |= F_MISSING
            data.missing_count[k] += 1
            if settle[k] == 0:
                trusted[k] = sampled[k]
            settle[k] = SETTLE_CYCLES
        else:
            if settle[k] > 0:
                settle[k] -= 1
            newest = max(newest, rx_time[k])
            if sw & 0x4F == 0x08:  # FAULT
                flags[k] |= F_FAULT
            elif sw & 0x6F != 0x27:  # not OPERATION ENABLED
                flags[k] |= F_NOT_ENABLED
    if newest >= 0.0:
        data.expect[0] = newest + model.period


@njit(cache=True)
def begin(data, deadline):
    """A cycle's collection starts: its frames are waited for until ``deadline`` (monotonic
    s; < 0: until the queue is empty — lockstep)."""
    data.deadline[0] = deadline
    data.start[0] = 1
    data.done[0] = 0


@njit(cache=True, inline="always")
def _all_seen(seen):
    """Every drive has answered (a loop: numba's ``ndarray.all`` is a kernel of its own)."""
    for i in range(seen.shape[0]):
        if not seen[i]:
            return False
    return True


@njit(cache=True)
def take_frames(batch, n, model, data):
    """One receive's rows 0 … n−1 (:func:`take_tpdos`) within a cycle's collection
    (:func:`begin`), which polls on until every drive has answered or the deadline passes —
    or, without one, until the queue is empty (a table not filled whole). Its first call
    starts the cycle: ``seen`` and ``flags`` cleared, ``late_before`` from the last SYNC's
    send time (where the bus's clock is not the wall clock — none known —, half a period
    before the expected answers). The call that finishes it sets ``done`` and the flags of
    what did not come (:func:`collect_flags`). Returns the rows Python must take
    (``data.python_rows``)."""
    if data.start[0]:
        data.start[0] = 0
        data.seen[:] = 0
        data.flags[:] = 0
        sync = data.sync_time[0]
        data.late_before[0] = data.expect[0] - 0.5 * model.period if sync != sync else sync
    pending = take_tpdos(batch, n, model, data)
    deadline = data.deadline[0]
    if n < batch.arbitration_id.shape[0] and (deadline < 0.0 or _all_seen(data.seen)
                                              or fastio.monotonic(batch.clock) >= deadline):
        data.done[0] = 1
        collect_flags(model, data)
    return pending


@njit(cache=True)
def gather(batch, tap, model, data):
    """A cycle's TPDOs in one compiled call, on a socket the batches can read
    (``batch.fd``; :class:`exo_rt.bus.port.CompiledBatches`): ``recvmmsg`` → the recording
    ring (``tap``) → :func:`take_frames`, from :func:`begin` until the cycle's frames are in
    (``data.done[0]``), without returning to Python in between — or early, when the last
    table read has rows for Python (EMCY, error frames, other devices' frames; their count
    is returned): Python handles them and calls again until ``data.done[0]`` is 1. Called
    again once they are in (a caller resuming after Python took the last table's rows), it
    does nothing: the cycle's flags are collected once."""
    if data.done[0]:
        return 0
    while True:
        n = fastio.receive(batch.fd, batch)
        if n and tap.capacity > 0:
            fastio.tap(tap, batch, n, True)
        pending = take_frames(batch, n, model, data)
        if pending or data.done[0]:
            return pending


# ---------------------------------------------------------------- commands out
@njit(cache=True)
def put_rpdos(model, data, current_A, batch):
    """Each drive's RPDO (controlword + target torque ‰) into rows 0 … n−1 of ``batch``: the
    current clamped to the drive's peak (NaN/Inf → 0: the last line of the current limit),
    rounded half to even, clamped to the target's integer range; returns n."""
    ids, bflags, lengths, frames = batch.arbitration_id, batch.flags, batch.length, batch.data
    cob, rx, rx_size, scale, permille = (model.cob, model.rx, model.rx_size, model.scale,
                                         model.permille)
    commanded, controlword = data.commanded, data.controlword
    n = cob.shape[0]
    for k in range(n):
        i = current_A[k]
        if not math.isfinite(i):
            i = 0.0
        peak = scale[k, SCALE_PEAK]
        i = min(max(i, -peak), peak)
        commanded[k] = i
        f = rx[k]
        t = np.int64(np.rint(i * permille[k]))
        t = min(max(t, f[RPDO_TARGET].low), f[RPDO_TARGET].high)
        for b in range(rx_size[k]):
            frames[k, b] = 0
        write(frames, k, f[RPDO_CONTROLWORD], controlword[k] & 0xFFFF)
        write(frames, k, f[RPDO_TARGET], t)
        ids[k] = cob[k]
        bflags[k] = 0
        lengths[k] = rx_size[k]
    return n


@njit(cache=True)
def sync_rows(hb):
    """The frames after the RPDOs this cycle: 1 (the SYNC), or 2 (the SYNC and the
    controller's heartbeat, every ``hb[0]`` cycles; ``hb[1]`` counts down, ``hb[2]`` holds it
    back while set: the drives' consumer, 1016h, stops them when it stays away)."""
    if hb[0]:
        hb[1] -= 1
        if hb[1] <= 0 and not hb[2]:
            hb[1] = hb[0]
            return 2
    return 1


@njit(cache=True)
def command(batch, tap, model, data, current_A):
    """A cycle's commands in one compiled call and one ``sendmmsg`` on ``batch.fd``: each
    drive's RPDO (:func:`put_rpdos`: the encoder's clamp, the last line of the current limit)
    in rows 0 … n−1, then the rows the table already holds after them — the SYNC and, when
    due, the controller's heartbeat (:func:`sync_rows`); the frames sent are copied into the
    recording ring. Returns the send time, also ``data.sync_time[0]`` (wall clock, s: the
    drives sample at the SYNC)."""
    n = put_rpdos(model, data, current_A, batch)
    n += sync_rows(data.hb)
    t = fastio.send(batch.fd, batch, n)
    if tap.capacity > 0:
        fastio.tap(tap, batch, n, False)
    data.sync_time[0] = t
    return t


# ---------------------------------------------------------------- compiled ahead of a run
def io_arguments(n: int, wire: int) -> CycleBus:
    """A bus of ``n`` drives of the default mapping on no socket, as the compiled cycle takes
    one (:meth:`exo_rt.bus.drives.Drives.compiled_cycle`: the receiving and the sending frame
    tables, the tap, the model, the data, the commands), of the types a real bus's have: for
    compiling ahead of a run (a call fails harmlessly on the tables made here)."""
    profiles = [pdo.DEFAULT_PROFILE] * n
    limits = [(-32768, 32767)] * n
    model = bus_model(np.arange(1, n + 1), profiles, limits, np.ones((n, 5)), np.ones(n),
                      period=1e-3, heartbeat_timeout=0.3, own_node=127)
    rx = fastio.FrameBatch(max(32, 4 * n), wire)
    tx = fastio.FrameBatch(n + 2, wire, ("127.0.0.1", 9) if wire == fastio.WIRE_UDP else None)
    return CycleBus(rx=rx, tx=tx, tap=fastio.no_tap(), model=model,
                    data=bus_data(n, rx.capacity, 127), current=np.zeros(n))


def warm_up() -> None:
    """Compile the cycle's steps every port uses (:func:`take_tpdos`, :func:`take_frames`,
    :func:`collect_flags`, :func:`put_rpdos`, the heartbeat's count) on a bus made here."""
    bus = io_arguments(1, fastio.WIRE_UDP)
    rx, tx, model, data, current = bus.rx, bus.tx, bus.model, bus.data, bus.current
    take_tpdos(rx, 0, model, data)
    begin(data, -1.0)
    take_frames(rx, 0, model, data)  # (no deadline: the cycle ends, its flags are collected)
    put_rpdos(model, data, current, tx)
    sync_rows(data.hb)


def warm_up_io(n: int = 1) -> None:
    """Compile :func:`gather` and :func:`command` for ``n`` drives of the default mapping, on
    both wires (on no socket: the calls fail harmlessly on the tables made here)."""
    for wire in (fastio.WIRE_UDP, fastio.WIRE_SOCKETCAN):
        bus = io_arguments(n, wire)
        begin(bus.data, -1.0)
        gather(bus.rx, bus.tap, bus.model, bus.data)
        command(bus.tx, bus.tap, bus.model, bus.data, bus.current)
