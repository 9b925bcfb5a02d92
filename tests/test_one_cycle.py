"""One control cycle for everything (issue 34): the cycle's model and data made by one
factory (:func:`exo_rt.cycle.step.build`) and stepped by one compiled step; the fixes that
came with it, each against an independent reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.control import trajectory
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import RUN
from exo_rt.runtime.config import load_top

ROOT = Path(__file__).resolve().parents[1]


def _transparent(tmp_path: Path, assist: float) -> Path:
    src = (ROOT / "configs" / "controllers" / "transparent.yaml").read_text()
    path = tmp_path / "transparent_assist.yaml"
    path.write_text(src.replace("assist: 0.0", f"assist: {assist}")
                    .replace("../schemas", str(ROOT / "configs" / "schemas")))
    return path


def test_transparent_assists_in_the_cycle_as_pinocchio_says(tmp_path):
    """``transparent`` with ``assist`` a: τ = ID_exo(q, q̇, q̈_r) + a·(ID_leg − ID_exo)(q_r, q̇_r,
    q̈_r) — the wearer's own torque along the reference, which the cycle now computes (before,
    the cycle never wrote it: on a run the assistance a controller file asked for was zero).
    Checked against Pinocchio's RNEA on the whole leg and on the exoskeleton alone (rotors
    as joints, reduced by the transmissions: tests/pinref.py)."""
    from tests.pinref import TreeTwin

    top = load_top(ROOT / "configs" / "exo_leg.yaml", controller=_transparent(tmp_path, 0.5))
    c = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1e-3)
    c.s["state"] = RUN
    period = top.controller.reference.period
    c.s["phase"] = 0.3 - 1e-3 / period  # (advanced, then evaluated: at 0.3)
    qr, qdr, qddr = (np.zeros(2) for _ in range(3))
    trajectory.gait(0.3, c.period, c.coeffs, qr, qdr, qddr)
    c.q[:] = c.q_prev[:] = qr + [0.02, -0.03]  # near the reference: no safety cause
    c.s["sample_t"] = 1e-3
    cy.step(c.model, c.data)
    assert c.s["cause"] == 0
    leg, exo = TreeTwin(top.robot), TreeTwin(top.exo)
    wearer = leg.reduced(qr, qdr, qddr)[2] - exo.reduced(qr, qdr, qddr)[2]
    expected = exo.reduced(c.q, c.qd, qddr)[2] + 0.5 * wearer
    np.testing.assert_allclose(c.assist, wearer, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(c.tau, expected, rtol=1e-9, atol=1e-9)
    assert np.all(np.abs(0.5 * wearer) > 0.5), wearer  # N·m: an assistance one would feel


def test_without_assist_the_wearer_torque_is_not_computed(tmp_path):
    top = load_top(ROOT / "configs" / "exo_leg.yaml", controller=_transparent(tmp_path, 0.0))
    c = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1e-3)
    assert not c.p["assist"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A lockstep run of the default exoskeleton, recorded."""
    from exo_rt.runtime.controller import Controller

    out = tmp_path_factory.mktemp("run") / "run"
    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    result = Controller(top, "sim").run(1.0, out)
    assert result.summary["final_state"] == "SHUTDOWN"
    return out


@pytest.mark.slow
def test_one_cycle_four_users(recorded):
    """The same recorded measurement stream into the cycle as each user builds it —
    replay, the bench, model-in-the-loop — run by the one compiled cycle on a rig made of
    the recording: the commands the controller sent on the exoskeleton, bit for bit. (Each
    user makes its cycle with :func:`exo_rt.cycle.step.build`; one that built it
    otherwise — another estimator, filter, law, limit — would differ.)"""
    from exo_rt.runtime.controller import Controller
    from exo_rt.runtime.replay import open_run, replay_rig
    from exo_rt.sim import mil

    run = open_run(recorded)
    top = load_top(run.config)
    records, meta = run.records, run.meta
    from exo_rt.hil import bench

    users = {
        "replay": None,  # the controller's own cycle
        "the bench": bench.build_cycle(top, 1.0 / top.rate_hz),
        "model-in-the-loop": mil.build_cycle(top.robot, top.controller,
                                             mil.MilOptions(exo_model=top.exo)),
    }
    for user, cycle in users.items():
        ctl = Controller(top, "replay", history=True, rig=replay_rig(records, meta, top),
                         cycle=cycle)
        ctl.drives[0].scalars = ctl.s
        ctl.run(float(meta["duration_s"]))
        commands = ctl.log["command"][: len(records)]
        assert len(commands) == len(records), user
        assert commands.tobytes() == records["command"].tobytes(), user


def test_every_drive_protocol_implements_the_host_interface():
    """One host-drives interface (exo_rt/bus/host.py): every registered protocol's host class
    and replay's recorded drives have each of its methods — the controller probes none."""
    import inspect

    from exo_rt.bus import protocols
    from exo_rt.bus.host import HostDrives
    from exo_rt.runtime.replay import RecordedDrives

    wanted = [name for name, _ in inspect.getmembers(HostDrives, inspect.isfunction)
              if not name.startswith("_")]
    assert {"collect", "send_rpdos", "compiled_cycle", "enable", "warm_up"} <= set(wanted)
    hosts = [protocols.get(name).host_class() for name in protocols.names()] + [RecordedDrives]
    for cls in hosts:
        missing = [name for name in wanted if not callable(getattr(cls, name, None))]
        assert not missing, f"{cls.__name__} lacks {missing}"


def test_a_rig_without_simulated_drives_refuses_injections():
    """--inject needs drives that act faults out (the simulated bus says so: ``injectable``):
    on a real bus one clear error, and the buses it opened are closed again."""
    from exo_rt.errors import ConfigError
    from exo_rt.runtime.controller import Controller
    from exo_rt.runtime.injections import Injection

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    inj = (Injection.parse("drop:knee@1.0", top.robot.joint_names),)
    with pytest.raises(ConfigError, match="simulated bus only"):
        Controller(top, "udp_multicast:239.74.9.8", injections=inj, board=None)


def test_syncs_back_to_back_do_not_make_a_velocity_out_of_nothing():
    """A stalled cycle sends its SYNC late and the next goes on time, 0.08 ms after it: the
    drives' sample for the second can be a period after the first's (their own timing), so
    the position moved a full period's worth over 0.08 ms of SYNC time. The estimate
    re-anchors instead of dividing (before: 6.2 rad/s at a hip moving at 0.73 — SAFE on the
    velocity limit in a loaded real-time rehearsal)."""
    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    c = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1e-3)
    speed = np.array([-0.73, -0.39])  # rad/s
    t, q = 10.0, np.array([0.3, 0.3])
    c.q[:] = c.q_prev[:] = q
    c.t_prev[:] = t
    c.qd[:] = speed
    seen = []
    gaps = [1e-3] * 20 + [1.92e-3, 0.08e-3] + [1e-3] * 20  # a stall, then back to back
    moved = [1e-3] * 20 + [1.92e-3, 1e-3] + [1e-3] * 20  # what the drives' samples span
    for gap, dq in zip(gaps, moved, strict=True):
        t += gap
        q = q + speed * dq
        c.q[:] = q
        c.s["sample_t"] = t
        c.flags[:] = 0
        cy.estimate(c.model, c.data)
        seen.append(c.qd.copy())
    seen = np.array(seen)
    assert np.all(np.abs(seen - speed) <= 0.1 * np.abs(speed)), seen[18:26]
