"""One session of a run: the activity machine, who may ask it for what, and the record of
every request, answer and transition.

The controller makes one before its loop (:func:`for_run`) and calls :meth:`Session.tick`
at the end of every RUN cycle, after the cycle's commands went out: the sources' requests
(the board's crutch buttons, the console's keys, the session script, or — in replay — the
recorded requests at the cycles they came in) are answered at once and an accepted one acts
on the next cycle's reference; the answers go back to the board and the console and into
the run's events (``events.jsonl`` and the ``/activity`` channel). All sources are equal
before the machine; safety is not theirs (the cycle's check runs whoever asked).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from exo_rt.session.machine import HEAT_STOP, ActivityMachine
from exo_rt.session.prepare import WAIT, Preparer
from exo_rt.session.roles import Listener, Sink, Source
from firmware_bridge import requests as rq
from firmware_bridge.requests import Answer, Request

# s: a session still going this long after the run's --duration is ended, and twice as long
# stopped (the run's lifecycle: exo_rt.runtime.script)
SESSION_SPARE_S = 30.0

if TYPE_CHECKING:
    from exo_rt.session.activities import Activities
    from exo_rt.session.wearer import Wearer

EMPTY: tuple = ()
PACE_KINDS = frozenset((rq.SPEED, rq.STEP_LENGTH, rq.MODE))  # the walking parameters
MAX_REQUESTS = 4  # requests answered in one cycle, at most: the rest wait in order (a pasted
# flood or a script's thousand steps due at once never makes a cycle late)


@dataclass(frozen=True)
class SessionFiles:
    """What a run's session was read from (:meth:`Session.files`): the session script's path
    (``--session``; None: the shipped default), the activities and the wearer profile as
    loaded."""

    script: str | None
    activities: Activities
    wearer: Wearer


class Session:
    """A session on a cycle: ``machine`` answers; ``sources`` ask
    (:class:`~exo_rt.session.roles.Source`); ``listeners`` — sources among them that follow
    what was answered — are told every answer and stride (:class:`~exo_rt.session.roles.
    Listener`); ``sinks`` are told every answer and every change a display shows
    (:class:`~exo_rt.session.roles.Sink`); every request, answer, transition and stride is
    appended to ``events`` (dicts with the cycle and its time, ``dt`` s a cycle).
    ``heat_stops``: the session slows a walk itself to the wearer's slowest preset once a
    motor's winding passes ``safety.thermal.slow_walk``, and STOPs it once one passes its
    warning level (:meth:`ActivityMachine.walk_heat`; replay asks the recorded requests
    instead)."""

    def __init__(self, events: list, dt: float, machine: ActivityMachine,
                 sources: list[Source], sinks: list[Sink] | None = None, *,
                 script: Shifted | None = None, heat_stops: bool = True) -> None:
        self.events, self.dt, self.machine = events, dt, machine
        self.sources: list[Source] = list(sources)
        self.listeners: list[Listener] = [script] if script is not None else []
        self.sinks: list[Sink] = list(sinks or ())
        self.script = script  # the session script source, if any: its end ends the session
        self.console: ConsoleSink | None = None  # the therapist's console, when it is one
        self.buttons = None  # the board's buttons (session.buttons.BoardButtons), when heard
        self._steps = 0
        self._shown = -1
        self.stalled: str | None = None  # why the script can go no further, once it cannot
        self.log: list[tuple[int, Request | None, Answer]] = []  # (cycle, request, answer)
        self.waiting: deque[Request] = deque()  # requests beyond a cycle's MAX_REQUESTS
        self.preparing: deque[Request] = deque()  # walking parameters whose pace is being
        self._made = -1  # made beside the cycle (in order); the worker's count when the
        # first of them last waited
        self._warned = MAX_REQUESTS
        self._script_flood = False  # a script burst beyond MAX_REQUESTS a cycle was told
        self._governing = 0.0
        self.failed: str | None = None  # the session's code raised: it winds down
        self.tracebacks: list[str] = []  # … what it raised, for ``error_file`` at close
        self.broken: str | None = None  # … and so did the machine: the run ends it
        self.error_file = None  # where a traceback is written (the run folder's)
        self.guarded: int | None = None  # the cycle the run's guard began ending it
        self.last_resort: int | None = None  # the cycle it was frozen to end the run
        self.script_path: str | None = None  # the script's file (None: the shipped default)
        self.heat_stops = heat_stops  # a walk warming a winding is slowed, then STOPped
        # (not in replay, which asks the STOP recorded instead)

    def begin(self, k: int) -> None:
        """The first RUN cycle: the machine holds where the leg is and names its posture;
        the script's time starts."""
        if self.script is not None:
            self.script.k0 = k
        self.machine.start()
        self._event(k, {"event": "activity", "posture": self.machine.posture,
                        "possible": self.machine.possible(), "steps": 0})
        self._show(k)

    def ask(self, req: Request, k: int, active: bool = True) -> Answer | None:
        """One request, answered (and recorded, and told to every sink and source) — or
        None: a walking parameter whose new pace is being made beside the cycle
        (:mod:`exo_rt.session.prepare`), answered in the cycle it is made by (in order with
        the walking parameters asked after it; every other request goes on meanwhile)."""
        req.cycle = k
        ans = WAIT if self.preparing and req.kind in PACE_KINDS and active else \
            self.machine.handle(req, active)
        if ans is WAIT:
            self.preparing.append(req)
            self._event(k, {"event": "request_preparing", **req.as_dict()})
            return None
        self._answered(k, req, ans)
        return ans

    def _ask_prepared(self, k: int, active: bool, budget: int) -> int:
        """The walking parameters waiting on their pace, asked again (in order, while the
        budget lasts) once the worker made something; returns the budget left."""
        made = self.machine.prepared.finished
        if made == self._made:
            return budget
        preparing = self.preparing
        while preparing and budget:
            req = preparing[0]
            req.cycle = k
            ans = self.machine.handle(req, active)
            if ans is WAIT:
                self._made = made  # (nothing to ask again until the worker makes more)
                return budget
            preparing.popleft()
            self._answered(k, req, ans)
            budget -= 1
        self._made = -1  # (the budget spent: the rest asked again next cycle)
        return budget

    def tick(self, k: int, active: bool) -> None:
        """The end of cycle ``k``: the sources' requests (at most ``MAX_REQUESTS`` a cycle:
        the rest wait, in order), then what the cycle did (strides, a motion's end, the
        reference governed). Nothing allocates when nobody asked and nothing happened.
        Session code runs inside the guard: an exception of a source, a sink or the machine
        ends the session safely (:meth:`_fault`), never the loop."""
        try:
            self._tick(k, active)
        except Exception as e:  # noqa: BLE001 (the guard: whatever it is, the loop goes on)
            self._fault(k, e)

    def _tick(self, k: int, active: bool) -> None:
        if self.failed is not None:
            self._wind_down(k, active)
            return
        budget = MAX_REQUESTS
        if self.preparing:
            budget = self._ask_prepared(k, active, budget)
        waiting = self.waiting
        if waiting:
            while waiting and budget:
                self.ask(waiting.popleft(), k, active)
                budget -= 1
        for src in self.sources:
            reqs = src.poll(k)
            if not reqs:
                continue
            for req in reqs:
                if budget and not waiting:
                    self.ask(req, k, active)
                    budget -= 1
                else:
                    waiting.append(req)
            burst = src is self.script and len(reqs) >= MAX_REQUESTS  # (more stay due in it)
            if len(waiting) > self._warned or (burst and not self._script_flood):
                self._warned = max(self._warned, 2 * len(waiting))
                self._event(k, {"event": "requests_waiting", "waiting": len(waiting),
                                "per_cycle": MAX_REQUESTS,
                                "source": "script" if burst else "queue"})
            if src is self.script:
                self._script_flood = burst  # (a burst is told once, when it begins)
        if self.heat_stops and (heat := self.machine.walk_heat(k)):  # (replay: what was
            if heat == HEAT_STOP:  # recorded)
                self.ask(Request(rq.STOP, rq.SESSION, note="winding past its warning"), k,
                         active)
            else:
                self.machine.slowed = True  # (asked once: a refusal is not asked again)
                self.ask(Request(rq.SPEED, rq.SESSION, value=self.machine.slowest,
                                 note="winding warm: the walk slows"), k, active)
        governing = self.machine.s["governing"]
        if governing != self._governing:
            self._governing = governing
            self._event(k, {"event": "reference_governed" if governing else
                            "reference_released",
                            "cycles": int(self.machine.s["governed"])})
        m = self.machine
        done = m.after_cycle()
        if m.steps != self._steps:  # (counted in the record's stride column, not as events:
            self._steps = m.steps  # an 8-hour walk would keep 14 400 of them in memory)
            for listener in self.listeners:
                listener.on_stride(m.steps, k)
        if done is not None:
            self._answered(k, None, done)
            self._event(k, {"event": "activity", "posture": m.posture,
                            "possible": m.possible(), "steps": m.steps})
        if m.version != self._shown:
            self._show(k)

    def _fault(self, k: int, e: BaseException) -> None:
        """Session code raised: the traceback recorded (an event, and ``session-error.txt``
        in the run folder when there is one), the source that raised dropped, and the session
        wound down — a walk STOPs with its closing step, a move ends where it goes, then END
        (:meth:`_wind_down`)."""
        import traceback

        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        first = self.failed is None
        self.failed = self.failed or f"{type(e).__name__}: {e}"
        self._event(k, {"event": "session_fault", "error": f"{type(e).__name__}: {e}",
                        "traceback": text})
        self.tracebacks.append(f"cycle {k}: {text}")  # (written at close: no file I/O
        culprit = _culprit(e, self.sources)
        if culprit is not None:
            self.sources.remove(culprit)
            if culprit in self.listeners:
                self.listeners.remove(culprit)
        if first:
            self.waiting.clear()
            self.preparing.clear()
        try:
            self._wind_down(k, True)
        except Exception as again:  # noqa: BLE001 (the machine itself: the run ends it)
            self.broken = f"{type(again).__name__}: {again}"
            self._event(k, {"event": "session_broken", "error": self.broken})

    def _wind_down(self, k: int, active: bool) -> None:
        """A failed session ends as safely as it can: STOP a walk (its closing step), let a
        move end, then END from the posture reached."""
        if self.broken is not None or not active:
            return
        m = self.machine
        done = m.after_cycle()
        if done is not None:
            self._answered(k, None, done)
        if m.motion is None:
            if not m.ended:
                self.ask(Request(rq.END, rq.SESSION), k, active)
        elif m.motion.stoppable and not m.stop_asked:
            self.ask(Request(rq.STOP, rq.SESSION), k, active)
        else:
            m.end_frozen()  # (a frozen GO-held move ends now; one that moves goes on)

    def close(self) -> None:
        """The run is over: the console's terminal restored; a fault's tracebacks written
        to ``error_file`` (here, after the loop: no file I/O between two cycles)."""
        if self.tracebacks and self.error_file is not None:
            try:
                Path(self.error_file).write_text("\n".join(self.tracebacks), encoding="utf-8")
            except OSError as e:
                self.events.append({"event": "session_error_file", "error": str(e)})
        for sink in self.sinks:
            sink.close()
        self.machine.prepared.close()

    def files(self) -> SessionFiles:
        """What this session was read from: its script's path (None: the shipped default),
        its activities and wearer profile (the run folder keeps copies:
        :func:`exo_rt.runtime.snapshot.session_files`)."""
        return SessionFiles(self.script_path, self.machine.activities, self.machine.wearer)

    def ended_by(self) -> str | None:
        """What ended the session when its own END did not (summary.json's
        ``session_ended_by``): the error its code raised, ``run_limit`` (stopped past the
        run's limit), ``run_time_up`` (ended by the guard past ``--duration``), or None."""
        if self.failed is not None:
            return self.failed
        if self.last_resort is not None:
            return "run_limit"
        return "run_time_up" if self.guarded is not None else None

    @property
    def ended(self) -> bool:
        """The session is over: END was accepted (from a posture)."""
        return self.machine.ended

    def add(self, source: Source, *, listens: bool = False, first: bool = False) -> None:
        """One more source (``first``: asked before the others); ``listens``: it is also a
        :class:`~exo_rt.session.roles.Listener`, told every answer and stride."""
        if first:
            self.sources.insert(0, source)
        else:
            self.sources.append(source)
        if listens:
            if first:
                self.listeners.insert(0, source)
            else:
                self.listeners.append(source)

    def drop_script(self) -> None:
        """No script runs (the console or the web page alone asks)."""
        if self.script is not None:
            self.sources.remove(self.script)
            self.listeners.remove(self.script)
            self.script = None

    def _answered(self, k: int, req: Request | None, ans: Answer) -> None:
        self.log.append((k, req, ans))
        ev = {"event": "request"} if req is not None else {"event": "finished"}
        if req is not None:
            ev.update(req.as_dict())
        ev.update(ans.as_dict())
        self._event(k, ev)
        for listener in self.listeners:
            listener.notify(ans, k)
        for sink in self.sinks:
            sink.answer(ans, k)
        if self.script is not None and self.stalled is None:
            self.stalled = self.script.source.stalled
            if self.stalled is not None:  # (the session's guard will end it: say why now)
                self._event(k, {"event": "script_stalled", "why": self.stalled})

    def _show(self, k: int) -> None:
        self._shown = self.machine.version
        for sink in self.sinks:
            sink.show(self.machine, k)

    def _event(self, k: int, ev: dict) -> None:
        out = {"cycle": k, "t": round(k * self.dt, 6)}
        out.update(ev)
        self.events.append(out)


