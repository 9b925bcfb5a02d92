"""The board link's receive path in one compiled call: the bytes of one read → the board's
latest state, with no Python object per frame.

The control loop reads the board every cycle, and the board sends a status and a pressure
frame every millisecond: decoded in Python (COBS, CRC, a message object each, the dispatch)
that took more of the cycle than the control law. :func:`decode_stream` does exactly what
:class:`firmware_bridge.protocol.FrameDecoder` does — the same frames accepted, the same ones
refused and counted, the same resynchronisation at each 0x00 delimiter, the same sequence
gaps (tests/test_firmware_bridge.py feeds both the same streams) — on preallocated arrays:

- ``st`` (int64, columns ``D_*``): the decoder's state (the partial frame's length, whether
  it overflowed, the last sequence number), its statistics (as ``DecoderStats``), the latest
  STATUS (e-stop, motor power, watchdog tripped, supply mV) and how many arrived, the latest
  PRESSURE (sensor count and values) and how many arrived, the heel-strike detector (contact
  and the number of strikes), the crutch's buttons (the latest BUTTONS frame's mask and press
  count, how many frames came, and the last :data:`CHANGE_SLOTS` changes of either in a ring
  with their running count, so that Python sees each change once, even several in one read);
- ``partial`` (uint8): the bytes of a frame whose delimiter has not arrived yet;
- ``other`` (uint8 rows: kind, sequence, length, payload …) and ``st[D_OTHER]``: the frames
  of the rare kinds (firmware version, error, and any PC → board kind looped back), left to
  Python to turn into messages.

Columns are appended, never renumbered (a kernel compiled against the old layout keeps
reading the old columns right).
"""

from __future__ import annotations

import numpy as np
from numba import types

from exo_rt.jit import njit
from firmware_bridge.protocol import (
    ANSWER,
    BUTTONS,
    ERROR,
    FW_VERSION,
    HEARTBEAT,
    INDICATOR,
    MAX_FRAME,
    MAX_PAYLOAD,
    MENU,
    POWER,
    PRESSURE,
    ST_ESTOP,
    ST_POWER,
    ST_WATCHDOG,
    STATUS,
    VERSION,
)

# st columns: decoder state
D_LEN, D_OVERFLOW, D_LAST_SEQ = 0, 1, 2  # partial frame's length; 1: it overflowed; −1: none
# statistics (DecoderStats' fields)
D_FRAMES, D_CRC, D_BAD_LENGTH, D_UNKNOWN, D_BAD_VERSION, D_OVERSIZE, D_COBS, D_RESYNCS, \
    D_GAPS = 3, 4, 5, 6, 7, 8, 9, 10, 11
# the board's latest status and pressures
D_STATUS_N, D_ESTOP, D_POWER, D_TRIPPED, D_SUPPLY = 12, 13, 14, 15, 16
D_PRESSURE_N, D_IN_CONTACT, D_HEEL_N, D_N_SENSORS = 17, 18, 19, 20
D_OTHER = 21  # frames of other kinds waiting in ``other``
D_SENSORS = 22  # the latest pressure values (N), up to MAX_SENSORS
MAX_SENSORS = (MAX_FRAME - 7) // 2  # the most a frame of MAX_FRAME bytes can carry
# the crutch's buttons: BUTTONS frames, the latest mask and presses, changes (a running count)
D_BUTTONS_N = D_SENSORS + MAX_SENSORS
D_BUTTONS, D_PRESSES, D_CHANGES = D_BUTTONS_N + 1, D_BUTTONS_N + 2, D_BUTTONS_N + 3
D_CHANGE_RING = D_BUTTONS_N + 4  # change c (0-based) at D_CHANGE_RING + 2 (c % CHANGE_SLOTS)
CHANGE_SLOTS = 16  # changes kept between two reads of Python (more: the oldest are lost)
D_SWING = D_CHANGE_RING + 2 * CHANGE_SLOTS  # PRESSURE frames since the heel was last released
D_WIDTH = D_SWING + 1
# a rise through contact is a heel strike only after the heel was released this many PRESSURE
# frames (0.2 s at the board's 1 kHz): a foot switch's swing debounce — a stance load that
# dips under the release for a few hundredths of a second and returns is no landing (a swing
# lasts 0.3 s and more; docs/world.md, the leading wearer)
MIN_SWING_FRAMES = 200
OTHER_ROWS = 16  # rare frames kept between two reads (more are counted as gaps of nothing)
OTHER_WIDTH = 3 + MAX_PAYLOAD


def _crc_table() -> np.ndarray:
    """CRC-16/CCITT-FALSE (polynomial 0x1021, MSB first) by byte: binascii.crc_hqx's."""
    table = np.zeros(256, dtype=np.int64)
    for b in range(256):
        crc = b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table[b] = crc & 0xFFFF
    return table


CRC_TABLE = _crc_table()


