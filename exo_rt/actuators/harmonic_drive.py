"""Compliant harmonic drive: flexspline stiffness, hysteresis, wave-generator friction.

The plant's model of a strain-wave gear (DESIGN §3.3; Taghirad & Bélanger, ASME JDSMC 1998;
HD LLC CSF catalogue). With the joint (flexspline, output) coordinate q_j and the rotor (wave
generator + motor rotor) coordinate q_r, which the rigid constraint would tie by q_r = k·q_j
(k = −N, seed 000 eq. 23), the flexspline twist is

    Δ = q_j − q_r / k − e(q_r)        (e: optional kinematic error, Σ A_n sin(2n·q_r + φ_n))

and the transmitted torque T = T_s(Δ) + T_h (stiffness plus hysteresis) acts as the
generalized forces Q_j = −T and Q_r = T·(1/k + e'(q_r)) = −T ∂Δ/∂q_r (so the spring is
conservative: Q = −∂U/∂q). The wave generator carries Coulomb + viscous + Stribeck friction
with a load-dependent part μ|T|/N (mesh friction grows with the transmitted torque, which is
why high-ratio drives are hard to back-drive — seed 000 §3).

Parameters of one drive are one row of floats (columns ``D_*``) so a plant with several drives
passes one array to njit code.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from exo_rt.model.transmission import HarmonicDrive

# --- columns of a drive's parameter row
D_K1 = 0
D_K2 = 1
D_K3 = 2
D_T1 = 3
D_T2 = 4
D_CUBIC = 5
D_HYST = 6  # N·m half-width of the hysteresis loop (0: none)
D_HYST_SLOPE = 7  # N·m/rad: initial slope of the hysteresis torque (Dahl's σ)
D_COULOMB = 8
D_STATIC = 9
D_VISCOUS = 10
D_STRIBECK = 11
D_MU = 12
D_RATIO = 13
D_KIN = 14  # up to 3 kinematic-error harmonics: (amplitude, phase) pairs
D_KIN_N = 3
D_WIDTH = D_KIN + 2 * D_KIN_N


def drive_row(drive: HarmonicDrive) -> np.ndarray:
    """The parameter row of one drive (SI)."""
    row = np.zeros(D_WIDTH)
    row[D_K1], row[D_K2], row[D_K3] = drive.k1, drive.k2, drive.k3
    row[D_T1], row[D_T2] = drive.t1, drive.t2
    row[D_CUBIC] = 1.0 if drive.cubic else 0.0
    row[D_HYST] = drive.hysteresis
    row[D_HYST_SLOPE] = drive.k1 if math.isfinite(drive.k1) else 1e6
    row[D_COULOMB], row[D_STATIC] = drive.coulomb, max(drive.static, drive.coulomb)
    row[D_VISCOUS], row[D_STRIBECK] = drive.viscous, max(drive.stribeck_velocity, 1e-9)
    row[D_MU], row[D_RATIO] = drive.load_friction, drive.ratio
    for n, (amp, phase) in enumerate(drive.kinematic_error[:D_KIN_N]):
        row[D_KIN + 2 * n], row[D_KIN + 2 * n + 1] = amp, phase
    return row


@njit(cache=True)
def _segments(p):
    """Twist at the two breakpoints of the catalogue curve: φ1 = T1/K1, φ2 = φ1 + (T2−T1)/K2."""
    phi1 = p[D_T1] / p[D_K1]
    return phi1, phi1 + (p[D_T2] - p[D_T1]) / p[D_K2]


@njit(cache=True)
def stiffness_torque(delta, p):
    """T_s(Δ) (N·m): catalogue piecewise-linear K1/K2/K3 curve (odd), or K1Δ + K3Δ³."""
    if p[D_CUBIC] > 0.5:
        return p[D_K1] * delta + p[D_K3] * delta * delta * delta
    a = abs(delta)
    phi1, phi2 = _segments(p)
    if a <= phi1:
        t = p[D_K1] * a
    elif a <= phi2:
        t = p[D_T1] + p[D_K2] * (a - phi1)
    else:
        t = p[D_T2] + p[D_K3] * (a - phi2)
    return t if delta >= 0.0 else -t


@njit(cache=True)
def stiffness_energy(delta, p):
    """U(Δ) = ∫₀^Δ T_s (J): the flexspline's elastic energy."""
    if p[D_CUBIC] > 0.5:
        return 0.5 * p[D_K1] * delta * delta + 0.25 * p[D_K3] * delta**4
    a = abs(delta)
    phi1, phi2 = _segments(p)
    if a <= phi1:
        return 0.5 * p[D_K1] * a * a
    u1 = 0.5 * p[D_T1] * phi1
    if a <= phi2:
        d = a - phi1
        return u1 + p[D_T1] * d + 0.5 * p[D_K2] * d * d
    d2 = phi2 - phi1
    d = a - phi2
    return u1 + p[D_T1] * d2 + 0.5 * p[D_K2] * d2 * d2 + p[D_T2] * d + 0.5 * p[D_K3] * d * d


