"""Activities files (exo_rt/session/activities.py): the shipped postures lie inside the soft
limits and the shipped moves peak at most at their speeds; the helpers the activity machine
uses (posture_of, possible, index, move_duration); every mistake is one line with file:line
and a fix."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.session.activities import PEAK, default_path, leg_of, load_activities

ROOT = Path(__file__).resolve().parents[1]
MARGIN = 0.02  # rad: the safety's default joint_margin


@pytest.fixture(scope="module")
def robots():
    return {name: load_mechanism(ROOT / "configs" / "robots" / f"{name}.yaml")
            for name in ("exo_leg", "exo_2leg", "exo_12dof")}


@pytest.mark.parametrize("name", ["exo_leg", "exo_2leg", "exo_12dof"])
def test_shipped_postures_and_moves_fit_the_robot(robots, name):
    robot = robots[name]
    act = load_activities(default_path(name), robot)
    assert act.joint_names == robot.joint_names
    assert list(act.postures) == ["standing", "sitting"]
    n = robot.nq
    for q in act.postures.values():
        assert q.shape == (n,) and not q.flags.writeable
        assert np.all(q >= robot.lower + MARGIN) and np.all(q <= robot.upper - MARGIN)
    hips = [i for i, j in enumerate(robot.joint_names) if j.endswith("hip") or j == "hip"]
    knees = [i for i, j in enumerate(robot.joint_names) if j.endswith("knee")]
    np.testing.assert_allclose(act.posture_q("standing")[hips], 0.0, atol=0)
    np.testing.assert_allclose(act.posture_q("standing")[knees], 0.05, atol=1e-15)
    np.testing.assert_allclose(act.posture_q("sitting")[hips], 0.90, atol=1e-15)
    np.testing.assert_allclose(act.posture_q("sitting")[knees], 1.30, atol=1e-15)
    others = sorted(set(range(n)) - set(hips) - set(knees))
    assert np.all(act.posture_q("sitting")[others] == 0.0)
    assert act.names == ("stand_up", "walk", "sit_down", "home")
    for m in act.motions:
        assert act.index(m.name) == m.index == act.names.index(m.name)
    up, walk, down, home = act.motions
    # stand up / sit down: minimum-jerk, the knee's 1.25 rad peaking at 0.5 rad/s
    for m, a, b in ((up, "sitting", "standing"), (down, "standing", "sitting")):
        assert (m.kind, m.start, m.end, m.hold_go, m.stoppable) == ("move", a, b, True, False)
        assert m.duration == pytest.approx(PEAK * 1.25 / 0.5, abs=1e-12)  # 4.69 s
        delta = np.abs(act.posture_q(b) - act.posture_q(a))
        assert np.max(PEAK * delta / m.duration) <= 0.5 + 1e-12
        assert act.move_duration(m, act.posture_q(a)) == pytest.approx(4.6875, abs=1e-12)
    assert (walk.kind, walk.start, walk.end, walk.hold_go, walk.stoppable) == \
        ("walk", "standing", "standing", False, True)
    assert (walk.opening, walk.closing, walk.duration) == (0.5, 0.5, None)
    right = [leg_of(j) == "right" for j in robot.joint_names]
    np.testing.assert_array_equal(walk.phase_offsets, np.where(right, 0.5, 0.0))
    assert (home.kind, home.start, home.end, home.max_speed) == ("home", None, "standing", 0.2)
    assert home.needs_confirm and not up.needs_confirm


def test_the_helpers_the_machine_uses(robots):
    robot = robots["exo_2leg"]
    act = load_activities(default_path("exo_2leg"), robot)
    assert act.legs == ("left", "right")
    assert act.possible("standing") == ("walk", "sit_down")
    assert act.possible("sitting") == ("stand_up",)
    assert act.possible(None) == ("home",)
    assert act.possible("kneeling") == ()
    # q = 0 (the simulated leg's start): the knees 0.05 rad from standing, within 0.10
    assert act.posture_of(robot.neutral()) == "standing"
    sit = act.posture_q("sitting")
    assert act.posture_of(sit + 0.099) == "sitting"
    assert act.posture_of(sit + np.array([0, 0, 0, 0.101])) is None
    assert act.posture_of(sit + 0.03, tolerance=0.02) is None
    assert act.motion("walk").name == "walk" and act.motion("fly") is None
    with pytest.raises(KeyError, match="no motion 'fly'.*stand_up, walk, sit_down, home"):
        act.index("fly")
    # homing: the farthest joint's excursion at 0.2 rad/s, at least 1 s
    q = np.array([1.0, 0.05, -0.2, 0.6])
    assert act.move_duration("home", q) == pytest.approx(PEAK * 1.0 / 0.2, abs=1e-12)
    assert act.move_duration("home", act.posture_q("standing")) == 1.0
    with pytest.raises(ValueError, match="walk"):
        act.move_duration("walk", q)
    assert (leg_of("left_hip_abduction"), leg_of("knee"), leg_of("left")) == ("left", "", "")


def test_posture_of_allocates_nothing(robots):
    act = load_activities(default_path("exo_2leg"), robots["exo_2leg"])
    q = np.zeros(4)
    act.posture_of(q)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            act.posture_of(q)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1024, grown  # bytes after 2000 calls: nothing kept per call


def test_a_wearer_s_postures_replace_the_file_s_joint_by_joint(robots):
    robot = robots["exo_2leg"]
    act = load_activities(default_path("exo_2leg"), robot,
                          postures={"sitting": {"hip": 1.45, "right_knee": 1.5}})
    np.testing.assert_array_equal(act.posture_q("sitting"), [1.45, 1.30, 1.45, 1.50])
    # the move's duration follows: the right knee moves 1.45 rad
    assert act.motion("stand_up").duration == pytest.approx(PEAK * 1.45 / 0.5, abs=1e-12)
    with pytest.raises(ConfigError, match="unknown posture 'siting'.*did you mean 'sitting'"):
        load_activities(default_path("exo_2leg"), robot, postures={"siting": {"hip": 1.0}})
    with pytest.raises(ConfigError, match=r"left_knee 2\.09 rad is outside the soft limits "
                                          r"-0\.08…2\.08"):
        load_activities(default_path("exo_2leg"), robot, postures={"sitting": {"knee": 2.09}})


GOOD = """\
tolerance: 0.1
postures:
  standing: {hip: 0.0, knee: 0.05}
  sitting: {hip: 1.40, knee: 1.40}