def new_state() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(st, partial, other, scratch): the arrays :func:`decode_stream` works on."""
    st = np.zeros(D_WIDTH, dtype=np.int64)
    st[D_LAST_SEQ] = -1
    return (st, np.zeros(MAX_FRAME, dtype=np.uint8),
            np.zeros((OTHER_ROWS, OTHER_WIDTH), dtype=np.uint8),
            np.zeros(MAX_FRAME + 8, dtype=np.uint8))


# inline="always": the small steps compile into :func:`_frame` and :func:`decode_stream`
# (numba IR inlining), not as kernels of their own: less to compile on a cold start.
@njit(cache=True, inline="always")
def _cobs(enc, n, raw):
    """COBS-decode enc[:n] into raw; the decoded length, or −1 (the ``cobs`` package's
    DecodeError: a zero byte, or a length code past the end)."""
    i = 0
    m = 0
    while i < n:
        code = int(enc[i])
        if code == 0:
            return -1
        i += 1
        end = i + code - 1
        if end > n:
            return -1
        while i < end:
            if enc[i] == 0:
                return -1
            raw[m] = enc[i]
            m += 1
            i += 1
        if i < n and code < 0xFF:
            raw[m] = 0
            m += 1
    return m


@njit(cache=True, inline="always")
def _valid_body(kind, raw, plen):
    """Whether a CRC-checked frame's payload fits its type (protocol._body's rules)."""
    if kind == HEARTBEAT:
        return plen == 1
    if kind == POWER:
        return plen == 1 and raw[4] <= 1
    if kind == INDICATOR or kind == ANSWER:
        return plen == 4
    if kind == MENU:  # (its level: 0–100 %)
        return plen == 13 and raw[16] <= 100
    if kind == BUTTONS:
        return plen == 3
    if kind == STATUS:
        return plen == 3
    if kind == PRESSURE:
        return plen >= 1 and plen == 1 + 2 * int(raw[4])
    if kind == FW_VERSION:
        return plen == 3
    if kind == ERROR:
        return plen == 2
    return False


@njit(cache=True, python=False)
def _frame(enc, n, st, other, raw, contact):
    """One delimited frame: checked, counted, and applied to the board's state."""
    m = _cobs(enc, n, raw)
    if m < 0:
        st[D_COBS] += 1
        st[D_RESYNCS] += 1
        return
    if m < 6 or m != 6 + int(raw[3]):
        st[D_BAD_LENGTH] += 1
        st[D_RESYNCS] += 1
        return
    crc = 0xFFFF
    for i in range(m - 2):
        crc = ((crc << 8) & 0xFFFF) ^ CRC_TABLE[((crc >> 8) ^ int(raw[i])) & 0xFF]
    if int(raw[m - 2]) | (int(raw[m - 1]) << 8) != crc:
        st[D_CRC] += 1
        st[D_RESYNCS] += 1
        return
    if raw[0] != VERSION:
        st[D_BAD_VERSION] += 1
        st[D_RESYNCS] += 1
        return
    kind = int(raw[1])
    plen = m - 6
    if not _valid_body(kind, raw, plen):
        st[D_UNKNOWN] += 1
        st[D_RESYNCS] += 1
        return
    st[D_FRAMES] += 1
    seq = int(raw[2])
    if st[D_LAST_SEQ] >= 0 and seq != ((st[D_LAST_SEQ] + 1) & 0xFF):
        st[D_GAPS] += 1
    st[D_LAST_SEQ] = seq
    if kind == STATUS:
        flags = int(raw[4])
        st[D_ESTOP] = 1 if flags & ST_ESTOP else 0
        st[D_POWER] = 1 if flags & ST_POWER else 0
        st[D_TRIPPED] = 1 if flags & ST_WATCHDOG else 0
        st[D_SUPPLY] = int(raw[5]) | (int(raw[6]) << 8)
        st[D_STATUS_N] += 1
    elif kind == PRESSURE:
        k = int(raw[4])
        st[D_N_SENSORS] = k
        for s in range(k):
            st[D_SENSORS + s] = int(raw[5 + 2 * s]) | (int(raw[6 + 2 * s]) << 8)
        st[D_PRESSURE_N] += 1
        heel = st[D_SENSORS] if k else 0
        if st[D_IN_CONTACT]:  # a strike: the heel rising through contact; released at half
            if heel < contact * 0.5:
                st[D_IN_CONTACT] = 0
                st[D_SWING] = 0
        else:
            st[D_SWING] += 1
            if heel >= contact:
                st[D_IN_CONTACT] = 1
                if st[D_SWING] >= MIN_SWING_FRAMES or st[D_HEEL_N] == 0:  # (the first: counted)
                    st[D_HEEL_N] += 1
    elif kind == BUTTONS:
        mask, presses = int(raw[4]), int(raw[5]) | (int(raw[6]) << 8)
        if st[D_BUTTONS_N] == 0 or mask != st[D_BUTTONS] or presses != st[D_PRESSES]:
            slot = D_CHANGE_RING + 2 * (st[D_CHANGES] % CHANGE_SLOTS)
            st[slot] = mask
            st[slot + 1] = presses
            st[D_CHANGES] += 1
        st[D_BUTTONS] = mask
        st[D_PRESSES] = presses
        st[D_BUTTONS_N] += 1
    else:
        row = st[D_OTHER]
        if row < other.shape[0]:
            other[row, 0] = kind
            other[row, 1] = seq
            other[row, 2] = plen
            for i in range(plen):
                other[row, 3 + i] = raw[4 + i]
            st[D_OTHER] = row + 1


