"""Walking parameters (exo_rt/control/gait_speed.py): the stride-length definition in closed
form, the walk ratio's cadence/step split, the amplitude fit, measuring a recorded walk with
the same definition, the robot's leg lengths, refusals, and docs/config-wearer.md's table."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from exo_rt.control import gait_speed as gs
from exo_rt.control.trajectory import MAX_HARMONICS, gait, gait_coefficients
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism

ROOT = Path(__file__).resolve().parents[1]
THIGH, SHANK = 0.43, 0.42  # configs/robots/modules/exo_leg_module.yaml
SPEEDS = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]


def _rows(hip_a1: float = 0.0, knee_a0: float = 0.0):
    """Coefficient rows: the hip swinging ±hip_a1 (cos 2πφ), the knee fixed at knee_a0."""
    h, k = np.zeros(1 + 2 * MAX_HARMONICS), np.zeros(1 + 2 * MAX_HARMONICS)
    h[1], k[0] = hip_a1, knee_a0
    return h, k


@pytest.mark.parametrize("theta", [0.1, 0.3, 0.6])
def test_stride_of_a_straight_leg_swinging_is_4_L_sin_theta(theta):
    h, k = _rows(theta)
    assert gs.stride_length(h, k, THIGH, SHANK) == pytest.approx(
        4 * (THIGH + SHANK) * math.sin(theta), rel=1e-12)


def test_stride_of_a_bent_knee_leg_in_closed_form():
    # x = L_t sin q + L_s sin(q − κ), q = ±θ: stride = 4 sinθ (L_t + L_s cos κ)
    theta, kappa = 0.35, 0.5
    h, k = _rows(theta, kappa)
    assert gs.stride_length(h, k, THIGH, SHANK) == pytest.approx(
        4 * math.sin(theta) * (THIGH + SHANK * math.cos(kappa)), rel=1e-12)


def test_ankle_position_in_closed_form():
    assert gs.ankle_x(0.0, 0.0, THIGH, SHANK) == pytest.approx(0.0, abs=1e-15)
    # thigh horizontal forward, shank hanging straight down: the ankle under the knee
    assert gs.ankle_x(math.pi / 2, math.pi / 2, THIGH, SHANK) == pytest.approx(THIGH)
    # knee flexion bends the shank backwards
    assert gs.ankle_x(0.0, 0.4, THIGH, SHANK) == pytest.approx(-SHANK * math.sin(0.4))


def test_kinematic_stride_grows_with_the_amplitude():
    a = np.linspace(0.0, gs.MAX_AMPLITUDE, 151)
    s = [gs.stride_length(*gait_coefficients(["h", "k"], ["hip", "knee"], x), THIGH, SHANK)
         for x in a]
    assert s[0] == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.diff(s) > 0)
    assert s[100] == pytest.approx(1.216, abs=0.001)  # amplitude 1: the shipped gait


def test_walk_ratio_split_and_the_2_s_pace():
    cadence, step = gs.cadence_and_step(0.4, 1.75)
    assert step * cadence / 60 == pytest.approx(0.4, rel=1e-12)
    assert step / cadence == pytest.approx(gs.WALK_RATIO_PER_HEIGHT * 1.75, rel=1e-12)
    w = gs.walk(0.4, 1.75, THIGH, SHANK)
    assert w.period == pytest.approx(2.0, abs=0.05)  # 1.971 s
    assert w.stride_length / w.period == pytest.approx(0.4, rel=1e-12)
    for height in (1.55, 1.62, 1.75, 1.85):  # adults of usual stature (the band is theirs)
        for v in SPEEDS:
            w = gs.walk(v, height, THIGH, SHANK)
            lo, hi = gs.WALK_RATIO_BAND
            assert lo <= w.step_length / w.cadence <= hi, (height, v)


def test_speed_gives_monotone_stride_cadence_and_amplitude():
    walks = [gs.walk(v, 1.75, THIGH, SHANK) for v in SPEEDS]
    for key in ("stride_length", "cadence", "amplitude"):
        values = [getattr(w, key) for w in walks]
        assert np.all(np.diff(values) > 0), (key, values)
    assert np.all(np.diff([w.period for w in walks]) < 0)


@pytest.mark.parametrize("v", SPEEDS)
def test_the_fitted_amplitude_gives_the_requested_stride(v):
    w = gs.walk(v, 1.75, THIGH, SHANK)
    h, k = gait_coefficients(["h", "k"], ["hip", "knee"], w.amplitude)
    assert gs.stride_length(h, k, THIGH, SHANK) == pytest.approx(w.stride_length, abs=1e-9)
    assert 0 < w.amplitude <= gs.MAX_AMPLITUDE


def test_an_explicit_step_length_sets_the_cadence():
    w = gs.walk(0.4, 1.75, THIGH, SHANK, step_length=0.35)
    assert w.step_length == pytest.approx(0.35, rel=1e-12)
    assert w.cadence == pytest.approx(60 * 0.4 / 0.35, rel=1e-12)
    assert w.amplitude < gs.walk(0.4, 1.75, THIGH, SHANK).amplitude  # shorter than 0.394 m


def _record(w, dt: float = 1e-3, strides: float = 6.3, start: float = 0.27):
    """The reference at w, sampled every dt s (the compiled gait kernel the cycle runs)."""
    coeffs = gait_coefficients(["hip", "knee"], ["hip", "knee"], w.amplitude)
    n = int(strides * w.period / dt)
    phase = start + np.arange(n) * dt / w.period
    q = np.zeros((n, 2))
    qd, qdd = np.zeros(2), np.zeros(2)
    for i, p in enumerate(phase):
        gait(p, w.period, coeffs, q[i], qd, qdd)
    return q[:, 0], q[:, 1], phase


@pytest.mark.parametrize("v", [0.2, 0.4, 0.8])
def test_measuring_the_reference_returns_the_requested_stride_and_cadence(v):
    w = gs.walk(v, 1.75, THIGH, SHANK)
    hip, knee, phase = _record(w)
    for p in (phase, phase % 1.0):  # unbounded, or wrapped at each heel strike
        stride, cadence = gs.measure(hip, knee, p, 1e-3, THIGH, SHANK)
        assert stride == pytest.approx(w.stride_length, rel=0.005)
        assert cadence == pytest.approx(60 / w.period, rel=0.005)  # strides/min
        assert stride * cadence / 60 == pytest.approx(v, rel=0.005)


def test_measure_sees_a_shorter_stride_and_refuses_a_short_record():
    w = gs.walk(0.5, 1.75, THIGH, SHANK)
    hip, knee, phase = _record(w)
    stride, _ = gs.measure(0.9 * (hip - hip.mean()) + hip.mean(), knee, phase, 1e-3, THIGH,
                           SHANK)
    assert stride < 0.95 * w.stride_length
    with pytest.raises(ValueError, match="no whole stride"):
        gs.measure(hip[:1500], knee[:1500], phase[:1500], 1e-3, THIGH, SHANK)
    with pytest.raises(ValueError, match="one-dimensional"):
        gs.measure(hip, knee[:-1], phase, 1e-3, THIGH, SHANK)


def test_unreachable_requests_are_refused_with_what_and_how():
    longest = gs.stride_length(*gait_coefficients(["h", "k"], ["hip", "knee"],
                                                  gs.MAX_AMPLITUDE), THIGH, SHANK)
    with pytest.raises(ValueError, match=r"beyond the gait's reach.*lower the speed"):
        gs.walk(0.5, 1.75, THIGH, SHANK, step_length=longest / 2 + 0.01)
    with pytest.raises(ValueError, match="not a positive speed"):
        gs.walk(0.0, 1.75, THIGH, SHANK)
    with pytest.raises(ValueError, match="not a positive speed"):
        gs.walk(-0.3, 1.75, THIGH, SHANK, step_length=0.4)
    with pytest.raises(ValueError, match="not a positive length"):
        gs.walk(0.4, 1.75, THIGH, SHANK, step_length=0.0)
    with pytest.raises(ValueError, match="not a person's"):
        gs.cadence_and_step(0.4, 175.0)  # centimetres
    # the knee must not extend past straight: a 0.65 m step needs it to −0.02 rad
    rom = {"hip": (-0.35, 2.1), "knee": (0.0, 2.1)}
    gs.walk(0.8, 1.75, THIGH, SHANK, rom=rom)  # 0.56 m steps: the knee stays above 0.04 rad
    with pytest.raises(ValueError, match=r"knee from -0\.0\d+ to .* outside its range"):
        gs.walk(0.8, 1.75, THIGH, SHANK, step_length=0.65, rom=rom)


def test_excursion_is_the_reference_range():
    ex = gs.excursion(1.0)
    assert math.degrees(ex["hip"][0]) == pytest.approx(-9.8, abs=0.1)
    assert math.degrees(ex["knee"][1]) == pytest.approx(64.1, abs=0.1)
    small = gs.excursion(0.5)
    means = gait_coefficients(["h", "k"], ["hip", "knee"])[:, 0]
    for kind, mean in zip(("hip", "knee"), means, strict=True):
        assert small[kind][1] - small[kind][0] == pytest.approx(
            0.5 * (ex[kind][1] - ex[kind][0]), rel=1e-3)
        assert small[kind][0] == pytest.approx(mean + 0.5 * (ex[kind][0] - mean), abs=1e-3)


@pytest.mark.parametrize(("robot", "prefix"), [("exo_leg", ""), ("exo_2leg", "left_"),
                                               ("exo_2leg", "right_"), ("exo_12dof", "left_")])
def test_leg_lengths_from_the_joint_origins(robot, prefix):
    mech = load_mechanism(ROOT / "configs" / "robots" / f"{robot}.yaml")
    assert gs.leg_lengths(mech, prefix) == pytest.approx((0.43, 0.42), abs=1e-12)


def test_leg_lengths_errors_name_the_legs():
    mech = load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml")
    assert gs.leg_prefixes(mech) == ["left_", "right_"]
    with pytest.raises(ConfigError, match=r"exo_2leg.yaml: the robot has no joint 'knee'.*"
                                          r"'left_', 'right_'"):
        gs.leg_lengths(mech)
    arm = load_mechanism(ROOT / "configs" / "robots" / "arm2_planar.yaml")
    with pytest.raises(ConfigError, match="no joints named"):
        gs.leg_lengths(arm)


def test_docs_table_is_the_codes():
    """docs/config-wearer.md's "Walking speed" table: `python -m exo_rt.session.wearer
    configs/robots/exo_leg.yaml`."""
    text = (ROOT / "docs" / "config-wearer.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (0\.\d0) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                      r"([\d.]+) \|$", text, re.M)
    assert [float(r[0]) for r in rows] == [0.2, 0.3, 0.4, 0.5, 0.6]
    for r in rows:
        w = gs.walk(float(r[0]), 1.75, THIGH, SHANK)
        assert float(r[1]) == pytest.approx(w.cadence, abs=0.05)  # printed to 0.1
        assert [float(x) for x in r[2:]] == pytest.approx(
            [w.period, w.step_length, w.stride_length, w.amplitude], abs=5e-4)  # to 0.001


def test_a_legs_lengths_are_read_from_the_robot_file_once(monkeypatch):
    """A fixed ankle's origin comes from the robot file (the loader lumps it): read once per
    mechanism — a speed asked mid-walk needs the lengths inside the control cycle, where no
    file is read (it was 25 ms of YAML there)."""
    from pathlib import Path

    from exo_rt.control import gait_speed
    from exo_rt.model import load_mechanism

    reads = []
    real = gait_speed._fixed_origin
    monkeypatch.setattr(gait_speed, "_fixed_origin", lambda *a: reads.append(a) or real(*a))
    root = Path(__file__).resolve().parents[1]
    mech = load_mechanism(root / "configs" / "robots" / "exo_2leg_sized.yaml")
    first = [gait_speed.leg_lengths(mech, p) for p in ("left_", "right_")]
    again = [gait_speed.leg_lengths(mech, p) for p in ("left_", "right_")]
    assert first == again and len(reads) == 2  # (one per leg, the first time)
    assert first[0][0] == pytest.approx(0.43) and first[0][1] == pytest.approx(0.42)


@pytest.mark.parametrize("gait", ["normal", "flat_foot"])
def test_each_pace_is_made_once(monkeypatch, gait):
    """The session's gait function makes a pace's rows once (the load's checks make every
    walk speed the wearer's presets name; the activity machine then asks for them inside the
    cycle: the flat-foot gait's fit was 28 ms there)."""
    from pathlib import Path

    from exo_rt.control import flat_foot, trajectory
    from exo_rt.runtime.config import load_top
    from exo_rt.session.session import gait_function
    from exo_rt.session.wearer import default_wearer

    made = []
    for mod, name in ((flat_foot, "gait_rows"), (trajectory, "gait_coefficients")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _r=real, **k: made.append(1) or _r(*a, **k))
    root = Path(__file__).resolve().parents[1]
    top = load_top(root / "configs" / "exo_2leg_world.yaml")
    gaits = gait_function(top.robot, top.controller, default_wearer(top.robot), gait)
    a, b, c = gaits(0.4, None), gaits(0.4, None), gaits(0.3, None)
    assert a is b and c is not a and len(made) == 2
    assert c[1] > a[1]  # s: slower, a longer stride period
