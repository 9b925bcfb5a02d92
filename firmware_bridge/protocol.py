"""The serial protocol between the controller PC and the exoskeleton's embedded board
(docs/board.md).

A frame is ``COBS([version, type, sequence, length, payload…, crc_lo, crc_hi]) + 0x00``: the
0x00 delimiter never occurs inside a COBS-encoded frame, so a receiver resynchronises at the
next delimiter after any garbage. The CRC is CRC-16/CCITT-FALSE (polynomial 0x1021, initial
0xFFFF; the standard library's ``binascii.crc_hqx``) over version … payload, little-endian.
COBS is the ``cobs`` package's. All multi-byte fields are little-endian.

Messages (payload layouts):

| type | direction | payload |
|---|---|---|
| 0x01 HEARTBEAT | PC → board | controller state u8 |
| 0x02 POWER | PC → board | enable u8 (1 on, 0 off; re-arms a tripped watchdog) |
| 0x03 INDICATOR | PC → board | pattern u8, red u8, green u8, blue u8 |
| 0x04 ANSWER | PC → board | request kind u8, answer u8, reason u8, motion index u8 (0xFF none) |
| 0x05 MENU | PC → board | controller state u8, posture u8, running motion u8, selected |
|  |  | motion u8 (indices, 0xFF none), possible motions u32 (bit i: motion i), |
|  |  | steps u16, speed mm/s u16, assistance level % u8 (0–100) |
| 0x81 STATUS | board → PC | flags u8 (bit0 e-stop, bit1 motor power, bit2 watchdog |
|  |  | tripped), supply mV u16 |
| 0x82 PRESSURE | board → PC | n u8, then n × u16 foot-sole pressure (N) |
| 0x83 VERSION | board → PC | major u8, minor u8, patch u8 |
| 0x84 ERROR | board → PC | code u16 |
| 0x85 BUTTONS | board → PC | held buttons u8 (``B_*`` bits), presses u16 (wrapping count) |

The codes inside ANSWER, MENU and BUTTONS (request kinds, answers, reasons, button bits) are
:mod:`firmware_bridge.requests`'. A decoder accepts a frame whose payload has its type's length
(and POWER's enable 0 or 1, MENU's level 0–100); any other is counted (``unknown_type``)
and skipped.
"""

from __future__ import annotations

import binascii
import operator
import struct
from dataclasses import dataclass, field, fields

from cobs import cobs

VERSION = 1
MAX_PAYLOAD = 64
MAX_FRAME = 2 + 4 + MAX_PAYLOAD + 2 + 2  # COBS overhead for ≤ 254 bytes is 1, plus slack

HEARTBEAT, POWER, INDICATOR, ANSWER, MENU = 0x01, 0x02, 0x03, 0x04, 0x05
STATUS, PRESSURE, FW_VERSION, ERROR, BUTTONS = 0x81, 0x82, 0x83, 0x84, 0x85
NO_INDEX = 0xFF  # a MENU's or ANSWER's index field: no posture / motion

ST_ESTOP, ST_POWER, ST_WATCHDOG = 0x01, 0x02, 0x04


@dataclass(frozen=True)
class Heartbeat:
    state: int  # the controller's state (exo_rt.runtime.controller.STATES index)


@dataclass(frozen=True)
class Power:
    enable: bool


@dataclass(frozen=True)
class Indicator:
    pattern: int
    red: int = 0
    green: int = 0
    blue: int = 0


@dataclass(frozen=True)
class Status:
    estop: bool
    motor_power: bool
    watchdog_tripped: bool
    supply_mV: int


@dataclass(frozen=True)
class Pressure:
    newton: tuple[int, ...]  # foot-sole sensors (N)


@dataclass(frozen=True)
class FirmwareVersion:
    major: int
    minor: int
    patch: int


@dataclass(frozen=True)
class Error:
    code: int


@dataclass(frozen=True)
class Buttons:
    """The crutch's buttons: ``mask`` those held now (``firmware_bridge.requests.B_*`` bits),
    ``presses`` the presses of any button since the board started (wraps at 2¹⁶): a press and
    release between two frames still counts."""

    mask: int
    presses: int


