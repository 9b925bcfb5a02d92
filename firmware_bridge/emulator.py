"""The embedded board, emulated on a pseudo-terminal or an in-process socket pair (docs/board.md).

It answers the controller like the real safety/sensor MCU: status (e-stop, motor power,
supply voltage, watchdog) and foot-sole pressures every ``status_period``, its firmware version
at start; a watchdog that cuts motor power when heartbeats stop for ``watchdog_s`` and latches
until re-armed by a POWER enable; an e-stop that cuts motor power; foot-sole pressure following
a simulated gait of ``stride_s`` — or, in the world, the feet's contacts (:attr:`soles`).
Faults: garbage bytes, dropped frames, stalls.

The crutch: its buttons (:meth:`~BoardEmulator.press`, :meth:`~BoardEmulator.release`,
:meth:`~BoardEmulator.click`, or planned on the emulator's clock,
:meth:`~BoardEmulator.schedule_buttons`) go out in a BUTTONS frame every ``BUTTON_PERIOD_S``
and at the first tick after a change; :meth:`~BoardEmulator.silence` holds those frames back
(the input's loss). Every ANSWER and MENU the PC sends is kept with its time (``answers``,
``menus``; ``menu``: what the crutch's display shows).

:meth:`tick` advances it to time ``now`` (the simulated clock in lockstep runs, called each
cycle); :meth:`start` runs it in its own thread on the wall clock.
"""

from __future__ import annotations

import bisect
import os
import socket
import threading
import time
import tty
from collections import deque
from collections.abc import Iterable

from firmware_bridge import protocol as p
from firmware_bridge import ttyio
from firmware_bridge.requests import BUTTON_PERIOD_S, BUTTONS

BUTTON_BITS = {name: bit for bit, name in BUTTONS.items()}
RECORDS = 10_000  # ANSWER / MENU frames and button changes kept (the oldest go first)
_EARLY = 1e-9  # s: what is due at t happens at a tick at t less float rounding


def button_mask(names) -> int:
    """A mask of crutch buttons from a mask (int), a name (``go``, ``stop``, ``next``,
    ``prev``, ``mode``; several joined by ``+``: ``go+next``; ``none``), or names."""
    if isinstance(names, int):
        if not 0 <= names <= 0xFF:
            raise ValueError(f"a button mask is 0–255, not {names}")
        return names
    if isinstance(names, str):
        names = [] if names.strip().lower() in ("", "none") else names.split("+")
    mask = 0
    for name in names:
        bit = BUTTON_BITS.get(name.strip().lower())
        if bit is None:
            raise ValueError(f"unknown crutch button '{name}' (one of "
                             f"{', '.join(BUTTON_BITS)}, or a mask)")
        mask |= bit
    return mask


