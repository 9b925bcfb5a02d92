"""An exception in the cycle's own compiled code (docs/safety.md, "An exception in the
compiled cycle").

The step is called through its C wrapper, and a law through its cfunc: there numba cannot
raise, it reports the exception to ``sys.unraisablehook`` and returns with the rest undone.
Found by the random-session property (tests/test_session_property.py): a GO-held move left
frozen before it moved ended by a move of no length, whose progress divided by its zero
duration — 31 667 cycles whose step stopped at the reference, the last currents standing,
nothing in the summary. Now:

- a frozen move still in its start posture ends there at once (before, a move of no length
  divided by zero; one of almost none was refused as beyond the joints, every cycle, and the
  session was stuck with no posture);
- any exception the compiled cycle swallows marks the cycle broken, and the next cycle goes
  SAFE with the cause ``cycle_exception``, the safe action ramped out as for any fault.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from sessions_fixtures import ROOT, run_session

from exo_rt.control import registry
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller

LAW = "raises_mid_walk_test"


@pytest.mark.hazard("H-CYCLE-EXCEPTION")
def test_a_frozen_move_that_never_moved_ends_at_once_where_it_stands(tmp_path):
    """sit_down asked, GO never pressed: frozen for its ``frozen_timeout`` (0.5 s here), it
    ends where it stands — standing again, the session's END accepted, nothing swallowed."""
    acts = yaml.safe_load((ROOT / "configs" / "activities" / "exo_leg.yaml").read_text())
    acts["motions"]["sit_down"]["frozen_timeout"] = 0.5
    path = tmp_path / "activities.yaml"
    path.write_text(yaml.safe_dump(acts))
    steps = [{"request": "start", "motion": "sit_down", "at": 0.5},
             {"request": "end", "after": "finished", "wait": 0.2}]
    ctl, res = run_session(tmp_path / "s", steps, duration=3.0, activities=str(path),
                           start_pose=[0.0, 0.05])
    s = res.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"], s["faults"]
    ends = [e for e in ctl.events if e["event"] == "finished" and e["answer"] == "finished"]
    assert [(e["motion"], e["posture"], e.get("frozen")) for e in ends] == [
        ("sit_down", "standing", 0.5)], ends
    asked = next(e for e in ctl.events if e["event"] == "request" and e["request"] == "start")
    assert ends[0]["cycle"] - asked["cycle"] == 500  # frozen 0.5 s, then there at once
    assert s["session_ended_by"] is None  # the script's END
    assert ctl.io.swallowed.count == 0


def raises_mid_walk(m, d):
    """Gravity-free PD that divides by zero once the hip's reference passes 0.2 rad (the
    walk's first swing): an exception inside a law the cycle calls through its cfunc."""
    n = d.q.shape[0]
    for j in range(n):
        d.tau[j] = m.gains[j].kp * (d.qr[j] - d.q[j]) + m.gains[j].kd * (d.qdr[j] - d.qd[j])
    if d.qr[0] > 0.2:
        d.tau[0] = d.tau[0] / (d.qr[0] - d.qr[0])


@pytest.fixture
def raising_law(tmp_path):
    """The law registered, and a controller file naming it."""
    registry.law(LAW, doc="raises mid-walk, defined in a test")(raises_mid_walk)
    ctrl = tmp_path / "raising.yaml"
    ctrl.write_text(f"law: {LAW}\njoints:\n  hip: {{kp: 600, kd: 30}}\n"
                    "  knee: {kp: 600, kd: 30}\ncurrent_limit: 20.0\n"
                    "velocity_filter_hz: 300\nreference: {type: gait, period: 2.0}\n")
    yield ctrl
    registry.unregister(LAW)


@pytest.fixture
def raising_top(raising_law, tmp_path):
    ctrl = raising_law
    top = yaml.safe_load((ROOT / "configs" / "exo_leg.yaml").read_text())
    top["controller"] = str(ctrl)
    top["robot"] = str(ROOT / "configs" / "robots" / "exo_leg.yaml")
    for key in ("buses",):
        top[key] = str(ROOT / "configs" / top[key])
    path = tmp_path / "top.yaml"
    path.write_text(yaml.safe_dump(top))
    return path


@pytest.mark.hazard("H-CYCLE-EXCEPTION")
def test_an_exception_in_the_compiled_cycle_goes_safe_the_next_cycle(raising_top, tmp_path,
                                                                     capfd):
    """The law raises in the walk's first swing: the cycle after is SAFE, cause
    ``cycle_exception`` (the fault's detail naming the exception), the currents ramped to
    zero and the drives disabled; one line on stderr names the exception."""
    ctl = Controller(load_top(raising_top), "sim", history=True)
    res = ctl.run(4.0, tmp_path / "run")
    s = res.summary
    assert s["final_state"] == "SAFE", s["final_state"]
    assert [f["cause"] for f in s["faults"]] == ["cycle_exception"], s["faults"]
    assert s["faults"][0]["detail"].startswith("ZeroDivisionError('division by zero'), ")
    assert ctl.io.swallowed.count >= 1
    assert isinstance(ctl.io.swallowed.first, ZeroDivisionError)
    log = ctl.log
    qr = log["q_ref"][:, 0]
    first = int(np.argmax(qr > 0.2))  # the first cycle whose law raised
    states = [json.dumps(e) for e in ctl.events if e["event"] == "state"]
    safe_k = next(e["cycle"] for e in ctl.events
                  if e["event"] == "state" and e["state"] == "SAFE")
    assert 0 < safe_k - int(log["cycle"][first]) <= 2, (safe_k, first, states)
    run = log[: int(np.max(np.nonzero(log["cycle"])[0])) + 1]  # (the rows the run filled)
    ramp = run[run["cycle"] >= safe_k]
    assert np.all(ramp["state"] == ramp["state"][0])  # SAFE to the end …
    assert np.all(ramp["command"][21:] == 0.0) and len(ramp) > 21  # … ramped out in 20
    err = capfd.readouterr().err
    assert "the cycle's compiled step raised at cycle" in err and "ZeroDivisionError" in err
    assert "SAFE (cycle_exception)" in err


def test_model_in_the_loop_refuses_the_figures_of_a_law_that_raised(raising_law):
    """Model-in-the-loop runs the same compiled law: its exception, which numba can only
    report, is one clear error (ComputeError) rather than a broken run's figures."""
    from exo_rt.control.config import load_controller
    from exo_rt.errors import ComputeError
    from exo_rt.model import load_mechanism
    from exo_rt.sim.mil import run_mil

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    with pytest.raises(ComputeError, match=r"raised ZeroDivisionError\('division by "
                                           r"zero'\) in \d+ call\(s\) of 2000 cycles"):
        run_mil(robot, load_controller(raising_law, robot), cycles=1)