@dataclass(frozen=True)
class ConsoleRun:
    """What the console's status line shows of the run around the session: the control
    period ``dt`` (s), the run's ``duration`` (s; None: none), the cycle each state began
    ``k0`` (the controller's own dict, filled as the run goes) and its ``state`` now (a
    callable: the cycle's record holds it)."""

    dt: float
    duration: float | None
    k0: dict
    state: Callable[[], int]


class ConsoleSink(Source, Sink):
    """The therapist's console on a session: a source (:meth:`poll`: its keys' requests) and
    a sink (its status kept up with the machine ``machine``: what changed, the last answer,
    and every ``REFRESH_CYCLES`` the time and a move's progress). Its keys act on the
    possible motions and the speed it was last told. When its input is lost (the end of
    the input, a read error), a walk is stopped at the end of its stride — a STOP from the
    console, noted why — as when the crutch goes silent (a GO-held move goes on while GO is
    held, to its posture)."""

    REFRESH_CYCLES = 100  # the time on the status line: every 0.1 s at 1 kHz

    def __init__(self, run: ConsoleRun, source, view, machine=None) -> None:
        self.run, self.source, self.view, self.last = run, source, view, None
        self.inner = source  # (whose code raising counts as this source's: _culprit)
        self.machine = machine
        self._refresh = 0
        self._lost_stop = False  # this walk was stopped for the lost input

    def poll(self, k: int):
        """The keys' requests (at most a few a cycle); a STOP when the input is lost during
        a walk; the status refreshed every ``REFRESH_CYCLES``."""
        src, m = self.source, self.machine
        reqs = src.poll(k)
        if src.lost is not None and m is not None:
            walking = m.motion is not None and m.motion.kind == "walk" and not m.stop_asked
            if walking and not self._lost_stop:
                self._lost_stop = True
                reqs = [*reqs, Request(rq.STOP, rq.CONSOLE, k,
                                       note=f"console input lost: {src.lost}")]
            elif m.motion is None:
                self._lost_stop = False
        if k >= self._refresh and m is not None:
            self._refresh = k + self.REFRESH_CYCLES
            self.show(m, k)
        return reqs

    def answer(self, ans, k: int) -> None:
        self.last = ans

    def show(self, machine, k: int) -> None:
        from exo_rt.cycle.states import RUN, STATES

        run, st, motion = self.run, machine.status(), machine.motion
        progress = None
        if motion is not None and motion.kind != "walk" and machine.seg["seg_duration"] > 0:
            progress = min(machine.seg["seg_tau"] / machine.seg["seg_duration"], 1.0)
        needs = {}
        for name in st["possible"]:
            m = machine.activities.motion(name)
            if m is not None and m.hold_go:
                needs[name] = "hold GO: g"
            elif m is not None and m.needs_confirm:
                needs[name] = "then CONFIRM: c"
        pending = machine.home_pending
        duration = run.duration
        status = dict(time=(k - run.k0.get(RUN, 0)) * run.dt, duration=duration,
                      ends=None if duration is None else duration + SESSION_SPARE_S,
                      state=STATES[run.state()], lost=self.source.lost, posture=st["posture"],
                      motion=st["motion"], progress=progress,
                      hold=motion is not None and motion.hold_go,
                      stopping=motion is not None and machine.stop_asked,
                      possible=st["possible"], needs=needs, strides=st["steps"],
                      speed=st["speed"], level=st["levels"], go=st["go"],
                      go_block=machine.go_block and motion is None, answer=self.last,
                      waiting="confirm" if pending is not None else None,
                      pending=pending.name if pending is not None else None)
        self.source.set_status(status)
        self.view.update(status, self.source.messages())

    def close(self) -> None:
        self.source.close()
        self.view.close()