motions:
  stand_up: {kind: move, from: sitting, to: standing, duration: 6.0, hold_go: true}
  walk: {kind: walk, from: standing, to: standing}
  home: {kind: home, to: standing, max_speed: 0.2}
"""


@pytest.mark.parametrize(("old", "new", "words"), [
    ("from: sitting, to: standing, duration", "from: siting, to: standing, duration",
     ["unknown posture 'siting' in 'from'", "did you mean 'sitting'"]),
    ("walk: {kind: walk, from: standing, to: standing}",
     "walk: {kind: walk, from: standing, to: standin}", ["unknown posture 'standin' in 'to'"]),
    ("sitting: {hip: 1.40, knee: 1.40}", "sitting: {hip: 1.40, kne: 1.40}",
     ["unknown joint 'kne'", "did you mean 'knee'"]),
    ("sitting: {hip: 1.40, knee: 1.40}", "sitting: {hip: 1.40, knee: 2.09}",
     ["posture 'sitting': knee 2.09 rad is outside the soft limits -0.08…2.08 rad",
      "within -0.08…2.08"]),
    ("standing: {hip: 0.0, knee: 0.05}", "standing: {hip: -0.34, knee: 0.05}",
     ["hip -0.34 rad is outside the soft limits -0.33…2.08"]),
    ("kind: move, from: sitting, to: standing, duration: 6.0",
     "kind: move, to: standing, duration: 6.0", ["motion 'stand_up' (move) has no 'from'"]),
    ("kind: move, from: sitting, to: standing, duration: 6.0,",
     "kind: move, from: sitting, to: standing,",
     ["has neither 'duration' nor 'max_speed'"]),
    ("home: {kind: home, to: standing, max_speed: 0.2}", "home: {kind: home, to: standing}",
     ["motion 'home' (home) has no 'max_speed'"]),
    ("duration: 6.0", "duration: 0", ["duration 0 is not above 0"]),
    ("duration: 6.0", "duration: -1.5", ["duration -1.5 is not above 0"]),
    ("duration: 6.0", "duration: 0.3",  # 1.875·1.40/0.3 = 8.75 rad/s > the hip's 6
     ["hip peaks at 8.75 rad/s over 0.3 s, above its velocity limit 6 rad/s",
      "at least 0.438 s"]),
    ("max_speed: 0.2", "max_speed: 7", ["homing move's max_speed 7 rad/s is above the ceiling "
                                        "0.2 rad/s"]),
    ("to: standing}\n  home", "to: standing, duration: 2.0}  #<\n  home",
     ["a walk takes no 'duration'"]),
    ("duration: 6.0, hold_go", "duration: 6.0, opening: 0.5, hold_go",
     ["a move takes no 'opening'"]),
    ("kind: home, to: standing,", "kind: home, from: sitting, to: standing,",
     ["a home takes no 'from'"]),
    ("to: standing}\n  home", "to: standing, stoppable: false}  #<\n  home",
     ["a walk must be stoppable"]),
    ("to: standing}\n  home", "to: standing, phase_offsets: {right: 0.5}}  #<\n  home",
     ["unknown joint or leg 'right'"]),
    ("to: standing}\n  home", "to: standing, opening: 3}  #<\n  home",
     ["opening 3 is out of range"]),
    ("duration: 6.0, hold_go", "duration: 6.0, stride_change: 0.02, hold_go",
     ["a move takes no 'stride_change'"]),
    ("to: standing}\n  home", "to: standing, stride_change: 0}  #<\n  home",
     ["stride_change 0 is"]),
    ("kind: walk", "kind: stroll", ["unknown motion kind 'stroll'"]),
    ("tolerance: 0.1", "tolerance: 0.1\nrobot: exo_leg  #<", ["unknown key 'robot'"]),
    ("kind: move, from: sitting, to: standing, duration: 6.0",
     "kind: move, from: standing, to: standing, duration: 6.0",
     ["moves from 'standing' to the same angles"]),
])
def test_mistakes_are_one_line_with_file_and_line(tmp_path, robots, old, new, words):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    lines = text.splitlines()
    mark = "#<" if "#<" in new else new  # the line the error names: the one changed
    line = next(i for i, s in enumerate(lines, 1) if mark in s)
    path = tmp_path / "act.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_activities(path, robots["exo_leg"])
    msg = str(err.value)
    assert f"{path}:{line}: " in msg and " — " in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


def test_legs_and_kinds_name_joints_the_more_specific_winning(tmp_path, robots):
    path = tmp_path / "act.yaml"
    path.write_text(GOOD.replace("sitting: {hip: 1.40, knee: 1.40}",
                                 "sitting: {right_hip: 1.2, hip: 1.40, knee: 1.40}")
                    .replace("walk: {kind: walk, from: standing, to: standing}",
                             "walk: {kind: walk, from: standing, to: standing, "
                             "phase_offsets: {right_knee: 0.25, right: 0.5, hip: 0.1}}"))
    act = load_activities(path, robots["exo_2leg"])
    np.testing.assert_array_equal(act.posture_q("sitting"), [1.40, 1.40, 1.2, 1.40])
    # a joint's name over its kind over its leg
    np.testing.assert_array_equal(act.motion("walk").phase_offsets, [0.1, 0.0, 0.1, 0.25])
    assert act.motion("stand_up").stoppable is False and act.motion("walk").stoppable is True
    assert act.motion("home").duration == 1.0
    # a margin of the top config's own
    with pytest.raises(ConfigError, match="outside the soft limits"):
        load_activities(path, robots["exo_2leg"], margin=0.71)


def test_a_walks_speed_blend_keeps_the_stride_period_s_change_per_stride(tmp_path, robots):
    """``stride_change`` 0.025: 0.4 → 0.3 m/s (1.971 → 2.276 s, 15.5 %) over 7 strides, 0.5 →
    0.3 (1.763 → 2.276 s, 29.1 %) over 12, a change of 0.5 % over the least, 2; without the
    key every change blends over 2 strides."""
    path = tmp_path / "act.yaml"
    path.write_text(GOOD.replace("walk: {kind: walk, from: standing, to: standing}",
                                 "walk: {kind: walk, from: standing, to: standing, "
                                 "stride_change: 0.025}"))
    walk = next(m for m in load_activities(path, robots["exo_leg"]).motions if m.kind == "walk")
    assert walk.stride_change == 0.025
    assert walk.speed_blend(1.971, 2.276) == 7.0
    assert walk.speed_blend(2.276, 1.971) == 6.0  # (13.4 % of the slower period)
    assert walk.speed_blend(1.763, 2.276) == 12.0
    assert walk.speed_blend(2.0, 2.01) == 2.0
    path.write_text(GOOD)
    plain = next(m for m in load_activities(path, robots["exo_leg"]).motions if m.kind == "walk")
    assert plain.stride_change == 0.0 and plain.speed_blend(1.971, 2.276) == 2.0


def test_a_long_speed_blend_on_a_walk_with_floor_steps_is_refused(tmp_path):
    """``stride_change`` on the two-leg walk on the floor (configs/exo_2leg_world.yaml): its
    opening and closing steps are made on the floor for one gait, so a STOP asked in a speed
    change's blend waits for the blend's end — refused at load at the key's line (0.5 → 0.2
    m/s would blend over 24 strides, 67 s before a STOP's closing step could begin); the
    one-leg walk (configs/exo_leg_world.yaml), whose STOP closes from the blend's mix, keeps
    its 0.025."""
    from exo_rt.runtime.config import load_top
    from exo_rt.session.session import check_lines

    text = (ROOT / "configs" / "activities" / "exo_2leg_sized.yaml").read_text()
    walk = "walk: {kind: walk, from: standing, to: standing,"
    assert text.count(walk) == 1
    path = tmp_path / "act.yaml"
    path.write_text(text.replace(walk, walk + " stride_change: 0.025,"))
    line = 1 + next(i for i, ln in enumerate(text.splitlines()) if walk in ln)
    with pytest.raises(ConfigError, match=r"0.5 → 0.2 m/s would blend over 24 strides") as e:
        check_lines(load_top(ROOT / "configs" / "exo_2leg_world.yaml"), activities=str(path))
    assert f"{path}:{line}" in str(e.value) and "leave stride_change out" in str(e.value)
    one_leg = load_top(ROOT / "configs" / "exo_leg_world.yaml")
    assert check_lines(one_leg)  # (its walk's stride_change 0.025: the report, no error)
