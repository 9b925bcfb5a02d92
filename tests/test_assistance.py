"""Assistance that follows the wearer, measured on the simulated exoskeleton: model-in-the-loop
with a wearer who walks by themselves (exo_rt.sim.walker) — the gait-phase estimate against
their true phase, the assistance laws by what they do to the walk and to the wearer's effort
(docs/assistance.md has these figures; ``python tools/assistance_figures.py`` prints them).

The walker is firm (400 N·m/rad, 20 N·m·s/rad on every joint): with the swing impedance
measured on people (van der Kooij et al. 2022) they cannot move this exoskeleton's
non-back-drivable drives (tests/test_walker.py). The safety check's speed margin is off (the
knee's terminal-swing extension at a natural cadence comes within it of the soft limit)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from exo_rt.control.config import load_controller
from exo_rt.control.laws import profile_torque
from exo_rt.dynamics import Dynamics
from exo_rt.sim import mil
from exo_rt.sim.walker import Walker

ROOT = Path(__file__).resolve().parents[1]
CONTROLLERS = ROOT / "configs" / "controllers"
SAFETY = dataclasses.replace(mil.MIL_SAFETY, stop_time=1e-9)
FIRM = dict(stiffness={"*": 400.0}, damping={"*": 20.0})
N = 2  # joints of exo_leg
STRIDES = 12  # per cadence



def _walk(robot, exo, law, cadence, duration, **options):
    cfg = load_controller(CONTROLLERS / f"{law}.yaml", robot)
    walker = Walker(cadence=cadence, drop=options.pop("drop", 0.0), seed=3, **FIRM)
    r = mil.run_mil(robot, cfg, walker=walker, exo_model=exo, duration=duration,
                    safety_cfg=SAFETY, **options)
    o = mil.log_phase(N)
    true, est = r.log[:, o], r.log[:, o + 2]
    err = (est - true % 1.0 + 0.5) % 1.0 - 0.5  # strides
    return r, cfg, true, est, err


def _assistance(r, exo, joint=0):
    """The law's torque less the carried exoskeleton h_exo(q, q̇) (N·m), on the true state."""
    dyn = Dynamics(exo)
    log = r.log
    q, v = log[:, 1:1 + N], log[:, 1 + 5 * N:1 + 6 * N]
    tau = log[:, 1 + 3 * N:1 + 4 * N]
    carry = np.array([dyn.inverse_dynamics(q[k], v[k], np.zeros(N)) for k in range(len(q))])
    return tau[:, joint] - carry[:, joint]


@pytest.mark.slow
@pytest.mark.parametrize("drop", [0.0, 0.1], ids=["every heel strike", "10 % dropped"])
@pytest.mark.parametrize("period", [1.1, 1.5, 2.0])
def test_the_phase_estimate_follows_a_walker_through_cadence_steps(
        exo_leg, exo_leg_alone, period, drop):
    """Twelve strides (sixteen first) at each of three cadences, +20 % then −20 % steps of the
    stride
    period: within 5 % of the stride (RMS, per stride) in steady walking and from the third
    stride after a step; ≤ 0.16 rad at the heel strikes; the phase's step at the stride's
    wrap within 0.02 rad of a cycle's advance; no SAFE with 10 % of the strikes missed."""
    first = STRIDES + 4  # (the estimate starts from the controller file's 2 s stride)
    t1 = first * period
    t2 = t1 + STRIDES * 1.2 * period
    cadence = ((0.0, period), (t1, 1.2 * period), (t2, 0.96 * period))
    r, _, true, est, err = _walk(exo_leg, exo_leg_alone, "phase_profile", cadence,
                                 t2 + STRIDES * 0.96 * period, drop=drop)
    assert r.safe is None
    stride = np.floor(true)

    def rms(i):
        return np.sqrt(np.mean(err[stride == i] ** 2))

    steps = (first, first + STRIDES)
    steady = [i for b in (4, *steps) for i in range(b + 7, b + STRIDES)]
    assert max(rms(i) for i in steady) <= 0.05
    for b in steps:
        assert max(rms(i) for i in range(b + 2, b + STRIDES)) <= 0.05
    heel = r.log[:, mil.log_phase(N) + 1] > 0
    at_strike = np.abs(err[heel & np.isin(stride, steady)]) * 2 * math.pi
    assert len(at_strike) >= 0.8 * len(steady) and at_strike.max() <= 0.16
    step = np.diff(est)
    wrap = step < -0.5
    advance = np.median(step[~wrap])
    assert np.max(np.abs(step[wrap] + 1.0 - advance)) * 2 * math.pi <= 0.02


