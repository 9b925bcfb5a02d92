"""Wearer profiles (exo_rt/session/wearer.py, schema exo_rt/schema/wearer.py): the shipped
profiles load against the robots they are for, the default profile is the robot file's wearer
and reads back from its own text, joint and leg names resolve as in controller files, and
every inconsistency is one line with file:line, key and fix."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest

from exo_rt.control import gait_speed
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.session.wearer import Wearer, default_wearer, load_wearer

ROOT = Path(__file__).resolve().parents[1]
WEARERS = ROOT / "configs" / "wearers"


@pytest.fixture(scope="module")
def leg():
    return load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")


@pytest.fixture(scope="module")
def legs():
    return load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml")


def _values(w: Wearer) -> dict:
    return {f.name: getattr(w, f.name) for f in dataclasses.fields(w)
            if f.name not in ("source", "description", "sha256", "text")}


def test_the_default_profile_loads_against_both_robots(leg, legs):
    path = WEARERS / "default.yaml"
    for mech in (leg, legs):
        w = load_wearer(path, mech)
        assert (w.height, w.mass, w.sex) == (1.75, 75.0, "male")
        assert (w.speed.min, w.speed.max, w.speed.default) == (0.2, 0.6, 0.4)
        assert w.speed.presets == (0.3, 0.4, 0.5)
        assert w.text == path.read_text(encoding="utf-8")
        assert w.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert w.source == str(path)
        lower, upper = w.limits(mech)  # no ranges of motion: the robot's limits
        np.testing.assert_array_equal(lower, mech.lower)
        np.testing.assert_array_equal(upper, mech.upper)
        assert w.level("") == w.level("left") == 1.0
        assert w.posture("sitting", mech) == {}


def test_default_wearer_is_the_robot_files_wearer_and_reads_back(tmp_path, leg, legs):
    shipped = load_wearer(WEARERS / "default.yaml", leg)
    for mech in (leg, legs):
        w = default_wearer(mech)
        assert w.source == "" and mech.name in w.description
        assert _values(w) == _values(shipped)  # docs: the same values as default.yaml
        assert w.sha256 == hashlib.sha256(w.text.encode()).hexdigest()
        path = tmp_path / "wearer.yaml"  # what the run folder keeps
        path.write_text(w.text, encoding="utf-8")
        back = load_wearer(path, mech)
        assert _values(back) == _values(w) and back.sha256 == w.sha256
        assert back.description == w.description


def test_default_wearer_needs_a_wearer_section():
    arm = load_mechanism(ROOT / "configs" / "robots" / "arm2_planar.yaml")
    with pytest.raises(ConfigError, match=r"arm2_planar.yaml: wearer: the robot file has no "
                                          r"wearer section — add a 'wearer:' section"):
        default_wearer(arm)


def test_the_example_resolves_kinds_legs_and_postures(leg, legs):
    w = load_wearer(WEARERS / "example.yaml", legs)
    lower, upper = w.limits(legs)  # left_hip, left_knee, right_hip, right_knee
    np.testing.assert_array_equal(lower, [-0.25, 0.0, -0.25, 0.0])
    np.testing.assert_array_equal(upper, [1.9, 1.9, 1.9, 1.9])
    assert w.rom(legs, "right_") == {"hip": (-0.25, 1.9), "knee": (0.0, 1.9)}
    assert (w.level("left"), w.level("left_"), w.level("right")) == (0.6, 0.6, 1.0)
    assert w.posture("sitting", legs) == {"left_hip": 1.45, "right_hip": 1.45,
                                          "left_knee": 1.5, "right_knee": 1.5}
    assert w.posture("standing", legs) == {"left_knee": 0.10, "right_knee": 0.10}
    walk = w.walk(0.3, legs)
    thigh, shank = gait_speed.leg_lengths(legs, "left_")
    assert walk == gait_speed.walk(0.3, 1.62, thigh, shank)
    assert w.walk(0.3, legs, step_length=0.3).step_length == pytest.approx(0.3)
    with pytest.raises(ValueError, match="knee from .* outside its range of motion 0.000"):
        w.walk(0.6, legs, step_length=0.68)  # the robot allows it, her knees do not
    with pytest.raises(ConfigError, match="unknown leg 'left'.*the robot has one leg"):
        load_wearer(WEARERS / "example.yaml", leg)


@pytest.mark.parametrize(("robot", "text", "words"), [
    (None, "heigth: 1.75  #<\nmass: 75\nsex: male\n", ["unknown key 'heigth'",
                                                      "did you mean 'height'"]),
    (None, "height: 175  #<\nmass: 75\nsex: male\n", ["wearer height 175", "in metres"]),
    (None, "height: 1.75  #<\nmass: 75\n", ["has no 'sex'"]),  # the mapping's line
    (None, "height: 1.75\nmass: 75\nsex: male\nspeed:\n  min: 0.2\n  default: 0.9  #<\n",
     ["speed.default 0.9 m/s is outside speed.min … speed.max"]),
    (None, "height: 1.75\nmass: 75\nsex: male\nspeed:\n  presets:\n    - 0.3\n    - 0.9  #<\n",
     ["speed preset 0.9 m/s is outside", "give presets within the range"]),
    (None, "height: 1.75\nmass: 75\nsex: male\nspeed:\n  presets: []  #<\n",
     ["speed.presets is empty"]),
    (None, "height: 1.75\nmass: 75\nsex: male\nstep_length:\n  min: 0.25\n  max: 0.45  #<\n",
     ["at speed.max 0.6 m/s a 1.75 m tall wearer's steps are 0.483 m",
      "raise step_length.max to ≥ 0.48 m"]),
    (None, "height: 1.75\nmass: 75\nsex: male\nstep_length:\n  min: 0.3  #<\n",
     ["at speed.min 0.2 m/s", "0.279 m", "lower step_length.min to ≤ 0.28 m"]),
    (None, "height: 1.75\nmass: 75\nsex: male\nrange_of_motion:\n  knee: {lower: 1, upper: 0.5}"
           "  #<\n", ["range of motion of 'knee': lower 1 rad is not below upper 0.5 rad"]),
    (None, "height: 1.75\nmass: 75\nsex: male\nassistance: {default: 1.5}  #<\n",
     ["1.5 is out of range (outside 0…1)"]),
    ("leg", "height: 1.75\nmass: 75\nsex: male\nrange_of_motion:\n  knee:\n    lower: 0\n"
            "    upper: 2.5  #<\n",
     ["upper 2.5 rad is outside the robot's limits of 'knee' (-0.1 … 2.1 rad)",
      "give at most 2.1 rad"]),
    ("leg", "height: 1.75\nmass: 75\nsex: male\nrange_of_motion:\n  ankle: {lower: 0, upper: 1}"
            "  #<\n", ["range of motion of unknown joint 'ankle'", "the robot's joints are hip, "
                       "knee"]),
    ("legs", "height: 1.75\nmass: 75\nsex: male\npostures:\n  sitting: {left_hipp: 1.5}  #<\n",
     ["posture 'sitting' names unknown joint 'left_hipp'", "did you mean 'left_hip'"]),
    ("legs", "height: 1.75\nmass: 75\nsex: male\nrange_of_motion:\n  knee: {lower: 0, upper: 1.4}"
             "\npostures:\n  sitting: {knee: 1.5}  #<\n",
     ["posture 'sitting': left_knee at 1.5 rad is outside its range 0 … 1.4 rad"]),
    ("legs", "height: 1.75\nmass: 75\nsex: male\nassistance:\n  legs: {lefft: 0.5}  #<\n",
     ["assistance for unknown leg 'lefft'", "did you mean 'left'"]),
    ("leg", "height: 1.75\nmass: 75\nsex: male\nrange_of_motion:\n  knee: {lower: 0, upper: 2}\n"
            "step_length:\n  max: 0.7  #<\n",
     ["step_length.max 0.7 m is beyond the leg 'exo_leg'", "needs the knee from -0.0",
      "lower the speed or the step length"]),
])
def test_bad_profiles_are_one_line_with_file_line_and_fix(tmp_path, leg, legs, robot, text,
                                                          words):
    path = tmp_path / "wearer.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_wearer(path, {"leg": leg, "legs": legs, None: None}[robot])
    msg = str(err.value)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "#<" in s)
    assert f"{path}:{line}: " in msg and " — " in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


def test_the_shipped_profiles_validate_without_a_robot():
    for path in sorted(WEARERS.glob("*.yaml")):
        w = load_wearer(path)
        assert w.speed.min <= w.speed.default <= w.speed.max, path
