"""The flat-foot gait (exo_rt/control/flat_foot.py; docs/world.md, "Walking on the floor"):
its stance feet are on the floor, both at once in double support, as the joints' forward
kinematics say — checked on the Fourier rows a walk actually runs, not on the design."""

from __future__ import annotations

import math

import numpy as np
import pytest

from exo_rt.control import flat_foot as ff
from exo_rt.control.gait_speed import leg_lengths
from exo_rt.control.trajectory import MAX_HARMONICS
from exo_rt.model import load_mechanism
from exo_rt.session.activities import SPEED_BLEND

THIGH, SHANK = 0.43, 0.42  # m: exo_2leg_sized's legs (checked below)
PHASE = np.arange(4000) / 4000


def _series(row: np.ndarray, phase: np.ndarray) -> np.ndarray:
    out = np.full_like(phase, row[0])
    for n in range(1, MAX_HARMONICS + 1):
        out += row[2 * n - 1] * np.cos(2 * math.pi * n * phase) + \
            row[2 * n] * np.sin(2 * math.pi * n * phase)
    return out


def _ankle(rows: dict, phase: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ankle from the hip (x, z m) by the leg's forward kinematics, pelvis upright."""
    hip, knee = _series(rows["hip"], phase), _series(rows["knee"], phase)
    return (THIGH * np.sin(hip) + SHANK * np.sin(hip - knee),
            -THIGH * np.cos(hip) - SHANK * np.cos(hip - knee))


def test_the_sized_robot_has_the_legs_the_checks_use():
    robot = load_mechanism("configs/robots/exo_2leg_sized.yaml")
    assert leg_lengths(robot, "left_") == pytest.approx((THIGH, SHANK))


@pytest.mark.parametrize("speed", [0.2, 0.4, 0.6])
def test_stance_feet_stay_on_the_floor(speed):
    """In stance the ankle moves straight back at the walking speed, at the height the pelvis
    profile gives; the fitted rows keep it there to 2.5 mm (measured 1.85 mm, at the heel
    rocker's start; the design itself to 1e-9)."""
    walk = ff.walk(speed, 1.75)
    rows = ff.leg_rows(walk.stride_length, THIGH, SHANK)
    x, z = _ankle(rows, PHASE)
    xd, zd = ff.ankle_path(PHASE, walk.stride_length, THIGH, SHANK)
    hip, knee = ff.leg_angles(xd, zd, THIGH, SHANK)
    exact = (THIGH * np.sin(hip) + SHANK * np.sin(hip - knee),
             -THIGH * np.cos(hip) - SHANK * np.cos(hip - knee))
    assert np.abs(exact[0] - xd).max() < 1e-9 and np.abs(exact[1] - zd).max() < 1e-9
    stance = PHASE < ff.STANCE
    assert np.abs(x - xd)[stance].max() < 2.5e-3
    assert np.abs(z - zd)[stance].max() < 2.5e-3
    # relative to the hip the stance ankle moves back at the walking speed
    v = np.diff(xd[stance]) / (np.diff(PHASE[stance]) * walk.period)
    assert v == pytest.approx(-speed, rel=1e-9)


def test_double_support_puts_both_feet_on_the_same_floor():
    """While both legs are in stance (a leg at φ, the other at φ + 0.5) their ankles are at
    one height below the hip once the heel has rolled flat: the loop through the floor closes
    without the joints fighting each other."""
    walk = ff.walk(0.4, 1.75)
    both = (PHASE >= ff.ROCKER) & (PHASE < ff.STANCE - 0.5)
    assert both.any()
    _, z_lead = ff.ankle_path(PHASE[both], walk.stride_length, THIGH, SHANK)
    _, z_trail = ff.ankle_path(PHASE[both] + 0.5, walk.stride_length, THIGH, SHANK)
    assert np.abs(z_lead - z_trail).max() < 1e-12


@pytest.mark.parametrize("speed", [0.3, 0.4, 0.8])
def test_the_pelvis_alone_asks_the_peaks_the_docs_give(speed):
    """The floor's largest reaction the pelvis motion alone asks, over what it carries
    (ff.pelvis_peak_load's closed form): against the pelvis height's own second derivative in
    time (finite differences), unsupported and with half the weight on a constant harness
    force — which doubles the swing about the carried weight. docs/world.md's figures: 1.15
    and 1.30 at 0.4 m/s, 1.49 and 1.98 at 0.8 m/s, beyond a walker's 1.0–1.3 whatever the
    drives."""
    walk = ff.walk(speed, 1.75)
    dt = walk.period / 20000
    t = np.arange(20000) * dt
    z = ff.pelvis_height(t / walk.period, walk.stride_length, THIGH, SHANK)
    zdd = (np.roll(z, -1) - 2.0 * z + np.roll(z, 1)) / dt ** 2  # (a periodic profile)
    alone = ff.pelvis_peak_load(speed, 1.75, THIGH, SHANK)
    half = ff.pelvis_peak_load(speed, 1.75, THIGH, SHANK, support=0.5)
    assert alone == pytest.approx(1.0 + zdd.max() / 9.81, rel=1e-4)
    assert half - 1.0 == pytest.approx(2.0 * (alone - 1.0), rel=1e-12)
    docs = {0.3: (1.10, 1.19), 0.4: (1.15, 1.30), 0.8: (1.49, 1.98)}[speed]
    assert (alone, half) == pytest.approx(docs, abs=0.005)


def test_swing_lifts_the_foot_and_the_knee_stays_in_range():
    """In swing the ankle is above the other (stance) leg's — the floor's height under the
    pelvis — by up to LIFT; the knee never straighter than KNEE_SWING, the joints inside the
    sized robot's range (hip −0.35…2.1, knee −0.10…2.1 rad)."""
    walk = ff.walk(0.4, 1.75)
    swing = PHASE > ff.STANCE
    _, z = ff.ankle_path(PHASE[swing], walk.stride_length, THIGH, SHANK)
    _, floor = ff.ankle_path(PHASE[swing] - 0.5, walk.stride_length, THIGH, SHANK)
    lift = z - floor
    assert lift.min() > -1e-9 and lift.max() == pytest.approx(ff.LIFT + ff.HEEL_ROCKER * 0.4,
                                                               abs=0.02)
    hip, knee = ff.leg_angles(*ff.ankle_path(PHASE, walk.stride_length, THIGH, SHANK),
                              THIGH, SHANK)
    assert knee.min() >= ff.KNEE_SWING - 1e-3
    assert knee.max() < 1.0 and -0.35 < hip.min() and hip.max() < 0.8


def test_a_stride_the_leg_cannot_reach_is_refused():
    with pytest.raises(ValueError, match="longer than a leg"):
        ff.ankle_path(PHASE, 3.0, THIGH, SHANK)


@pytest.mark.parametrize("step", [0.0, -0.3, float("nan")])
def test_a_step_length_that_is_no_length_is_refused(step):
    with pytest.raises(ValueError, match="not a positive length"):
        ff.walk(0.4, 1.75, step)


def _walk_trace(speed: float, stop: float, change: float | None = None,
                config: str = "configs/exo_2leg_world.yaml"):
    """The exo_2leg_world walk's reference (or ``config``'s) as the cycle makes it
    (exo_rt/cycle/segment.py), set up as the activity machine begins a walk from standing —
    its opening step, its strides, the closing step from the first half-stride boundary past
    ``stop`` strides: (phase, q_r (k, n), the walk) at 1 kHz. ``change``: a new speed (m/s)
    asked 0.7 strides in, as the machine asks it (the new gait and its closing steps in the
    NEXT slots, blended over the walk's ``speed_blend`` strides from the boundary at 1)."""
    from exo_rt.cycle import segment
    from exo_rt.cycle.layout import SCALARS, SEGMENT, V_QR, V_SEG_FROM, V_SEG_TO, V_WIDTH
    from exo_rt.runtime.config import load_top
    from exo_rt.session.session import gait_function, load_files

    top = load_top(config)
    _, acts, who = load_files(top)
    walk = next(m for m in acts.motions if m.kind == "walk")
    gaits = gait_function(top.robot, top.controller, who, acts.gait)
    rows, period, stride = gaits(speed, None)
    q0, q1 = acts.posture_q(walk.start), acts.posture_q(walk.end)
    n = len(q0)
    s, seg, v = np.zeros(1, SCALARS), np.zeros(1, SEGMENT), np.zeros((V_WIDTH, n))
    g = np.zeros((segment.SLOTS, n, rows.shape[1]))
    g[segment.SLOT_A] = g[segment.SLOT_B] = rows
    sg = seg[0]
    v[V_SEG_FROM], v[V_SEG_TO], v[V_QR] = q0, q1, q0
    sg["seg_go"] = sg["seg_rate"] = 1.0
    sg["seg_slew"] = segment.GO_OMEGA
    sg["a_kind"], sg["b_kind"] = segment.POSTURE, segment.GAIT_SOURCE
    sg["a_period"] = sg["b_period"] = sg["next_period"] = period
    sg["blend_len"], sg["closing_len"] = walk.opening, walk.closing
    steps = gaits.steps(rows, stride, walk, q0, q1)
    if steps:
        sg["a_kind"], sg["b_kind"] = segment.POSTURE_STEP, segment.GAIT_STEPS
        for slot, r in steps.items():
            g[slot] = r
    sg["seg_kind"] = segment.GAIT
    offsets = np.array(walk.phase_offsets, float)
    phase, q = [], []
    while not sg["seg_done"]:
        if change is not None and s[0]["phase"] >= 0.7:
            rows, period, stride = gaits(change, None)
            new = gaits.steps(rows, stride, walk, q0, q1)
            g[segment.SLOT_NEXT] = rows
            if new:
                g[segment.SLOT_NEXT_CLOSE] = new[segment.SLOT_CLOSE]
                g[segment.SLOT_NEXT_CLOSE_HALF] = new[segment.SLOT_CLOSE_HALF]
            sg["next_period"], sg["next_pending"] = period, 1.0
            sg["next_blend"] = walk.speed_blend(float(sg["b_period"]), period)
            change = None
        if s[0]["phase"] >= stop:
            sg["stop_req"] = 1.0
        segment.reference(s[0], sg, v, g, offsets, 1e-3)
        phase.append(float(s[0]["phase"]))
        q.append(v[V_QR].copy())
    return np.array(phase), np.array(q), walk


def _slide(plant: np.ndarray, step: np.ndarray) -> tuple[float, float]:
    """(the stepping ankle's largest horizontal travel while on the floor (m), its highest
    lift (m)), both seen from the planted ankle (the floor's origin): on the floor is within
    1 mm of the planted ankle's height or below it (the planted heel rolling flat)."""
    d = step - plant
    on = d[1] < 1e-3
    travel = 0.0
    for run in np.split(np.arange(len(on)), np.flatnonzero(np.diff(on)) + 1):
        if on[run[0]]:
            travel = max(travel, float(np.ptp(d[0, run])))
    return travel, float(d[1].max())


@pytest.mark.parametrize("speed", [0.2, 0.4, 0.5])
def test_the_opening_and_closing_steps_keep_the_planted_foot_still(speed):
    """The world walk's opening step (standing → the gait) and closing step (the gait →
    standing, from a whole and from a half stride boundary), by the joints' forward
    kinematics on the reference the cycle makes: the planted foot (the opening's left, the
    leg half a stride into its stance at its end; the closing's leg that has just landed) is
    the floor's origin, and the other foot, seen from it, does not slide while it is on the
    floor — within 2 mm (measured 0.10–0.16 mm opening, 0.34–0.61 mm closing) — and is
    lifted in between (a swing: 66 mm, 60 mm). The plain blend of the joint angles slid it
    6.9–11.9 cm in the opening and 2.1–3.6 cm in the closing with both feet on the floor,
    lifting it 2–3 cm (docs/world.md, "Walking on the floor")."""
    for stop, lead in ((1.2, 1), (1.7, 0)):  # (closing from 1.5: the right leg planted)
        phase, q, walk = _walk_trace(speed, stop)
        left = np.stack([THIGH * np.sin(q[:, 0]) + SHANK * np.sin(q[:, 0] - q[:, 1]),
                         -THIGH * np.cos(q[:, 0]) - SHANK * np.cos(q[:, 0] - q[:, 1])])
        right = np.stack([THIGH * np.sin(q[:, 2]) + SHANK * np.sin(q[:, 2] - q[:, 3]),
                          -THIGH * np.cos(q[:, 2]) - SHANK * np.cos(q[:, 2] - q[:, 3])])
        opening = phase < walk.opening
        travel, lift = _slide(left[:, opening], right[:, opening])
        assert travel < 2e-3 and lift > 0.04, ("opening", travel, lift)
        closing = phase >= math.ceil(2.0 * stop) / 2.0
        feet = (right, left) if lead else (left, right)
        travel, lift = _slide(feet[0][:, closing], feet[1][:, closing])
        assert travel < 2e-3 and lift > 0.04, ("closing", stop, travel, lift)


@pytest.mark.parametrize("stop", [1.2, 3.2])
def test_a_walk_whose_speed_changed_closes_with_its_new_gait_s_step(stop):
    """A speed asked during the walk (0.3 → 0.5 m/s, blended over the two strides after the
    next boundary) brings its closing steps with it (segment.SLOT_NEXT_CLOSE…, taken at that
    boundary): the closing after it keeps the planted foot still as the new gait's own does
    (0.61 mm) — from a whole stride boundary (the STOP at 1.2 waits for the blend: 3.0) and
    from a half (3.5)."""
    phase, q, walk = _walk_trace(0.3, stop, change=0.5)
    start = math.floor(2.0 * (phase[-1] - walk.closing)) / 2.0
    left = np.stack([THIGH * np.sin(q[:, 0]) + SHANK * np.sin(q[:, 0] - q[:, 1]),
                     -THIGH * np.cos(q[:, 0]) - SHANK * np.cos(q[:, 0] - q[:, 1])])
    right = np.stack([THIGH * np.sin(q[:, 2]) + SHANK * np.sin(q[:, 2] - q[:, 3]),
                      -THIGH * np.cos(q[:, 2]) - SHANK * np.cos(q[:, 2] - q[:, 3])])
    closing = phase >= start
    feet = (right, left) if start % 1.0 else (left, right)
    travel, lift = _slide(feet[0][:, closing], feet[1][:, closing])
    assert start > 1.5 and travel < 2e-3 and lift > 0.04, (start, travel, lift)


@pytest.mark.parametrize("stop", [2.6, 4.1])
def test_a_stop_in_a_one_leg_walk_s_long_speed_blend_closes_from_its_mix(stop):
    """The one-leg walk (configs/exo_leg_world.yaml: plain blends, its walk's
    ``stride_change`` 0.025) slowed from 0.4 to 0.3 m/s blends over 7 strides (the period's
    change 15.5 %: at most 2.5 % a stride). A STOP in that blend does not wait it out: the
    closing step begins at the next half-stride boundary from the blend's mix there
    (segment._mix) and the walk ends a closing step later — with q_r's second difference (q̈_r,
    and a step of q̇_r in one cycle would show there) within the flat-foot walk's own
    (the safety's reference_acceleration: 35 and 80 rad/s²), and the phase rate's change
    per cycle as small as the blend's own."""
    from exo_rt.control import flat_foot

    walk_b = flat_foot.walk(0.3, 1.75)
    phase, q, walk = _walk_trace(0.4, stop, change=0.3, config="configs/exo_leg_world.yaml")
    assert walk.speed_blend(flat_foot.walk(0.4, 1.75).period, walk_b.period) == 7.0
    closing_from = math.floor(2.0 * stop + 1.0) / 2.0
    assert phase[-1] == pytest.approx(closing_from + walk.closing, abs=2e-3), phase[-1]
    qdd = np.diff(q, 2, axis=0) / 1e-6
    assert np.abs(qdd[:, 0]).max() < 35.0 and np.abs(qdd[:, 1]).max() < 80.0, \
        np.abs(qdd).max(axis=0)
    rate = np.diff(phase)
    near = np.abs(phase[1:] - closing_from) < 0.01
    assert np.abs(np.diff(rate))[near[1:]].max() < 1e-8, np.abs(np.diff(rate))[near[1:]].max()


def _ankle_x(q: np.ndarray, hip: int) -> np.ndarray:
    """m: a leg's ankle forward of its hip (the joints' forward kinematics, pelvis upright)."""
    return THIGH * np.sin(q[:, hip]) + SHANK * np.sin(q[:, hip] - q[:, hip + 1])


@pytest.mark.parametrize("speeds", [(0.3, 0.5), (0.5, 0.3)])
def test_a_speed_change_never_pulls_the_planted_feet_apart(speeds):
    """While a speed change blends one gait into the other, in each double support (both feet
    planted, :data:`segment.DOUBLE_SUPPORT` after each heel strike) the two ankles keep their
    distance as a steady gait's do — within 1 mm (measured 0.37–0.47 mm, the steady gait's
    fit 0.42 mm). The blend's weight moves in single support only
    (``segment._single_support``): the two gaits put a planted foot at different places under
    the hip, and a weight that moved through double support pulled the feet 21.4 mm apart
    there (the plain minimum-jerk blend over one stride), which on the floor the joints fought
    through the pelvis: the crutch demo's hips reached the drive's 30 A at the heel strike."""
    from exo_rt.cycle import segment

    phase, q, _walk = _walk_trace(speeds[0], 1.0 + SPEED_BLEND + 0.2, change=speeds[1])
    apart = _ankle_x(q, 0) - _ankle_x(q, 2)
    spans = []
    for half in range(2, 2 + 2 * int(SPEED_BLEND)):  # the blend's double supports
        held = (phase >= half / 2.0) & (phase < half / 2.0 + segment.DOUBLE_SUPPORT)
        spans.append(float(np.ptp(apart[held])))
    assert len(spans) == 4 and max(spans) < 1e-3, spans


def test_the_speed_change_weight_is_smooth_and_held_in_double_support():
    """``segment._single_support`` over a two-stride blend: 0 before, 1 after, its slope and
    curvature the finite differences of its value and slope (q, q̇, q̈ of the blend are
    continuous), and still (no slope) in each double support."""
    from exo_rt.cycle import segment

    f = segment._single_support.py_func
    y = np.linspace(-0.1, 2.1, 22001)
    h = y[1] - y[0]
    w = np.array([f(t, 2.0) for t in y])
    assert w[0, 0] == 0.0 and w[-1, 0] == 1.0 and np.all(np.diff(w[:, 0]) >= 0.0)
    assert np.max(np.abs(np.gradient(w[:, 0], h) - w[:, 1])[2:-2]) < 1e-6
    assert np.max(np.abs(np.gradient(w[:, 1], h) - w[:, 2])[2:-2]) < 0.01
    frac = np.mod(y, 0.5)
    held = (y > 0.0) & (y < 2.0) & (frac < segment.DOUBLE_SUPPORT)
    assert np.all(w[held, 1] == 0.0) and np.all(w[held, 2] == 0.0)


@pytest.mark.parametrize("speeds", [(0.4, 0.3), (0.5, 0.3), (0.3, 0.5)])
def test_a_speed_change_s_angle_blend_keeps_the_swing_s_clearance(speeds):
    """A speed change blends the two gaits' joint angles by the cycle's weight
    (``segment._single_support``, SPEED_BLEND strides). On the gaits' design (the legs'
    forward kinematics, pelvis upright), wherever one leg swings over the other's planted
    foot, the swinging ankle's height over the floor stays within 1 mm of the steady gaits'
    (which is the same at every speed: the lift is made over the floor) — measured 0.22 mm
    (0.4 → 0.3 m/s) and 0.85 mm (0.5 ↔ 0.3) — and a blend of the ankles' paths instead
    would move it by 0.27 and 1.03 mm: the blend's geometry is not what lands a foot early
    (millimetres of pelvis are: docs/world.md, "A speed changed mid-walk")."""
    from exo_rt.cycle import segment

    weight = np.vectorize(segment._single_support.py_func)
    y = np.linspace(0.0, SPEED_BLEND, 4001)
    w = weight(y, SPEED_BLEND)[0]
    strides = [ff.walk(v, 1.75).stride_length for v in speeds]

    def ankles(phase):
        paths = [ff.ankle_path(phase, s, THIGH, SHANK) for s in strides]
        angles = [ff.leg_angles(x, z, THIGH, SHANK) for x, z in paths]
        hip = (1.0 - w) * angles[0][0] + w * angles[1][0]
        knee = (1.0 - w) * angles[0][1] + w * angles[1][1]
        z_angles = -THIGH * np.cos(hip) - SHANK * np.cos(hip - knee)
        z_paths = (1.0 - w) * paths[0][1] + w * paths[1][1]
        return z_angles, z_paths

    worst_steady = worst_paths = 0.0
    for off in (0.0, 0.5):
        me, other = np.mod(y + off, 1.0), np.mod(y + off + 0.5, 1.0)
        z, z_paths = ankles(me)
        floor = ankles(other)[0] - ff.heel_rocker(other)  # the planted foot's sole
        swing = (me >= ff.STANCE) & (other < ff.STANCE)
        steady = ff.ankle_path(me, strides[0], THIGH, SHANK)[1] - (
            ff.ankle_path(other, strides[0], THIGH, SHANK)[1] - ff.heel_rocker(other))
        worst_steady = max(worst_steady, float(np.abs((z - floor) - steady)[swing].max()))
        worst_paths = max(worst_paths, float(np.abs(z_paths - z)[swing].max()))
    assert worst_steady < 1e-3, worst_steady
    assert worst_paths < 1.1e-3, worst_paths
