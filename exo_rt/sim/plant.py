"""The plant: rigid-body dynamics of exoskeleton and wearer with compliant harmonic drives,
wave-generator friction and motor current loops, stepped entirely inside njit.

Model. The plant's mechanism is the robot's with every transmission's rotor released into an
independent coordinate (:func:`exo_rt.dynamics.couplings.released`; rotors follow the joints
in q, in the order of ``mech.transmissions``). Its equations of motion are

    M(q) q̈ = Q_drive(q, i, T_h) + Q_friction(q̇) + Q_ext − h(q, q̇)

with the flexspline and motor forces of :mod:`exo_rt.actuators.harmonic_drive` and
:mod:`exo_rt.actuators.motor`. Inputs are the motor current commands (A, per transmission).

Integration. One :func:`plant_step` advances one control period dt in ``substeps`` equal
sub-steps of classical RK4 (4 evaluations of M, h, the drive forces and a Cholesky solve
each). The plant is mildly stiff, and three time scales set the sub-step (default leg):

- flexspline torsion, ω ≈ √(K·(1/J_r N² + 1/J_link)) ≈ 260–350 rad/s (K1…K3): at 0.1 ms
  ω·h ≈ 0.035, far inside RK4's stability limit (ω·h < 2.8) — 1 sub-step would be stable;
- the Stribeck band: a rotor crosses it in J_r·ω_s/(T_s − T_c) ≈ 0.37 ms. With fewer than
  ~3 sub-steps per crossing the friction is under-resolved near zero speed, a stick decision
  can flip, and the motion branches off. Measured, largest joint-angle error over 1 s of hard
  driving against 200 sub-steps: the test leg (tests/exo_fixtures.py) ≈ 0.1° at 3–5
  sub-steps, ≤ 0.006° from 7, 0.004° at 10; the shipped exo_leg 0.023° at 3, 0.009° at 5,
  0.003° at 10 (``tools/bench_plant.py``);
- the current loop, ω_c = 2π·1 kHz: integrated exactly, no constraint.

:data:`SUBSTEPS` = 10 (0.1 ms) keeps ~3.7 sub-steps across the Stribeck band. A robot with a
lighter rotor, a narrower Stribeck band or a kinematic error excited at high rotor speed
(2n·ω_r·h ≲ 0.3) needs more. Within a sub-step the stick set and every friction direction
are held; they change between sub-steps:

- current loop: the exact first-order response at each RK4 stage's time, to a target that
  follows the supply's voltage limit at the rotor speed predicted over the sub-step;
- stick–slip (no chatter, no drift at rest): a rotor with dry friction that is at rest
  (|q̇_r| < :data:`REST_SPEED`) is *locked* — q̇_r = 0, q̈_r = 0, and the free coordinates solve
  M_ff a_f = τ_f − h_f. The friction torque this needs is the locked row's reaction
  (M a + h − Q)_r; while |reaction| ≤ breakaway (T_s + μ|T|/N) the rotor stays locked,
  exactly. Otherwise the most overloaded rotor is released (sliding, against kinetic friction,
  the way the unbalanced torque pushes it) and the others are re-checked. A sliding rotor
  whose velocity reverses within a sub-step is stopped at the (linearly located) crossing and
  locked there, and the sub-step continues from that instant: no chatter around ω = 0;
- hysteresis: Dahl's state advanced exactly over the sub-step's twist increment;
- a coordinate can also be locked by the user (an output clamped on a test bench).

Layout (arrays owned by :class:`Plant`, passed to njit code as they are):
``tp`` one row per transmission (columns ``T_*``), ``st`` the state (rows ``S_*``),
``sc`` scratch (:func:`scratch_shape`), ``cmd`` the current commands.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from exo_rt.actuators.harmonic_drive import (
    D_WIDTH,
    breakaway,
    drive_row,
    has_dry_friction,
    hysteresis_update,
    kinematic_error,
    sliding_friction,
    stiffness_energy,
    stiffness_torque,
    twist_for_torque,
)
from exo_rt.actuators.motor import (
    M_BANDWIDTH,
    M_BRAKE,
    M_WIDTH,
    current_target,
    motor_row,
    motor_torque,
)
from exo_rt.dynamics import kernels
from exo_rt.dynamics.couplings import released
from exo_rt.model.mechanism import Mechanism

SUBSTEPS = 10  # default RK4 sub-steps per 1 ms period (see the module docstring)
REST_SPEED = 1e-9  # rad/s at the rotor: slower than this counts as at rest (a stick candidate)
MIN_SPLIT = 1e-3  # a reversal closer than this fraction of a sub-step to its start is not split

# --- columns of a transmission row of the plant
T_JOINT = 0  # index of the output joint in the plant's q
T_ROTOR = 1  # index of the rotor in the plant's q
T_K = 2  # multiplier k (z_rotor = k·q_joint when rigid; −N)
T_DRIVE = 3  # the drive's parameter row (harmonic_drive.D_*)
T_MOTOR = T_DRIVE + D_WIDTH  # the motor's parameter row (motor.M_*)
T_WIDTH = T_MOTOR + M_WIDTH

# --- state rows: per coordinate (st[row, i]) …
ST_Q, ST_V = 0, 1  # position (rad or m), velocity
ST_LOCK = 2  # 1.0: held by the user (an output on a test bench)
# … per transmission (st[row, t]) …
ST_I = 3  # actual motor current (A)
ST_TH = 4  # hysteresis torque T_h (N·m at the output)
ST_STUCK = 5  # 1.0: the rotor is held by static friction
ST_DIR = 6  # ±1: direction of a sliding rotor (its friction opposes it), held over a sub-step
ST_ON = 7  # 1.0: the drive's power stage is on; 0.0: off (no current)
# … per coordinate again
ST_EXT = 8  # external generalized force (N·m or N), e.g. the wearer's muscles
ST_ROWS = 9

# --- scratch rows: the mass matrix (n rows), its free block (n rows), then vectors
X_H, X_F, X_RHS, X_X, X_FREE, X_LOCKED = 0, 1, 2, 3, 4, 5
X_Q0, X_V0, X_QS, X_VS, X_V2, X_V3 = 6, 7, 8, 9, 10, 11
X_A1, X_A2, X_A3, X_A4 = 12, 13, 14, 15
X_T, X_TW = 16, 17  # per transmission: transmitted torque T, twist at the sub-step's start
X_I0, X_IT, X_IS = 18, 19, 20  # per transmission: current at the step's start, target, slope
X_ROWS = 21


def plant_arrays(mech: Mechanism, *, friction: bool = True, hysteresis: bool = True):
    """(plant mechanism, transmission rows ``tp``) for a robot with transmissions."""
    plant = released(mech)
    rows = np.zeros((len(mech.transmissions), T_WIDTH))
    for n, tr in enumerate(mech.transmissions):
        rows[n, T_JOINT] = plant.joint_names.index(tr.joint)
        rows[n, T_ROTOR] = plant.joint_names.index(tr.rotor_joint)
        rows[n, T_K] = tr.multiplier
        rows[n, T_DRIVE:T_MOTOR] = drive_row(tr.drive, friction=friction, hysteresis=hysteresis)
        rows[n, T_MOTOR:] = motor_row(tr.motor, tr.motor_sign)
    return plant, rows


def scratch_shape(n: int) -> tuple[int, int]:
    """Shape of the plant's scratch array for n plant coordinates (n ≥ transmissions)."""
    return (2 * n + X_ROWS, max(n, 1))


