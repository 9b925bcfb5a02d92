"""The wearer's gait phase, estimated in the cycle from one hip angle and the heel strikes
(docs/assistance.md).

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
crosses zero, not the heel strike. The oscillator's phase is φ₁ less an offset: at first that of the
normal gait's hip curve (φ₁ at its heel strike), then learned from the heel strikes the
embedded board reports (each moves the target offset by a fraction ``heel_gain`` of what it
finds; a missed strike changes nothing). The applied offset slews towards the target by at most
``slew`` rad a cycle, so that phase never jumps: its step at the stride's wrap stays within
a cycle's advance plus ``slew``.

**The heel strikes lead where the oscillator misses them** (the stride's clock): the phase
the laws read is then a clock that runs at 1/T strides a second, T the stride time measured
between this walk's heel strikes, and is set back to 0 at each strike — the way a foot
switch times the gait (the heel strike is the stride's start by definition). The oscillator
alone cannot do it on a gait unlike the one it starts from: on the floor's flat-foot walk
(five strides from standing) its phase wandered by 20–26 % of the stride between strikes,
by 17 % even with ω held at the walk's. The clock's rules, for strikes that are a real foot's:

- *a refractory time*: a strike within :data:`REFRACTORY` of T after the last is the foot
  landing again (a bounce), no stride, and ignored (a reload later in the stance is the
  board detector's to reject: a rise after a short release is no landing);
- *a stride time only from strides*: an interval more than :data:`PULL_IN` from T is taken
  only when the next one agrees with it (a new cadence; the first interval of a walk from
  standing is its shorter opening step, which the next does not confirm; two strides with a
  strike missed between them are not confirmed either), and the clock runs on through a
  missed strike;
- *re-seeded at each walk*: while the wearer stands (``walking`` below :data:`STILL`) T goes
  back to the session's stride (``omega0``) and the clock to the oscillator;
- *no jumps*: a strike's correction is applied over the next cycles, the phase running at
  most 1 + :data:`CATCH_UP` times the stride's rate and never backwards (it halts);
- *the oscillator where it agrees*: where its phase was within :data:`LOCKED` of the last
  :data:`AGREED` strikes (the walker of docs/assistance.md, a gait like the normal one: there
  it is the better estimate between strikes and through a change of cadence), before a
  walk's first strike, and once :data:`FALLBACK` strides pass without one (strikes no longer
  reported), the phase is the oscillator's (reached at most ``slew`` rad a cycle away from
  the clock's); a strike it misses by more than LOCKED gives the phase to the clock.

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
STILL = 0.01  # `walking` below this: the wearer stands, and the next walk starts afresh
CATCH_UP = 2.0  # a strike's correction: at most this many times 1/T added to the phase's rate
FALLBACK = 2.5  # strides without a heel strike: the clock follows the oscillator again
LOCKED = 0.1  # strides: the oscillator's phase this near a heel strike agrees with it
AGREED = 2  # strikes in a row the oscillator agreed with: it leads again
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
    ("phase", "f8"),  # out: gait phase, strides in [0, 1) (0: the heel strike; the clock's)
    ("wrapped", "f8"),  # out: 1 in the cycle the phase passed a stride boundary
    ("speed2", "f8"),  # rad²/s²: the hip's mean square speed
    ("walking", "f8"),  # out: 0 (still) … 1 (walking)
    ("strides", "f8"),  # out: stride boundaries passed
    ("heels", "f8"),  # heel strikes used
    ("since_heel", "f8"),  # s since the last heel strike (−1: none yet)
    ("osc", "f8"),  # the oscillator's phase, strides in [0, 1) (the clock's fallback)
    ("period", "f8"),  # s: the stride time T from this walk's heel strikes
    ("pending", "f8"),  # strides: the last strike's correction of the phase not applied yet
    ("walk_heels", "f8"),  # heel strikes taken in this walk (0: the oscillator leads)
    ("candidate", "f8"),  # s: the last interval (a new cadence if the next agrees)
    ("agree", "f8"),  # heel strikes in a row the oscillator's phase agreed with (LOCKED)
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
    e["osc"] = e["pending"] = e["walk_heels"] = e["candidate"] = 0.0
    e["period"] = TWO_PI / g["omega0"]
    e["agree"] = AGREED  # (the oscillator leads until a strike disagrees)


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
    # a wearer standing: the next walk starts from the session's stride and the oscillator
    if e.walking < STILL:
        e.period = TWO_PI / g.omega0
        e.walk_heels = e.candidate = 0.0
        e.agree = AGREED
    # the heel strike: where φ₁ is now is the oscillator's offset (a fraction learned, its
    # frequency pulled in), the time since the last one the clock's stride; one within
    # REFRACTORY strides of the last is that foot landing again, not a stride
    if e.since_heel >= 0.0:
        e.since_heel += dt
    if heel > 0.5 and not 0.0 <= e.since_heel < REFRACTORY * e.period:
        if abs(_wrap_half((e.phi[0] - e.offset) / TWO_PI)) <= LOCKED:
            e.agree += 1.0
        else:
            e.agree = 0.0
        e.target = (e.target + g.heel_gain * _wrap_pi(e.phi[0] - e.target)) % TWO_PI
        _stride_time(g, e)
        if e.walk_heels >= 1.0:
            _stride_period(g, e, e.since_heel)
        e.walk_heels += 1.0
        e.heels += 1.0
        e.since_heel = 0.0
        e.pending = -_wrap_half(e.phase)  # the clock is 0 at a strike
    step = _wrap_pi(e.target - e.offset)
    step = min(max(step, -g.slew), g.slew)
    e.offset = (e.offset + step) % TWO_PI
    e.osc = ((e.phi[0] - e.offset) / TWO_PI) % 1.0
    # the phase: the oscillator's where it agrees with the strikes or has none, else the clock
    before = e.phase
    if e.agree >= AGREED or e.walk_heels < 1.0 or e.since_heel > FALLBACK * e.period:
        advance = e.omega / TWO_PI * dt
        fix = _wrap_half(e.osc - e.phase) - advance
        most = g.slew / TWO_PI
        if abs(fix) <= most:
            e.phase = e.osc  # (followed: the oscillator's phase itself)
        else:
            e.phase = (e.phase + advance + min(max(fix, -most), most)) % 1.0
        e.pending = 0.0
    else:
        rate = 1.0 / e.period
        fix = min(max(e.pending, -rate * dt), CATCH_UP * rate * dt)  # never backwards
        e.pending -= fix
        e.phase = (e.phase + rate * dt + fix) % 1.0
    e.wrapped = 0.0
    if before - e.phase > 0.5:  # from the stride's end to its start
        e.wrapped = 1.0
        e.strides += 1.0


@njit(cache=True, inline="always")
def _wrap_half(x):
    """x (strides) in [−0.5, 0.5)."""
    return x - math.floor(x + 0.5)


@njit(cache=True, inline="always")
def _stride_period(g, e, interval):
    """The clock's stride time T from the ``interval`` (s) between two heel strikes of a walk:
    within PULL_IN of T it moves T by ``heel_gain`` of the difference; farther it is taken
    only when the interval before agrees with it within PULL_IN (a new cadence, T their
    mean). A single odd interval moves nothing: a walk's opening step, or two strides with a
    strike missed between them (halving such an interval would take a wearer slowing to
    twice their stride for one at the old stride who missed every other strike)."""
    if abs(math.log(interval / e.period)) <= PULL_IN:
        e.period += g.heel_gain * (interval - e.period)
    elif e.candidate > 0.0 and abs(math.log(interval / e.candidate)) <= PULL_IN:
        e.period = 0.5 * (interval + e.candidate)
    e.period = min(max(e.period, TWO_PI / g.omega_max), TWO_PI / g.omega_min)
    e.candidate = interval


@njit(cache=True, inline="always")
def joint_phase(st, p, offsets, j):
    """The gait phase (strides, [0, 1)) of joint ``j``: the estimate's, shifted by the
    difference of the joints' phase offsets (strides, added to the stride's phase as the
    reference adds them: the right leg's half a stride) between ``j`` and the followed hip."""
    return (st[0].phase - offsets[p[0].joint] + offsets[j]) % 1.0
