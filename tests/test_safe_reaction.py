"""What holds each joint once SAFE (or the E-stop's relay) has turned its drive off, per the
robot file's `safe_reaction` (docs/safety.md, "What holds the leg: the SAFE reaction"),
measured on the test stand: the leg at rest at a posture that loads both joints (hip 90°,
knee 30°: thigh horizontal, shank 60° forward), held there by its drives' friction in
equilibrium, then every power stage off at t = 0 (the E-stop), and how far each joint moves
in the next 2 s.

    python -m pytest tests/test_safe_reaction.py -q -s     # prints the table of docs/safety.md

The plant models each reaction: `brake` the motor's power-off brake (held up to its torque at
the rotor, dragging when it slips), `short_circuit` the drive's shorted phases (a current
−k_M·ω_m/R: damping k_M²/R at the rotor, N² times that at the joint), `friction`/`none` the
gear's own dry friction alone. Shorted phases only slow a joint that the load back-drives
(nothing holds at rest); a brake or a gear that is not back-drivable under the load stops it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from exo_rt.actuators.motor import M_SHORT
from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism
from exo_rt.sim.plant import T_MOTOR, HarmonicDrivePlant

ROOT = Path(__file__).resolve().parents[1]
POSTURE = (math.radians(90.0), math.radians(30.0))  # hip, knee (rad): both joints loaded
SECONDS = 2.0


def variant(path: str, reactions: tuple[str, str], brakes: tuple[float, float] | None = None):
    """The robot of ``path`` with these SAFE reactions (hip, knee) and, if given, these
    brakes (N·m at the motor; 0: none)."""
    mech = load_mechanism(ROOT / path)
    trs = []
    for n, t in enumerate(mech.transmissions):
        motor = t.motor if brakes is None else dataclasses.replace(t.motor,
                                                                   brake_torque=brakes[n])
        trs.append(dataclasses.replace(t, motor=motor, safe_reaction=reactions[n]))
    return dataclasses.replace(mech, transmissions=tuple(trs))


def estop(mech) -> tuple[np.ndarray, np.ndarray]:
    """(degrees each joint moved in 2 s after the power stages went off, the joints' largest
    speed in rad/s) from rest at :data:`POSTURE`."""
    plant = HarmonicDrivePlant(mech)
    plant.reset(POSTURE)
    q0 = plant.joint_positions.copy()
    plant.power(False)
    moved, fastest = np.zeros(2), np.zeros(2)
    for _ in range(int(SECONDS / plant.dt)):
        plant.step([0.0, 0.0])
        moved = np.maximum(moved, np.abs(plant.joint_positions - q0))
        fastest = np.maximum(fastest, np.abs(plant.joint_velocities))
    return np.degrees(moved), fastest


CASES = {  # name: (robot file, (hip, knee) reactions, brakes or None: the file's)
    "shipped, friction only (no brake)": ("configs/robots/exo_leg.yaml",
                                          ("friction", "friction"), (0.0, 0.0)),
    "shipped as it is (hip brake 0.4 N·m)": ("configs/robots/exo_leg.yaml",
                                             ("brake", "friction"), None),
    "shipped, phases shorted (no brake)": ("configs/robots/exo_leg.yaml",
                                           ("short_circuit", "short_circuit"), (0.0, 0.0)),
    "sized, friction only (no brake)": ("configs/robots/exo_leg_sized.yaml",
                                        ("friction", "friction"), (0.0, 0.0)),
    "sized, phases shorted (no brake)": ("configs/robots/exo_leg_sized.yaml",
                                         ("short_circuit", "short_circuit"), (0.0, 0.0)),
    "sized as declared (hip and knee brakes)": ("configs/robots/exo_leg_sized.yaml",
                                                ("brake", "brake"), None),
}


@pytest.fixture(scope="module")
def table():
    out = {name: estop(variant(path, reactions, brakes))
           for name, (path, reactions, brakes) in CASES.items()}
    mech = load_mechanism(ROOT / "configs/robots/exo_leg.yaml")
    load = Dynamics(mech).gravity(np.array(POSTURE))
    print(f"\ngravity at hip 90°, knee 30°: hip {load[0]:.1f}, knee {load[1]:.1f} N·m")
    print("| reaction | hip moved in 2 s | knee moved in 2 s | largest speed hip, knee |")
    for name, (moved, fastest) in out.items():
        print(f"| {name} | {moved[0]:.3g}° | {moved[1]:.3g}° | {fastest[0]:.3g}, "
              f"{fastest[1]:.3g} rad/s |")
    return out


def test_the_reactions_on_the_test_stand(table):
    load = Dynamics(load_mechanism(ROOT / "configs/robots/exo_leg.yaml")).gravity(
        np.array(POSTURE))
    assert abs(load[0]) > 50.0 and abs(load[1]) > 10.0  # N·m: both joints carry the leg
    # the shipped hip's gear alone does not hold it (N·T_s/(1 − μ) = 22.5 N·m < the load):
    # it falls; its brake (40 N·m at the joint before the gear's friction) holds it
    free, braked = table["shipped, friction only (no brake)"][0], \
        table["shipped as it is (hip brake 0.4 N·m)"][0]
    assert free[0] > 30.0
    assert braked[0] < 0.05
    # the knee's CSF-20 holds its shank by friction alone (20 N·m > its 15 N·m): it moves
    # by a tenth of a degree only while the falling hip swings it, not at all when held
    assert free[1] < 0.2 and braked[1] < 0.05
    # shorted phases slow the falling hip but do not hold it: it still moves far in 2 s
    shorted, fast_free = table["shipped, phases shorted (no brake)"], \
        table["shipped, friction only (no brake)"][1]
    assert shorted[0][0] > 30.0 and shorted[1][0] < 0.5 * fast_free[0]
    # the sized leg as declared holds both joints
    declared = table["sized as declared (hip and knee brakes)"][0]
    assert declared.max() < 0.05


def test_short_circuit_damps_as_k2_over_r(table):
    """The shorted phases' braking torque at the rotor is k_M²·ω/R: the plant's current in
    the fall equals −k_M·ω_m/R (the loop's lag aside) — and nothing of it without the key."""
    mech = variant("configs/robots/exo_leg.yaml", ("short_circuit", "none"), (0.0, 0.0))
    plant = HarmonicDrivePlant(mech)
    assert plant.transmissions[0, T_MOTOR + M_SHORT] == 1.0
    assert plant.transmissions[1, T_MOTOR + M_SHORT] == 0.0
    plant.reset(POSTURE)
    plant.power(False)
    for _ in range(300):
        plant.step([0.0, 0.0])
    motor = mech.transmissions[0].motor
    expected = -motor.torque_constant * plant.motor_velocities[0] / motor.resistance
    assert abs(plant.currents[0]) > 1.0  # A: the fall drives a real current
    assert plant.currents[0] == pytest.approx(expected, rel=0.05)
    assert plant.currents[1] == 0.0  # open phases: no current at all
    # the same plant without the key: the bit-for-bit harmonic_drive (no current when off)
    plain = HarmonicDrivePlant(variant("configs/robots/exo_leg.yaml", ("none", "none"),
                                       (0.0, 0.0)))
    assert not plain.transmissions[:, T_MOTOR + M_SHORT].any()
