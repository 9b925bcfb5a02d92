"""The gait-phase estimate's heel-strike clock (exo_rt.control.phase_estimate; docs/
assistance.md, "The gait-phase estimate"): a foot's strikes as a real foot switch reports
them — bounces after the landing, a walk's shorter opening step, a missed strike, a stop —
driven through :func:`update` on a synthetic hip, one control cycle at a time (fast: no plant).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from exo_rt.control import phase_estimate as pe

DT = 0.001  # s: the control cycle
SEED = 2.0  # s: the session's stride the estimate starts from
DEFAULTS = dict(nu_phase=2.0, nu_freq=0.6, eta=0.35, heel_gain=0.5, slew=0.002,
                speed_tau=0.25, still_speed=0.1, walk_speed=0.3)  # the schema's defaults


def _hip(phase):
    """A hip flexion curve (rad) unlike a sine: a plateau and a short flexion peak, as the
    floor's flat-foot walk has (docs/world.md) — the oscillator alone wanders on it."""
    x = 2.0 * math.pi * phase
    return 0.35 * math.sin(x + 0.4) + 0.15 * math.sin(2.0 * x + 1.0) + 0.08 * math.sin(3.0 * x)


def _run(strikes, duration, stride, walk_from=0.0, walk_to=math.inf):
    """The estimate over ``duration`` s on a wearer walking ``stride`` s strides between
    ``walk_from`` and ``walk_to`` (the hip still outside), heel strikes at ``strikes`` (s).
    Returns (t, true phase, estimate's phase, its state at the end)."""
    p = pe.params(0, 2.0 * math.pi / SEED, 0.0, **DEFAULTS)
    st = np.zeros(1, pe.STATE)
    pe.reset(p, st)
    n = int(round(duration / DT))
    t = np.arange(n) * DT
    true = np.clip((np.minimum(t, walk_to) - walk_from) / stride, 0.0, None)
    q, qd = np.zeros(1), np.zeros(1)
    k_strike = set(int(round(s / DT)) for s in strikes)
    est = np.zeros(n)
    for k in range(n):
        q[0] = _hip(true[k])
        walking = walk_from <= t[k] < walk_to
        qd[0] = (_hip(true[k] + DT / stride) - q[0]) / DT if walking else 0.0
        pe.update(p, st, q, qd, 1.0 if k in k_strike else 0.0, DT)
        est[k] = st[0]["phase"]
    return t, true, est, st[0]


def _err(true, est):
    return (est - true % 1.0 + 0.5) % 1.0 - 0.5  # strides


def test_bounces_after_a_landing_are_no_strides():
    """Each landing re-crosses the sole's threshold 0.1 and 0.3 s later (0.05, 0.15 of a 2 s
    stride): the estimate takes one strike a stride, keeps the stride time within 1 % and its
    phase within 2 % of the stride RMS from the third stride on. Taking the bounces (no
    refractory time) would restart the stride 0.3 s late every stride."""
    stride = 2.0
    landings = [i * stride for i in range(1, 10)]
    strikes = sorted(landings + [s + 0.1 for s in landings] + [s + 0.3 for s in landings])
    t, true, est, e = _run(strikes, 10 * stride, stride)
    assert e["heels"] == len(landings)
    assert e["period"] == pytest.approx(stride, rel=0.01)
    late = true >= 3.0
    assert np.sqrt(np.mean(_err(true, est)[late] ** 2)) < 0.02