class Shifted(Source, Listener):
    """A session script's source on the session's own clock: its cycle 0 is the first RUN
    cycle (``k0``, set when the session begins)."""

    def __init__(self, source) -> None:
        self.source, self.k0 = source, 0
        self.inner = source  # (whose code raising counts as this source's: _culprit)

    def poll(self, k: int):
        return self.source.poll(k - self.k0, MAX_REQUESTS)  # (the rest stay due in it)

    def notify(self, answer, k: int) -> None:
        self.source.notify(answer, k - self.k0)

    def on_stride(self, steps: int, k: int) -> None:
        self.source.on_stride(steps, k - self.k0)


class Recorded(Source):
    """Requests recorded in a run's events, asked again at the cycles they came in (replay:
    the same session, bit for bit, whoever asked then)."""

    def __init__(self, events: list[dict]) -> None:
        self.due: dict[int, list[Request]] = {}
        for ev in events:
            if ev.get("event") != "request":
                continue
            req = Request(rq.BY_NAME[ev["request"]], rq.REPLAY, int(ev["cycle"]),
                          ev.get("motion") if ev.get("request") == "start" else None,
                          ev.get("value"), tuple(ev["legs"]) if ev.get("legs") else None)
            self.due.setdefault(int(ev["cycle"]), []).append(req)

    def poll(self, k: int):
        return self.due.get(k, EMPTY)


