"""A CiA 402 bus's cycle frames in compiled code: the TPDOs of a frame table into the drives'
arrays and the flags of what did not come (:func:`take_tpdos`, :func:`collect_flags`), the
current commands into RPDO rows (:func:`put_rpdos`) — and, on a port whose batches are
compiled (socketcan, udp_multicast), the whole of a cycle's I/O in one call each way:
:func:`gather` (receive, decode, record, take, flag) and :func:`command` (encode the RPDOs,
send them with the SYNC in one system call, record).

The arithmetic is :class:`exo_rt.bus.drives.Drives`' own, in the same order and the same
IEEE operations (a controller replay stays bit-identical): joint angle = increments × rad per
increment, current = the mapped unit × A per unit, the glitch, saturation and staleness
flags, the heartbeat's time; and on the way out the encoder clamp — NaN/Inf → 0, the drive's
peak current, then the mapped target's integer range — the last line of the current limit.
Frames the compiled path does not own (EMCY, CAN error frames, another device's frames) are
handed back to Python by row index.

The mapping of each drive is a :data:`FIELD` table: one row per drive, for each quantity
its byte offset in the PDO (−1: not mapped), its size in bytes and its signedness.
"""

from __future__ import annotations

import math

import numpy as np

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
from exo_rt.jit import njit

# quantities of a TPDO and of an RPDO: the columns of a drive's fields row
(TPDO_STATUSWORD, TPDO_POSITION, TPDO_CURRENT, TPDO_VELOCITY, TPDO_DIGITAL_INPUTS,
 TPDO_ERROR_CODE) = range(6)
TPDO_QUANTITIES = 6
RPDO_CONTROLWORD, RPDO_TARGET = range(2)  # quantities of an RPDO
RPDO_QUANTITIES = 2

FIELD = np.dtype([("offset", np.int64), ("size", np.int64), ("signed", np.bool_),
                  ("low", np.int64), ("high", np.int64)])  # offset and size in bytes


TPDO1, HEARTBEAT, EMCY, SYNC = 0x180, 0x700, 0x080, 0x080  # COB-ID bases (CiA 301)
NMT, RPDO1, RPDO4, SDO_REQUEST = 0x000, 0x200, 0x500, 0x600  # frames only a master sends
# a bus's foreign-master watch (int64[3]): the controller's node id, frames seen from another
# master this run, the first one's COB-ID (−1: none)
FOREIGN_OWN_NODE, FOREIGN_COUNT, FOREIGN_FIRST = range(3)


