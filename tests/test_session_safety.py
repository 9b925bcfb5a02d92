"""Nothing a person asks can make the reference unsafe (issue 43's hazards, on the lockstep
simulated exoskeleton): a pending HOME confirmed later, walks and moves beyond the joints,
openings and homing too fast, postures outside the wearer's range, GO and STOP together, GO
chattering, a frozen move, a flood of requests, an exception in the session's code — each
refused at load or at the request, or handled by the machine, and the reference governor of
the compiled cycle as the last word."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import numpy as np
import pytest
from sessions_fixtures import requests, run_session

from exo_rt.cycle import governor, segment
from exo_rt.cycle import step as cy
from exo_rt.cycle.layout import (
    V_GOV_ACC,
    V_GOV_HI,
    V_GOV_LO,
    V_GOV_VEL,
    V_OFFSET,
    V_QDR,
    V_QR,
    V_SEG_FROM,
    V_SEG_TO,
)
from exo_rt.errors import ConfigError
from exo_rt.runtime.config import load_top
from exo_rt.session import session as sessions
from firmware_bridge import requests as rq

ROOT = Path(__file__).resolve().parents[1]
SITTING = [0.9, 1.3]
STANDING = [0.0, 0.05]
BUDGET = 0.05  # rad/s: the largest change of q̇_r from one cycle to the next (docs/sessions.md)


def _steps(log) -> float:
    """The largest change of q̇_r per cycle over RUN (rad/s)."""
    run = log["state"] == 4
    qd = log["qd_ref"][run]
    return float(np.abs(np.diff(qd, axis=0)).max()) if len(qd) > 1 else 0.0


def _session_of(tmp_path, config="exo_leg.yaml", *, wearer=None, activities=None):
    """A session on a fresh cycle (no controller: the machine answers, the compiled segment
    and governor advance the reference)."""
    top = load_top(ROOT / "configs" / config)
    cycle = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1.0 / top.rate_hz)
    sess = sessions.build(cycle, top, [], cycle.p["dt"], 10.0, wearer=wearer,
                          activities=activities)
    return top, cycle, sess


def _write(tmp_path, name, text) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------- 1. a pending HOME


@pytest.mark.slow
@pytest.mark.hazard("H-HOME-PENDING")
@pytest.mark.parametrize("case", ["walk", "stand_up", "sit_down"])
def test_a_pending_home_confirmed_later_cuts_nothing(tmp_path, case):
    """HOME asked from a posture waits for CONFIRM; a motion that begins after it clears it,
    and the CONFIRM that comes mid-motion is refused: the motion ends in its posture with no
    step of q̇_r."""
    start = {"walk": STANDING, "stand_up": SITTING, "sit_down": STANDING}[case]
    steps = [{"request": "start", "motion": "home", "at": 0.2},
             {"request": "start", "motion": case, "after": "rejected"}]
    if case != "walk":
        steps.append({"request": "go", "after": "accepted"})
    steps.append({"request": "confirm", "at": 2.0})
    if case == "walk":
        steps.append({"request": "stop", "at": 4.0})
    else:
        steps.append({"request": "go_release", "at": 8.5})
    steps.append({"request": "end", "at": 9.5})
    ctl, res = run_session(tmp_path, steps, start_pose=start, duration=9.0)
    confirm = next(e for e in requests(ctl) if e["request"] == "confirm")
    assert confirm["answer"] == "rejected" and confirm["reason"] == "nothing_to_confirm"
    finished = [e for e in ctl.events if e["event"] == "finished"]
    assert [e["motion"] for e in finished] == [case]
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    assert _steps(ctl.log) < BUDGET


def test_confirm_while_a_motion_runs_is_busy(tmp_path):
    """The machine's own guard: CONFIRM of a HOME checks busy like any start."""
    _top, cycle, sess = _session_of(tmp_path)
    m = sess.machine
    cycle.v[V_QR] = STANDING
    m.start()
    assert m.handle(rq.Request(rq.START, rq.CONSOLE, motion="home")).reason == \
        rq.R_NEEDS_CONFIRM
    m.home_pending = m.activities.motion("home")  # (as if no start had cleared it)
    assert m.handle(rq.Request(rq.START, rq.CONSOLE, motion="walk")).answer == rq.ACCEPTED
    assert m.home_pending is None  # (the start cleared it)
    m.home_pending = m.activities.motion("home")
    ans = m.handle(rq.Request(rq.CONFIRM, rq.CONSOLE))
    assert (ans.answer, ans.reason) == (rq.REJECTED, rq.R_BUSY)


