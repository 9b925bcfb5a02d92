"""The emulated drives behind a serial-line CAN (SLCAN, Lawicel) endpoint on a pseudo-terminal.

Cross-process rehearsal without vcan (docs/bus.md): ``exo-rt drives`` serves one bus of a
:class:`~exo_rt.sim.simbus.SimWorld` on a pty; the controller, in another process, opens it
with python-can's ``slcan`` interface exactly like a USB-CAN adapter
(``can.Bus(interface="slcan", channel=PTY, sleep_after_open=0)``).

SLCAN, as python-can speaks it: ASCII commands ending in CR — ``O`` open, ``C`` close,
``S0``…``S8`` bit rate, ``V``/``N`` version and serial number, ``tIIILDD…`` a standard frame
(id in 3 hex digits, length, data in hex), ``TIIIIIIIILDD…`` an extended one. The adapter
answers CR for OK and BEL for an error, and sends received frames in the same ``t`` format.
"""

from __future__ import annotations

import os
import select
import time
import tty

import can

from exo_rt.sim.simbus import SimWorld


def encode_frame(msg: can.Message) -> bytes:
    """A received frame as an SLCAN line."""
    data = bytes(msg.data).hex().upper()
    if msg.is_extended_id:
        return f"T{msg.arbitration_id:08X}{len(msg.data)}{data}\r".encode()
    return f"t{msg.arbitration_id:03X}{len(msg.data)}{data}\r".encode()


def decode_command(line: str) -> can.Message | str | None:
    """A frame to transmit, a non-frame command (its letter), or None if malformed."""
    if not line:
        return None
    kind = line[0]
    try:
        if kind == "t" and len(line) >= 5:
            n = int(line[4])
            data = bytes.fromhex(line[5 : 5 + 2 * n])
            if n > 8 or len(data) != n:
                return None
            return can.Message(arbitration_id=int(line[1:4], 16), data=data, is_extended_id=False)
        if kind == "T" and len(line) >= 10:
            n = int(line[9])
            data = bytes.fromhex(line[10 : 10 + 2 * n])
            if n > 8 or len(data) != n:
                return None
            return can.Message(arbitration_id=int(line[1:9], 16), data=data, is_extended_id=True)
    except ValueError:
        return None
    return kind if kind in "OCSVNFLZ" else None


class SlcanServer:
    """Serve bus ``channel`` of a world on a new pseudo-terminal (:attr:`path`)."""

    def __init__(self, world: SimWorld, channel: str) -> None:
        self.world = world
        self.channel = channel
        self.master, slave = os.openpty()
        tty.setraw(slave)
        self.path = os.ttyname(slave)
        self._slave = slave  # kept open so the pty lives while nobody has it open
        self._buffer = b""
        self.frames_in = 0
        self.frames_out = 0
        world.wall_heartbeats = True  # a real drive's heartbeat runs on its own clock
        self._next_heartbeat: dict[float, float] = {}

    def _answer(self, line: str) -> bytes:
        cmd = decode_command(line)
        if cmd is None:
            return b"\x07"
        if isinstance(cmd, can.Message):
            self.world.receive(self.channel, cmd)
            self.frames_in += 1
            out = []
            rx = self.world.endpoints[self.channel].rx
            while rx:
                out.append(encode_frame(rx.popleft()))
                self.frames_out += 1
            return b"".join(out)
        if cmd == "V":
            return b"V1013\r"
        if cmd == "N":
            return b"NEXO1\r"
        return b"\r"

    def _heartbeats(self) -> bytes:
        """Heartbeats due on the wall clock (the host may pause between SYNCs)."""
        now = time.monotonic()
        out = []
        periods = {d.heartbeat_ms for d, _ in self.world.endpoints[self.channel].drives}
        for period in periods:
            if not period:
                continue
            due = self._next_heartbeat.setdefault(period, now)
            if now >= due:
                out += [encode_frame(m) for m in self.world.heartbeats(self.channel, period)]
                self._next_heartbeat[period] = max(due + period * 1e-3, now)
        return b"".join(out)

    def serve_once(self, timeout: float = 0.1) -> bool:
        """Handle what has arrived within ``timeout``; False once the other side is gone."""
        ready, _, _ = select.select([self.master], [], [], min(timeout, 0.01))
        beats = self._heartbeats()
        if beats:
            try:
                os.write(self.master, beats)
            except OSError:
                return False
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 4096)
        except OSError:
            return False
        if not chunk:
            return False
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\r")
        reply = b"".join(self._answer(line.decode("ascii", "replace")) for line in lines)
        if reply:
            os.write(self.master, reply)
        return True

    def serve_forever(self, stop=lambda: False) -> None:
        while not stop() and self.serve_once():
            pass

    def close(self) -> None:
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass
