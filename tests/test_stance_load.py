"""The stance-load feedforward (exo_rt.control.laws.stance_load; docs/world.md, "Where the
currents peak"): τ −= J_a(q)ᵀ f, f the vertical force a foot carries from the board's sole
sensors, at the ankle joint's centre of the controller's model.

- the feedforward against an independent reference: J from central differences of the ankle's
  position (the positions kernel: the shank's frame and the ankle's point in it), for random
  poses and forces, so −Jᵀf is what the law adds;
- the sign: a foot pushed up by the floor under a bent knee asks the knee to extend (a
  negative knee torque, flexion positive) — the joint torque that holds the weight;
- the sensors: clamped, filtered with the configured τ, and exactly zero while stale (no
  PRESSURE frame for the board's timeout, none yet, no board bound);
- off (no ``stance_load``): the cycle's load is empty, and the law's torque with stale sensors
  equals the law without the key bit for bit;
- a law that does not feed the stance load forward refuses the key; legs the robot lacks are
  skipped (the one-leg world robot shares the controller file: no feedforward there).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from exo_rt.control import laws, registry
from exo_rt.control.config import load_controller, stance_rows
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import RUN
from exo_rt.dynamics import kernels
from exo_rt.errors import ConfigError
from exo_rt.runtime.config import load_top
from firmware_bridge import fastdecode as fd

ROOT = Path(__file__).resolve().parents[1]
DT = 1e-3


@pytest.fixture(scope="module")
def top(tmp_path_factory):
    """The world config with its controller's stance load on (the shipped file leaves it
    off, and says how to turn it on: this line)."""
    shipped = ROOT / "configs" / "controllers" / "computed_torque_world.yaml"
    controller = tmp_path_factory.mktemp("stance") / "computed_torque_stance_world.yaml"
    controller.write_text(shipped.read_text() + "stance_load: {sensors: {left: 0, right: 1}, "
                          "tau_s: 0.02, max_N: 1000}\n")
    return load_top(ROOT / "configs" / "exo_2leg_world.yaml", controller=controller)


def _cycle(top, stance=True):
    cfg = top.controller
    assert cfg.stance_load is not None  # (the fixture's controller turns it on)
    if not stance:
        cfg = dataclasses.replace(cfg, stance_load=None)
    return cy.build(top.robot, top.exo, cfg, top.safety, dt=DT)


def _ankle(model, data, q, body, point):
    """The ankle point in the model's base frame (m), from the positions kernel."""
    nb = model.shape[0] - 1
    pos, rot = np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    kernels.frame_positions(model, data, q, pos)
    kernels.frame_rotations(model, data, q, rot)
    return pos[body] + rot[body] @ point


def _jacobian_fd(model, data, q, body, point, h=1e-6):
    jac = np.zeros((3, q.shape[0]))
    for j in range(q.shape[0]):
        dq = np.zeros_like(q)
        dq[j] = h
        jac[:, j] = (_ankle(model, data, q + dq, body, point)
                     - _ankle(model, data, q - dq, body, point)) / (2 * h)
    return jac


def test_the_point_jacobian_is_the_ankle_s_velocity(top):
    model, data = kernels.model_and_data(top.robot)
    rows, points = stance_rows(top.robot, top.controller, DT)
    rng = np.random.default_rng(4)
    out = np.zeros((3, top.robot.nq))
    for _ in range(5):
        q = rng.uniform(-1.0, 1.0, top.robot.nq)
        for rec, point in zip(rows, points, strict=True):
            kernels.point_jacobian(model, data, q, int(rec["body"]), point, out)
            ref = _jacobian_fd(model, data, q, int(rec["body"]), point)
            np.testing.assert_allclose(out, ref, atol=1e-8)
            assert np.abs(ref).max() > 0.2  # (a leg's reach: the check can fail)


def test_the_feedforward_is_minus_j_transpose_f(top):
    c = _cycle(top)
    rows, points = stance_rows(top.robot, top.controller, DT)
    model, data = kernels.model_and_data(top.robot)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = rng.uniform(-0.8, 0.8, c.n)
        forces = rng.uniform(50.0, 900.0, len(rows))
        c.q[:] = q
        c.tau[:] = 0.0
        c.load[:] = forces
        laws.stance_load(c.model.law, c.data.law)
        want = np.zeros(c.n)
        for rec, point, f in zip(rows, points, forces, strict=True):
            jac = _jacobian_fd(model, data, q, int(rec["body"]), point)
            want -= jac.T @ (f * np.array([0.0, 0.0, 1.0]))  # the floor pushes up (+z)
        np.testing.assert_allclose(c.tau, want, rtol=1e-7, atol=1e-7)
        assert np.abs(want).max() > 10.0


