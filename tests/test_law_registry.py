"""A control law added from outside the package: defined here, registered through the public
registry (:mod:`exo_rt.control.registry`), named in a controller file and run in
model-in-the-loop simulation — the extension point docs/architecture.md describes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.control import phase_estimate, registry
from exo_rt.control.config import load_controller
from exo_rt.cycle import step as cy
from exo_rt.dynamics import kernels
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.sim.mil import run_mil

ROOT = Path(__file__).resolve().parents[1]
NAME = "pd_gravity_test"


def pd_gravity(m, d):
    """PD plus gravity compensation (Takegaki & Arimoto 1981): τ = g(q) + K_p e + K_d ė."""
    q, gains = d.q, m.gains
    n = q.shape[0]
    g = d.scratch[n]
    kernels.gravity_forces(m.model, d.data, q, g)
    for j in range(n):
        d.tau[j] = g[j] + gains[j].kp * (d.qr[j] - q[j]) + gains[j].kd * (d.qdr[j] - d.qd[j])


@pytest.fixture
def registered():
    registry.law(NAME, doc="PD + gravity, defined in a test")(pd_gravity)
    yield NAME
    registry.unregister(NAME)


def _controller(tmp_path: Path, law: str) -> Path:
    path = tmp_path / "pd.yaml"
    path.write_text(f"law: {law}\njoints:\n  hip: {{kp: 600, kd: 30}}\n"
                    "  knee: {kp: 600, kd: 30}\ncurrent_limit: 20.0\n"
                    "velocity_filter_hz: 300\nreference: {type: gait, period: 2.0}\n")
    return path


def test_a_law_defined_here_runs_in_model_in_the_loop(registered, tmp_path):
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    cfg = load_controller(_controller(tmp_path, registered), robot)
    assert cfg.options()[0]["law"] == registry.code(NAME) == 9  # after the nine built-ins
    r = run_mil(robot, cfg, cycles=1)
    # PD + gravity tracks the gait, without the model's inertia: worse than computed torque
    # (0.04°–0.05° RMS), far better than no control, and never at the current limit
    assert np.all(r.rms_error_deg < 3.0) and np.all(r.rms_error_deg > 0.1), r.rms_error_deg
    assert r.worst_current_fraction < 0.99
    passive = run_mil(robot, load_controller(ROOT / "configs" / "controllers" / "passive.yaml",
                                             robot), cycles=1)
    assert np.all(r.rms_error_deg < passive.rms_error_deg / 5)


def test_a_law_that_is_not_registered_is_one_clear_line(tmp_path):
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    with pytest.raises(ConfigError, match=f"unknown law '{NAME}'.*use one of passive, pid"):
        load_controller(_controller(tmp_path, NAME), robot)


def test_names_are_unique_and_only_the_last_is_removed(registered):
    with pytest.raises(ValueError, match="registered already"):
        registry.law("computed_torque")(pd_gravity)
    with pytest.raises(ValueError, match="not the law registered last"):
        registry.unregister("pid")


def test_a_cycle_holds_its_own_law_compiled():
    """registry.function("pid") — what a run's cycle model holds — is the PID law compiled,
    once per process; the law the cycle calls through it gives the law's own torques, and
    another law's value gives that law's (the cycle is compiled for any: one signature)."""
    from exo_rt.control import laws

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    cfg = load_controller(ROOT / "configs" / "controllers" / "pid.yaml", robot)
    pk, ws = kernels.model_and_data(robot)
    n = robot.nq

    def torque(function, compiled=True):
        q, tau = np.array([0.2, 0.4]), np.zeros(n)
        model = registry.law_model(cfg.options(), cfg.gains, pk, pk, 1e-3,
                                   cy.estimate_params(robot, cfg, np.zeros((n, 11))))
        z = np.zeros(n)
        data = registry.law_data(ws, ws.copy(), laws.law_state(n), laws.law_scratch(n), q=q,
                                 qd=z, qr=q + 0.01, qdr=z, qddr=z, assist=z, tau=tau,
                                 gait=np.zeros(1, phase_estimate.STATE), level=np.ones(n),
                                 offsets=z)
        if compiled:
            laws.law_torque(function, model, data)
        else:  # the registered Python function (its compiled parts) from Python, clamped
            function(model, data)
            np.clip(tau, -cfg.gains["torque_limit"], cfg.gains["torque_limit"], out=tau)
        return tau

    pid = registry.function("pid")
    assert pid is registry.function("pid")  # compiled once, then shared
    got = torque(pid)
    assert np.all(got > 0.1)  # pushing towards the reference, 0.01 rad ahead
    np.testing.assert_array_equal(got, torque(registry.get("pid").torque, compiled=False))
    assert np.all(np.isnan(torque(registry.stand_in())))  # the stand-in: NaN, a fault
    with pytest.raises(KeyError):
        registry.function("no_such_law")
