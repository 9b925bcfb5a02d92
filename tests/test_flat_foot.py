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