def test_a_floor_pushing_a_bent_leg_up_asks_its_knee_to_extend(top):
    """The leg hanging straight down, the knee bent 0.5 rad (flexion positive: the shank
    behind): the floor's 500 N up at the left ankle asks the left knee for −F·L_s·sin 0.5 (the
    torque that holds the weight, extending) and nothing of the right leg."""
    c = _cycle(top)
    names = list(top.robot.joint_names)
    c.q[:] = 0.0
    c.q[names.index("left_knee")] = 0.5
    c.tau[:] = 0.0
    c.load[:] = [500.0, 0.0]
    laws.stance_load(c.model.law, c.data.law)
    shank = float(np.linalg.norm(stance_rows(top.robot, top.controller, DT)[1][0]))
    knee = c.tau[names.index("left_knee")]
    assert knee == pytest.approx(-500.0 * shank * math.sin(0.5), rel=1e-6)
    assert c.tau[names.index("right_hip")] == 0.0 and c.tau[names.index("right_knee")] == 0.0


def _board(n_frames, values):
    st = np.zeros(fd.D_WIDTH, np.int64)
    st[fd.D_PRESSURE_N] = n_frames
    st[fd.D_N_SENSORS] = len(values)
    st[fd.D_SENSORS:fd.D_SENSORS + len(values)] = values
    return st


def test_the_sensors_are_clamped_filtered_and_zero_when_stale(top):
    c = _cycle(top)
    sl = top.controller.stance_load
    timeout = top.safety.board_timeout
    # no board bound: no frame ever, no force
    for k in range(5):
        cy.clock(c.data, k, DT)
        cy.soles(c.model, c.data)
    assert list(c.load) == [0.0, 0.0]
    st = _board(1, [400, 65000])
    c.bind_board(st)
    alpha = 1.0 - math.exp(-DT / sl.tau_s)
    want = np.zeros(2)
    for k in range(5, 105):  # a frame every cycle
        st[fd.D_PRESSURE_N] += 1
        cy.clock(c.data, k, DT)
        cy.soles(c.model, c.data)
        want += alpha * (np.array([400.0, sl.max_N]) - want)
    np.testing.assert_allclose(c.load, want, rtol=1e-12)
    assert 0.99 * 400 < c.load[0] < 400 and c.load[1] <= sl.max_N
    # the frames stop: the last frame's values stand (the filter goes on towards them) until
    # the board's timeout, then exactly zero
    last = c.load.copy()
    k0 = 105
    k = k0
    while (k - k0 + 1) * DT <= timeout - 1e-9:
        cy.clock(c.data, k, DT)
        cy.soles(c.model, c.data)
        k += 1
    assert np.all(c.load >= last) and np.all(c.load <= [400.0, sl.max_N])
    cy.clock(c.data, k0 + round(timeout / DT) + 1, DT)
    cy.soles(c.model, c.data)
    assert list(c.load) == [0.0, 0.0]
    # and the law then adds nothing: the torque equals the law's without the key, bit for bit
    off = _cycle(top, stance=False)
    assert off.load.shape == (0,)
    for cyc in (c, off):
        cyc.q[:] = 0.3
        cyc.qd[:] = 0.1
        cyc.qr[:] = 0.32
        cyc.qdr[:] = 0.2
        cyc.qddr[:] = 1.0
        cyc.s["state"] = RUN
        laws.law_torque(cyc.model.torque, cyc.model.law, cyc.data.law)
    np.testing.assert_array_equal(c.tau, off.tau)
    # a frame without the leg's sensor: that leg's force is zero
    st[:] = _board(st[fd.D_PRESSURE_N] + 1, [300])
    cy.clock(c.data, k0 + 200, DT)
    cy.soles(c.model, c.data)
    assert c.load[0] > 0.0 and c.load[1] == 0.0