# ------------------------------------------------------------------ forces of drives and motors
@njit(cache=True)
def twist(tp, t, q):
    """(Δ, −∂Δ/∂q_r) of transmission t: Δ = q_j − q_r/k − e(q_r) (rad), −∂Δ/∂q_r = 1/k + e'."""
    k = tp[t, T_K]
    r = int(tp[t, T_ROTOR])
    e, de = kinematic_error(q[r], tp[t, T_DRIVE:T_MOTOR])
    return q[int(tp[t, T_JOINT])] - q[r] / k - e, 1.0 / k + de


@njit(cache=True)
def _forces(tp, st, q, v, tq, out):
    """Generalized forces (N·m) of flexsplines, motors, sliding WG friction and ST_EXT.

    Q_j −= T, Q_r += T·(1/k + e') + motor_sign·k_M·i (+ friction if sliding); the
    transmitted torques T go to tq[t].
    """
    for i in range(out.shape[0]):
        out[i] = st[ST_EXT, i]
    for t in range(tp.shape[0]):
        j = int(tp[t, T_JOINT])
        r = int(tp[t, T_ROTOR])
        d = tp[t, T_DRIVE:T_MOTOR]
        delta, dq = twist(tp, t, q)
        torque = stiffness_torque(delta, d) + st[ST_TH, t]
        tq[t] = torque
        out[j] -= torque
        out[r] += torque * dq + motor_torque(st[ST_I, t], tp[t, T_MOTOR:])
        if st[ST_STUCK, t] < 0.5:
            out[r] += sliding_friction(v[r], st[ST_DIR, t], torque, d)
            out[r] -= _brake(tp, st, t) * st[ST_DIR, t]  # a slipping brake drags


