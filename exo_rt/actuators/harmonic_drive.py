"""Compliant harmonic drive: flexspline stiffness, hysteresis, wave-generator friction.

The plant's model of a strain-wave gear (docs/dynamics.md; Taghirad & Bélanger 1998, "Modeling
and parameter identification of harmonic drive systems", ASME JDSMC 120(4); HD LLC CSF/CSG
catalogue, pp. 14, 49, 50; docs/references.md).

Coordinates. The joint (flexspline, output) coordinate q_j and the rotor (wave generator +
motor rotor) coordinate q_r = z_WG, both relative to the circular spline's link. The rigid
constraint θ_WG = (N+1)θ_CS − Nθ_FS (Hidalgo & Rocón eq. 23) reads q_r = k·q_j with k = −N. The
compliant drive frees q_r; the flexspline twist (rad, at the output) is

    Δ = q_j − q_r/k − e(q_r),     e(θ) = Σ_n A_n sin(2n·θ + φ_n)   (kinematic error)

— the output's angle minus where the rigid gear (with its kinematic error) would put it.

Torque. The flexspline transmits T = T_s(Δ) + T_h (N·m at the output): the elastic curve
T_s = dU/dΔ plus the hysteresis torque T_h. As generalized forces (Q = −∂U/∂q for the spring):

    Q_j = −T,        Q_r = −T·∂Δ/∂q_r = T·(1/k + e'(q_r))

so with e = 0 the rotor feels T/k = −T/N: the ideal-gear relation T_WG = −T_FS/N
(Hidalgo & Rocón eq. 24), and the spring's power Q_j q̇_j + Q_r q̇_r = −T·Δ̇ = −dU/dt
(energy is conserved).

Parameters of one drive are one row of floats (columns ``D_*``) so a plant with several drives
passes one array to njit code.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.jit import njit
from exo_rt.model.transmission import HarmonicDrive

# --- columns of a drive's parameter row
D_K1 = 0  # N·m/rad
D_K2 = 1  # N·m/rad
D_K3 = 2  # N·m/rad (N·m/rad³ for the cubic curve)
D_T1 = 3  # N·m
D_T2 = 4  # N·m
D_CUBIC = 5  # 1.0: T_s = K1Δ + K3Δ³
D_HYST = 6  # N·m: half-width H of the hysteresis loop (0: none)
D_HYST_SLOPE = 7  # N·m/rad: Dahl's σ, the initial slope of a hysteresis branch
D_COULOMB = 8  # N·m at the WG
D_STATIC = 9  # N·m at the WG (breakaway at no load, ≥ Coulomb)
D_VISCOUS = 10  # N·m·s/rad at the WG
D_STRIBECK = 11  # rad/s at the WG
D_MU = 12  # load-dependent WG friction μ·|T|/N (dimensionless)
D_RATIO = 13  # N
D_KIN = 14  # up to D_KIN_N kinematic-error harmonics: (amplitude rad, phase rad) pairs
D_KIN_N = 3
D_WIDTH = D_KIN + 2 * D_KIN_N


def drive_row(drive: HarmonicDrive, *, friction: bool = True, hysteresis: bool = True
              ) -> np.ndarray:
    """The parameter row of one drive (SI); ``friction``/``hysteresis`` False zero them.

    Dahl's σ is taken equal to K1: a hysteresis branch starts as stiff as the flexspline's
    first segment, so the loop's corners round off within a twist of about 3H/K1.
    """
    row = np.zeros(D_WIDTH)
    row[D_K1], row[D_K2], row[D_K3] = drive.k1, drive.k2, drive.k3
    row[D_T1], row[D_T2] = drive.t1, drive.t2
    row[D_CUBIC] = 1.0 if drive.cubic else 0.0
    row[D_HYST] = drive.hysteresis if hysteresis else 0.0
    row[D_HYST_SLOPE] = drive.k1 if math.isfinite(drive.k1) else 1e6
    if friction:
        row[D_COULOMB], row[D_STATIC] = drive.coulomb, max(drive.static, drive.coulomb)
        row[D_VISCOUS], row[D_MU] = drive.viscous, drive.load_friction
    row[D_STRIBECK] = max(drive.stribeck_velocity, 1e-9)
    row[D_RATIO] = drive.ratio
    for n, (amp, phase) in enumerate(drive.kinematic_error[:D_KIN_N]):
        row[D_KIN + 2 * n], row[D_KIN + 2 * n + 1] = amp, phase
    return row


# inline="always": these small laws compile into the kernels that call them (numba IR
# inlining) instead of each being a kernel of its own: ~60 ms less each on a cold start.
@njit(cache=True, inline="always")
def _breakpoints(p):
    """Twists (rad) where the catalogue curve changes slope: φ1 = T1/K1, φ2 = φ1 + (T2−T1)/K2."""
    phi1 = p[D_T1] / p[D_K1]
    return phi1, phi1 + (p[D_T2] - p[D_T1]) / p[D_K2]


@njit(cache=True, inline="always")
def stiffness_torque(delta, p):
    """T_s(Δ) (N·m) for a twist Δ (rad): the flexspline's elastic torque, odd in Δ.

    Catalogue piecewise-linear curve: K1·|Δ| up to T1, then T1 + K2·(|Δ| − φ1) up to T2, then
    T2 + K3·(|Δ| − φ2); or Taghirad & Bélanger's cubic K1·Δ + K3·Δ³.
    """
    if p[D_CUBIC] > 0.5:
        return p[D_K1] * delta + p[D_K3] * delta * delta * delta
    a = abs(delta)
    phi1, phi2 = _breakpoints(p)
    if a <= phi1:
        t = p[D_K1] * a
    elif a <= phi2:
        t = p[D_T1] + p[D_K2] * (a - phi1)
    else:
        t = p[D_T2] + p[D_K3] * (a - phi2)
    return t if delta >= 0.0 else -t


@njit(cache=True, inline="always")
def stiffness_energy(delta, p):
    """U(Δ) = ∫₀^Δ T_s(x) dx (J): the flexspline's elastic energy."""
    if p[D_CUBIC] > 0.5:
        return 0.5 * p[D_K1] * delta * delta + 0.25 * p[D_K3] * delta**4
    a = abs(delta)
    phi1, phi2 = _breakpoints(p)
    if a <= phi1:
        return 0.5 * p[D_K1] * a * a
    u1 = 0.5 * p[D_T1] * phi1
    if a <= phi2:
        d = a - phi1
        return u1 + p[D_T1] * d + 0.5 * p[D_K2] * d * d
    d2 = phi2 - phi1
    d = a - phi2
    return u1 + p[D_T1] * d2 + 0.5 * p[D_K2] * d2 * d2 + p[D_T2] * d + 0.5 * p[D_K3] * d * d


