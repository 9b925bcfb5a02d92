"""The wearer's gait phase, estimated in the cycle from one hip angle (docs/assistance.md).

An adaptive oscillator (Ronsse et al. 2011, eqs. 1–4; Yan et al. 2017): a pool of
:data:`HARMONICS` oscillators at multiples of one learned frequency ω reproduces the hip's
flexion angle θ(t) as θ̂ = α₀ + Σᵢ αᵢ sin φᵢ; the error F = θ − θ̂ pulls each phase, the
frequency and the amplitudes (Euler at the cycle's period, a few dozen operations):

    φ̇ᵢ = i·ω + ν_φ·F·cos φᵢ / Σα,   ω̇ = ν_ω·F·cos φ₁ / Σα,   α̇ᵢ = η·F·sin φᵢ,   α̇₀ = η·F.

The learning rates scale with the stride frequency — ν_φ = k_φ·ω, ν_ω = k_ω·ω², η = k_η·ω
(``nu_phase``, ``nu_freq``, ``eta``: per radian of the stride) — so the estimate settles in
the same number of strides at every cadence: with rates fixed in 1/s, gains that follow a
1.1 s stride within 3 strides leave a 2.4 s stride's phase wandering by 0.1 stride (measured
on the normal gait's hip curve), and gains slow enough for it never catch a 1.1 s stride
starting from 2 s.

The fundamental φ₁ runs once per stride, but its zero is where the hip's first harmonic
crosses zero, not the heel strike. The gait phase is φ₁ less an offset: at first that of the
normal gait's hip curve (φ₁ at its heel strike), then learned from the heel strikes the
embedded board reports (each moves the target offset by a fraction ``heel_gain`` of what it
finds; a missed strike changes nothing). The applied offset slews towards the target by at most
``slew`` rad a cycle, so the phase never jumps: its step at the stride's wrap stays within
a cycle's advance plus ``slew``.

Standing still is recognised by the hip's speed: ``walking`` (0–1) is a smooth step of the RMS
hip speed (a first-order mean of θ̇² over ``speed_tau``) between ``still_speed`` and
``walk_speed``; assistance that depends on the phase fades with it. While still, the
oscillator's amplitudes decay (F sin φ averages −α/2: a time constant 2/η).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.jit import njit

HARMONICS = 3  # oscillators in the pool (the hip's curve needs its first three harmonics)
TWO_PI = 2.0 * math.pi
PULL_IN = 0.15  # a stride time this far (in log ratio, ≈ 15 %) from the frequency pulls it in
REFRACTORY = 0.2  # strides: a heel strike this soon after the last is no stride (a bounce)
MIN_AMPLITUDE = 0.02  # rad: the floor of Σα in the phase and frequency updates (no blow-up
# while the hip rests)

# the estimate's parameters, one record (the cycle model's ``gp``)
PARAMS = np.dtype([
    ("joint", "i8"),  # the hip joint whose angle is followed (−1: no estimate)
    ("nu_phase", "f8"),  # k_φ: phase coupling, ν_φ = k_φ·ω (per rad of the stride)
    ("nu_freq", "f8"),  # k_ω: frequency learning, ν_ω = k_ω·ω²
    ("eta", "f8"),  # k_η: amplitude learning, η = k_η·ω
    ("omega_min", "f8"),  # rad/s: the stride frequency's range
    ("omega_max", "f8"),
    ("omega0", "f8"),  # rad/s: where the frequency starts (the session's stride)
    ("offset0", "f8"),  # rad: φ₁ at the heel strike of the normal gait's hip curve
    ("heel_gain", "f8"),  # the fraction of a heel strike's offset error taken (0–1)
    ("slew", "f8"),  # rad: the applied offset's largest change per cycle
    ("speed_tau", "f8"),  # s: time constant of the hip's mean square speed
    ("still_speed", "f8"),  # rad/s: RMS hip speed at or below which the wearer stands still
    ("walk_speed", "f8"),  # rad/s: at or above which they walk (walking = 1)
])

# the estimate's state, one record (the cycle data's ``gp``; zero, then :func:`reset`)
STATE = np.dtype([
    ("phi", "f8", (HARMONICS,)),  # rad: the oscillators' phases, in [0, 2π)
    ("alpha", "f8", (HARMONICS + 1,)),  # rad: α₀ (the mean), α₁ … (the harmonics' amplitudes)
    ("omega", "f8"),  # rad/s: the stride's angular frequency
    ("offset", "f8"),  # rad: applied, φ₁ at heel strike
    ("target", "f8"),  # rad: learned from the heel strikes
    ("phase", "f8"),  # out: gait phase, strides in [0, 1) (0: the heel strike)
    ("wrapped", "f8"),  # out: 1 in the cycle the phase passed a stride boundary
    ("speed2", "f8"),  # rad²/s²: the hip's mean square speed
    ("walking", "f8"),  # out: 0 (still) … 1 (walking)
    ("strides", "f8"),  # out: stride boundaries passed
    ("heels", "f8"),  # heel strikes used
    ("since_heel", "f8"),  # s since the last heel strike (−1: none yet)
])


def params(joint: int, omega0: float, offset0: float, **given) -> np.ndarray:
    """The estimate's parameters (one :data:`PARAMS` record in an array of one): the followed
    ``joint`` (its index; −1: none), the starting frequency ``omega0`` (rad/s), the normal
    gait's ``offset0`` (:func:`hip_offset`); ``given``: the controller file's
    ``phase_estimate`` keys by name (:class:`exo_rt.schema.controller.PhaseEstimate`; the
    frequency's range is a walk's, :data:`OMEGA_RANGE`)."""
    p = np.zeros(1, PARAMS)
    p[0]["omega_min"], p[0]["omega_max"] = OMEGA_RANGE
    for name, value in given.items():
        p[0][name] = value
    p[0]["joint"] = joint
    p[0]["omega0"] = omega0
    p[0]["offset0"] = offset0
    return p


OMEGA_RANGE = (TWO_PI / 4.0, TWO_PI / 0.6)  # rad/s: strides of 4 s … 0.6 s


def hip_offset(coeffs_row: np.ndarray) -> float:
    """φ₁ at the heel strike (rad) of a gait curve given by its Fourier row [a0, a1, b1, …]
    (:func:`exo_rt.control.trajectory.gait_coefficients`): its first harmonic
    a₁ cos x + b₁ sin x is A sin(x + ψ), and φ₁ = x + ψ, so the offset is ψ."""
    return math.atan2(coeffs_row[1], coeffs_row[2]) % TWO_PI


def reset(p, st) -> None:
    """The estimate at rest (in place; set-up, from Python: nothing to compile): frequency
    ``omega0``, the phase at the heel strike, no amplitude learned yet."""
    g, e = p[0], st[0]
    e["omega"] = g["omega0"]
    e["offset"] = e["target"] = g["offset0"]
    e["phi"] = (np.arange(1, HARMONICS + 1) * g["offset0"]) % TWO_PI
    e["alpha"] = 0.0
    e["phase"] = e["wrapped"] = e["speed2"] = e["walking"] = e["strides"] = e["heels"] = 0.0
    e["since_heel"] = -1.0


@njit(cache=True, inline="always")
def _wrap_pi(x):
    """x in (−π, π]."""
    return x - TWO_PI * math.floor((x + math.pi) / TWO_PI)


@njit(cache=True, inline="always")
def _stride_time(g, e):
    """The frequency from the time since the last heel strike, where it is a walk's: one
    stride, or two if a strike was missed — whichever is nearer the frequency now — when it
    is more than :data:`PULL_IN` from it. This pulls the oscillator in from a cadence far
    from where it started, which its own coupling cannot (it locks only within about ±40 %);
    nearer, the oscillator's own learning is smoother (correcting every stride made the
    phase alternate by ±1 % of the stride from one stride to the next)."""
    t = e.since_heel
    if t <= 0.0:
        return
    one, two = TWO_PI / t, 2.0 * TWO_PI / t
    best = -1.0
    if g.omega_min <= one <= g.omega_max:
        best = one
    if g.omega_min <= two <= g.omega_max and (
            best < 0.0 or abs(math.log(two / e.omega)) < abs(math.log(best / e.omega))):
        best = two
    if best > 0.0 and abs(math.log(best / e.omega)) > PULL_IN:
        e.omega += g.heel_gain * (best - e.omega)


@njit(cache=True)
def update(p, st, q, qd, heel, dt):
    """One cycle of the estimate on the joints' measured ``q``, ``qd`` (rad, rad/s); ``heel``
    1: a heel strike of this leg was reported since the last cycle. Allocates nothing."""
    g = p[0]
    j = g.joint
    if j < 0:
        return
    e = st[0]
    theta = q[j]
    if not (math.isfinite(theta) and math.isfinite(qd[j])):
        return  # (a missing sample: the oscillators coast)
    fit = e.alpha[0]
    total = 0.0
    for i in range(HARMONICS):
        fit += e.alpha[i + 1] * math.sin(e.phi[i])
        total += e.alpha[i + 1]
    f = theta - fit
    norm = max(total, MIN_AMPLITUDE)
    c1 = math.cos(e.phi[0])
    w = e.omega
    nu_phase, eta = g.nu_phase * w, g.eta * w
    for i in range(HARMONICS):
        s, c = math.sin(e.phi[i]), math.cos(e.phi[i])
        e.phi[i] = (e.phi[i] + dt * ((i + 1) * w + nu_phase * f * c / norm)) % TWO_PI
        e.alpha[i + 1] = max(0.0, e.alpha[i + 1] + dt * eta * f * s)
    e.alpha[0] += dt * eta * f
    e.omega = min(max(w + dt * g.nu_freq * w * w * f * c1 / norm, g.omega_min), g.omega_max)
    # the hip's speed: walking or standing
    e.speed2 += dt / g.speed_tau * (qd[j] * qd[j] - e.speed2)
    x = (math.sqrt(e.speed2) - g.still_speed) / (g.walk_speed - g.still_speed)
    x = min(max(x, 0.0), 1.0)
    e.walking = x * x * (3.0 - 2.0 * x)
    # the heel strike: where φ₁ is now is the offset, the time since the last one a stride
    # (or two, one missed): both learned by a fraction; one within REFRACTORY strides of the
    # last is that foot landing again (a foot bouncing on the floor), not a stride
    if e.since_heel >= 0.0:
        e.since_heel += dt
    if heel > 0.5 and not 0.0 <= e.since_heel * e.omega < REFRACTORY * TWO_PI:
        e.target = (e.target + g.heel_gain * _wrap_pi(e.phi[0] - e.target)) % TWO_PI
        _stride_time(g, e)
        e.heels += 1.0
        e.since_heel = 0.0
    step = _wrap_pi(e.target - e.offset)
    step = min(max(step, -g.slew), g.slew)
    e.offset = (e.offset + step) % TWO_PI
    before = e.phase
    e.phase = ((e.phi[0] - e.offset) / TWO_PI) % 1.0
    e.wrapped = 0.0
    if before - e.phase > 0.5:  # from the stride's end to its start
        e.wrapped = 1.0
        e.strides += 1.0


@njit(cache=True, inline="always")
def joint_phase(st, p, offsets, j):
    """The gait phase (strides, [0, 1)) of joint ``j``: the estimate's, shifted by the
    difference of the joints' phase offsets (strides, added to the stride's phase as the
    reference adds them: the right leg's half a stride) between ``j`` and the followed hip."""
    return (st[0].phase - offsets[p[0].joint] + offsets[j]) % 1.0