def fields(layout: pdo.Layout, quantities: tuple[tuple[str, ...], ...]) -> np.ndarray:
    """One drive's row: where each quantity (any of the names in its tuple) sits in the PDO."""
    row = np.zeros(len(quantities), FIELD)
    row["offset"] = -1
    at = 0
    for e in layout.entries:
        for q, names in enumerate(quantities):
            if e.kind in names:
                row[q] = (at, e.bits // 8, e.signed, e.low, e.high)
        at += e.bits // 8
    return row


TPDO_NAMES = ((pdo.STATUSWORD,), (pdo.POSITION,), pdo.CURRENT_KINDS, (pdo.VELOCITY,),
              (pdo.DIGITAL_INPUTS,), (pdo.ERROR_CODE,))
RPDO_NAMES = ((pdo.CONTROLWORD,), (pdo.TARGET_TORQUE,))


@njit(cache=True)
def _read(data, r, f):
    """The little-endian integer a field holds in row r's data (0 where it is not mapped)."""
    if f.offset < 0:
        return 0
    x = 0
    for b in range(f.size - 1, -1, -1):
        x = (x << 8) | data[r, f.offset + b]
    if f.signed and x >= 1 << (8 * f.size - 1):
        x -= 1 << (8 * f.size)
    return x


@njit(cache=True)
def _write(out, r, f, x):
    if f.offset < 0:
        return
    for b in range(f.size):
        out[r, f.offset + b] = (x >> (8 * b)) & 0xFF


@njit(cache=True)
def take_tpdos(n, ids, bflags, lengths, data, times, node_slot, tx, tx_size, scale, period,
               late_before, commanded, seen, flags, statusword, position, current, rx_time,
               sampled, trusted, settle, malformed, extras, heartbeat_time, now, python_rows,
               foreign):
    """Rows 0 … n−1 of a received frame table into the drives' arrays (``now[0]``: the newest
    frame time seen); the rows Python must handle (EMCY, error frames, frames of other
    devices) are listed in ``python_rows``; returns their count. ``scale`` per drive: rad per
    increment, A per unit, the largest step (rad), the speed limit (rad/s), the peak (A).

    The controller is the only master on its buses, and a port never hands it its own
    frames: a SYNC, an NMT command or a heartbeat with the controller's node id
    (``foreign[FOREIGN_OWN_NODE]``) read here flags every drive of the bus :data:`F_FOREIGN`,
    an SDO request or an RPDO addressed to one of its drives flags that drive; each is
    counted in ``foreign`` with the first one's COB-ID (the safety check's
    ``foreign_master``). Another node's SYNC makes the drives answer twice a cycle
    (:data:`F_DUPLICATE`); its SDO write may change a drive's mode unseen otherwise.

    The glitch check: a joint moves at most its speed limit, plus a period, over the time
    between the SYNCs its answers answer — the drive samples its encoder at the SYNC — not
    between their arrivals: after the controller itself was held up, the answer to the SYNC
    before the hold-up arrives late and the next one a fraction of a period after it, with
    the whole hold-up's motion between them. ``late_before`` is the last SYNC's send time,
    the sample instant of every answer accepted now; ``sampled`` keeps it per drive. While
    ``settle`` counts down after a gap in a drive's answers, the bound runs from the last
    answer before the gap (``trusted``): an answer read after a gap may be an older SYNC's
    (:func:`collect_flags`)."""
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
                arb == NMT or arb == SYNC or arb == HEARTBEAT + foreign[FOREIGN_OWN_NODE]):
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
                malformed[k] += 1
                continue
            if t < late_before:
                flags[k] |= F_LATE  # it answers an earlier SYNC: stale
                continue
            if seen[k]:
                flags[k] |= F_DUPLICATE
            f = tx[k]
            sw = _read(data, r, f[TPDO_STATUSWORD])
            statusword[k] = sw
            q = _read(data, r, f[TPDO_POSITION]) * scale[k, 0]
            since = trusted[k] if settle[k] > 0 else sampled[k]
            if rx_time[k] > 0 and since == since and abs(q - position[k]) > max(
                    scale[k, 2], scale[k, 3] * (late_before - since + period)):  # (NaN: none)
                flags[k] |= F_GLITCH
            position[k] = q
            i = _read(data, r, f[TPDO_CURRENT]) * scale[k, 1]
            current[k] = i
            for x in range(TPDO_VELOCITY, TPDO_QUANTITIES):
                if f[x].offset >= 0:
                    extras[k, x - TPDO_VELOCITY] = _read(data, r, f[x])
            if sw & 0x6F == 0x27 and abs(commanded[k] - i) > 0.2 * scale[k, 4]:
                flags[k] |= F_SATURATED  # OPERATION ENABLED, short of the command
            rx_time[k] = t
            sampled[k] = late_before
            seen[k] = 1
        elif base == HEARTBEAT:
            if lengths[r] == 1 and data[r, 0] & 0x80 == 0:
                heartbeat_time[k] = t
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


SETTLE_CYCLES = 2  # cycles with an answer after a gap before the glitch check is its own again


@njit(cache=True)
def collect_flags(seen, statusword, rx_time, heartbeat_time, now, heartbeat_timeout, period,
                  expect, flags, missing_count, sampled, trusted, settle):
    """The flags a cycle's frames leave per drive (missing, fault, not enabled, heartbeat
    lost); returns when the next cycle's TPDOs are due (the newest one seen + a period).

    A drive that did not answer this cycle leaves the sample instant of its last answer
    (``sampled``: the SYNC it answered) in ``trusted`` and :data:`SETTLE_CYCLES` in ``settle``:
    the answers that follow a gap may answer older SYNCs (a drive, or a machine, held up, then
    catching up), so until it has answered in that many cycles its glitch check bounds the
    motion from the last answer before the gap (:func:`take_tpdos`)."""
    newest = -1.0
    for k in range(seen.shape[0]):
        last = heartbeat_time[k]
        if heartbeat_timeout > 0 and now - (0.0 if last != last else last) > heartbeat_timeout:
            flags[k] |= F_HEARTBEAT  # (NaN: none yet)
        sw = statusword[k]
        if not seen[k]:
            flags[k] |= F_MISSING
            missing_count[k] += 1
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
    return newest + period if newest >= 0.0 else expect


