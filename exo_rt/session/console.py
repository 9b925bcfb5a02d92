"""The therapist's console on the PC's terminal: keys in (:class:`ConsoleSource`), a status
line out (:func:`render`, :class:`ConsoleView`). docs/sessions.md lists the keys.

Keys are read in a daemon thread as bytes, decoded with every undecodable byte replaced (a
byte that is not text is a hint, never the reader's end), into a bounded queue; :meth:`poll`
turns at most ``KEYS_PER_POLL`` of them into requests (source CONSOLE) in the caller's thread
without ever blocking, so the current possible motions and speed
(:meth:`ConsoleSource.set_status`) are the ones a key acts on, and no cycle does more than a
few keys' work. A paste is not a therapist: a read that brings more than ``PASTE_KEYS`` keys
at once is dropped whole, with what follows it without a pause (``PASTE_QUIET_S``), and said
once; no more than ``MAX_WAITING`` keys ever wait. The end of the input (or an error reading
it) is said too (:attr:`ConsoleSource.lost`): the session then stops a walk at the end of
its stride, as when the crutch goes silent. A terminal has no key-up: ``g`` toggles GO
between pressed and released. On a terminal the keys act at once (cbreak mode, restored by
:meth:`ConsoleSource.close`); on a pipe or a file they are read as they come.
"""

from __future__ import annotations

import codecs
import collections
import io
import os
import sys
import threading
import time

from firmware_bridge import requests as rq

SPEED_STEP = 0.1  # m/s per + or −
EMPTY: tuple = ()  # what poll returns when no key waits (shared: no allocation)
IGNORED = frozenset(" \t\r\n")
KEYS = {  # key → request kind (the keys that map one to one)
    "s": rq.STOP, "n": rq.NEXT, "p": rq.PREV, "m": rq.MODE, "c": rq.CONFIRM, "q": rq.END,
}
HELP = ("keys: g GO press/release · s STOP · 1–9 start a possible motion · n/p next/previous "
        "· m mode · +/- speed ±0.1 m/s · c confirm HOME · q end · h help")
KEYS_PER_POLL = 8  # the most keys one poll (one control cycle) turns into requests
MAX_WAITING = 64  # the most keys waiting to be polled; more are dropped (said once)
PASTE_KEYS = 16  # a read bringing more keys than this at once is a paste: dropped whole
PASTE_QUIET_S = 0.1  # s: what follows a paste without this long a pause belongs to it
READ_BYTES = 4096  # the most bytes one read takes
NOT_TEXT = "\ufffd"  # what a byte that is not text decodes to

__all__ = ["ConsoleSource", "ConsoleView", "HELP", "render", "status_lines"]