@njit(cache=True)
def _brake(tp, st, t):
    """The power-off brake's torque (N·m at the rotor) on transmission t: its holding torque
    while the drive's power stage is off, else 0 (released)."""
    return tp[t, T_MOTOR + M_BRAKE] if st[ST_ON, t] < 0.5 else 0.0


@njit(cache=True)
def _lock_mask(tp, st, n, mask):
    """mask[i] = 1.0 for the coordinates held this sub-step (user locks and stuck rotors)."""
    for i in range(n):
        mask[i] = 1.0 if st[ST_LOCK, i] > 0.5 else 0.0
    for t in range(tp.shape[0]):
        if st[ST_STUCK, t] > 0.5:
            mask[int(tp[t, T_ROTOR])] = 1.0


# ------------------------------------------------------------------ dynamics with locks
@njit(cache=True)
def _accelerations(pk, ws, tp, st, q, v, sc, acc):
    """q̈ with the locked coordinates held (q̈ = 0 there): M_ff a_f = Q_f − h_f.

    Leaves M (rows 0…n−1 of sc), h (X_H) and Q (X_F) for :func:`_reaction`.
    """
    n = q.shape[0]
    x0 = 2 * n
    m = sc[:n]
    mff = sc[n:x0]
    h, f, rhs, x = sc[x0 + X_H], sc[x0 + X_F], sc[x0 + X_RHS], sc[x0 + X_X]
    free, mask = sc[x0 + X_FREE], sc[x0 + X_LOCKED]
    kernels.mass_matrix(pk, ws, q, m)
    kernels.bias_forces(pk, ws, q, v, h)
    _forces(tp, st, q, v, sc[x0 + X_T], f)
    nf = 0
    for i in range(n):
        acc[i] = 0.0
        if mask[i] < 0.5:
            free[nf] = i
            nf += 1
    if nf == 0:
        return
    for a in range(nf):
        ia = int(free[a])
        rhs[a] = f[ia] - h[ia]
        for b in range(nf):
            mff[a, b] = m[ia, int(free[b])]
    kernels.cholesky_solve(mff[:nf, :nf], rhs[:nf], x[:nf])
    for a in range(nf):
        acc[int(free[a])] = x[a]


@njit(cache=True)
def _reaction(sc, n, acc, r):
    """(M q̈ + h − Q)_r: the torque (N·m) a lock must supply on coordinate r."""
    x0 = 2 * n
    need = sc[x0 + X_H, r] - sc[x0 + X_F, r]
    for j in range(n):
        need += sc[r, j] * acc[j]
    return need