def _culprit(e: BaseException, sources: list):
    """The source whose code raised ``e`` (the innermost frame in one of its methods, or in
    those of the source it wraps, its ``inner``), or None (the machine's, or a sink's)."""
    found, tb = None, e.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        for s in sources:
            if owner is not None and (owner is s or (isinstance(s, (Shifted, ConsoleSink))
                                                     and s.inner is owner)):
                found = s
        tb = tb.tb_next
    return found


def gait_function(robot, cfg, wearer, gait: str = "normal"):
    """(speed m/s, step length m or None) → (Fourier rows (n, 1 + 2·MAX_HARMONICS) rad,
    stride period s, stride length m): the walking reference for this robot and wearer — the
    normal gait scaled to the pace (:mod:`exo_rt.control.gait_speed`) or, ``gait`` (the
    activities file's) ``flat_foot``, the flat-foot gait (:mod:`exo_rt.control.flat_foot`).
    Its ``steps`` (rows, stride, walk motion, start and end posture) gives the flat-foot
    walk's opening and closing steps on the floor (None: the plain blends)."""
    import numpy as np

    from exo_rt.control import flat_foot, trajectory

    names = list(robot.joint_names)
    kinds = [cfg.reference.gait_joints.get(nm, "hip" if nm.endswith("hip") else "knee")
             for nm in names]

    walks: dict = {}

    def gaits(speed: float, step_length: float | None):
        key = (float(speed), None if step_length is None else float(step_length))
        if key not in walks:  # (each pace once: the load's checks make the walks the
            if gait == "flat_foot":  # activity machine then asks for inside the cycle)
                w = flat_foot.walk(speed, wearer.height, step_length)
                rows = flat_foot.gait_rows(robot, kinds, w.stride_length)
            else:
                w = wearer.walk(speed, robot, step_length)
                rows = trajectory.gait_coefficients(names, kinds, w.amplitude)
            walks[key] = (rows, w.period, w.stride_length)
        return walks[key]

    made: dict = {}

    def steps(rows, stride: float, motion, q_from, q_to):
        """The walk's floor steps (the flat-foot gait's opening and closing steps on the
        floor, :func:`exo_rt.control.flat_foot.walk_steps`: {gaits slot: rows}) for the gait
        ``rows`` of strides ``stride`` m, or None: the plain blends. Kept per walk, gait
        and postures: the load's checks make the walks the activity machine then begins
        (≈ 0.1 s each)."""
        if gait != "flat_foot":
            return None
        q_from, q_to = np.asarray(q_from, float), np.asarray(q_to, float)
        key = (rows.tobytes(), stride, motion.name, motion.opening, motion.closing,
               tuple(motion.phase_offsets), q_from.tobytes(), q_to.tobytes())
        if key not in made:
            from exo_rt.cycle.segment import STEP_SLOTS

            steps = flat_foot.walk_steps(robot, kinds, stride, rows, motion, q_from, q_to)
            made[key] = None if steps is None else {STEP_SLOTS[k]: r for k, r in steps.items()}
        return made[key]

    gaits.steps = steps
    return gaits


