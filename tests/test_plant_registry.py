"""A plant model added from outside the package: defined here (a rigid transmission), registered
through the public registry (:mod:`exo_rt.sim.plants`), named in a top config and run behind the
emulated drives in lockstep (the controller tracks the gait on it) and in model-in-the-loop
simulation — the extension point docs/architecture.md describes ("Recipes": a plant model).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from exo_rt.control.config import load_controller
from exo_rt.dynamics import kernels
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.sim import plants
from exo_rt.sim.mil import run_mil
from exo_rt.sim.plants import (
    ST_COMMON,
    ST_EXT,
    ST_I,
    ST_LOCK,
    ST_ON,
    ST_Q,
    ST_V,
    T_COMMON,
    T_JOINT,
    T_K,
    T_ROTOR,
)

ROOT = Path(__file__).resolve().parents[1]
ROBOT = ROOT / "configs" / "robots" / "exo_leg.yaml"
NAME = "rigid_gear_test"

# the model's own transmission columns
T_TORQUE = T_COMMON  # N·m/A at the joint: k·motor_sign·k_M (the gear's torque per ampere)
T_PEAK = T_COMMON + 1  # A: the drive's peak current
T_WIDTH = T_COMMON + 2


@njit(cache=True)
def rigid_step(model, data, transmissions, state, cmd, dt, substeps, scratch):
    """Rigid transmission: M(q) q̈ = Σ k·s·k_M·i + Q_ext − h(q, q̇) on the robot's own model
    (rotor inertia reflected through the ideal gear), currents ideal (the command within the
    drive's peak, 0 with the power stage off), no compliance, no friction; semi-implicit Euler
    in ``substeps`` steps. The rotor columns follow their joints: angle k·q, speed k·q̇."""
    n = scratch.shape[1]
    h = dt / substeps
    m = scratch[:n]
    bias, rhs, acc = scratch[n], scratch[n + 1], scratch[n + 2]
    q, v = state[ST_Q, :n], state[ST_V, :n]
    for t in range(transmissions.shape[0]):
        peak = transmissions[t, T_PEAK]
        on = state[ST_ON, t] > 0.5
        state[ST_I, t] = min(max(cmd[t], -peak), peak) if on else 0.0
    for _ in range(substeps):
        kernels.mass_matrix(model, data, q, m)
        kernels.bias_forces(model, data, q, v, bias)
        for j in range(n):
            rhs[j] = state[ST_EXT, j] - bias[j]
        for t in range(transmissions.shape[0]):
            rhs[int(transmissions[t, T_JOINT])] += transmissions[t, T_TORQUE] * state[ST_I, t]
        kernels.cholesky_solve(m, rhs, acc)
        for j in range(n):
            if state[ST_LOCK, j] > 0.5:
                v[j] = 0.0
            else:
                v[j] += h * acc[j]
                q[j] += h * v[j]
    for t in range(transmissions.shape[0]):
        j, r = int(transmissions[t, T_JOINT]), int(transmissions[t, T_ROTOR])
        k = transmissions[t, T_K]
        state[ST_Q, r] = k * q[j]
        state[ST_V, r] = k * v[j]


class RigidGearPlant(plants.PlantModel):
    """Rigid transmissions: ideal gear ratio, reflected rotor inertia, ideal current loops."""

    kernel = staticmethod(rigid_step)

    def __init__(self, robot, *, dt: float = 1e-3, substeps: int = 10) -> None:
        n, n_tr = robot.nq, len(robot.transmissions)
        self.robot, self.n_joints, self.dt, self.substeps = robot, n, float(dt), int(substeps)
        self.model = robot.packed
        self.data = np.zeros(kernels.workspace_size(robot.n_bodies, robot.nz))
        self.transmissions = np.zeros((n_tr, T_WIDTH))
        for t, tr in enumerate(robot.transmissions):
            self.transmissions[t, T_JOINT] = robot.joint_names.index(tr.joint)
            self.transmissions[t, T_ROTOR] = n + t  # the rotors' columns follow the joints'
            self.transmissions[t, T_K] = tr.multiplier
            self.transmissions[t, T_TORQUE] = (tr.multiplier * tr.motor_sign
                                               * tr.motor.torque_constant)
            self.transmissions[t, T_PEAK] = tr.motor.peak_current
        self.state = np.zeros((ST_COMMON, n + n_tr))
        self.cmd = np.zeros(n_tr)
        self.scratch = np.zeros((n + 3, n))
        self._e2 = np.zeros(2)
        self.reset(np.zeros(n))

    def reset(self, q_joints, v_joints=None, *, equilibrium: bool = True) -> None:
        self.state[:] = 0.0
        self.state[ST_Q, : self.n_joints] = q_joints
        if v_joints is not None:
            self.state[ST_V, : self.n_joints] = v_joints
        for j, r, k in self.transmissions[:, :T_COMMON]:
            self.state[ST_Q, int(r)] = k * self.state[ST_Q, int(j)]
            self.state[ST_V, int(r)] = k * self.state[ST_V, int(j)]
        self.state[ST_ON, : len(self.transmissions)] = 1.0
        self.cmd[:] = 0.0

    def energy(self) -> float:
        n = self.n_joints
        kernels.energy(self.model, self.data, self.state[ST_Q, :n], self.state[ST_V, :n],
                       self._e2)
        return float(self._e2.sum())

    @property
    def output_torques(self) -> np.ndarray:
        return self.transmissions[:, T_TORQUE] * self.currents


@pytest.fixture
def registered():
    plants.model(NAME, doc="rigid transmission, defined in a test")(RigidGearPlant)
    yield NAME
    plants.unregister(NAME)


def _controller(tmp_path: Path) -> Path:
    """Computed torque at the shipped gains, without friction compensation (the plant has
    none)."""
    path = tmp_path / "computed_torque.yaml"
    path.write_text("law: computed_torque\njoints:\n"
                    "  hip: {kp: 400, kd: 36, ki: 2500, i_limit: 20}\n"
                    "  knee: {kp: 400, kd: 36, ki: 2500, i_limit: 20}\n"
                    "current_limit: 20.0\nfriction_compensation: false\n"
                    "velocity_filter_hz: 300\nreference: {type: gait, period: 2.0}\n")
    return path


def _top(tmp_path: Path, plant: str) -> Path:
    cfg = ROOT / "configs"
    path = tmp_path / "top.yaml"
    path.write_text(f"robot: {cfg / 'robots' / 'exo_leg.yaml'}\n"
                    f"buses: {cfg / 'buses' / 'exo_leg.yaml'}\n"
                    f"controller: {_controller(tmp_path)}\n"
                    "rate_hz: 1000\n"
                    f"simulation: {{plant: {plant}}}\n")
    return path


def test_the_model_conserves_energy_and_follows_its_gear(registered):
    """Drives off, no friction: a fall from the knee horizontal keeps its energy; the rotors
    stay at k·q; the registry builds it by name."""
    plant = plants.create(registered, load_mechanism(ROBOT))
    assert isinstance(plant, RigidGearPlant) and plants.get(registered) is RigidGearPlant
    plant.reset([0.0, math.pi / 2])
    plant.power(False)
    e0, drift, kinetic = plant.energy(), 0.0, 0.0
    for _ in range(1000):
        plant.step([5.0, 5.0])  # commanded, but the power stages are off: no current
        drift = max(drift, abs(plant.energy() - e0))
        kinetic = max(kinetic, plant._e2[0])
    assert kinetic > 1.0 and drift < 1e-2 * kinetic, (drift, kinetic)
    assert not plant.currents.any()
    k = plant.transmissions[:, T_K]
    np.testing.assert_allclose(plant.motor_positions, k * plant.joint_positions, rtol=1e-12)


@pytest.mark.slow
def test_a_plant_defined_here_runs_behind_the_simulated_bus(registered, tmp_path, monkeypatch):
    """``exo-rt run`` on it: the top config names it, the emulated drives read its rotors and
    drive its currents, computed torque tracks the gait and the run ends in SHUTDOWN."""
    # (a model registered in this process only: the parallel warm-up's workers, other
    # processes, would not know its name — an installed one comes through its entry point)
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    top = load_top(_top(tmp_path, registered))
    assert top.simulation.plant == registered
    ctl = Controller(top, "sim")
    assert isinstance(ctl.bus_set.world.plant, RigidGearPlant)
    result = ctl.run(4.0, None)  # homing 1 s, a walk of 4 s, the closing step, the stop
    s = result.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"] and result.exit_code == 0, s
    rms = np.array([j["rms_error_deg"] for j in s["joints"].values()])
    # a rigid leg on its exact model, one period of transport delay: within ±0.08° once the
    # gait has started (0.25° at its start); the harmonic-drive leg under this controller,
    # its friction uncompensated, tracks to 0.5° (hip) and 1.3° (knee)
    assert np.all(rms < 0.25) and np.all(rms > 0.001), rms


def test_model_in_the_loop_steps_the_registered_plant(registered, tmp_path):
    """The compiled loop calls the model's compiled step: its trajectory is the one the
    model's own step gives from Python under the currents the loop commanded."""
    robot = load_mechanism(ROBOT)
    cfg = load_controller(_controller(tmp_path), robot)
    r = run_mil(robot, cfg, cycles=1, plant_model=registered)
    harmonic = run_mil(robot, cfg, cycles=1)
    # the rigid leg on its exact model: within 0.06° RMS; the harmonic-drive leg under the same
    # controller (its wave-generator friction uncompensated) is many times worse
    assert np.all(r.rms_error_deg < 0.06), r.rms_error_deg
    assert np.all(harmonic.rms_error_deg > 5 * r.rms_error_deg), harmonic.rms_error_deg
    assert r.worst_current_fraction < 0.99
    # the same trajectory from Python: the drives apply last period's command
    plant = RigidGearPlant(robot)
    q, v = r.column(0), r.column(5)
    plant.reset(q[0], v[0], equilibrium=False)
    cur = r.column(2)
    joint_of = plant.transmissions[:, T_JOINT].astype(int)
    for k in range(1, len(q)):
        plant.step(cur[k - 2, joint_of] if k >= 2 else np.zeros(len(joint_of)))
        np.testing.assert_allclose(plant.joint_positions, q[k], rtol=0, atol=1e-12)


def test_an_unknown_plant_model_is_one_clear_line(tmp_path):
    path = _top(tmp_path, "harmonic_drives")
    with pytest.raises(ConfigError) as err:
        load_top(path)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{path}:5: simulation.plant: unknown plant model 'harmonic_drives'")
    assert line.endswith("— did you mean 'harmonic_drive'?")


def test_names_are_unique_and_models_implement_the_interface(registered):
    with pytest.raises(ValueError, match="registered already"):
        plants.model(registered)(RigidGearPlant)
    with pytest.raises(TypeError, match="subclass of PlantModel"):
        plants.model("not_a_plant")(object)
    assert {"harmonic_drive", registered} <= set(plants.NAMES)

    class Incomplete(plants.PlantModel):
        kernel = staticmethod(rigid_step)

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