@njit(cache=True)
def _stick_or_slip(pk, ws, tp, st, q, v, sc, acc):
    """Decide which rotors stick this sub-step; leaves the stage-1 accelerations in acc.

    Rotors at rest become stick candidates (locked). Then, one at a time, the most overloaded
    locked rotor (|reaction| above breakaway) is released to slide the way the unbalanced
    torque pushes it, and the reactions are recomputed.
    """
    n = q.shape[0]
    x0 = 2 * n
    tq = sc[x0 + X_T]
    for t in range(tp.shape[0]):
        r = int(tp[t, T_ROTOR])
        if (st[ST_STUCK, t] < 0.5 and abs(v[r]) < REST_SPEED
                and (has_dry_friction(tp[t, T_DRIVE:T_MOTOR]) or _brake(tp, st, t) > 0.0)):
            st[ST_STUCK, t] = 1.0
            v[r] = 0.0
    _lock_mask(tp, st, n, sc[x0 + X_LOCKED])
    _accelerations(pk, ws, tp, st, q, v, sc, acc)
    for _ in range(tp.shape[0]):
        worst = -1
        excess = 0.0
        push = 0.0
        for t in range(tp.shape[0]):
            if st[ST_STUCK, t] < 0.5:
                continue
            need = _reaction(sc, n, acc, int(tp[t, T_ROTOR]))
            over = abs(need) - breakaway(tq[t], tp[t, T_DRIVE:T_MOTOR]) - _brake(tp, st, t)
            if over > excess:
                worst, excess, push = t, over, need
        if worst < 0:
            return
        st[ST_STUCK, worst] = 0.0
        st[ST_DIR, worst] = -1.0 if push > 0.0 else 1.0  # friction supplied +need: it moves −
        _lock_mask(tp, st, n, sc[x0 + X_LOCKED])
        _accelerations(pk, ws, tp, st, q, v, sc, acc)


@njit(cache=True)
def _rk4(pk, ws, tp, st, q, v, dt, sc):
    """One classical RK4 step on (q, v), the first stage already in X_A1; locks hold."""
    n = q.shape[0]
    x0 = 2 * n
    q0, v0, qs, vs = sc[x0 + X_Q0], sc[x0 + X_V0], sc[x0 + X_QS], sc[x0 + X_VS]
    v2, v3 = sc[x0 + X_V2], sc[x0 + X_V3]
    a1, a2, a3, a4 = sc[x0 + X_A1], sc[x0 + X_A2], sc[x0 + X_A3], sc[x0 + X_A4]
    mask = sc[x0 + X_LOCKED]
    _stage_currents(tp, st, sc, n, 0.5 * dt)
    for i in range(n):
        q0[i] = q[i]
        v0[i] = v[i]
        qs[i] = q0[i] + 0.5 * dt * v0[i]
        vs[i] = v0[i] + 0.5 * dt * a1[i]
        v2[i] = vs[i]
    _accelerations(pk, ws, tp, st, qs, vs, sc, a2)
    for i in range(n):
        qs[i] = q0[i] + 0.5 * dt * v2[i]
        vs[i] = v0[i] + 0.5 * dt * a2[i]
        v3[i] = vs[i]
    _accelerations(pk, ws, tp, st, qs, vs, sc, a3)
    for i in range(n):
        qs[i] = q0[i] + dt * v3[i]
        vs[i] = v0[i] + dt * a3[i]
    _stage_currents(tp, st, sc, n, dt)
    _accelerations(pk, ws, tp, st, qs, vs, sc, a4)
    for i in range(n):
        if mask[i] > 0.5:
            v[i] = 0.0
        else:
            q[i] = q0[i] + dt / 6.0 * (v0[i] + 2.0 * v2[i] + 2.0 * v3[i] + vs[i])
            v[i] = v0[i] + dt / 6.0 * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i])


