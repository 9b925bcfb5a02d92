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
ROCKER = 0.10  # … coming down to it over this fraction of the stride (over 0.06 the heel met
# the world's floor at 0.15 m/s and the landing's feedback took every hip to the drive's peak)
SMOOTH = 0.002  # m: the swing's reach limit joins its path over about this distance
SAMPLES = 1000  # phases per stride the fit is made on


def _reach(thigh: float, shank: float, knee: float) -> float:
    """m: hip to ankle with the knee flexed ``knee`` rad (law of cosines)."""
    return math.sqrt(thigh * thigh + shank * shank + 2.0 * thigh * shank * math.cos(knee))


def _min_jerk(u: np.ndarray) -> np.ndarray:
    """The minimum-jerk shape on u ∈ [0, 1] (clipped): 0 → 1 at rest at both ends."""
    u = np.clip(u, 0.0, 1.0)
    return u ** 3 * (10.0 - 15.0 * u + 6.0 * u * u)


def _lift(u: np.ndarray) -> np.ndarray:
    """The swing's lift over the floor (m) at its fraction u ∈ [0, 1]: u^α (1 − u)^β, highest
    (:data:`LIFT`) at :data:`LIFT_PEAK` (β = α/LIFT_PEAK − α); α = :data:`LIFT_ORDER` = 2
    starts it with no step in the ankle's vertical speed."""
    u = np.clip(u, 0.0, 1.0)
    alpha = LIFT_ORDER
    beta = alpha / LIFT_PEAK - alpha
    return LIFT * u ** alpha * (1.0 - u) ** beta / (LIFT_PEAK ** alpha * (1.0 - LIFT_PEAK) ** beta)


def heel_rocker(phase: np.ndarray) -> np.ndarray:
    """m: the stance ankle's height over a flat foot's at ``phase`` (strides): the heel lands
    :data:`HEEL_ROCKER` high and the foot rolls flat over the first :data:`ROCKER`."""
    return HEEL_ROCKER * (1.0 - _min_jerk(np.asarray(phase, float) / ROCKER))


def pelvis_height(phase: np.ndarray, stride: float, thigh: float, shank: float,
                  knee_mid: float = KNEE_MID, knee_edge: float = KNEE_EDGE) -> np.ndarray:
    """m: the hip's height over the flat stance ankle at ``phase`` (strides) — H(φ) = a +
    b·cos 4π(φ − s/2), the knee ``knee_mid`` (rad, :data:`KNEE_MID`) at mid-stance and
    ``knee_edge`` (:data:`KNEE_EDGE`) with the ankle S·s/2 from the hip (the module's
    docstring); ValueError for a stride too long."""
    s = STANCE
    half = stride * s / 2.0
    r_mid, r_edge = _reach(thigh, shank, knee_mid), _reach(thigh, shank, knee_edge)
    if half >= r_edge:
        raise ValueError(f"a stride of {stride:.2f} m is longer than a leg of "
                         f"{thigh + shank:.2f} m can walk with its feet flat: give a "
                         "shorter step or a slower speed")
    h_edge = math.sqrt(r_edge * r_edge - half * half)
    b = (r_mid - h_edge) / (1.0 - math.cos(4.0 * math.pi * (0.0 - s / 2.0)))
    return (r_mid - b) + b * np.cos(4.0 * math.pi * (np.asarray(phase, float) - s / 2.0))


def pelvis_peak_load(speed: float, height: float, thigh: float, shank: float,
                     support: float = 0.0, knee_mid: float = KNEE_MID,
                     knee_edge: float = KNEE_EDGE) -> float:
    """The largest vertical ground reaction the gait's pelvis motion alone asks at ``speed``
    m/s (a wearer ``height`` m tall, :func:`walk`'s pace), over the weight the floor carries:
    1 + z̈/((1 − support)·g). z̈ = b·(4π/T)² is :func:`pelvis_height`'s upward acceleration at
    its lowest, about double support (b its half-range, T the stride period); ``support`` the
    share of the weight a harness holds with a constant force, which the acceleration does not
    share: with half of it held, the floor's reaction swings twice as far about what it
    carries. The body's centre of mass moves less than the pelvis (the swinging leg), so a
    walk measures somewhat less (docs/world.md, "Walking on the floor": the peaks).

    ``knee_mid``, ``knee_edge`` (rad): the stance knee's flexion at mid-stance and in double
    support (the gait's by default)."""
    w = walk(speed, height)
    h = pelvis_height(np.arange(SAMPLES) / SAMPLES, w.stride_length, thigh, shank, knee_mid,
                      knee_edge)
    b = 0.5 * (h.max() - h.min())
    return 1.0 + b * (4.0 * math.pi / w.period) ** 2 / ((1.0 - support) * 9.81)