@dataclass(frozen=True)
class Answer:
    """The PC's answer to a request (``firmware_bridge.requests`` codes): the request's
    ``kind``, ``answer`` (accepted / rejected / finished), ``reason`` (rejected: why), the
    ``motion``'s index in the activities file (:data:`NO_INDEX`: none)."""

    kind: int
    answer: int
    reason: int = 0
    motion: int = NO_INDEX


@dataclass(frozen=True)
class Menu:
    """What the crutch's display shows: the controller's ``state``, the ``posture`` the leg is
    in, the ``motion`` running and the one ``selected`` (indices in the activities file,
    :data:`NO_INDEX`: none or unknown), ``possible`` (bit i: motion i may start now), the
    ``steps`` (strides) walked, ``speed_mm_s`` (mm/s) and the assistance ``level_pct`` (%)."""

    state: int
    posture: int = NO_INDEX
    motion: int = NO_INDEX
    selected: int = NO_INDEX
    possible: int = 0
    steps: int = 0
    speed_mm_s: int = 0
    level_pct: int = 100


# the session frames' payloads: kind and struct format, one code per field in field order
_FIXED = {Buttons: (BUTTONS, "<BH"), Answer: (ANSWER, "<BBBB"), Menu: (MENU, "<BBBBIHHB")}
_FIXED_BY_KIND = {kind: (cls, struct.Struct(fmt)) for cls, (kind, fmt) in _FIXED.items()}
_TOP = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFF_FFFF}
_FIELD_TOP = {"level_pct": 100}  # fields narrower than their wire type


def _check_fields(body) -> tuple[int, ...]:
    """A session frame's field values, each checked against its range (a ValueError naming
    the field; ``presses`` wraps at 2¹⁶ and is taken modulo)."""
    values = []
    for f, code in zip(fields(body), _FIXED[type(body)][1][1:], strict=True):
        v = getattr(body, f.name)
        top = _FIELD_TOP.get(f.name, _TOP[code])
        try:
            v = operator.index(v)
        except TypeError:
            v = None
        if v is not None and f.name == "presses":
            v &= 0xFFFF
        if v is None or not 0 <= v <= top:
            raise ValueError(f"{type(body).__name__}.{f.name} = {getattr(body, f.name)!r} "
                             f"does not fit its frame: an integer 0–{top}")
        values.append(v)
    return tuple(values)


@dataclass(frozen=True)
class Message:
    """A decoded frame: its sequence number and its content."""

    sequence: int
    body: object


def _payload(body) -> tuple[int, bytes]:
    if isinstance(body, Heartbeat):
        return HEARTBEAT, struct.pack("<B", body.state & 0xFF)
    if isinstance(body, Power):
        return POWER, struct.pack("<B", 1 if body.enable else 0)
    if isinstance(body, Indicator):
        return INDICATOR, struct.pack("<4B", body.pattern, body.red, body.green, body.blue)
    if isinstance(body, Status):
        flags = (ST_ESTOP if body.estop else 0) | (ST_POWER if body.motor_power else 0) | (
            ST_WATCHDOG if body.watchdog_tripped else 0)
        return STATUS, struct.pack("<BH", flags, body.supply_mV & 0xFFFF)
    if isinstance(body, Pressure):
        if len(body.newton) > (MAX_PAYLOAD - 1) // 2:
            raise ValueError("too many pressure sensors for one frame")
        return PRESSURE, struct.pack(f"<B{len(body.newton)}H", len(body.newton), *body.newton)
    if isinstance(body, FirmwareVersion):
        return FW_VERSION, struct.pack("<3B", body.major, body.minor, body.patch)
    if isinstance(body, Error):
        return ERROR, struct.pack("<H", body.code)
    if type(body) in _FIXED:
        kind, fmt = _FIXED[type(body)]
        return kind, struct.pack(fmt, *_check_fields(body))
    raise TypeError(f"not a message: {body!r}")


def encode(body, sequence: int) -> bytes:
    """One frame: COBS(header + payload + CRC) + 0x00."""
    kind, payload = _payload(body)
    raw = bytes((VERSION, kind, sequence & 0xFF, len(payload))) + payload
    raw += struct.pack("<H", binascii.crc_hqx(raw, 0xFFFF))
    return cobs.encode(raw) + b"\x00"


