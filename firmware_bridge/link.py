"""The PC side of the board link (DESIGN §4.3): any pyserial URL (``/dev/ttyACM0``, a
pseudo-terminal, ``loop://``).

:meth:`BoardLink.poll` reads what has arrived without blocking and decodes it — the control
loop calls it every cycle, so board status enters the cycle deterministically; a reader thread
(:meth:`start`) does the same for standalone use. Heartbeats go out with
:meth:`send_heartbeat` (rate-limited to ``heartbeat_hz``). The link is lost when no status has
arrived for ``link_timeout`` s of the link's clock (the simulated clock in lockstep runs).
Heel strikes (a foot-sole pressure rising through ``contact_N``) are queued with their times.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections import deque
from dataclasses import dataclass

import serial

from exo_rt.errors import BusError
from firmware_bridge import protocol as p


@dataclass
class LinkStats:
    sent: int = 0
    status: int = 0
    pressure: int = 0


class BoardLink:
    def __init__(self, url: str, *, heartbeat_hz: float = 1000.0, link_timeout: float = 0.05,
                 contact_N: float = 200.0, clock=time.monotonic, baudrate: int = 1_000_000):
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
            self._fd = None  # loop://, sockets …: pyserial's own reads
        self.clock = clock
        self.decoder = p.FrameDecoder()
        self.heartbeat_period = 1.0 / heartbeat_hz
        self.link_timeout = link_timeout
        self.contact_N = contact_N
        self.seq = 0
        self.status: p.Status | None = None
        self.status_time = clock()
        self.version: p.FirmwareVersion | None = None
        self.errors: deque = deque(maxlen=64)
        self.heel_strikes: deque = deque(maxlen=64)
        self._in_contact = False
        self._last_hb = -1e9
        self.stats = LinkStats()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ PC → board
    def _send(self, body) -> None:
        try:
            self.port.write(p.encode(body, self.seq))
            self.seq = (self.seq + 1) & 0xFF
            self.stats.sent += 1
        except (serial.SerialException, OSError):
            pass  # a dead link shows as link loss, not as an exception in the cycle

    def send_heartbeat(self, state: int, force: bool = False) -> None:
        now = self.clock()
        if force or now - self._last_hb >= self.heartbeat_period * 0.999:
            self._last_hb = now
            self._send(p.Heartbeat(state))

    def set_power(self, on: bool) -> None:
        self._send(p.Power(on))

    def indicator(self, pattern: int, red: int = 0, green: int = 0, blue: int = 0) -> None:
        self._send(p.Indicator(pattern, red, green, blue))

    # ------------------------------------------------------------------ board → PC
    def poll(self) -> None:
        """Read and decode everything available (never blocks, never raises)."""
        try:
            if self._fd is not None:  # a posix port: one non-blocking read system call
                try:
                    data = os.read(self._fd, 4096)
                except BlockingIOError:
                    data = b""
            else:
                waiting = self.port.in_waiting
                data = self.port.read(waiting) if waiting else b""
        except (serial.SerialException, OSError):
            return
        if data:
            for msg in self.decoder.feed(data):
                self._handle(msg.body)

    def _handle(self, body) -> None:
        now = self.clock()
        if isinstance(body, p.Status):
            self.status = body
            self.status_time = now
            self.stats.status += 1
        elif isinstance(body, p.Pressure):
            self.stats.pressure += 1
            heel = body.newton[0] if body.newton else 0
            if heel >= self.contact_N and not self._in_contact:
                self.heel_strikes.append(now)
            self._in_contact = heel >= self.contact_N * 0.5 if self._in_contact else (
                heel >= self.contact_N)
        elif isinstance(body, p.FirmwareVersion):
            self.version = body
        elif isinstance(body, p.Error):
            self.errors.append((now, body.code))

    @property
    def link_lost(self) -> bool:
        return self.clock() - self.status_time > self.link_timeout

    @property
    def estop(self) -> bool:
        return self.status is not None and self.status.estop

    @property
    def motor_power(self) -> bool:
        return self.status is not None and self.status.motor_power

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
