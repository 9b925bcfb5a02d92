"""Session scripts → :class:`Session` (its :class:`Step` s), and :class:`ScriptSource`, which
makes the steps' requests as they fall due (docs/config-session.md; schema
:mod:`exo_rt.schema.session`).

A step is made at a session time (``at``), or once the step before it was answered
(``after: accepted | finished | rejected``) or strides were walked since it
(``after: strides N``), then ``wait`` seconds later — ``wait: duration`` is the run's
``--duration``, so the default session walks for as long as the run is asked to. A step with
neither is made with the one before it (``wait`` after it). The machine's owner calls
:meth:`ScriptSource.poll` every control cycle and tells it what happened
(:meth:`ScriptSource.notify`, :meth:`ScriptSource.on_stride`).

Every time is range-checked at load: a step that could only be made beyond the run's 24 h
limit (its ``at``, or the waits and strides of the steps before it added up) is refused with
its file and line, not left to overflow mid-walk. A script may declare the posture it starts
in (``start``): :func:`start_pose` is where a simulated leg is put, :func:`check_start` refuses
a leg that is not there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from exo_rt import resources
from exo_rt.errors import ConfigError, Where
from exo_rt.schema import core
from exo_rt.schema.session import (
    DEFAULT_DURATION_S,
    IN_THE_RUN,
    MAX_TIME_S,
    MIN_STRIDE_S,
    SessionFile,
)
from exo_rt.yamlio import did_you_mean, read_yaml
from firmware_bridge import requests as rq

NEEDS_MOTION = (rq.START,)
NEEDS_VALUE = (rq.SPEED, rq.STEP_LENGTH, rq.LEVEL)
EVENTS = {"accepted": rq.ACCEPTED, "rejected": rq.REJECTED, "finished": rq.FINISHED}
EMPTY: tuple = ()  # what poll returns when nothing is due (shared: no allocation)
NEVER = 1 << 62  # a due cycle not yet known

__all__ = ["EMPTY", "ScriptSource", "Session", "Step", "check_run_start", "check_start",
           "default_path",
           "load_session", "start_pose"]


@dataclass(frozen=True)
class Step:
    """One step of a script: the request (a code of :data:`firmware_bridge.requests.KINDS`,
    its motion, value and legs) and when it is made."""

    kind: int
    motion: str | None = None
    value: float | None = None
    legs: tuple[str, ...] | None = None
    at: float | None = None  # s of session time
    after: str | None = None  # accepted | finished | rejected | strides (the step before's)
    strides: int = 0  # after: strides N
    wait: float = 0.0  # s after the event (after the step before when no at/after)
    wait_duration: bool = False  # wait is the run's --duration
    where: Where = Where("<script>")

    def request(self, cycle: int = 0, source: int = rq.SCRIPT) -> rq.Request:
        """The step's request, made in ``cycle``."""
        return rq.Request(self.kind, source, cycle, self.motion, self.value, self.legs)

    def describe(self) -> str:
        """``start walk`` / ``speed 0.6`` / ``level 0.5 left`` — as docs/sessions.md writes it."""
        words = [rq.KINDS[self.kind]]
        if self.motion is not None:
            words.append(self.motion)
        if self.value is not None:
            words.append(f"{self.value:g}")
        if self.legs:
            words.extend(self.legs)
        return " ".join(words)


@dataclass(frozen=True)
class Session:
    """A loaded session script."""

    source: str
    steps: tuple[Step, ...]
    description: str = ""
    start: str | None = None  # the posture it starts in (None: wherever the leg is)
    start_where: Where | None = None  # ... where the file says so
    duration: float | None = None  # s: the run's --duration when the run gives none

    def run_duration(self, given: float | None) -> float:
        """The run's ``--duration`` (s): ``given`` on the command line, else the script's,
        else :data:`~exo_rt.schema.session.DEFAULT_DURATION_S`."""
        if given is not None:
            return given
        return self.duration if self.duration is not None else DEFAULT_DURATION_S