@pytest.fixture(scope="module")
def profile_walks(exo_leg, exo_leg_alone):
    """The shipped phase_profile, a walker at the exoskeleton's 2 s stride, 10 strides at
    level 1 and at level 0."""
    return {level: _walk(exo_leg, exo_leg_alone, "phase_profile", ((0.0, 2.0),), 20.0, level=level)
            for level in (1.0, 0.0)}


@pytest.mark.slow
def test_phase_profile_times_its_peak_and_tracks_its_profile(exo_leg_alone, profile_walks):
    r, cfg, true, _, _ = profile_walks[1.0]
    g = cfg.gains[0]
    assist = _assistance(r, exo_leg_alone)
    ideal = np.array([profile_torque(g, x % 1.0) for x in true])
    steady = true >= 4.0
    peak = max(abs(g["peak_torque"]), abs(g["peak_torque_2"]))
    assert np.sqrt(np.mean((assist[steady] - ideal[steady]) ** 2)) <= 0.10 * peak
    for onset, top, end in ((g["onset"], g["peak"], g["end"]),
                            (g["onset_2"], g["peak_2"], g["end_2"])):
        late = []
        for s in range(4, 9):
            m = (np.floor(true) == s) & (true % 1.0 >= onset) & (true % 1.0 <= end)
            late.append(true[m][np.argmax(assist[m])] % 1.0 - top)
        assert abs(np.mean(late)) <= 0.02 and np.max(np.abs(late)) <= 0.03, late


@pytest.mark.slow
def test_full_assistance_saves_the_wearer_at_least_30_percent_of_their_hip_effort(
        profile_walks):
    def effort(r, true):
        return np.sqrt(np.mean(r.log[true >= 4.0, 1 + 4 * N] ** 2))

    (r1, _, t1, _, _), (r0, _, t0, _, _) = profile_walks[1.0], profile_walks[0.0]
    assert effort(r1, t1) <= 0.70 * effort(r0, t0)


@pytest.mark.slow
@pytest.mark.parametrize("period", [1.1, 2.0])
def test_assistance_fades_within_a_stride_when_the_wearer_stands_still(
        exo_leg, exo_leg_alone, period):
    """The walker stops mid-lobe (at the second lobe's peak) and stands: from one stride on,
    less than 5 % of the peak (standing 2 s past that stride)."""
    cfg = load_controller(CONTROLLERS / "phase_profile.yaml", exo_leg)
    stop = (8 + cfg.gains[0]["peak_2"]) * period
    r, _, _, _, _ = _walk(exo_leg, exo_leg_alone, "phase_profile",
                          ((0.0, period), (stop, math.inf)),
                          stop + period + 2.0)
    t = r.log[:, 0]
    assist = _assistance(r, exo_leg_alone)
    peak = max(abs(cfg.gains[0]["peak_torque"]), abs(cfg.gains[0]["peak_torque_2"]))
    assert np.abs(assist[(t > stop - 0.05) & (t < stop)]).max() > 0.8 * peak
    assert np.abs(assist[t >= stop + period]).max() < 0.05 * peak


