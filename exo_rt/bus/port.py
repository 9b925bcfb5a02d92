"""Frame I/O on a python-can bus without a Python object per frame where the interface allows.

The cycle sends a handful of frames and reads a handful more every millisecond. Through
python-can's generic API each frame is a :class:`can.Message` built and checked on both sides
(and, on ``udp_multicast``, a msgpack dictionary packed and unpacked on top): several µs a
frame, the bulk of a lean cycle. A :class:`FramePort` sits on the bus python-can opened and
does the same I/O on its socket directly where the wire format is known:

- ``socketcan``: the kernel's ``struct can_frame`` (id, length, 8 data bytes) on the raw
  socket python-can opened (:class:`SocketcanPort`);
- ``udp_multicast``: python-can's own datagram (a msgpack map with the message's fields), one
  per frame, on its socket (:class:`UdpMulticastPort`) — wire-compatible both ways with
  python-can's interface, so a plain ``can.Bus(interface="udp_multicast")`` in another process
  (a candump-like logger, a canopen master) sees the same traffic;
- anything else: python-can's ``send``/``recv`` (:class:`GenericPort`).

Received frames are handed out in ONE reusable :class:`Frame` (duck-typed like a
``can.Message``: ``arbitration_id``, ``data``, ``timestamp``, ``is_error_frame`` …): a caller
decodes it before asking for the next. The cycle itself moves its frames as a table
(:class:`exo_rt.bus.fastio.FrameBatch`): :meth:`FramePort.recv_batch` and
:meth:`FramePort.send_batch` — on ``socketcan`` and ``udp_multicast`` one compiled call and one
system call each way (``recvmmsg``/``sendmmsg``), elsewhere the per-frame path row by row.
Every frame sent or received can also be copied, as fixed-size bytes, into a recording ring
(:attr:`FramePort.tap`, see :mod:`exo_rt.record.rings`) — the recording process writes the
CAN log.
"""

from __future__ import annotations

import abc
import errno
import socket
import struct
import time
from collections import deque

import can
import numpy as np

from exo_rt.bus import fastio
from exo_rt.bus.fastio import CAN_EFF_FLAG, CAN_EFF_MASK, CAN_ERR_FLAG, CAN_RTR_FLAG

try:
    import msgpack
except ImportError:  # pragma: no cover - msgpack is a dependency
    msgpack = None

CAN_FRAME = struct.Struct("=IB3x8s")  # struct can_frame (classic CAN, 16 bytes)
IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)  # Linux <linux/in.h>
SENT_REMEMBERED = 64  # own datagrams recognised when the group loops them back
SO_ATTACH_FILTER = getattr(socket, "SO_ATTACH_FILTER", 26)  # Linux <asm/socket.h>


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
STAMP = struct.Struct("@ll")  # struct timespec
STAMP_SPACE = socket.CMSG_SPACE(STAMP.size) if hasattr(socket, "CMSG_SPACE") else 64


def stamp_arrivals(sock: socket.socket) -> None:
    """Have the kernel stamp each frame when it arrives (as python-can's interfaces do): a
    frame read late — after the loop was held up — still shows how old it is."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        pass


def arrival(ancillary: list) -> float:
    """The kernel's arrival time of a frame (wall clock, s), or now if it gave none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= STAMP.size:
            sec, nsec = STAMP.unpack_from(data)
            return sec + nsec * 1e-9
    return time.time()


class Frame:
    """A received frame, reused for every frame a port hands out (copy what you keep)."""

    __slots__ = ("arbitration_id", "data", "timestamp", "is_extended_id", "is_error_frame",
                 "is_remote_frame", "is_rx", "channel", "dlc")

    def __init__(self) -> None:
        self.set(0, b"", 0.0)

    def set(self, arbitration_id: int, data: bytes, timestamp: float, extended: bool = False,
            error: bool = False, remote: bool = False) -> Frame:
        self.arbitration_id = arbitration_id
        self.data = data
        self.dlc = len(data)
        self.timestamp = timestamp
        self.is_extended_id = extended
        self.is_error_frame = error
        self.is_remote_frame = remote
        self.is_rx = True
        self.channel = None
        return self