# ---------------------------------------------------------------- 2. beyond the joints


@pytest.mark.hazard("H-WALK-FAST")
@pytest.mark.parametrize("config,wearer", [("exo_leg.yaml", "default.yaml"),
                                           ("exo_2leg.yaml", "default.yaml"),
                                           ("exo_2leg.yaml", "example.yaml")])
def test_the_fastest_speed_at_the_shortest_step_is_refused(tmp_path, config, wearer):
    """Every shipped wearer's fastest speed at its shortest step: refused beyond_joints (the
    step first, then the speed; or the other way round), the walk's parameters unchanged."""
    _top, cycle, sess = _session_of(tmp_path, config,
                                    wearer=ROOT / "configs" / "wearers" / wearer)
    m = sess.machine
    w = m.wearer
    cycle.v[V_QR] = m.activities.posture_q("standing")
    m.start()
    before = (m.speed, m.step_length)
    a1 = m.handle(rq.Request(rq.STEP_LENGTH, rq.CONSOLE, value=w.step_length.min))
    a2 = m.handle(rq.Request(rq.SPEED, rq.CONSOLE, value=w.speed.max))
    refused = [a for a in (a1, a2) if a.answer == rq.REJECTED]
    assert refused and all(a.reason == rq.R_BEYOND_JOINTS for a in refused), (a1, a2)
    assert "joint" in refused[0].extra and refused[0].extra["needs"] > refused[0].extra["limit"]
    assert (m.speed, m.step_length) != (w.speed.max, w.step_length.min)
    assert before[0] in (m.speed, before[0])


@pytest.mark.hazard("H-WALK-FAST")
def test_a_wearer_faster_than_the_knee_is_refused_at_load(tmp_path):
    """1.6 m/s for a 1.2 m wearer needs the joints far beyond their speed: the profile is
    refused at load, naming the file, the line and the key."""
    w = _write(tmp_path, "fast.yaml", "height: 1.2\nmass: 40.0\nsex: female\n"
               "speed: {min: 0.2, max: 1.6, default: 0.4, presets: [0.4]}\n"
               "step_length: {min: 0.1, max: 0.7}\n")
    with pytest.raises(ConfigError) as e:
        _session_of(tmp_path, wearer=w)
    text = str(e.value)
    assert "fast.yaml:4" in text and "speed.max" in text and "rad/s of speed" in text, text


@pytest.mark.slow
@pytest.mark.hazard("H-WALK-FAST")
def test_a_walk_beyond_the_hip_is_refused_and_the_edge_walk_tracks(tmp_path):
    """Closed loop: at the shipped wearer's fastest speed (0.6 m/s), the walk tracks without
    SAFE and its hip current stays below its 20 A limit; 0.6 m/s at the shortest step (0.25 m)
    is refused at the request, and the walk goes on at the speed it had."""
    steps = [{"request": "speed", "value": 0.6, "at": 0.1},
             {"request": "start", "motion": "walk", "after": "accepted"},
             {"request": "step_length", "value": 0.25, "at": 3.0},
             {"request": "stop", "at": 5.0},
             {"request": "end", "after": "finished"}]
    ctl, res = run_session(tmp_path, steps, start_pose=STANDING, duration=7.0)
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    step = next(e for e in requests(ctl) if e["request"] == "step_length")
    assert step["answer"] == "rejected" and step["reason"] == "beyond_joints"
    assert np.abs(ctl.log["command"]).max(axis=0)[0] < 20.0
    assert _steps(ctl.log) < BUDGET


