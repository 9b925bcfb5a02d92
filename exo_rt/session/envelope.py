"""What each motion asks of the joints, checked against the bounds the cycle's reference
governor holds to (:mod:`exo_rt.cycle.governor`): the range (the soft limits, narrowed to
the wearer's range of motion), the largest speed and the largest acceleration of q_r.

A motion is checked before it can begin — at load (each posture, move, homing, and each walk
at the wearer's default, preset and extreme speeds) and at every request that changes it
(a walk's speed or step length) — and one that would exceed a bound is refused with the
reason :data:`firmware_bridge.requests.R_BEYOND_JOINTS`, naming the joint, the figure and the
bound. The figures are the cycle's own: a walk is traced by the compiled segment itself
(:func:`trace`: the opening step, two strides, the closing step from either half-stride
boundary, every cycle), a move by the closed forms of a minimum-jerk move (Flash & Hogan 1985:
peak speed 15/8·Δq/T, peak acceleration 10/√3·Δq/T²) plus what the GO filter adds
(:data:`exo_rt.cycle.segment.GO_OMEGA`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exo_rt.control import trajectory
from exo_rt.cycle import segment
from exo_rt.cycle.layout import SCALARS, SEGMENT, V_QDDR, V_QDR, V_QR, V_SEG_FROM, V_SEG_TO, V_WIDTH
from exo_rt.jit import njit
from exo_rt.session.activities import PEAK  # a minimum-jerk move's peak speed, per Δq/T

PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)  # … and its peak acceleration, per Δq/T²
GO_RATE_PEAK = segment.GO_OMEGA / math.e  # 1/s: the fastest change of the progress rate
# trace rows
T_SPEED, T_ACCEL, T_LOW, T_HIGH = range(4)


@njit(cache=True, nogil=True)  # (made beside the cycle too: the loop keeps the GIL)
def trace(s_arr, seg_arr, v, gaits, offsets, dt, cycles, stop_phase, out):
    """Run the segment in ``seg_arr``/``v``/``gaits``, its phase in ``s_arr`` (scratch
    copies: a cycle's layout) for
    at most ``cycles`` cycles, asking the closing step once the phase passes ``stop_phase``
    (strides; < 0: never), and keep per joint in ``out`` (4, n) the largest |q̇_r|, the
    largest |q̈_r| (and |Δq̇_r|/dt), the lowest and highest q_r. Returns the cycles run until
    the segment ended (its ``seg_done``)."""
    s, seg = s_arr[0], seg_arr[0]
    n = v.shape[1]
    for j in range(n):
        out[T_SPEED, j] = abs(v[V_QDR, j])
        out[T_ACCEL, j] = 0.0
        out[T_LOW, j] = v[V_QR, j]
        out[T_HIGH, j] = v[V_QR, j]
    asked = False
    prev = np.empty(n)
    for k in range(cycles):
        if stop_phase >= 0.0 and not asked and s.phase >= stop_phase:
            seg.stop_req = 1.0
            seg.next_pending = 0.0
            asked = True
        for j in range(n):
            prev[j] = v[V_QDR, j]
        segment.reference(s, seg, v, gaits, offsets, dt)
        for j in range(n):
            q, qd, qdd = v[V_QR, j], v[V_QDR, j], v[V_QDDR, j]
            if not (math.isfinite(q) and math.isfinite(qd) and math.isfinite(qdd)):
                out[T_SPEED, j] = np.inf  # (beyond every bound)
                return k + 1
            out[T_SPEED, j] = max(out[T_SPEED, j], abs(qd))
            out[T_ACCEL, j] = max(out[T_ACCEL, j], abs(qdd), abs(qd - prev[j]) / dt)
            out[T_LOW, j] = min(out[T_LOW, j], q)
            out[T_HIGH, j] = max(out[T_HIGH, j], q)
        if seg.seg_done:
            return k + 1
    return cycles


@dataclass(frozen=True)
class Beyond:
    """A motion beyond a joint: ``joint`` needs ``value`` of ``what`` (speed, acceleration,
    range), its bound being ``limit`` (SI units)."""

    motion: str
    joint: str
    what: str
    value: float
    limit: float
    unit: str

    def __str__(self) -> str:
        if self.what == "range":
            return (f"{self.motion}: {self.joint} reaches {self.value:.3g} {self.unit}, outside "
                    f"its range (bound {self.limit:.3g} {self.unit})")
        return (f"{self.motion}: {self.joint} needs {self.value:.3g} {self.unit} of "
                f"{self.what}, above its {self.limit:.3g} {self.unit}")

    def extra(self) -> dict:
        """The answer's details (the crutch and console show them)."""
        return {"joint": self.joint, "what": self.what, "needs": round(self.value, 4),
                "limit": round(self.limit, 4)}


class Envelope:
    """The bounds of one run's reference (``lo``, ``hi`` rad, ``vel`` rad/s, ``acc`` rad/s²,
    (n,) each, the governor's: :func:`exo_rt.cycle.governor.set_bounds` and ``narrow``),
    and the checks of the activities' motions against them. ``gaits``: (speed, step length)
    → (Fourier rows, period s, stride m) as the activity machine's; ``dt``: the period (s)."""

    def __init__(self, joint_names, lo, hi, vel, acc, dt: float, gaits) -> None:
        self.joints = tuple(joint_names)
        self.lo, self.hi = np.asarray(lo, float), np.asarray(hi, float)
        self.vel, self.acc = np.asarray(vel, float), np.asarray(acc, float)
        self.dt, self.gaits = float(dt), gaits
        n = len(self.joints)
        self._s = np.zeros(1, SCALARS)
        self._seg = np.zeros(1, SEGMENT)
        self._v = np.zeros((V_WIDTH, n))
        self._g = np.zeros((segment.SLOTS, n, 1 + 2 * trajectory.MAX_HARMONICS))
        self._out = np.zeros((4, n))
        self._one = (np.zeros(1), np.zeros(1), np.zeros(1))  # (one joint's q, q̇, q̈)
        self._walks: dict = {}
        self.peaks: dict[str, np.ndarray] = {}  # motion → the (4, n) figures of its last check

    def fork(self) -> Envelope:
        """The same bounds and gaits with scratch of its own, for checks made beside the
        cycle (:mod:`exo_rt.session.prepare`): the walks checked are kept in one memo, so a
        check made there is found here."""
        other = Envelope(self.joints, self.lo, self.hi, self.vel, self.acc, self.dt,
                         self.gaits)
        other._walks, other.peaks = self._walks, self.peaks
        return other

    @classmethod
    def of_cycle(cls, cycle, joint_names, gaits) -> Envelope:
        """The envelope of a cycle's governor bounds (after the wearer's range narrowed them)."""
        return cls.of_bounds(cycle.v, joint_names, float(cycle.p["dt"]), gaits)

    @classmethod
    def of_bounds(cls, v, joint_names, dt: float, gaits) -> Envelope:
        """The envelope of the governor's bounds in the joint vectors ``v`` (its V_GOV_ rows)."""
        from exo_rt.cycle.layout import V_GOV_ACC, V_GOV_HI, V_GOV_LO, V_GOV_VEL

        return cls(joint_names, v[V_GOV_LO].copy(), v[V_GOV_HI].copy(), v[V_GOV_VEL].copy(),
                   v[V_GOV_ACC].copy(), dt, gaits)

    # ------------------------------------------------------------------ the checks
    def figures(self, name: str, out: np.ndarray) -> Beyond | None:
        """The first bound ``out`` (4, n: speed, acceleration, low, high) exceeds, or None."""
        self.peaks[name] = out.copy()
        eps = 1e-9
        out = np.where(np.isfinite(out), out, np.inf)  # (NaN: beyond every bound)
        for j, joint in enumerate(self.joints):
            if out[T_LOW, j] < self.lo[j] - eps:
                return Beyond(name, joint, "range", out[T_LOW, j], self.lo[j], "rad")
            if out[T_HIGH, j] > self.hi[j] + eps:
                return Beyond(name, joint, "range", out[T_HIGH, j], self.hi[j], "rad")
            if out[T_SPEED, j] > self.vel[j] * (1 + eps):
                return Beyond(name, joint, "speed", out[T_SPEED, j], self.vel[j], "rad/s")
            if out[T_ACCEL, j] > self.acc[j] * (1 + eps):
                return Beyond(name, joint, "acceleration", out[T_ACCEL, j], self.acc[j],
                              "rad/s²")
        return None

    def posture(self, name: str, q) -> Beyond | None:
        """A posture (rad, (n,)) inside the range."""
        q = np.asarray(q, float)
        return self.figures(name, np.array([np.zeros_like(q), np.zeros_like(q), q, q]))

    def move(self, name: str, q_from, q_to, duration: float, hold_go: bool) -> Beyond | None:
        """A minimum-jerk move (rad, (n,) each; ``duration`` s at full rate): its peak speed
        and acceleration in closed form, the GO filter's part where GO drives it."""
        delta = np.abs(np.asarray(q_to, float) - np.asarray(q_from, float))
        t = max(float(duration), 1e-9)
        speed = PEAK * delta / t
        accel = PEAK_ACCELERATION * delta / t**2 + (GO_RATE_PEAK * speed if hold_go else 0.0)
        lo = np.minimum(q_from, q_to)
        hi = np.maximum(q_from, q_to)
        return self.figures(name, np.array([speed, accel, lo, hi]))

    def walk(self, motion, q_from, q_to, speed: float, step: float | None,
             old: tuple | None = None) -> Beyond | None:
        """A walk at ``speed`` (m/s) and ``step`` length (m; None: the wearer's walk ratio),
        from posture ``q_from`` to ``q_to`` (rad): its opening step, two strides and its
        closing step from either half-stride boundary, traced by the cycle's own segment;
        with ``old`` ((speed, step) walked now), the blend from that walk into this one too
        (over the walk's ``speed_blend`` strides; a plain blend also with a STOP in it, which
        closes from the blend's mix).
        ValueError from ``gaits`` where the walk cannot be made at all."""
        key = (motion.name, speed, step, old, motion.opening, motion.closing)
        if key in self._walks:
            found, worst = self._walks[key]
            self.peaks[motion.name] = worst
            return found
        rows, period, stride = self.gaits(speed, step)
        steps = self.gaits.steps(rows, stride, motion, q_from, q_to)
        worst = np.zeros((4, len(self.joints)))
        worst[T_LOW] = np.inf
        worst[T_HIGH] = -np.inf
        runs = [(stop, None) for stop in (1.2, 1.7)]
        if old is not None:
            before = self.gaits(*old)
            runs.append((-1.0, before))
            if not steps:  # a STOP closes from a plain blend's mix (segment._mix): asked
                # early, half-way and late in the blend (from its half-stride boundaries)
                blend = motion.speed_blend(before[1], period)
                runs += [(stop, before) for stop in sorted({1.2, 0.5 * blend + 0.2,
                                                            blend - 0.8})]
        for stop, before in runs:
            out = self._trace(motion, rows, period, q_from, q_to, stop, before, steps)
            worst[:2] = np.maximum(worst[:2], out[:2])
            worst[T_LOW] = np.minimum(worst[T_LOW], out[T_LOW])
            worst[T_HIGH] = np.maximum(worst[T_HIGH], out[T_HIGH])
        found = self.figures(motion.name, worst)
        self._walks[key] = (found, worst)
        return found

    def _trace(self, motion, rows, period, q_from, q_to, stop, before, steps=None
               ) -> np.ndarray:
        """One trace of a walk (as the activity machine begins it, with its floor ``steps``:
        {gaits slot: rows} or None) or, with ``before`` (the Fourier rows, period and stride
        walked now), of the blend from it into ``rows``."""
        s, seg, v, g = self._s, self._seg, self._v, self._g
        s[:] = 0
        seg[:] = 0
        v[:] = 0.0
        g[:] = 0.0
        sg = seg[0]
        sg["seg_go"] = sg["seg_rate"] = 1.0
        sg["seg_slew"] = segment.GO_OMEGA
        sg["seg_kind"] = segment.GAIT
        sg["closing_len"] = motion.closing
        v[V_SEG_FROM], v[V_SEG_TO] = q_from, q_to
        k = rows.shape[1]
        blend = 0.0 if before is None else motion.speed_blend(before[1], period)
        if before is None:
            g[segment.SLOT_A, :, :k] = rows
            g[segment.SLOT_B, :, :k] = rows
            sg["a_kind"], sg["b_kind"] = segment.POSTURE, segment.GAIT_SOURCE
            sg["a_period"] = sg["b_period"] = sg["next_period"] = period
            sg["blend_len"] = motion.opening
            v[V_QR] = q_from
            if steps:
                sg["a_kind"], sg["b_kind"] = segment.POSTURE_STEP, segment.GAIT_STEPS
                for slot, r in steps.items():
                    g[slot, :, :r.shape[1]] = r
        else:  # the walk now at its stride boundary, the new one blended in (the walk's
            b_rows, b_period, _ = before  # speed_blend strides)
            g[segment.SLOT_A, :, :k] = b_rows
            g[segment.SLOT_B, :, :k] = rows
            sg["a_kind"] = sg["b_kind"] = segment.GAIT_SOURCE
            sg["a_period"], sg["b_period"] = b_period, period
            sg["blend_len"] = blend
            self._start_on_gait(b_rows, b_period, motion.phase_offsets)
        cycles = int(math.ceil((3.0 + motion.opening + motion.closing + blend)
                               * max(period, before[1] if before else 0.0) / self.dt)) + 10
        trace(s, seg, v, g, np.array(motion.phase_offsets, float), self.dt, cycles, stop,
              self._out)
        return self._out.copy()

    def _start_on_gait(self, rows, period, offsets) -> None:
        """The scratch reference on a gait at phase 0 (where a blend begins: a boundary),
        each joint at its phase offset (:func:`exo_rt.control.trajectory.gait`)."""
        v, one = self._v, self._one
        for j in range(len(self.joints)):
            trajectory.gait(offsets[j], period, rows[j:j + 1], *one)
            v[V_QR, j], v[V_QDR, j] = one[0][0], one[1][0]


def _where(path: str, *keys: str):
    """The place of a key path in a YAML file (its line), for an error; the file alone when
    it cannot be read or has no such key."""
    from exo_rt.errors import ConfigError, Where
    from exo_rt.yamlio import read_yaml

    if not path:
        return Where("<the robot file's wearer section>")
    try:
        from pathlib import Path

        node = read_yaml(Path(path), ConfigError)
        for k in keys:
            node = node.value[k]
        return node.where()
    except (ConfigError, KeyError, TypeError, AttributeError, OSError):
        return Where(str(path))


def walk_speeds(wearer) -> list[float]:
    """The speeds a wearer's walks are checked at when loaded (m/s): the default, the
    presets and both ends of the range, at the walk ratio's step length."""
    sp = wearer.speed
    return sorted({float(sp.default), float(sp.min), float(sp.max), *map(float, sp.presets)})


def check_at_load(env: Envelope, activities, wearer) -> None:
    """Every move of ``activities`` between its postures, and every walk at each of the
    wearer's :func:`walk_speeds`, within ``env``'s bounds — else ConfigError naming the file
    and line at fault: the motion in the activities file (a move, or a walk that is beyond
    at the wearer's default speed: its opening or closing step), or the wearer's speed key
    (a walk beyond only at that speed)."""
    from exo_rt.errors import ConfigError

    act = activities
    for m in act.motions:
        if m.kind == "move":
            found = env.move(m.name, act.posture_q(m.start), act.posture_q(m.end),
                             m.duration, m.hold_go)
            if found is not None:
                raise ConfigError(str(found), _where(act.source, "motions", m.name),
                                  "make it slower (a longer duration or a lower max_speed)")
            continue
        if m.kind != "walk":
            continue
        default = float(wearer.speed.default)  # (first: beyond there, the motion is at fault)
        for speed in [default] + [x for x in walk_speeds(wearer) if x != default]:
            try:
                found = env.walk(m, act.posture_q(m.start), act.posture_q(m.end), speed, None)
            except ValueError as e:
                raise ConfigError(f"walk '{m.name}' at {speed:g} m/s: {e}",
                                  _where(wearer.source, "speed"),
                                  "narrow the speed range") from None
            if found is None:
                continue
            if speed == default:
                raise ConfigError(
                    f"{found} (walking at the wearer's default {speed:g} m/s)",
                    _where(act.source, "motions", m.name),
                    "lengthen its opening and closing steps (strides), or lower the wearer's "
                    "default speed")
            key = "max" if speed == float(wearer.speed.max) else (
                "min" if speed == float(wearer.speed.min) else "presets")
            raise ConfigError(f"{found} (walking at {speed:g} m/s, the wearer's speed.{key})",
                              _where(wearer.source, "speed", key),
                              "give speeds the joints can follow (exo-rt check prints each "
                              "walk's peaks against the bounds)")
        # a speed asked mid-walk starts its check's trace on the walk now: that kernel
        # loaded here, not on the first such request (inside the cycle, tens of ms)
        rows, period, stride = env.gaits(default, None)
        if m.stride_change > 0.0 and env.gaits.steps(
                rows, stride, m, act.posture_q(m.start), act.posture_q(m.end)) is not None:
            _long_blend_with_floor_steps(env, act, m, wearer)
        env._start_on_gait(rows, period, m.phase_offsets)


def _long_blend_with_floor_steps(env: Envelope, act, m, wearer) -> None:
    """ConfigError at a walk's ``stride_change`` when the walk steps on the floor with both
    legs (the flat-foot gait's floor steps, made for one gait): a STOP asked in a speed
    change's blend cannot close from the blend's mix there and waits for the blend's end —
    with the key, as many strides as the slowest change between the wearer's speeds asks
    (:meth:`Motion.speed_blend`), where without it two. None for a wearer of one speed."""
    from exo_rt.errors import ConfigError

    periods = {s: env.gaits(s, None)[1] for s in walk_speeds(wearer)}
    if len(periods) < 2:
        return  # (one speed: no speed change to blend)
    longest, a, b = max((m.speed_blend(periods[a], periods[b]), a, b)
                        for a in periods for b in periods if a != b)
    raise ConfigError(
        f"walk '{m.name}': stride_change {m.stride_change:g} on a walk whose steps are made "
        f"on the floor for both legs: a STOP asked in a speed change's blend waits for its "
        f"end, and {a:g} → {b:g} m/s would blend over {longest:g} strides "
        f"({longest * max(periods[a], periods[b]):.0f} s) before the closing step could begin",
        _where(act.source, "motions", m.name, "stride_change"),
        "leave stride_change out (a speed change then blends over two strides): it is for a "
        "one-leg exoskeleton's walk, whose STOP closes from the blend's mix")


def report(env: Envelope, activities, wearer) -> list[str]:
    """``exo-rt check``'s lines: each motion's peak |q̇| and |q̈| per joint against the
    bounds (walks at each of the wearer's :func:`walk_speeds`)."""
    act = activities
    lines = []

    def line(name: str, label: str) -> None:
        out = env.peaks[name]
        cells = [f"{j} {out[T_SPEED, i]:.2f}/{env.vel[i]:.2f} rad/s "
                 f"{out[T_ACCEL, i]:.1f}/{env.acc[i]:.1f} rad/s²"
                 for i, j in enumerate(env.joints)]
        lines.append(f"  {label:<22} " + ", ".join(cells))

    for m in act.motions:
        if m.kind == "move":
            env.move(m.name, act.posture_q(m.start), act.posture_q(m.end), m.duration,
                     m.hold_go)
            line(m.name, m.name)
        elif m.kind == "home":
            far = np.maximum(np.abs(act.posture_q(m.end) - env.lo),
                             np.abs(env.hi - act.posture_q(m.end)))
            t = max(m.duration or 0.0, PEAK * float(far.max()) / m.max_speed)
            env.move(m.name, act.posture_q(m.end) - far, act.posture_q(m.end), t, m.hold_go)
            line(m.name, f"{m.name} (from afar)")
        else:
            for speed in walk_speeds(wearer):
                env.walk(m, act.posture_q(m.start), act.posture_q(m.end), speed, None)
                line(m.name, f"{m.name} @ {speed:g} m/s")
    return lines


def warm_up() -> None:
    """Compile (or load) :func:`trace` on throw-away data of the layout a session uses, and
    the gait's reference at one phase as :meth:`Envelope._start_on_gait` calls it (a row of
    a gait's rows: :func:`check_at_load` runs it)."""
    seg = np.zeros(1, SEGMENT)
    seg[0]["seg_kind"] = segment.HOLD
    trace(np.zeros(1, SCALARS), seg, np.zeros((V_WIDTH, 1)), np.zeros((segment.SLOTS, 1, 11)),
          np.zeros(1), 1e-3, 1, -1.0, np.zeros((4, 1)))
    rows = np.zeros((2, 1 + 2 * trajectory.MAX_HARMONICS))
    trajectory.gait(0.0, 1.0, rows[0:1], np.zeros(1), np.zeros(1), np.zeros(1))


def for_top(top, wearer, gaits) -> Envelope:
    """The envelope a run of the top config ``top`` would have with ``wearer`` (the cycle's
    governor bounds, computed without building the cycle): ``exo-rt check``'s."""
    from exo_rt.cycle import governor, safety

    robot, sc = top.robot, top.safety
    limits = safety.limits_array(robot, sc.joint_margin, sc.tracking_error,
                                 top.controller.current_limit)
    v = np.zeros((V_WIDTH, robot.nq))  # (the rows a cycle's build and session fill: the same)
    governor.set_bounds(v, limits, sc.reference_speed,
                        governor.accelerations(robot.joint_names, sc.reference_acceleration))
    governor.narrow(v, *wearer.joint_range(robot))
    return Envelope.of_bounds(v, robot.joint_names, 1.0 / top.rate_hz, gaits)
