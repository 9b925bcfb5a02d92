"""Walking parameters: the normal-gait reference as a function of walking speed and body height.

The gait's shape is the normal-gait Fourier fit of :mod:`exo_rt.control.trajectory`; a walk at
a given speed sets its two free parameters, the stride period and the amplitude (the scale of
the excursion about the mean), in two steps:

1. **Cadence and step length** (:func:`cadence_and_step`): speed = step length × cadence, and
   healthy adults keep the *walk ratio* WR = step length / cadence nearly constant over their
   speeds (Sekiya & Nagasaki 1998); WR scales with body height H (step lengths do), so
   WR = :data:`WALK_RATIO_PER_HEIGHT` × H and cadence = √(60·v / WR) steps/min. For 1.75 m
   at 0.4 m/s: WR 0.0065 m/(steps/min), 60.9 steps/min, a stride period of 1.97 s — the
   shipped slow rehabilitation pace (2 s). A step length given explicitly replaces the walk
   ratio: cadence = 60·v / step.
2. **Amplitude** (:func:`walk`): the amplitude whose kinematic stride length
   (:func:`stride_length`, on the robot's thigh and shank) equals the requested stride
   (2 × step), by bisection — the kinematic stride grows monotonically with the amplitude.

**Stride length, kinematically** (fixed pelvis, the treadmill's view; x forward, flexion > 0):
the ankle's forward position relative to the hip is x(φ) = L_t·sin q_hip + L_s·sin(q_hip −
q_knee) (:func:`ankle_x`). At this leg's heel strike (φ = 0) the other leg, half a stride
behind (φ = 0.5), is still on the ground (its toe-off is at φ ≈ 0.6): both feet are down, so
the horizontal distance between the two ankles, x(0) − x(0.5), is a distance on the ground —
the step length. A symmetric gait's stride is two steps:

    stride = 2 · (x(φ=0) − x(φ=0.5))

It reads the reference at two phases of one leg only, so a one-leg exoskeleton's record
measures it (:func:`measure`) exactly as the reference defines it. Ankle to ankle rather than
heel to heel, it differs from a footprint's step length by the trailing foot's heel rise at
φ = 0.5 (a few cm, at every speed alike); the other choice, the ankle's backward travel over
stance divided by the stance fraction, depends on where stance is taken to end and on the heel
rise more. docs/config-wearer.md ("Walking speed") tabulates the result.

Plain numpy: called between cycles (a speed change applies at the next stride boundary), never
in the 1 kHz path.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from exo_rt.control.trajectory import MAX_HARMONICS, gait_coefficients
from exo_rt.errors import ConfigError, Where

# Walk ratio (step length / cadence, m per steps/min) per metre of body height: Sekiya &
# Nagasaki 1998's young adults walk with WR ≈ 0.0064 m/(steps/min) over their speeds; per
# height (their WR / stature, about 1.7 m) ≈ 0.0037. 1.75 m → 0.0065.
WALK_RATIO_PER_HEIGHT = 0.0037
# the band of healthy adults' walk ratios as later papers quote it (m/(steps/min)), for checks
WALK_RATIO_BAND = (0.0055, 0.0070)
MAX_AMPLITUDE = 1.5  # beyond it the normal gait's shape is stretched past any person's range
KINDS = ("hip", "knee")


@dataclass(frozen=True)
class Walk:
    """One walking pace: what the gait reference needs (``period``, ``amplitude``) and what it
    makes (``speed``, ``stride_length`` by :func:`stride_length`'s definition)."""

    speed: float  # m/s
    period: float  # s per stride (the gait reference's period)
    stride_length: float  # m (two steps)
    amplitude: float  # scale of the excursion about the mean (trajectory.gait_coefficients)

    @property
    def step_length(self) -> float:
        """m: half a stride."""
        return self.stride_length / 2.0

    @property
    def cadence(self) -> float:
        """steps/min (two steps a stride)."""
        return 120.0 / self.period


# ----------------------------------------------------------------------------- the leg
def leg_prefixes(mech) -> list[str]:
    """The robot's legs by their joints' prefix, in the order of q: each prefix p with joints
    ``p + 'hip'`` and ``p + 'knee'`` ('' for a one-leg robot; 'left_', 'right_')."""
    names = mech.joint_names
    return [n[: -len("knee")] for n in names
            if n.endswith("knee") and n[: -len("knee")] + "hip" in names]


_LEGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # mech → {prefix: lengths}


def leg_lengths(mech, prefix: str = "") -> tuple[float, float]:
    """(thigh, shank) in m of the leg whose joints are ``prefix + 'hip'``, ``'knee'`` and
    ``'ankle'``: the knee's origin in the thigh (hip → knee) and the ankle's in the shank
    (knee → ankle), their lengths in the sagittal plane (x, z). An ankle fixed in the model
    (lumped into the shank by the loader) is read from the robot file's joints — once per
    mechanism: a walk's speed asked in a session needs the lengths inside the control cycle,
    where no file is read.

    ConfigError (naming the robot file) when the robot has no such leg."""
    known = _LEGS.setdefault(mech, {})
    if prefix not in known:
        known[prefix] = _leg_lengths(mech, prefix)
    return known[prefix]


def _leg_lengths(mech, prefix: str) -> tuple[float, float]:
    where = Where(str(mech.source))
    knee, hip, ankle = prefix + "knee", prefix + "hip", prefix + "ankle"
    names = list(mech.tree_joint_names)
    shown = ", ".join(repr(p) for p in leg_prefixes(mech)) or "none: the robot has no joints "\
        "named *hip and *knee"
    if knee not in names:
        raise ConfigError(f"the robot has no joint '{knee}' (a leg's knee)", where,
                          f"name a leg by its joints' prefix ({shown})")
    b_knee = names.index(knee)
    b_thigh = int(mech.parent[b_knee])
    if b_thigh < 0 or names[b_thigh] != hip:
        raise ConfigError(f"the joint '{knee}' does not hang on a thigh turned by '{hip}'",
                          where, f"name a leg by its joints' prefix ({shown}); its thigh "
                                 f"must hang on the hip joint '{hip}'")
    thigh = _sagittal(mech.origin_xyz[b_knee])
    if ankle in names:
        b_ankle = names.index(ankle)
        if int(mech.parent[b_ankle]) != b_knee:
            raise ConfigError(f"the joint '{ankle}' does not hang on the shank of '{knee}'",
                              where, "the ankle joint's parent must be the knee's child body")
        shank = _sagittal(mech.origin_xyz[b_ankle])
    else:
        shank = _sagittal(_fixed_origin(mech, ankle, mech.body_names[b_knee], where, shown))
    for what, value in (("thigh (hip → knee)", thigh), ("shank (knee → ankle)", shank)):
        if value <= 0.0:
            raise ConfigError(f"the {what} of leg '{prefix}' has no length", where,
                              "give the joint a non-zero origin")
    return thigh, shank


def _sagittal(xyz) -> float:
    return float(math.hypot(xyz[0], xyz[2]))


def _fixed_origin(mech, ankle: str, shank_body: str, where: Where, shown: str) -> np.ndarray:
    """A fixed joint's origin (the loader lumps fixed joints, so the Mechanism has none) from
    the robot YAML file the mechanism came from, its includes and prefixes applied."""
    path = Path(str(mech.source))
    if path.suffix.lower() in (".yaml", ".yml") and path.exists():
        from exo_rt.model import robot_yaml  # the parts as the loader reads them (includes)

        parts = robot_yaml._read_parts(path, [path.resolve()])
        for j in parts.joints:
            if j.name == ankle and j.parent == shank_body:
                return np.asarray(j.origin_xyz, float)
    raise ConfigError(f"the robot has no joint '{ankle}' at the end of the shank "
                      f"'{shank_body}' (the knee → ankle length)", where,
                      f"add a joint '{ankle}' (fixed or revolute) from the shank to the foot, "
                      f"or name another leg ({shown})")


def ankle_x(q_hip, q_knee, thigh: float, shank: float):
    """The ankle's forward position (m) relative to the hip in the sagittal plane, for hip
    and knee flexion (rad; scalars or arrays): x = L_t sin q_hip + L_s sin(q_hip − q_knee)."""
    return thigh * np.sin(q_hip) + shank * np.sin(np.subtract(q_hip, q_knee))


def _fourier(coeffs: np.ndarray, phase):
    """A coefficient row [a0, a1, b1, …] (rad) of trajectory.gait_coefficients at phase φ
    (a number or an array; the compiled trajectory.gait takes one phase at a time)."""
    q = coeffs[0] + np.zeros_like(phase, dtype=float)
    for n in range(1, MAX_HARMONICS + 1):
        x = 2.0 * np.pi * n * np.asarray(phase, float)
        q = q + coeffs[2 * n - 1] * np.cos(x) + coeffs[2 * n] * np.sin(x)
    return q


def stride_length(coeffs_hip: np.ndarray, coeffs_knee: np.ndarray, thigh: float,
                  shank: float) -> float:
    """The stride length (m) of a gait reference (coefficient rows of
    :func:`~exo_rt.control.trajectory.gait_coefficients`, rad): 2·(x(φ=0) − x(φ=0.5)), x the
    ankle's forward position (:func:`ankle_x`) — the module's docstring says why."""
    x0 = ankle_x(_fourier(coeffs_hip, 0.0), _fourier(coeffs_knee, 0.0), thigh, shank)
    x5 = ankle_x(_fourier(coeffs_hip, 0.5), _fourier(coeffs_knee, 0.5), thigh, shank)
    return float(2.0 * (x0 - x5))


def excursion(amplitude: float) -> dict[str, tuple[float, float]]:
    """{'hip': (min, max), 'knee': (min, max)} rad: the range the gait reference at
    ``amplitude`` sweeps (sampled at 0.1 % of the stride)."""
    phase = np.linspace(0.0, 1.0, 1001)
    out = {}
    rows = gait_coefficients(list(KINDS), list(KINDS), amplitude)
    for kind, c in zip(KINDS, rows, strict=True):
        q = _fourier(c, phase)
        out[kind] = (float(q.min()), float(q.max()))
    return out


def _stride_at(amplitude: float, thigh: float, shank: float) -> float:
    """:func:`stride_length` of the normal gait at ``amplitude``: the joints at φ = 0 and 0.5
    are the mean plus ``amplitude`` × the excursion at amplitude 1 (what gait_coefficients
    scales), so the bisection's steps cost four sines each."""
    (h0, h5), (k0, k5) = ((_MEAN[j] + amplitude * _EXCURSION[j][0],
                           _MEAN[j] + amplitude * _EXCURSION[j][1]) for j in range(2))
    return float(2.0 * (ankle_x(h0, k0, thigh, shank) - ankle_x(h5, k5, thigh, shank)))


_ROWS = gait_coefficients(list(KINDS), list(KINDS), 1.0)
_MEAN = [float(r[0]) for r in _ROWS]
_EXCURSION = [(float(_fourier(r, 0.0)) - r[0], float(_fourier(r, 0.5)) - r[0]) for r in _ROWS]


# ----------------------------------------------------------------------------- the pace
def cadence_and_step(speed: float, height: float) -> tuple[float, float]:
    """(cadence steps/min, step length m) of a walk at ``speed`` m/s for a wearer ``height``
    m tall, by a constant walk ratio WR = :data:`WALK_RATIO_PER_HEIGHT` × height (Sekiya &
    Nagasaki 1998): step = WR × cadence and speed = step × cadence / 60, so cadence =
    √(60·speed / WR)."""
    if not speed > 0.0 or not math.isfinite(speed):
        raise ValueError(f"walking speed {speed} m/s is not a positive speed: give one > 0 "
                         "(the wearer profile's speed range)")
    if not 0.5 <= height <= 2.5:
        raise ValueError(f"body height {height} m is not a person's: give it in metres "
                         "(e.g. 1.75)")
    ratio = WALK_RATIO_PER_HEIGHT * height
    cadence = math.sqrt(60.0 * speed / ratio)
    return cadence, ratio * cadence


def pace(speed: float, height: float, step_length: float | None = None
         ) -> tuple[float, float]:
    """(cadence steps/min, step length m) of a walk at ``speed`` m/s: the walk ratio's
    (:func:`cadence_and_step`) unless ``step_length`` m is given (then cadence = speed / step
    length). ValueError for a speed or step length that is not positive."""
    if step_length is None:
        return cadence_and_step(speed, height)
    if not speed > 0.0 or not math.isfinite(speed):
        raise ValueError(f"walking speed {speed} m/s is not a positive speed: give one > 0")
    if not step_length > 0.0 or not math.isfinite(step_length):
        raise ValueError(f"step length {step_length} m is not a positive length: give one > 0 "
                         "(the wearer profile's step-length range)")
    return 60.0 * speed / float(step_length), float(step_length)


def walk(speed: float, height: float, thigh: float, shank: float,
         step_length: float | None = None,
         rom: dict[str, tuple[float, float]] | None = None) -> Walk:
    """The gait reference's period and amplitude for walking at ``speed`` m/s (a wearer
    ``height`` m tall, the robot's ``thigh`` and ``shank`` m from :func:`leg_lengths`).

    The step length is the walk ratio's (:func:`cadence_and_step`) unless ``step_length`` m
    is given (then cadence = speed / step length). The amplitude is found by bisection so
    that :func:`stride_length` of the reference equals 2 × step length. ``rom`` ({'hip':
    (lower, upper), 'knee': …} rad, e.g. the wearer's ranges of motion or the robot's
    limits) bounds the reference's excursion.

    ValueError (what, and how to fix it) for a speed or step length that is not positive, a
    stride beyond amplitude :data:`MAX_AMPLITUDE`, or a reference outside ``rom``."""
    cadence, step = pace(speed, height, step_length)
    stride = 2.0 * step
    period = 120.0 / cadence
    if thigh <= 0.0 or shank <= 0.0:
        raise ValueError(f"leg lengths thigh {thigh} m, shank {shank} m: give positive "
                         "lengths (exo_rt.control.gait_speed.leg_lengths)")
    longest = _stride_at(MAX_AMPLITUDE, thigh, shank)
    if stride > longest:
        raise ValueError(
            f"a stride of {stride:.3f} m (step {step:.3f} m at {speed:g} m/s) is beyond the "
            f"gait's reach on this leg (thigh {thigh:.3f} m, shank {shank:.3f} m): its "
            f"largest, at amplitude {MAX_AMPLITUDE:g}, is {longest:.3f} m — lower the speed "
            f"or the step length")
    lo, hi = 0.0, MAX_AMPLITUDE
    for _ in range(60):  # the kinematic stride grows with the amplitude (tests check it)
        mid = 0.5 * (lo + hi)
        if _stride_at(mid, thigh, shank) < stride:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    amplitude = 0.5 * (lo + hi)
    for kind, (qmin, qmax) in excursion(amplitude).items() if rom else ():
        if kind not in rom:
            continue
        lower, upper = rom[kind]
        if qmin < lower - 1e-9 or qmax > upper + 1e-9:
            raise ValueError(
                f"walking at {speed:g} m/s with steps of {step:.3f} m needs the {kind} from "
                f"{qmin:.3f} to {qmax:.3f} rad (amplitude {amplitude:.3f}), outside its range "
                f"of motion {lower:.3f} … {upper:.3f} rad — lower the speed or the step "
                f"length, or widen the range (wearer profile, robot limits)")
    return Walk(speed=float(speed), period=period, stride_length=stride, amplitude=amplitude)


# ----------------------------------------------------------------------------- measuring
def _crossing(p: np.ndarray, level: float) -> tuple[int, float]:
    """(i, f): the phase ``p`` (non-decreasing) reaches ``level`` between samples i−1 and i,
    at the fraction f of that interval."""
    i = int(np.searchsorted(p, level, side="left"))
    if i == 0:
        return 1, 0.0
    span = p[i] - p[i - 1]
    return i, (level - p[i - 1]) / span if span > 0 else 1.0


def measure(q_hip, q_knee, phase, dt: float, thigh: float,
            shank: float) -> tuple[float, float]:
    """(stride length m, cadence strides/min) of a recorded walk: hip and knee flexion (rad)
    and the gait phase (strides; integer crossings are this leg's heel strikes; a phase that
    wraps to 0 at each heel strike is unwrapped) per cycle of ``dt`` s. Each whole stride k
    (phase k → k+1) gives 2·(x(k) − x(k+½)), x the ankle's forward position
    (:func:`ankle_x`) interpolated at the phase crossings — :func:`stride_length`'s
    definition; the stride lengths are averaged, the cadence is the whole strides over their
    time. ValueError when the window holds no whole stride."""
    q_hip, q_knee = np.asarray(q_hip, float), np.asarray(q_knee, float)
    p = np.asarray(phase, float)
    if not (q_hip.shape == q_knee.shape == p.shape) or p.ndim != 1:
        raise ValueError(f"q_hip {q_hip.shape}, q_knee {q_knee.shape} and phase {p.shape} "
                         "must be one-dimensional arrays of one value per cycle")
    if not dt > 0:
        raise ValueError(f"cycle time {dt} s: give the record's period (> 0)")
    p = p + np.concatenate(([0.0], np.cumsum(np.diff(p) < -0.5)))  # wraps at heel strikes
    p = np.maximum.accumulate(p)
    first, last = math.ceil(p[0]), math.floor(p[-1])
    if p.size < 2 or last - first < 1:
        raise ValueError(f"the record spans phase {p[0]:.3f} … {p[-1]:.3f}: it holds no whole "
                         "stride (heel strike to heel strike) — record a longer walk")
    x = ankle_x(q_hip, q_knee, thigh, shank)

    def at(level: float) -> tuple[float, float]:
        i, f = _crossing(p, level)
        return (i - 1 + f) * dt, x[i - 1] + f * (x[i] - x[i - 1])

    strides = []
    for k in range(first, last):
        strides.append(2.0 * (at(k)[1] - at(k + 0.5)[1]))
    duration = at(last)[0] - at(first)[0]
    return float(np.mean(strides)), 60.0 * (last - first) / duration