class BoardEmulator:
    def __init__(self, *, watchdog_s: float = 0.05, status_period: float = 1e-3,
                 stride_s: float = 2.0, supply_mV: int = 24000, clock=time.monotonic,
                 transport: str = "pty", answer_heartbeats: bool = False) -> None:
        if transport == "pty":  # like a USB-serial port: pyserial opens self.path
            self.master, self._slave = os.openpty()
            tty.setraw(self._slave)
            self.path = os.ttyname(self._slave)
        else:  # an in-process socket pair (cheaper per cycle): BoardLink opens "fd:N"
            a, b = socket.socketpair()
            self.master, self._slave = a.detach(), b.detach()
            self.path = f"fd:{self._slave}"
        os.set_blocking(self.master, False)
        self._count = ttyio.probe()
        self._out = bytearray()  # frames of one tick, written with one system call
        self.clock = clock
        self.answer_heartbeats = answer_heartbeats  # a status right after each heartbeat
        self.watchdog_s = watchdog_s
        self.status_period = status_period
        self.stride_s = stride_s
        self.supply_mV = supply_mV
        self.decoder = p.FrameDecoder()
        self.seq = 0
        self.motor_power = False
        self.estop = False
        self.watchdog_tripped = False
        self.last_heartbeat = clock()
        self.last_state = 0
        self._next_status = clock()
        self._next_version = clock()
        self._t0 = clock()
        # where the foot-sole pressures come from: None, the simulated gait's timer
        # (heel_pressure); else a callable giving each foot's pressure (N) — the world's foot
        # contacts (exo_rt.sim.world_truth.WorldTruth.soles), the first foot's heel sensor
        # the one the PC detects strikes on
        self.soles = None
        self.stall_until = -1.0
        self.drop_next = 0
        self.power_off_at: float | None = None
        # the crutch: buttons held, presses counted (u16), the frame due, what is planned
        self.buttons = 0
        self.presses = 0
        self.button_period = BUTTON_PERIOD_S
        self._next_buttons = clock()
        self._buttons_changed = False
        self.silent_until = -1.0
        self._plans: list[tuple[float, int, str, float]] = []  # (t, order, what, argument)
        self._planned = 0
        self._sent_buttons: tuple[int, int] | None = None
        self.button_changes: deque = deque(maxlen=RECORDS)  # (t sent, mask, presses)
        self.answers: deque = deque(maxlen=RECORDS)  # (t received, p.Answer)
        self.menus: deque = deque(maxlen=RECORDS)  # (t received, p.Menu)
        self.menu: p.Menu | None = None  # the latest: what the crutch's display shows
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ faults and buttons
    def press_estop(self, pressed: bool = True) -> None:
        with self._lock:
            self.estop = pressed
            if pressed:
                self._cut_power()

    def stall(self, seconds: float) -> None:
        """Send nothing for ``seconds`` (a loose cable, a hung MCU)."""
        self.stall_until = self.clock() + seconds

    def garbage(self, data: bytes) -> None:
        with self._lock:
            self._out += data

    def drop(self, frames: int) -> None:
        self.drop_next = frames

    def press(self, names, held: bool = True) -> None:
        """Press buttons (:func:`button_mask`'s names or a mask), held until :meth:`release`
        — or, ``held`` False, released again before the next frame: only the presses count
        shows it. Each button not held already counts one press."""
        with self._lock:
            self._press(button_mask(names), held)

    def release(self, names) -> None:
        """Release buttons (names or a mask)."""
        with self._lock:
            self._hold(self.buttons & ~button_mask(names))

    def click(self, names, at: float | None = None) -> None:
        """Press buttons at ``at`` (the emulator's clock; now) for one frame period: held in
        the frame of the press, released in the next periodic one."""
        t = self.clock() if at is None else at
        mask = button_mask(names)
        self._plan(t, "press", mask)
        self._plan(t + self.button_period, "release", mask)

    def silence(self, seconds: float, at: float | None = None) -> None:
        """No BUTTONS frame from ``at`` (the emulator's clock; now) for ``seconds``: the
        crutch's cable or radio lost. What is pressed meanwhile goes out after it."""
        if at is None:
            self.silent_until = self.clock() + seconds
        else:
            self._plan(at, "silence", seconds)

    def schedule_buttons(self, plan: Iterable[tuple[float, object]]) -> None:
        """At each time t (s, the emulator's clock) hold exactly ``mask`` (a mask or names;
        newly held buttons count as presses). :meth:`tick` applies what is due by its time,
        so a lockstep run is deterministic."""
        for t, mask in plan:
            self._plan(t, "hold", button_mask(mask))

    def _plan(self, t: float, what: str, arg: float) -> None:
        with self._lock:
            self._planned += 1  # (equal times: in the order planned)
            bisect.insort(self._plans, (float(t), self._planned, what, arg))

    def _press(self, mask: int, held: bool) -> None:
        new = mask & ~self.buttons
        if new:
            self.presses = (self.presses + bin(new).count("1")) & 0xFFFF
            self._buttons_changed = True
            if held:
                self.buttons |= new

    def _hold(self, mask: int) -> None:
        self._press(mask, True)
        if mask != self.buttons:
            self.buttons = mask
            self._buttons_changed = True

    # ------------------------------------------------------------------ behaviour
    def _cut_power(self) -> None:
        if self.motor_power:
            self.power_off_at = self.clock()
        self.motor_power = False

    def _send(self, body) -> None:
        if self.drop_next > 0:
            self.drop_next -= 1
            return
        self._out += p.encode(body, self.seq)
        self.seq = (self.seq + 1) & 0xFF

    def _flush(self) -> None:
        if self._out:
            try:
                os.write(self.master, self._out)
            except OSError:
                pass  # nobody listening (or the buffer is full): the frames are lost
            self._out.clear()

    def _receive(self, now: float) -> None:
        while ttyio.waiting(self.master, self._count):  # never waits on the tty worker
            try:
                data = os.read(self.master, 4096)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            for msg in self.decoder.feed(data):
                body = msg.body
                if isinstance(body, p.Heartbeat):
                    self.last_heartbeat = self.clock()
                    self.last_state = body.state
                    if self.answer_heartbeats:
                        self._send(p.Status(self.estop, self.motor_power,
                                            self.watchdog_tripped, self.supply_mV))
                elif isinstance(body, p.Power):
                    if body.enable and not self.estop:
                        self.motor_power = True
                        self.watchdog_tripped = False  # re-armed
                        self.last_heartbeat = self.clock()
                    elif not body.enable:
                        self._cut_power()
                    # answered at once with the state it leads to (the PC waits on it)
                    self._send(p.Status(self.estop, self.motor_power, self.watchdog_tripped,
                                        self.supply_mV))
                elif isinstance(body, p.Answer):
                    self.answers.append((now, body))
                elif isinstance(body, p.Menu):
                    self.menus.append((now, body))
                    self.menu = body

    def display(self, motions: list[str] | None = None) -> str:
        """The latest MENU as the crutch's display shows it (motions named from ``motions``,
        in the activities file's order, where given); "" before any."""
        m = self.menu
        if m is None:
            return ""

        def name(i: int) -> str:
            if i == p.NO_INDEX:
                return "-"
            return motions[i] if motions is not None and i < len(motions) else str(i)

        possible = ", ".join(name(i) for i in range(32) if m.possible >> i & 1)
        posture = "-" if m.posture == p.NO_INDEX else str(m.posture)
        return (f"state {m.state} posture {posture} motion {name(m.motion)} selected "
                f"{name(m.selected)} possible [{possible}] steps {m.steps} speed "
                f"{m.speed_mm_s / 1000:.2f} m/s level {m.level_pct} %")

    def _buttons_due(self, now: float) -> None:
        """What is planned by ``now``; a BUTTONS frame when one is due (a period since the
        last, or a change) and the crutch is not silent (nor the board stalled)."""
        while self._plans and self._plans[0][0] <= now + _EARLY:
            t, _, what, arg = self._plans.pop(0)
            if what == "hold":
                self._hold(int(arg))
            elif what == "press":
                self._press(int(arg), True)
            elif what == "release":
                self._hold(self.buttons & ~int(arg))
            else:  # "silence"
                self.silent_until = t + arg
        if now < self.silent_until - _EARLY or now < self.stall_until:
            return
        if self._buttons_changed or now >= self._next_buttons - _EARLY:
            self._next_buttons = now + self.button_period
            self._buttons_changed = False
            sent = (self.buttons, self.presses)
            if sent != self._sent_buttons:
                self._sent_buttons = sent
                self.button_changes.append((now, *sent))
            self._send(p.Buttons(*sent))

    def heel_pressure(self, now: float) -> int:
        """Heel pressure (N) of a simulated gait: loaded within 1 % of the stride at heel
        strike (phase 0), unloaded linearly until heel-off at 40 %."""
        if not self.stride_s < float("inf"):  # standing: the pressure stays flat, no strike
            return 0
        phase = ((now - self._t0) / self.stride_s) % 1.0
        if phase < 0.01:
            return int(700 * phase / 0.01)
        return int(700 * (0.4 - phase) / 0.39) if phase < 0.4 else 0

    def pressures(self, now: float) -> tuple[int, ...]:
        """The foot-sole pressures (N) the board sends now: the world's feet where
        :attr:`soles` is set, else the timer's heel (:meth:`heel_pressure`) and 0."""
        if self.soles is not None:
            return self.soles()
        return (self.heel_pressure(now), 0)

    def tick(self, now: float | None = None) -> None:
        """Process heartbeats, answers and menus, run the watchdog, send status and the
        buttons when due."""
        now = self.clock() if now is None else now
        with self._lock:
            self._receive(now)
            if self.motor_power and now - self.last_heartbeat > self.watchdog_s:
                self.watchdog_tripped = True
                self._cut_power()
            if now >= self._next_status:
                self._next_status = now + self.status_period
                if now >= self.stall_until:
                    self._send(p.Status(self.estop, self.motor_power, self.watchdog_tripped,
                                        self.supply_mV))
                    self._send(p.Pressure(self.pressures(now)))
                    if now >= self._next_version:  # once a second, for late listeners
                        self._next_version = now + 1.0
                        self._send(p.FirmwareVersion(1, 0, 0))
            self._buttons_due(now)
            self._flush()

    # ------------------------------------------------------------------ own thread
    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="board-emulator", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            time.sleep(self.status_period / 2)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass  # already closed (the link closes its end of a socket pair)