@pytest.mark.hazard("H-OPENING-FAST")
@pytest.mark.parametrize("key,value", [("opening", 0.002), ("opening", 0.04),
                                       ("closing", 0.002), ("closing", 0.04)])
def test_an_opening_too_short_is_refused_at_load(tmp_path, key, value):
    """An opening or closing step of a few hundredths of a stride would step the reference:
    refused at load, naming the activities file's motion and the joint."""
    text = (ROOT / "configs/activities/exo_leg.yaml").read_text()
    assert f"{key}: 0.5" in text
    text = text.replace(f"{key}: 0.5", f"{key}: {value}")
    a = _write(tmp_path, "acts.yaml", text)
    with pytest.raises(ConfigError) as e:
        _session_of(tmp_path, activities=a)
    msg = str(e.value)
    assert "acts.yaml:" in msg and "motions.walk" in msg and "lengthen its opening" in msg \
        and ("of speed" in msg or "of acceleration" in msg), msg


@pytest.mark.hazard("H-HOME-FAST")
def test_homing_has_a_ceiling_no_file_lifts(tmp_path):
    text = (ROOT / "configs/activities/exo_leg.yaml").read_text()
    a = _write(tmp_path, "acts.yaml", text.replace("max_speed: 0.2", "max_speed: 5.0"))
    with pytest.raises(ConfigError) as e:
        _session_of(tmp_path, activities=a)
    line = next(i for i, x in enumerate(a.read_text().splitlines(), 1) if "max_speed: 5.0" in x)
    assert f"acts.yaml:{line}" in str(e.value) and "0.2 rad/s" in str(e.value)


@pytest.mark.hazard("H-POSTURE-ROM")
def test_a_posture_outside_the_wearers_range_is_refused_at_load(tmp_path):
    """A wearer whose hip flexes to 0.7 rad: the activities' sitting (hip 0.9) is refused at
    load, naming the posture's file and line and the joint."""
    w = _write(tmp_path, "stiff.yaml", "height: 1.75\nmass: 75.0\nsex: male\n"
               "range_of_motion: {hip: {lower: -0.3, upper: 0.7}}\n")
    with pytest.raises(ConfigError) as e:
        _session_of(tmp_path, wearer=w)
    msg = str(e.value)
    assert "exo_leg.yaml:" in msg and "sitting" in msg and "hip" in msg \
        and "range of motion" in msg, msg


@pytest.mark.hazard("H-REFERENCE-LIMITS")
def test_the_governor_is_the_last_word_on_any_reference(tmp_path):
    """A segment no check let through (written into the cycle's data by hand: a move of 1 rad
    in 10 ms, towards beyond the soft limit): the reference the cycle tracks keeps within the
    range, the speed and the acceleration bounds, every cycle; a segment within them passes
    bit for bit."""
    _top, cycle, _sess = _session_of(tmp_path)
    s, seg, v, dt = cycle.s, cycle.seg, cycle.v, float(cycle.p["dt"])
    lo, hi, vel, acc = (v[r].copy() for r in (V_GOV_LO, V_GOV_HI, V_GOV_VEL, V_GOV_ACC))

    def run(q_to, duration, cycles):
        v[V_QR] = [0.0, 0.05]
        v[V_QDR] = 0.0
        governor.follow(v)
        v[V_SEG_FROM] = v[V_QR]
        v[V_SEG_TO] = q_to
        seg["seg_kind"], seg["seg_tau"], seg["seg_duration"] = segment.MOVE, 0.0, duration
        seg["seg_go"] = seg["seg_rate"] = 1.0
        seg["seg_rate_dot"], seg["seg_slew"] = 0.0, segment.GO_OMEGA
        s["governed"] = 0.0
        qr, qdr, raw = [], [], []
        for _ in range(cycles):
            segment.reference(s, seg, v, cycle.gaits, v[V_OFFSET], dt)
            raw.append(v[V_QR].copy())
            governor.govern(s, v, dt)
            qr.append(v[V_QR].copy())
            qdr.append(v[V_QDR].copy())
        return np.array(qr), np.array(qdr), np.array(raw)

    qr, qdr, raw = run(np.array([hi[0] + 0.5, 1.0]), 0.01, 3000)
    assert np.all(qr >= lo - 1e-12) and np.all(qr <= hi + 1e-12)
    assert np.all(np.abs(qdr) <= vel * (1 + 1e-9))
    assert np.all(np.abs(np.diff(qdr, axis=0)) <= acc * dt * (1 + 1e-6))
    assert s["governed"] > 0
    qr, qdr, raw = run(np.array([0.3, 0.4]), 3.0, 3100)  # (within: untouched)
    assert s["governed"] == 0 and np.array_equal(qr, raw)