def test_assist_as_needed_is_zero_in_the_tunnel_and_a_spring_outside(exo_leg, exo_leg_alone):
    """A walker who walks the reference (its stride, its phase) stays inside the tunnel: no
    assistance at all. One 20 % slower drifts out of it: the law's torque outside is the
    file's spring on the excursion beyond the tunnel and its damper on the error's rate
    (both fitted within 5 %, where the damper is fully engaged and the limit not reached)."""
    cfg = load_controller(CONTROLLERS / "assist_as_needed.yaml", exo_leg)
    period = cfg.reference.period
    r, _, _, _, _ = _walk(exo_leg, exo_leg_alone, "assist_as_needed", ((0.0, period),), 3 * period)
    e = r.log[:, 1 + N:1 + 2 * N] - r.log[:, 1:1 + N]
    assert np.all(np.abs(e) < cfg.gains["tunnel"])
    for j in range(N):
        assert np.max(np.abs(_assistance(r, exo_leg_alone, j))) < 0.2  # N·m: the carry, computed
        # here on the true state, differs from the cycle's (measured, filtered q̇) a little
    r, _, _, _, _ = _walk(exo_leg, exo_leg_alone, "assist_as_needed", ((0.0, 1.2 * period),),
                          3 * period)
    e = r.log[:, 1 + N:1 + 2 * N] - r.log[:, 1:1 + N]
    g = cfg.gains[0]
    out = np.abs(e[:, 0]) - g["tunnel"]
    push = _assistance(r, exo_leg_alone, 0)
    de = np.gradient(r.log[:, 1 + N], 1e-3) - r.log[:, 1 + 5 * N]  # q̇_r − q̇
    spring = (out > 0.011) & (np.abs(push) < 0.9 * g["assist_limit"])
    assert spring.sum() > 200
    regressors = np.c_[np.sign(e[spring, 0]) * out[spring], de[spring]]
    (k, b), *_ = np.linalg.lstsq(regressors, push[spring], rcond=None)
    assert k == pytest.approx(g["stiffness"], rel=0.05)
    assert b == pytest.approx(g["damping"], rel=0.05)
    assert np.max(np.abs(push[out < -0.005])) < 0.2


def test_impedance_measured_from_a_perturbation_is_the_files(exo_leg, exo_leg_alone, tmp_path):
    """The hip's stiffness and damping fitted from its motion under a known perturbation
    torque (a sum of sines, 0.3–2.3 Hz, 60 N·m in all; the knee held by the wearer):
    τ_exo = M(q)q̈ + h(q, q̇) − τ_wearer on the true motion, less the carried exoskeleton,
    regressed on (θ_eq − q, −q̇, 1, −q̈): within 10 % of the file's."""
    k, b, eq = 60.0, 10.0, 0.25
    f = tmp_path / "impedance.yaml"
    f.write_text("law: impedance\njoints:\n"
                 f"  hip: {{stiffness: {k}, damping: {b}, equilibrium: {eq}, "
                 f"swing_stiffness: {k}, swing_damping: {b}, swing_equilibrium: {eq}}}\n"
                 "encoder: {source: motor, counts_per_rev: 65536}\n")
    cfg = load_controller(f, exo_leg)
    dt, duration = 1e-3, 14.0
    t = np.arange(int(round(duration / dt))) * dt
    rng = np.random.default_rng(1)
    push = np.zeros((len(t), N))
    for hz in (0.3, 0.7, 1.3, 2.3):
        push[:, 0] += 15.0 * np.sin(2 * np.pi * hz * t + rng.uniform(0, 2 * np.pi))
    push[t < 2.0] = 0.0
    walker = Walker(cadence=((0.0, 1.1), (0.25 * 1.1, math.inf)),
                    stiffness={"hip": 1e-3, "knee": 400.0}, damping={"hip": 1e-4, "knee": 20.0})
    r = mil.run_mil(exo_leg, cfg, walker=walker, exo_model=exo_leg_alone, duration=duration,
                    safety_cfg=SAFETY, external=push)
    assert r.safe is None
    log = r.log
    q, v, tw = log[:, 1:1 + N], log[:, 1 + 5 * N:1 + 6 * N], log[:, 1 + 4 * N:1 + 5 * N]
    a = np.gradient(v, dt, axis=0)
    full, alone = Dynamics(exo_leg), Dynamics(exo_leg_alone)
    idx = np.flatnonzero((t > 3.0) & (np.abs(v[:, 0]) > 0.1))[::4]  # (moving: a stuck
    # drive holds by its friction whatever the law asks)
    rendered = np.array([full.inverse_dynamics(q[i], v[i], a[i]) - tw[i]
                         - alone.inverse_dynamics(q[i], v[i], np.zeros(N)) for i in idx])[:, 0]
    regressors = np.c_[eq - q[idx, 0], -v[idx, 0], np.ones(len(idx)), -a[idx, 0]]
    (k_fit, b_fit, _, _), *_ = np.linalg.lstsq(regressors, rendered, rcond=None)
    assert k_fit == pytest.approx(k, rel=0.10)
    assert b_fit == pytest.approx(b, rel=0.10)


