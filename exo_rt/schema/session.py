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
from exo_rt.session.requests import KINDS
from exo_rt.yamlio import plain

REQUESTS = tuple(KINDS.values())  # start, stop, go, go_release, speed, … (requests.KINDS)
ANSWER_EVENTS = ("accepted", "finished", "rejected")
AFTER = re.compile(r"^\s*(accepted|finished|rejected|strides\s+([1-9][0-9]*))\s*$")


class After(Type):
    """What a step waits for: an answer to the step before it, or strides walked since it."""

    def read(self, node, label, fix):
        m = AFTER.match(node.value) if isinstance(node.value, str) else None
        if m is None:
            raise node.error(f"{label} {plain(node)!r} is not an event", node.where(),
                             "write accepted, finished, rejected or strides N (N ≥ 1)")
        return f"strides {int(m.group(2))}" if m.group(2) else m.group(1)

    def json(self):
        return {"type": "string", "pattern": AFTER.pattern}

    def text(self):
        return "`accepted` \\| `finished` \\| `rejected` \\| `strides N`"


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
    at: float | None = key(Num(ge=0), None, unit="s",
                           doc="made at this session time (not with `after`)")
    after: str | None = key(After(), None, shown="the step before is made",
                            doc="made once the step before was `accepted`, `finished` (the "
                                "motion it started or stopped has ended) or `rejected`, or "
                                "`strides N` strides after it")
    wait: float | str = key(AnyOf((Num(ge=0), Choice(("duration",), "wait"))), 0.0, unit="s",
                            doc="a delay after `after` (or after the step before); "
                                "`duration`: the run's `--duration`")


@section("the session script")
class SessionFile:
    """A session: requests to the activity machine, in order."""

    steps: tuple = key(ListOf(Sub(StepEntry)), REQUIRED,
                       doc="the requests, made in order, each once")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = SessionFile
