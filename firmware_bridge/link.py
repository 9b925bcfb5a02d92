"""The PC side of the board link (docs/board.md): any pyserial URL of a serial line
(``/dev/ttyACM0``, a pseudo-terminal, ``rfc2217://``), or ``fd:N`` (an open descriptor).

:meth:`BoardLink.poll` reads what has arrived without blocking and decodes it — the control
loop calls it every cycle, so board status enters the cycle deterministically; one read system
call into a preallocated buffer and one compiled call (:mod:`firmware_bridge.fastdecode`), no
Python object per frame; a reader thread
(:meth:`start`) does the same for standalone use. Heartbeats go out with
:meth:`send_heartbeat` (rate-limited to ``heartbeat_hz``). The link is lost when no status has
arrived for ``link_timeout`` s of the link's clock (the simulated clock in lockstep runs).
Heel strikes (a foot-sole pressure rising through ``contact_N``) are queued with their times.

The crutch's buttons (BUTTONS frames, every ``BUTTON_PERIOD_S`` and on a change): the held
:attr:`~BoardLink.buttons`, the :attr:`~BoardLink.button_presses` count, the link's time of
the last frame (:attr:`~BoardLink.buttons_time`: the input's liveness) and each change with
its time (:attr:`~BoardLink.button_changes`). The PC answers requests
(:meth:`~BoardLink.send_answer`) and feeds the crutch's display (:meth:`~BoardLink.send_menu`).
"""

from __future__ import annotations

import io
import os
import termios
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import serial

from exo_rt.errors import BusError
from firmware_bridge import fastdecode as fd
from firmware_bridge import protocol as p

READ_SIZE = 4096  # bytes one poll reads at most (the board sends ~25 bytes a millisecond)
FIONREAD = termios.FIONREAD  # the bytes a tty's line discipline holds (firmware_bridge.ttyio)
NEWS = fd.N_STATUS | fd.N_PYTHON


@dataclass
class LinkStats:
    sent: int = 0
    status: int = 0
    pressure: int = 0


