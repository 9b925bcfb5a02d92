"""Session scripts (exo_rt/session/script.py): the shipped scripts' steps fall due in the
cycles their times and events say — the default run walks for --duration, the buttons'
session runs through against a stand-in for the activity machine —, a script stalled by a
refusal says which step, nothing is allocated while nothing is due, and every mistake is one
line with file:line and a fix."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.session.activities import default_path as activities_path
from exo_rt.session.activities import load_activities
from exo_rt.session.script import EMPTY, ScriptSource, default_path, load_session
from firmware_bridge import requests as rq

ROOT = Path(__file__).resolve().parents[1]
DT = 0.001  # s: the control period (1 kHz)


@pytest.fixture(scope="module")
def activities():
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    return load_activities(activities_path("exo_leg"), robot)


def _names(reqs):
    return [(r.cycle, rq.KINDS[r.kind], r.motion, r.value) for r in reqs]


def test_the_default_run_homes_walks_for_its_duration_then_stops_and_ends(activities):
    session = load_session(default_path(), activities)
    src = ScriptSource(session, duration=10.0, dt=DT)
    first = src.poll(0)
    assert _names(first) == [(0, "start", "home", None)]
    assert first[0].source == rq.SCRIPT
    src.notify(rq.Answer(rq.REJECTED, rq.START, rq.R_NEEDS_CONFIRM, motion="home"), 0)
    assert _names(src.poll(1)) == [(1, "confirm", None, None)]  # the operator's confirmation
    src.notify(rq.Answer(rq.ACCEPTED, rq.CONFIRM, motion="home"), 1)
    assert src.poll(500) is EMPTY  # homing
    src.notify(rq.Answer(rq.FINISHED, rq.START, motion="home", posture="standing"), 1001)
    assert _names(src.poll(1002)) == [(1002, "start", "walk", None)]
    assert src.poll(1003) is EMPTY and not src.done and src.made == 3
    src.notify(rq.Answer(rq.ACCEPTED, rq.START, motion="walk"), 1003)  # accepted in 1003
    assert src.poll(11002) is EMPTY  # --duration 10 s after the acceptance: cycle 11003
    assert _names(src.poll(11003)) == [(11003, "stop", None, None)]
    src.notify(rq.Answer(rq.ACCEPTED, rq.STOP), 11003)
    assert src.poll(12000) is EMPTY  # the closing step runs
    src.notify(rq.Answer(rq.FINISHED, rq.STOP, motion="walk", posture="standing"), 12500)
    assert _names(src.poll(12501)) == [(12501, "end", None, None)]
    assert not src.done
    src.notify(rq.Answer(rq.ACCEPTED, rq.END), 12501)
    assert src.done and src.stalled is None and src.poll(20000) is EMPTY


class FakeMachine:
    """A stand-in for the activity machine, as much as the script needs: it accepts every
    request, runs a move for its duration while GO is held, walks strides of ``stride`` s and
    ends the walk one stride after STOP."""

    def __init__(self, act, src, stride=1.0):
        self.act, self.src, self.stride = act, src, stride
        self.motion = None  # (name, cycles left) of a move; "walk" while walking
        self.go = False
        self.strides = 0
        self.next_stride = None
        self.stop_at = None
        self.speeds = []  # (stride count, speed)
        self.log = []

    def answer(self, a, cycle):
        self.log.append((cycle, rq.ANSWERS[a.answer], rq.KINDS[a.kind], a.motion))
        self.src.notify(a, cycle)

    def cycle(self, c):
        for r in self.src.poll(c):
            if r.kind == rq.START:
                m = self.act.motion(r.motion)
                self.motion = ([r.motion, round(m.duration / DT)] if m.kind == "move"
                               else "walk")
                if m.kind == "walk":
                    self.next_stride = c + round(self.stride / DT)
            elif r.kind == rq.GO:
                self.go = True
            elif r.kind == rq.GO_RELEASE:
                self.go = False
            elif r.kind == rq.SPEED:
                self.speeds.append((self.strides, r.value))
            elif r.kind == rq.STOP:
                self.stop_at = self.strides + 1
            self.answer(rq.Answer(rq.ACCEPTED, r.kind, motion=r.motion), c)
        if isinstance(self.motion, list) and self.go:
            self.motion[1] -= 1
            if self.motion[1] == 0:
                m = self.act.motion(self.motion[0])
                self.motion = None
                self.answer(rq.Answer(rq.FINISHED, rq.START, motion=m.name, posture=m.end),
                            c)
        if self.motion == "walk" and c == self.next_stride:
            self.strides += 1
            self.next_stride = c + round(self.stride / DT)
            self.src.on_stride(self.strides, c)
            if self.stop_at == self.strides:
                self.motion = None
                self.answer(rq.Answer(rq.FINISHED, rq.STOP, motion="walk",
                                      posture="standing"), c)


def test_the_buttons_session_runs_through(activities):
    session = load_session(ROOT / "configs" / "sessions" / "buttons_demo.yaml", activities)
    src = ScriptSource(session, duration=None, dt=DT)
    fake = FakeMachine(activities, src)
    made = []
    src_poll = src.poll

    def poll(c):
        out = src_poll(c)
        made.extend(_names(out))
        return out

    src.poll = poll
    for c in range(80_000):
        fake.cycle(c)
        if src.done:
            break
    # an event (an answer, a stride) in cycle c makes a step due in c + its wait: polled
    # at the start of each cycle, one without a wait is made in c + 1
    up = round(4.6875 / DT)  # the stand-up's cycles at max_speed 0.5 rad/s
    t_up_done = 501 + up - 1  # GO from cycle 501: the move counts down from there
    walk = t_up_done + 1 + 5000  # GO released the cycle after, then 5 s standing
    sit = walk + 13_000 + 2000  # the closing stride (the 13th) ended, then 2 s
    assert made == [
        (500, "start", "stand_up", None),
        (501, "go", None, None),
        (t_up_done + 1, "go_release", None, None),
        (walk, "start", "walk", None),
        (walk + 1, "speed", None, 0.3),
        (walk + 4001, "speed", None, 0.45),  # strides of 1 s from the walk's start
        (walk + 8001, "speed", None, 0.6),
        (walk + 12_001, "stop", None, None),
        (sit, "start", "sit_down", None),
        (sit + 1, "go", None, None),
        (sit + 1 + up, "go_release", None, None),
        (sit + 2 + up, "end", None, None),
    ]
    assert fake.speeds == [(0, 0.3), (4, 0.45), (8, 0.6)] and fake.strides == 13
    assert src.done and src.stalled is None


def test_a_refusal_stalls_the_script_and_it_says_where(activities, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("steps:\n  - {request: start, motion: walk, at: 1.0}\n"
                    "  - {request: stop, after: accepted, wait: 2.5}\n"
                    "  - {request: end, after: rejected}\n")
    src = ScriptSource(load_session(path, activities), duration=None, dt=DT)
    assert src.poll(999) is EMPTY and _names(src.poll(1000)) == [(1000, "start", "walk", None)]
    src.notify(rq.Answer(rq.REJECTED, rq.START, reason=rq.R_NOT_FROM_HERE, motion="walk"),
               1000)
    assert src.stalled == (f"{path}:3: steps[1]: 'stop' waits for 'accepted' of "
                           f"'start walk', which was rejected (not_from_here)")
    assert src.poll(100_000) is EMPTY and not src.done
    # an answer of another kind or motion is not the step's
    src = ScriptSource(load_session(path, activities), duration=None, dt=DT)
    src.poll(1000)
    src.notify(rq.Answer(rq.ACCEPTED, rq.START, motion="sit_down"), 1000)
    src.notify(rq.Answer(rq.ACCEPTED, rq.GO), 1001)
    assert src.poll(5000) is EMPTY and src.stalled is None
    src.notify(rq.Answer(rq.ACCEPTED, rq.START, motion="walk"), 1002)
    assert _names(src.poll(3502)) == [(3502, "stop", None, None)]  # 2.5 s later
    src.notify(rq.Answer(rq.REJECTED, rq.STOP, reason=rq.R_NOT_WALKING), 3502)
    assert _names(src.poll(3502)) == [(3502, "end", None, None)]  # waited for the refusal


def test_steps_with_neither_at_nor_after_follow_the_step_before(activities, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("steps:\n  - {request: confirm, wait: 0.25}\n"
                    "  - {request: level, value: 0.5}\n"
                    "  - {request: step_length, value: 0.4, wait: 0.01}\n"
                    "  - {request: start, motion: walk, at: 0.1}\n"
                    "  - {request: stop, after: strides 2}\n")
    src = ScriptSource(load_session(path, activities), duration=None, dt=DT)
    assert src.poll(249) is EMPTY
    assert _names(src.poll(250)) == [(250, "confirm", None, None), (250, "level", None, 0.5),
                                     ]
    assert src.poll(259) is EMPTY  # 10 ms after the step before
    # the next at is already past: made with the one before
    assert _names(src.poll(260)) == [(260, "step_length", None, 0.4),
                                     (260, "start", "walk", None)]
    src.on_stride(1, 900)
    assert src.poll(901) is EMPTY
    src.on_stride(2, 1900)
    assert _names(src.poll(1900)) == [(1900, "stop", None, None)]
    assert src.steps[1].legs is None


def test_nothing_is_allocated_while_nothing_is_due(activities):
    src = ScriptSource(load_session(default_path(), activities), duration=60.0, dt=DT)
    src.poll(0)
    src.notify(rq.Answer(rq.ACCEPTED, rq.START, motion="walk"), 0)
    src.poll(1)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5000):
            src.poll(7)
            src.on_stride(3, 7)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 512, grown  # bytes after 5000 cycles


GOOD = "steps:\n  - {request: start, motion: walk, at: 0.0}\n  - {request: stop, %s}\n"


@pytest.mark.parametrize(("step", "words"), [
    ("after: accepted, wait: 1.0, motion: walk", ["a stop request takes no 'motion'"]),
    ("after: later", ["after 'later' is not an event", "strides N"]),
    ("after: strides 0", ["after 'strides 0' is not an event"]),
    ("at: 1.0, after: accepted", ["both 'at' and 'after'"]),
    ("at: 1.0, wait: 2.0", ["a step made 'at' a time waits for nothing"]),
    ("at: -1.0", ["at -1 is out of range (outside 0…86400)"]),
    ("wait: soon", ["unknown wait 'soon'"]),
    ("value: 0.5", ["a stop request takes no 'value'"]),
    ("legs: [left]", ["a stop request takes no 'legs'"]),
    ("after: accepted, wait: -1", ["wait -1 is out of range (outside 0…86400)"]),
    ("after: accepted, wait: 1e3x", ["unknown wait '1e3x'"]),
])
def test_mistakes_in_a_step_are_one_line_with_file_and_line(tmp_path, step, words):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD % step)
    with pytest.raises(ConfigError) as err:
        load_session(path)
    msg = str(err.value)
    assert f"{path}:3: " in msg and " — " in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize(("text", "line", "words"), [
    ("steps:\n  - {request: start, at: 0.0}\n", 2, ["a start request has no 'motion'"]),
    ("steps:\n  - {request: speed, at: 0.0}\n", 2, ["a speed request has no 'value'",
                                                    "(m/s)"]),
    ("steps:\n  - {request: spede, at: 0.0}\n", 2, ["unknown request 'spede'",
                                                    "did you mean 'speed'"]),
    ("steps:\n  - {request: go, after: finished}\n", 2,
     ["the first step waits for 'finished', but no step is before it"]),
    ("steps:\n  - {request: go, at: 2.0}\n  - {request: go_release, at: 1.0}\n", 3,
     ["at 1 s is before an earlier step's 2 s"]),
    ("steps:\n  - {request: start, motion: wlak, at: 0.0}\n", 2,
     ["unknown motion 'wlak'", "did you mean 'walk'"]),
    ("steps:\n  - {request: level, value: 0.5, legs: [left], at: 0.0}\n", 2,
     ["unknown leg 'left'"]),
    ("steps: []\n", 1, ["a session with no steps"]),
    ("description: x\n", 1, ["has no 'steps'"]),
])
def test_mistakes_in_a_script_are_one_line(tmp_path, activities, text, line, words):
    _refused_in_one_line(tmp_path, activities, text, line, words)


def test_an_unknown_motion_is_left_to_the_machine_without_activities(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("steps:\n  - {request: start, motion: fly, at: 0.0}\n"
                    "  - {request: speed, value: 9.0, after: rejected}\n"
                    "  - {request: stop, wait: duration}\n")
    session = load_session(path)
    assert [s.describe() for s in session.steps] == ["start fly", "speed 9", "stop"]
    with pytest.raises(ConfigError, match=r"s\.yaml:4: steps\[2\]: the step waits the run's "
                                          r"--duration, and the run has none"):
        ScriptSource(session, duration=None, dt=DT)
    src = ScriptSource(session, duration=1.5, dt=DT)
    src.poll(0)
    src.notify(rq.Answer(rq.REJECTED, rq.START, reason=rq.R_UNKNOWN_MOTION, motion="fly"), 0)
    assert _names(src.poll(1)) == [(1, "speed", None, 9.0)]
    assert _names(src.poll(1501)) == [(1501, "stop", None, None)]


LIMIT = "the run's 24 h limit"


@pytest.mark.hazard("H-SCRIPT-TIME")
@pytest.mark.parametrize(("text", "line", "words"), [
    ("steps:\n  - {request: start, motion: walk, at: 1.0e306}\n", 2,
     ["steps[0].at: at 1e+306 is out of range (outside 0…86400)", LIMIT]),
    ("steps:\n  - {request: start, motion: walk, at: 86400.001}\n", 2,
     ["at 86400 is out of range (outside 0…86400)", LIMIT]),
    ("steps:\n  - {request: start, motion: walk, at: .inf}\n", 2,
     ["steps[0].at: expected a finite number, got inf"]),
    ("steps:\n  - {request: start, motion: walk, at: .nan}\n", 2,
     ["steps[0].at: expected a finite number, got nan"]),
    ("steps:\n  - {request: go, at: 0.0}\n  - {request: stop, after: accepted, "
     "wait: 1.0e306}\n", 3, ["steps[1].wait: wait 1e+306 is out of range", LIMIT]),
    ("steps:\n  - {request: go, at: 0.0}\n  - {request: stop, after: strides 172801}\n", 3,
     ["'strides 172801' is more strides than the run's 24 h limit can walk (at most 172800"]),
    ("steps:\n  - {request: go, at: 0.0}\n  - {request: stop, after: strides "
     "99999999999999999999999999}\n", 3, ["is more strides than the run's 24 h limit"]),
    ("steps:\n  - {request: go, at: 0.0}\n  - {request: go, wait: 50000}\n"
     "  - {request: go_release, wait: 36400.5}\n", 4,
     ["'go_release' is made no earlier than 86400.5 s into the session", LIMIT]),
    ("steps:\n  - {request: go, at: 86000.0}\n  - {request: stop, after: strides 801}\n", 3,
     ["'stop' is made no earlier than 86400.5 s"]),
    ("steps:\n  - {request: speed, value: .inf, at: 0.0}\n", 2,
     ["steps[0].value: expected a finite number, got inf"]),
    ("steps:\n  - {request: level, value: .nan, at: 0.0}\n", 2,
     ["steps[0].value: expected a finite number, got nan"]),
    ("duration: 1.0e306\nsteps:\n  - {request: go, at: 0.0}\n", 1,
     ["duration 1e+306 is out of range (outside 0…86400)"]),
])
def test_times_and_values_beyond_the_run_are_refused_at_load(tmp_path, activities, text, line,
                                                             words):
    """A step at 1e306 s was accepted and overflowed mid-walk (OverflowError, no summary):
    every time the run cannot reach, and every value that is not finite, is refused at load
    with file:line."""
    _refused_in_one_line(tmp_path, activities, text, line, words)


@pytest.mark.hazard("H-SCRIPT-TIME")
def test_the_last_instant_of_the_run_is_a_cycle_like_any_other(tmp_path, activities):
    """What load accepts, the source times without overflow: a step at 86 400 s is made in
    cycle 86 400 000, one 172 800 strides later when they are walked."""
    path = tmp_path / "s.yaml"
    path.write_text("steps:\n  - {request: start, motion: walk, at: 0.0}\n"
                    "  - {request: stop, after: strides 172800}\n"
                    "  - {request: end, at: 86400.0}\n")
    src = ScriptSource(load_session(path, activities), duration=None, dt=DT)
    assert _names(src.poll(0)) == [(0, "start", "walk", None)]
    src.on_stride(172_799, 86_000_000)
    assert src.poll(86_000_000) is EMPTY
    src.on_stride(172_800, 86_000_001)
    assert _names(src.poll(86_000_001)) == [(86_000_001, "stop", None, None)]
    assert src.poll(86_399_999) is EMPTY
    assert _names(src.poll(86_400_000)) == [(86_400_000, "end", None, None)]


def _refused_in_one_line(tmp_path, activities, text, line, words) -> None:
    """The script ``text`` is refused at load in one line: its file:line, what and the fix
    (`` — ``), every one of ``words``."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_session(path, activities)
    msg = str(err.value)
    assert f"{path}:{line}: " in msg and " — " in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg
