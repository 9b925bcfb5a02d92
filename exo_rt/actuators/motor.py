"""DC motor with its drive's current loop (reference notes §5, maxon catalogue).

The drive's current PI (tens of kHz) is modelled as a first-order lag at the configured
bandwidth ω_c, discretised exactly: i ← i + (i* − i)(1 − e^(−ω_c·dt)). The command i* is
clamped to ±peak_current and to what the supply can drive at the motor's speed:
|R·i + k_M·ω_m| ≤ V (back-EMF constant = torque constant in SI). Torque on the rotor:
motor_sign·k_M·i.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from exo_rt.model.transmission import Motor

M_KT = 0
M_PEAK = 1
M_R = 2
M_V = 3
M_BANDWIDTH = 4  # rad/s
M_SIGN = 5
M_WIDTH = 6


def motor_row(motor: Motor, sign: float = 1.0) -> np.ndarray:
    """The parameter row of one motor (SI; bandwidth in rad/s)."""
    row = np.zeros(M_WIDTH)
    row[M_KT], row[M_PEAK] = motor.torque_constant, motor.peak_current
    row[M_R], row[M_V] = motor.resistance, motor.voltage
    row[M_BANDWIDTH] = 2.0 * math.pi * motor.current_bandwidth_hz
    row[M_SIGN] = sign
    return row


@njit(cache=True)
def current_limits(omega_m, p):
    """(i_min, i_max) (A): the peak current and the supply voltage at motor speed ω_m (rad/s)."""
    lo, hi = -p[M_PEAK], p[M_PEAK]
    if p[M_R] > 0.0 and math.isfinite(p[M_V]):
        emf = p[M_KT] * p[M_SIGN] * omega_m
        hi = min(hi, (p[M_V] - emf) / p[M_R])
        lo = max(lo, (-p[M_V] - emf) / p[M_R])
        if lo > hi:  # beyond the no-load speed: the drive can only brake
            lo = hi = -emf / p[M_R]
    return lo, hi


@njit(cache=True)
def current_step(i, i_cmd, omega_m, dt, p):
    """The actual current after dt (s) for the command i_cmd (A) at motor speed ω_m."""
    lo, hi = current_limits(omega_m, p)
    target = min(max(i_cmd, lo), hi)
    return i + (target - i) * (1.0 - math.exp(-p[M_BANDWIDTH] * dt))


@njit(cache=True)
def motor_torque(i, p):
    """Torque (N·m) on the rotor coordinate for the actual current i (A)."""
    return p[M_SIGN] * p[M_KT] * i