@njit(cache=True)
def twist_for_torque(torque, p):
    """Δ with T_s(Δ) = torque (the inverse of :func:`stiffness_torque`, by Newton for cubic)."""
    if p[D_CUBIC] > 0.5:
        d = torque / p[D_K1]
        for _ in range(50):
            f = p[D_K1] * d + p[D_K3] * d**3 - torque
            d -= f / (p[D_K1] + 3.0 * p[D_K3] * d * d)
        return d
    a = abs(torque)
    phi1, phi2 = _segments(p)
    if a <= p[D_T1]:
        d = a / p[D_K1]
    elif a <= p[D_T2]:
        d = phi1 + (a - p[D_T1]) / p[D_K2]
    else:
        d = phi2 + (a - p[D_T2]) / p[D_K3]
    return d if torque >= 0.0 else -d


@njit(cache=True)
def kinematic_error(theta_wg, p):
    """(e, de/dθ) of the kinematic error at wave-generator angle θ (rad at the output)."""
    e = 0.0
    de = 0.0
    for n in range(D_KIN_N):
        amp = p[D_KIN + 2 * n]
        if amp != 0.0:
            arg = 2.0 * (n + 1) * theta_wg + p[D_KIN + 2 * n + 1]
            e += amp * math.sin(arg)
            de += amp * 2.0 * (n + 1) * math.cos(arg)
    return e, de


@njit(cache=True)
def hysteresis_rate(t_h, delta_rate, p):
    """dT_h/dt of the Dahl model: σ·Δ̇·(1 − sign(Δ̇)·T_h/H): a loop of half-width H."""
    h = p[D_HYST]
    if h <= 0.0:
        return 0.0
    s = 1.0 if delta_rate >= 0.0 else -1.0
    return p[D_HYST_SLOPE] * delta_rate * (1.0 - s * t_h / h)


@njit(cache=True)
def sliding_friction(omega, direction, load, p):
    """Wave-generator friction torque (N·m at the WG) while sliding in ``direction`` (±1).

    −[T_c + (T_s − T_c)·exp(−(ω/ω_s)²) + μ|T|/N]·direction − B·ω, with T the transmitted
    torque. The direction is held over an integration step (the plant stops the rotor, and
    sticks it, when its velocity would reverse), so the law never chatters around ω = 0.
    """
    mag = (p[D_COULOMB] + (p[D_STATIC] - p[D_COULOMB]) * math.exp(-(omega / p[D_STRIBECK]) ** 2)
           + p[D_MU] * abs(load) / p[D_RATIO])
    return -(mag * direction + p[D_VISCOUS] * omega)


@njit(cache=True)
def breakaway(load, p):
    """Largest torque static friction can hold at the WG (N·m): T_s + μ|T|/N."""
    return p[D_STATIC] + p[D_MU] * abs(load) / p[D_RATIO]