@njit(cache=True)
def put_rpdos(current_A, controlword, cob, rx, rx_size, peak, permille_per_A, commanded,
              ids, bflags, lengths, data):
    """Each drive's RPDO (controlword + target torque ‰) into rows 0 … n−1: the current
    clamped to the drive's peak (NaN/Inf → 0: the last line of the current limit), rounded
    half to even, clamped to the target's integer range; returns n."""
    n = cob.shape[0]
    for k in range(n):
        i = current_A[k]
        if not math.isfinite(i):
            i = 0.0
        i = min(max(i, -peak[k]), peak[k])
        commanded[k] = i
        f = rx[k]
        t = np.int64(np.rint(i * permille_per_A[k]))
        t = min(max(t, f[RPDO_TARGET].low), f[RPDO_TARGET].high)
        for b in range(rx_size[k]):
            data[k, b] = 0
        _write(data, k, f[RPDO_CONTROLWORD], controlword[k] & 0xFFFF)
        _write(data, k, f[RPDO_TARGET], t)
        ids[k] = cob[k]
        bflags[k] = 0
        lengths[k] = rx_size[k]
    return n


def warm_up() -> None:
    """Compile both tables' functions for one drive of the default mapping, and the
    heartbeat's count (nothing written outside the arrays made here)."""
    b = fastio.FrameBatch(2)
    tx = fields(pdo.Layout(pdo.DEFAULT_PROFILE.tpdo), TPDO_NAMES)[None, :]
    rx = fields(pdo.Layout(pdo.DEFAULT_PROFILE.rpdo), RPDO_NAMES)[None, :]
    one, z, zi = np.ones(1), np.zeros(1), np.zeros(1, np.int64)
    take_tpdos(0, b.arbitration_id, b.flags, b.length, b.data, b.time, np.full(128, -1),
               tx, zi.copy(), np.ones((1, 5)), 1e-3, 0.0, z.copy(), zi.copy(), zi.copy(),
               zi.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), zi.copy(),
               zi.copy(), np.zeros((1, 3), np.int64), z.copy(), z.copy(), zi.copy(),
               np.array([127, 0, -1]))
    put_rpdos(z.copy(), zi.copy(), zi.copy(), rx, zi.copy(), one, one, z.copy(),
              b.arbitration_id, b.flags, b.length, b.data)
    sync_rows(np.zeros(3, np.int64))


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


# ---------------------------------------------------------------- a cycle's I/O in one call
# FrameRing arrays of "no recording": a ring of no capacity is never written
NO_RING_HEADER = np.zeros(8, np.int64)
NO_RING_SLOTS = np.zeros(fastio.RING_SLOT, np.uint8)


@njit(cache=True)
def gather(fd, wire, headers, buffers, control, ids, bflags, lengths, data, times, counts,
           scratch, clock, ring_header, ring_slots, ring_capacity, bus, bits, node_slot, tx,
           tx_size, scale, period, commanded, seen, flags, statusword, position, current,
           rx_time, sampled, trusted, settle, malformed, extras, heartbeat_time, now,
           python_rows, when, done, heartbeat_timeout, missing_count, expect, foreign):
    """A cycle's TPDOs in one compiled call, on a socket the batches can read
    (:class:`exo_rt.bus.port.CompiledBatches`): ``recvmmsg`` → decode → the recording ring
    (:func:`exo_rt.bus.fastio.tap`) → :func:`take_tpdos`, polling on until every drive has
    answered or the deadline passes — exactly what
    :meth:`exo_rt.bus.drives.Drives.collect` does frame table by frame table, without
    returning to Python in between. Its arguments never change within a run (Python keeps
    them in one tuple): what changes per cycle is in ``when`` — the last SYNC's send time
    (:func:`take_tpdos`' ``late_before``), the deadline (monotonic s; < 0: none, the queue
    emptied once) and 1 for the cycle's first call (``seen`` and ``flags`` start from zero;
    set back to 0 here).

    It returns early when the last table read has rows for Python (``python_rows``: EMCY,
    error frames, other devices' frames; the count is returned): Python handles them and
    calls again until ``done[0]`` is 1. The last call ends with :func:`collect_flags`
    (the flags of what did not arrive; ``expect[0]``: when the next cycle's TPDOs are due)."""
    late_before, deadline = when[0], when[1]
    if when[2]:
        seen[:] = 0
        flags[:] = 0
        when[2] = 0.0
    capacity = headers.shape[0]
    done[0] = 0
    while True:
        n = fastio.receive(fd, wire, headers, buffers, control, ids, bflags, lengths, data,
                           times, counts, scratch, clock)
        if n and ring_capacity > 0:
            fastio.tap(ring_header, ring_slots, ring_capacity, times, ids, bflags, lengths, data,
                       n, True, bus, bits)
        pending = take_tpdos(n, ids, bflags, lengths, data, times, node_slot, tx, tx_size, scale,
                             period, late_before, commanded, seen, flags, statusword, position,
                             current, rx_time, sampled, trusted, settle, malformed, extras,
                             heartbeat_time, now, python_rows, foreign)
        finished = n < capacity and (deadline < 0.0 or seen.all()
                                     or fastio.monotonic(clock) >= deadline)
        if finished:
            done[0] = 1
            expect[0] = collect_flags(seen, statusword, rx_time, heartbeat_time, now[0],
                                      heartbeat_timeout, period, expect[0], flags, missing_count,
                                      sampled, trusted, settle)
        if pending or finished:
            return pending


