"""A cycle's CAN frames in and out in one compiled call each: ``recvmmsg``/``sendmmsg``.

Per frame, a Python receive or send costs a system call plus the interpreter's own work
around it (a ``bytes`` object, a msgpack map on ``udp_multicast``, a struct unpack, the
recording's copy); in a 1 kHz cycle of a handful of frames that is most of the controller's
time (docs/performance.md, "Real time"). Here the whole cycle's frames go through one system
call each way, and everything around it — python-can's ``udp_multicast`` datagram (a msgpack
map) or the kernel's ``struct can_frame``, the kernel's arrival stamps, the copy into the
recording ring — is compiled code on preallocated arrays:

- :class:`FrameBatch`: a table of frames (id, flags, length, 64 data bytes, time in s) that
  a port fills (:meth:`exo_rt.bus.port.FramePort.recv_batch`) or sends
  (:meth:`exo_rt.bus.port.FramePort.send_batch`);
- ``recvmmsg``/``sendmmsg`` are called by their C names from numba (the symbols of the C
  library the interpreter already has loaded); the message headers are built once, in
  Linux's LP64 layout (``struct mmsghdr``: a 56-byte ``msghdr`` and the received length);
- the decoders never raise and never read past a datagram: anything that is not a CAN frame
  is dropped (and counted), exactly as the Python decoders drop it.

Linux only (the two calls exist since 2.6.33 / 3.0); where they or the socket are missing the
ports keep their per-frame path.
"""

from __future__ import annotations

import socket
import struct

import numpy as np
from numba import types

from exo_rt import structs
from exo_rt.jit import njit

# ---------------------------------------------------------------- the C library's calls
_recvmmsg = types.ExternalFunction(
    "recvmmsg", types.intc(types.intc, types.intp, types.uintc, types.intc, types.intp))
_sendmmsg = types.ExternalFunction(
    "sendmmsg", types.intc(types.intc, types.intp, types.uintc, types.intc))
_clock_gettime = types.ExternalFunction("clock_gettime", types.intc(types.intc, types.intp))
MSG_DONTWAIT = 0x40
CLOCK_REALTIME, CLOCK_MONOTONIC = 0, 1

# struct mmsghdr, LP64 Linux, as int64 words: msg_name, msg_namelen, msg_iov, msg_iovlen,
# msg_control, msg_controllen, msg_flags, msg_len (the last two: int, unsigned int)
H_NAME, H_NAMELEN, H_IOV, H_IOVLEN, H_CONTROL, H_CONTROLLEN, H_FLAGS, H_LEN = range(8)
HEADER_WORDS = 8
CONTROL_WORDS = 8  # per message: room for one SCM_TIMESTAMPNS (a cmsghdr + struct timespec)
SOL_SOCKET = 1
SCM_TIMESTAMPNS = 35

# ---------------------------------------------------------------- the frame table
FB_EXTENDED, FB_ERROR, FB_REMOTE = 1, 2, 4  # frame flags (bits)
FB_DROPPED = 8  # a frame to send that the OS refused (a full queue): not sent, not recorded
MAX_DATA = 64  # bytes a frame may carry (CAN FD)
DATAGRAM = 512  # bytes a received datagram may have: python-can's is 162 for 8 data bytes and
# 234 for a 64-byte CAN FD frame named by a 14-character channel; a longer one (a long channel
# name, foreign fields) arrives cut short and is refused as not one CAN frame
CAN_FRAME_BYTES = 16  # struct can_frame
CAN_EFF_FLAG, CAN_RTR_FLAG, CAN_ERR_FLAG = 0x80000000, 0x40000000, 0x20000000
CAN_EFF_MASK = 0x1FFFFFFF

# wire formats a batch is read or written in
WIRE_UDP = 0  # python-can's udp_multicast datagram (a msgpack map)
WIRE_SOCKETCAN = 1  # struct can_frame


