"""The therapist's console (exo_rt/session/console.py): keys typed on a stream become requests
(source CONSOLE) without poll ever blocking, unknown keys a hint and no request; the status
line shows state, posture or motion with progress, the possible motions numbered, strides,
speed, assistance and the last answer; the view writes it at most every 0.2 s, in place on a
terminal."""

from __future__ import annotations

import io
import os
import time

import pytest

from exo_rt.session import requests as rq
from exo_rt.session.console import EMPTY, HELP, ConsoleSource, ConsoleView, render


def _keys(text: str) -> ConsoleSource:
    src = ConsoleSource(io.StringIO(text))
    src.join(5.0)
    assert src.closed
    return src


def _kinds(reqs):
    return [(rq.KINDS[r.kind], r.motion, r.value) for r in reqs]


def test_every_key_and_its_request():
    src = _keys("g s\nn p m c q g 2 1 + - x h\n")
    src.set_possible(("walk", "sit_down"))
    src.set_status({"speed": 0.5})
    reqs = src.poll(42)
    assert all(r.source == rq.CONSOLE and r.cycle == 42 for r in reqs)
    kinds = _kinds(reqs)
    assert kinds[:10] == [("go", None, None), ("stop", None, None), ("next", None, None),
                          ("prev", None, None), ("mode", None, None),
                          ("confirm", None, None), ("end", None, None),
                          ("go_release", None, None), ("start", "sit_down", None),
                          ("start", "walk", None)]
    assert [k[0] for k in kinds[10:]] == ["speed", "speed"] and len(kinds) == 12
    assert kinds[10][2] == pytest.approx(0.6, abs=1e-12)
    assert kinds[11][2] == pytest.approx(0.4, abs=1e-12)
    notes = src.messages()
    assert notes == ("unknown key 'x' — h for help", HELP)
    assert src.messages() is EMPTY and src.poll(43) is EMPTY


def test_keys_that_cannot_act_give_a_hint_and_no_request():
    src = _keys("3+")
    src.set_status({"possible": ["stand_up"], "speed": None})
    assert src.poll(0) == []
    assert src.messages() == ("no motion 3 here (possible: 1 stand_up)",
                              "the speed is not known yet: + and - change it while walking")
    src = _keys("1")
    assert src.poll(0) == [] and src.messages() == ("no motion 1 here (possible: none)",)


def test_keys_through_a_pipe_arrive_while_poll_never_blocks():
    r, w = os.pipe()
    stream = os.fdopen(r, "r", encoding="utf-8")
    src = ConsoleSource(stream)
    try:
        src.set_possible(["walk"])
        t0 = time.perf_counter()
        for c in range(1000):
            assert src.poll(c) is EMPTY
        per_poll = (time.perf_counter() - t0) / 1000
        assert per_poll < 1e-4, per_poll  # s: nothing waits on the stream
        os.write(w, b"1")
        deadline = time.monotonic() + 5.0
        got = []
        while not got and time.monotonic() < deadline:
            got = list(src.poll(7))
            time.sleep(0.001)
        assert _kinds(got) == [("start", "walk", None)] and got[0].cycle == 7
        os.write(w, b"gg")
        deadline = time.monotonic() + 5.0
        while len(got) < 3 and time.monotonic() < deadline:
            got += src.poll(8)
            time.sleep(0.001)
        assert _kinds(got[1:]) == [("go", None, None), ("go_release", None, None)]
        assert not src.closed
    finally:
        os.close(w)
    src.join(5.0)
    assert src.closed
    src.close()
    stream.close()


STATUS = {"time": 12.34, "state": "RUN", "posture": "standing",
          "possible": ["walk", "sit_down"], "strides": 0, "speed": 0.4,
          "level": 1.0, "go": False,
          "answer": rq.Answer(rq.FINISHED, rq.START, motion="stand_up", posture="standing")}


def test_the_status_line():
    assert render(STATUS) == ("   12.3 s | RUN | standing | possible: 1 walk 2 sit_down | "
                              "strides 0 | 0.40 m/s | assist 100% | GO – | "
                              "last: finished stand_up → standing")
    walking = {**STATUS, "motion": "walk", "progress": 0.437, "strides": 7, "speed": 0.45,
               "step_length": 0.31, "level": {"left": 0.6, "right": 1.0}, "go": True,
               "answer": rq.Answer(rq.REJECTED, rq.START, rq.R_BUSY, motion="sit_down")}
    line = render(walking)
    assert " walk  44% | " in line and "possible" not in line and "standing" not in line
    assert "strides 7 | 0.45 m/s × 0.31 m | assist L 60% R 100% | GO held" in line
    assert line.endswith("last: rejected start sit_down: busy")
    paused = render({"motion": "stand_up", "progress": 0.5, "paused": True,
                     "answer": {"answer": "accepted", "request": "go_release"}})
    assert paused == "stand_up  50% (paused: hold GO) | last: accepted go_release"
    assert render({"state": "RUN", "posture": None, "possible": ["home"],
                   "waiting": "confirm"}) == \
        "RUN | no posture | waiting for confirm | possible: 1 home"


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_view_writes_at_most_every_0_2_s_and_only_changes():
    clock, out = Clock(), io.StringIO()
    view = ConsoleView(out, clock=clock)
    assert view.update(STATUS)
    clock.t = 0.1
    assert not view.update({**STATUS, "strides": 1})  # too soon
    clock.t = 0.25
    assert not view.update(STATUS)  # unchanged
    assert view.update({**STATUS, "strides": 1})
    view.update(STATUS, notes=("no motion 3 here",))
    lines = out.getvalue().split("\n")
    assert lines[0] == render(STATUS) and lines[1] == render({**STATUS, "strides": 1})
    assert lines[2] == "no motion 3 here" and lines[3] == "" and len(lines) == 4

    clock, tty = Clock(), Tty()
    view = ConsoleView(tty, clock=clock)
    assert view.tty and view.update(STATUS)
    clock.t = 0.2
    view.note("hint")
    assert view.update({**STATUS, "strides": 2})
    view.close()
    text = render(STATUS)
    assert tty.getvalue() == (f"\r{text}\x1b[K" + f"\r\x1b[Khint\n{text}\x1b[K"
                              + f"\r{render({**STATUS, 'strides': 2})}\x1b[K" + "\n")
