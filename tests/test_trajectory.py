"""References: normal gait (smooth across cycles, matches the published data), minimum jerk,
gait phase from heel strikes."""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.control import trajectory

# gaitutils 0.13.9 data/normal.gcd: hip and knee flexion (deg) at 0, 10, …, 90 % of the gait cycle
DATA = {"hip": [33.5, 31.6, 22.4, 9.9, -0.6, -7.8, -8.0, 10.5, 27.9, 34.4],
        "knee": [0.4, 11.7, 14.9, 7.9, 1.8, 3.0, 20.6, 57.2, 61.0, 30.7]}


def _eval(coeffs, phase, period=1.0):
    n = coeffs.shape[0]
    q, qd, qdd = np.zeros(n), np.zeros(n), np.zeros(n)
    trajectory.gait(phase, period, coeffs, q, qd, qdd)
    return q, qd, qdd


def test_gait_reference_reproduces_the_published_curves():
    coeffs = trajectory.gait_coefficients(["hip", "knee"], ["hip", "knee"])
    ours = np.array([np.degrees(_eval(coeffs, phase)[0]) for phase in np.arange(10) / 10])
    for j, joint in enumerate(("hip", "knee")):
        res = ours[:, j] - np.array(DATA[joint])
        assert np.sqrt(np.mean(res**2)) < 0.5 and np.abs(res).max() < 1.0, res


@pytest.mark.parametrize("period", [1.0, 2.0])
def test_gait_reference_is_smooth_across_cycle_boundaries(period):
    coeffs = trajectory.gait_coefficients(["hip", "knee"], ["hip", "knee"], amplitude=0.8)
    eps = 1e-9
    for boundary in (1.0, 2.0, 7.0):
        a = _eval(coeffs, boundary - eps, period)
        b = _eval(coeffs, boundary + eps, period)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x, y, atol=1e-5)
    # derivatives are the time derivatives (central differences in time)
    t, h = 0.37 * period, 1e-5
    q1, qd1, qdd1 = _eval(coeffs, (t - h) / period, period)
    q2, qd2, qdd2 = _eval(coeffs, (t + h) / period, period)
    _, qd, qdd = _eval(coeffs, t / period, period)
    np.testing.assert_allclose((q2 - q1) / (2 * h), qd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose((qd2 - qd1) / (2 * h), qdd, rtol=1e-6, atol=1e-6)


def test_amplitude_scales_the_excursion_about_the_mean():
    full = trajectory.gait_coefficients(["k"], ["knee"], 1.0)
    half = trajectory.gait_coefficients(["k"], ["knee"], 0.5)
    for phase in np.linspace(0, 1, 7):
        qf, _, _ = _eval(full, phase)
        qh, _, _ = _eval(half, phase)
        assert qh[0] - half[0, 0] == pytest.approx(0.5 * (qf[0] - full[0, 0]))


def test_a_moves_endpoints_are_exact_and_its_peak_speed_15_8_of_the_mean():
    """The session's minimum-jerk move (exo_rt/cycle/segment.py, Flash & Hogan 1985): from
    the start posture with zero velocity, through the middle at 15/8 of the mean speed, to the
    end posture exactly (then held)."""
    from exo_rt.cycle import segment
    from exo_rt.cycle.layout import SCALARS, SEGMENT, V_QDR, V_QR, V_SEG_FROM, V_SEG_TO, V_WIDTH

    q0, q1, dt, big_t = np.array([0.1, -0.3]), np.array([0.6, 0.9]), 1e-3, 1.5
    s, seg, v = np.zeros(1, SCALARS), np.zeros(1, SEGMENT), np.zeros((V_WIDTH, 2))
    v[V_SEG_FROM], v[V_SEG_TO] = q0, q1
    seg[0]["seg_kind"], seg[0]["seg_duration"] = segment.MOVE, big_t
    seg[0]["seg_rate"] = seg[0]["seg_go"] = 1.0
    seg[0]["seg_slew"] = segment.GO_OMEGA
    gaits = np.zeros((segment.SLOTS, 2, 11))
    qr, qdr = [], []
    for _ in range(1600):
        segment.reference(s[0], seg[0], v, gaits, np.zeros(2), dt)
        qr.append(v[V_QR].copy())
        qdr.append(v[V_QDR].copy())
    qr, qdr = np.array(qr), np.array(qdr)
    assert np.abs(qr[0] - q0).max() < 1e-6 and np.abs(qdr[0]).max() < 1e-4
    np.testing.assert_allclose(qr[749], (q0 + q1) / 2, atol=1e-12)  # τ = 0.75 s
    np.testing.assert_allclose(qdr[749], 1.875 * (q1 - q0) / big_t, rtol=1e-9)
    assert seg[0]["seg_done"] == 1.0 and seg[0]["seg_kind"] == segment.HOLD
    np.testing.assert_array_equal(qr[-1], q1)
    assert not qdr[-1].any()


def test_phase_from_heel_strikes_tracks_the_stride_period():
    state = np.array([0.0, 1.2, 0.0])
    for k in range(30):
        trajectory.phase_on_heel_strike(state, 1.5 * k, 0.5, 3.0, 0.3)
    assert state[trajectory.PH_PERIOD] == pytest.approx(1.5, rel=1e-3)
    assert trajectory.phase_from_events(state, 1.5 * 29 + 0.75) == pytest.approx(0.5, rel=1e-3)
    assert trajectory.phase_from_events(state, 1.5 * 29 + 5.0) == pytest.approx(0.999)
    trajectory.phase_on_heel_strike(state, 1.5 * 29 + 0.05, 0.5, 3.0, 0.3)  # implausible: ignored
    assert state[trajectory.PH_PERIOD] == pytest.approx(1.5, rel=1e-3)


def test_the_start_position_is_the_gait_at_phase_zero_bit_for_bit():
    """What a cycle's set-up holds before RUN (computed in Python, not compiled) is the
    reference's first sample, to the bit: sessions and replay start where the gait starts."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        coeffs = rng.normal(0.0, 0.3, (4, 1 + 2 * trajectory.MAX_HARMONICS))
        coeffs[:, rng.integers(1, coeffs.shape[1], 3)] = 0.0  # (harmonics the gait skips)
        q = np.zeros(4)
        trajectory.gait(0.0, 1.1, coeffs, q, np.zeros(4), np.zeros(4))
        assert trajectory.start_position(coeffs).tobytes() == q.tobytes()