@njit(cache=True, inline="always")
def twist_for_torque(torque, p):
    """Δ (rad) with T_s(Δ) = torque (N·m): the inverse of :func:`stiffness_torque`.

    Closed form for the catalogue curve; Newton's method for the (monotone) cubic.
    """
    if p[D_CUBIC] > 0.5:
        d = torque / p[D_K1]
        for _ in range(50):
            f = p[D_K1] * d + p[D_K3] * d**3 - torque
            d -= f / (p[D_K1] + 3.0 * p[D_K3] * d * d)
        return d
    a = abs(torque)
    phi1, phi2 = _breakpoints(p)
    if a <= p[D_T1]:
        d = a / p[D_K1]
    elif a <= p[D_T2]:
        d = phi1 + (a - p[D_T1]) / p[D_K2]
    else:
        d = phi2 + (a - p[D_T2]) / p[D_K3]
    return d if torque >= 0.0 else -d


@njit(cache=True, inline="always")
def kinematic_error(theta_wg, p):
    """(e, de/dθ): the kinematic error e = Σ A_n sin(2n·θ + φ_n) (rad at the output) at the
    wave-generator angle θ = q_r (rad, relative to the circular spline), and its slope."""
    e = 0.0
    de = 0.0
    for n in range(D_KIN_N):
        amp = p[D_KIN + 2 * n]
        if amp != 0.0:
            arg = 2.0 * (n + 1) * theta_wg + p[D_KIN + 2 * n + 1]
            e += amp * math.sin(arg)
            de += amp * 2.0 * (n + 1) * math.cos(arg)
    return e, de


@njit(cache=True, inline="always")
def hysteresis_update(t_h, d_delta, p):
    """The hysteresis torque T_h (N·m) after the twist changes by d_delta (rad).

    Dahl's rate-independent model: dT_h/dΔ = σ·(1 − sgn(Δ̇)·T_h/H). It replaces Taghirad &
    Bélanger's discontinuous H·sgn(Δ̇) (which chatters in simulation) by a branch that leaves
    each reversal with slope σ and saturates at ±H, so a loading cycle over ±Δ_max (≫ H/σ)
    encloses about 4·H·Δ_max (J dissipated per cycle), and exactly 0 when H = 0. Integrated
    exactly over a monotone increment (unconditionally stable, stays within ±H):
    T_h ← s·H + (T_h − s·H)·exp(−σ|dΔ|/H), s = sgn(dΔ).
    """
    h = p[D_HYST]
    if h <= 0.0:
        return 0.0
    if d_delta == 0.0:
        return t_h
    s = 1.0 if d_delta > 0.0 else -1.0
    return s * h + (t_h - s * h) * math.exp(-p[D_HYST_SLOPE] * abs(d_delta) / h)


@njit(cache=True, inline="always")
def has_dry_friction(p):
    """Whether the wave generator has Coulomb, static or load-dependent friction (can stick)."""
    return p[D_STATIC] > 0.0 or p[D_COULOMB] > 0.0 or p[D_MU] > 0.0


@njit(cache=True, inline="always")
def sliding_friction(omega, direction, load, p):
    """Wave-generator friction (N·m at the WG) while sliding in ``direction`` (±1) at ω (rad/s).

        −[T_c + (T_s − T_c)·exp(−(ω/ω_s)²) + μ·|T|/N]·direction − B·ω

    Coulomb + Stribeck + viscous (Taghirad & Bélanger's WG friction) plus a mesh friction that
    grows with the transmitted torque T (what makes a high-ratio drive hard to back-drive:
    forward efficiency ≈ 1/(1+μ), backward ≈ 1−μ). The direction is held over an integration
    step — the plant stops and sticks a rotor whose velocity would reverse — so the law never
    switches sign inside a step (no chatter).
    """
    w = omega / p[D_STRIBECK]
    mag = (p[D_COULOMB] + (p[D_STATIC] - p[D_COULOMB]) * math.exp(-w * w)
           + p[D_MU] * abs(load) / p[D_RATIO])
    return -(mag * direction + p[D_VISCOUS] * omega)


@njit(cache=True, inline="always")
def breakaway(load, p):
    """Largest torque (N·m at the WG) static friction can hold with T = load: T_s + μ|T|/N."""
    return p[D_STATIC] + p[D_MU] * abs(load) / p[D_RATIO]