def _step(entry, node, first: bool, last_at: float | None, activities) -> Step:
    """One step, checked: what its request takes, when it can be made."""
    kind = rq.BY_NAME[entry.request]
    keys = node.value
    what = f"a {entry.request} request"
    if kind in NEEDS_MOTION and entry.motion is None:
        raise ConfigError(f"{what} has no 'motion'", node.where(),
                          "add 'motion: NAME' (a motion of the activities file)")
    for k, needed in (("motion", kind in NEEDS_MOTION), ("value", kind in NEEDS_VALUE),
                      ("legs", kind == rq.LEVEL)):
        if k in keys and not needed:
            raise ConfigError(f"{what} takes no '{k}'", keys[k].where(), f"remove '{k}'")
    if kind in NEEDS_VALUE and entry.value is None:
        unit = {rq.SPEED: "m/s", rq.STEP_LENGTH: "m", rq.LEVEL: "0–1"}[kind]
        raise ConfigError(f"{what} has no 'value'", node.where(), f"add 'value: X' ({unit})")
    if entry.at is not None and entry.after is not None:
        raise ConfigError("a step has both 'at' and 'after'", keys["after"].where(),
                          "keep one: 'at' (session time) or 'after' (an event)")
    if entry.at is not None and "wait" in keys:
        raise ConfigError("a step made 'at' a time waits for nothing", keys["wait"].where(),
                          "remove 'wait', or put the delay into 'at'")
    if first and entry.after in EVENTS:
        raise ConfigError(f"the first step waits for '{entry.after}', but no step is before "
                          f"it", keys["after"].where(), "give it 'at: 0.0'")
    if entry.at is not None and last_at is not None and entry.at < last_at:
        raise ConfigError(f"at {entry.at:g} s is before an earlier step's {last_at:g} s",
                          keys["at"].where(), "the steps are made in order: sort them")
    if activities is not None and entry.motion is not None \
            and activities.motion(entry.motion) is None:
        raise ConfigError(f"unknown motion '{entry.motion}'", keys["motion"].where(),
                          did_you_mean(entry.motion, activities.names)
                          or f"the motions of {activities.source}: "
                             f"{', '.join(activities.names)}")
    if activities is not None and entry.legs:
        for leg in entry.legs:
            if leg not in activities.legs:
                raise ConfigError(f"unknown leg '{leg}'", keys["legs"].where(),
                                  did_you_mean(leg, activities.legs) or
                                  f"the robot's legs: {', '.join(activities.legs)}")
    after, strides = entry.after, 0
    if after is not None and after.startswith("strides"):
        after, strides = "strides", int(after.split()[1])
    duration = entry.wait == "duration"
    return Step(kind=kind, motion=entry.motion, value=entry.value,
                legs=tuple(entry.legs) if entry.legs is not None else None, at=entry.at,
                after=after, strides=strides, wait=0.0 if duration else float(entry.wait),
                wait_duration=duration, where=node.where())


def load_session(path: str | Path, activities=None) -> Session:
    """Read and check a session script. With ``activities`` (an
    :class:`~exo_rt.session.activities.Activities`), its motion and leg names are checked
    too (leave it out for a script that asks for an unknown motion on purpose).
    ConfigError with ``file:line`` on any mistake."""
    root = read_yaml(Path(path), ConfigError)
    f = core.read(SessionFile, root)
    nodes = root.value["steps"].value
    if not nodes:
        raise ConfigError("a session with no steps", root.value["steps"].where(),
                          "add '- {request: start, motion: walk, at: 0.0}'")
    steps, last_at, earliest = [], None, 0.0
    for i, (entry, node) in enumerate(zip(f.steps, nodes, strict=True)):
        step = _step(entry, node, i == 0, last_at, activities)
        earliest = _earliest(step, earliest)
        steps.append(step)
        last_at = entry.at if entry.at is not None else last_at
    keys = root.value
    if activities is not None and f.start is not None and f.start not in activities.postures:
        raise ConfigError(f"unknown posture '{f.start}' to start in", keys["start"].where(),
                          did_you_mean(f.start, activities.postures)
                          or f"the postures of {activities.source}: "
                             f"{', '.join(activities.postures)}")
    return Session(source=str(path), steps=tuple(steps), description=f.description,
                   start=f.start, start_where=keys["start"].where() if "start" in keys else None,
                   duration=f.duration)