def load_files(top, session=None, activities=None, wearer=None):
    """The session's files, read and checked against the robot: (session script, activities,
    wearer) — the defaults where a path is None. ConfigError (file:line) on any mistake."""
    from exo_rt.session import activities as act
    from exo_rt.session import script as sc
    from exo_rt.session import wearer as wr

    robot = top.robot
    w = wr.load_wearer(wearer, robot) if wearer is not None else wr.default_wearer(robot)
    a = act.load_activities(activities or act.default_path(robot.name), robot,
                            top.safety.joint_margin, postures=w.postures or None,
                            rom=w.joint_range(robot))
    script = sc.load_session(Path(session) if session is not None
                             else top.session_path or sc.default_path(), a)
    return script, a, w


def build(cycle, top, events: list, dt: float, duration: float, *, session=None,
          activities=None, wearer=None, requests=None, beside: bool = False) -> Session:
    """The session on ``cycle`` for the top config ``top``: its files (:func:`load_files`;
    None: the defaults) and its script, timed by the run's ``duration`` — or, in replay, the
    recorded ``requests`` instead. ``beside``: a new pace is made beside the cycle (a real-
    time run: :mod:`exo_rt.session.prepare`), never in replay. The controller's
    (:func:`for_run`) adds its board and console; the bench's run of the controller takes it
    as it is."""
    from exo_rt.cycle import governor
    from exo_rt.session import envelope as env
    from exo_rt.session import script as sc

    steps, acts, who = load_files(top, session, activities, wearer)
    gaits = gait_function(top.robot, top.controller, who, acts.gait)
    governor.narrow(cycle.v, *who.joint_range(top.robot))
    bounds = env.Envelope.of_cycle(cycle, top.robot.joint_names, gaits)
    env.check_at_load(bounds, acts, who)  # (ConfigError, file:line: nothing begins beyond)
    machine = ActivityMachine(cycle, acts, who, gaits, bounds,
                              Preparer(threaded=beside and requests is None))
    if requests is not None:  # replay: what was asked, when it was (the heat's STOP too)
        return Session(events, dt, machine, [Recorded(list(requests))], heat_stops=False)
    script = Shifted(sc.ScriptSource(steps, duration, dt))
    return Session(events, dt, machine, [script], script=script)