# ------------------------------------------------------------------ one sub-step, one period
@njit(cache=True)
def _current_targets(tp, st, cmd, v, i0, target):
    """Start current and the value the loop tends to over this sub-step (A): the command within
    the drive's and the supply's limits at the rotor speed of the sub-step's start (0 if off)."""
    for t in range(tp.shape[0]):
        i0[t] = st[ST_I, t]
        if st[ST_ON, t] > 0.5:
            target[t] = current_target(cmd[t], v[int(tp[t, T_ROTOR])], tp[t, T_MOTOR:])
        else:  # the power stage is off: no current at once
            target[t] = 0.0
            i0[t] = 0.0
            st[ST_I, t] = 0.0


@njit(cache=True)
def _current_slopes(tp, st, cmd, v, acc, h, sc):
    """Rate (A/s) at which each target moves over the step: the voltage limit follows the rotor
    speed, predicted as ω_r + q̈_r·τ from the first stage."""
    x0 = 2 * v.shape[0]
    for t in range(tp.shape[0]):
        r = int(tp[t, T_ROTOR])
        end = 0.0
        if st[ST_ON, t] > 0.5:
            end = current_target(cmd[t], v[r] + acc[r] * h, tp[t, T_MOTOR:])
        sc[x0 + X_IS, t] = (end - sc[x0 + X_IT, t]) / h


@njit(cache=True)
def _stage_currents(tp, st, sc, n, tau):
    """Motor currents at time τ (s) into the step: the loop's exact response to a target
    i*(τ) = i*₀ + s·τ, i(τ) = i*(τ) − s/ω_c + (i₀ − i*₀ + s/ω_c)·exp(−ω_c τ) — every RK4
    stage sees the current of its own time."""
    x0 = 2 * n
    for t in range(tp.shape[0]):
        wc = tp[t, T_MOTOR + M_BANDWIDTH]
        i0, target, slope = sc[x0 + X_I0, t], sc[x0 + X_IT, t], sc[x0 + X_IS, t]
        lag = slope / wc
        st[ST_I, t] = target + slope * tau - lag + (i0 - target + lag) * math.exp(-wc * tau)


@njit(cache=True)
def _stop_reversals(tp, st, v):
    """A sliding rotor (with dry friction) whose velocity reversed stops and sticks."""
    for t in range(tp.shape[0]):
        r = int(tp[t, T_ROTOR])
        if (st[ST_STUCK, t] < 0.5 and v[r] * st[ST_DIR, t] < 0.0
                and has_dry_friction(tp[t, T_DRIVE:T_MOTOR])):
            v[r] = 0.0
            st[ST_STUCK, t] = 1.0


@njit(cache=True)
def _hysteresis(tp, st, q, tw0):
    """Dahl's hysteresis torque over the sub-step's twist increment."""
    for t in range(tp.shape[0]):
        delta, _ = twist(tp, t, q)
        st[ST_TH, t] = hysteresis_update(st[ST_TH, t], delta - tw0[t], tp[t, T_DRIVE:T_MOTOR])


@njit(cache=True)
def _first_reversal(tp, st, v0, v):
    """(θ, t): the earliest fraction θ of the last step at which a sliding rotor's velocity
    (linear between v0 and v) crossed zero against its direction, and which; (1.0, −1): none."""
    theta, first = 1.0, -1
    for t in range(tp.shape[0]):
        r = int(tp[t, T_ROTOR])
        s = st[ST_DIR, t]
        if (st[ST_STUCK, t] < 0.5 and v[r] * s < 0.0
                and has_dry_friction(tp[t, T_DRIVE:T_MOTOR])):
            a, b = v0[r] * s, v[r] * s
            th = a / (a - b) if a > 0.0 else 0.0
            if th < theta:
                theta, first = th, t
    return theta, first


@njit(cache=True)
def _begin(tp, st, cmd, q, v, sc):
    """Start of a (partial) sub-step: current targets, twists, sliding directions."""
    x0 = 2 * q.shape[0]
    _current_targets(tp, st, cmd, v, sc[x0 + X_I0], sc[x0 + X_IT])
    for t in range(tp.shape[0]):
        sc[x0 + X_TW, t], _ = twist(tp, t, q)
        r = int(tp[t, T_ROTOR])
        if st[ST_STUCK, t] < 0.5 and v[r] != 0.0:
            st[ST_DIR, t] = 1.0 if v[r] > 0.0 else -1.0


