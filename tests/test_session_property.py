"""Property: whatever is asked, by whom, in whatever order, of activities and wearer files
that load, the reference the cycle tracks keeps within the joints (issue 43).

Thousands of random sessions run the activity machine on the compiled segment and reference
governor of a real cycle (``exo_leg`` and ``exo_2leg``), cycle by cycle, without the plant
(the reference alone: its figures do not depend on the leg): q_r within the joints' and the
wearer's ranges, |q̇_r| within the speed bounds, |Δq̇_r| < 0.05 rad/s per cycle, and the
governor never had to act (the load and request checks let nothing beyond through). The
closed loop — never SAFE on tracking or saturation, every run ends with its summary — is
checked on random sessions of the whole controller below.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessions_fixtures import run_session

from exo_rt.cycle import governor, segment
from exo_rt.cycle import step as cy
from exo_rt.cycle.layout import (
    V_GOV_HI,
    V_GOV_LO,
    V_GOV_VEL,
    V_OFFSET,
    V_QDR,
    V_QR,
)
from exo_rt.errors import ConfigError
from exo_rt.jit import njit
from exo_rt.runtime.config import load_top
from exo_rt.session import session as sessions
from firmware_bridge import requests as rq

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 0.05  # rad/s per cycle
KINDS = [rq.START, rq.GO, rq.GO_RELEASE, rq.STOP, rq.SPEED, rq.STEP_LENGTH, rq.MODE,
         rq.LEVEL, rq.NEXT, rq.PREV, rq.CONFIRM, rq.END]
SOURCES = [rq.BOARD, rq.CONSOLE, rq.SCRIPT]
MOTIONS = ["stand_up", "walk", "sit_down", "home", "fly"]


@njit(cache=True)
def advance(s_arr, seg_arr, v, gaits, dt, cycles, stats):
    """``cycles`` cycles of RUN's reference (the segment, then the governor), keeping in
    ``stats`` the largest |Δq̇_r|, the largest |q̇_r|/bound, the lowest margin to the range's
    ends (rad; < 0: outside)."""
    s, seg = s_arr[0], seg_arr[0]
    n = v.shape[1]
    prev = np.empty(n)
    for _ in range(cycles):
        for j in range(n):
            prev[j] = v[V_QDR, j]
        segment.reference(s, seg, v, gaits, v[V_OFFSET], dt)
        governor.govern(s, v, dt)
        s.k += 1.0
        for j in range(n):
            stats[0] = max(stats[0], abs(v[V_QDR, j] - prev[j]))
            stats[1] = max(stats[1], abs(v[V_QDR, j]) / v[V_GOV_VEL, j])
            stats[2] = min(stats[2], v[V_QR, j] - v[V_GOV_LO, j], v[V_GOV_HI, j] - v[V_QR, j])


def _variant(tmp: Path, robot: str, i: int):
    """Activities and wearer files of variant ``i`` (0: the shipped ones), made at random
    within what loads: openings, closings and moves' speeds, the wearer's speeds and steps."""
    if i == 0:
        return None, None
    rng = np.random.default_rng(i)
    acts = yaml.safe_load((ROOT / f"configs/activities/{robot}.yaml").read_text())
    for m in acts["motions"].values():
        if m["kind"] == "walk":
            m["opening"] = float(rng.uniform(0.4, 1.5))
            m["closing"] = float(rng.uniform(0.4, 1.5))
        elif m["kind"] == "move":
            m["max_speed"] = float(rng.uniform(0.2, 0.6))
        else:
            m["max_speed"] = float(rng.uniform(0.05, 0.2))
    top = float(rng.uniform(0.35, 0.6))
    wearer = {"height": float(rng.uniform(1.55, 1.9)), "mass": float(rng.uniform(55, 95)),
              "sex": "female" if i % 2 else "male",
              "speed": {"min": 0.2, "max": top, "default": 0.3, "presets": [0.2, 0.3, top]},
              "step_length": {"min": float(rng.uniform(0.2, 0.26)), "max": 0.6}}
    a, w = tmp / f"acts{i}.yaml", tmp / f"wearer{i}.yaml"
    a.write_text(yaml.safe_dump(acts))
    w.write_text(yaml.safe_dump(wearer))
    return a, w


def _pool(tmp: Path):
    """(top, cycle, session) of every variant that loads, per robot."""
    out = []
    for robot in ("exo_leg", "exo_2leg"):
        top = load_top(ROOT / "configs" / f"{robot}.yaml")
        for i in range(6):
            a, w = _variant(tmp, robot, i)
            cycle = cy.build(top.robot, top.exo, top.controller, top.safety,
                             dt=1.0 / top.rate_hz)
            try:
                sess = sessions.build(cycle, top, [], 1e-3, 10.0, activities=a, wearer=w)
            except ConfigError:
                continue  # (a variant the checks refuse: not a session anyone can run)
            out.append((top, cycle, sess))
    return out


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = _pool(tmp_path_factory.mktemp("variants"))
    assert len(p) >= 6  # (most variants load)
    return p


request = st.tuples(st.integers(0, 900), st.sampled_from(KINDS), st.sampled_from(SOURCES),
                    st.sampled_from(MOTIONS), st.floats(0.0, 1.2), st.sampled_from(
                        [None, ("left",), ("right",), ("",)]))


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(0, 1000), start=st.sampled_from(["standing", "sitting", "between"]),
       asks=st.lists(request, min_size=1, max_size=25))
def test_no_request_sequence_takes_the_reference_beyond_the_joints(pool, which, start, asks):
    _top, cycle, sess = pool[which % len(pool)]
    m, s, v = sess.machine, cycle.s, cycle.v
    s_arr, seg_arr = cycle.s_array, cycle.seg_array
    acts = m.activities
    # a fresh session on the same cycle, the leg in a posture or between two
    m.__init__(cycle, acts, m.wearer, m.gaits, m.envelope)
    s["governed"] = s["governing"] = 0.0
    q = acts.posture_q("standing") if start != "sitting" else acts.posture_q("sitting")
    if start == "between":
        q = 0.5 * (acts.posture_q("standing") + acts.posture_q("sitting"))
    v[V_QR] = q
    v[V_QDR] = 0.0
    governor.follow(v)
    m.start()
    stats = np.array([0.0, 0.0, np.inf])
    for gap, kind, source, motion, value, legs in asks:
        left = gap
        while left > 0:
            c = min(left, 10)
            advance(s_arr, seg_arr, v, cycle.gaits, 1e-3, c, stats)
            m.after_cycle()
            left -= c
        if kind == rq.END and m.motion is None:
            continue  # (an END would end the session: asked at the end)
        val = value if kind in (rq.SPEED, rq.STEP_LENGTH, rq.LEVEL) else None
        req = rq.Request(kind, source, motion=motion if kind == rq.START else None,
                         value=val, legs=legs if kind == rq.LEVEL and legs != ("",) else None)
        if kind == rq.LEVEL and legs == ("",):
            req = rq.Request(kind, source, value=min(val, 1.0))
        m.handle(req)
    for _ in range(400):  # then whatever runs goes on (STOP asked, GO released) to its end
        advance(s_arr, seg_arr, v, cycle.gaits, 1e-3, 10, stats)
        m.after_cycle()
        if m.motion is not None and m.motion.kind == "walk" and not m.stop_asked:
            m.handle(rq.Request(rq.STOP, rq.SCRIPT))
    assert stats[0] < BUDGET, stats
    assert stats[1] <= 1.0 + 1e-9, stats
    assert stats[2] >= -1e-12, stats
    assert s["governed"] == 0.0, s["governed"]


SESSION_ASKS = st.lists(st.tuples(st.floats(0.0, 1.5), st.sampled_from(
    ["start walk", "start stand_up", "start sit_down", "start home", "go", "go_release",
     "stop", "confirm", "speed", "step_length", "mode"]), st.floats(0.1, 1.0)),
    min_size=2, max_size=8)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(asks=SESSION_ASKS, config=st.sampled_from(["exo_leg.yaml", "exo_2leg.yaml"]))
def test_random_sessions_close_the_loop_without_safe(tmp_path, asks, config):
    """The whole controller on random sessions: never SAFE on tracking or saturation, every
    run ends (SHUTDOWN) with its summary."""
    steps, t = [], 0.2
    for gap, what, value in asks:
        t += gap
        words = what.split()
        step = {"request": words[0], "at": round(t, 3)}
        if words[0] == "start":
            step["motion"] = words[1]
        if words[0] in ("speed", "step_length"):
            step["value"] = round(0.2 + 0.4 * value, 3) if words[0] == "speed" else \
                round(0.25 + 0.3 * value, 3)
        steps.append(step)
    # then STOP, and END once the walk it stops has finished: a walk still going ends here
    # rather than 30 s past --duration (the guard's STOP, END: what a STOP refused, or a
    # move still held, still leaves to it)
    steps += [{"request": "stop", "at": round(t + 0.3, 3)},
              {"request": "end", "after": "finished"}]
    legs = 2 if "2leg" in config else 1
    sub = tmp_path / f"s{abs(hash(str(asks))) % 10**8}"
    _ctl, res = run_session(sub, steps, config=config, duration=t + 1.0,
                            start_pose=[0.0, 0.05] * legs)
    s = res.summary
    causes = [f.get("cause") for f in s["faults"]]
    assert not {"tracking_error", "current_saturation"} & set(causes), causes
    assert s["final_state"] in ("SHUTDOWN", "SAFE")
    assert (sub / "run" / "summary.json").exists()