def test_a_walks_opening_step_and_a_missed_strike_leave_the_stride_time():
    """A walk from standing at 1.8 s strides whose first strike comes 0.6 of a stride in (the
    opening step), and one strike later missed: the opening interval is no stride (after the
    first full stride the seed's 2 s has moved towards 1.8 s, not towards 1.08 s); through
    the missed strike the clock runs on; the phase is within 3 % of the stride RMS after the
    third stride, the missed one included."""
    stride = 1.8
    *_, e = _run([0.6 * stride, stride, 2 * stride], 2 * stride + 0.1, stride)
    assert e["period"] == pytest.approx(0.5 * (SEED + stride), rel=0.01)
    strikes = [0.6 * stride] + [i * stride for i in range(1, 12) if i != 7]
    t, true, est, e = _run(strikes, 12 * stride, stride)
    assert e["period"] == pytest.approx(stride, rel=0.01)
    late = true >= 3.0
    assert np.sqrt(np.mean(_err(true, est)[late] ** 2)) < 0.03
    gap = (true >= 6.0) & (true < 8.0)  # the missed strike's strides: the clock went on
    assert np.max(np.abs(_err(true, est)[gap])) < 0.05


def test_a_new_cadence_is_taken_when_two_strides_agree():
    """Strides step from 2.0 s to 1.4 s (30 % shorter, beyond the 15 % a single interval
    moves): after two strides at the new cadence the stride time is the new one."""
    strikes = [i * 2.0 for i in range(1, 6)] + [10.0 + i * 1.4 for i in range(1, 8)]
    *_, e = _run(strikes, 10.0 + 7 * 1.4 + 0.5, 2.0)
    assert e["period"] == pytest.approx(1.4, rel=0.02)


def test_the_phase_never_runs_backwards_and_never_jumps():
    """Strides 5 % longer and 5 % shorter in turn, so each strike finds the clock early or
    late: the correction is spread over the next cycles — the phase never goes back, and no
    cycle's step (the wraps unwrapped) is more than three times the stride's rate."""
    stride = 1.5
    times, t0 = [], 0.0
    for i in range(12):
        t0 += stride * (0.95 if i % 2 else 1.05)
        times.append(t0)
    t, true, est, e = _run(times, t0 + 1.0, stride)
    step = np.diff(est)
    step[step < -0.5] += 1.0  # the wraps
    assert step.min() >= -1e-12
    assert step.max() <= 3.0 * DT / (0.9 * stride)  # at most 3× the stride's rate


def test_a_stop_reseeds_the_stride_time_and_the_oscillator_leads_without_strikes():
    """A walk at 1.3 s strides, then standing still: the stride time goes back to the
    session's (the next walk starts from it) and the clock to the oscillator; with no strikes
    at all the phase is the oscillator's."""
    stride = 1.3
    strikes = [i * stride for i in range(1, 8)]
    *_, e = _run(strikes, 8 * stride + 4.0, stride, walk_to=8 * stride)
    assert e["walking"] < pe.STILL
    assert e["period"] == pytest.approx(SEED) and e["walk_heels"] == 0
    *_, e = _run([], 20.0, stride)
    assert e["heels"] == 0
    assert abs((e["phase"] - e["osc"] + 0.5) % 1.0 - 0.5) < 0.01


def test_the_strikes_lead_where_the_oscillator_misses_them():
    """A hip whose curve runs at 2.2 s strides under a foot striking every 1.8 s (the hip's
    curve no guide to the foot, as the floor's flat-foot walk's is not to the oscillator):
    the oscillator misses the strikes, and the phase is the strikes' clock — within 3 % of
    the foot's stride RMS from the fourth stride on."""
    stride = 1.8
    p = pe.params(0, 2.0 * math.pi / SEED, 0.0, **DEFAULTS)
    st = np.zeros(1, pe.STATE)
    pe.reset(p, st)
    n = int(round(12 * stride / DT))
    q, qd = np.zeros(1), np.zeros(1)
    strikes = {int(round(i * stride / DT)) for i in range(1, 13)}
    true, est = np.arange(n) * DT / stride, np.zeros(n)
    for k in range(n):
        hip = k * DT / 2.2
        q[0], qd[0] = _hip(hip), (_hip(hip + DT / 2.2) - _hip(hip)) / DT
        pe.update(p, st, q, qd, 1.0 if k in strikes else 0.0, DT)
        est[k] = st[0]["phase"]
    assert st[0]["agree"] < pe.AGREED
    late = true >= 4.0
    assert np.sqrt(np.mean(_err(true, est)[late] ** 2)) < 0.03
