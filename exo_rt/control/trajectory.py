"""Joint references: the normal gait over the gait phase, and the gait phase from heel
strikes (the session's moves and holds are exo_rt/cycle/segment.py's).

Normal gait: hip and knee flexion as Fourier series of the gait phase φ ∈ [0, 1) — a least-
squares fit to published normal-gait curves (gaitutils 0.13.9 normal.gcd; RMS residual 0.15° hip,
0.31° knee). A Fourier series is smooth to every derivative and periodic, so the reference is
continuous in position, velocity and acceleration across cycle boundaries. Cadence scales
the period, ``amplitude`` scales the excursion about the mean.

Everything the 1 kHz loop calls is njit on preallocated arrays.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.jit import njit

# fit to gaitutils 0.13.9 data/normal.gcd, degrees: θ = a0 + Σ (a_n cos 2πnφ + b_n sin 2πnφ)
GAIT_FOURIER_DEG = {
    "hip": (15.40, [(22.21, -0.63), (-2.67, -2.63), (-1.16, 1.50), (0.26, -0.07)]),
    "knee": (21.04, [(3.49, -22.56), (-18.01, 0.42), (-3.19, 3.84), (-1.02, -0.56),
                     (-1.12, 0.44)]),
}
MAX_HARMONICS = 12  # the normal gait uses 5; the flat-foot gait (exo_rt.control.flat_foot) all


def gait_coefficients(joints: list[str], kinds: list[str], amplitude: float = 1.0,
                      offset_rad: np.ndarray | None = None) -> np.ndarray:
    """Coefficient rows (rad) for each joint: [a0, a1, b1, …, aN, bN], N =
    :data:`MAX_HARMONICS` (the normal gait's past the 5th are 0).

    ``kinds[i]`` is 'hip', 'knee' or 'hold' (a joint not in the gait data: held at a0 = its
    offset). ``amplitude`` scales the excursion about the mean.
    """
    rows = np.zeros((len(joints), 1 + 2 * MAX_HARMONICS))
    for i, kind in enumerate(kinds):
        if kind in GAIT_FOURIER_DEG:
            a0, harmonics = GAIT_FOURIER_DEG[kind]
            rows[i, 0] = math.radians(a0)
            for n, (a, b) in enumerate(harmonics):
                rows[i, 1 + 2 * n] = math.radians(a) * amplitude
                rows[i, 2 + 2 * n] = math.radians(b) * amplitude
        if offset_rad is not None:
            rows[i, 0] += offset_rad[i]
    return rows


def start_position(coeffs: np.ndarray) -> np.ndarray:
    """q at gait phase 0 (rad): a₀ + Σ aₙ (cos 0 = 1, sin 0 = 0), summed in :func:`gait`'s
    order (the same bits) — set-up, from Python: nothing to compile."""
    q = coeffs[:, 0].copy()
    for n in range(1, MAX_HARMONICS + 1):
        q += coeffs[:, 2 * n - 1]
    return q


@njit(cache=True)
def gait(phase, period, coeffs, q, qd, qdd):
    """Reference at gait phase φ (cycles) for a stride of ``period`` s: q, q̇, q̈ (rad, /s, /s²)."""
    w = 2.0 * math.pi / period  # rad of phase per second
    for j in range(coeffs.shape[0]):
        p = coeffs[j, 0]
        v = 0.0
        a = 0.0
        for n in range(1, MAX_HARMONICS + 1):
            an = coeffs[j, 2 * n - 1]
            bn = coeffs[j, 2 * n]
            if an == 0.0 and bn == 0.0:
                continue
            x = 2.0 * math.pi * n * phase
            c, s = math.cos(x), math.sin(x)
            p += an * c + bn * s
            v += n * w * (-an * s + bn * c)
            a -= (n * w) ** 2 * (an * c + bn * s)
        q[j] = p
        qd[j] = v
        qdd[j] = a


# --- gait phase from foot-contact events (heel strikes reported by the embedded board)
PH_LAST = 0  # time of the last heel strike (s)
PH_PERIOD = 1  # current stride period estimate (s)
PH_COUNT = 2  # heel strikes seen
PH_WIDTH = 3


@njit(cache=True)
def phase_on_heel_strike(state, t, min_period, max_period, smoothing):
    """Record a heel strike at time t: the stride period estimate follows the measured one
    (first-order smoothing, plausible strides only). A strike sooner than ``min_period``
    after the last is the same foot landing again (a foot that bounces on the floor
    re-crosses the contact threshold within tens of ms): it starts no stride."""
    if state[PH_COUNT] > 0:
        measured = t - state[PH_LAST]
        if measured < min_period:
            return
        if measured <= max_period:
            state[PH_PERIOD] += smoothing * (measured - state[PH_PERIOD])
    state[PH_LAST] = t
    state[PH_COUNT] += 1


@njit(cache=True)
def phase_from_events(state, t):
    """Gait phase (cycles since the last heel strike over the estimated period), ≤ 0.999 so a
    late heel strike holds the end of the stride instead of wrapping."""
    return min((t - state[PH_LAST]) / state[PH_PERIOD], 0.999)


def warm_up() -> None:
    """Compile the gait phase's event kernels Python calls on a heel strike (the controller,
    between two cycles), on a throw-away phase state (:data:`PH_WIDTH` float64: last strike 0
    s, period 1 s, none seen) — before READY, not at the first heel strike."""
    state = np.array([0.0, 1.0, 0.0])
    phase_on_heel_strike(state, 1.0, 0.5, 2.0, 0.5)
    phase_from_events(state, 0.0)
