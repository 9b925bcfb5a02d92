"""The plant model ``world`` on its test stand (docs/world.md, "The world as a plant"): MuJoCo's
rigid bodies with harmonic_drive's drives reproduce harmonic_drive's joints for the same
current commands, conserve energy with the drives off, hold the leg at zero current, and run
model-in-the-loop and behind ``exo-rt run``'s simulated bus."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import mujoco
import numpy as np
import pytest

from exo_rt.actuators.motor import M_BRAKE
from exo_rt.control.config import load_controller
from exo_rt.dynamics import kernels
from exo_rt.model import load_mechanism
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.sim import plants
from exo_rt.sim.mil import run_mil
from exo_rt.sim.plant import T_MOTOR
from exo_rt.sim.world_plant import WorldPlant

ROOT = Path(__file__).resolve().parents[1]
ROBOT = ROOT / "configs" / "robots" / "exo_leg.yaml"


@pytest.fixture(scope="module")
def robot():
    return load_mechanism(ROBOT)


def _sine(k, dt):
    """Current commands (A) at period k: 2 A at 1 Hz on the hip, 1.5 A at 1.5 Hz on the knee,
    about a 1 A bias — enough to swing the leg tens of degrees."""
    t = k * dt
    return [1.0 + 2.0 * math.sin(2 * math.pi * t), 1.0 + 1.5 * math.sin(3 * math.pi * t)]


def test_registered_with_rotors_as_bodies_and_no_armature(robot):
    assert "world" in plants.NAMES and "harmonic_drive" in plants.NAMES
    plant = plants.create("world", robot)
    assert isinstance(plant, WorldPlant) and plant.name == "world"
    w = plant.world
    # the plant's coordinates: the joints, then one rotor per transmission, each a MuJoCo hinge
    assert plant.n_joints == 2 and w.model.nv == plant.q.size == 4
    assert not np.any(w.model.dof_armature)  # the rotors are bodies: counted once, there
    # MuJoCo's M and h of the released mechanism = exo-rt's, at random states (each is
    # checked against its own references in test_world_model / test_dynamics)
    rng = np.random.default_rng(44)
    d = mujoco.MjData(w.model)
    n = plant.q.size
    m_exo, h_exo, m_mj = np.zeros((n, n)), np.zeros(n), np.zeros((n, n))
    worst_m = worst_h = 0.0
    for _ in range(20):
        q, v = rng.uniform(-2, 2, n), rng.normal(0, 2, n)
        v[2:] *= 50.0  # rotors turn ~100× faster than their joints
        d.qpos[w.qpos], d.qvel[w.dof] = q, v
        mujoco.mj_forward(w.model, d)
        mujoco.mj_fullM(w.model, d, m_mj)
        kernels.mass_matrix(plant._exo_model, plant._exo_data, q, m_exo)
        kernels.bias_forces(plant._exo_model, plant._exo_data, q, v, h_exo)
        worst_m = max(worst_m, np.abs(m_mj[np.ix_(w.dof, w.dof)] - m_exo).max()
                      / np.abs(m_exo).max())
        worst_h = max(worst_h, np.abs(d.qfrc_bias[w.dof] - h_exo).max() / np.abs(h_exo).max())
    assert worst_m < 1e-9 and worst_h < 1e-9
    with pytest.raises(ValueError, match="no scene 'moon'"):
        WorldPlant(robot, scene="moon")


@pytest.mark.slow
def test_reproduces_harmonic_drive_for_the_same_currents(robot):
    """3 s of sine currents from a raised posture: the joints agree to ≤ 0.05° RMS (measured:
    ~1e-12°, the rounding of two M and h that agree to 1e-13)."""
    hd, world = plants.create("harmonic_drive", robot), plants.create("world", robot)
    for p in (hd, world):
        p.reset([0.3, 0.6])
    assert np.array_equal(hd.q, world.q)  # the same pre-twist: gravity from either model
    err, swing = [], []
    for k in range(3000):
        cmd = _sine(k, hd.dt)
        hd.step(cmd)
        world.step(cmd)
        err.append(world.joint_positions - hd.joint_positions)
        swing.append(hd.joint_positions.copy())
    rms = np.degrees(np.sqrt(np.mean(np.square(err), axis=0)))
    assert np.ptp(np.degrees(swing), axis=0).min() > 10.0  # it moved
    assert np.all(rms <= 0.05), rms
    assert np.all(rms < 1e-6), rms
    assert np.allclose(world.currents, hd.currents, atol=1e-9)
    assert np.allclose(world.output_torques, hd.output_torques, atol=1e-6)
    assert world.energy() == pytest.approx(hd.energy(), abs=1e-6)  # same gravity datum here


def test_the_check_sees_the_rotors_counted_twice(robot):
    """The bound above can fail: the world builder's fold (armature k²·I_a − c·I_a on each
    joint: 0.600 and 0.378 kg·m² for exo_leg) added to the released rotors — the reflected
    inertia counted twice — moves the joints by far more than 0.05° RMS in 1 s (measured: 2.2°
    hip, 6.8° knee)."""
    from exo_rt.sim.world import build_world

    folded = build_world(robot).model
    hd, world = plants.create("harmonic_drive", robot), plants.create("world", robot)
    joints = world.world.dof[: world.n_joints]
    world.world.model.dof_armature[joints] = [folded.joint(n).armature[0]
                                              for n in robot.joint_names]
    assert world.world.model.dof_armature[joints] == pytest.approx([0.600, 0.378], abs=1e-3)
    for p in (hd, world):
        p.reset([0.3, 0.6], equilibrium=False)
    err = []
    for k in range(1000):
        hd.step(_sine(k, hd.dt))
        world.step(_sine(k, hd.dt))
        err.append(world.joint_positions - hd.joint_positions)
    rms = np.degrees(np.sqrt(np.mean(np.square(err), axis=0)))
    assert np.all(rms > 0.5), rms


def _coasting(robot, *, power_on: bool, dt=5e-4, substeps=1, seconds=10.0):
    """Drives without friction, hysteresis or brake, released from a raised posture: (largest
    |E − E₀| (J), peak kinetic energy (J))."""
    plant = plants.create("world", robot, dt=dt, substeps=substeps, friction=False,
                          hysteresis=False)
    plant.transmissions[:, T_MOTOR + M_BRAKE] = 0.0
    plant.reset([0.8, 1.2], equilibrium=False)
    plant.power(power_on)
    e0 = plant.energy()
    drift, kinetic = 0.0, 0.0
    d, w = plant.mj_data, plant.world
    for k in range(int(round(seconds / dt))):
        plant.step()
        if k % 20 == 19:
            drift = max(drift, abs(plant.energy() - e0))
            kinetic = max(kinetic, d.energy[1])
    assert w.model.opt.gravity[2] < 0
    return drift, kinetic


def test_conserves_energy_with_the_drives_off(robot):
    """Power stages off, no friction, hysteresis or brake: 10 s at one 0.5 ms RK4 step per
    period, the energy (MuJoCo's kinetic and gravity, the flexsplines' elastic) drifts ≤ 1e-4
    of the peak kinetic energy (measured: 5.6e-5 J of 17.6 J, 3.2e-6)."""
    drift, kinetic = _coasting(robot, power_on=False)
    assert kinetic > 10.0  # J: the leg swings
    assert drift <= 1e-4 * kinetic, (drift, kinetic)
    # the check can fail: with the power stages on at zero command the supply's voltage limit
    # lets back-EMF currents flow at speed, and they brake the leg
    drift_on, _ = _coasting(robot, power_on=True)
    assert drift_on > 1e-2 * kinetic


def test_holds_the_leg_at_zero_current(robot):
    """As harmonic_drive's test: shank horizontal, zero current, catalogue friction — the
    stuck rotors hold it exactly (no creep in 5 s)."""
    plant = plants.create("world", robot)
    plant.reset([0.0, math.pi / 2])
    q0 = plant.joint_positions.copy()
    drift = 0.0
    for _ in range(5000):
        plant.step([0.0, 0.0])
        drift = max(drift, np.degrees(np.abs(plant.joint_positions - q0)).max())
    assert drift < 1e-6 and plant.stuck.all()


def test_survives_pickling(robot):
    """A batch's worker gets the plant pickled: MuJoCo's model and data are built again there,
    and the copy steps as the original."""
    a = plants.create("world", robot)
    a.reset([0.2, 0.4])
    for k in range(50):
        a.step(_sine(k, a.dt))
    b = pickle.loads(pickle.dumps(a))
    assert b.mj_data is not a.mj_data
    for k in range(50, 300):
        a.step(_sine(k, a.dt))
        b.step(_sine(k, b.dt))
    assert np.array_equal(a.state, b.state)


def test_model_in_the_loop_tracks_as_on_harmonic_drive(robot):
    """computed_torque on the default gait, 2 cycles: tracking RMS within 2× harmonic_drive's
    (measured: equal to 1e-9°)."""
    cfg = load_controller(ROOT / "configs" / "controllers" / "computed_torque.yaml", robot)
    hd = run_mil(robot, cfg, cycles=2, plant_model="harmonic_drive")
    world = run_mil(robot, cfg, cycles=2, plant_model="world")
    assert np.all(world.rms_error_deg <= 2.0 * hd.rms_error_deg)
    assert np.all(world.rms_error_deg < 0.2)  # degrees: it tracks
    assert np.allclose(world.rms_error_deg, hd.rms_error_deg, atol=1e-6)


@pytest.mark.slow
def test_exo_rt_run_on_the_world_plant(tmp_path, monkeypatch):
    """``exo-rt run``'s lockstep simulated bus on ``simulation: {plant: world}``: the emulated
    drives read its rotors and drive its currents, computed torque (the shipped config) tracks
    the gait to SHUTDOWN, and every joint's RMS equals the harmonic_drive run's (measured:
    0.042° hip, 0.104° knee on both)."""
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    cfg = ROOT / "configs"
    rms = {}
    for plant in ("harmonic_drive", "world"):
        path = tmp_path / f"{plant}.yaml"
        path.write_text(f"robot: {cfg / 'robots' / 'exo_leg.yaml'}\n"
                        f"buses: {cfg / 'buses' / 'exo_leg.yaml'}\n"
                        f"controller: {cfg / 'controllers' / 'computed_torque.yaml'}\n"
                        f"rate_hz: 1000\nsimulation: {{plant: {plant}}}\n")
        ctl = Controller(load_top(path), "sim")
        assert type(ctl.bus_set.world.plant) is plants.get(plant)
        result = ctl.run(4.0, None)
        s = result.summary
        assert s["final_state"] == "SHUTDOWN" and not s["faults"] and result.exit_code == 0, s
        rms[plant] = np.array([j["rms_error_deg"] for j in s["joints"].values()])
    assert np.all(rms["world"] < 0.5), rms
    np.testing.assert_allclose(rms["world"], rms["harmonic_drive"], rtol=0, atol=1e-6)


def test_its_arrays_hold_mujoco_alive(robot):
    """Model-in-the-loop and the bus keep the plant's ``args``, not always the plant: those
    arrays point into MuJoCo's model and data, and keep them alive."""
    import gc

    from exo_rt.sim.plant import plant_step

    plant, ref = plants.create("world", robot), plants.create("harmonic_drive", robot)
    plant.reset([0.3, 0.5])
    ref.reset([0.3, 0.5])
    args = plant.args
    del plant
    gc.collect()
    _ = [np.ones(1000) for _ in range(1000)]  # the freed memory reused, if it were freed
    for k in range(300):
        args[4][:] = _sine(k, ref.dt)
        plant_step(*args)
        ref.step(_sine(k, ref.dt))
    np.testing.assert_allclose(args[3][0], ref.q, rtol=0, atol=1e-9)
