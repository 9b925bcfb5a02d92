"""The assistance laws and the level, on the controller's own cycle (docs/assistance.md):
each law's torque against its formula, written independently here; the level's change at
the estimated stride boundary, ramped over a stride, recorded."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from exo_rt.control.config import load_controller
from exo_rt.cycle import segment
from exo_rt.cycle import step as cy
from exo_rt.cycle.layout import (
    V_LEVEL,
    V_LEVEL_ASKED,
    V_LEVEL_FROM,
    V_LEVEL_TO,
    V_Q_PREV,
    V_SEG_TO,
    V_SETTLE,
    V_TAU,
)
from exo_rt.cycle.states import RUN
from exo_rt.dynamics import Dynamics
from exo_rt.record.recorder import cycle_columns
from exo_rt.sim.mil import MIL_SAFETY

ROOT = Path(__file__).resolve().parents[1]
CONTROLLERS = ROOT / "configs" / "controllers"



def _cycle(robot, exo, name):
    cfg = load_controller(CONTROLLERS / f"{name}.yaml", robot)
    c = cy.build(robot, exo, cfg, MIL_SAFETY, dt=1e-3, history=1)
    c.s["state"] = RUN
    return c, cfg


def _torque(c, q, qd, qr=None):
    """One cycle of the controller's step at (q, q̇) (the velocity estimate bypassed: the
    sample repeats, so that the estimate keeps q̇ as set)."""
    c.q[:] = q
    c.v[V_Q_PREV] = q
    c.qd[:] = qd
    c.v[V_SETTLE] = 1.0  # (this sample only re-anchors the estimate: q̇ stays)
    if qr is not None:
        c.seg["seg_kind"] = segment.HOLD  # the session holds …
        c.v[V_SEG_TO] = qr  # … at qr
    cy.step(c.model, c.data)
    return c.v[V_TAU].copy()


def _carry(exo, q, qd):
    return Dynamics(exo).inverse_dynamics(q, qd, np.zeros(len(q)))


def _lobe(x, onset, peak, end):
    """The lobe written out: cubic 0 → 1 from onset to peak, 1 → 0 to end (strides)."""
    rise, fall, u = (peak - onset) % 1, (end - peak) % 1, (x - onset) % 1
    if u < rise:
        s = u / rise
        return 3 * s**2 - 2 * s**3
    if u < rise + fall:
        s = (u - rise) / fall
        return 1 - (3 * s**2 - 2 * s**3)
    return 0.0


def test_phase_profile_is_the_carried_exoskeleton_plus_the_lobes_at_the_phase(
        exo_leg, exo_leg_alone):
    c, cfg = _cycle(exo_leg, exo_leg_alone, "phase_profile")
    g = cfg.gains[0]
    q, qd = np.array([0.3, 0.4]), np.array([1.0, -0.5])
    worst = 0.0
    for phase in np.linspace(0.0, 0.999, 37):
        est = c.gait[0]
        est["phase"], est["walking"] = phase, 1.0
        est["speed2"] = 1.0  # (walking: the hip's RMS speed 1 rad/s)
        tau = _torque(c, q, qd)
        # the estimate ran one cycle before the law: the law saw its phase
        seen = c.gait[0]["phase"]
        want = _carry(exo_leg_alone, q, qd)
        want[0] += (g["peak_torque"] * _lobe(seen, g["onset"], g["peak"], g["end"])
                    + g["peak_torque_2"] * _lobe(seen, g["onset_2"], g["peak_2"], g["end_2"]))
        worst = max(worst, abs(tau[0] - want[0]), abs(tau[1] - want[1]))
    assert worst < 1e-9


def test_a_lobe_peaks_where_the_file_says_and_is_zero_outside(exo_leg, exo_leg_alone):
    from exo_rt.control.laws import profile_torque

    cfg = load_controller(CONTROLLERS / "phase_profile.yaml", exo_leg)
    g = cfg.gains[0]
    x = np.linspace(0, 1, 100001)[:-1]
    tau = np.array([profile_torque(g, p) for p in x])
    for onset, peak, end, torque in ((g["onset"], g["peak"], g["end"], g["peak_torque"]),
                                     (g["onset_2"], g["peak_2"], g["end_2"],
                                      g["peak_torque_2"])):
        inside = (x >= onset) & (x <= end)
        assert x[inside][np.argmax(tau[inside])] == pytest.approx(peak, abs=1e-5)
        assert tau[inside].max() == pytest.approx(torque, rel=1e-12)
    outside = ((x > g["end"] + 1e-9) & (x < g["onset_2"] - 1e-9)) | (x > g["end_2"] + 1e-9)
    assert np.all(tau[outside] == 0.0)
    # smooth, no step: the cubic's steepest slope is 1.5 × torque / the shortest half-lobe
    shortest = min((g["peak"] - g["onset"]) % 1, (g["end"] - g["peak"]) % 1,
                   (g["peak_2"] - g["onset_2"]) % 1, (g["end_2"] - g["peak_2"]) % 1)
    steepest = 1.5 * max(abs(g["peak_torque"]), abs(g["peak_torque_2"])) / shortest
    assert np.max(np.abs(np.diff(tau))) <= steepest * 1e-5 * 1.0001


def test_assist_as_needed_adds_nothing_inside_the_tunnel_and_a_spring_outside(
        exo_leg, exo_leg_alone):
    c, cfg = _cycle(exo_leg, exo_leg_alone, "assist_as_needed")
    g = cfg.gains
    qr = np.array([0.3, 0.5])
    qd = np.zeros(2)
    inside = qr + 0.9 * g["tunnel"] * np.array([1, -1])
    tau = _torque(c, inside, qd, qr)
    assert np.max(np.abs(tau - _carry(exo_leg_alone, inside, qd))) < 1e-9
    for excursion in (0.02, 0.05):
        q = qr - (g["tunnel"] + excursion)
        tau = _torque(c, q, qd, qr)
        push = tau - _carry(exo_leg_alone, q, qd)
        want = np.minimum(g["stiffness"] * excursion, g["assist_limit"])
        assert push == pytest.approx(want, rel=1e-9)
    q = qr + 1.0  # far outside: the limit, pulling back
    push = _torque(c, q, qd, qr) - _carry(exo_leg_alone, q, qd)
    assert push == pytest.approx(-g["assist_limit"], rel=1e-9)


def test_impedance_is_the_stance_spring_standing_and_the_swing_spring_in_swing(
        exo_leg, exo_leg_alone):
    c, cfg = _cycle(exo_leg, exo_leg_alone, "impedance")
    g = cfg.gains
    q, qd = np.array([0.1, 0.2]), np.array([0.5, -0.3])
    tau = _torque(c, q, qd)  # standing: walking = 0 (the hip's speed never built up)
    assert c.gait[0]["walking"] == 0.0
    want = g["stiffness"] * (g["equilibrium"] - q) - g["damping"] * qd
    assert tau - _carry(exo_leg_alone, q, qd) == pytest.approx(want, rel=1e-9)


def test_a_level_waits_for_the_stride_boundary_then_ramps_over_a_stride(exo_leg, exo_leg_alone):
    from exo_rt.cycle import assistance

    c, _ = _cycle(exo_leg, exo_leg_alone, "phase_profile")
    s, v, est = c.s, c.v, np.zeros(1, c.gait.dtype)
    e = est[0]
    e["omega"], e["walking"] = 2 * math.pi / 1.0, 1.0  # walking, a stride a second
    v[V_LEVEL] = v[V_LEVEL_TO] = 0.0
    v[V_LEVEL_ASKED] = 0.5
    s["level_pending"] = 1.0
    for _ in range(300):  # mid-stride: nothing yet
        assistance.level_update(s, v, e, 1e-3)
    assert np.all(v[V_LEVEL] == 0.0)
    e["wrapped"] = 1.0  # the boundary
    levels = []
    for _ in range(1001):
        assistance.level_update(s, v, e, 1e-3)
        e["wrapped"] = 0.0
        levels.append(v[V_LEVEL, 0])
    levels = np.array(levels)
    assert levels[499] == pytest.approx(0.25, abs=0.002)  # half-way: the smooth step's middle
    assert levels[-2] == pytest.approx(0.5, abs=1e-6) and levels[-1] == 0.5
    assert np.max(np.diff(levels)) < 1.5 * 0.5 / 1000 * 1.01  # 3x²−2x³'s slope ≤ 1.5
    e["walking"] = 1.0  # a request during a ramp: the ramp keeps its end …
    e["wrapped"] = 1.0
    v[V_LEVEL_ASKED] = 0.0
    s["level_pending"], s["level_ramp"] = 1.0, 0.0
    v[V_LEVEL_FROM], v[V_LEVEL_TO] = 0.5, 1.0
    assistance.level_update(s, v, e, 1e-3)  # (this boundary takes it: now from here to 0)
    e["wrapped"] = 0.0
    v[V_LEVEL_ASKED] = 0.8
    s["level_pending"] = 1.0
    before = v[V_LEVEL, 0]
    for _ in range(200):
        assistance.level_update(s, v, e, 1e-3)
        assert abs(v[V_LEVEL, 0] - before) < 1.5 * 0.5 / 1000 * 1.01  # … no step
        before = v[V_LEVEL, 0]
    assert v[V_LEVEL_TO, 0] == 0.0 and s["level_pending"] == 1.0  # (waits for the next)
    e["walking"] = 0.0  # standing: a new level starts at once
    v[V_LEVEL_ASKED] = 1.0
    s["level_ramp"], v[V_LEVEL] = 1.0, 0.5
    s["level_pending"] = 1.0
    assistance.level_update(s, v, e, 1e-3)
    assert 0.5 < v[V_LEVEL, 0] < 0.5 + 1e-5


def test_the_record_carries_the_estimate_and_the_level(exo_leg, exo_leg_alone):
    c, _ = _cycle(exo_leg, exo_leg_alone, "phase_profile")
    cols = cycle_columns(exo_leg.nq)
    c.set_hist(np.zeros((1, c.width)))
    c.s["hist"] = 0.0
    c.v[V_LEVEL] = [0.3, 0.7]
    _torque(c, np.array([0.2, 0.1]), np.zeros(2))
    row = c.hist[0]
    a, b = cols["level"]
    assert list(row[a:b]) == [0.3, 0.7]
    assert row[cols["stride_hz"][0]] == pytest.approx(c.gait[0]["omega"] / (2 * math.pi))
    assert row[cols["gait_phase"][0]] == c.gait[0]["phase"]