class FrameBatchType(structs.Struct):
    """The numba type of :class:`FrameBatch`."""


class FrameBatch(structs.Record):
    """Up to ``capacity`` frames as arrays, plus the buffers and message headers the system
    calls use (built once; nothing is allocated per call) and ``fd``, the socket the compiled
    cycle reads or writes with it (−1: none). A record (:mod:`exo_rt.structs`): compiled
    code takes it whole, Python reads the same arrays by name."""

    def __new__(cls, capacity: int = 32, wire: int = WIRE_UDP,
                destination: tuple[str, int] | None = None, fd: int = -1) -> FrameBatch:
        size = DATAGRAM if wire == WIRE_UDP else CAN_FRAME_BYTES
        name = np.zeros(16, np.uint8)  # struct sockaddr_in of the destination (udp)
        if destination is not None:
            host, port = destination
            name[0:2] = np.frombuffer(struct.pack("=H", socket.AF_INET), np.uint8)
            name[2:4] = np.frombuffer(struct.pack("!H", port), np.uint8)
            name[4:8] = np.frombuffer(socket.inet_aton(host), np.uint8)
        b = super().__new__(
            cls, fd=int(fd), wire=int(wire),
            headers=np.zeros((capacity, HEADER_WORDS), np.int64),
            iov=np.zeros((capacity, 2), np.int64),  # struct iovec: base, length
            buffers=np.zeros((capacity, size), np.uint8),
            control=np.zeros((capacity, CONTROL_WORDS), np.int64), name=name,
            arbitration_id=np.zeros(capacity, np.int64),
            flags=np.zeros(capacity, np.int64),  # FB_*
            length=np.zeros(capacity, np.int64),  # data bytes
            data=np.zeros((capacity, MAX_DATA), np.uint8),
            time=np.zeros(capacity),  # s, wall clock: the kernel's arrival stamp, or sent at
            counts=np.zeros(2, np.int64),  # [datagrams dropped as not a frame, send errors]
            scratch=np.zeros(3, np.int64),  # the msgpack decoder's value slot
            clock=np.zeros(2, np.int64),  # a struct timespec
            bits=np.zeros(1))  # a float64's bytes, for the encoders
        b.capacity = capacity
        b.n = 0  # rows filled by the last receive (Python's note)
        _link(b.headers, b.iov, b.buffers, b.control, b.name, destination is not None)
        return b

    def frame(self, i: int) -> tuple[int, bytes, float, bool, bool, bool]:
        """Row ``i`` as Python values (id, data, time, extended, error, remote)."""
        f = int(self.flags[i])
        return (int(self.arbitration_id[i]), self.data[i, : self.length[i]].tobytes(),
                float(self.time[i]), bool(f & FB_EXTENDED), bool(f & FB_ERROR),
                bool(f & FB_REMOTE))

    def put(self, i: int, msg) -> None:
        """A python-can message (or a :class:`exo_rt.bus.port.Frame`) into row ``i``: the
        rows a python-can port fills are decoded by the same compiled code as a socket's."""
        size = min(len(msg.data), MAX_DATA)
        self.arbitration_id[i] = msg.arbitration_id
        self.flags[i] = ((FB_EXTENDED if msg.is_extended_id else 0)
                         | (FB_ERROR if msg.is_error_frame else 0)
                         | (FB_REMOTE if msg.is_remote_frame else 0))
        self.length[i] = size
        self.data[i, :size] = np.frombuffer(bytes(msg.data), np.uint8, size)
        self.time[i] = msg.timestamp


@njit(cache=True)
def _new_batch(*fields):
    return FrameBatch(*fields)


structs.declare(FrameBatchType, FrameBatch,
                ("fd", "wire", "headers", "iov", "buffers", "control", "name", "arbitration_id",
                 "flags", "length", "data", "time", "counts", "scratch", "clock", "bits"),
                _new_batch)


class TapType(structs.Struct):
    """The numba type of :class:`Tap`."""