# ---------------------------------------------------------------- 4. the crutch's buttons


@pytest.mark.hazard("H-GO-STOP-FRAME")
def test_stop_wins_over_go_in_the_same_frame(tmp_path):
    """GO and STOP pressed in one frame while standing: no walk begins."""
    plan = ((0.5, "buttons", "go+stop"), (1.5, "buttons", "none"))
    ctl, res = run_session(tmp_path, [{"request": "end", "at": 2.5}], plan=plan,
                           duration=2.5, start_pose=STANDING)
    assert [e["request"] for e in requests(ctl)][:2] == ["stop", "go_release"]
    assert not [e for e in ctl.events if e.get("motion") == "walk"]
    assert np.all(ctl.log["qd_ref"][ctl.log["state"] == 4] == 0.0)


@pytest.mark.slow
@pytest.mark.hazard("H-GO-CHATTER")
@pytest.mark.parametrize("period_ms", [1, 20, 40])
def test_go_chatter_never_reaches_the_move(tmp_path, period_ms):
    """Standing up from sitting with GO held, released, then GO toggled every 1, 20 or 40 ms
    for 1 s: no press is long enough to move it again (debounced), the freeze is smooth (no
    step of q̈_r: its change per cycle stays small), no SAFE, the hip's current far from its
    limit; GO held again, the stand-up ends standing."""
    plan = [(0.5, "buttons", "go"), (2.0, "buttons", "none")]
    t = 2.5
    held = True
    while t < 3.5:
        plan.append((t, "buttons", "go" if held else "none"))
        held = not held
        t += period_ms / 1000.0
    plan += [(3.6, "buttons", "none"), (3.7, "buttons", "go"), (8.0, "buttons", "none")]
    steps = [{"request": "start", "motion": "stand_up", "at": 0.2},
             {"request": "end", "at": 9.0}]
    ctl, res = run_session(tmp_path, steps, plan=tuple(plan), duration=9.5,
                           start_pose=SITTING)
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    assert [e["posture"] for e in ctl.events if e["event"] == "finished"] == ["standing"]
    log = ctl.log
    run = log["state"] == 4
    qd = log["qd_ref"][run]
    jerk = np.abs(np.diff(qd, n=2, axis=0)).max() / 1e-3**2  # rad/s³
    assert jerk < 2000.0, jerk  # (a step of q̈_r of 1 rad/s² in one cycle would be 1000)
    assert np.abs(log["command"]).max() < 18.0
    k_chatter = int(2.5 / 1e-3)
    seg = log["q_ref"][run]
    moved = np.abs(np.diff(seg[k_chatter:k_chatter + 1000], axis=0)).max()
    assert moved < 1e-9  # (frozen all through the chatter)