class FramePort(abc.ABC):
    """Send ``(arbitration id, data)`` and receive :class:`Frame` s on one bus, non-blocking."""

    kind = "generic"
    compiled = False  # the batches are compiled calls on a socket (CompiledBatches)

    def __init__(self, bus: can.BusABC) -> None:
        self.bus = bus
        self.tap = None  # a recording ring (FrameRing) or None
        self.channel_index = 0  # the bus's index in the recording
        self.frame = Frame()
        self.send_errors = 0  # frames the OS would not take (a full queue): dropped, counted
        self.sent_at = None  # wall-clock time of the last send, where frames are stamped so

    @abc.abstractmethod
    def send(self, arbitration_id: int, data: bytes, extended: bool = False) -> None:
        """Put one frame on the bus (never waits on a full queue: the OS drops, CAN counts)."""

    @abc.abstractmethod
    def recv(self) -> Frame | None:
        """The next frame that has arrived, or None (never waits)."""

    @property
    def tap(self):
        """The recording ring every frame sent or received is copied into (None: none)."""
        return self._tap

    @tap.setter
    def tap(self, ring) -> None:
        self._tap, self._tap_record = ring, None

    @property
    def channel_index(self) -> int:
        """The bus's index in the recording."""
        return self._channel_index

    @channel_index.setter
    def channel_index(self, index: int) -> None:
        self._channel_index, self._tap_record = index, None

    def tap_record(self) -> fastio.Tap:
        """:attr:`tap` as the compiled calls take it (:class:`exo_rt.bus.fastio.Tap`; made
        once per ring and bus index, and let go with them)."""
        if self._tap_record is None:
            self._tap_record = fastio.Tap.of(self._tap, self._channel_index)
        return self._tap_record

    def _record(self, arbitration_id: int, data: bytes, timestamp: float, rx: bool,
                extended: bool = False, error: bool = False) -> None:
        tap = self.tap
        if tap is not None:
            tap.put(timestamp, arbitration_id, data, rx, extended, error, self.channel_index)

    def batch(self, capacity: int = 32, send: bool = False) -> fastio.FrameBatch:
        """A frame table for :meth:`recv_batch` / :meth:`send_batch` on this port (``send``:
        one the compiled cycle sends with; its ``fd``, where the port has one)."""
        return fastio.FrameBatch(capacity)

    def warm_up(self) -> None:  # noqa: B027 (a hook: most ports have nothing to compile)
        """Compile what this port's batches call (nothing: the per-frame path is Python)."""

    def recv_batch(self, batch: fastio.FrameBatch) -> int:
        """The frames that have arrived, up to the batch's capacity, into its rows (never
        waits); returns how many. A full batch may leave more waiting: call again."""
        n = 0
        while n < batch.capacity:
            msg = self.recv()
            if msg is None:
                break
            batch.put(n, msg)
            n += 1
        batch.n = n
        return n

    def send_batch(self, batch: fastio.FrameBatch, n: int) -> None:
        """Rows 0 … n−1 of ``batch`` onto the bus, in order (a frame the OS refuses is dropped
        and counted in :attr:`send_errors`, never waited for)."""
        for r in range(n):
            f = int(batch.flags[r])
            self.send(int(batch.arbitration_id[r]), batch.data[r, : batch.length[r]].tobytes(),
                      bool(f & fastio.FB_EXTENDED))

    def drain(self) -> int:
        """Throw away what has arrived (before a fresh start); returns the count."""
        n = 0
        while self.recv() is not None:
            n += 1
        return n