class Tap(structs.Record):
    """A recording ring as the compiled calls copy frames into it
    (:class:`exo_rt.record.rings.FrameRing`'s ``header`` and ``slots``; ``capacity`` 0: no
    recording) and the bus's index in the recording."""

    @classmethod
    def of(cls, ring, bus: int) -> Tap:
        """The tap of ``ring`` (None: :func:`no_tap`) for bus ``bus``."""
        if ring is None:
            return no_tap()
        return cls(header=ring.header, slots=ring.slots, capacity=int(ring.capacity),
                   bus=int(bus))


@njit(cache=True)
def _new_tap(*fields):
    return Tap(*fields)


structs.declare(TapType, Tap, ("header", "slots", "capacity", "bus"), _new_tap)
_NO_TAP: list[Tap] = []


def no_tap() -> Tap:
    """The tap of no recording: a ring of no capacity is never written (made once)."""
    if not _NO_TAP:
        _NO_TAP.append(Tap(header=np.zeros(8, np.int64), slots=np.zeros(RING_SLOT, np.uint8),
                           capacity=0, bus=0))
    return _NO_TAP[0]


@njit(cache=True)
def _link(headers, iov, buffers, control, name, named):
    """Point each message header at its buffer, its control space and the destination."""
    for i in range(headers.shape[0]):
        iov[i, 0] = buffers[i:].ctypes.data
        iov[i, 1] = buffers.shape[1]
        headers[i, H_NAME] = name.ctypes.data if named else 0
        headers[i, H_NAMELEN] = name.shape[0] if named else 0
        headers[i, H_IOV] = iov[i:].ctypes.data
        headers[i, H_IOVLEN] = 1
        headers[i, H_CONTROL] = control[i:].ctypes.data
        headers[i, H_CONTROLLEN] = 8 * control.shape[1]


@njit(cache=True)
def wall_clock(ts):
    """time.time() from compiled code (``ts``: two int64 words for a struct timespec)."""
    _clock_gettime(CLOCK_REALTIME, ts.ctypes.data)
    return ts[0] + ts[1] * 1e-9


@njit(cache=True)
def monotonic(ts):
    """time.monotonic() from compiled code (the same clock: CLOCK_MONOTONIC)."""
    _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
    return ts[0] + ts[1] * 1e-9


# ---------------------------------------------------------------- msgpack (python-can's map)
# the keys of python-can's datagram, in its order (can.interfaces.udp_multicast.utils)
KEYS = ("timestamp", "arbitration_id", "is_extended_id", "is_remote_frame", "is_error_frame",
        "channel", "dlc", "data", "is_fd", "bitrate_switch", "error_state_indicator")
K_TIMESTAMP, K_ID, K_EXTENDED, K_REMOTE, K_ERROR, K_CHANNEL, K_DLC, K_DATA = range(8)
_KEY_BYTES = np.zeros((len(KEYS), 24), np.uint8)
_KEY_LENGTHS = np.array([len(k) for k in KEYS], np.int64)
for _i, _k in enumerate(KEYS):
    _KEY_BYTES[_i, : len(_k)] = np.frombuffer(_k.encode(), np.uint8)
_KEY_BYTES.setflags(write=False)
_KEY_LENGTHS.setflags(write=False)

MP_BAD, MP_NIL, MP_BOOL, MP_INT, MP_FLOAT, MP_BIN, MP_STR = range(7)  # value kinds


@njit(cache=True)
def _uint(buf, at, size):
    """A big-endian unsigned integer of ``size`` bytes at ``at``."""
    x = 0
    for k in range(size):
        x = (x << 8) | buf[at + k]
    return x


