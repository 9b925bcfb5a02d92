"""The bench measures through the controller's cycle and runs it: its velocity is the cycle's
estimate bit for bit (missing and late answers included), and the ``controller`` procedure
is the controller's run — the same figures as ``exo-rt run`` on the same simulated leg, the
same SAFE and safe action on a fault."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hil_fixtures import CONFIGS, sim_bench

from exo_rt.bus import cia402 as c
from exo_rt.bus.flags import F_LATE, F_MISSING
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import ALIGN, READY, READY_CYCLES, RUN, SAFE, STOPPING
from exo_rt.hil import procedures
from exo_rt.hil.bench import move_to
from exo_rt.hil.procedures import run_procedure
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.session.roles import Source

POSE = (0.3, 0.6)  # rad: where the simulated leg starts (sim_bench's default)


def test_the_bench_velocity_is_the_cycles_estimate_bit_for_bit():
    """A move on the bench with the knee's answer dropped once and delayed a period once: the
    velocities the bench measured are what :func:`exo_rt.cycle.step.estimate` gives on
    the same samples (positions, flags, SYNC times), replayed on fresh data of the same
    model; the fixed-period filter it replaced would not (it divides the motion after a
    missing sample by one period)."""
    b = sim_bench()
    b.start()
    ctl = b.control
    replay = ctl.fresh()
    replay.v[:] = ctl.v  # the estimate's anchor as start() left it
    samples: list = []
    exchange = b.exchange
    faults = {150: "drop", 400: "delay"}  # cycle → the knee's TPDO dropped / a period late

    def recorded(currents):
        if len(samples) in faults:
            b.world.inject(faults[len(samples)], "leg", 2)
        exchange(currents)
        samples.append((ctl.q.copy(), ctl.flags.copy(), float(ctl.s["sample_t"])))

    b.exchange = recorded
    log = move_to(b, b.home() + np.array([0.15, -0.2]), seconds=0.6).trimmed()
    assert len(samples) == log.n == 900
    flags = np.array([f for _, f, _ in samples])
    assert (flags[:, 1] & F_MISSING).any() and (flags[:, 1] & F_LATE).any()
    t = np.array([s for _, _, s in samples])
    assert np.diff(t) == pytest.approx(b.dt, rel=1e-9)  # lockstep: the SYNCs k·dt apart
    for k, (q, f, ts) in enumerate(samples):
        replay.q[:], replay.flags[:], replay.s["sample_t"] = q, f, ts
        cy.estimate(replay.model, replay.data)
        assert replay.qd.tobytes() == log.qd[k].tobytes(), k
    knee = log.qd[:, 1]
    assert np.abs(knee).max() > 0.3  # rad/s: the knee moved
    for k in faults:  # the estimate held through the gap and the re-anchoring samples, not
        # the motion of two periods divided by one
        assert np.all(knee[k : k + 1 + cy.SETTLE_SAMPLES] == knee[k - 1]), k


@pytest.mark.slow
def test_the_controller_procedure_is_the_controllers_run(tmp_path):
    """The controller's cycle on the bench against the controller's own run on the same
    simulated leg from the same pose: the same tracking errors and peak currents over RUN
    (to rounding), the same cycles, state by state, the same reference bit for bit."""
    seconds = 2.0
    b = sim_bench(pose=POSE)
    log, summary = b.run_controller(seconds)
    top = load_top(CONFIGS / "exo_leg.yaml")
    ctl = Controller(top, "sim", board=None, start_pose=list(POSE))
    run = ctl.run(seconds, tmp_path / "run")
    assert summary["final_state"] == run.summary["final_state"] == "SHUTDOWN"
    assert summary["fault"] is None
    assert summary["cycles"] == log.n == run.summary["cycles"]
    stop = int(top.stop_s * top.rate_hz)
    counts = [int(np.sum(log.state == s)) for s in (READY, ALIGN, RUN, STOPPING)]
    assert counts == [int(np.sum(ctl.log["state"] == s)) for s in (READY, ALIGN, RUN, STOPPING)]
    assert counts[0] == READY_CYCLES + 1 and counts[1] == 0 and counts[3] == stop
    assert counts[2] > seconds * top.rate_hz  # the session: homing, walking, the closing step
    for joint, ours in summary["joints"].items():
        theirs = run.summary["joints"][joint]
        for key in ("rms_error_deg", "max_error_deg", "max_abs_current_A"):
            # (the SYNC times of the two clocks differ by rounding, ~1e-16 s: a velocity
            # estimate ~1e-16 apart flips one encoder count seconds later: ~1e-4 of the figures)
            assert ours[key] == pytest.approx(theirs[key], rel=2e-3), (joint, key)
        assert 0.0 < ours["rms_error_deg"] < 0.5  # computed torque tracks the gait
    assert log.q_ref.tobytes() == ctl.log["q_ref"][: log.n].tobytes()
    run_k = log.state == RUN
    err = np.degrees(log.q[run_k] - log.q_ref[run_k])
    assert np.sqrt(np.mean(err**2, axis=0)) == pytest.approx(
        [summary["joints"][j]["rms_error_deg"] for j in b.robot.joint_names], rel=1e-9)


class FaultAt(Source):
    """A session source that asks nothing: the knee's drive (node 2 on bus ``leg``) faults
    when the simulated world steps past control cycle ``at`` − 1 (told at the end of cycle
    ``at`` − 2, after its SYNC went out)."""

    def __init__(self, world, at: int) -> None:
        self.world, self.at = world, at

    def poll(self, k: int):
        if k == self.at - 2:
            self.world.inject("fault", "leg", 2)
        return ()


def test_a_fault_in_the_controller_procedure_goes_safe_as_in_a_run(tmp_path):
    """The knee's drive faults while the session homes: SAFE in that cycle, the safe action
    (zero current) over its ramp, the drives disabled; the report aborted with the cause,
    state and time."""
    b = sim_bench()
    at = 1500  # control cycles: in RUN, homing
    b.sources.append(lambda ctl: FaultAt(b.world, at))
    log, summary = b.run_controller(1.0)
    fault = summary["fault"]
    assert summary["final_state"] == "SAFE"
    assert (fault["cause"], fault["joint"], fault["state"]) == ("drive_fault", "knee", "RUN")
    k = fault["cycle"]
    assert at - 2 <= k <= at + 1  # detected in the cycle its EMCY and TPDO arrive
    assert np.all(log.state[:k] != SAFE) and np.all(log.state[k:] == SAFE)
    ramp = b.top.safety.ramp_cycles
    assert log.n - k == ramp + 4  # the ramp, then disabled: as Controller's SAFE ends
    assert np.all(log.i_cmd[k:] == 0.0)  # zero_current
    (d,) = b.drives
    d.cycle(np.zeros(d.n))  # the hip disabled, the knee's drive in its latched FAULT
    assert [c.state_of(int(sw)) for sw in d.statusword] == [c.SWITCH_ON_DISABLED, c.FAULT]

    b = sim_bench()
    b.sources.append(lambda ctl: FaultAt(b.world, at))
    report = run_procedure("controller", b, tmp_path)
    assert report["aborted"]
    assert report["reason"].startswith(f"SAFE at t = {fault['t']:.3f} s in RUN: drive_fault "
                                       "on knee")
    saved = json.loads((tmp_path / "bench-controller.json").read_text())
    assert saved["aborted"] and saved["reason"] == report["reason"]


def test_the_controller_report_table_and_trace(tmp_path):
    """The report: per joint the figures, a 10 ms trace (t, angle, reference) and the table."""
    b = sim_bench()
    r = procedures.controller(b, seconds=0.5)
    knee = r["joints"]["knee"]
    assert len(knee["trace"]["t_s"]) == len(r["trace_states"]) == -(-r["cycles"] // 10)
    assert r["trace_states"][0] == "READY" and r["trace_states"][-1] == "STOPPING"
    assert knee["max_error_deg"] >= knee["rms_error_deg"] > 0.0
    lines = procedures.result_lines("controller", r)
    assert lines[0].split() == ["joint", "RMS", "error", "deg", "max", "error", "deg", "max",
                                "current", "A"]
    assert lines[2].split()[0] == "knee" and float(lines[2].split()[1]) == pytest.approx(
        knee["rms_error_deg"], abs=1e-3)
