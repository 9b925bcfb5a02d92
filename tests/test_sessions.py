"""Sessions with a wearer on the simulated exoskeleton (issue 35; docs/sessions.md): the
activity machine driven by the emulated crutch's buttons, a session script and the console,
every boundary of the reference continuous, forbidden requests refused without touching the
reference, input liveness, the E-stop, replay bit for bit."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from sessions_fixtures import Asks, requests, run_session, sequence

from exo_rt.cycle.states import RUN
from exo_rt.runtime.replay import replay
from exo_rt.session.figures import FinishedSession, session_figures
from exo_rt.sim.crutch import SIT_DOWN, SIT_DOWN_S, WHOLE_SESSION, WHOLE_SESSION_S
from firmware_bridge import protocol as p
from firmware_bridge import requests as rq

ROOT = Path(__file__).resolve().parents[1]
SITTING = [0.9, 1.3]  # configs/activities/*.yaml's sitting, per leg
DT = 1e-3

def _accepted(ctl, kind, motion=None):
    return [e for e in requests(ctl) if e["request"] == kind and e["answer"] == "accepted"
            and (motion is None or e.get("motion") == motion)]


def _finished(ctl, motion):
    return [e for e in ctl.events if e["event"] == "finished" and e.get("motion") == motion]


@pytest.mark.slow
@pytest.mark.parametrize("config", ["exo_leg.yaml", "exo_2leg.yaml"])
def test_a_whole_session_on_the_crutch_buttons(tmp_path, config):
    """Sit → stand up (GO released half-way: frozen, pressed: resumed) → stand 5 s → walk at
    three speeds (17 strides) → STOP → stand, every request from the emulated crutch (it ends
    standing: the simulated leg's hip motor would sit down derated after such a walk —
    exo_rt.sim.crutch)."""
    legs = 2 if "2leg" in config else 1
    ctl, res = run_session(tmp_path, [{"request": "end", "at": WHOLE_SESSION_S}],
                           config=config, plan=WHOLE_SESSION, duration=WHOLE_SESSION_S,
                           start_pose=SITTING * legs)
    s = res.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"]
    assert [(e[1], e[2]) for e in sequence(ctl) if e[0] == "finished"] == [
        ("stand_up", "standing"), ("walk", "standing")]
    assert all(e["answer"] == "accepted" for e in requests(ctl)), requests(ctl)
    assert all(e["source"] == "board" for e in requests(ctl)[:-1])  # (the last: the END)
    log = ctl.log
    f = session_figures(FinishedSession(ctl.log, ctl.events, ctl.dt, ctl.robot, ctl.wearer,
                                        ctl.session.machine.steps, ctl.bus_set.board))
    # every accepted request that starts a motion moves the reference in the next cycle
    started = [e for e in _accepted(ctl, "go") if "duration" in e or "period" in e]
    assert [e["motion"] for e in started] == ["stand_up", "walk"]
    debounce = round(ctl.activities.go_debounce / 1e-3)  # cycles: GO held before it moves
    for e in started:  # (a GO-held motion once GO is debounced; the walk at once)
        k = e["cycle"]
        lag = 1 if e["motion"] == "walk" else debounce
        assert np.any(log["qd_ref"][k + lag] != 0.0), e
        assert np.all(log["qd_ref"][k + lag - 1] == 0.0), e
    # every answer reached the board within 10 ms of the press or release it answers
    emu = ctl.bus_set.board
    answered = [(t, a) for t, a in emu.answers if a.answer != rq.FINISHED]
    assert [a.kind for _, a in answered] == [rq.BY_NAME[e["request"]] for e in requests(ctl)]
    assert f["answer_ms"] <= 10.0
    # continuous references: no cycle steps q_r by 0.01 rad or q̇_r by 0.05 rad/s
    assert f["dq_max"] < 0.01 and f["dqd_max"] < 0.05, f
    assert f["rms_deg"] <= 0.5
    # GO released mid-stand-up: frozen smoothly within 0.25 s (no step of q̈_r: the rate's
    # filter); pressed again: moving once GO is debounced
    assert f["freeze_ms"] <= 250.0 and f["resume_cycles"] in (debounce, debounce + 1)
    # STOP: standing within one stride
    assert f["stop_s"] <= f["stop_period_s"]
    # 17 strides, at three speeds: each speed's stride length and cadence within ±5 %
    assert 16 <= f["steps"] <= 18  # strides walked (the closing step too)
    assert sorted(f["walks"]) == [0.3, 0.4, 0.5]
    for speed, w in f["walks"].items():
        assert w["stride_m"] == pytest.approx(w["asked_stride_m"], rel=0.05), speed
        assert w["cadence_per_min"] == pytest.approx(w["asked_cadence_per_min"], rel=0.05)
        assert w["strides"] >= 2
    # the hip's winding: warm from the walk, below the warning level (no derating)
    assert np.all(log["derate"] == 1.0) and log["winding"][:, 0].max() > 60.0


@pytest.mark.slow
def test_sitting_down_from_the_crutch(tmp_path):
    """Standing: NEXT selects sitting down, GO held sits down, released once sitting."""
    ctl, res = run_session(tmp_path, [{"request": "end", "at": SIT_DOWN_S}], plan=SIT_DOWN,
                           duration=SIT_DOWN_S, start_pose=[0.0, 0.0])
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    assert [(e[1], e[2]) for e in sequence(ctl) if e[0] == "finished"] == [
        ("sit_down", "sitting")]
    assert [e["request"] for e in requests(ctl)] == ["next", "go", "go_release", "end"]
    # holding the hanging leg at a stool's height takes the hip ≈ 10 A, three times its
    # motor's rating: even from cold its winding passes the warning level, and the limit
    # derates — without a fault (the posture is held within the tracking limit)
    assert ctl.log["derate"][:, 0].min() < 1.0 and ctl.log["winding"][:, 0].max() < 110.0


@pytest.mark.slow
def test_forbidden_requests_are_refused_and_leave_the_reference_unchanged(tmp_path):
    """Fourteen requests the machine must refuse, each answered in the cycle it came with its
    reason, and the reference bit for bit that of the same session without them."""
    base = [{"request": "go", "at": 0.0},  # GO from sitting: stands up (the selected motion)
            {"request": "go_release", "at": 6.0},
            {"request": "start", "motion": "walk", "at": 6.5},
            {"request": "stop", "at": 9.0},
            {"request": "end", "at": 13.0}]
    forbidden = [  # (the request, at s, the reason expected)
        ({"request": "start", "motion": "walk"}, 0.0, "not_from_here"),  # walk from sitting
        ({"request": "start", "motion": "walk"}, 1.0, "busy"),  # while standing up
        ({"request": "next"}, 1.5, "not_selectable"),
        ({"request": "stop"}, 2.0, "not_stoppable"),  # standing up may not be cut
        ({"request": "end"}, 2.5, "not_in_posture"),
        ({"request": "start", "motion": "walk"}, 5.5, "go_held"),  # GO held since standing
        ({"request": "start", "motion": "sit_down"}, 7.0, "busy"),  # sit during a stride
        ({"request": "speed", "value": 2.0}, 7.2, "speed_range"),
        ({"request": "step_length", "value": 5.0}, 7.4, "step_range"),
        ({"request": "level", "value": 1.5}, 7.6, "level_range"),
        (None, 7.8, "unknown_motion"),  # (asked by a source of the test: start 'fly')
        ({"request": "confirm"}, 8.0, "nothing_to_confirm"),
        ({"request": "stop"}, 9.2, "already"),  # the closing step is due
        ({"request": "stop"}, 12.0, "not_walking"),
        ({"request": "start", "motion": "stand_up"}, 12.2, "not_from_here"),
    ]
    steps = sorted([dict(r, at=t) for r, t, _ in forbidden if r is not None] + base,
                   key=lambda x: x["at"])  # (at equal times the forbidden one first)
    ref, _ = run_session(tmp_path / "base", base, duration=13.0, start_pose=SITTING,
                         board=None)
    fly = [(7.8, rq.Request(rq.START, rq.CONSOLE, motion="fly"))]
    ctl, res = run_session(tmp_path / "forbidden", steps, duration=13.0, asks=fly,
                           start_pose=SITTING, board=None)
    assert res.summary["final_state"] == "SHUTDOWN"
    refused = [e for e in requests(ctl) if e["answer"] == "rejected"]
    assert [e["reason"] for e in refused] == [r for _, _, r in forbidden]
    for e, (_, t, _) in zip(refused, forbidden, strict=True):
        assert e["cycle"] == ctl.k0[4] + round(t / DT)  # answered in the cycle it came
    assert len(ctl.log) == len(ref.log)
    assert ctl.log["q_ref"].tobytes() == ref.log["q_ref"].tobytes()
    assert ctl.log["qd_ref"].tobytes() == ref.log["qd_ref"].tobytes()


@pytest.mark.slow
def test_a_start_in_no_named_posture_accepts_only_home(tmp_path):
    steps = [{"request": "start", "motion": "walk", "at": 0.0},
             {"request": "start", "motion": "stand_up", "at": 0.0},
             {"request": "start", "motion": "sit_down", "at": 0.0},
             {"request": "start", "motion": "home", "at": 0.1},
             {"request": "confirm", "at": 0.2},
             {"request": "end", "after": "finished"}]
    ctl, res = run_session(tmp_path, steps, duration=10.0, start_pose=[0.5, 0.8], board=None)
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    answers = [(e["request"], e.get("motion"), e["answer"], e.get("reason"))
               for e in requests(ctl)]
    assert answers == [("start", "walk", "rejected", "only_home"),
                       ("start", "stand_up", "rejected", "only_home"),
                       ("start", "sit_down", "rejected", "only_home"),
                       ("start", "home", "rejected", "needs_confirm"),
                       ("confirm", "home", "accepted", None),
                       ("end", None, "accepted", None)]
    home = _finished(ctl, "home")[0]
    assert home["posture"] == "standing"
    k = _accepted(ctl, "confirm")[0]["cycle"]
    peak = np.abs(ctl.log["qd_ref"][k:home["cycle"]]).max()
    assert 0.15 < peak <= 0.2 + 1e-9  # rad/s: homing is slow (max_speed 0.2)


@pytest.mark.slow
def test_silent_buttons_stop_the_walk_at_the_stride_end_not_safe(tmp_path):
    steps = [{"request": "start", "motion": "walk", "at": 0.0},
             {"request": "end", "at": 8.0}]
    ctl, res = run_session(tmp_path, steps, plan=[(3.0, "silence", "2.5")], duration=8.0)
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    (stop,) = _accepted(ctl, "stop")
    assert stop["source"] == "board" and stop["note"] == "buttons silent"
    # silent from 3.0 s (its last frame ≤ 20 ms before): stopped once silent for 1 s
    assert 0.98 <= (stop["cycle"] - ctl.k0[4]) * DT - 3.0 <= 1.0 + 0.03
    walk = _finished(ctl, "walk")[0]
    period = _accepted(ctl, "start", "walk")[0]["period"]
    assert walk["posture"] == "standing" and (walk["cycle"] - stop["cycle"]) * DT <= period


@pytest.mark.slow
def test_the_estop_mid_walk_goes_safe_within_3_cycles(tmp_path):
    steps = [{"request": "start", "motion": "walk", "at": 0.0},
             {"request": "end", "at": 6.0}]
    ctl, res = run_session(tmp_path, steps, plan=[(3.0, "estop", "1")], duration=6.0)
    s = res.summary
    assert s["final_state"] == "SAFE"
    (f,) = s["faults"]
    assert f["cause"] == "estop" and f["reaction_cycles"] <= 3


def _console_keys(ctl_box, w, done):
    """The therapist: walk once standing ('1'), stop 3 s after the walk began ('s'), end
    once the walk finished ('q') — each key when the session shows it is time."""
    def events():
        ctl = ctl_box.get("ctl")
        return [] if ctl is None else list(ctl.events)

    def wait(pred, timeout=120.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end and not done.is_set():
            if pred(events()):
                return True
            time.sleep(0.002)
        return False

    if wait(lambda ev: any(e["event"] == "activity" for e in ev)):
        os.write(w, b"1")
    if wait(lambda ev: any(e.get("request") == "start" and e.get("answer") == "accepted"
                           for e in ev)):
        k = next(e["cycle"] for e in events() if e.get("request") == "start")
        if wait(lambda ev: ctl_box["ctl"].cycles >= k + 3000):
            os.write(w, b"s")
    if wait(lambda ev: any(e["event"] == "finished" for e in ev)):
        os.write(w, b"q")
    os.close(w)


@pytest.mark.slow
def test_the_console_and_a_script_give_the_same_session(tmp_path, monkeypatch):
    script = [{"request": "start", "motion": "walk", "at": 0.0},
              {"request": "stop", "after": "accepted", "wait": 3.0},
              {"request": "end", "after": "finished"}]
    ctl_s, _ = run_session(tmp_path / "script", script, duration=30.0, board=None)
    r, w = os.pipe()
    monkeypatch.setattr("sys.stdin", os.fdopen(r, "r"))
    box, done = {}, threading.Event()
    feeder = threading.Thread(target=_console_keys, args=(box, w, done), daemon=True)
    def keep(c):  # (the feeder watches the controller's events)
        box["ctl"] = c
        return Asks(())

    feeder.start()
    try:  # (a console session: no script step within 30 s, the keys ask)
        ctl_c, res = run_session(tmp_path / "console", [{"request": "end", "at": 86400.0}],
                                 duration=30.0, board=None, console=True, sources=(keep,))
    finally:
        done.set()
    assert res.summary["final_state"] == "SHUTDOWN"
    assert [e["source"] for e in requests(ctl_c)] == ["console"] * 3
    assert sequence(ctl_c) == sequence(ctl_s)


@pytest.mark.slow
def test_controller_replay_of_a_button_session_is_bit_identical(tmp_path):
    plan = [(0.5, "click", "go"), (5.0, "click", "mode"), (7.0, "click", "stop")]
    ctl, res = run_session(tmp_path, [{"request": "end", "at": 12.0}], plan=plan,
                           duration=12.0)
    assert res.summary["final_state"] == "SHUTDOWN"
    assert [e["request"] for e in requests(ctl)] == ["go", "go_release", "mode", "stop",
                                                     "end"]
    out = replay(res.run_dir, "controller")
    assert out["max_abs_command_diff_A"] == 0.0 and out["first_diff_cycle"] is None


@pytest.mark.slow
def test_the_board_frames_carry_the_machines_answers(tmp_path):
    """What the crutch's display gets: an ANSWER per request, FINISHED at the end, MENUs
    with the posture, the possible motions and the step count."""
    plan = [(0.5, "click", "go"), (5.0, "click", "stop")]
    ctl, _ = run_session(tmp_path, [{"request": "end", "at": 9.0}], plan=plan,
                         duration=9.0)
    emu = ctl.bus_set.board
    acts = ctl.activities
    kinds = [(a.kind, a.answer) for _, a in emu.answers]
    assert (rq.GO, rq.ACCEPTED) in kinds and (rq.START, rq.FINISHED) in kinds
    menus = [m for _, m in emu.menus]
    standing = list(acts.postures).index("standing")
    assert menus[0].posture == standing and menus[0].state == RUN  # the controller's state
    assert menus[0].possible == sum(1 << acts.index(n) for n in acts.possible("standing"))
    walking = [m for m in menus if m.motion == acts.index("walk")]
    assert walking and max(m.steps for m in menus) >= 2
    assert isinstance(menus[-1], p.Menu)


def _cli(*args: str, stdin: str | None = None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "exo_rt", *args], input=stdin, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _events(folder) -> list[dict]:
    import json

    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_the_docs_session_commands_run(tmp_path):
    """docs/sessions.md's commands as typed: a wearer profile on the two-leg exoskeleton, the
    console (its END key); the shipped buttons' session, with no flag, is
    tests/test_session_start.py's."""
    res = _cli("run", "--wearer", "configs/wearers/example.yaml", "--config",
               "configs/exo_2leg.yaml", "--duration", "2", "--out", str(tmp_path / "w"))
    assert res.returncode == 0 and "final state SHUTDOWN" in res.stdout, res.stderr
    assert (tmp_path / "w" / "configs" / "wearers" / "example.yaml").exists()
    res = _cli("run", "--console", "--duration", "5", "--out", str(tmp_path / "c"), stdin="q")
    assert res.returncode == 0 and "final state SHUTDOWN" in res.stdout, res.stderr
    (end,) = [e for e in _events(tmp_path / "c") if e.get("request") == "end"]
    assert end["source"] == "console" and end["answer"] == "accepted"


@pytest.mark.slow
def test_a_stalled_script_is_named_with_its_line(tmp_path):
    script = tmp_path / "stall.yaml"
    script.write_text("steps:\n  - {request: start, motion: stand_up, at: 0.0}\n"
                      "  - {request: end, after: accepted}\n")
    res = _cli("run", "--session", str(script), "--duration", "0.5", "--out",
               str(tmp_path / "r"), "--config", "configs/exo_leg.yaml")  # the test stand
    assert res.returncode == 0 and "final state SHUTDOWN" in res.stdout, res.stderr
    assert f"session script stalled: {script}:3: steps[1]" in res.stderr
    assert "not_from_here" in res.stderr and "Traceback" not in res.stderr