def test_with_the_board_s_frames_the_law_adds_the_load(top):
    """Fresh sensors: the computed torque's output moves by −Jᵀf of the filtered forces."""
    c, off = _cycle(top), _cycle(top, stance=False)
    st = _board(1, [500, 0])
    c.bind_board(st)
    for k in range(200):
        st[fd.D_PRESSURE_N] += 1
        cy.clock(c.data, k, DT)
        cy.soles(c.model, c.data)
    for cyc in (c, off):
        cyc.q[:] = [0.2, 0.4, -0.1, 0.2]
        cyc.qr[:] = cyc.q
        laws.law_torque(cyc.model.torque, cyc.model.law, cyc.data.law)
    names = list(top.robot.joint_names)
    d = c.tau - off.tau
    shank = float(np.linalg.norm(stance_rows(top.robot, top.controller, DT)[1][0]))
    f = c.load[0]  # (filtered: 200 cycles of τ = 20 ms, within 0.01 % of the 500 N)
    assert f == pytest.approx(500.0, rel=1e-3)
    # the knee's share: the ankle sin(q_knee − q_hip)·L_s behind the knee
    assert d[names.index("left_knee")] == pytest.approx(-f * shank * math.sin(0.2), rel=1e-9)
    assert d[names.index("right_knee")] == 0.0 and d[names.index("right_hip")] == 0.0


def test_a_law_that_does_not_feed_it_forward_refuses_the_key(top, tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("law: pid\njoints: {hip: {kp: 100}}\n"
                 "stance_load: {sensors: {left: 0, right: 1}}\n")
    with pytest.raises(ConfigError, match="does not feed the stance load"):
        load_controller(p, top.robot)
    # legs the robot lacks are skipped (a file serving the one-leg and two-leg robots)
    p.write_text("law: computed_torque\nstance_load: {sensors: {middle: 0, right: 1}}\n")
    cfg = load_controller(p, top.robot)
    rows, _ = stance_rows(top.robot, cfg, DT)
    assert [int(r["sensor"]) for r in rows] == [1] and int(rows[0]["body"]) == 4
    one = load_top(ROOT / "configs" / "exo_leg_world.yaml", controller=top.controller.source)
    assert one.controller.stance_load is not None
    assert len(stance_rows(one.robot, one.controller, DT)[0]) == 0
    assert {n for n in laws.LAWS.entries() if registry.get(n).carries_stance} == {
        "model_pid", "computed_torque", "sliding_mode"}


@pytest.mark.slow
def test_a_run_that_fed_it_forward_replays_bit_for_bit(tmp_path, capsys, monkeypatch):
    """configs/exo_2leg_world_tq.yaml's controller feeds the stance load forward from the
    board's sole sensors; the cycle log records them as the cycle read them (``sole_frames``,
    ``sole_sensors``, ``soles``), so `exo-rt replay --mode controller` of its run (the
    stand-up and sit-down of configs/sessions/sit_stand.yaml, the feet loaded throughout)
    gives the controller what the run had: every command bit for bit; the plant mode
    replays the run's joints within 0.01° RMS. A recording without the sensors (made before
    they were recorded) is refused in one line that names the other modes."""
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    from exo_rt import cli
    from exo_rt.errors import LogError
    from exo_rt.record.recorder import read_cycle_log
    from exo_rt.runtime import replay
    from exo_rt.runtime.config import load_top

    root = Path(__file__).resolve().parents[1]
    run = tmp_path / "run"
    assert cli.main(["run", "--config", str(root / "configs" / "exo_2leg_world_tq.yaml"),
                     "--session", str(root / "configs" / "sessions" / "sit_stand.yaml"),
                     "--out", str(run)]) == 0
    records, _ = read_cycle_log(run / "cycles.exolog")
    loaded = records["soles"][:, :2]
    assert records["sole_frames"][-1] > 1000 and (loaded > 100.0).all(axis=1).mean() > 0.9
    assert loaded.max() > 200.0  # (standing: 261 N a foot, the harness holding the rest)
    capsys.readouterr()
    assert cli.main(["replay", str(run), "--mode", "controller", "--no-mcap"]) == 0
    figures = json.loads((run / "replay-controller.json").read_text())
    assert figures["cycles"] > 5000 and figures["max_abs_command_diff_A"] == 0.0, figures
    assert figures["cycles_with_differences"] == 0, figures
    assert cli.main(["replay", str(run), "--mode", "plant", "--no-mcap"]) == 0
    figures = json.loads((run / "replay-plant.json").read_text())  # (measured 0.0000°)
    for joint, f in figures["joints"].items():
        assert f["rms_error_deg"] <= 0.01, (joint, f)

    older = records[[n for n in records.dtype.names if not n.startswith("sole")]]
    top = load_top(root / "configs" / "exo_2leg_world_tq.yaml")
    with pytest.raises(LogError) as e:
        replay._soles_recorded(top, older, replay.open_run(run))
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and "stance_load" in msg, msg
    assert "--mode plant" in msg and "closed-loop" in msg, msg
