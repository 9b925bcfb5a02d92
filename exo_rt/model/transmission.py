"""Harmonic-drive transmissions and their motors, as model data (Hidalgo & Rocón §2.3).

The wave generator (WG) with the motor rotor is a body mounted on the circular spline's side
(the parent link of the output joint), turning about its own axis. The constraint
θ_WG = (N+1)θ_CS − Nθ_FS becomes, in relative coordinates, z_WG = −N·z_FS: the rotor's
coordinate is a *dependent* tree coordinate z_rotor = k·q_joint with k = −N (or +N for a
drive mounted the other way round), i.e. a URDF ``<mimic>`` with multiplier k. The
controller's model keeps it dependent (constant R_z, Hidalgo & Rocón eq. 27); the plant
releases it into an independent coordinate coupled through the flexspline's compliance.

All values are SI at the named side: stiffness and hysteresis at the output (N·m/rad, N·m),
friction at the wave generator / motor shaft (N·m, N·m·s/rad, rad/s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class HarmonicDrive:
    """Catalogue data of a strain-wave gear (Harmonic Drive LLC CSF/CSG catalogue).

    Stiffness: piecewise linear torque–twist curve, φ = T/K1 below T1, then slope K2 up to T2,
    then K3 (catalogue model), or the cubic T = K1·Δ + K3·Δ³ (Taghirad & Bélanger) when
    ``cubic`` is true (then ``k3`` is the cubic coefficient in N·m/rad³ and T1, T2 unused).
    """

    ratio: float  # N (reduction, ≥ 1)
    k1: float = math.inf  # N·m/rad, output side; inf = rigid
    k2: float = math.inf
    k3: float = math.inf
    t1: float = math.inf  # N·m
    t2: float = math.inf
    cubic: bool = False
    hysteresis: float = 0.0  # N·m at the output: half-width of the torque–twist loop
    coulomb: float = 0.0  # N·m at the WG
    static: float = 0.0  # N·m at the WG (breakaway, ≥ coulomb)
    viscous: float = 0.0  # N·m·s/rad at the WG
    stribeck_velocity: float = 0.1  # rad/s at the WG
    load_friction: float = 0.0  # μ: extra WG friction μ·|T_FS|/N from the transmitted torque
    efficiency: float = 1.0  # forward efficiency used by the controller's torque → current
    kinematic_error: tuple[tuple[float, float], ...] = ()  # (amplitude rad, phase rad) of 2k·θ_WG
    catalogue: str = ""  # the catalogue name, for people (e.g. CSG-25-100)
    # the catalogue's ratings at the output (None: not given): rated torque (at 2000 r/min
    # input), limit for repeated peak torque, limit for momentary peak torque (N·m); the largest
    # input speed (rad/s at the wave generator). Read by `exo-rt size` (exo_rt.analysis.sizing)
    rated_torque: float | None = None
    peak_torque: float | None = None
    momentary_torque: float | None = None
    max_input_speed: float | None = None


@dataclass(frozen=True)
class Motor:
    """A brushless DC motor and its drive's current loop (maxon catalogue)."""

    torque_constant: float  # k_M, N·m/A
    rated_current: float  # A (continuous)
    peak_current: float  # A (the drive's limit; the frame encoder clamps to it)
    resistance: float = 0.0  # Ω, terminal
    inductance: float = 0.0  # H, terminal
    voltage: float = math.inf  # V, supply (limits the achievable current at speed)
    current_bandwidth_hz: float = 1000.0  # drive current loop, first-order lag
    name: str = ""
    # N·m at the motor shaft: a spring-applied (power-off) holding brake, engaged whenever the
    # drive's power stage is off — disabled, faulted, or its supply cut by the board's relay;
    # 0: none (the leg is then held, if at all, by the harmonic drive's friction alone)
    brake_torque: float = 0.0
    # rad/s at the motor shaft (None: not given): the data sheet's nominal speed and its
    # permissible maximum (`exo-rt size`)
    rated_speed: float | None = None
    max_speed: float | None = None
    # the thermal catalogue data (exo_rt.schema.robot.MotorThermal) of the winding model,
    # exo_rt.actuators.thermal; None: that schema's defaults (the EC 45 flat 70 W)
    thermal: object = None


@dataclass(frozen=True)
class Transmission:
    """Output ``joint`` driven by the rotor coordinate ``rotor_joint`` = ``multiplier`` · q_joint.

    ``multiplier`` is −N for a harmonic drive with the circular spline on the parent link and
    the flexspline on the output (Hidalgo & Rocón eq. 23); motor torque k_M·i acts on the rotor
    coordinate, so the joint feels multiplier·k_M·i (times the efficiency in the real drive).
    """

    joint: str
    rotor_joint: str
    rotor_body: str
    multiplier: float
    drive: HarmonicDrive
    motor: Motor
    motor_sign: float = 1.0  # +1 if positive current turns the rotor in +z_rotor
    # what holds the joint once SAFE has disabled its drive (docs/safety.md): "brake" (the
    # motor's power-off brake), "friction" (the gear is not back-drivable under the load),
    # "short_circuit" (the disabled drive shorts the motor's phases: the plant's current is
    # −k_M·ω_m/R), "none" (nothing declared: the power stage off, a brake if the motor has one)
    safe_reaction: str = "none"

    @property
    def ratio(self) -> float:
        """|multiplier|, the reduction N."""
        return abs(self.multiplier)
