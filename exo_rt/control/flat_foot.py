"""The flat-foot gait: a walking reference designed for an exoskeleton on the floor, whose
wearer's feet stay flat on it through stance (activities file ``gait: flat_foot``;
docs/world.md, "Walking on the floor").

The normal gait (:mod:`exo_rt.control.trajectory`) is a healthy walker's hip and knee: its
stance rolls over the heel, the ankle and the toe, and its push-off comes from the calf. A
paraplegic wearer has neither, and two legs planted on the floor close a kinematic loop: any
reference whose two feet disagree about where the floor is makes the joints fight each other
through the pelvis. This gait is built the other way round, from where the feet must be
(x forward, z up, the hip the origin, the pelvis upright, flexion > 0):

- **stance** (phase φ ∈ [0, :data:`STANCE`)): the ankle is still on the floor while the hip
  passes over it at the walking speed — relative to the hip it goes from +S·s/2 to −S·s/2
  (stride S, stance fraction s) — and the pelvis is as high as both stance legs allow: its
  height over the ankles H(φ) = a + b·cos 4π(φ − s/2), highest at each mid-stance (the knee
  flexed :data:`KNEE_MID`) and lowest in double support (the knee flexed :data:`KNEE_EDGE`
  with the ankle S·s/2 from the hip);
- **swing** (φ ∈ [s, 1)): the ankle moves from one foothold to the next by a minimum-jerk
  profile on the floor (it leaves and lands at rest: no slip), lifted :data:`LIFT` at
  :data:`LIFT_PEAK` of the swing, and never so far from the hip that the knee straightens
  past :data:`KNEE_SWING`.

Both legs share H, so in double support both ankles are on the floor by construction. Each
phase's hip and knee are the leg's two-link inverse kinematics (thigh, shank from the robot),
fitted by :data:`exo_rt.control.trajectory.MAX_HARMONICS` harmonics — enough that the fitted
stance ankle stays within a few millimetres of the floor (docs/world.md gives the figure).

The foot itself is the world's: an ankle-foot orthosis's hinge whose spring rests toe-up
(``simulation: ankle_rest``) so that a foot leaving the floor with its shank tilted back
clears it. Plain numpy: called between cycles when a walk is planned, never in the 1 kHz path.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.control.gait_speed import Walk, pace
from exo_rt.control.trajectory import MAX_HARMONICS

STANCE = 0.62  # the stance fraction of a stride (healthy walkers: about 0.6)
KNEE_MID = 0.25  # rad: the stance knee's flexion at mid-stance, the hip over the ankle
KNEE_EDGE = 0.55  # rad: … and in double support, the ankle S·s/2 from the hip
KNEE_SWING = 0.15  # rad: the swing knee is never straighter than this
LIFT = 0.06  # m: the swing ankle's lift over the floor …
LIFT_PEAK = 0.35  # … highest at this fraction of the swing
LIFT_ORDER = 2.0  # … rising as the swing's fraction to this power
HEEL_ROCKER = 0.022  # m: the ankle's height over a flat foot's when the heel lands (the
# foot toe-up at its orthosis's rest) …
ROCKER = 0.06  # … coming down to it over this fraction of the stride
SMOOTH = 0.002  # m: the swing's reach limit joins its path over about this distance
SAMPLES = 1000  # phases per stride the fit is made on


def _reach(thigh: float, shank: float, knee: float) -> float:
    """m: hip to ankle with the knee flexed ``knee`` rad (law of cosines)."""
    return math.sqrt(thigh * thigh + shank * shank + 2.0 * thigh * shank * math.cos(knee))


def ankle_path(phase: np.ndarray, stride: float, thigh: float, shank: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """The ankle relative to the hip (x, z m) at each ``phase`` (strides, [0, 1)) of a leg
    walking strides of ``stride`` m (the module's docstring)."""
    s = STANCE
    half = stride * s / 2.0
    r_mid, r_edge = _reach(thigh, shank, KNEE_MID), _reach(thigh, shank, KNEE_EDGE)
    if half >= r_edge:
        raise ValueError(f"a stride of {stride:.2f} m is longer than a leg of "
                         f"{thigh + shank:.2f} m can walk with its feet flat: give a "
                         "shorter step or a slower speed")
    h_edge = math.sqrt(r_edge * r_edge - half * half)
    b = (r_mid - h_edge) / (1.0 - math.cos(4.0 * math.pi * (0.0 - s / 2.0)))
    height = (r_mid - b) + b * np.cos(4.0 * math.pi * (phase - s / 2.0))
    stance = phase < s
    u = np.clip((phase - s) / (1.0 - s), 0.0, 1.0)
    progress = u ** 3 * (10.0 - 15.0 * u + 6.0 * u * u)  # minimum jerk on the floor
    x = np.where(stance, stride * (s / 2.0 - phase),
                 -half + stride * progress - stride * (phase - s))
    # the lift: u^α (1 − u)^β, highest at LIFT_PEAK (β = α/LIFT_PEAK − α); α = LIFT_ORDER = 2
    # starts it with no step in the ankle's vertical speed
    alpha = LIFT_ORDER
    beta = alpha / LIFT_PEAK - alpha
    peak = LIFT_PEAK ** alpha * (1.0 - LIFT_PEAK) ** beta
    lift = LIFT * u ** alpha * (1.0 - u) ** beta / peak
    # the heel lands HEEL_ROCKER above a flat foot's ankle height and the foot rolls flat over
    # the first ROCKER of stance (the heel rocker): the ankle comes down as it does
    r = np.clip(phase / ROCKER, 0.0, 1.0)
    rocker = HEEL_ROCKER * (1.0 - r ** 3 * (10.0 - 15.0 * r + 6.0 * r * r))
    z = -height + np.where(stance, rocker, lift + HEEL_ROCKER * progress)
    r_swing = _reach(thigh, shank, KNEE_SWING)
    floor = -np.sqrt(np.maximum(r_swing ** 2 - x * x, 0.0))  # the swing's reach
    smooth = SMOOTH * np.logaddexp(z / SMOOTH, floor / SMOOTH)  # a smooth max(z, floor)
    return x, np.where(stance, z, smooth)


def leg_angles(x: np.ndarray, z: np.ndarray, thigh: float, shank: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """(hip, knee) flexion (rad) that put the ankle at (x, z) from the hip, the pelvis
    upright and the knee flexed forward: the knee from the law of cosines, the hip from the
    hip–ankle line and the thigh's angle to it."""
    r = np.hypot(x, z)
    c = (r * r - thigh * thigh - shank * shank) / (2.0 * thigh * shank)
    knee = np.arccos(np.clip(c, -1.0, 1.0))
    hip = np.arctan2(x, -z) + np.arcsin(np.clip(shank * np.sin(knee) / r, -1.0, 1.0))
    return hip, knee


def fourier_rows(values: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """[a0, a1, b1, …] (rad) of the least-squares Fourier series of ``values`` at ``phase``
    with :data:`MAX_HARMONICS` harmonics — trajectory.gait's row layout."""
    cols = [np.ones_like(phase)]
    for n in range(1, MAX_HARMONICS + 1):
        cols += [np.cos(2.0 * math.pi * n * phase), np.sin(2.0 * math.pi * n * phase)]
    coeffs, *_ = np.linalg.lstsq(np.stack(cols, axis=1), values, rcond=None)
    return coeffs


def leg_rows(stride: float, thigh: float, shank: float) -> dict[str, np.ndarray]:
    """{'hip': row, 'knee': row}: one leg's Fourier rows for strides of ``stride`` m (the
    shape is the stride's at any period: the period only scales its phase rate)."""
    phase = np.arange(SAMPLES) / SAMPLES
    hip, knee = leg_angles(*ankle_path(phase, stride, thigh, shank), thigh, shank)
    return {"hip": fourier_rows(hip, phase), "knee": fourier_rows(knee, phase)}


def walk(speed: float, height: float, step_length: float | None = None) -> Walk:
    """The pace of a flat-foot walk at ``speed`` m/s for a wearer ``height`` m tall: the
    walk ratio's cadence and step, or ``step_length`` m given
    (:func:`exo_rt.control.gait_speed.pace`; ValueError as it raises). Its amplitude is 1:
    the shape is designed for the stride, not scaled."""
    cadence, step = pace(speed, height, step_length)
    return Walk(speed=speed, period=120.0 / cadence, stride_length=2.0 * step, amplitude=1.0)


def gait_rows(robot, kinds: list[str], stride: float) -> np.ndarray:
    """The Fourier rows (n, 1 + 2·MAX_HARMONICS) of ``robot``'s joints for strides of
    ``stride`` m: a joint of kind 'hip' or 'knee' gets its leg's row (its leg's thigh and
    shank, :func:`exo_rt.control.gait_speed.leg_lengths`), a 'hold' joint stays at 0."""
    from exo_rt.control.gait_speed import leg_lengths, leg_prefixes

    names = list(robot.joint_names)
    rows = np.zeros((len(names), 1 + 2 * MAX_HARMONICS))
    legs = {}
    for prefix in leg_prefixes(robot):
        legs[prefix] = leg_rows(stride, *leg_lengths(robot, prefix))
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        prefix = next((p for p in legs if name.startswith(p) and p), "")
        if kind in ("hip", "knee") and prefix in legs:
            rows[i] = legs[prefix][kind]
    return rows