def ankle_path(phase: np.ndarray, stride: float, thigh: float, shank: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """The ankle relative to the hip (x, z m) at each ``phase`` (strides, [0, 1)) of a leg
    walking strides of ``stride`` m (the module's docstring)."""
    s = STANCE
    half = stride * s / 2.0
    height = pelvis_height(phase, stride, thigh, shank)
    stance = phase < s
    u = np.clip((phase - s) / (1.0 - s), 0.0, 1.0)
    progress = _min_jerk(u)  # minimum jerk on the floor
    x = np.where(stance, stride * (s / 2.0 - phase),
                 -half + stride * progress - stride * (phase - s))
    lift = _lift(u)
    # the heel lands HEEL_ROCKER above a flat foot's ankle height and the foot rolls flat over
    # the first ROCKER of stance (the heel rocker): the ankle comes down as it does
    z = -height + np.where(stance, heel_rocker(phase), lift + HEEL_ROCKER * progress)
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


# --- the opening and the closing step (docs/world.md, "Walking on the floor")
STEP_SAMPLES = 801  # points of a step its joint paths are made and fitted on
STEP_TERMS = 16  # Chebyshev terms of a step's correction (segment._step): 25 follow the
# swing's lift-off more closely and ask the stepping knee 74 → 86 rad/s² at 0.5 m/s
LANDING = 0.85  # the closing's foot is over its foothold at this fraction of its swing, and
# comes down onto it flat (on the floor, within 1 mm, it moves 0.5 mm; 5 mm landing as the
# strides do)


def _quintic(t: np.ndarray, start: tuple, end: tuple) -> np.ndarray:
    """The quintic on t ∈ [0, 1] with value, first and second derivative (per unit t)
    ``start`` at 0 and ``end`` at 1."""
    p0, v0, a0 = start
    p1, v1, a1 = end
    m = np.array([[1, 1, 1], [3, 4, 5], [6, 12, 20]], float)
    c3, c4, c5 = np.linalg.solve(m, [p1 - p0 - v0 - a0 / 2.0, v1 - v0 - a0, a1 - a0])
    return p0 + v0 * t + a0 / 2.0 * t * t + c3 * t ** 3 + c4 * t ** 4 + c5 * t ** 5


def _foot(hip: float, knee: float, thigh: float, shank: float) -> np.ndarray:
    """The ankle from the hip (x, z m) of a leg at (hip, knee) rad, the pelvis upright."""
    return np.array([thigh * math.sin(hip) + shank * math.sin(hip - knee),
                     -thigh * math.cos(hip) - shank * math.cos(hip - knee)])


def _derivs(f, p: float, h: float = 1e-4) -> np.ndarray:
    """(f, f′, f″) at p by central differences (f: phase → array)."""
    a, b, c = f(p - h), f(p), f(p + h)
    return np.array([b, (c - a) / (2.0 * h), (c - 2.0 * b + a) / (h * h)])


def step_paths(stride: float, legs: list[tuple[float, float]], phases: tuple[float, float],
               q_rest: list[tuple[float, float]], length: float, opening: bool
               ) -> tuple[np.ndarray, list[np.ndarray]]:
    """One step between standing and the flat-foot gait, made on the floor as the strides
    are: the joint paths (hip, knee rad; (2, STEP_SAMPLES) per leg) at the step's fractions
    x ∈ [0, 1] (returned too), of two legs ``legs`` ((thigh, shank) m each) whose gait phases
    at the gait's end of the step (``opening``: its end; else its start) are ``phases`` —
    one 0 (the leg that has just landed), the other 0.5. ``q_rest``: each leg's (hip, knee)
    standing (the walk's start or end posture); ``length``: the step's strides.

    - The **planted** leg (the opening's 0.5, the closing's 0) keeps its ankle still on the
      floor (the closing's leg finishes its heel rocker, as in the gait);
    - the **stepping** leg is planted until the gait lifts it (the opening's last 1 − s of
      the step, the closing's stance end at s), then its ankle moves from its foothold to
      the other's — the gait's landing with its heel rocker (opening) or beside the planted
      foot, flat (closing) — by the swing's minimum-jerk path on the floor, lifted
      :data:`LIFT` (:func:`_lift`);
    - the pelvis (both hips) moves from rest over the planted ankle to the gait's position,
      speed and acceleration (opening), or from the gait's to rest (closing), by a quintic in
      x forward and in height: one pelvis for both legs, so both ankles keep its height.

    Each leg's hip and knee by :func:`leg_angles`. The paths join the gait (its design, not
    its Fourier fit) at the step's gait end to the second derivative."""
    x = np.linspace(0.0, 1.0, STEP_SAMPLES)
    plant = 1 if phases[0] % 1.0 == 0.0 else 0  # the leg at 0.5 plants in an opening …
    if not opening:
        plant = 1 - plant  # … the one at 0 in a closing
    step = 1 - plant
    (tp, sp), (ts, ss) = legs[plant], legs[step]

    def rel(leg, p):  # the gait's ankle from the hip at phase p
        t, s = legs[leg]
        xx, zz = ankle_path(np.atleast_1d(np.mod(p, 1.0)), stride, t, s)
        return np.array([xx[0], zz[0]])

    p_plant, p_step = phases[plant] % 1.0, phases[step] % 1.0
    # the gait's side: the planted ankle at the floor's origin (its flat height), the pelvis
    # behind it by the gait's ankle ahead of the hip and at its height H; the stepping leg
    # from the pelvis
    floor_p = np.array([0.0, 0.0])
    gait_pelvis = _derivs(lambda p: np.array(
        [-rel(plant, p)[0], float(pelvis_height(np.mod(p, 1.0), stride, tp, sp))]), p_plant)
    rest_pelvis = floor_p - _foot(*q_rest[plant], tp, sp)
    step_rest = rest_pelvis + _foot(*q_rest[step], ts, ss)  # the stepping foot standing
    t = x * length  # strides from the step's start
    if opening:
        p0 = (rest_pelvis, 0.0 * rest_pelvis, 0.0 * rest_pelvis)
        p1 = (gait_pelvis[0], gait_pelvis[1] * length, gait_pelvis[2] * length ** 2)
        # the stepping foot lands where the gait puts it (phase 0, the heel rocker high)
        start_f, end_f = step_rest, gait_pelvis[0] + rel(step, p_step)
        lift_at = max(0.0, length - (1.0 - STANCE))
        z_plant = np.zeros_like(x)
    else:
        p0 = (gait_pelvis[0], gait_pelvis[1] * length, gait_pelvis[2] * length ** 2)
        p1 = (rest_pelvis, 0.0 * rest_pelvis, 0.0 * rest_pelvis)
        start_f, end_f = gait_pelvis[0] + rel(step, p_step), step_rest
        lift_at = min(max(STANCE - p_step, 0.0), length - (1.0 - STANCE))
        z_plant = heel_rocker(p_plant + t)
    # the pelvis: forward by a quintic in x; its distance r to the planted ankle a minimum-
    # jerk blend between standing's and the gait's own over the same phases (so the planted
    # knee bends as the hip passes over it, never straighter than standing's)
    ahead = _quintic(x, (p0[0][0], p0[1][0], p0[2][0]), (p1[0][0], p1[1][0], p1[2][0]))
    p_gait = p_plant - length + t if opening else p_plant + t
    r_gait = np.hypot(*ankle_path(np.mod(p_gait, 1.0), stride, tp, sp))
    r_rest = float(np.hypot(*_foot(*q_rest[plant], tp, sp)))
    w = _min_jerk(x) if opening else 1.0 - _min_jerk(x)
    r = (1.0 - w) * r_rest + w * r_gait
    pelvis = np.stack([ahead, z_plant + np.sqrt(np.maximum(r * r - ahead * ahead, 0.0))])
    u = (t - lift_at) / (length - lift_at)
    # (a closing lands flat: the foot is over its foothold before the last of its lift)
    along = _min_jerk(u) if opening else _min_jerk(u / LANDING)
    foot = start_f[:, None] + (end_f - start_f)[:, None] * along
    foot[1] += _lift(u)
    out = [None, None]
    out[plant] = np.stack(leg_angles(0.0 - pelvis[0], z_plant - pelvis[1], tp, sp))
    sx, sz = foot[0] - pelvis[0], foot[1] - pelvis[1]
    # the swing's reach, as the gait's: the knee never straighter than KNEE_SWING (a smooth
    # max with the reach's floor, in the air only)
    r_swing = _reach(ts, ss, KNEE_SWING)
    floor = -np.sqrt(np.maximum(r_swing ** 2 - sx * sx, 0.0))
    swing = (u > 0.0) & (u < 1.0) & opening  # (a closing lands standing, its knee straight)
    sz = np.where(swing, SMOOTH * np.logaddexp(sz / SMOOTH, floor / SMOOTH), sz)
    out[step] = np.stack(leg_angles(sx, sz, ts, ss))
    return x, out


def _gait_at(rows: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """(n, len(phase)): the Fourier rows' angles (rad) at each joint's ``phase`` ((n, m))."""
    out = rows[:, :1] + 0.0 * phase
    for n in range(1, MAX_HARMONICS + 1):
        w = 2.0 * math.pi * n * phase
        out = out + rows[:, 2 * n - 1:2 * n] * np.cos(w) + rows[:, 2 * n:2 * n + 1] * np.sin(w)
    return out


def walk_steps(robot, kinds: list[str], stride: float, rows: np.ndarray, motion,
               q_from, q_to) -> dict[int, np.ndarray] | None:
    """The opening and closing steps of a two-leg walk on the floor, as the corrections the
    cycle adds to its blends ({step: (n, width) rows}; the steps ``open``, ``close`` and
    ``close_half``, their slots in the cycle's gaits :data:`exo_rt.cycle.segment.STEP_SLOTS`):
    each joint's path by :func:`step_paths` less the blend's — from posture ``q_from`` into
    the gait's Fourier ``rows`` (strides of ``stride`` m) over the walk ``motion``'s
    ``opening`` strides, from the gait at a whole or a half stride boundary into ``q_to``
    over its ``closing`` — at each joint's phase (its ``phase_offsets``, strides). None where
    the steps are not made on the floor: one leg (its wearer's other leg does what it does
    half a stride later), legs not half a stride apart, or an opening that does not end on a
    half-stride boundary — the plain blends then."""
    from exo_rt.control.gait_speed import leg_lengths, leg_prefixes
    names = list(robot.joint_names)
    offsets, opening, closing = motion.phase_offsets, motion.opening, motion.closing
    prefixes = leg_prefixes(robot)
    if len(prefixes) != 2 or abs(2.0 * opening - round(2.0 * opening)) > 1e-9:
        return None
    q_from, q_to = np.asarray(q_from, float), np.asarray(q_to, float)
    offsets = np.asarray(offsets, float)
    joints = [(names.index(p + "hip"), names.index(p + "knee")) for p in prefixes]
    if any(kinds[h] != "hip" or kinds[k] != "knee" for h, k in joints):
        return None
    legs = [leg_lengths(robot, p) for p in prefixes]
    leg_off = [offsets[h] for h, _ in joints]
    if (abs((leg_off[1] - leg_off[0]) % 1.0 - 0.5) > 1e-9
            or any(offsets[k] != offsets[h] for h, k in joints)):
        return None
    width = rows.shape[1]
    out = {}
    cases = [("open", opening, True, 0.0, q_from)]
    cases += [("close", closing, False, 0.0, q_to), ("close_half", closing, False, 0.5, q_to)]
    for step, length, is_open, start, q_rest in cases:
        at = start + opening if is_open else start  # the gait's phase where the step meets it
        phases = tuple(float(np.round((at + o) % 1.0, 9)) % 1.0 for o in leg_off)
        x, paths = step_paths(stride, legs, phases,
                              [(q_rest[h], q_rest[k]) for h, k in joints], length, is_open)
        phase = (x * length if is_open else start + x * length)[None, :] + offsets[:, None]
        gait = _gait_at(rows, phase)
        w = _min_jerk(x)[None, :]
        posture = q_rest[:, None]
        blend = (1.0 - w) * posture + w * gait if is_open else (1.0 - w) * gait + w * posture
        # the paths join the gait's design; the cycle walks its Fourier fit: the difference
        # (the fit's residual, millimetres at the ankle) is taken in with the blend
        into = w if is_open else 1.0 - w
        target = np.zeros_like(blend)
        for (h, k), path, (thigh, shank) in zip(joints, paths, legs, strict=True):
            design = leg_angles(*ankle_path(np.mod(phase[h], 1.0), stride, thigh, shank),
                                thigh, shank)
            for i, j in enumerate((h, k)):
                target[j] = path[i] + into[0] * (gait[j] - design[i]) - blend[j]
        out[step] = np.zeros((len(names), width))
        out[step][:, :STEP_TERMS] = step_rows(x, target, STEP_TERMS)
    return out


def step_basis(x: np.ndarray, width: int) -> np.ndarray:
    """(len(x), width): the basis of the cycle's step correction
    (:func:`exo_rt.cycle.segment._step`) at the step's fractions ``x`` — x³(1 − x)³
    T_k(2x − 1), k < ``width`` — to fit a correction's row by least squares (Python)."""
    x = np.asarray(x, float)
    return (x ** 3 * (1.0 - x) ** 3)[:, None] * np.polynomial.chebyshev.chebvander(
        2.0 * x - 1.0, width - 1)


def step_rows(x: np.ndarray, target: np.ndarray, width: int) -> np.ndarray:
    """(n, width): the correction's rows nearest ``target`` ((n, len(x)) rad: each
    joint's path less the blend's at the step's fractions ``x``), by least squares."""
    basis = step_basis(x, width)
    return np.linalg.lstsq(basis, np.asarray(target, float).T, rcond=None)[0].T
