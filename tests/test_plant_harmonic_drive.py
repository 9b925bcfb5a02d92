"""The compliant plant (DESIGN §3.3, seed 000 §3): non-back-drivability, energy, catalogue
stiffness, hysteresis, motor current loop, stick–slip without chatter."""

from __future__ import annotations

import dataclasses
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from exo_rt.actuators import motor as motor_mod
from exo_rt.dynamics import Dynamics
from exo_rt.dynamics.integrate import rk4_scratch, rk4_step
from exo_rt.model import load_mechanism
from exo_rt.sim import Plant

EXO_LEG = Path(__file__).resolve().parents[1] / "configs" / "robots" / "exo_leg.yaml"
KNEE_HORIZONTAL = [0.0, math.pi / 2]  # thigh vertical, shank horizontal (backwards)


@pytest.fixture(scope="module")
def leg():
    return load_mechanism(EXO_LEG)


def _with_drive(mech, **changes):
    """The same robot with every drive's parameters changed (e.g. friction off)."""
    trs = tuple(dataclasses.replace(t, drive=dataclasses.replace(t.drive, **changes))
                for t in mech.transmissions)
    return dataclasses.replace(mech, transmissions=trs)


def test_harmonic_drive_is_not_back_drivable(leg):
    """Zero motor current, the knee held horizontal by gravity alone: < 0.1° in 5 s."""
    plant = Plant(leg)
    plant.reset(KNEE_HORIZONTAL)
    q0 = plant.joint_positions.copy()
    gravity_torque = abs(Dynamics(leg).gravity(np.array(KNEE_HORIZONTAL))[1])
    assert gravity_torque > 10.0  # the wearer's shank and foot: a real load
    for _ in range(5000):
        plant.step([0.0, 0.0])
    moved = np.degrees(np.abs(plant.joint_positions - q0))
    assert moved.max() < 0.1, f"joints moved {moved} deg"
    assert plant.stuck.all()


def test_ordinary_revolute_pair_falls(leg):
    """The same leg without harmonic drives (no rotors, no friction) falls at once."""
    mass, inertia = leg.mass.copy(), leg.inertia.copy()
    for tr in leg.transmissions:
        b = leg.body_names.index(tr.rotor_body)
        mass[b], inertia[b] = 0.0, 0.0
    bare = dataclasses.replace(leg, mass=mass, inertia=inertia, transmissions=())
    dyn = Dynamics(bare)
    q, v = np.array(KNEE_HORIZONTAL), np.zeros(2)
    scratch = rk4_scratch(2)
    for _ in range(1000):  # 1 s at 1 ms
        rk4_step(dyn.packed, dyn.workspace, q, v, np.zeros(2), 1e-3, scratch)
    assert abs(math.degrees(q[1] - KNEE_HORIZONTAL[1])) > 30.0


def test_without_friction_the_drive_is_back_driven_and_conserves_energy(leg):
    plant = Plant(leg, friction=False, hysteresis=False)
    plant.reset(KNEE_HORIZONTAL)
    plant.power(False)  # motors coast: no current, no back-EMF braking
    e0 = plant.energy()
    energies = []
    for _ in range(2000):
        plant.step()
        energies.append(plant.energy())
    assert abs(math.degrees(plant.joint_positions[1] - KNEE_HORIZONTAL[1])) > 10.0
    drift = np.max(np.abs(np.array(energies) - e0)) / abs(e0)
    assert drift <= 1e-5, f"energy drift {drift:.2e}"


def _torque_twist(plant, currents):
    """Quasi-static bench: output locked, motor current ramp → (twist, transmitted torque).

    The torque is what the bench measures at the motor: −k·k_M·i (rotor in equilibrium).
    """
    tr = plant.robot.transmissions[1]  # the knee
    twist, torque = [], []
    for i in currents:
        plant.step([0.0, i])
        twist.append(plant.twists()[1])
        torque.append(-tr.multiplier * tr.motor.torque_constant * tr.motor_sign
                      * plant.currents[1])
    return np.array(twist), np.array(torque)


def _bench_plant(leg, hysteresis: bool):
    mech = _with_drive(leg, coulomb=0.0, static=0.0, load_friction=0.0, viscous=2e-3)
    plant = Plant(mech, hysteresis=hysteresis)
    plant.reset([0.0, 0.0])
    plant.lock("knee")
    return mech, plant