@dataclass(frozen=True)
class SessionRun:
    """What a run's session is made from (:func:`for_run`): the run's ``cycle``
    (:class:`exo_rt.cycle.step.Cycle`), its ``top`` config (robot, controller, safety, its
    session script's path), its ``events`` (the run's own list, appended to), the control
    period ``dt`` (s), its ``duration`` (s), ``k0`` (the cycle each state began: the run's own
    dict, filled as it goes) and its ``state`` now (a callable: the cycle's record holds it),
    the ``board`` (:class:`exo_rt.runtime.rig.Board`) and whether the session hears its crutch
    buttons (``buttons``: the rig's), the helper processes' ``cpus`` and the run's
    ``setup_lines`` (appended to); of the run's options (:class:`~exo_rt.runtime.options.
    RunOptions`) the ``session`` script, ``activities`` and ``wearer`` files (None: the
    defaults), the recorded ``requests`` (replay; None: a live run), the ``console`` and the
    ``web`` page's address (None: none), and its ``sources``: each a callable of no argument
    that makes one more request source when the session is made (the options' sources,
    bound by the run to what they follow); ``realtime``: the loop keeps the wall clock's
    deadlines (a new pace is then made beside the cycle: :mod:`exo_rt.session.prepare`)."""

    cycle: object
    top: object
    events: list
    dt: float
    duration: float
    k0: dict
    state: Callable[[], int]
    board: object
    buttons: bool
    cpus: set
    setup_lines: list
    session: str | None = None
    activities: str | None = None
    wearer: str | None = None
    requests: tuple | None = None
    console: bool = False
    web: object | None = None
    sources: tuple = ()
    realtime: bool = False