@njit(cache=True)
def _value(buf, at, end, out):
    """One msgpack value at ``at``: its kind (``V_*``) into out[0], an integer or length into
    out[1], where its bytes begin into out[2] (bin/str) — returns the position after it, or
    −1 for anything this decoder does not take (maps, arrays, extensions, truncation)."""
    if at >= end:
        return -1
    b = buf[at]
    out[2] = at + 1
    if b <= 0x7F:  # positive fixint
        out[0], out[1] = MP_INT, b
        return at + 1
    if b >= 0xE0:  # negative fixint
        out[0], out[1] = MP_INT, b - 256
        return at + 1
    if 0xA0 <= b <= 0xBF:  # fixstr
        n = b & 0x1F
        out[0], out[1] = MP_STR, n
        return at + 1 + n if at + 1 + n <= end else -1
    if b == 0xC0:
        out[0], out[1] = MP_NIL, 0
        return at + 1
    if b == 0xC2 or b == 0xC3:
        out[0], out[1] = MP_BOOL, b - 0xC2
        return at + 1
    if b == 0xC4 or b == 0xC5 or b == 0xD9 or b == 0xDA:  # bin8/16, str8/16
        size = 1 if b == 0xC4 or b == 0xD9 else 2
        if at + 1 + size > end:
            return -1
        n = _uint(buf, at + 1, size)
        out[0], out[1], out[2] = (MP_BIN if b <= 0xC5 else MP_STR), n, at + 1 + size
        return at + 1 + size + n if at + 1 + size + n <= end else -1
    if 0xCC <= b <= 0xCF:  # uint 8/16/32/64
        size = 1 << (b - 0xCC)
        if at + 1 + size > end:
            return -1
        x = _uint(buf, at + 1, size)  # (above int64: negative here — true, and no CAN id)
        out[0], out[1] = MP_INT, x
        return at + 1 + size
    if 0xD0 <= b <= 0xD3:  # int 8/16/32/64
        size = 1 << (b - 0xD0)
        if at + 1 + size > end:
            return -1
        x = _uint(buf, at + 1, size)
        if size < 8 and x >= 1 << (8 * size - 1):
            x -= 1 << (8 * size)
        out[0], out[1] = MP_INT, x
        return at + 1 + size
    if b == 0xCA or b == 0xCB:  # float 32/64 (their value is not kept: only their truth)
        size = 4 if b == 0xCA else 8
        if at + 1 + size > end:
            return -1
        x = _uint(buf, at + 1, size)
        mask = (1 << (8 * size - 1)) - 1  # nonzero unless ±0.0
        out[0], out[1] = MP_FLOAT, 1 if x & mask else 0
        return at + 1 + size
    return -1


@njit(cache=True)
def _key(buf, at, n):
    """Which of :data:`KEYS` the ``n`` key bytes at ``at`` spell (−1: another key)."""
    for k in range(_KEY_LENGTHS.shape[0]):
        if _KEY_LENGTHS[k] != n:
            continue
        same = True
        for i in range(n):
            if buf[at + i] != _KEY_BYTES[k, i]:
                same = False
                break
        if same:
            return k
    return -1


