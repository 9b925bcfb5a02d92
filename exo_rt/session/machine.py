"""The activity machine: which posture the exoskeleton is in, which motion runs, and what
may be asked of it now (docs/sessions.md has the graph).

Postures (sitting, standing, …) are joined by motions (stand up, sit down, walk = opening
step → strides → closing step, home), declared per robot in an activities file
(:mod:`exo_rt.session.activities`). The machine is Python, event-driven, outside the compiled
step: every request (:class:`~firmware_bridge.requests.Request`, whoever asked — the board's
crutch buttons, the therapist's console, a session script) is answered at once, accepted or
refused with a reason; an accepted one writes a new reference segment into the cycle data
(:mod:`exo_rt.cycle.segment`), which the next cycle evaluates — continuous in position and
velocity, since every segment starts from the reference the last cycle tracked.

Rules (after Project MARCH's gait state machine and CORC's ALEX machine):

- a motion starts only from its start posture, and only when no motion runs;
- a leg in no named posture (at start, or after a cut motion) may only HOME, and HOME waits
  for the operator's CONFIRM;
- a motion that needs GO held progresses only while it is held; released, it freezes
  smoothly, pressed again it resumes;
- GO still held when a posture is reached must be released before the next motion starts,
  so a held button never chains motions;
- STOP during a walk ends it with the closing step (from the next half-stride boundary —
  once a speed change's blend has ended where the walk's floor steps are made for its new
  gait, from the blend's mix where its blends are plain);
- speed and step length change at the next stride boundary, within the wearer's profile,
  blended over two strides (or the walk's ``stride_change``); past
  ``safety.thermal.slow_walk`` the session slows a walk to the slowest preset and a faster
  speed is refused ``winding_warm``;
- nothing begins that asks more of a joint than the cycle's reference governor allows
  (range, speed, acceleration: :mod:`exo_rt.session.envelope`): refused ``beyond_joints``;
- any motion that begins clears a HOME waiting for CONFIRM, and CONFIRM is refused ``busy``
  while a motion runs, as any start is;
- GO moves a GO-held motion only once held ``go_debounce`` s (a chattering contact never
  reaches it); released, the motion freezes at once, smoothly;
- a GO-held move left frozen ``frozen_timeout`` s ends by itself (back to its start posture,
  or on to its end, as the activities file says): no motion stays half-done forever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from exo_rt.cycle import segment
from exo_rt.cycle.layout import (
    V_LEVEL,
    V_LEVEL_ASKED,
    V_LEVEL_TO,
    V_OFFSET,
    V_QR,
    V_SEG_FROM,
    V_SEG_TO,
)
from exo_rt.session.activities import HOME_CEILING, leg_of
from exo_rt.session.prepare import WAIT, Preparer
from firmware_bridge import requests as rq
from firmware_bridge.requests import Answer, Request

HEAT_NONE, HEAT_SLOW, HEAT_STOP = 0, 1, 2  # what a walk's windings ask (ActivityMachine.walk_heat)


class ActivityMachine:
    """The machine of one session on one cycle (:class:`exo_rt.cycle.step.Cycle`).

    ``activities``: the robot's postures and motions; ``gaits``: a function (speed m/s, step
    length m or None) → (Fourier rows (n, 11) rad, stride period s, stride length m) — the
    walking reference at a speed (:mod:`exo_rt.control.gait_speed`); ``wearer``: the profile
    whose ranges bound the walking parameters and the assistance level."""

    def __init__(self, cycle, activities, wearer, gaits, envelope=None,
                 prepared: Preparer | None = None) -> None:
        self.cycle, self.activities, self.wearer, self.gaits = cycle, activities, wearer, gaits
        self.envelope = envelope  # the joints' bounds every motion is checked against
        # a new pace's rows, floor steps and checks: made in the cycle, or beside it
        self.prepared = prepared if prepared is not None else Preparer()
        self._beside = None if envelope is None or not self.prepared.threaded else \
            envelope.fork()  # (the worker's own scratch; the checks' memo shared)
        self.s, self.v, self.dt = cycle.s, cycle.v, float(cycle.p["dt"])
        self.seg = cycle.seg  # the reference segment the cycle runs (its SEGMENT record)
        self.k = 0  # the cycle the machine was last told of (after_cycle)
        self.go_since: int | None = None  # the cycle GO was pressed, until it moves a motion
        self.debounce = int(round(activities.go_debounce / self.dt))
        self.frozen_since: int | None = None  # the cycle a GO-held move froze
        self.walked: tuple = ()  # (speed, step length) of the gait walked now (its slot B)
        self.posture: str | None = None
        self.motion = None  # the running motion (an activities Motion), or None
        self.go_held = False
        self.go_block = False  # GO held since the last posture was reached
        self.home_pending = None  # a HOME waiting for CONFIRM
        self.stop_asked = False
        self.selected = 0  # the crutch's selection among the possible motions
        self.speed = float(wearer.speed.default)
        self.step_length: float | None = None
        self.levels = {leg: wearer.level(leg) for leg in activities.legs}
        self.steps = 0  # strides walked in the session
        self._strides_seen = 0.0
        self.ended = False
        self.version = 0  # bumped on every change a display shows
        th = cycle.thermal  # °C: each motor's winding warning (∞: a motor with no thermal model)
        self._warning = np.where(th["c_w"] > 0.0, th["warning"], np.inf).tolist()
        self._slow = np.where(th["c_w"] > 0.0, th["slow"], np.inf).tolist()  # a walk slows
        self._joints = len(self._warning)
        self.slowest = float(min(wearer.speed.presets))  # m/s: the pace a warm walk keeps
        self.slowed = False  # this walk was slowed for a warm winding (asked once a walk)

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        """The session begins (the controller's first RUN cycle): the reference holds where
        the leg is (READY's reference: the measured posture), which is named if it is within
        a posture's tolerance."""
        qr = self.v[V_QR]
        self._hold(qr.copy())
        self.posture = self.activities.posture_of(qr)
        self._levels()
        self.v[V_LEVEL] = self.v[V_LEVEL_TO] = self.v[V_LEVEL_ASKED]  # (the profile's
        # levels from the first cycle)
        self.s["level_pending"], self.s["level_ramp"] = 0.0, 1.0
        walks = [m for m in self.activities.motions if m.kind == "walk"]
        if walks:  # (the legs' phase offsets, for assistance that follows the wearer)
            self.v[V_OFFSET] = walks[0].phase_offsets
        self.version += 1

    def _levels(self) -> None:
        """Each joint's assistance level (its leg's) into the cycle's level asked for."""
        joints = self.activities.joint_names
        self.v[V_LEVEL_ASKED] = [self.levels.get(leg_of(j), 0.0) for j in joints]

    # ------------------------------------------------------------------ requests
    def handle(self, req: Request, active: bool = True) -> Answer:
        """Answer one request by its kind's handler (:data:`HANDLERS`); an accepted one acts
        on the cycle data before the next cycle. ``active``: the controller runs a session
        (RUN) — else every request is refused. A kind without a handler is refused."""
        if not active:
            return self._no(req, rq.R_NOT_ACTIVE)
        handler = HANDLERS.get(req.kind)
        if handler is None:
            return self._no(req, rq.R_UNKNOWN_MOTION)
        return handler(self, req)

    def _start(self, req: Request) -> Answer:
        return self._start_motion(req, req.motion)

    def _go_release(self, req: Request) -> Answer:
        self.go_held = False
        self.go_block = False
        self.go_since = None
        if self.motion is not None and self.motion.hold_go:
            self.seg["seg_go"] = 0.0
        self.version += 1
        return self._yes(req)

    def _select(self, req: Request) -> Answer:
        """NEXT, PREV: the crutch's selection among the possible motions."""
        if self.motion is not None:
            return self._no(req, rq.R_NOT_SELECTABLE)
        n = len(self.possible())
        if n:
            self.selected = (self.selected + (1 if req.kind == rq.NEXT else -1)) % n
        self.version += 1
        return self._yes(req, motion=self.selected_motion())

    def _confirm(self, req: Request) -> Answer:
        if self.home_pending is None:
            return self._no(req, rq.R_NOTHING_TO_CONFIRM)
        if self.motion is not None:  # (a start began since: it cleared the HOME; this
            return self._no(req, rq.R_BUSY, motion=self.home_pending.name)  # is a guard)
        motion, self.home_pending = self.home_pending, None
        return self._begin(req, motion)

    def _end(self, req: Request) -> Answer:
        if self.motion is not None:
            return self._no(req, rq.R_NOT_IN_POSTURE)
        self.ended = True
        self.version += 1
        return self._yes(req)

    def _start_motion(self, req: Request, name: str | None) -> Answer:
        motion = self.activities.motion(name) if name is not None else None
        if motion is None:
            return self._no(req, rq.R_UNKNOWN_MOTION, motion=name)
        if self.motion is not None:
            return self._no(req, rq.R_BUSY, motion=name)
        if self.go_block:
            return self._no(req, rq.R_GO_HELD, motion=name)
        if motion.kind == "home":
            self.home_pending = motion
            self.version += 1
            return self._no(req, rq.R_NEEDS_CONFIRM, motion=name)
        if self.posture is None:
            return self._no(req, rq.R_ONLY_HOME, motion=name)
        if motion.start != self.posture:
            return self._no(req, rq.R_NOT_FROM_HERE, motion=name)
        if motion.kind == "walk" and (j := self.hot_joint()) is not None:
            return self._no(req, rq.R_WINDING_HOT, motion=name,
                            joint=self.activities.joint_names[j],
                            winding_C=round(float(self.cycle.winding[j]), 2),
                            warning_C=self._warning[j])
        return self._begin(req, motion)

    def _go(self, req: Request) -> Answer:
        """GO pressed: progress a motion that needs it; with none running, start the selected
        one (the crutch's way to start a motion)."""
        self.go_held = True
        if self.motion is not None:
            if self.motion.hold_go:
                self._go_pressed()
            self.version += 1
            return self._yes(req, motion=self.motion.name)
        if self.go_block:
            return self._no(req, rq.R_GO_HELD)
        name = self.selected_motion()
        if name is None:
            return self._no(req, rq.R_UNKNOWN_MOTION)
        return self._start_motion(req, name)

    def _stop(self, req: Request) -> Answer:
        m = self.motion
        if m is None:
            return self._no(req, rq.R_NOT_WALKING)
        if not m.stoppable:
            return self._no(req, rq.R_NOT_STOPPABLE, motion=m.name)
        if self.stop_asked:
            return self._no(req, rq.R_ALREADY, motion=m.name)
        self.stop_asked = True
        if m.kind == "walk":
            self.seg["stop_req"] = 1.0
            self.seg["next_pending"] = 0.0
        else:  # a move STOP may cut: it freezes where it is — no named posture then
            self.seg["seg_go"] = 0.0
        self.version += 1
        return self._yes(req, motion=m.name)

    def _walking_parameter(self, req: Request) -> Answer:
        w = self.wearer
        speed, step = self.speed, self.step_length
        if req.kind == rq.MODE:
            if self.motion is not None and self.motion.kind != "walk":
                return self._no(req, rq.R_NOT_SELECTABLE)
            presets = sorted(w.speed.presets)
            later = [p for p in presets if p > speed + 1e-9]
            speed = later[0] if later else presets[0]
        elif req.kind == rq.SPEED:
            speed = float(req.value) if req.value is not None else float("nan")
            if not w.speed.min <= speed <= w.speed.max:
                return self._no(req, rq.R_SPEED_RANGE, value=req.value)
        else:
            step = float(req.value) if req.value is not None else float("nan")
            if not w.step_length.min <= step <= w.step_length.max:
                return self._no(req, rq.R_STEP_RANGE, value=req.value)
        if speed > max(self.speed, self.slowest) + 1e-9 and (j := self.warm_joint()) is not None:
            return self._no(req, rq.R_WINDING_WARM, value=speed,
                            joint=self.activities.joint_names[j],
                            winding_C=round(float(self.cycle.winding[j]), 2),
                            slow_C=self._slow[j])
        walking = self.motion is not None and self.motion.kind == "walk"
        if walking and self.stop_asked:
            return self._no(req, rq.R_ALREADY)
        motion, walked = (self.motion, self.walked) if walking else (None, None)
        q_from = self.v[V_SEG_FROM].copy() if walking else None
        key = (speed, step, walked, motion and motion.name,
               None if q_from is None else q_from.tobytes())
        try:
            made = self.prepared.get(key, lambda: self._pace(speed, step, motion, walked,
                                                              q_from))
            if made is WAIT:
                return WAIT  # (asked again once made: nothing changed meanwhile)
            rows, period, stride, beyond = made
        except ValueError as e:
            return self._no(req, rq.R_STEP_RANGE if step is not None else rq.R_SPEED_RANGE,
                            value=req.value, why=str(e))
        if beyond is not None:
            return self._no(req, rq.R_BEYOND_JOINTS, value=req.value, why=str(beyond),
                            **beyond.extra())
        if speed > self.speed + 1e-9:
            self.slowed = False  # (faster again, once cooled: a warm winding slows it again)
        self.speed, self.step_length = speed, step
        if walking:  # from the next stride boundary, blended over the walk's speed_blend
            self.cycle.gaits[segment.SLOT_NEXT] = rows
            self._floor_steps(rows, stride, self.motion, opening=False)
            seg = self.seg
            seg["next_period"] = period
            seg["next_blend"] = self.motion.speed_blend(float(seg["b_period"]), period)
            seg["next_pending"] = 1.0
        self.version += 1
        return self._yes(req, speed=speed, period=period, stride=stride)

    def _level(self, req: Request) -> Answer:
        value = req.value if req.value is not None else float("nan")
        if not 0.0 <= value <= 1.0:
            return self._no(req, rq.R_LEVEL_RANGE, value=req.value)
        for leg in req.legs or tuple(self.levels):
            self.levels[leg] = float(value)
        self._levels()
        self.s["level_pending"] = 1.0  # (the cycle applies it at the next stride boundary)
        self.version += 1
        return self._yes(req, level=float(value))

    # ------------------------------------------------------------------ segments
    def _beyond(self, motion):
        """What ``motion`` begun now from the reference would ask beyond the joints (an
        :class:`~exo_rt.session.envelope.Beyond`), or None."""
        env = self.envelope
        if env is None:
            return None
        if motion.kind == "walk":
            return env.walk(motion, self.v[V_QR], self.activities.posture_q(motion.end),
                            self.speed, self.step_length)
        duration = self.activities.move_duration(motion, self.v[V_QR])
        return env.move(motion.name, self.v[V_QR], self.activities.posture_q(motion.end),
                        duration, motion.hold_go)

    def _pace(self, speed: float, step: float | None, motion, walked, q_from):
        """What a new pace needs (:attr:`prepared`'s work: in the cycle, or beside it — so
        it reads only its arguments and what never changes): its gait (rows, period s,
        stride m), what would be beyond the joints (:meth:`_walks_beyond`), and for the walk
        ``motion`` running (walking ``walked`` from ``q_from``) the floor steps its next
        stride takes (made here, kept by the gait function for :meth:`_floor_steps`)."""
        env = self._beside or self.envelope
        rows, period, stride = self.gaits(speed, step)
        beyond = self._walks_beyond(env, speed, step, motion, walked)
        if motion is not None and beyond is None:
            self.gaits.steps(rows, stride, motion, q_from, self.activities.posture_q(motion.end))
        return rows, period, stride, beyond

    def _walks_beyond(self, env, speed: float, step: float | None, motion, walked):
        """The walk ``motion`` running (blended from ``walked``, what it walks now), or with
        none every walk of the activities from its start posture, at ``speed`` and ``step``:
        what would be beyond the joints of ``env``'s bounds, or None."""
        if env is None:
            return None
        if motion is not None:  # (blended from the gait walked now: a change still waiting
            m = motion  # is replaced)
            return env.walk(m, self.activities.posture_q(m.start),
                            self.activities.posture_q(m.end), speed, step, old=walked)
        for m in self.activities.motions:
            if m.kind == "walk":
                found = env.walk(m, self.activities.posture_q(m.start),
                                 self.activities.posture_q(m.end), speed, step)
                if found is not None:
                    return found
        return None

    def _begin(self, req: Request, motion) -> Answer:
        """Start ``motion`` from the reference the last cycle tracked — once it is known to
        keep within the joints (else refused ``beyond_joints``)."""
        try:
            beyond = self._beyond(motion)
        except ValueError as e:  # (the walk cannot be made at this speed and step)
            return self._no(req, rq.R_BEYOND_JOINTS, motion=motion.name, why=str(e))
        if beyond is not None:
            return self._no(req, rq.R_BEYOND_JOINTS, motion=motion.name, why=str(beyond),
                            **beyond.extra())
        self.home_pending = None  # (any motion that begins clears a HOME waiting)
        s, seg, v = self.s, self.seg, self.v
        v[V_SEG_FROM] = v[V_QR]
        v[V_SEG_TO] = self.activities.posture_q(motion.end)
        go = 1.0 if not motion.hold_go else 0.0  # (GO-held: moves once GO is debounced)
        seg["seg_go"] = seg["seg_rate"] = go
        seg["seg_rate_dot"] = 0.0
        seg["seg_slew"] = segment.GO_OMEGA
        seg["seg_done"] = 0.0
        seg["stop_req"] = seg["next_pending"] = seg["closing"] = 0.0
        extra = {}
        if motion.kind == "walk":
            rows, period, stride = self.gaits(self.speed, self.step_length)
            self.walked = (self.speed, self.step_length)
            self.slowed = False  # (a new walk: a warm winding slows it once)
            g = self.cycle.gaits
            g[segment.SLOT_A] = rows
            g[segment.SLOT_B] = rows
            v[V_OFFSET] = motion.phase_offsets
            s["phase"] = seg["stride"] = 0.0
            seg["a_kind"], seg["b_kind"] = segment.POSTURE, segment.GAIT_SOURCE
            seg["a_period"] = seg["b_period"] = seg["next_period"] = period
            seg["blend_start"], seg["blend_len"] = 0.0, motion.opening
            seg["closing_len"] = motion.closing
            self._floor_steps(rows, stride, motion, opening=True)
            seg["seg_kind"] = segment.GAIT
            extra = dict(speed=self.speed, period=period, stride=stride)
        else:
            seg["seg_tau"] = 0.0
            seg["seg_duration"] = self.activities.move_duration(motion, v[V_SEG_FROM])
            seg["seg_kind"] = segment.MOVE
            extra = dict(duration=float(seg["seg_duration"]))
        seg["stride"] = self._strides_seen = 0.0  # (strides: the segment's own count)
        self.motion, self.posture, self.stop_asked = motion, None, False
        self.frozen_since = None
        if motion.hold_go and self.go_held:
            self._go_pressed()
        self.version += 1
        return self._yes(req, motion=motion.name, **extra)

    def _floor_steps(self, rows, stride: float, motion, opening: bool) -> None:
        """The walk's floor steps (the gait function's ``steps``): a walk begun gets its
        opening step's correction and its closing steps' (``opening``; its blend's sides then
        segment.POSTURE_STEP and GAIT_STEPS), a new gait its closing steps' in the slots taken
        with it at the boundary; none: the plain blends."""
        seg, g = self.seg, self.cycle.gaits
        steps = self.gaits.steps(rows, stride, motion, self.v[V_SEG_FROM],
                                 self.activities.posture_q(motion.end))
        if opening and steps:
            seg["a_kind"], seg["b_kind"] = segment.POSTURE_STEP, segment.GAIT_STEPS
            for slot, r in steps.items():
                g[slot] = r
        elif not opening and steps and seg["b_kind"] == segment.GAIT_STEPS:
            g[segment.SLOT_NEXT_CLOSE] = steps[segment.SLOT_CLOSE]
            g[segment.SLOT_NEXT_CLOSE_HALF] = steps[segment.SLOT_CLOSE_HALF]

    def _go_pressed(self) -> None:
        """GO held for a GO-held motion: it moves once held ``go_debounce`` (at once when
        none is declared)."""
        if self.go_since is None:
            self.go_since = self.k
        if self.k - self.go_since >= self.debounce:
            self.seg["seg_go"] = 1.0

    def _hold(self, q: np.ndarray) -> None:
        self.v[V_SEG_TO] = q
        self.seg["seg_kind"] = segment.HOLD
        self.seg["seg_done"] = 0.0

    # ------------------------------------------------------------------ heat
    def hot_joint(self) -> int | None:
        """The first joint whose motor's winding is past its warning level now (the cycle's
        thermal model, :mod:`exo_rt.actuators.thermal`), else None. Past it the joint's current
        limit derates: a walk asked then is refused (``winding_hot``) until it has cooled."""
        w = self.cycle.winding
        for j, warning in enumerate(self._warning):
            if w[j] > warning:
                return j
        return None

    def warm_joint(self) -> int | None:
        """The first joint whose motor's winding is past the level at which a walk slows
        (``safety.thermal.slow_walk``) now, else None: faster speeds are refused
        (``winding_warm``) until it has cooled."""
        w = self.cycle.winding
        for j, slow in enumerate(self._slow):
            if w[j] > slow:
                return j
        return None

    def walk_heat(self, k: int) -> int:
        """Each cycle while walking, one joint in turn (cycle ``k``'s, k mod n: two
        comparisons), what its winding asks of the session: :data:`HEAT_STOP` — past its
        warning, no STOP asked yet: the session STOPs the walk (its closing step) rather than
        walk on derated drives, whose tracking would fail more each stride until SAFE stopped
        them under the wearer; :data:`HEAT_SLOW` — past the level at which a walk slows, the
        walk faster than the wearer's slowest preset and not slowed yet: the session asks
        that preset (from the next stride boundary; a slower walk asks less current, so the
        winding warms more slowly); else :data:`HEAT_NONE`."""
        if self.motion is None or self.stop_asked or self.motion.kind != "walk":
            return HEAT_NONE
        j = k % self._joints
        tw = self.cycle.winding[j]
        if tw > self._warning[j]:
            return HEAT_STOP
        if tw > self._slow[j] and not self.slowed and self.speed > self.slowest + 1e-9:
            return HEAT_SLOW
        return HEAT_NONE

    # ------------------------------------------------------------------ each cycle
    def after_cycle(self) -> Answer | None:
        """What the cycle just did, seen from the machine: strides walked (counted), a motion
        that has ended (its FINISHED answer, the end posture reached). Cheap when nothing
        happened: two scalar reads."""
        s, seg = self.s, self.seg
        self.k = k = int(s["k"])
        if self.motion is None:
            return None
        if self.motion.hold_go:
            if self.go_held and seg["seg_go"] == 0.0 and not self.stop_asked:
                self._go_pressed()  # (the debounce's end)
            if seg["seg_rate"] == 0.0 and seg["seg_go"] == 0.0 and not self.stop_asked:
                if self.frozen_since is None:
                    self.frozen_since = k
                elif (k - self.frozen_since) * self.dt >= self.motion.frozen_timeout:
                    return self._unfreeze()
            else:
                self.frozen_since = None
        strides = seg["stride"]
        if strides != self._strides_seen:
            if seg["next_pending"] == 0.0:  # (a change asked has begun at this boundary)
                self.walked = (self.speed, self.step_length)
            self.steps += int(strides - self._strides_seen)
            self._strides_seen = strides
            self.version += 1
        if seg["seg_done"]:
            m = self.motion
            self.motion = None
            self.posture = m.end
            seg["seg_done"] = 0.0
            if self.go_held:
                self.go_block = True
            self.selected = 0
            self.version += 1
            return Answer(rq.FINISHED, rq.START, motion=m.name, posture=m.end)
        if self.stop_asked and m_frozen(seg, self.motion):  # a cut move, frozen: no posture
            m = self.motion
            self.motion = None
            self._hold(self.v[V_QR].copy())
            self.version += 1
            return Answer(rq.FINISHED, rq.STOP, motion=m.name, posture=None)
        return None

    def _unfreeze(self) -> Answer:
        """A GO-held move frozen past its ``frozen_timeout``: ended by a move of its own to
        its start posture (``on_frozen: return``) or its end (``finish``), no GO needed."""
        m = self.motion
        target = m.start if m.on_frozen == "return" and m.start is not None else m.end
        qr = self.v[V_QR]
        if self.activities.posture_of(qr) == target:
            # it never moved (GO never pressed), or not out of the posture: there already. A
            # move of no length would be refused as beyond the joints (minimum jerk's peak
            # acceleration 5.77·Δ/T² with T from the speed bound grows as Δ shrinks) or, at
            # none, divide by its zero duration
            self.motion = None
            self.posture = target
            self._hold(qr.copy())
            self.selected = 0
            self.version += 1
            return Answer(rq.FINISHED, rq.START, motion=m.name, posture=target,
                          extra={"frozen": round(m.frozen_timeout, 3)})
        ending = dataclasses.replace(m, start=None, end=target, hold_go=False,
                                     stoppable=False, duration=None,
                                     max_speed=m.max_speed or HOME_CEILING)
        self.motion = None
        ans = self._begin(Request(rq.START, rq.SESSION, motion=m.name), ending)
        if ans.answer != rq.ACCEPTED:  # (cannot be: it goes back the way it came, slower)
            self.motion = m
            self.frozen_since = self.k
            return ans
        return Answer(rq.ACCEPTED, rq.START, motion=m.name,
                      extra={"frozen": round(m.frozen_timeout, 3), "to": target})

    def end_frozen(self) -> None:
        """End a frozen GO-held move now rather than at its ``frozen_timeout`` (the run's time
        is up, or the session's code failed): its ``on_frozen`` move begins next cycle."""
        m = self.motion
        if m is not None and m.hold_go and self.seg["seg_go"] == 0.0 and not self.stop_asked:
            self.motion = dataclasses.replace(m, frozen_timeout=0.0)

    def freeze(self) -> None:
        """Freeze whatever moves, smoothly (the run's last resort before STOPPING): progress
        slewed to zero whatever GO says."""
        self.seg["seg_go"] = 0.0
        self.go_held = False

    def frozen(self) -> bool:
        """The reference is still (a posture held, or a segment whose progress is zero)."""
        seg = self.seg
        return self.motion is None or (seg["seg_rate"] == 0.0 and seg["seg_rate_dot"] == 0.0)

    # ------------------------------------------------------------------ what may be asked
    def possible(self) -> list[str]:
        """The motions that may start now (the crutch's menu)."""
        if self.motion is not None:
            return []
        return list(self.activities.possible(self.posture))

    def selected_motion(self) -> str | None:
        p = self.possible()
        return p[self.selected % len(p)] if p else None

    def status(self) -> dict:
        """What a display shows (the console, the crutch's menu)."""
        return {"posture": self.posture, "motion": self.motion.name if self.motion else None,
                "possible": self.possible(), "selected": self.selected_motion(),
                "steps": self.steps, "speed": self.speed, "levels": dict(self.levels),
                "go": self.go_held, "home_pending": self.home_pending is not None}

    @staticmethod
    def _yes(req: Request, motion: str | None = None, **extra) -> Answer:
        return Answer(rq.ACCEPTED, req.kind, motion=motion or req.motion, extra=extra)

    @staticmethod
    def _no(req: Request, reason: int, motion: str | None = None, **extra) -> Answer:
        return Answer(rq.REJECTED, req.kind, reason, motion=motion or req.motion,
                      extra={k: v for k, v in extra.items() if v is not None})


# request kind (firmware_bridge.requests.KINDS) → the machine's handler: how each is answered
# (docs/architecture.md, "Recipes": adding a request kind adds its entry here)
HANDLERS: dict[int, Callable[[ActivityMachine, Request], Answer]] = {
    rq.START: ActivityMachine._start,
    rq.GO: ActivityMachine._go,
    rq.GO_RELEASE: ActivityMachine._go_release,
    rq.STOP: ActivityMachine._stop,
    rq.SPEED: ActivityMachine._walking_parameter,
    rq.STEP_LENGTH: ActivityMachine._walking_parameter,
    rq.MODE: ActivityMachine._walking_parameter,
    rq.LEVEL: ActivityMachine._level,
    rq.NEXT: ActivityMachine._select,
    rq.PREV: ActivityMachine._select,
    rq.CONFIRM: ActivityMachine._confirm,
    rq.END: ActivityMachine._end,
}


def m_frozen(seg, motion) -> bool:
    """A move cut by STOP has stopped progressing (its rate slewed to 0; ``seg``: the
    segment record)."""
    return motion.kind != "walk" and seg["seg_rate"] == 0.0 and seg["seg_go"] == 0.0