@njit(cache=True, inline="always")
def _append(data, start, end, st, partial):
    """data[start:end] onto the partial frame (FrameDecoder._append: past MAX_FRAME the frame
    is dropped, and so is the rest of it up to its delimiter)."""
    if st[D_OVERFLOW]:
        return
    chunk = end - start
    if st[D_LEN] + chunk > partial.shape[0]:
        st[D_OVERFLOW] = 1
        st[D_LEN] = 0
        return
    for j in range(chunk):
        partial[st[D_LEN] + j] = data[start + j]
    st[D_LEN] += chunk


@njit(cache=True)
def decode_stream(data, n, st, partial, other, raw, contact):
    """Feed data[:n] (bytes read from the link) to the decoder; ``contact`` (N) is the heel
    pressure of a strike. Returns the frames accepted."""
    before = st[D_FRAMES]
    start = 0
    for i in range(n):
        if data[i] != 0:
            continue
        _append(data, start, i, st, partial)  # the bytes since the last delimiter
        if st[D_OVERFLOW]:
            st[D_OVERSIZE] += 1
            st[D_RESYNCS] += 1
        elif st[D_LEN] > 0:
            _frame(partial, st[D_LEN], st, other, raw, contact)
        st[D_LEN] = 0
        st[D_OVERFLOW] = 0
        start = i + 1
    _append(data, start, n, st, partial)  # a frame still open: kept for the next read
    return st[D_FRAMES] - before


# ---------------------------------------------------------------- the cycle's whole poll
# what a poll brought (bits): a new STATUS, new heel strikes, frames of the rare kinds, a
# BUTTONS frame (every 20 ms: the buttons' liveness, and maybe a change); N_PYTHON: what
# Python must take (BoardLink.take_news), all but the status
N_STATUS, N_HEEL, N_OTHER, N_BUTTONS = 1, 2, 4, 8
N_PYTHON = N_HEEL | N_OTHER | N_BUTTONS
# the board's word (bits, as the cycle's S_BOARD): e-stop pressed, link lost, motor power off
B_ESTOP, B_LINK_LOST, B_POWER_OFF = 1, 2, 4
WORD_SHIFT = 4  # poll's result: news | word << WORD_SHIFT

_ioctl = types.ExternalFunction("ioctl", types.intc(types.intc, types.uint64, types.intp))
_read = types.ExternalFunction("read", types.intp(types.intc, types.intp, types.uintp))


@njit(cache=True, inline="always")
def feed(data, n, st, partial, other, raw, contact):
    """:func:`decode_stream` of data[:n], reporting what it brought and the board's word:
    ``news | word << WORD_SHIFT`` (``N_*``; ``B_ESTOP``, ``B_POWER_OFF`` — the link's loss is
    the caller's, on its own clock)."""
    status_n, heel_n, buttons_n = st[D_STATUS_N], st[D_HEEL_N], st[D_BUTTONS_N]
    if n > 0:
        decode_stream(data, n, st, partial, other, raw, contact)
    news = ((N_STATUS if st[D_STATUS_N] != status_n else 0)
            | (N_HEEL if st[D_HEEL_N] != heel_n else 0) | (N_OTHER if st[D_OTHER] else 0)
            | (N_BUTTONS if st[D_BUTTONS_N] != buttons_n else 0))
    known = st[D_STATUS_N] > 0
    word = (B_ESTOP if known and st[D_ESTOP] else 0) | (0 if known and st[D_POWER] else B_POWER_OFF)
    return news | (word << WORD_SHIFT)


@njit(cache=True)
def poll(fd, request, count, data, st, partial, other, raw, contact):
    """One poll of a serial line in one compiled call: ask the line discipline how many bytes
    it holds (``ioctl(fd, FIONREAD)``, ``request``; never waits on the kernel's tty worker:
    :mod:`firmware_bridge.ttyio`), read only those into ``data``, and :func:`feed` them. A
    descriptor that fails (closed, unplugged) reads as no bytes. ``fd`` < 0: no descriptor
    (pyserial's own reads, e.g. ``rfc2217://``): ``data`` already holds ``count[0]`` bytes."""
    n = count[0] if fd < 0 else 0
    if fd >= 0 and _ioctl(fd, request, count.ctypes.data) == 0 and count[0] > 0:
        n = _read(fd, data.ctypes.data, min(count[0], data.shape[0]))
    return feed(data, n, st, partial, other, raw, contact)