class CompiledBatches:
    """:meth:`FramePort.recv_batch` and :meth:`FramePort.send_batch` in one compiled call and
    one system call each (:mod:`exo_rt.bus.fastio`), for a port with a socket of its own
    (``sock``, read) and ``_tx`` (written) and a known wire format (``wire``)."""

    wire = fastio.WIRE_UDP
    destination = None  # (group, port) of udp datagrams
    compiled = True

    @property
    def fds(self) -> tuple[int, int]:
        """The descriptors a compiled cycle reads and writes (exo_rt.bus.pdo_cycle)."""
        return self.sock.fileno(), self._tx.fileno()

    def batch(self, capacity: int = 32, send: bool = False) -> fastio.FrameBatch:
        return fastio.FrameBatch(capacity, self.wire, self.destination,
                                 (self._tx if send else self.sock).fileno())

    def warm_up(self) -> None:
        fastio.warm_up()

    def recv_batch(self, b: fastio.FrameBatch) -> int:
        n = fastio.receive(self.sock.fileno(), b)
        b.n = n
        if n and self.tap is not None:
            self._tap_batch(b, n, True)
        return n

    def send_batch(self, b: fastio.FrameBatch, n: int) -> None:
        if n <= 0:
            return
        before = b.counts[1]
        self.sent_at = fastio.send(self._tx.fileno(), b, n)
        self.send_errors += int(b.counts[1] - before)
        if self.tap is not None:
            self._tap_batch(b, n, False)

    def _tap_batch(self, b: fastio.FrameBatch, n: int, rx: bool) -> None:
        tap = self.tap
        if tap.block_when_full:  # (lockstep recording: the per-frame path waits for room)
            for r in range(n):
                if not b.flags[r] & fastio.FB_DROPPED:
                    arb, data, t, ext, err, _rtr = b.frame(r)
                    tap.put(t, arb, data, rx, ext, err, self.channel_index)
            return
        fastio.tap(self.tap_record(), b, n, rx)


class GenericPort(FramePort):
    """Any python-can bus through its own ``send`` and ``recv`` (which a recording taps:
    :meth:`exo_rt.record.recording.Recording.tap` — so this port records nothing itself)."""

    def send(self, arbitration_id: int, data: bytes, extended: bool = False) -> None:
        self.bus.send(can.Message(arbitration_id=arbitration_id, data=data,
                                  is_extended_id=extended, check=False))

    def recv(self) -> Frame | None:
        msg = self.bus.recv(0.0)
        if msg is None:
            return None
        data = bytes(msg.data)
        return self.frame.set(msg.arbitration_id, data, msg.timestamp, msg.is_extended_id,
                              msg.is_error_frame, msg.is_remote_frame)


class SocketcanPort(CompiledBatches, FramePort):
    """``struct can_frame`` on the raw CAN socket of a python-can ``socketcan`` bus."""

    kind = "socketcan"
    wire = fastio.WIRE_SOCKETCAN

    def __init__(self, bus: can.BusABC, sock: socket.socket | None = None) -> None:
        super().__init__(bus)
        self.sock = sock if sock is not None else bus.socket
        self._tx = self.sock
        self.sock.setblocking(False)
        stamp_arrivals(self.sock)

    def send(self, arbitration_id: int, data: bytes, extended: bool = False) -> None:
        can_id = arbitration_id | CAN_EFF_FLAG if extended else arbitration_id
        now = self.sent_at = time.time()
        try:
            self.sock.send(CAN_FRAME.pack(can_id, len(data), data))
        except OSError:  # ENOBUFS/EAGAIN: the adapter's queue is full (bus-off, no ACK)
            self.send_errors += 1
            return
        self._record(arbitration_id, data, now, False, extended)

    def recv(self) -> Frame | None:
        try:
            raw, anc, _flags, _addr = self.sock.recvmsg(16, STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return None
        return self.decode(raw, arrival(anc))

    def decode(self, raw: bytes, timestamp: float) -> Frame | None:
        """A ``struct can_frame`` into the reusable frame; None for a short datagram."""
        if len(raw) < 16:
            return None
        can_id, dlc, payload = CAN_FRAME.unpack_from(raw)
        data = payload[: min(dlc, 8)]
        extended = bool(can_id & CAN_EFF_FLAG)
        error = bool(can_id & CAN_ERR_FLAG)
        arb = can_id & (CAN_EFF_MASK if extended or error else 0x7FF)
        self._record(arb, data, timestamp, True, extended, error)
        return self.frame.set(arb, data, timestamp, extended, error, bool(can_id & CAN_RTR_FLAG))


def drop_from_port(sock: socket.socket, port: int):
    """Have the kernel drop every datagram from UDP source ``port`` before ``sock`` sees it:
    a classic BPF socket filter (on a UDP socket it reads from the UDP header: the source
    port is the half-word at offset 0). Returns the program's buffer (keep it alive with the
    socket), or None where the system refuses."""
    import ctypes

    prog = ((0x28, 0, 0, 0),  # ldh [0]: the source port
            (0x15, 0, 1, port),  # jeq #port: drop, else accept
            (0x06, 0, 0, 0),  # ret #0: drop
            (0x06, 0, 0, 0xFFFF))  # ret #65535: the whole datagram
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                        struct.pack("HL", len(prog), ctypes.addressof(buf)))
    except OSError:
        return None
    return buf


