"""The therapist's console on the PC's terminal: keys in (:class:`ConsoleSource`), a status
line out (:func:`render`, :class:`ConsoleView`). docs/sessions.md lists the keys.

Keys are read in a daemon thread, one character at a time, into a queue; :meth:`poll` turns
them into requests (source CONSOLE) in the caller's thread without ever blocking, so the
current possible motions and speed (:meth:`ConsoleSource.set_status`) are the ones a key
acts on. A terminal has no key-up: ``g`` toggles GO between pressed and released. On a
terminal the keys act at once (cbreak mode, restored by :meth:`ConsoleSource.close`); on a
pipe or a file they are read as they come.
"""

from __future__ import annotations

import collections
import queue
import sys
import threading
import time

from exo_rt.session import requests as rq

SPEED_STEP = 0.1  # m/s per + or −
EMPTY: tuple = ()  # what poll returns when no key waits (shared: no allocation)
IGNORED = frozenset(" \t\r\n")
KEYS = {  # key → request kind (the keys that map one to one)
    "s": rq.STOP, "n": rq.NEXT, "p": rq.PREV, "m": rq.MODE, "c": rq.CONFIRM, "q": rq.END,
}
HELP = ("keys: g GO press/release · s STOP · 1–9 start a possible motion · n/p next/previous "
        "· m mode · +/- speed ±0.1 m/s · c confirm HOME · q end · h help")

__all__ = ["ConsoleSource", "ConsoleView", "HELP", "render"]


class ConsoleSource:
    """Requests from the keys typed on ``stream`` (default standard input).

    ``poll(cycle)`` returns the requests of the keys that arrived since the last call (the
    shared empty tuple when none did); hints for unknown or useless keys, and the help, are
    collected for the view (:meth:`messages`). ``set_status`` (or ``set_possible``) tells
    it what the number keys start and the speed that + and − change."""

    def __init__(self, stream=None, *, cbreak: bool = True,
                 speed_step: float = SPEED_STEP) -> None:
        self.stream = sys.stdin if stream is None else stream
        self.speed_step = speed_step
        self.go_held = False
        self._keys: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._notes: collections.deque[str] = collections.deque(maxlen=16)
        self._possible: tuple[str, ...] = ()
        self._speed: float | None = None
        self._saved = self._cbreak() if cbreak else None
        self._thread = threading.Thread(target=self._read, name="exo-rt console keys",
                                        daemon=True)
        self._thread.start()

    # -- the terminal
    def _cbreak(self):
        """Keys without Enter on a terminal: its settings before (to restore), or None."""
        try:
            if not self.stream.isatty():
                return None
            import termios
            import tty

            fd = self.stream.fileno()
            saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
            return fd, saved
        except (AttributeError, OSError, ValueError, ImportError):
            return None

    def close(self) -> None:
        """Give the terminal its settings back (the reading thread ends with the stream)."""
        if self._saved is not None:
            import termios

            fd, saved = self._saved
            self._saved = None
            try:
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
            except (OSError, termios.error):
                pass

    def _read(self) -> None:
        """The reading thread: every character into the queue until the stream ends."""
        read = self.stream.read
        try:
            while True:
                ch = read(1)
                if not ch:
                    return
                self._keys.put(ch)
        except (OSError, ValueError):  # the stream was closed under it
            return

    @property
    def closed(self) -> bool:
        """The stream has ended (no more keys will come)."""
        return not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the stream has ended (tests: every key queued)."""
        self._thread.join(timeout)

    # -- what the keys act on
    def set_possible(self, names) -> None:
        """The motions the number keys start (1: the first), as the machine lists them."""
        self._possible = tuple(names)

    def set_status(self, status: dict) -> None:
        """The machine's status (as :func:`render` takes it): ``possible`` and ``speed``."""
        if "possible" in status:
            self._possible = tuple(status["possible"])
        if status.get("speed") is not None:
            self._speed = float(status["speed"])

    # -- keys → requests
    def poll(self, cycle: int):
        """The requests of the keys typed since the last call, made in ``cycle``."""
        if self._keys.empty():
            return EMPTY
        out = []
        while True:
            try:
                ch = self._keys.get_nowait()
            except queue.Empty:
                return out
            req = self._request(ch, cycle)
            if req is not None:
                out.append(req)

    def _request(self, ch: str, cycle: int) -> rq.Request | None:
        if ch in IGNORED:
            return None
        if ch in KEYS:
            return rq.Request(KEYS[ch], rq.CONSOLE, cycle)
        if ch == "g":
            self.go_held = not self.go_held
            return rq.Request(rq.GO if self.go_held else rq.GO_RELEASE, rq.CONSOLE, cycle)
        if ch in "123456789":
            n = int(ch)
            if n > len(self._possible):
                have = (", ".join(f"{i} {m}" for i, m in enumerate(self._possible, 1))
                        or "none")
                self._notes.append(f"no motion {n} here (possible: {have})")
                return None
            return rq.Request(rq.START, rq.CONSOLE, cycle, motion=self._possible[n - 1])
        if ch in "+-":
            if self._speed is None:
                self._notes.append("the speed is not known yet: + and - change it while "
                                   "walking")
                return None
            step = self.speed_step if ch == "+" else -self.speed_step
            return rq.Request(rq.SPEED, rq.CONSOLE, cycle,
                              value=round(self._speed + step, 6))
        if ch in "h?":
            self._notes.append(HELP)
            return None
        self._notes.append(f"unknown key {ch!r} — h for help")
        return None

    def messages(self):
        """The hints collected since the last call (for the view), oldest first."""
        if not self._notes:
            return EMPTY
        out = tuple(self._notes)
        self._notes.clear()
        return out