class ConsoleSource:
    """Requests from the keys typed on ``stream`` (default standard input).

    ``poll(cycle)`` returns the requests of at most ``KEYS_PER_POLL`` keys that arrived since
    the last call (the shared empty tuple when none did); hints for unknown or useless keys,
    a dropped paste, the help and the input's end are collected for the view
    (:meth:`messages`). ``set_status`` (or ``set_possible``) tells it what the number keys
    start and the speed that + and − change. ``lost``: why no key will come any more (the
    end of the input, a read error), None while keys can come."""

    def __init__(self, stream=None, *, cbreak: bool = True,
                 speed_step: float = SPEED_STEP) -> None:
        self.stream = sys.stdin if stream is None else stream
        self.speed_step = speed_step
        self.go_held = False
        self.lost: str | None = None
        self.dropped = 0  # keys dropped: pastes, or more than MAX_WAITING waiting
        self._keys: collections.deque[str] = collections.deque()
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

    def _chunks(self):
        """(read, decode): one read of at most READ_BYTES (bytes, or text from a text-only
        stream), and bytes → text with every undecodable byte replaced by U+FFFD."""
        stream = self.stream
        raw = stream.buffer if isinstance(stream, io.TextIOWrapper) else stream
        fileno = None
        if isinstance(raw, io.IOBase):  # (else an object that only reads: read(1))
            try:
                fileno = raw.fileno()
            except (OSError, ValueError):  # (io.UnsupportedOperation: a stream in memory)
                pass
        if fileno is not None and not raw.closed:
            def read():  # whatever the descriptor has (a key, a paste's chunk), or b"": EOF
                return os.read(fileno, READ_BYTES)
        elif isinstance(raw, io.BufferedIOBase):
            def read():
                return raw.read1(READ_BYTES)
        else:  # a text stream without bytes (tests' StringIO): one character at a time
            def read():
                return raw.read(1)
        encoding = (stream.encoding if isinstance(stream, io.TextIOBase) else None) or "utf-8"
        try:
            decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        except LookupError:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return read, decoder.decode

    def _read(self) -> None:
        """The reading thread: keys into the queue until the stream ends; its end, or any
        error, is kept in :attr:`lost` and said (never a silent end)."""
        why = "end of input" if self.stream is not None else "no standard input"
        try:
            if self.stream is None:  # (started with standard input closed)
                raise EOFError
            read, decode = self._chunks()
            last, pasting = -float("inf"), False
            while True:
                chunk = read()
                if not chunk:
                    break
                text = chunk if isinstance(chunk, str) else decode(chunk)
                now = time.monotonic()
                follows, last = now - last < PASTE_QUIET_S, now
                n = len(text) - sum(text.count(c) for c in IGNORED)
                if n > PASTE_KEYS or (pasting and follows):
                    if not pasting:
                        self._notes.append(f"a paste ignored (more than {PASTE_KEYS} keys at "
                                           "once): a paste is not a therapist — type keys "
                                           "one at a time")
                    pasting = True
                    self.dropped += n
                    continue
                pasting = False
                for ch in text:
                    if ch in IGNORED:
                        continue
                    if len(self._keys) >= MAX_WAITING:
                        self.dropped += 1
                        continue
                    self._keys.append(ch)
        except EOFError:
            pass
        except Exception as exc:  # any failure is said, the run goes on without keys
            why = f"read error ({exc.__class__.__name__}: {exc})"
        self.lost = why
        self._notes.append(f"console input lost: {why} — no key is heard any more; a walk "
                           "stops at the end of its stride")

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
        """The machine's status (as :func:`render` takes it): ``possible``, ``speed`` and
        ``go`` (GO held, whoever pressed it: the next ``g`` toggles it from there)."""
        if "possible" in status:
            self._possible = tuple(status["possible"])
        if status.get("speed") is not None:
            self._speed = float(status["speed"])
        if status.get("go") is not None:
            self.go_held = bool(status["go"])

    # -- keys → requests
    def poll(self, cycle: int):
        """The requests of at most ``KEYS_PER_POLL`` keys typed since the last call, made in
        ``cycle`` (the rest wait, in order, for the next calls)."""
        keys = self._keys
        if not keys:
            return EMPTY
        out = []
        for _ in range(KEYS_PER_POLL):
            try:
                ch = keys.popleft()
            except IndexError:
                break
            req = self._request(ch, cycle)
            if req is not None:
                out.append(req)
        return out

    def _request(self, ch: str, cycle: int) -> rq.Request | None:
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
        if ch == NOT_TEXT:
            self._notes.append("a byte that is not text ignored — h for help")
            return None
        self._notes.append(f"unknown key {ch!r} — h for help")
        return None

    def messages(self):
        """The hints collected since the last call (for the view), oldest first."""
        if not self._notes:
            return EMPTY
        out = []
        while self._notes:
            out.append(self._notes.popleft())
        return tuple(out)


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


KEY_OF = {"confirm": "c", "go": "g"}  # what a wait is for → the key that gives it


def _needs(name: str, needs: dict) -> str:
    """A possible motion as the status line lists it: ``sit_down (hold GO: g)``."""
    what = needs.get(name)
    return f"{name} ({what})" if what else name


