"""DC motor with its drive's current loop (maxon catalogue, pp. 321, 324).

Electrical model L·di/dt = V_a − R·i − k_M·ω_m, motor torque k_M·i (k_M the torque constant,
equal to the back-EMF constant in SI). The drive's current PI (tuned by pole–zero
cancellation at ω_c = 2π·f_c, tens of kHz switching) makes the closed current loop a
first-order lag at ω_c; it is discretised exactly:

    i ← i + (i* − i)·(1 − exp(−ω_c·dt))

The command i* is first clamped to the drive's ±peak current, then to what the supply can
drive at the motor speed ω_m: |R·i + k_M·ω_m| ≤ V, i.e. i ∈ [(−V − k_M ω_m)/R, (V − k_M ω_m)/R]
(the inductive drop is left out: L/R ≈ 0.5 ms is inside the loop's lag). When the two ranges
do not meet (beyond no-load speed plus R·I_peak/k_M) the bridge applies full reverse voltage:
the current is the voltage bound nearest zero.

The motor's own angle is motor_sign · q_r (q_r the rotor coordinate), so the torque on the
rotor coordinate is motor_sign·k_M·i and ω_m = motor_sign·q̇_r.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.jit import njit
from exo_rt.model.transmission import Motor

M_KT = 0  # N·m/A
M_PEAK = 1  # A
M_R = 2  # Ω
M_V = 3  # V (inf: no voltage limit)
M_BANDWIDTH = 4  # rad/s
M_SIGN = 5  # ±1
M_BRAKE = 6  # N·m at the motor shaft: the power-off brake's holding torque (0: none)
M_SHORT = 7  # 1.0: the disabled drive shorts the motor's phases (SAFE reaction short_circuit)
M_WIDTH = 8


def motor_row(motor: Motor, sign: float = 1.0, *, short: bool = False) -> np.ndarray:
    """The parameter row of one motor (SI; bandwidth in rad/s); ``short``: its drive shorts
    the phases while its power stage is off (:func:`short_circuit_current`)."""
    row = np.zeros(M_WIDTH)
    row[M_KT], row[M_PEAK] = motor.torque_constant, motor.peak_current
    row[M_R], row[M_V] = motor.resistance, motor.voltage
    row[M_BANDWIDTH] = 2.0 * math.pi * motor.current_bandwidth_hz
    row[M_SIGN] = sign
    row[M_BRAKE] = motor.brake_torque
    row[M_SHORT] = 1.0 if short and motor.resistance > 0.0 else 0.0
    return row


# inline="always": these small laws compile into the kernels that call them (numba IR
# inlining) instead of each being a kernel of its own: ~60 ms less each on a cold start.
@njit(cache=True, inline="always")
def current_target(i_cmd, omega_r, p):
    """The current (A) the loop settles to for command i_cmd at rotor speed ω_r (rad/s)."""
    target = min(max(i_cmd, -p[M_PEAK]), p[M_PEAK])
    if p[M_R] > 0.0 and math.isfinite(p[M_V]):
        emf = p[M_KT] * p[M_SIGN] * omega_r
        target = min(max(target, (-p[M_V] - emf) / p[M_R]), (p[M_V] - emf) / p[M_R])
    return target


@njit(cache=True, inline="always")
def current_step(i, i_cmd, omega_r, dt, p):
    """The actual current (A) after dt (s) from i, for command i_cmd at rotor speed ω_r."""
    target = current_target(i_cmd, omega_r, p)
    return i + (target - i) * (1.0 - math.exp(-p[M_BANDWIDTH] * dt))


@njit(cache=True, inline="always")
def motor_torque(i, p):
    """Torque (N·m) on the rotor coordinate for the actual current i (A): motor_sign·k_M·i."""
    return p[M_SIGN] * p[M_KT] * i


@njit(cache=True, inline="always")
def short_circuit_current(omega_r, p):
    """The current (A) a disabled drive's shorted phases carry at rotor speed ω_r (rad/s):
    0 = R·i + k_M·ω_m, i = −k_M·motor_sign·ω_r/R — its torque −k_M²·ω_r/R brakes the rotor
    in proportion to its speed (the winding's resistance limits it: at rest nothing holds);
    0 for a drive that leaves the phases open (or a winding without resistance)."""
    if p[M_SHORT] > 0.5 and p[M_R] > 0.0:
        return -p[M_KT] * p[M_SIGN] * omega_r / p[M_R]
    return 0.0