@njit(cache=True)
def decode_datagram(buf, end, row, batch_id, batch_flags, batch_length, batch_data, scratch):
    """python-can's datagram (a msgpack map) in ``buf[:end]`` into row ``row`` of a batch;
    False for anything that is not one CAN frame — what ``msgpack.unpackb`` and
    ``can.Message`` would refuse: not a map, a missing or non-integer id, an id out of range,
    data that is not bytes or longer than 64, bytes after the map. ``scratch``: 3 int64."""
    if end < 1:
        return False
    b = buf[0]
    if 0x80 <= b <= 0x8F:
        count, at = b & 0x0F, 1
    elif b == 0xDE and end >= 3:
        count, at = _uint(buf, 1, 2), 3
    else:
        return False
    arb, have_id, flags, data_at, data_len = 0, False, 0, 0, 0
    for _ in range(count):
        at = _value(buf, at, end, scratch)
        if at < 0 or scratch[0] != MP_STR:
            return False  # python-can's keys are strings
        key = _key(buf, scratch[2], scratch[1])
        at = _value(buf, at, end, scratch)
        if at < 0:
            return False
        kind, x = scratch[0], scratch[1]
        if key == K_ID:
            if kind == MP_INT or kind == MP_BOOL:
                arb, have_id = x, True
            else:
                return False
        elif key == K_EXTENDED or key == K_REMOTE or key == K_ERROR:
            if kind == MP_BIN or kind == MP_STR:
                truth = x > 0
            else:
                truth = (kind == MP_INT or kind == MP_BOOL or kind == MP_FLOAT) and x != 0
            bit = FB_EXTENDED if key == K_EXTENDED else FB_REMOTE if key == K_REMOTE else FB_ERROR
            flags = (flags | bit) if truth else (flags & ~bit)
        elif key == K_DATA:
            if kind == MP_BIN:
                data_at, data_len = scratch[2], x
            elif kind == MP_NIL or ((kind == MP_BOOL or kind == MP_INT) and x == 0):
                data_at, data_len = 0, 0  # None, False, 0: "or b''" in the Python decoder
            else:
                return False
    if at != end or not have_id:
        return False
    limit = CAN_EFF_MASK if flags & FB_EXTENDED else 0x7FF
    if arb < 0 or arb > limit or data_len > MAX_DATA:
        return False
    batch_id[row] = arb
    batch_flags[row] = flags
    batch_length[row] = data_len
    for i in range(data_len):
        batch_data[row, i] = buf[data_at + i]
    return True


@njit(cache=True)
def _put(out, at, b):
    out[at] = b
    return at + 1


@njit(cache=True)
def _put_key(out, at, k):
    at = _put(out, at, 0xA0 | _KEY_LENGTHS[k])
    for i in range(_KEY_LENGTHS[k]):
        out[at + i] = _KEY_BYTES[k, i]
    return at + _KEY_LENGTHS[k]


@njit(cache=True)
def _put_uint(out, at, x):
    """A non-negative integer in msgpack's shortest form (as msgpack-python writes it)."""
    if x <= 0x7F:
        return _put(out, at, x)
    size, code = 1, 0xCC
    if x > 0xFF:
        size, code = 2, 0xCD
    if x > 0xFFFF:
        size, code = 4, 0xCE
    at = _put(out, at, code)
    for k in range(size):
        out[at + k] = (x >> (8 * (size - 1 - k))) & 0xFF
    return at + size


@njit(cache=True)
def encode_datagram(out, arb, flags, length, data, row, t, bits):
    """One frame as python-can's datagram, byte for byte what ``pack_message`` writes (the
    keys in its order, the shortest integer forms, ``channel`` None, classic CAN); returns
    its length. ``bits``: one float64 of scratch."""
    at = _put(out, 0, 0x80 | len(KEYS))
    at = _put_key(out, at, K_TIMESTAMP)
    at = _put(out, at, 0xCB)
    bits[0] = t
    raw = bits.view(np.uint8)  # little-endian host: msgpack wants the float big-endian
    for k in range(8):
        out[at + k] = raw[7 - k]
    at += 8
    at = _put_key(out, at, K_ID)
    at = _put_uint(out, at, arb)
    at = _put_key(out, at, K_EXTENDED)
    at = _put(out, at, 0xC3 if flags & FB_EXTENDED else 0xC2)
    at = _put_key(out, at, K_REMOTE)
    at = _put(out, at, 0xC3 if flags & FB_REMOTE else 0xC2)
    at = _put_key(out, at, K_ERROR)
    at = _put(out, at, 0xC3 if flags & FB_ERROR else 0xC2)
    at = _put_key(out, at, K_CHANNEL)
    at = _put(out, at, 0xC0)
    at = _put_key(out, at, K_DLC)
    at = _put_uint(out, at, length)
    at = _put_key(out, at, K_DATA)
    at = _put(out, at, 0xC4)
    at = _put(out, at, length)
    for i in range(length):
        out[at + i] = data[row, i]
    at += length
    for k in range(K_DATA + 1, len(KEYS)):  # is_fd, bitrate_switch, error_state_indicator
        at = _put_key(out, at, k)
        at = _put(out, at, 0xC2)
    return at