@pytest.mark.slow
@pytest.mark.hazard("H-FROZEN-MOVE")
def test_a_frozen_move_ends_by_itself_and_the_run_ends(tmp_path):
    """Standing up, GO released half-way and never pressed again: after the activities'
    frozen_timeout the move returns to sitting by itself, END is accepted, SHUTDOWN."""
    text = (ROOT / "configs/activities/exo_leg.yaml").read_text()
    text = text.replace("hold_go: true,\n             stoppable: false}\n  walk",
                        "hold_go: true,\n             stoppable: false, frozen_timeout: 1.0}\n"
                        "  walk")
    assert "frozen_timeout: 1.0" in text
    acts = _write(tmp_path, "acts.yaml", text)
    plan = ((0.5, "buttons", "go"), (1.5, "buttons", "none"))
    steps = [{"request": "start", "motion": "stand_up", "at": 0.2},
             {"request": "end", "at": 9.0}]
    ctl, res = run_session(tmp_path, steps, plan=plan, duration=9.0, start_pose=SITTING,
                           activities=str(acts))
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    fin = [e for e in ctl.events if e["event"] == "finished"]
    assert fin and fin[-1]["posture"] == "sitting"
    end = [e for e in requests(ctl) if e["request"] == "end"]
    assert end and end[-1]["answer"] == "accepted"
    assert _steps(ctl.log) < BUDGET


@pytest.mark.hazard("H-FROZEN-MOVE")
def test_a_run_never_ends_in_run(tmp_path, monkeypatch):
    """A session that does not end (GO held on a frozen... here: a script that never ENDs and
    a move frozen with no timeout) is stopped past its limit, saying why: the run ends
    SHUTDOWN (exit 1), an event run_limit names the cause."""
    monkeypatch.setattr(sessions, "SESSION_SPARE_S", 1.0)
    plan = ((0.5, "buttons", "go"), (1.5, "buttons", "none"))
    steps = [{"request": "start", "motion": "stand_up", "at": 0.2}]
    ctl, res = run_session(tmp_path, steps, plan=plan, duration=2.0, start_pose=SITTING)
    assert res.summary["final_state"] == "SHUTDOWN", res.summary["final_state"]
    why = [e for e in ctl.events if e["event"] == "run_time_up"]
    assert why and "--duration" in why[0]["why"]
    assert res.summary["session_ended_by"] == "run_time_up"
    fin = [e for e in ctl.events if e["event"] == "finished"]
    assert fin[-1]["posture"] == "sitting"  # (the frozen move ended: back where it began)


@pytest.mark.slow
@pytest.mark.hazard("H-FROZEN-MOVE")
def test_a_session_that_cannot_end_is_stopped_smoothly(tmp_path, monkeypatch):
    """The last resort: a session whose machine cannot end it (here: END refused by a
    broken machine) is frozen smoothly and the run goes STOPPING past its limit — SHUTDOWN,
    event run_limit, exit 1."""
    from exo_rt.session.machine import ActivityMachine

    monkeypatch.setattr(sessions, "SESSION_SPARE_S", 1.0)
    real = ActivityMachine.handle

    def no_end(self, req, active=True):
        if req.kind == rq.END:
            return self._no(req, rq.R_NOT_IN_POSTURE)
        return real(self, req, active)

    monkeypatch.setattr(ActivityMachine, "handle", no_end)
    steps = [{"request": "start", "motion": "walk", "at": 0.1}]
    ctl, res = run_session(tmp_path, steps, start_pose=STANDING, duration=2.0)
    assert res.summary["final_state"] == "SHUTDOWN" and res.exit_code == 1
    limit = [e for e in ctl.events if e["event"] == "run_limit"]
    assert limit and "did not end" in limit[0]["why"]
    assert _steps(ctl.log) < BUDGET


# ---------------------------------------------------------------- 3. Python that cannot stop it


class _Boom:
    """A request source whose code raises at a given cycle (a bug in session code)."""

    def __init__(self, at: float) -> None:
        self.at, self.k0 = at, None

    def poll(self, k: int):
        if self.k0 is None:
            self.k0 = k
        if (k - self.k0) * 1e-3 >= self.at:
            raise RuntimeError("a bug in a request source")
        return ()