def test_locked_output_reproduces_the_catalogue_torque_twist_curve(leg):
    mech, plant = _bench_plant(leg, hysteresis=False)
    d = mech.transmissions[1].drive
    peak = 0.9 * mech.transmissions[1].motor.peak_current
    ramp = np.linspace(0.0, peak, 12000)  # 12 s, slow against the 30 Hz flexspline mode
    twist, torque = _torque_twist(plant, ramp)
    twist, torque = np.abs(twist), np.abs(torque)
    phi1 = d.t1 / d.k1
    phi2 = phi1 + (d.t2 - d.t1) / d.k2
    for lo, hi, k in ((0.1 * phi1, 0.9 * phi1, d.k1), (phi1 + 0.1 * (phi2 - phi1),
                      phi2 - 0.1 * (phi2 - phi1), d.k2), (phi2 * 1.05, twist.max(), d.k3)):
        sel = (twist > lo) & (twist < hi)
        assert sel.sum() > 50
        slope = np.polyfit(twist[sel], torque[sel], 1)[0]
        assert slope == pytest.approx(k, rel=0.01), f"slope {slope:.4g} vs catalogue {k:.4g}"


@pytest.mark.parametrize("hysteresis", [True, False])
def test_hysteresis_loop_area(leg, hysteresis):
    _mech, plant = _bench_plant(leg, hysteresis)
    up = np.linspace(0.0, 6.0, 4000)
    cycle = np.concatenate([up, up[::-1], -up, -up[::-1]])
    twist, torque = _torque_twist(plant, cycle)
    area = abs(np.trapezoid(torque, twist))  # J: energy lost per loading cycle
    # a saturated loop of half-width H over twists ±Δmax encloses about 4·H·Δmax
    expected = 4 * leg.transmissions[1].drive.hysteresis * np.abs(twist).max()
    if hysteresis:
        assert area == pytest.approx(expected, rel=0.2)
    else:  # only the bench's viscous damping and current-loop lag remain
        assert area < 0.02 * expected


def test_motor_current_loop(leg):
    p = motor_mod.motor_row(leg.transmissions[0].motor)
    tau = 1.0 / p[motor_mod.M_BANDWIDTH]
    dt = tau / 200
    i, t = 0.0, 0.0
    while t < tau - 1e-15:
        i = motor_mod.current_step(i, 5.0, 0.0, dt, p)
        t += dt
    assert i / 5.0 == pytest.approx(1 - math.exp(-1), rel=0.02)
    i = 0.0
    for _ in range(100):
        i = motor_mod.current_step(i, 1000.0, 0.0, 1e-3, p)
    assert i == pytest.approx(p[motor_mod.M_PEAK])
    # at speed the supply voltage caps the current: R i + k_M ω ≤ V
    omega = 400.0
    for _ in range(100):
        i = motor_mod.current_step(i, 1000.0, omega, 1e-3, p)
    cap = (p[motor_mod.M_V] - p[motor_mod.M_KT] * omega) / p[motor_mod.M_R]
    assert i == pytest.approx(cap) and cap < p[motor_mod.M_PEAK]


def test_stiction_holds_exactly_then_breaks_away(leg):
    """A load below breakaway: the rotor stays exactly at rest for 10 000 steps; above it slides."""
    plant = Plant(leg)
    plant.reset([0.0, 0.0])
    plant.lock("knee")
    tr = leg.transmissions[1]
    below = 0.5 * tr.drive.static / tr.motor.torque_constant
    rotor0 = plant.motor_positions[1]
    for _ in range(10000):
        plant.step([0.0, below])
        assert plant.motor_velocities[1] == 0.0
    assert plant.motor_positions[1] == rotor0
    # motor torque beyond breakaway: it starts to slide and twists the flexspline
    above = 3.0 * tr.drive.static / tr.motor.torque_constant
    for _ in range(200):
        plant.step([0.0, above])
    assert plant.motor_positions[1] != rotor0


def test_plant_step_does_not_allocate(leg):
    plant = Plant(leg)
    plant.reset(KNEE_HORIZONTAL)
    plant.step([0.1, 0.1])
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(2000):
        plant.step()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename") if s.size_diff > 0)
    assert grown < 4096