# ---------------------------------------------------------------- struct can_frame
@njit(cache=True)
def decode_can_frame(buf, end, row, batch_id, batch_flags, batch_length, batch_data):
    """The kernel's ``struct can_frame`` (id word, length, 3 pad bytes, 8 data bytes,
    host byte order: little-endian here) into row ``row``; False for a short one."""
    if end < CAN_FRAME_BYTES:
        return False
    can_id = buf[0] | (buf[1] << 8) | (buf[2] << 16) | (buf[3] << 24)
    flags = 0
    if can_id & CAN_EFF_FLAG:
        flags |= FB_EXTENDED
    if can_id & CAN_ERR_FLAG:
        flags |= FB_ERROR
    if can_id & CAN_RTR_FLAG:
        flags |= FB_REMOTE
    mask = CAN_EFF_MASK if flags & (FB_EXTENDED | FB_ERROR) else 0x7FF
    n = min(buf[4], 8)
    batch_id[row] = can_id & mask
    batch_flags[row] = flags
    batch_length[row] = n
    for i in range(n):
        batch_data[row, i] = buf[8 + i]
    return True


@njit(cache=True)
def encode_can_frame(out, arb, flags, length, data, row):
    can_id = arb
    if flags & FB_EXTENDED:
        can_id |= CAN_EFF_FLAG
    for k in range(4):
        out[k] = (can_id >> (8 * k)) & 0xFF
    out[4] = length
    out[5] = out[6] = out[7] = 0
    for i in range(8):
        out[8 + i] = data[row, i] if i < length else 0
    return CAN_FRAME_BYTES


# ---------------------------------------------------------------- the recording ring
# one slot of exo_rt.record.rings.FRAME ("<dIBBBx8s"): time, id, flags, length, bus, data
RING_HEAD, RING_TAIL, RING_LOST = 0, 1, 3  # header words (exo_rt.record.rings HEAD, TAIL, LOST)
RING_RX, RING_EXTENDED, RING_ERROR = 1, 2, 4
RING_SLOT = 24


@njit(cache=True)
def tap(t, b, n, rx):
    """Copy rows 0 … n−1 of batch ``b`` into the recording ring of :class:`Tap` ``t`` (what
    does not fit is lost and counted, as a real-time producer never waits; a dropped frame to
    send is not copied); returns the ring's new head. Little-endian host, as the ring's
    layout."""
    header, slots, capacity, bus = t.header, t.slots, t.capacity, t.bus
    times, ids, flags, lengths, data, bits = b.time, b.arbitration_id, b.flags, b.length, \
        b.data, b.bits
    head = header[RING_HEAD]
    for r in range(n):
        if flags[r] & FB_DROPPED:
            continue
        if head - header[RING_TAIL] >= capacity:
            header[RING_LOST] += 1
            continue
        at = (head % capacity) * RING_SLOT
        bits[0] = times[r]
        raw = bits.view(np.uint8)
        for k in range(8):
            slots[at + k] = raw[k]
        a = ids[r]
        for k in range(4):
            slots[at + 8 + k] = (a >> (8 * k)) & 0xFF
        f = flags[r]
        slots[at + 12] = ((RING_RX if rx else 0) | (RING_EXTENDED if f & FB_EXTENDED else 0)
                          | (RING_ERROR if f & FB_ERROR else 0))
        m = min(lengths[r], 8)
        slots[at + 13] = lengths[r]
        slots[at + 14] = bus
        slots[at + 15] = 0
        for k in range(8):
            slots[at + 16 + k] = data[r, k] if k < m else 0
        head += 1
        header[RING_HEAD] = head  # published slot by slot, after its bytes
    return head