def apply_command(emu: BoardEmulator, line: str) -> bool:
    """One command line from the process that started an emulated board: ``estop 1`` /
    ``estop 0``, ``stall SECONDS``, ``walk [T [PERIOD]]`` (the wearer's gait starts at T, or
    now, with strides of PERIOD s), ``stand`` (no heel strikes until the next walk); the
    crutch: ``buttons [T] MASK`` (hold exactly MASK from T: a number, or names as ``go+next``,
    ``none``), ``click [T] NAMES`` (pressed at T for one frame period), ``silence [T]
    SECONDS`` (no BUTTONS frame from T for SECONDS) — T on the emulator's clock, now if left
    out; False for ``stop``. Unknown or malformed lines are ignored."""
    cmd, _, arg = line.strip().partition(" ")
    try:
        if cmd == "estop":
            emu.press_estop(arg.strip() != "0")
        elif cmd == "stall":
            emu.stall(float(arg))
        elif cmd == "walk":  # the wearer's gait starts at time T (the emulator's clock) or
            # now, its stride PERIOD s (or the one it had)
            words = arg.split()
            emu._t0 = float(words[0]) if words else emu.clock()
            if len(words) > 1:
                emu.stride_s = float(words[1])
        elif cmd == "stand":  # the wearer stands: no heel strikes until the next walk
            emu.stride_s = float("inf")
        elif cmd in ("buttons", "click", "silence"):
            *at, what = arg.split()
            (t,) = [float(x) for x in at] or [emu.clock()]
            if cmd == "buttons":
                emu.schedule_buttons([(t, int(what, 0) if what[0].isdigit() else what)])
            elif cmd == "click":
                emu.click(what, at=t)
            else:
                emu.silence(float(what), at=t)
        elif cmd == "stop":
            return False
    except ValueError:
        pass
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m firmware_bridge.emulator``: an emulated board on a new pseudo-terminal, on
    the wall clock, in its own process (as the real board is its own device). Prints
    ``serving board=PATH``; reads commands (:func:`apply_command`) on standard input."""
    import argparse
    import select
    import signal
    import sys

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--watchdog", type=float, default=0.05, help="heartbeat timeout (s)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl-C is the controller's
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    emu = BoardEmulator(watchdog_s=args.watchdog)
    print(f"serving board={emu.path}", flush=True)
    ap_linger = 5.0  # s the board goes on (its watchdog acting) once its controller is gone
    stdin = sys.stdin.fileno()
    os.set_blocking(stdin, False)
    pending = b""
    watched = [stdin, emu.master]
    gone = None
    try:
        while gone is None or time.monotonic() - gone < ap_linger:
            ready, _, _ = select.select(watched, [], [], emu.status_period / 2)
            emu.tick()
            if stdin in ready:
                try:
                    chunk = os.read(stdin, 4096)
                except BlockingIOError:
                    continue
                if not chunk:  # the controller is gone: the board's watchdog takes over
                    gone = time.monotonic()
                    watched = [emu.master]
                    continue
                pending += chunk
                *lines, pending = pending.split(b"\n")
                if not all(apply_command(emu, x.decode(errors="replace")) for x in lines):
                    break
    finally:
        emu.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
