"""Control laws as njit functions on preallocated arrays (docs/config-controller.md).

Every law maps (state, reference, gains, workspace) → joint torque τ (N·m, ordered as
``mech.joint_names``), then :func:`torque_to_current` — the one place where torque becomes
motor current — goes through the transmission and the torque constant and clamps the current.
The dynamics come from the controller's rigid model (exoskeleton + wearer + rotors;
Hidalgo & Rocón eqs. 23–27), called inside njit: no Python between the law and the kernels.

The built-in laws, each registered by name in :mod:`exo_rt.control.registry` (codes ``LAW_*``,
the order they register in); :func:`law_torque` calls the one a controller names, compiled
(:func:`exo_rt.control.registry.function`: the cycle model's ``torque``), and clamps its torque:
- PID: derivative on the measurement (filtered velocity, no derivative kick), integral with
  clamping anti-windup, output limit.
- model-based PID: PID + g(q) + wave-generator friction compensation (+ M(q) q̈_d if enabled).
- computed torque: τ = M(q)(q̈_d + K_d ė + K_p e + K_i ∫e) + h(q, q̇) (+ friction).
- the model-based tracking laws (model PID, computed torque, sliding mode) add, where the
  controller file asks (``stance_load``), the stance leg's load: −J_a(q)ᵀ f, the vertical
  force each foot carries from the board's sole sensors at the ankle (:func:`stance_load`).
- sliding mode (Coutinho 2015): s = ė + Λe, τ = M(q)(q̈_d + Λė) + h(q, q̇) + K_s s + K·sat(s/Φ);
  the boundary layer Φ removes chattering, K covers the parameter error.
- transparent / assist: the exoskeleton's own inverse dynamics along the motion (its gravity,
  link and reflected rotor inertia) + friction compensation + an assistance torque.
- passive: zero current.
- phase_profile, impedance, assist_as_needed (docs/assistance.md): the exoskeleton carries its
  own gravity and velocity forces, and adds, scaled by the wearer's assistance level, a torque
  profile over the estimated gait phase (:mod:`exo_rt.control.phase_estimate`; faded out when
  the wearer stands still), a spring and damper per phase of the stride, or a spring towards
  the reference outside a free tunnel.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.control import phase_estimate, registry
from exo_rt.dynamics import kernels
from exo_rt.jit import njit

LAW_PASSIVE = 0
LAW_PID = 1
LAW_MODEL_PID = 2
LAW_COMPUTED_TORQUE = 3
LAW_SLIDING_MODE = 4
LAW_TRANSPARENT = 5
LAWS = registry.NAMES  # every registered law's name (exo_rt.control.registry)

# the records a law reads by field name — options, gains per joint, the law's state per
# joint — are declared with the laws' signature (exo_rt.control.registry)
OPTIONS, GAINS, STATE = registry.OPTIONS, registry.GAINS, registry.STATE

# --- transmission data for torque → current, one record per joint, read by field name
TRANSMISSION = np.dtype([
    ("multiplier", "f8"),  # k: z_rotor = k·q (0: the joint has no motor)
    ("kt", "f8"),  # N·m/A: the motor's torque constant k_M
    ("motor_sign", "f8"),  # ±1: the motor's sense against the joint's
    ("coulomb", "f8"),  # N·m at the wave generator
    ("viscous", "f8"),  # N·m·s/rad at the wave generator
    ("load_friction", "f8"),  # μ: mesh friction per N·m the flexspline carries
    ("ratio", "f8"),  # N: the gear's reduction
    ("current_limit", "f8"),  # A: the configured current limit (≤ the drive's peak)
    ("sign_width", "f8"),  # rad/s at the rotor: width of the smooth sign of the compensation
    ("rotor_inertia", "f8"),  # kg·m²: the rotor's inertia at the joint, k²·I_rotor (its
    #                           torque never loads the gear)
])

@njit(cache=True)
def torque_to_current(tau, qd, qdd, transmissions, friction_comp, current):
    """Motor currents (A) for joint torques τ, through transmission, friction and k_M.

    ``transmissions``: one :data:`TRANSMISSION` record per joint. The rotor must give τ/k
    (generalized force of the rotor on the joint is k·τ_rotor), plus what its friction takes:
    sgn(ω)(T_c + μ|T|/N) + B·ω at ω = k·q̇ (sgn smoothed over ``sign_width`` so the
    compensation does not chatter at rest). ``qd`` is the speed the friction is compensated
    along (:func:`friction_speed`; the bench's identification loop gives the measured one).
    The mesh friction grows with the torque T the flexspline carries — τ less the rotor's own
    inertial share k²·I_rotor·q̈ (``qdd``: the acceleration τ is meant to give, e.g. the
    reference's), which never passes the gear. Currents are clamped to ±``current_limit`` —
    and again in the frame encoder, the last line.
    """
    for j in range(tau.shape[0]):
        tr = transmissions[j]
        k = tr.multiplier
        if k == 0.0:
            current[j] = 0.0
            continue
        t_rotor = tau[j] / k
        if friction_comp:
            w = k * qd[j]
            sgn = math.tanh(w / tr.sign_width)
            load = tau[j] - tr.rotor_inertia * qdd[j]
            t_rotor += sgn * (tr.coulomb + tr.load_friction * abs(load) / tr.ratio)
            t_rotor += tr.viscous * w
        i = t_rotor / (tr.motor_sign * tr.kt)
        lim = tr.current_limit
        current[j] = min(max(i, -lim), lim)


@njit(cache=True, inline="always")  # a few operations: compiled into its caller
def friction_speed(opts, qd, qdr):
    """The joint speeds (rad/s) friction is compensated along: a tracking law's reference
    (a joint that sticks reads zero speed, and compensating on that leaves the loop hunting in
    a stick–slip band ∝ 1/K_p); the measured ones where the wearer leads the motion (a law
    registered ``follows_wearer``: transparent, the assistance laws), so that the
    compensation never pulls the leg along the reference."""
    return qd if opts[0].follows_wearer else qdr


@njit(cache=True, inline="always")
def friction_acceleration(opts, qddr, scratch):
    """The joint accelerations (rad/s²) whose rotor inertia torque is taken out of the load
    the mesh friction grows with: the reference's for a law registered to feed it forward
    (``feeds_acceleration``: the tracking laws, transparent); none (a zero row of the law's
    ``scratch``, its last) for the others — the assistance laws: the wearer leads, their
    acceleration is not the reference's, and no inertia is fed forward."""
    if opts[0].feeds_acceleration:
        return qddr
    zero = scratch[scratch.shape[0] - 1]
    for j in range(zero.shape[0]):
        zero[j] = 0.0
    return zero


@njit(cache=True, python=False)
def _integrate(m, d):
    """∫e dt with clamping anti-windup: frozen while the output saturates (unless e unwinds
    it), and bounded so that K_i·∫e stays within the gains' ``i_limit``."""
    gains, law_state, q, qr, dt = m.gains, d.law_state, d.q, d.qr, m.dt
    saturated = d.scratch[q.shape[0] + 2]
    for j in range(q.shape[0]):
        e = qr[j] - q[j]
        st = law_state[j]
        if not saturated[j] > 0.5 or st.integral * e < 0.0:
            st.integral += e * dt
        ki = gains[j].ki
        if ki > 0.0:
            imax = gains[j].i_limit / ki
            st.integral = min(max(st.integral, -imax), imax)


@njit(cache=True)
def _pid(m, d):
    """PID with the derivative on the measurement (filtered velocity: no derivative kick)."""
    _integrate(m, d)
    gains, law_state, q, qd, qr, qdr, tau = m.gains, d.law_state, d.q, d.qd, d.qr, d.qdr, d.tau
    for j in range(q.shape[0]):
        g = gains[j]
        tau[j] = (g.kp * (qr[j] - q[j]) + g.ki * law_state[j].integral
                  + g.kd * (qdr[j] - qd[j]))


@njit(cache=True)
def stance_load(m, d):
    """The stance-load feedforward, τ −= J_a(q)ᵀ f per leg of ``m.stance`` (none: nothing):
    the controller's model is the leg hanging from a fixed pelvis, and the floor's push on a
    stance foot is an external force on it, M q̈ + h = τ + J_aᵀ f — so the torque that keeps
    the model's motion under that force is ID(q, q̇, q̈) − J_aᵀ f. f = F·up is the vertical
    force the foot carries (``d.load``, N: the board's sole sensor, filtered and clamped by
    the cycle, 0 when stale), applied at the ankle joint's centre (the orthosis hinge carries
    it to the shank; J_a the ankle point's linear Jacobian in the model's base frame, the
    pelvis). Taken upright: ``up`` is the model's −gravity direction, the pelvis's pitch is
    not measured. The floor's horizontal force and the ankle's moment are not measured and
    not fed forward."""
    st, at, tau, jac = m.stance, m.stance_at, d.tau, d.jac
    for r in range(st.shape[0]):
        f = d.load[r]
        if f == 0.0:
            continue
        rec = st[r]
        kernels.point_jacobian(m.model, d.data, d.q, rec.body, at[r], jac)
        fx, fy, fz = f * rec.up_x, f * rec.up_y, f * rec.up_z
        for j in range(tau.shape[0]):
            tau[j] -= jac[0, j] * fx + jac[1, j] * fy + jac[2, j] * fz


# ---------------------------------------------------------------- the built-in laws
# (registered in this order: their codes are the LAW_* constants above)
@registry.law("passive", doc="zero torque: the drives carry no current")
def passive(m, d):
    for j in range(d.tau.shape[0]):
        d.tau[j] = 0.0


@registry.law("pid", doc="PID, derivative on the measurement, clamping anti-windup")
def pid(m, d):
    _pid(m, d)


@registry.law("model_pid", doc="PID + gravity g(q) (+ M(q) q̈_d with inertia_feedforward)",
              carries_stance=True)
def model_pid(m, d):
    tau, q = d.tau, d.q
    n = q.shape[0]
    _pid(m, d)
    h = d.scratch[n]
    kernels.gravity_forces(m.model, d.data, q, h)
    for j in range(n):
        tau[j] += h[j]
    if m.opts[0].inertia_feedforward:
        mass = d.scratch[:n]
        kernels.mass_matrix(m.model, d.data, q, mass)
        for j in range(n):
            for k in range(n):
                tau[j] += mass[j, k] * d.qddr[k]
    stance_load(m, d)


@registry.law("computed_torque", doc="τ = M(q)(q̈_d + K_d ė + K_p e + K_i∫e) + h(q, q̇)",
              carries_stance=True)
def computed_torque(m, d):
    q, qd, qr, qdr, qddr = d.q, d.qd, d.qr, d.qdr, d.qddr
    n = q.shape[0]
    _integrate(m, d)
    acc = d.scratch[n + 1]
    for j in range(n):
        g = m.gains[j]
        e = qr[j] - q[j]
        acc[j] = (qddr[j] + g.kd * (qdr[j] - qd[j]) + g.kp * e
                  + g.ki * d.law_state[j].integral)
    kernels.inverse_dynamics(m.model, d.data, q, qd, acc, d.tau)
    stance_load(m, d)


@registry.law("sliding_mode", doc="s = ė + Λe; τ = M(q)(q̈_d + Λė) + h + K_s s + K sat(s/Φ)",
              carries_stance=True)
def sliding_mode(m, d):
    q, qd, qr, qdr, tau = d.q, d.qd, d.qr, d.qdr, d.tau
    n = q.shape[0]
    acc = d.scratch[n + 1]
    for j in range(n):
        acc[j] = d.qddr[j] + m.gains[j].lam * (qdr[j] - qd[j])
    kernels.inverse_dynamics(m.model, d.data, q, qd, acc, tau)
    for j in range(n):
        g = m.gains[j]
        s = (qdr[j] - qd[j]) + g.lam * (qr[j] - q[j])
        sat_s = min(max(s / g.boundary, -1.0), 1.0)
        tau[j] += g.k_s * s + g.k_switch * sat_s
    stance_load(m, d)


@registry.law("transparent", doc="the exoskeleton's own inverse dynamics + assistance",
              follows_wearer=True, feeds_acceleration=True)
def transparent(m, d):
    n = d.q.shape[0]
    acc = d.scratch[n + 1]
    for j in range(n):
        acc[j] = d.qddr[j]
    kernels.inverse_dynamics(m.model_exo, d.data_exo, d.q, d.qd, acc, d.tau)
    for j in range(n):
        d.tau[j] += m.gains[j].assist * d.assist[j]


@njit(cache=True, inline="always")
def _carry_itself(m, d):
    """The exoskeleton carries itself: its own gravity and velocity forces at the measured
    state, h_exo(q, q̇) (its inertia is not compensated: the wearer's acceleration is not
    measured well enough to feed it forward). The drives' friction is compensated along the
    measured speed after the law (the assistance laws follow the wearer)."""
    n = d.q.shape[0]
    zero = d.scratch[n + 1]
    for j in range(n):
        zero[j] = 0.0
    kernels.inverse_dynamics(m.model_exo, d.data_exo, d.q, d.qd, zero, d.tau)


@njit(cache=True, inline="always")
def _smooth(x):
    """3x² − 2x³ on [0, 1]: 0 → 1 with zero slope at both ends."""
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


@njit(cache=True, inline="always")
def _lobe(phase, onset, peak, end):
    """A lobe of the stride (0 … 1 … 0) at ``phase`` (strides): a cubic rise from ``onset``
    to ``peak``, a cubic fall to ``end`` (fractions of the stride; a lobe may wrap past the
    stride's end)."""
    rise = (peak - onset) % 1.0
    fall = (end - peak) % 1.0
    u = (phase - onset) % 1.0
    if u < rise:
        return _smooth(u / rise)
    if u < rise + fall:
        return 1.0 - _smooth((u - rise) / fall)
    return 0.0


@njit(cache=True)
def profile_torque(g, phase):
    """The phase_profile's torque (N·m) of a joint's gains ``g`` at its gait ``phase``: the sum
    of its lobes, each 0 where its torque is 0."""
    tau = 0.0
    if g.peak_torque != 0.0:
        tau += g.peak_torque * _lobe(phase, g.onset, g.peak, g.end)
    if g.peak_torque_2 != 0.0:
        tau += g.peak_torque_2 * _lobe(phase, g.onset_2, g.peak_2, g.end_2)
    return tau


@registry.law("phase_profile", doc="the exoskeleton carries itself + a torque profile over "
              "the wearer's estimated gait phase", follows_wearer=True)
def phase_profile(m, d):
    _carry_itself(m, d)
    est = d.gait[0]
    for j in range(d.tau.shape[0]):
        phase = phase_estimate.joint_phase(d.gait, m.gp, d.offsets, j)
        d.tau[j] += d.level[j] * est.walking * profile_torque(m.gains[j], phase)


@registry.law("impedance", doc="the exoskeleton carries itself + a spring and damper per "
              "phase of the stride (stance, swing)", follows_wearer=True)
def impedance(m, d):
    _carry_itself(m, d)
    walking = d.gait[0].walking
    for j in range(d.tau.shape[0]):
        g = m.gains[j]
        phase = phase_estimate.joint_phase(d.gait, m.gp, d.offsets, j)
        swing = walking * _swing(phase, g.stance_end)
        k = g.stiffness + swing * (g.swing_stiffness - g.stiffness)
        b = g.damping + swing * (g.swing_damping - g.damping)
        eq = g.equilibrium + swing * (g.swing_equilibrium - g.equilibrium)
        d.tau[j] += d.level[j] * (k * (eq - d.q[j]) - b * d.qd[j])


SWING_BLEND = 0.04  # strides: stance ↔ swing blend (the spring never steps)


@njit(cache=True, inline="always")
def _swing(phase, stance_end):
    """0 in stance, 1 in swing (from ``stance_end`` to the stride's end), blended over
    :data:`SWING_BLEND` at both boundaries."""
    h = 0.5 * SWING_BLEND
    if phase < 0.5 * stance_end:
        return 1.0 - _smooth((phase + h) / SWING_BLEND)  # (the swing's end, at the wrap)
    if phase > 1.0 - h:
        return 1.0 - _smooth((phase - 1.0 + h) / SWING_BLEND)
    return _smooth((phase - stance_end + h) / SWING_BLEND)


TUNNEL_EDGE = 0.01  # rad: the restoring damper's engagement, past the tunnel's edge


@registry.law("assist_as_needed", doc="the exoskeleton carries itself + a spring and damper "
              "towards the reference outside a free tunnel", follows_wearer=True)
def assist_as_needed(m, d):
    _carry_itself(m, d)
    for j in range(d.tau.shape[0]):
        g = m.gains[j]
        e = d.qr[j] - d.q[j]
        out = abs(e) - g.tunnel
        if out > 0.0:  # a spring on the excursion past the edge, and a damper on the error's
            # rate that engages over TUNNEL_EDGE (no torque step at the edge), both limited
            engaged = min(out / TUNNEL_EDGE, 1.0)
            push = math.copysign(g.stiffness * out, e) + engaged * g.damping * (
                d.qdr[j] - d.qd[j])
            push = min(max(push, -g.assist_limit), g.assist_limit)
            d.tau[j] += d.level[j] * push


if [registry.code(n) for n in ("passive", "pid", "model_pid", "computed_torque", "sliding_mode",
                                "transparent")] != list(range(6)):  # the LAW_* constants
    raise RuntimeError("the built-in control laws registered out of order")


@njit(cache=True)
def law_torque(law, m, d):
    """Joint torques (N·m) into ``d.tau`` of ``law`` (compiled:
    :func:`exo_rt.control.registry.function`), clamped to each joint's torque limit; the clamp
    is remembered in ``d.scratch``'s row n + 2 for the anti-windup."""
    law(m, d)
    tau = d.tau
    saturated = d.scratch[tau.shape[0] + 2]
    for j in range(tau.shape[0]):
        lim = m.gains[j].torque_limit
        clamped = min(max(tau[j], -lim), lim)
        saturated[j] = 1.0 if clamped != tau[j] else 0.0
        tau[j] = clamped


def law_scratch(n: int) -> np.ndarray:
    """Scratch array for :func:`law_torque` (n joints)."""
    return np.zeros((n + 4, n))


def law_state(n: int) -> np.ndarray:
    """The law's state for n joints (:data:`STATE` records, zero)."""
    return np.zeros(n, STATE)