def _earliest(step: Step, before: float) -> float:
    """The earliest session time (s) ``step`` can be made, the step before it made no earlier
    than ``before``: its ``at``, or ``before`` plus the strides it waits for (each at least
    :data:`~exo_rt.schema.session.MIN_STRIDE_S`) and its wait (``wait: duration`` counts 0
    here: the run's ``--duration`` is itself within the limit). ConfigError beyond the run's
    24 h limit (:data:`~exo_rt.schema.session.MAX_TIME_S`)."""
    t = step.at if step.at is not None else before + step.strides * MIN_STRIDE_S + step.wait
    if t > MAX_TIME_S:
        raise ConfigError(f"'{step.describe()}' is made no earlier than {t:g} s into the "
                          f"session (the waits and strides of the steps before it added up), "
                          f"beyond the run's 24 h limit", step.where,
                          f"shorten the waits: every step at {IN_THE_RUN}")
    return t


def check_run_start(run, q) -> None:
    """:func:`check_start` for a run's session (:class:`exo_rt.session.session.Session`)
    when its script declares a start posture, ``q`` the measured leg (rad): what the
    controller calls on real drives once they are enabled at zero current, before RUN."""
    source = run.script.source if run.script is not None else None
    if source is not None and source.session is not None:
        check_start(source.session, run.machine.activities, q)


def start_pose(session: Session, activities) -> list[float] | None:
    """Where a simulated leg is put for ``session``: its start posture's joint angles (rad,
    the robot's joint order, as ``--start-pose`` takes them), or None when it declares none
    (the leg starts where the simulation puts it)."""
    if session.start is None:
        return None
    return [float(x) for x in activities.posture_q(session.start)]


def check_start(session: Session, activities, q, measured: str = "the leg",
                fix: str | None = None) -> None:
    """Refuse to begin ``session`` unless every joint of ``q`` (rad, the robot's joint
    order: the measured leg, or a ``--start-pose``) is within the activities' tolerance of
    the posture it starts in: ConfigError naming each joint that is not, where it is and
    where it should be, and (unless ``fix`` says otherwise) offering HOME. Nothing when the
    script declares no start."""
    if session.start is None:
        return
    want, tol = activities.posture_q(session.start), activities.tolerance
    off = [f"{name} {float(x):.3g} rad (not {w:.3g} ± {tol:g})"
           for name, x, w in zip(activities.joint_names, q, want, strict=True)
           if not abs(float(x) - w) <= tol]
    if not off:
        return
    homes = [m for m in activities.motions if m.kind == "home"]
    offer = (f", or home it first: a session without 'start' that asks 'start {homes[0].name}' "
             f"(to {homes[0].end}, after CONFIRM), as `exo-rt run` without --session does"
             if homes else "")
    raise ConfigError(f"the session starts {session.start}, but {measured} is not there: "
                      f"{', '.join(off)}", session.start_where,
                      fix or f"put the leg in {session.start} (each joint within {tol:g} "
                             f"rad){offer}")


def default_path() -> Path:
    """The default run's session (``configs/sessions/default.yaml``): walk for
    ``--duration``, stop, end."""
    return resources.config("sessions", "default.yaml")