def for_run(run: SessionRun, out_dir: Path | None = None) -> Session:
    """The session of a run (:class:`SessionRun`): its files, its script or the recorded
    requests (:func:`build`), its own ``sources``, the board's buttons where the rig's board
    has them (``buttons``; not replay's: the recorded requests are asked instead), the
    console with ``console``, the web page with ``web`` — alone (no ``session``) the only
    sources besides the board: no script runs under them. ``out_dir``: the run folder (None:
    none), where a session fault's traceback is kept. What the session was read from is
    :meth:`Session.files`."""
    sess = build(run.cycle, run.top, run.events, run.dt, run.duration, session=run.session,
                 activities=run.activities, wearer=run.wearer, requests=run.requests,
                 beside=run.realtime)
    sess.script_path = run.session
    if out_dir is not None:  # (a session fault's traceback, kept with the run)
        sess.error_file = Path(out_dir) / "session-error.txt"
    for make in run.sources:
        sess.add(make(), first=True)
    if run.console and run.requests is None:
        from exo_rt.session.console import ConsoleSource, ConsoleView

        if run.session is None:  # the console alone: its keys are the only source (no
            sess.drop_script()  # default script)
        view = ConsoleView()
        view.take_stderr()  # (the run's own lines go above its status, not into it)
        console = ConsoleSink(ConsoleRun(run.dt, run.duration, run.k0, run.state),
                              ConsoleSource(), view, sess.machine)
        sess.add(console)
        sess.sinks.append(console)
        sess.console = console
    if run.web is not None and run.requests is None:  # the therapist's web page (exo_rt.web)
        from exo_rt.session import web

        if run.session is None:  # the page alone: no script
            sess.drop_script()
        page = web.start(web.WebRun(run.cycle, run.top.robot, run.dt, run.duration, run.k0,
                                    run.board, run.web, run.cpus, run.setup_lines), sess)
        sess.add(page)
        sess.sinks.append(page)
    if run.buttons and run.requests is None:  # (replay: the recorded requests are asked
        from exo_rt.session.buttons import BoardButtons  # instead)

        board = BoardButtons(run.board, sess.machine, state=run.state)
        sess.add(board)
        sess.sinks.append(board)
        sess.buttons = board
    return sess


def check_lines(top, activities=None, wearer=None) -> list[str]:
    """``exo-rt check``'s report of a run's motions against the joints' bounds (the default
    activities and wearer where None): each motion's peak |q̇| and |q̈| per joint; ConfigError
    as a run would refuse them."""
    from exo_rt.session import envelope

    _, acts, who = load_files(top, None, activities, wearer)
    env = envelope.for_top(top, who, gait_function(top.robot, top.controller, who, acts.gait))
    envelope.check_at_load(env, acts, who)
    head = (f"motions of {acts.source} for {who.source or 'the default wearer'}: peak |q̇| / "
            f"bound, peak |q̈| / bound per joint (bounds: {top.safety.reference_speed:g} of "
            f"each velocity limit, safety.reference_acceleration)")
    return [head, *envelope.report(env, acts, who)]