@njit(cache=True)
def _restore(tp, st, q, v, sc):
    """Back to the state at the start of the last RK4 step (positions, velocities, currents)."""
    x0 = 2 * q.shape[0]
    for i in range(q.shape[0]):
        q[i] = sc[x0 + X_Q0, i]
        v[i] = sc[x0 + X_V0, i]
    for t in range(tp.shape[0]):
        st[ST_I, t] = sc[x0 + X_I0, t]


@njit(cache=True)
def _substep(pk, ws, tp, st, cmd, q, v, h, sc):
    """Advance by h (s). A sliding rotor whose velocity reverses inside the step is stopped at
    the (linearly estimated) crossing and locked there; the step then continues from that
    instant with a fresh stick–slip decision — at most one split per transmission."""
    x0 = 2 * q.shape[0]
    left = h
    for split in range(tp.shape[0] + 1):
        _begin(tp, st, cmd, q, v, sc)
        _stick_or_slip(pk, ws, tp, st, q, v, sc, sc[x0 + X_A1])
        _current_slopes(tp, st, cmd, v, sc[x0 + X_A1], left, sc)
        _rk4(pk, ws, tp, st, q, v, left, sc)
        theta, first = _first_reversal(tp, st, sc[x0 + X_V0], v)
        if first < 0 or split == tp.shape[0] or theta * left < MIN_SPLIT * h:
            _stop_reversals(tp, st, v)
            _hysteresis(tp, st, q, sc[x0 + X_TW])
            return
        _restore(tp, st, q, v, sc)
        _rk4(pk, ws, tp, st, q, v, theta * left, sc)  # stage 1 and the stick set still hold
        v[int(tp[first, T_ROTOR])] = 0.0
        st[ST_STUCK, first] = 1.0
        _stop_reversals(tp, st, v)
        _hysteresis(tp, st, q, sc[x0 + X_TW])
        left -= theta * left


@njit(cache=True)
def plant_step(pk, ws, tp, st, cmd, dt, substeps, sc):
    """Advance the plant by dt (s) in ``substeps`` RK4 sub-steps; ``cmd``: current commands (A).

    Allocates nothing; every array is the caller's (see :class:`Plant` for their layout).
    """
    q = st[ST_Q]
    v = st[ST_V]
    h = dt / substeps
    for _ in range(substeps):
        _substep(pk, ws, tp, st, cmd, q, v, h, sc)


# ------------------------------------------------------------------ read-outs
@njit(cache=True)
def plant_run(pk, ws, tp, st, cmd, dt, substeps, sc, currents, log):
    """Step through ``currents`` (A; one row of motor commands per period) and log the first
    ``log.shape[1]`` coordinates (rad) after each period into ``log`` — a whole open-loop
    experiment inside njit, for benchmarks and sub-step studies (no allocation)."""
    for k in range(currents.shape[0]):
        for t in range(cmd.shape[0]):
            cmd[t] = currents[k, t]
        plant_step(pk, ws, tp, st, cmd, dt, substeps, sc)
        for j in range(log.shape[1]):
            log[k, j] = st[0, j]


@njit(cache=True)
def transmitted_torques(tp, st, out):
    """out[t] = T_s(Δ) + T_h (N·m at the output) of every flexspline."""
    for t in range(tp.shape[0]):
        delta, _ = twist(tp, t, st[ST_Q])
        out[t] = stiffness_torque(delta, tp[t, T_DRIVE:T_MOTOR]) + st[ST_TH, t]


@njit(cache=True)
def plant_energy(pk, ws, tp, st, out2):
    """Kinetic (out2[0]) and gravity (out2[1]) energy of the bodies; returns the flexsplines'
    elastic energy Σ U(Δ) (J)."""
    kernels.energy(pk, ws, st[ST_Q], st[ST_V], out2)
    spring = 0.0
    for t in range(tp.shape[0]):
        delta, _ = twist(tp, t, st[ST_Q])
        spring += stiffness_energy(delta, tp[t, T_DRIVE:T_MOTOR])
    return spring