def _body(kind: int, p: bytes):
    """The message of a CRC-checked frame, or None if its payload does not fit its type."""
    if kind == HEARTBEAT and len(p) == 1:
        return Heartbeat(p[0])
    if kind == POWER and len(p) == 1 and p[0] in (0, 1):
        return Power(bool(p[0]))
    if kind == INDICATOR and len(p) == 4:
        return Indicator(*p)
    if kind == STATUS and len(p) == 3:
        flags, mv = struct.unpack("<BH", p)
        return Status(bool(flags & ST_ESTOP), bool(flags & ST_POWER), bool(flags & ST_WATCHDOG),
                      mv)
    if kind == PRESSURE and len(p) >= 1 and len(p) == 1 + 2 * p[0]:
        return Pressure(struct.unpack(f"<{p[0]}H", p[1:]))
    if kind == FW_VERSION and len(p) == 3:
        return FirmwareVersion(*p)
    if kind == ERROR and len(p) == 2:
        return Error(struct.unpack("<H", p)[0])
    fixed = _FIXED_BY_KIND.get(kind)
    if fixed is not None and len(p) == fixed[1].size:
        body = fixed[0](*fixed[1].unpack(p))
        if all(getattr(body, name, 0) <= top for name, top in _FIELD_TOP.items()):
            return body  # (every field in its range: what an encoder may send)
    return None


@dataclass
class DecoderStats:
    frames: int = 0
    crc_errors: int = 0
    bad_length: int = 0
    unknown_type: int = 0
    bad_version: int = 0
    oversize: int = 0
    cobs_errors: int = 0
    resyncs: int = 0  # frames dropped for any reason: the decoder restarted at a delimiter
    gaps: int = 0  # sequence numbers skipped


@dataclass
class FrameDecoder:
    """Stream decoder: ``feed(bytes) -> [Message]``. Never raises on what it is fed: bad CRC,
    length, type or version, truncated, oversize or undecodable frames are counted and skipped
    and decoding resumes at the next 0x00 delimiter."""

    stats: DecoderStats = field(default_factory=DecoderStats)
    _buf: bytearray = field(default_factory=bytearray)
    _overflow: bool = False
    _last_seq: int | None = None

    def feed(self, data: bytes) -> list[Message]:
        out: list[Message] = []
        data = bytes(data)
        start = 0
        while True:
            end = data.find(b"\x00", start)
            if end < 0:
                self._append(data[start:])
                break
            self._append(data[start:end])
            frame, overflow = bytes(self._buf), self._overflow
            self._buf.clear()
            self._overflow = False
            start = end + 1
            if overflow:
                self.stats.oversize += 1
                self.stats.resyncs += 1
            elif frame:
                msg = self._frame(frame)
                if msg is not None:
                    out.append(msg)
        return out

    def _append(self, chunk: bytes) -> None:
        if self._overflow:
            return
        if len(self._buf) + len(chunk) > MAX_FRAME:
            self._overflow = True
            self._buf.clear()
        else:
            self._buf += chunk

    def _frame(self, encoded: bytes) -> Message | None:
        s = self.stats
        try:
            raw = cobs.decode(encoded)
        except cobs.DecodeError:
            s.cobs_errors += 1
            s.resyncs += 1
            return None
        if len(raw) < 6 or len(raw) != 6 + raw[3]:
            s.bad_length += 1
            s.resyncs += 1
            return None
        if struct.unpack("<H", raw[-2:])[0] != binascii.crc_hqx(raw[:-2], 0xFFFF):
            s.crc_errors += 1
            s.resyncs += 1
            return None
        if raw[0] != VERSION:
            s.bad_version += 1
            s.resyncs += 1
            return None
        body = _body(raw[1], raw[4:-2])
        if body is None:
            s.unknown_type += 1
            s.resyncs += 1
            return None
        s.frames += 1
        seq = raw[2]
        if self._last_seq is not None and seq != (self._last_seq + 1) & 0xFF:
            s.gaps += 1
        self._last_seq = seq
        return Message(seq, body)
