"""Session scripts (``configs/sessions/*.yaml``): requests to the activity machine, in order,
each at a session time or after an event of the step before it — for hardware-in-the-loop
rehearsal, CI and replay (docs/config-session.md). What spans several keys (which requests
take a motion or a value, a first step with nothing before it) is checked by
:func:`exo_rt.session.script.load_session`."""

from __future__ import annotations

import re

from exo_rt.schema.core import (
    REQUIRED,
    AnyOf,
    Choice,
    ListOf,
    Name,
    Num,
    Sub,
    Type,
    key,
    section,
)
from exo_rt.yamlio import plain
from firmware_bridge.requests import KINDS

REQUESTS = tuple(KINDS.values())  # start, stop, go, go_release, speed, … (requests.KINDS)
ANSWER_EVENTS = ("accepted", "finished", "rejected")
AFTER = re.compile(r"^\s*(accepted|finished|rejected|strides\s+([1-9][0-9]*))\s*$")
MAX_DURATION_S = 86400.0  # s: the longest run (--duration's bound: a run's log is ~14 GB then)
MAX_TIME_S = MAX_DURATION_S  # s: no session time beyond the run's 24 h limit
MIN_STRIDE_S = 0.5  # s: the shortest stride — 240 steps/min, beyond any walking cadence
MAX_STRIDES = int(MAX_TIME_S / MIN_STRIDE_S)  # 172 800: more strides than 24 h can walk
IN_THE_RUN = f"a time within the run's 24 h limit: 0…{MAX_TIME_S:g} s"
DEFAULT_DURATION_S = 10.0  # s: a run's --duration when neither it nor the script gives one


class After(Type):
    """What a step waits for: an answer to the step before it, or strides walked since it."""

    def read(self, node, label, fix):
        m = AFTER.match(node.value) if isinstance(node.value, str) else None
        if m is None:
            raise node.error(f"{label} {plain(node)!r} is not an event", node.where(),
                             "write accepted, finished, rejected or strides N (N ≥ 1)")
        if m.group(2) and int(m.group(2)) > MAX_STRIDES:
            raise node.error(f"{label} 'strides {m.group(2)}' is more strides than the run's "
                             f"24 h limit can walk (at most {MAX_STRIDES}, one per "
                             f"{MIN_STRIDE_S:g} s)", node.where(),
                             f"give N from 1 to {MAX_STRIDES}")
        return f"strides {int(m.group(2))}" if m.group(2) else m.group(1)

    def json(self):
        return {"type": "string", "pattern": AFTER.pattern}

    def text(self):
        return "`accepted` \\| `finished` \\| `rejected` \\| `strides N`"


class Wait(AnyOf):
    """Seconds or ``duration``: a number also when YAML reads it as text (``1e3``, which
    YAML 1.1 takes for a string), so that it gets the number's range check."""

    def read(self, node, label, fix):
        if isinstance(node.value, str) and node.value.strip() != "duration":
            try:
                float(node.value)
            except ValueError:
                return self.types[1].read(node, label, fix)
            return self.types[0].read(node, label, fix)
        return super().read(node, label, fix)


@section("a step")
class StepEntry:
    """One request and when it is made."""

    request: str = key(Choice(REQUESTS, "request"), REQUIRED,
                       doc="what is asked (the table above; docs/sessions.md)")
    motion: str | None = key(Name(), None, doc="start: the motion's name")
    value: float | None = key(Num(), None, unit="m/s, m or 0–1",
                              doc="speed (m/s), step_length (m) or level (0–1)")
    legs: tuple | None = key(ListOf(Name()), None, shown="all",
                             doc="level: the legs it applies to (`left`, `right`)")
    at: float | None = key(Num(ge=0, le=MAX_TIME_S), None, unit="s", fix=f"give {IN_THE_RUN}",
                           doc="made at this session time (not with `after`), within the "
                               "run's 24 h limit")
    after: str | None = key(After(), None, shown="the step before is made",
                            doc="made once the step before was `accepted`, `finished` (the "
                                "motion it started or stopped has ended) or `rejected`, or "
                                "`strides N` strides after it")
    wait: float | str = key(Wait((Num(ge=0, le=MAX_TIME_S), Choice(("duration",), "wait"))),
                            0.0, unit="s", fix=f"give {IN_THE_RUN}, or 'duration'",
                            doc="a delay after `after` (or after the step before); "
                                "`duration`: the run's `--duration`")


@section("the session script")
class SessionFile:
    """A session: requests to the activity machine, in order."""

    steps: tuple = key(ListOf(Sub(StepEntry)), REQUIRED,
                       doc="the requests, made in order, each once")
    start: str | None = key(Name(), None, shown="where the leg is",
                            doc="the posture of the activities file the session starts in: "
                                "the simulated leg is put there; on real drives the run "
                                "begins only with the leg there")
    duration: float | None = key(Num(gt=0, le=MAX_TIME_S), None, unit="s",
                                 shown=f"{DEFAULT_DURATION_S:g}",
                                 fix=f"give a time in (0, {MAX_TIME_S:g}] s",
                                 doc="the run's `--duration` when `exo-rt run` gives none: what "
                                     "`wait: duration` waits; a session still going 30 s "
                                     "after it is ended")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = SessionFile
