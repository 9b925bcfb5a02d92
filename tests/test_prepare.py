"""A new pace made beside the cycle (exo_rt.session.prepare): the worker makes it, the
request is answered in the cycle after — in order with the walking parameters after it, while
every other request goes on — and replay, which makes it in the cycle, is bit for bit the
real-time run."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sessions_fixtures import requests, run_session

from exo_rt.cycle import step as cy
from exo_rt.runtime.config import load_top
from exo_rt.runtime.replay import replay
from exo_rt.session import session as sessions
from exo_rt.session.prepare import WAIT, Preparer

ROOT = Path(__file__).resolve().parents[1]


def _wait_made(p: Preparer, n: int, timeout: float = 5.0) -> None:
    t0 = time.monotonic()
    while p.finished < n and time.monotonic() - t0 < timeout:
        time.sleep(0.001)
    assert p.finished >= n


def test_in_the_cycle_the_work_is_made_at_once_and_once_per_key():
    p, calls = Preparer(), []
    work = lambda: calls.append(threading.get_ident()) or 7  # noqa: E731
    assert p.get("a", work) == 7 and p.get("a", work) == 7
    assert calls == [threading.get_ident()]
    with pytest.raises(ValueError, match="no such pace"):
        p.get("b", lambda: (_ for _ in ()).throw(ValueError("no such pace")))


def test_beside_the_cycle_the_worker_makes_it_once_and_errors_come_back():
    p, calls, gate = Preparer(threaded=True), [], threading.Event()

    def work():
        gate.wait(5.0)
        calls.append(threading.get_ident())
        return "rows"

    assert p.get("a", work) is WAIT and p.get("a", work) is WAIT  # (asked once)
    gate.set()
    _wait_made(p, 1)
    assert p.get("a", work) == "rows"
    assert calls and calls[0] != threading.get_ident() and len(calls) == 1

    def bad():
        raise ValueError("beyond")

    assert p.get("b", bad) is WAIT
    _wait_made(p, 2)
    with pytest.raises(ValueError, match="beyond"):
        p.get("b", bad)  # (the answer's refusal, in the cycle that asks)

    def broken():
        raise KeyError("bug")

    assert p.get("c", broken) is WAIT
    _wait_made(p, 3)
    with pytest.raises(KeyError):  # (the session's fault: never the worker's end)
        p.get("c", broken)
    assert p.get("d", lambda: 1) is WAIT
    _wait_made(p, 4)
    assert p.get("d", lambda: 1) == 1
    p.close()


class _Beside(Preparer):
    """The real-time preparer in a lockstep run (threaded whatever it is told), its work slowed
    by 0.05 s — a new pace's cost on the floor is ≈ 0.2 s — and the threads it ran on noted.
    (Lockstep cycles take a fraction of a millisecond of wall clock: the answers come
    hundreds to thousands of cycles later.)"""

    threads: list = []

    def __init__(self, threaded: bool = False) -> None:
        super().__init__(threaded=True)

    def get(self, key, work):
        def slow():
            _Beside.threads.append(threading.get_ident())
            time.sleep(0.05)
            return work()

        return super().get(key, slow)


@pytest.mark.hazard("H-REQUEST-STALL")
@pytest.mark.slow
def test_a_new_pace_is_made_beside_the_cycle_in_order_and_replays_bit_for_bit(tmp_path):
    """exo_leg's default session with two speeds outside the wearer's list (0.45 and 0.35 m/s,
    0.02 s apart) and a level between them: the level is answered in its own cycle, the
    speeds after the worker made them (each pace on the worker's thread, never the loop's),
    in the order asked; the last one walked. Replay asks each in the cycle it was answered
    and makes it there: the commands are bit for bit the same."""
    steps = [{"request": "start", "motion": "walk", "at": 0.1},
             {"request": "speed", "value": 0.45, "at": 2.0},
             {"request": "level", "value": 0.5, "at": 2.01},
             {"request": "speed", "value": 0.35, "at": 2.02},
             {"request": "stop", "at": 14.0}, {"request": "end", "after": "finished"}]
    _Beside.threads = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sessions, "Preparer", _Beside)
        ctl, res = run_session(tmp_path, steps, duration=20.0)
    assert res.summary["final_state"] == "SHUTDOWN"
    asked = {round(e["value"], 2): e for e in ctl.events if e["event"] == "request_preparing"}
    assert sorted(asked) == [0.35, 0.45]
    answered = [e for e in requests(ctl) if e["request"] in ("speed", "level")]
    assert [(e["request"], e["value"], e["answer"]) for e in answered] == [
        ("level", 0.5, "accepted"), ("speed", 0.45, "accepted"), ("speed", 0.35, "accepted")]
    level, fast, slow = answered
    dt = ctl.dt
    assert level["cycle"] == asked[0.45]["cycle"] + round(0.01 / dt)  # (its own cycle)
    assert fast["cycle"] > asked[0.45]["cycle"]  # (once made: cycles ran meanwhile)
    assert slow["cycle"] >= fast["cycle"]
    assert ctl.session.machine.speed == pytest.approx(0.35)
    assert _Beside.threads and threading.get_ident() not in _Beside.threads
    out = replay(res.run_dir, "controller")
    assert out["max_abs_command_diff_A"] == 0.0 and out["first_diff_cycle"] is None


def test_only_a_real_time_live_run_makes_a_pace_beside_the_cycle():
    """build's ``beside`` (the controller's real time) threads the preparer; replay never
    does (it asks each request in the cycle its answer was recorded in, and makes it there),
    nor lockstep (simulated time stands still while a cycle computes)."""
    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    made = {}
    for name, kw in (("real time", {"beside": True}), ("lockstep", {}),
                     ("replay", {"beside": True, "requests": ()})):
        cycle = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1.0 / top.rate_hz)
        s = sessions.build(cycle, top, [], cycle.p["dt"], 5.0, **kw)
        made[name] = s.machine.prepared.threaded
        s.close()
    assert made == {"real time": True, "lockstep": False, "replay": False}


def test_walking_parameters_wait_in_order_while_others_are_answered():
    """Standing (no controller: the session's tick alone), a real-time session: six speeds
    asked at once wait on the worker, each after the one before; a level asked behind them is
    answered in its own cycle; once all are made every speed is answered, in order, and the
    last is the speed."""
    from firmware_bridge import requests as rq
    from firmware_bridge.requests import Request

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    cycle = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1.0 / top.rate_hz)
    events: list = []
    sess = sessions.build(cycle, top, events, cycle.p["dt"], 5.0, beside=True)
    sess.begin(0)
    speeds = [0.31, 0.33, 0.35, 0.37, 0.39, 0.41]
    for v in speeds:
        assert sess.ask(Request(rq.SPEED, rq.SCRIPT, value=v), 1) is None
    level = sess.ask(Request(rq.LEVEL, rq.SCRIPT, value=0.5), 1)
    assert level is not None and level.answer == rq.ACCEPTED
    k, t0 = 2, time.monotonic()
    while sess.preparing and time.monotonic() - t0 < 30.0:
        sess.tick(k, True)
        k += 1
        time.sleep(0.002)
    answered = [e for e in events if e["event"] == "request" and e["request"] == "speed"]
    assert [(e["value"], e["answer"]) for e in answered] == [(v, "accepted") for v in speeds]
    assert [e["value"] for e in events if e["event"] == "request_preparing"] == speeds
    assert sess.machine.speed == 0.41
    sess.close()