@pytest.mark.slow
def test_level_requests_apply_at_the_next_stride_boundary_ramped_and_recorded(tmp_path):
    """A session script asks 0 → 0.5 → 1 mid-walk (the exoskeleton walks the leg; the
    estimate follows its hip): each level holds until the estimated phase passes its next
    stride boundary, then ramps there over one stride (smoothly: no step larger than the
    smooth step's steepest), and every request's answer is in the session's events."""
    from tests.sessions_fixtures import run_session

    steps = [{"request": "start", "motion": "home", "at": 0.0},
             {"request": "confirm", "after": "rejected"},
             {"request": "start", "motion": "walk", "after": "finished"},
             {"request": "level", "value": 0.0, "at": 7.0},
             {"request": "level", "value": 0.5, "at": 12.3},
             {"request": "level", "value": 1.0, "at": 18.7},
             {"request": "stop", "at": 24.0},
             {"request": "end", "after": "finished"}]
    ctl, res = run_session(tmp_path, steps, duration=24.0)
    assert res.summary["final_state"] == "SHUTDOWN"
    log = ctl.log
    asked = [e for e in ctl.events if e["event"] == "request" and e["request"] == "level"]
    assert [(e["answer"], e["level"]) for e in asked] == [("accepted", 0.0),
                                                         ("accepted", 0.5),
                                                         ("accepted", 1.0)]
    level, phase = log["level"][:, 0], log["gait_phase"]
    hz = log["stride_hz"]
    wraps = np.flatnonzero(np.diff(phase) < -0.5) + 1
    for e, (before, after) in zip(asked, ((1.0, 0.0), (0.0, 0.5), (0.5, 1.0)), strict=True):
        k = e["cycle"]
        boundary = wraps[wraps > k][0]
        assert np.all(level[k:boundary] == before)
        done = boundary + np.flatnonzero(level[boundary:] == after)[0]
        stride = 1e3 / np.mean(hz[boundary:done])  # cycles, at the estimated frequency
        assert level[boundary] != before and done - boundary == pytest.approx(stride, abs=2)
        ramp = level[boundary:done + 1]
        assert np.max(np.abs(np.diff(ramp))) <= 1.5 * abs(after - before) / stride * 1.05


@pytest.mark.slow
@pytest.mark.parametrize("law", ["phase_profile", "impedance", "assist_as_needed"])
def test_the_shipped_assistance_controllers_run_on_the_simulated_exoskeleton(tmp_path, law):
    """`exo-rt run --controller LAW` end to end (the runtime's one cycle, the simulated bus,
    the record), the leg left where it is (the simulated bus has no wearer to walk it: the
    walker lives in model-in-the-loop): no fault, the estimate standing still at the end (the
    impedance's spring moves the hip for a moment first), every joint at
    full level, the windings warm only where a joint holds a spring; the impedance's spring
    takes the hip from 0 towards its stance equilibrium (0.25 rad, less its sag)."""
    import json
    import subprocess
    import sys

    from exo_rt.record.recorder import read_cycle_log

    out = tmp_path / "run"
    hold = tmp_path / "hold.yaml"  # the leg held where it starts, END at --duration (a
    # session still going then would run its 30 s of spare to the guard)
    hold.write_text("description: hold the start posture, 3 s\n"
                    "steps:\n  - {request: end, at: 3.0}\n")
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--controller", law,
                          "--config", str(ROOT / "configs" / "exo_leg.yaml"),  # the test stand
                          "--session", str(hold), "--duration", "3", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "final state SHUTDOWN" in res.stdout, res.stderr
    assert json.loads((out / "summary.json").read_text())["faults"] == []
    records, _ = read_cycle_log(out / "cycles.exolog")
    assert np.all(records["walking"][-1000:] == 0.0) and np.all(records["level"][-1] == 1.0)
    assert np.all(records["derate"] == 1.0) and records["winding"].max() < 40.0
    if law == "impedance":
        assert 0.15 < records["q"][-1, 0] < 0.25
    else:  # the exoskeleton carries itself: the leg at rest stays
        assert np.max(np.abs(records["q"][-1] - records["q"][0])) < 0.01