@pytest.mark.hazard("H-SESSION-EXCEPTION")
def test_an_exception_in_session_code_stops_the_walk_and_the_run_ends(tmp_path):
    """Mid-walk, a source raises: the walk STOPs with its closing step, END, SHUTDOWN; the
    traceback in the events and in session-error.txt; the summary written; exit 1."""
    steps = [{"request": "start", "motion": "walk", "at": 0.1}]
    ctl, res = run_session(tmp_path, steps, start_pose=STANDING, duration=8.0,
                           sources=(lambda ctl: _Boom(2.0),))
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    assert res.exit_code == 1 and "RuntimeError" in res.summary["session_ended_by"]
    fault = [e for e in ctl.events if e["event"] == "session_fault"]
    assert fault and "a bug in a request source" in fault[0]["traceback"]
    assert "a bug" in (tmp_path / "run" / "session-error.txt").read_text()
    assert [(e["motion"], e["posture"]) for e in ctl.events if e["event"] == "finished"] == [
        ("walk", "standing")]
    assert (tmp_path / "run" / "summary.json").exists()
    assert _steps(ctl.log) < BUDGET


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
@pytest.mark.hazard("H-REQUEST-FLOOD")
@pytest.mark.slow
def test_twenty_thousand_requests_at_once_keep_the_cycle_short(tmp_path):
    """20 000 script steps due at one instant: taken MAX_REQUESTS a cycle, in order (and
    their events handed to the recording a share a cycle); the longest cycle (wall clock,
    lockstep, the collector disabled as in real time) at most twice the longest of the same
    session without them. Lockstep runs are deterministic, so cycle k does the same work in
    every run: each cycle's time is the least of three runs, which removes the host's
    preemptions (one of 3.5 ms failed a CI run) and keeps what the requests cost."""
    base = [{"request": "start", "motion": "walk", "at": 0.1},
            {"request": "stop", "at": 7.0}, {"request": "end", "after": "finished"}]
    flood = [{"request": "level", "value": 0.5, "at": 1.0}] * 20000

    def cycle_times(steps, sub):
        times = []
        from exo_rt.runtime.controller import Controller

        orig = Controller._cycle

        def timed(self, k):
            t0 = time.perf_counter()
            out = orig(self, k)
            times.append(time.perf_counter() - t0)
            return out

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Controller, "_cycle", timed)
            gc.collect()
            gc.disable()  # (as in real time: the loop runs with the collector disabled)
            try:
                ctl, res = run_session(tmp_path / sub, steps, start_pose=STANDING,
                                       duration=9.0)
            finally:
                gc.enable()
        assert res.summary["final_state"] == "SHUTDOWN"
        return ctl, np.array(times)

    runs = {"plain": [], "flood": []}
    for i in range(3):
        for sub, steps in (("plain", base), ("flood", base[:1] + flood + base[1:])):
            ctl, times = cycle_times(steps, f"{sub}{i}")
            runs[sub].append(times)
    n = min(len(t) for t in runs["plain"] + runs["flood"])
    plain, flooded = (float(np.min([t[:n] for t in runs[sub]], axis=0).max())
                      for sub in ("plain", "flood"))
    levels = [e for e in requests(ctl) if e["request"] == "level"]
    assert len(levels) == 20000
    per = np.bincount([e["cycle"] for e in levels])
    assert per.max() <= sessions.MAX_REQUESTS
    assert np.count_nonzero(per) >= 20000 // sessions.MAX_REQUESTS
    told = [e for e in ctl.events if e["event"] == "requests_waiting"]
    assert len(told) == 1 and told[0]["source"] == "script"
    print(f"longest cycle: {plain * 1e3:.3f} ms plain, {flooded * 1e3:.3f} ms flooded")
    assert flooded <= 2.0 * plain, (flooded, plain)