# ----------------------------------------------------------------------------- the display
def _answer(a) -> str:
    """An answer as the status line writes it: ``accepted start walk``, ``rejected start
    walk: not_from_here``, ``finished walk → standing``."""
    if a is None:
        return ""
    if isinstance(a, str):
        return a
    d = a.as_dict() if isinstance(a, rq.Answer) else dict(a)
    if d.get("answer") == "finished":
        return " ".join(x for x in ("finished", d.get("motion", ""),
                                    f"→ {d['posture']}" if d.get("posture") else "") if x)
    words = " ".join(str(x) for x in (d.get("answer", "?"), d.get("request", ""),
                                      d.get("motion", "")) if x)
    if d.get("answer") == "rejected" and d.get("reason"):
        words += f": {d['reason']}"
    return words


def _level(level) -> str:
    if level is None:
        return ""
    if isinstance(level, dict):
        return "assist " + " ".join(f"{(leg or 'leg')[0].upper()} {100 * v:.0f}%"
                                    for leg, v in level.items())
    return f"assist {100 * float(level):.0f}%"


def render(status: dict) -> str:
    """The console's status line from the machine's status. Keys (each optional):
    ``state`` (the controller's: RUN, SAFE, …), ``posture`` (or None: in none),
    ``motion`` and ``progress`` (0–1) while one runs, ``paused`` (GO released mid-motion),
    ``waiting`` (e.g. ``confirm``), ``possible`` (names, numbered for the keys 1–9),
    ``strides`` (the step count), ``speed`` (m/s), ``step_length`` (m), ``level`` (0–1, or
    {leg: 0–1}), ``go`` (held), ``answer`` (the last: an Answer, its dict or text), ``time``
    (s)."""
    parts = []
    if status.get("time") is not None:
        parts.append(f"{status['time']:7.1f} s")
    if status.get("state"):
        parts.append(str(status["state"]))
    motion = status.get("motion")
    if motion:
        where = motion
        if status.get("progress") is not None:
            where += f" {100 * status['progress']:3.0f}%"
        if status.get("paused"):
            where += " (paused: hold GO)"
        parts.append(where)
    else:
        parts.append(status.get("posture") or "no posture")
    if status.get("waiting"):
        parts.append(f"waiting for {status['waiting']}")
    possible = status.get("possible")
    if possible is not None and not motion:
        parts.append("possible: " + (" ".join(f"{i} {m}" for i, m in enumerate(possible, 1))
                                     or "none"))
    if status.get("strides") is not None:
        parts.append(f"strides {status['strides']}")
    if status.get("speed") is not None:
        walk = f"{status['speed']:.2f} m/s"
        if status.get("step_length") is not None:
            walk += f" × {status['step_length']:.2f} m"
        parts.append(walk)
    if status.get("level") is not None:
        parts.append(_level(status["level"]))
    if status.get("go") is not None:
        parts.append("GO held" if status["go"] else "GO –")
    last = _answer(status.get("answer"))
    if last:
        parts.append(f"last: {last}")
    return " | ".join(parts)


class ConsoleView:
    """Writes :func:`render`'s line to ``stream`` (default standard error) at most every
    ``period`` s and only when it changed: on a terminal rewritten in place (carriage return,
    clear to the end of the line), elsewhere one line each. ``clock``: seconds (monotonic)."""

    def __init__(self, stream=None, period: float = 0.2, clock=time.monotonic) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.period = period
        self.clock = clock
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self._last_time = -float("inf")
        self._last_text: str | None = None

    def update(self, status: dict, notes=EMPTY) -> bool:
        """Show ``status`` (and the hint lines ``notes``, e.g. the console's
        :meth:`ConsoleSource.messages`, at once); True if the status line was written."""
        for note in notes:
            self.note(note)
        now = self.clock()
        if now - self._last_time < self.period:
            return False
        text = render(status)
        if text == self._last_text:
            return False
        self._last_time, self._last_text = now, text
        self.stream.write(f"\r{text}\x1b[K" if self.tty else f"{text}\n")
        self.stream.flush()
        return True

    def note(self, text: str) -> None:
        """A line of its own (a hint, the help) above the status line."""
        if self.tty:
            self.stream.write(f"\r\x1b[K{text}\n")
            if self._last_text is not None:
                self.stream.write(f"{self._last_text}\x1b[K")
        else:
            self.stream.write(f"{text}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the status line (a terminal's cursor to a new line)."""
        if self.tty and self._last_text is not None:
            self.stream.write("\n")
            self.stream.flush()