@njit(cache=True)
def command(fd, wire, headers, iov, buffers, ids, bflags, lengths, data, times, counts, clock,
            bits, ring_header, ring_slots, ring_capacity, bus, current_A, controlword, cob, rx,
            rx_size, peak, permille_per_A, commanded, extra):
    """A cycle's commands in one compiled call and one ``sendmmsg``: each drive's RPDO
    (:func:`put_rpdos`: the encoder's clamp, the last line of the current limit) in rows
    0 … n−1, then the ``extra`` rows the table already holds after them (the SYNC, the
    controller's heartbeat), in that order (``extra[0]`` of them); the frames sent are
    copied into the recording ring. Returns the send time (wall clock, s: the drives sample
    at this SYNC). Its arguments never change within a run (Python keeps them in a tuple)."""
    n = put_rpdos(current_A, controlword, cob, rx, rx_size, peak, permille_per_A, commanded,
                  ids, bflags, lengths, data)
    n += extra[0]
    t = fastio.send(fd, wire, headers, iov, buffers, ids, bflags, lengths, data, times, n,
                    counts, clock, bits)
    if ring_capacity > 0:
        fastio.tap(ring_header, ring_slots, ring_capacity, times, ids, bflags, lengths, data, n,
                   False, bus, bits)
    return t


def io_arguments(n: int, wire: int) -> tuple[tuple, tuple]:
    """:func:`gather`'s and :func:`command`'s arguments for ``n`` drives of the default mapping,
    of the types a bus's have, on no socket (a call fails harmlessly on the tables made here):
    for compiling ahead of a run."""
    tx = np.stack([fields(pdo.Layout(pdo.DEFAULT_PROFILE.tpdo), TPDO_NAMES)] * n)
    rx = np.stack([fields(pdo.Layout(pdo.DEFAULT_PROFILE.rpdo), RPDO_NAMES)] * n)
    z, zi = np.zeros(n), np.zeros(n, np.int64)
    b = fastio.FrameBatch(max(32, 4 * n), wire)
    gather_args = (
        -1, wire, b.headers, b.buffers, b.control, b.arbitration_id, b.flags, b.length, b.data,
        b.time, b.counts, b.scratch, b.clock, NO_RING_HEADER, NO_RING_SLOTS, 0, 0, b.bits,
        np.full(128, -1), tx, zi.copy(), np.ones((n, 5)), 1e-3, z.copy(), zi.copy(), zi.copy(),
        zi.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), zi.copy(), zi.copy(),
        np.zeros((n, 3), np.int64), z.copy(), np.zeros(1), np.zeros(b.capacity, np.int64),
        np.array([0.0, -1.0, 1.0]), np.zeros(1, np.int64), 0.3, zi.copy(), np.zeros(1),
        np.array([127, 0, -1]))
    t = fastio.FrameBatch(n + 2, wire, ("127.0.0.1", 9) if wire == fastio.WIRE_UDP else None)
    command_args = (
        -1, wire, t.headers, t.iov, t.buffers, t.arbitration_id, t.flags, t.length, t.data,
        t.time, t.counts, t.clock, t.bits, NO_RING_HEADER, NO_RING_SLOTS, 0, 0, z.copy(),
        zi.copy(), zi.copy(), rx, zi.copy(), np.ones(n), np.ones(n), z.copy(),
        np.zeros(1, np.int64))
    return gather_args, command_args


def warm_up_io(n: int = 1) -> None:
    """Compile :func:`gather` and :func:`command` for ``n`` drives of the default mapping, on
    both wires (on no socket: the calls fail harmlessly on the tables made here)."""
    for wire in (fastio.WIRE_UDP, fastio.WIRE_SOCKETCAN):
        gather_args, command_args = io_arguments(n, wire)
        gather(*gather_args)
        command(*command_args)