# ---------------------------------------------------------------- receive and send
@njit(cache=True)
def receive(fd, b):
    """Everything socket ``fd`` holds (up to the batch's capacity) in one ``recvmmsg``: the
    frames into batch ``b``'s rows, with the kernel's arrival stamps; returns the rows filled
    (a datagram that is not a frame is dropped and counted in counts[0]; 0 when the call
    fails). A frame the kernel did not stamp gets the time it was read."""
    wire, headers, buffers, control = b.wire, b.headers, b.buffers, b.control
    ids, flags, lengths, data, times = b.arbitration_id, b.flags, b.length, b.data, b.time
    counts, scratch, clock = b.counts, b.scratch, b.clock
    m = headers.shape[0]
    for i in range(m):
        headers[i, H_CONTROLLEN] = 8 * control.shape[1]
        headers[i, H_FLAGS] = 0
    got = _recvmmsg(fd, headers.ctypes.data, m, MSG_DONTWAIT, 0)
    if got <= 0:
        return 0
    rows = 0
    for i in range(got):
        end = min(headers[i, H_LEN] & 0xFFFFFFFF, buffers.shape[1])
        if wire == WIRE_UDP:
            ok = decode_datagram(buffers[i], end, rows, ids, flags, lengths, data, scratch)
        else:
            ok = decode_can_frame(buffers[i], end, rows, ids, flags, lengths, data)
        if not ok:
            counts[0] += 1
            continue
        if (headers[i, H_CONTROLLEN] >= 32 and (control[i, 1] & 0xFFFFFFFF) == SOL_SOCKET
                and (control[i, 1] >> 32) == SCM_TIMESTAMPNS):
            t = control[i, 2] + control[i, 3] * 1e-9
        else:
            t = wall_clock(clock)
        times[rows] = t
        rows += 1
    return rows


@njit(cache=True)
def send(fd, b, n):
    """Rows 0 … n−1 of batch ``b`` out on socket ``fd`` in one ``sendmmsg`` (a partial send
    is completed by further calls; a refused frame is dropped, flagged ``FB_DROPPED`` and
    counted in counts[1], never waited for); every row's time is set to the moment it was
    handed over (wall clock, s); returns the time."""
    wire, headers, iov, buffers = b.wire, b.headers, b.iov, b.buffers
    ids, flags, lengths, data, times = b.arbitration_id, b.flags, b.length, b.data, b.time
    counts, clock, bits = b.counts, b.clock, b.bits
    t = wall_clock(clock)
    for r in range(n):
        flags[r] &= ~FB_DROPPED
        if wire == WIRE_UDP:
            size = encode_datagram(buffers[r], ids[r], flags[r], lengths[r], data, r, t, bits)
        else:
            size = encode_can_frame(buffers[r], ids[r], flags[r], lengths[r], data, r)
        iov[r, 1] = size
        headers[r, H_CONTROLLEN] = 0  # nothing to say to the kernel (receive sets it back)
        times[r] = t
    done = 0
    while done < n:
        got = _sendmmsg(fd, headers[done:].ctypes.data, n - done, MSG_DONTWAIT)
        if got <= 0:  # the first remaining one refused (a full queue): drop it, go on
            counts[1] += 1
            flags[done] |= FB_DROPPED
            got = 1
        done += got
    return t


def warm_up() -> None:
    """Compile the batch calls (on no socket: the calls fail harmlessly) for both wires."""
    for wire in (WIRE_UDP, WIRE_SOCKETCAN):
        b = FrameBatch(2, wire, ("127.0.0.1", 9) if wire == WIRE_UDP else None)
        receive(-1, b)
        send(-1, b, 0)
        decode_datagram(b.buffers[0], 0, 0, b.arbitration_id, b.flags, b.length, b.data,
                        b.scratch)
        tap(no_tap(), b, 0, True)