class UdpMulticastPort(CompiledBatches, FramePort):
    """python-can's ``udp_multicast`` datagrams, packed and read on its socket directly.

    Every member of the group receives every datagram, its own included. On an IPv4 group
    the port sends from a socket of its own (an ephemeral source port, on ``lo``) and a
    socket filter drops that port's datagrams in the kernel: its own frames never come back
    to be read and thrown away (three of five datagrams a cycle on a one-bus leg). Where that
    is refused, it remembers the bytes of its last few datagrams (each carries its send time,
    so they are unique) and skips them when they come back — on the per-frame path only: the
    batches need the kernel's filter (:meth:`recv_batch` then goes frame by frame).

    A datagram is decoded by the compiled decoder the batches use
    (:func:`exo_rt.bus.fastio.decode_datagram`): one decoder, whichever path a frame takes.
    """

    kind = "udp_multicast"

    def __init__(self, bus: can.BusABC) -> None:
        super().__init__(bus)
        mc = bus._multicast  # python-can's GeneralPurposeUdpMulticastBus
        self.sock = mc._socket
        self.sock.setblocking(False)
        stamp_arrivals(self.sock)
        looped = on_loopback(self.sock, mc.group)
        self.destination = mc._send_destination
        self._tx, self._filter = self.sock, None
        if looped:  # a sending socket of its own, its echo dropped by the kernel
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                              socket.inet_aton("127.0.0.1"))
                tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
                tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
                tx.bind(("127.0.0.1", 0))
                self._filter = drop_from_port(self.sock, tx.getsockname()[1])
            except OSError:
                self._filter = None
            if self._filter is not None:
                tx.setblocking(False)
                self._tx = tx
            else:
                tx.close()
        self._packer = msgpack.Packer(use_bin_type=True, autoreset=True)
        self._one = fastio.FrameBatch(1)  # the per-frame decoder's row
        # the compiled batches: an IPv4 group on lo, our own echo dropped by the kernel
        self.compiled = self._filter is not None
        self._sent: deque = deque()  # our last datagrams (oldest first) …
        self._sent_set: set = set()  # … and the same as a set: one hash per received datagram
        self._fields = {"timestamp": 0.0, "arbitration_id": 0, "is_extended_id": False,
                        "is_remote_frame": False, "is_error_frame": False, "channel": None,
                        "dlc": 0, "data": b"", "is_fd": False, "bitrate_switch": False,
                        "error_state_indicator": False}
        # the compiled decoder loaded now, at open: not at the first frame, which it would
        # hold up by the ~4 ms numba takes to load it from its cache
        self.decode(b"", 0.0)

    def send(self, arbitration_id: int, data: bytes, extended: bool = False) -> None:
        f = self._fields
        now = self.sent_at = time.time()
        f["timestamp"] = now
        f["arbitration_id"] = arbitration_id
        f["is_extended_id"] = extended
        f["dlc"] = len(data)
        f["data"] = data
        raw = self._packer.pack(f)
        if self._filter is None:  # no kernel filter: recognise the echo by its bytes
            self._sent.append(raw)
            self._sent_set.add(raw)
            if len(self._sent) > SENT_REMEMBERED:
                self._sent_set.discard(self._sent.popleft())
        try:
            self._tx.sendto(raw, self.destination)
        except OSError:  # the group's receivers are not draining: dropped, counted
            self.send_errors += 1
            return
        self._record(arbitration_id, data, now, False, extended)

    def recv(self) -> Frame | None:
        sock, sent = self.sock, self._sent_set
        while True:
            try:
                raw, anc, _flags, _addr = sock.recvmsg(512, STAMP_SPACE)
            except (BlockingIOError, InterruptedError):
                return None
            if raw in sent:
                continue  # our own datagram, looped back by the group
            frame = self.decode(raw, arrival(anc))
            if frame is not None:
                return frame

    def decode(self, raw: bytes, timestamp: float) -> Frame | None:
        """One datagram into the reusable frame; None for anything that is not a CAN frame."""
        one, size = self._one, len(raw)
        if size > one.buffers.shape[1]:
            return None  # longer than any CAN frame's datagram
        one.buffers[0, :size] = np.frombuffer(raw, np.uint8)
        if not fastio.decode_datagram(one.buffers[0], size, 0, one.arbitration_id, one.flags,
                                      one.length, one.data, one.scratch):
            return None
        arb, data, _t, extended, error, remote = one.frame(0)
        self._record(arb, data, timestamp, True, extended, error)
        return self.frame.set(arb, data, timestamp, extended, error, remote)

    def batch(self, capacity: int = 32, send: bool = False) -> fastio.FrameBatch:
        if not self.compiled:
            return FramePort.batch(self, capacity, send)
        return CompiledBatches.batch(self, capacity, send)

    def recv_batch(self, b: fastio.FrameBatch) -> int:
        if not self.compiled:  # our own datagrams come back: the per-frame path knows them
            return FramePort.recv_batch(self, b)
        return CompiledBatches.recv_batch(self, b)

    def send_batch(self, b: fastio.FrameBatch, n: int) -> None:
        if not self.compiled:
            FramePort.send_batch(self, b, n)
        else:
            CompiledBatches.send_batch(self, b, n)