# ------------------------------------------------------------------ facade
class Plant:
    """Facade over the plant arrays: reset, step with motor currents, read the state (SI).

    ``Plant(mech)`` takes the robot's (rigid) mechanism with its transmissions; q of the plant
    is the robot's joints followed by one rotor per transmission. For njit callers,
    :attr:`args` is the argument tuple of :func:`plant_step`.
    """

    def __init__(self, mech: Mechanism, *, dt: float = 1e-3, substeps: int = SUBSTEPS,
                 friction: bool = True, hysteresis: bool = True) -> None:
        if not mech.transmissions:
            raise ValueError("the plant needs a mechanism with transmissions")
        if mech.closure is not None:
            raise ValueError(f"the plant simulates trees; '{mech.name}' has loop closures")
        if not (dt > 0.0 and substeps >= 1):
            raise ValueError("the plant needs dt > 0 and at least one sub-step")
        self.robot = mech
        self.mech, self.tp = plant_arrays(mech, friction=friction, hysteresis=hysteresis)
        self.dt, self.substeps = float(dt), int(substeps)
        n = self.mech.nq
        n_tr = len(mech.transmissions)
        self.n_joints = mech.nq
        self._rotors = self.tp[:, T_ROTOR].astype(np.int64)
        self.pk = self.mech.packed
        self.ws = np.zeros(kernels.workspace_size(self.mech.n_bodies, self.mech.nz))
        self.state = np.zeros((ST_ROWS, n))
        self.scratch = np.zeros(scratch_shape(n))
        self.cmd = np.zeros(n_tr)
        self._e2 = np.zeros(2)
        self._torques = np.zeros(n_tr)
        self.reset(np.zeros(mech.nq))

    @property
    def args(self) -> tuple:
        """(pk, ws, tp, state, cmd, dt, substeps, scratch): :func:`plant_step`'s arguments."""
        return (self.pk, self.ws, self.tp, self.state, self.cmd, self.dt, self.substeps,
                self.scratch)

    # --- state (views into the state array unless noted)
    @property
    def q(self) -> np.ndarray:
        """Plant coordinates (rad): the joints (as the robot's q), then the rotors."""
        return self.state[ST_Q]

    @property
    def v(self) -> np.ndarray:
        """Plant velocities (rad/s), ordered as :attr:`q`."""
        return self.state[ST_V]

    @property
    def joint_positions(self) -> np.ndarray:
        """Joint (output) angles (rad), ordered as the robot's ``joint_names``."""
        return self.state[ST_Q, : self.n_joints]

    @property
    def joint_velocities(self) -> np.ndarray:
        """Joint (output) velocities (rad/s)."""
        return self.state[ST_V, : self.n_joints]

    @property
    def motor_positions(self) -> np.ndarray:
        """Rotor angles q_r (rad, relative to the circular spline), one per transmission (copy)."""
        return self.state[ST_Q, self._rotors]

    @property
    def motor_velocities(self) -> np.ndarray:
        """Rotor velocities (rad/s), one per transmission (copy)."""
        return self.state[ST_V, self._rotors]

    @property
    def currents(self) -> np.ndarray:
        """Actual motor currents (A), one per transmission."""
        return self.state[ST_I, : len(self.tp)]

    motor_currents = currents

    @property
    def stuck(self) -> np.ndarray:
        """Whether each rotor is held by static friction (copy)."""
        return self.state[ST_STUCK, : len(self.tp)] > 0.5

    @property
    def twists(self) -> np.ndarray:
        """Flexspline twists Δ (rad at the output), one per transmission (new array)."""
        return np.array([twist(self.tp, t, self.q)[0] for t in range(len(self.tp))])

    @property
    def flexspline_torques(self) -> np.ndarray:
        """Transmitted torques T = T_s(Δ) + T_h (N·m at the output), one per transmission."""
        transmitted_torques(self.tp, self.state, self._torques)
        return self._torques

    def energy(self) -> float:
        """Kinetic + gravity + flexspline elastic energy (J)."""
        spring = plant_energy(self.pk, self.ws, self.tp, self.state, self._e2)
        return float(self._e2[0] + self._e2[1] + spring)

    # --- inputs and bench set-up
    def apply(self, joint_torques) -> None:
        """External torques on the joints (N·m; e.g. the wearer's), held until changed."""
        self.state[ST_EXT, : self.n_joints] = joint_torques

    def power(self, on: bool) -> None:
        """Switch the drives' power stages on or off (off: no current, the motors coast)."""
        self.state[ST_ON, : len(self.tp)] = 1.0 if on else 0.0

    def lock(self, coordinate: str, locked: bool = True) -> None:
        """Hold a plant coordinate (e.g. an output on a test bench) where it is, at rest."""
        i = self.mech.joint_names.index(coordinate)
        self.state[ST_LOCK, i] = 1.0 if locked else 0.0
        if locked:
            self.state[ST_V, i] = 0.0

    def reset(self, q_joints, v_joints=None, *, equilibrium: bool = True) -> None:
        """Joints at q (rad) and q̇ (rad/s, default 0); rotors where the rigid drive puts them,
        moving with their joints; currents, hysteresis, locks and external forces zero.

        Rotors at rest with dry friction start stuck. With ``equilibrium`` and the leg at rest
        the flexsplines are pre-twisted to carry the joints' static gravity torques: the plant
        starts in static equilibrium instead of ringing.
        """
        self.state[:] = 0.0
        q, v = self.state[ST_Q], self.state[ST_V]
        q[: self.n_joints] = np.asarray(q_joints, dtype=float)
        if v_joints is not None:
            v[: self.n_joints] = np.asarray(v_joints, dtype=float)
        tp = self.tp
        for t in range(len(tp)):
            j, r, k = int(tp[t, T_JOINT]), int(tp[t, T_ROTOR]), tp[t, T_K]
            q[r], v[r] = k * q[j], k * v[j]
        if equilibrium and not np.any(v):
            self._pretwist()
        for t in range(len(tp)):
            at_rest = v[int(tp[t, T_ROTOR])] == 0.0
            dry = has_dry_friction(tp[t, T_DRIVE:T_MOTOR])
            self.state[ST_STUCK, t] = 1.0 if (at_rest and dry) else 0.0
        self.state[ST_ON, : len(tp)] = 1.0
        self.cmd[:] = 0.0

    def _pretwist(self) -> None:
        """Rotor angles with T_s(Δ_t) = −g_j(q): each flexspline holds its joint's weight.

        Fixed-point iteration: a rotor's angle moves its own gravity (an off-axis COM) and the
        kinematic error; both are small, so a few passes converge.
        """
        q, tp = self.state[ST_Q], self.tp
        g = np.zeros(len(q))
        for _ in range(5):
            kernels.gravity_forces(self.pk, self.ws, q, g)
            for t in range(len(tp)):
                j, r, k = int(tp[t, T_JOINT]), int(tp[t, T_ROTOR]), tp[t, T_K]
                d = tp[t, T_DRIVE:T_MOTOR]
                delta = twist_for_torque(-g[j], d)
                q[r] = k * (q[j] - delta - kinematic_error(q[r], d)[0])

    def step(self, current_cmd=None, duration: float | None = None) -> None:
        """Advance one period dt (or ``duration`` s, in sub-steps no longer than dt/substeps)
        with motor current commands (A, one per transmission; None: keep the last ones)."""
        if current_cmd is not None:
            self.cmd[:] = current_cmd
        if duration is None:
            plant_step(self.pk, self.ws, self.tp, self.state, self.cmd, self.dt, self.substeps,
                       self.scratch)
        else:
            m = max(1, math.ceil(duration * self.substeps / self.dt - 1e-9))
            plant_step(self.pk, self.ws, self.tp, self.state, self.cmd, duration, m,
                       self.scratch)
