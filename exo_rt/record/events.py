"""A run's ``events.jsonl`` as it is written while the run goes on, and read back for replay.

**Written as the events happen.** The control process hands the run's new events (state
changes, faults, the session's requests and answers …) to the recording process every
:data:`HAND_OVER_S` of run time, between two cycles (:meth:`exo_rt.record.recording.
Recording.check`): each one a JSON line in the message ring (:func:`parts`: a line longer than
a slot goes in several), then a *mark* — ``{"event": "events_complete", "cycle": k, …}``,
every event of cycles ≤ k is on the lines above it. The recording process appends them to
``events.jsonl`` before the cycle records it took with them and fsyncs both files together
at each mark (:mod:`exo_rt.record.writer`). After a crash the file holds every event up to
its last mark, and the cycle log no record beyond :data:`HAND_OVER_S` past it. When the run
ends the control process rewrites the file whole, without marks (its full event list).

**Read back** (:func:`load`): every line must be a JSON object with an ``event``; a request
must name a known request with its cycle and arguments of the right kinds. A line that is not
is a :class:`~exo_rt.errors.LogError` naming the file and line (exit 2) — except the last line
of a run that did not finish, cut by the crash (no newline at its end), which is left out and
said. A finished run's file must hold as many lines as its summary says were written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from exo_rt.errors import LogError, Where

HAND_OVER_S = 0.25  # run time (s) between two hand-overs (and marks) at most
MARK = "events_complete"  # the mark's event: every event of cycles ≤ its cycle is above it
PART, EVENT, ACTIVITY, MARK_KIND = b"p", b"e", b"a", b"m"  # a ring message's first byte
MAX_PARTS = 64  # an event longer (64 kB) goes shortened to the recording (whole at the end)
FIX = ("the file was cut or changed after the run: restore it from a copy (a run killed "
       "mid-write keeps its events up to the last whole line)")


def line(ev: dict) -> bytes:
    """One event as its line of events.jsonl (numpy numbers as numbers)."""
    return (json.dumps(ev, default=_plain) + "\n").encode()


def _plain(x):
    item = getattr(x, "item", None)
    return item() if callable(item) else str(x)


def parts(ev: dict, activity: bool, room: int) -> list[bytes]:
    """The ring messages of one event: its line in pieces of at most ``room`` − 1 bytes, each
    but the last marked :data:`PART`, the last :data:`ACTIVITY` (it goes to run.mcap's
    ``/activity`` too) or :data:`EVENT`. An event of more than :data:`MAX_PARTS` pieces goes
    without its lists and long texts (``shortened``)."""
    raw = line(ev)
    size = room - 1
    if len(raw) > MAX_PARTS * size:
        short = {k: (v if not isinstance(v, str) or len(v) < 200 else v[:200] + "…")
                 for k, v in ev.items() if not isinstance(v, (list, dict))}
        raw = line(short | {"shortened": True})
    pieces = [raw[i:i + size] for i in range(0, len(raw), size)]
    last = ACTIVITY if activity else EVENT
    return [PART + p for p in pieces[:-1]] + [last + pieces[-1]]


def mark(k: int, t: float) -> bytes:
    """The mark after the events of cycles ≤ ``k`` (``t`` s of the run)."""
    return MARK_KIND + line({"cycle": int(k), "t": round(float(t), 6), "event": MARK})


class Assembler:
    """(The recording process) ring messages back into lines: :meth:`add` returns the whole
    lines they complete, and the ``/activity`` messages among them (t, JSON bytes)."""

    def __init__(self) -> None:
        self.pending = b""
        self.marks = 0  # marks seen in the last add

    def add(self, messages) -> tuple[bytes, list[tuple[float, bytes]]]:
        lines, activity = [], []
        self.marks = 0
        for t, body in messages:
            kind, data = body[:1], body[1:]
            if kind == PART:
                self.pending += data
                continue
            whole, self.pending = self.pending + data, b""
            lines.append(whole)
            if kind == ACTIVITY:
                activity.append((t, whole.rstrip(b"\n")))
            elif kind == MARK_KIND:
                self.marks += 1
        return b"".join(lines), activity


# ----------------------------------------------------------------------------- reading
@dataclass
class Recorded:
    """What replay takes of a run's events: the session's requests (in order), the cycle up
    to which the file holds every event (None: all of them, a finished run's file; -1: a run
    that did not finish and left no mark), and notes for the user."""

    requests: list[dict]
    complete_through: int | None
    lines: int
    notes: list[str] = field(default_factory=list)


def _damaged(path: Path, n: int, what: str) -> LogError:
    return LogError(f"damaged events: line {n} {what}", Where(str(path), n), FIX)


def _request(ev: dict, path: Path, n: int) -> dict:
    """A request event checked field by field (what replay asks again)."""
    from firmware_bridge.requests import BY_NAME

    kind = ev.get("request")
    if not isinstance(kind, str) or kind not in BY_NAME:
        raise _damaged(path, n, f"names no known request ({kind!r}; one of "
                                f"{', '.join(BY_NAME)})")
    k = ev.get("cycle")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise _damaged(path, n, f"has no cycle (a whole number ≥ 0; it holds {k!r})")
    motion = ev.get("motion")
    if motion is not None and not isinstance(motion, str):
        raise _damaged(path, n, f"has a motion that is not a name ({motion!r})")
    value = ev.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not math.isfinite(value)):
        raise _damaged(path, n, f"has a value that is not a finite number ({value!r})")
    legs = ev.get("legs")
    if legs is not None and (not isinstance(legs, list)
                             or not all(isinstance(g, str) for g in legs)):
        raise _damaged(path, n, f"has legs that are not a list of names ({legs!r})")
    return ev


def load(run_dir: Path, finished: bool, expected: int | None = None) -> Recorded:
    """The events of the run folder ``run_dir`` for replay (see the module's docstring).
    ``finished``: the run wrote its summary; ``expected``: the lines it says it wrote."""
    path = Path(run_dir) / "events.jsonl"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if finished and expected:
            raise LogError(f"events.jsonl is missing (the run's summary says it wrote "
                           f"{expected} events)", Where(str(path)), FIX) from None
        return Recorded([], None if finished else -1, 0,
                        [] if finished else [f"{path}: missing: the run did not finish and "
                                             "left no events"])
    except OSError as exc:
        raise LogError(f"events.jsonl cannot be read ({exc.strerror})", Where(str(path)),
                       "check the file's permissions") from None
    chunks = raw.split(b"\n")
    cut = chunks.pop()  # after the last newline: b"" unless the last line was cut
    requests: list[dict] = []
    through = -1
    for n, chunk in enumerate(chunks, 1):
        try:
            ev = json.loads(chunk.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _damaged(path, n, f"is not UTF-8 text (byte {exc.start + 1})") from None
        except ValueError as exc:
            raise _damaged(path, n, f"is not JSON ({exc.args[0].split(':')[0]})") from None
        except RecursionError:
            raise _damaged(path, n, "is not an event (nested beyond reading)") from None
        if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
            raise _damaged(path, n, "is not an event (a JSON object with an \"event\")")
        if ev["event"] == "request":
            requests.append(_request(ev, path, n))
        elif ev["event"] == MARK:
            k = ev.get("cycle")
            if isinstance(k, bool) or not isinstance(k, int) or k < through:
                raise _damaged(path, n, f"is a mark with a cycle that is not a whole number "
                                        f"≥ the last mark's ({k!r})")
            through = k
    notes = []
    if cut:
        if finished:
            raise _damaged(path, len(chunks) + 1, "is cut short (no newline at its end)")
        notes.append(f"{path}:{len(chunks) + 1}: the last line was cut by the crash "
                     f"({len(cut)} bytes), left out")
    if finished:
        if expected is not None and expected != len(chunks):
            raise LogError(f"damaged events: the file holds {len(chunks)} lines, the run's "
                           f"summary says {expected} were written (cut short, or grown)",
                           Where(str(path)), FIX)
        return Recorded(requests, None, len(chunks), notes)
    return Recorded(requests, through, len(chunks), notes)