def on_loopback(sock: socket.socket, group: str) -> bool:
    """Send a ``udp_multicast`` socket's frames on the loopback interface and have it hear its
    group wherever a frame on this machine may arrive (IPv4 groups).

    python-can sends through the default route: every frame then also goes out on the network
    card (costly, above all in a virtual machine: docs/performance.md, "Frame I/O"; and
    simulated CAN frames have no business on a real network). Here the socket sends through
    ``lo``. It hears the group on ``lo`` (frames sent as here) and keeps python-can's own
    membership on the default route's interface: a plain ``can.Bus(interface=
    "udp_multicast")`` in another process — python-can's defaults, e.g. the ``canopen``
    package's master — sends there, and its machine loops the frame back on that interface
    only; without that membership its frames would never arrive. It hears its own group only
    (Linux otherwise hands a socket every group on its port: two runs side by side, on other
    groups, would hear each other); a plain python-can bus hears every group on its port, ours
    included. False where the system refuses (the socket is left as python-can made it).
    """
    try:
        g = socket.inet_aton(group)
    except OSError:
        return False  # an IPv6 group: left to python-can's defaults
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                            g + socket.inet_aton("127.0.0.1"))
        except OSError as exc:  # the default route's interface is lo: joined there already
            if exc.errno != errno.EADDRINUSE:
                raise
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    except OSError:
        return False
    return True


def loopback_bus(group: str, **kwargs) -> can.BusABC:
    """A python-can ``udp_multicast`` bus on ``group`` set up as exo-rt's ports are
    (:func:`on_loopback`: it sends on the loopback interface and hears its own group only) —
    e.g. a logger beside several runs. A plain ``can.Bus(interface="udp_multicast")`` talks to
    exo-rt's buses too (it hears every group on its port)."""
    bus = can.Bus(interface="udp_multicast", channel=group, **kwargs)
    on_loopback(bus._multicast._socket, group)
    return bus


def open_port(bus: can.BusABC) -> FramePort:
    """The fastest port the bus's interface allows (its own API otherwise)."""
    name = type(bus).__name__
    try:
        if name == "UdpMulticastBus" and msgpack is not None:
            return UdpMulticastPort(bus)
        if name == "SocketcanBus":
            return SocketcanPort(bus)
    except (AttributeError, OSError):
        pass  # another python-can version's internals: the generic path still works
    return GenericPort(bus)