def _clock(status: dict) -> str:
    """The session's time and its limit: ``12.3 s of 60 s``; past it, when a session still
    going is stopped."""
    t, d = status["time"], status.get("duration")
    if d is None:
        return f"{t:7.1f} s"
    if t <= d:
        return f"{t:7.1f} s of {d:g} s"
    end = status.get("ends")
    return f"{t:7.1f} s: past {d:g} s" + (f", stopped at {end:g} s" if end is not None else "")


def parts(status: dict) -> list[str]:
    """The status line's parts, most important first (:func:`render` joins them)."""
    out = []
    if status.get("time") is not None:
        out.append(_clock(status))
    if status.get("state"):
        out.append(str(status["state"]))
    if status.get("lost"):
        out.append(f"NO KEYS: {status['lost']}")
    motion = status.get("motion")
    if motion:
        where = motion
        if status.get("progress") is not None:
            where += f" {100 * status['progress']:3.0f}%"
        if status.get("paused"):
            where += " (paused: hold GO)"
        elif status.get("hold") and status.get("go") is not None:
            where += (" (GO held: g pauses)" if status["go"] else " (waits for GO: g)")
        if status.get("stopping"):
            where += " (stopping)"
        out.append(where)
    else:
        out.append(status.get("posture") or "no posture")
    waiting = status.get("waiting")
    if waiting:
        key = KEY_OF.get(waiting)
        what = waiting.upper() + (f": {key}" if key else "")
        out.append(f"{status['pending']} waits for {what}" if status.get("pending")
                   else f"waiting for {waiting}")
    if status.get("go_block"):
        out.append("release GO (g) before the next motion")
    possible = status.get("possible")
    if possible is not None and not motion:
        needs = status.get("needs") or {}
        out.append("possible: " + (", ".join(f"{i} {_needs(m, needs)}"
                                             for i, m in enumerate(possible, 1)) or "none"))
    if status.get("strides") is not None:
        out.append(f"strides {status['strides']}")
    if status.get("speed") is not None:
        walk = f"{status['speed']:.2f} m/s"
        if status.get("step_length") is not None:
            walk += f" × {status['step_length']:.2f} m"
        out.append(walk)
    if status.get("level") is not None:
        out.append(_level(status["level"]))
    if status.get("go") is not None:
        out.append("GO held" if status["go"] else "GO –")
    last = _answer(status.get("answer"))
    if last:
        out.append(f"last: {last}")
    return out


def render(status: dict) -> str:
    """The console's status line from the machine's status. Keys (each optional):
    ``time`` (s) and ``duration`` (s: the run's --duration; ``ends``: s, when a session
    still going is stopped), ``state`` (the controller's: RUN, SAFE, …), ``lost`` (why no key
    is heard any more), ``posture`` (or None: in none), ``motion`` and ``progress`` (0–1)
    while one runs, ``paused`` (GO released mid-motion), ``hold`` (the motion needs GO
    held), ``stopping`` (STOP asked), ``waiting`` (e.g. ``confirm``) and ``pending`` (the
    motion that waits: ``home``), ``go_block`` (GO still held since the last posture),
    ``possible`` (names, numbered for the keys 1–9) and ``needs`` ({name: what it needs,
    e.g. ``hold GO: g``}), ``strides`` (the step count), ``speed`` (m/s), ``step_length``
    (m), ``level`` (0–1, or {leg: 0–1}), ``go`` (held), ``answer`` (the last: an Answer, its
    dict or text)."""
    return " | ".join(parts(status))


