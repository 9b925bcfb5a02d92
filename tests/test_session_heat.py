"""A walk does not go on with a motor's winding past its warning level: past it the joint's
current limit derates, and a walk on derated drives would track less and less each stride
until SAFE (``winding_temperature``) cut the current under a standing wearer. The session
STOPs the walk itself (source ``session``: the closing step ends it standing) and refuses
a walk asked while a winding is past its warning (``winding_hot``), until it has cooled."""

from __future__ import annotations

import pytest
from sessions_fixtures import EMPTY, requests, run_session

from exo_rt.cycle.layout import V_T_WINDING
from exo_rt.runtime.replay import replay
from firmware_bridge import requests as rq


class Heat:
    """Puts the knee's winding at ``temp`` °C at each of ``times`` (s from the session's
    start): a hot winding, without the walk it would take to make one."""

    def __init__(self, ctl, times, temp: float) -> None:
        self.ctl, self.times, self.temp, self.k0 = ctl, times, temp, None
        self.at: list[int] = []  # the cycles it heated in

    def poll(self, k: int):
        if self.k0 is None:
            self.k0 = k
        if any(k == self.k0 + round(t / self.ctl.dt) for t in self.times):
            knee = list(self.ctl.robot.joint_names).index("knee")
            self.ctl.cycle.v[V_T_WINDING, knee] = self.temp
            self.at.append(k)
        return EMPTY


@pytest.mark.hazard("H-WALK-HOT")
@pytest.mark.slow
def test_a_winding_past_its_warning_stops_the_walk_and_no_walk_starts_until_it_cools(tmp_path):
    """exo_leg walking (its warning 90 °C, its limit 92 °C): the knee's winding put at
    90.5 °C at 3 s → the session's own STOP within n = 2 cycles (one joint a cycle), the
    closing step ends the walk standing; put there again at 9.99 s, standing → a walk asked
    at 10 s is refused ``winding_hot`` naming the knee; at 14 s, cooled, one is accepted.
    No SAFE. Replay re-asks the recorded STOP (the session's own STOP is not asked again):
    the commands are bit for bit the same up to the second heating — the test's own, which
    no record holds (a run's real heat comes from its currents, which replay feeds again)."""
    heat: list[Heat] = []

    def make(ctl):
        heat.append(Heat(ctl, (3.0, 9.99), 90.5))
        return heat[0]

    steps = [{"request": "start", "motion": "walk", "at": 0.1},
             {"request": "start", "motion": "walk", "at": 10.0},
             {"request": "start", "motion": "walk", "at": 14.0},
             {"request": "stop", "at": 18.0}, {"request": "end", "after": "finished"}]
    ctl, res = run_session(tmp_path, steps, duration=25.0, sources=(make,))
    s = res.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"], s["faults"]
    first, second = heat[0].at
    asked = requests(ctl)
    stops = [e for e in asked if e["request"] == "stop"]
    own = stops[0]
    assert own["source"] == "session" and own["answer"] == "accepted"
    assert own["note"] == "winding past its warning"
    assert first <= own["cycle"] <= first + 2
    ended = [e for e in ctl.events if e["event"] == "finished" and e["motion"] == "walk"]
    assert ended[0]["posture"] == "standing" and ended[0]["cycle"] < second
    walks = [e for e in asked if e["request"] == "start" and e["motion"] == "walk"]
    assert [w["answer"] for w in walks] == ["accepted", "rejected", "accepted"]
    hot = walks[1]
    assert hot["reason"] == rq.REASONS[rq.R_WINDING_HOT] and hot["joint"] == "knee"
    assert hot["winding_C"] > hot["warning_C"] == 90.0
    assert [e["source"] for e in stops] == ["session", "script"]  # the script's, at 18 s
    out = replay(res.run_dir, "controller")
    assert out["first_diff_cycle"] is not None and out["first_diff_cycle"] > second


@pytest.mark.slow
def test_a_script_whose_walk_the_heat_stopped_goes_on_past_its_own_stop(tmp_path):
    """The script's STOP at 6 s finds the walk the session stopped at 3 s already ended:
    refused ``not_walking``, it counts as finished, and the step waiting for that (END) is
    made — the script ends the session, not the run's time limit."""
    heat: list[Heat] = []

    def make(ctl):
        heat.append(Heat(ctl, (3.0,), 90.5))
        return heat[0]

    steps = [{"request": "start", "motion": "walk", "at": 0.1},
             {"request": "stop", "at": 6.0}, {"request": "end", "after": "finished"}]
    ctl, res = run_session(tmp_path, steps, duration=8.0, sources=(make,))
    s = res.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"] and s["session_ended_by"] is None
    asked = [(e["request"], e["source"], e["answer"], e.get("reason")) for e in requests(ctl)]
    assert asked == [("start", "script", "accepted", None),
                     ("stop", "session", "accepted", None),
                     ("stop", "script", "rejected", "not_walking"),
                     ("end", "script", "accepted", None)]


@pytest.mark.hazard("H-WALK-HOT")
@pytest.mark.slow
def test_a_warm_winding_slows_the_walk_and_refuses_a_faster_one(tmp_path):
    """exo_leg walking at its default 0.4 m/s (slow_walk 15 °C below its 90 °C warning):
    the knee's winding put at 80 °C at 3 s → within n = 2 cycles the session asks the
    wearer's slowest preset (0.3 m/s, source ``session``), accepted, once; the script's
    0.5 m/s at 6 s, the knee still warm, is refused ``winding_warm`` naming the knee; the walk
    goes on (no STOP but the script's, at 10 s) and ends standing, no SAFE. Replay re-asks
    the recorded requests, not its own: bit for bit up to the test's own heating."""
    heat: list[Heat] = []

    def make(ctl):
        heat.append(Heat(ctl, (3.0,), 80.0))
        return heat[0]

    steps = [{"request": "start", "motion": "walk", "at": 0.1},
             {"request": "speed", "value": 0.5, "at": 6.0},
             {"request": "stop", "at": 10.0}, {"request": "end", "after": "finished"}]
    ctl, res = run_session(tmp_path, steps, duration=16.0, sources=(make,))
    s = res.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"], s["faults"]
    (at,) = heat[0].at
    asked = requests(ctl)
    got = [(e["request"], e["source"], e["answer"], e.get("reason")) for e in asked]
    assert got == [("start", "script", "accepted", None),
                   ("speed", "session", "accepted", None),
                   ("speed", "script", "rejected", "winding_warm"),
                   ("stop", "script", "accepted", None),
                   ("end", "script", "accepted", None)]
    slowed, faster = asked[1], asked[2]
    assert at <= slowed["cycle"] <= at + 2 and slowed["value"] == 0.3
    assert slowed["note"] == "winding warm: the walk slows"
    assert faster["joint"] == "knee" and 75.0 < faster["winding_C"] < 90.0
    assert faster["slow_C"] == 75.0
    assert ctl.session.machine.speed == 0.3
    ended = [e for e in ctl.events if e["event"] == "finished" and e["motion"] == "walk"]
    assert ended[0]["posture"] == "standing"
    out = replay(res.run_dir, "controller")
    assert out["first_diff_cycle"] is not None and out["first_diff_cycle"] > at