class ScriptSource:
    """Makes a script's requests as they fall due.

    ``steps``: the script's (:attr:`Session.steps`); ``duration``: the run's ``--duration``
    (s; needed by a step with ``wait: duration``); ``dt``: the control period (s): a step due
    at t is made in the first cycle ≥ t/dt. Every cycle the owner calls :meth:`poll`; it
    passes every answer to this source's requests, and every FINISHED, to :meth:`notify`,
    and the stride count whenever it grows to :meth:`on_stride`. Nothing is allocated while
    nothing is due (:meth:`poll` returns the shared empty :data:`EMPTY`).
    """

    def __init__(self, steps, duration: float | None, dt: float) -> None:
        if not dt > 0:
            raise ValueError(f"the control period dt must be > 0 s, got {dt!r}")
        self.session = steps if isinstance(steps, Session) else None  # (its start)
        self.steps = tuple(steps.steps if isinstance(steps, Session) else steps)
        self.dt = float(dt)
        self._requests = [s.request() for s in self.steps]
        self._wait = []
        for s in self.steps:
            if s.wait_duration and duration is None:
                raise ConfigError("the step waits the run's --duration, and the run has none",
                                  s.where, "give --duration, or a wait in seconds")
            self._wait.append(self._cycles(duration if s.wait_duration else s.wait))
        self._next = 0  # the step to make next
        self._strides = 0  # strides walked (the owner's count)
        self._base = 0  # ... when the last step made was made
        self._answer = 0  # the last step made: its ACCEPTED/REJECTED (0: none yet)
        self._reason = rq.R_NONE
        self._finished = False  # ... a FINISHED since it was made
        self._due = self._due_first()

    # -- timing
    def _cycles(self, seconds: float) -> int:
        return int(round(seconds / self.dt))

    def _at_cycle(self, s: Step) -> int:
        return int(math.ceil(s.at / self.dt - 1e-9))

    def _due_first(self) -> int:
        if not self.steps:
            return NEVER
        s = self.steps[0]
        if s.at is not None:
            return self._at_cycle(s)
        if s.after == "strides":
            return NEVER
        return self._wait[0]

    def _arm(self, cycle: int) -> None:
        """The next step's due cycle once the step before it was made in ``cycle``."""
        if self._next >= len(self.steps):
            self._due = NEVER
            return
        s = self.steps[self._next]
        if s.at is not None:
            self._due = self._at_cycle(s)
        elif s.after is None:
            self._due = cycle + self._wait[self._next]
        else:
            self._due = NEVER

    def _event(self, what: str, cycle: int) -> None:
        """``what`` happened in ``cycle``: the next step waits for it → due ``wait`` later."""
        if self._next < len(self.steps) and self._due == NEVER and self._next > 0 \
                and self.steps[self._next].after == what:
            self._due = cycle + self._wait[self._next]

    # -- the owner's calls
    def poll(self, cycle: int, limit: int = NEVER):
        """The requests due in ``cycle`` (source SCRIPT, their cycle set), in order, at most
        ``limit`` of them (the rest stay due: the next cycles make them); the shared empty
        tuple when none is."""
        if cycle < self._due:
            return EMPTY
        out = []
        while self._next < len(self.steps) and cycle >= self._due and len(out) < limit:
            req = self._requests[self._next]
            req.cycle = cycle
            out.append(req)
            self._next += 1
            self._base = self._strides
            self._answer, self._reason, self._finished = 0, rq.R_NONE, False
            self._arm(cycle)
            self._strides_due(cycle)
        return out

    def notify(self, answer: rq.Answer, cycle: int) -> None:
        """An answer in ``cycle``: to the last request made (matched by its kind) or a
        FINISHED (a motion ended)."""
        if self._next == 0:
            return
        if answer.answer == rq.FINISHED:
            self._finished = True
            self._event("finished", cycle)
            return
        last = self.steps[self._next - 1]
        if answer.kind != last.kind or self._answer:
            return
        if last.kind == rq.START and answer.motion not in (None, last.motion):
            return
        self._answer, self._reason = answer.answer, answer.reason
        self._event(rq.ANSWERS[answer.answer], cycle)
        if last.kind == rq.STOP and answer.reason == rq.R_NOT_WALKING:
            # the walk it was to stop has ended already (the crutch's STOP, the session's
            # own for a winding past its warning): as if it had finished here
            self._finished = True
            self._event("finished", cycle)

    def on_stride(self, count: int, cycle: int) -> None:
        """The stride count (strides walked in the session) reached ``count`` in ``cycle``."""
        self._strides = count
        self._strides_due(cycle)

    def _strides_due(self, cycle: int) -> None:
        if self._next < len(self.steps) and self._due == NEVER:
            s = self.steps[self._next]
            if s.after == "strides" and self._strides - self._base >= s.strides:
                self._due = cycle + self._wait[self._next]

    # -- where it stands
    @property
    def made(self) -> int:
        """How many steps were made."""
        return self._next

    @property
    def done(self) -> bool:
        """Every step made, and the last one accepted or its motion finished."""
        return self._next == len(self.steps) and (self._answer == rq.ACCEPTED
                                                  or self._finished)

    @property
    def stalled(self) -> str | None:
        """Why the next step can never be made (the step before was answered otherwise than
        it waits for), or None."""
        if self._next == 0 or self._next >= len(self.steps) or not self._answer:
            return None
        s, last = self.steps[self._next], self.steps[self._next - 1]
        got = rq.ANSWERS[self._answer]
        if s.after in ("accepted", "rejected", "finished") and self._due == NEVER and (
                s.after != got and not (s.after == "finished" and got == "accepted")):
            why = f" ({rq.REASONS[self._reason]})" if self._answer == rq.REJECTED else ""
            return (f"{s.where}: '{s.describe()}' waits for '{s.after}' of "
                    f"'{last.describe()}', which was {got}{why}")
        return None