def status_lines(status: dict, width: int) -> list[str]:
    """:func:`render`'s parts on as many lines of at most ``width`` − 1 characters as they
    need (a terminal's status block: a line that wrapped could not be rewritten in place),
    cut between parts; a part longer than a line is shortened with an ellipsis."""
    room = max(width - 1, 20)
    lines: list[str] = []
    line = ""
    for part in parts(status):
        if len(part) > room:
            part = part[: room - 1] + "…"
        if line and len(line) + 3 + len(part) > room:
            lines.append(line)
            line = part
        else:
            line = f"{line} | {part}" if line else part
    lines.append(line)
    return lines


class ConsoleView:
    """Writes the status to ``stream`` (default standard error) at most every ``period`` s
    and only when it changed: on a terminal as a block of lines the width of the terminal
    (:func:`status_lines`), rewritten in place, the hints above it; elsewhere :func:`render`'s
    line, one each. ``clock``: seconds (monotonic)."""

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
        self._block: list[str] = []  # the lines on the terminal now (tty)
        self._lock = threading.Lock()  # (a line from another thread: whole, above the block)
        self._taken = None  # sys.stderr as it was, while take_stderr holds it

    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            return 80

    def _top(self) -> str:
        """Back to the block's first line, cleared with all below it (tty)."""
        up = f"\x1b[{len(self._block) - 1}A" if len(self._block) > 1 else ""
        return f"{up}\r\x1b[J"

    def take_stderr(self) -> None:
        """On a terminal, while the status is shown: whatever else this process writes to
        ``sys.stderr`` (a derating line from its thread, a warning) goes above the status
        block, line by line, instead of into it (:meth:`close` gives it back)."""
        if self.tty and self._taken is None and sys.stderr is self.stream:
            self._taken = sys.stderr
            sys.stderr = _Above(self)

    def update(self, status: dict, notes=EMPTY) -> bool:
        """Show ``status`` (and the hint lines ``notes``, e.g. the console's
        :meth:`ConsoleSource.messages`, at once); True if the status was written."""
        for note in notes:
            self.note(note)
        now = self.clock()
        if now - self._last_time < self.period:
            return False
        text = render(status)
        if text == self._last_text:
            return False
        self._last_time, self._last_text = now, text
        with self._lock:
            if self.tty:
                lines = status_lines(status, self._width())
                self.stream.write(self._top() + "\n".join(lines))
                self._block = lines
            else:
                self.stream.write(f"{text}\n")
            self.stream.flush()
        return True

    def note(self, text: str) -> None:
        """A line of its own (a hint, the help) above the status."""
        with self._lock:
            if self.tty:
                self.stream.write(self._top() + f"{text}\n" + "\n".join(self._block))
            else:
                self.stream.write(f"{text}\n")
            self.stream.flush()

    def close(self) -> None:
        """End the status (a terminal's cursor to a new line under it); sys.stderr given
        back."""
        if self._taken is not None:
            rest = sys.stderr.pending() if isinstance(sys.stderr, _Above) else ""
            sys.stderr, self._taken = self._taken, None
            if rest:
                self.note(rest)
        with self._lock:
            if self.tty and self._block:
                self.stream.write("\n")
                self.stream.flush()
                self._block = []


class _Above(io.TextIOBase):
    """``sys.stderr`` while a :class:`ConsoleView` holds the terminal: each whole line
    written goes above its status block (:meth:`ConsoleView.note`); its encoding, whether it
    is a terminal and its descriptor are the terminal's."""

    def __init__(self, view: ConsoleView) -> None:
        self._view, self._part = view, ""

    def write(self, text: str) -> int:
        *lines, self._part = (self._part + text).split("\n")
        for line in lines:
            self._view.note(line.replace("\r", ""))
        return len(text)

    def flush(self) -> None:
        pass

    def pending(self) -> str:
        """What was written after the last newline (a line not yet ended)."""
        out, self._part = self._part, ""
        return out

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return self._view.stream.encoding or "utf-8"

    @property
    def errors(self) -> str | None:
        return self._view.stream.errors

    def isatty(self) -> bool:
        return self._view.stream.isatty()

    def fileno(self) -> int:
        return self._view.stream.fileno()