class BoardLink:
    present = True  # a board is there (exo_rt.runtime.rig.Board's; NoBoard's is False)

    def __init__(self, url: str, *, heartbeat_hz: float = 1000.0, link_timeout: float = 0.05,
                 contact_N: float = 200.0, clock=time.monotonic, baudrate: int = 1_000_000,
                 menu_refresh_s: float = 0.5):
        try:
            if url.startswith("fd:"):  # an already open descriptor (the in-process emulator)
                self.port = _FdPort(int(url[3:]))
            else:
                self.port = serial.serial_for_url(url, baudrate=baudrate, timeout=0,
                                                  write_timeout=0)
        except (serial.SerialException, ValueError, OSError) as exc:
            raise BusError(f"cannot open the board link '{url}' ({exc})", None,
                           "check the USB cable and the port (ls /dev/ttyACM*), or use "
                           "--board emulator") from None
        self.url = url
        try:
            self._fd = self.port.fileno()
            os.set_blocking(self._fd, False)
        except (AttributeError, OSError, io.UnsupportedOperation):
            self._fd = None  # network URLs …: pyserial's own reads
        self.clock = clock
        self.heartbeat_period = 1.0 / heartbeat_hz
        self.link_timeout = link_timeout
        self.contact_N = float(contact_N)
        self.seq = 0
        self._status_time = np.array([clock()])  # (compiled code sets it too)
        self.version: p.FirmwareVersion | None = None
        self.errors: deque = deque(maxlen=64)
        self.heel_strikes: deque = deque(maxlen=64)
        # the crutch's buttons: each change as (time on ``clock``, mask, presses)
        self.button_changes: deque = deque(maxlen=64)
        self._buttons_time = np.array([np.nan])  # the last BUTTONS frame's (s, on ``clock``)
        self._changes_seen = 0  # button changes queued so far
        self.menu_refresh_s = menu_refresh_s
        self._menu: tuple | None = None  # the last MENU's fields and when it went out
        self._menu_time = -np.inf
        self._last_hb = -1e9
        self._heartbeats: dict[int, bytes] = {}  # (state << 8 | sequence) → its frame
        self._sent = 0
        self._st, self._partial, self._other, self._raw = fd.new_state()
        self._rbuf = np.zeros(READ_SIZE, dtype=np.uint8)
        self._count = np.zeros(1, np.int32)  # the bytes the line holds (FIONREAD's int)
        self._heel_seen = 0  # heel strikes queued so far
        # the compiled poll's arguments (fixed: one tuple), and the poll loaded now (on no
        # descriptor and no bytes: nothing read), not at the first poll, which numba's cache
        # load would hold up by ~0.1 s
        self._poll_args = (-1 if self._fd is None else self._fd, FIONREAD, self._count,
                           self._rbuf, self._st, self._partial, self._other, self._raw,
                           self.contact_N)
        fd.poll(-1, *self._poll_args[1:])
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def decoder_state(self) -> np.ndarray:
        """The decoder's state (:mod:`firmware_bridge.fastdecode`'s ``st``: the latest status,
        the foot-sole pressures and their count, the heel strikes …), filled in place by every
        poll, compiled or Python's: what the cycle reads the sole sensors from (the
        controllers' ``stance_load``)."""
        return self._st

    @property
    def status_time(self) -> float:
        """When the last STATUS came (s, on ``clock``): the link's liveness."""
        return float(self._status_time[0])

    @status_time.setter
    def status_time(self, t: float) -> None:
        self._status_time[0] = t

    @property
    def buttons(self) -> int:
        """The crutch's buttons held now (``firmware_bridge.requests.B_*`` bits; 0 before any
        BUTTONS frame)."""
        return int(self._st[fd.D_BUTTONS])

    @property
    def button_presses(self) -> int:
        """The board's count of button presses since it started (wraps at 2¹⁶)."""
        return int(self._st[fd.D_PRESSES])

    @property
    def buttons_time(self) -> float:
        """When the last BUTTONS frame came (s, on ``clock``, as :attr:`status_time`; NaN
        before any): their silence is the input's loss."""
        return float(self._buttons_time[0])

    def compiled_poll(self) -> tuple | None:
        """What a compiled cycle needs to poll this link itself (:func:`exo_rt.runtime.
        cycle_call.run`): :func:`~firmware_bridge.fastdecode.poll`'s arguments and the array
        of the last status's time — or None where the poll needs Python (pyserial's own
        reads; a clock other than CLOCK_MONOTONIC's)."""
        if self._fd is None or self.clock is not time.monotonic:
            return None
        return self._poll_args, self._status_time

    # ------------------------------------------------------------------ PC → board
    def _send(self, body) -> None:
        self._write(p.encode(body, self.seq))

    def _write(self, frame: bytes) -> None:
        try:
            self.port.write(frame)
            self.seq = (self.seq + 1) & 0xFF
            self._sent += 1
        except (serial.SerialException, OSError):
            pass  # a dead link shows as link loss, not as an exception in the cycle

    def send_heartbeat(self, state: int, force: bool = False) -> None:
        """A HEARTBEAT with the controller's state, at most at ``heartbeat_hz`` unless forced.
        Its frames are encoded once per (state, sequence number) and kept: the cycle sends
        one every few milliseconds, and encoding one in Python costs several µs."""
        now = self.clock()
        if force or now - self._last_hb >= self.heartbeat_period * 0.999:
            self._last_hb = now
            key = (state << 8) | self.seq
            frame = self._heartbeats.get(key)
            if frame is None:
                frame = self._heartbeats[key] = p.encode(p.Heartbeat(state), self.seq)
            self._write(frame)

    def set_power(self, on: bool) -> None:
        self._send(p.Power(on))

    def indicator(self, pattern: int, red: int = 0, green: int = 0, blue: int = 0) -> None:
        self._send(p.Indicator(pattern, red, green, blue))

    def send_answer(self, kind: int, answer: int, reason: int = 0,
                    motion_index: int | None = None) -> None:
        """An ANSWER to the board: the request's ``kind``, ``answer``, ``reason`` (codes of
        :mod:`firmware_bridge.requests`) and the motion's index in the activities file (None:
        none). Out-of-range values raise ValueError (naming the field)."""
        self._send(p.Answer(kind, answer, reason,
                            p.NO_INDEX if motion_index is None else motion_index))

    def send_menu(self, state: int, posture: int | None, motion: int | None,
                  selected: int | None, possible_mask: int, steps: int, speed_mm_s: float,
                  level_pct: float, *, force: bool = False) -> bool:
        """A MENU for the crutch's display: the controller's ``state``, the ``posture``, the
        running ``motion`` and the ``selected`` one (indices; None: none), the motions that may
        start now (``possible_mask``, bit i: motion i), the strides walked, the speed (mm/s,
        rounded) and the assistance level (%, rounded). Sent when it differs from the last one
        sent, or ``menu_refresh_s`` after it (a board that restarted shows it again), or
        ``force``; returns whether it was. Call it at will: an unchanged menu costs a compare."""
        none = p.NO_INDEX
        fields = (state, none if posture is None else posture, none if motion is None else motion,
                  none if selected is None else selected, possible_mask, steps,
                  int(round(speed_mm_s)), int(round(level_pct)))
        now = self.clock()
        if not force and fields == self._menu and now - self._menu_time < self.menu_refresh_s:
            return False
        self._send(p.Menu(*fields))
        self._menu, self._menu_time = fields, now
        return True

    # ------------------------------------------------------------------ board → PC
    def poll(self) -> int:
        """Read and decode everything available (never blocks, never raises); returns the
        board's word: ``B_ESTOP`` (1) e-stop pressed, ``B_LINK_LOST`` (2) no status for the
        link timeout, ``B_POWER_OFF`` (4) motor power off or not reported yet."""
        if self._fd is not None:  # a posix port: read and decoded in one compiled call
            out = fd.poll(*self._poll_args)
        else:
            try:
                waiting = self.port.in_waiting
                data = self.port.read(min(waiting, READ_SIZE)) if waiting else b""
            except (serial.SerialException, OSError):
                data = b""
            n = self._count[0] = len(data)
            self._rbuf[:n] = np.frombuffer(data, dtype=np.uint8)
            out = fd.poll(*self._poll_args)  # (no descriptor: the bytes in the buffer)
        now = self.clock()
        if out & NEWS:
            self.take_news(out, now)
        word = out >> fd.WORD_SHIFT
        return word | fd.B_LINK_LOST if now - self.status_time > self.link_timeout else word

    def take_news(self, out: int, now: float) -> None:
        """What a poll brought: a status (the link is alive), heel strikes, the buttons'
        frames (their time; their changes, each once), rare frames."""
        st = self._st
        if out & fd.N_STATUS:
            self.status_time = now
        if out & fd.N_BUTTONS:
            self._buttons_time[0] = now
            changes = int(st[fd.D_CHANGES])
            for c in range(max(self._changes_seen, changes - fd.CHANGE_SLOTS), changes):
                slot = fd.D_CHANGE_RING + 2 * (c % fd.CHANGE_SLOTS)
                self.button_changes.append((now, int(st[slot]), int(st[slot + 1])))
            self._changes_seen = changes
        if out & fd.N_HEEL:
            heel_n = int(st[fd.D_HEEL_N])
            for _ in range(heel_n - self._heel_seen):
                self.heel_strikes.append(now)
            self._heel_seen = heel_n
        if out & fd.N_OTHER:
            for row in range(st[fd.D_OTHER]):  # the rare kinds: version, error (others: none
                # the PC takes; a PC → board frame looped back)
                kind, length = int(self._other[row, 0]), int(self._other[row, 2])
                body = p._body(kind, bytes(self._other[row, 3:3 + length]))
                if isinstance(body, p.FirmwareVersion):
                    self.version = body
                elif isinstance(body, p.Error):
                    self.errors.append((now, body.code))
            st[fd.D_OTHER] = 0

    @property
    def status(self) -> p.Status | None:
        """The board's latest STATUS (None before the first)."""
        st = self._st
        if not st[fd.D_STATUS_N]:
            return None
        return p.Status(bool(st[fd.D_ESTOP]), bool(st[fd.D_POWER]), bool(st[fd.D_TRIPPED]),
                        int(st[fd.D_SUPPLY]))

    @property
    def stats(self) -> LinkStats:
        return LinkStats(self._sent, int(self._st[fd.D_STATUS_N]),
                         int(self._st[fd.D_PRESSURE_N]))

    @property
    def decoder_stats(self) -> p.DecoderStats:
        """What the receive path accepted and refused (as ``FrameDecoder.stats``)."""
        st = self._st
        return p.DecoderStats(*(int(st[c]) for c in (
            fd.D_FRAMES, fd.D_CRC, fd.D_BAD_LENGTH, fd.D_UNKNOWN, fd.D_BAD_VERSION,
            fd.D_OVERSIZE, fd.D_COBS, fd.D_RESYNCS, fd.D_GAPS)))

    @property
    def link_lost(self) -> bool:
        return self.clock() - self.status_time > self.link_timeout

    @property
    def estop(self) -> bool:
        return bool(self._st[fd.D_STATUS_N] and self._st[fd.D_ESTOP])

    @property
    def motor_power(self) -> bool:
        return bool(self._st[fd.D_STATUS_N] and self._st[fd.D_POWER])

    def wait_for_status(self, timeout: float = 1.0, tick=None) -> bool:
        """Wait until the board has reported its state once (True), without asking anything."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if tick is not None:
                tick()
            self.poll()
            if self.status is not None:
                return True
            time.sleep(0.001)
        return False

    def wait_for_power(self, timeout: float = 1.0, tick=None) -> bool:
        """Ask for motor power and wait until the board reports it on."""
        self.set_power(True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if tick is not None:
                tick()
            self.poll()
            if self.motor_power and not self.estop:
                return True
            time.sleep(0.001)
        return False

    # ------------------------------------------------------------------ standalone reader
    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="board-link", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            time.sleep(0.0002)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        try:
            self.port.close()
        except (serial.SerialException, OSError):
            pass


class _FdPort:
    """The few pyserial methods BoardLink uses, on a raw descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self.fd

    def write(self, data: bytes) -> int:
        return os.write(self.fd, data)

    @property
    def in_waiting(self) -> int:
        return 0

    def read(self, n: int) -> bytes:
        return b""

    def close(self) -> None:
        os.close(self.fd)


def warm_up() -> None:
    """Compile (or load) a link's receive path as a run's link has it — on a descriptor (a
    pty here), where the poll is compiled code — before a run needs it."""
    line, pc = os.openpty()
    try:
        link = BoardLink(f"fd:{pc}")
        link.poll()
        link.close()
    finally:
        os.close(line)
