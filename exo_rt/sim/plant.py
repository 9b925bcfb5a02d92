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

The registered plant model ``harmonic_drive`` (:mod:`exo_rt.sim.plants`): the simulated leg
unless a top config names another. Layout (arrays owned by :class:`HarmonicDrivePlant`, passed
to njit code as they are; the common rows and columns are :mod:`exo_rt.sim.plants`'):
``model``/``data`` the released mechanism's packed model and workspace, ``transmissions`` one
row per transmission (columns ``T_*``: the common three, then the drive's and the motor's
parameters), ``state`` the state (rows ``ST_*``), ``scratch`` (:func:`scratch_shape`),
``cmd`` the current commands.
"""

from __future__ import annotations

import math

import numpy as np

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
    M_SHORT,
    M_WIDTH,
    current_target,
    motor_row,
    motor_torque,
    short_circuit_current,
)
from exo_rt.dynamics import kernels
from exo_rt.dynamics.couplings import released
from exo_rt.jit import address, call_at, njit
from exo_rt.model.mechanism import Mechanism
from exo_rt.sim import plants
from exo_rt.sim.plants import (
    ST_COMMON,
    ST_EXT,
    ST_I,
    ST_LOCK,
    ST_ON,
    ST_Q,
    ST_V,
    T_COMMON,
    T_JOINT,
    T_K,
    T_ROTOR,
)

SUBSTEPS = 10  # default RK4 sub-steps per 1 ms period (see the module docstring)
REST_SPEED = 1e-9  # rad/s at the rotor: slower than this counts as at rest (a stick candidate)
MIN_SPLIT = 1e-3  # a reversal closer than this fraction of a sub-step to its start is not split

# --- columns of a transmission row of the plant: the common ones (exo_rt.sim.plants) …
# T_JOINT: the output joint's index in the plant's q; T_ROTOR: the rotor's; T_K: multiplier k
# (z_rotor = k·q_joint when rigid; −N) …
T_DRIVE = T_COMMON  # … then the drive's parameter row (harmonic_drive.D_*)
T_MOTOR = T_DRIVE + D_WIDTH  # the motor's parameter row (motor.M_*)
T_WIDTH = T_MOTOR + M_WIDTH

# --- state rows: the common ones (exo_rt.sim.plants: ST_Q, ST_V, ST_LOCK per coordinate, ST_I,
# ST_ON per transmission, ST_EXT per coordinate), then per transmission (state[row, t]):
ST_TH = ST_COMMON  # hysteresis torque T_h (N·m at the output)
ST_STUCK = ST_COMMON + 1  # 1.0: the rotor is held by static friction
ST_DIR = ST_COMMON + 2  # ±1: direction of a sliding rotor (its friction opposes it), held over
# a sub-step
ST_ROWS = ST_COMMON + 3

# --- scratch rows: the mass matrix (n rows), its free block (n rows), then vectors
X_H, X_F, X_RHS, X_X, X_FREE, X_LOCKED = 0, 1, 2, 3, 4, 5
X_Q0, X_V0, X_QS, X_VS, X_V2, X_V3 = 6, 7, 8, 9, 10, 11
X_A1, X_A2, X_A3, X_A4 = 12, 13, 14, 15
X_T, X_TW = 16, 17  # per transmission: transmitted torque T, twist at the sub-step's start
X_I0, X_IT, X_IS = 18, 19, 20  # per transmission: current at the step's start, target, slope
X_FN = 21  # [0]: where this process's compiled _accelerations starts (exo_rt.jit.address)
X_KIN = 22  # [0]: 1.0 while a plant whose accelerations read another engine's workspace (the
# world's MuJoCo data) has that workspace's terms at its own qpos and qvel, within a step
X_ROWS = 23


def plant_arrays(mech: Mechanism, *, friction: bool = True, hysteresis: bool = True):
    """(plant mechanism, transmission rows ``transmissions``) for a robot with transmissions."""
    plant = released(mech)
    rows = np.zeros((len(mech.transmissions), T_WIDTH))
    for n, tr in enumerate(mech.transmissions):
        rows[n, T_JOINT] = plant.joint_names.index(tr.joint)
        rows[n, T_ROTOR] = plant.joint_names.index(tr.rotor_joint)
        rows[n, T_K] = tr.multiplier
        rows[n, T_DRIVE:T_MOTOR] = drive_row(tr.drive, friction=friction, hysteresis=hysteresis)
        rows[n, T_MOTOR:] = motor_row(tr.motor, tr.motor_sign,
                                      short=tr.safe_reaction == "short_circuit")
    return plant, rows


def scratch_shape(n: int) -> tuple[int, int]:
    """Shape of the plant's scratch array for n plant coordinates (n ≥ transmissions)."""
    return (2 * n + X_ROWS, max(n, 1))


def new_scratch(n: int) -> np.ndarray:
    """The plant's scratch for n plant coordinates, zero but for where the accelerations'
    kernel starts in this process (compiled or loaded now: the step calls it there)."""
    scratch = np.zeros(scratch_shape(n))
    _point_at_accelerations(scratch)
    return scratch


def _point_at_accelerations(scratch: np.ndarray) -> None:
    model, vec, mat = plants.STEP_SIGNATURE.args[:3]
    n = (scratch.shape[0] - X_ROWS) // 2
    scratch[2 * n + X_FN, 0] = address(_accelerations, (model, vec, mat, mat, vec, vec, mat,
                                                        vec))


# ------------------------------------------------------------------ forces of drives and motors
# inline="always" (here and below, for the smallest helpers and the sub-step): compiled into
# their callers, not as kernels of their own — measured, it pays only for code that small
# (or, for the sub-step, called from one place): larger functions cost more to inline.
@njit(cache=True, inline="always")
def twist(transmissions, t, q):
    """(Δ, −∂Δ/∂q_r) of transmission t: Δ = q_j − q_r/k − e(q_r) (rad), −∂Δ/∂q_r = 1/k + e'."""
    k = transmissions[t, T_K]
    r = int(transmissions[t, T_ROTOR])
    e, de = kinematic_error(q[r], transmissions[t, T_DRIVE:T_MOTOR])
    return q[int(transmissions[t, T_JOINT])] - q[r] / k - e, 1.0 / k + de


@njit(cache=True, python=False)
def _forces(transmissions, state, q, v, tq, out):
    """Generalized forces (N·m) of flexsplines, motors, sliding WG friction and ST_EXT.

    Q_j −= T, Q_r += T·(1/k + e') + motor_sign·k_M·i (+ friction if sliding); the
    transmitted torques T go to tq[t].
    """
    for i in range(out.shape[0]):
        out[i] = state[ST_EXT, i]
    for t in range(transmissions.shape[0]):
        j = int(transmissions[t, T_JOINT])
        r = int(transmissions[t, T_ROTOR])
        d = transmissions[t, T_DRIVE:T_MOTOR]
        delta, dq = twist(transmissions, t, q)
        torque = stiffness_torque(delta, d) + state[ST_TH, t]
        tq[t] = torque
        out[j] -= torque
        out[r] += torque * dq + motor_torque(state[ST_I, t], transmissions[t, T_MOTOR:])
        if state[ST_STUCK, t] < 0.5:
            out[r] += sliding_friction(v[r], state[ST_DIR, t], torque, d)
            out[r] -= _brake(transmissions, state, t) * state[ST_DIR, t]  # a slipping brake drags


@njit(cache=True, inline="always")
def _brake(transmissions, state, t):
    """The power-off brake's torque (N·m at the rotor) on transmission t: its holding torque
    while the drive's power stage is off, else 0 (released)."""
    return transmissions[t, T_MOTOR + M_BRAKE] if state[ST_ON, t] < 0.5 else 0.0


@njit(cache=True, python=False)
def _lock_mask(transmissions, state, n, mask):
    """mask[i] = 1.0 for the coordinates held this sub-step (user locks and stuck rotors)."""
    for i in range(n):
        mask[i] = 1.0 if state[ST_LOCK, i] > 0.5 else 0.0
    for t in range(transmissions.shape[0]):
        if state[ST_STUCK, t] > 0.5:
            mask[int(transmissions[t, T_ROTOR])] = 1.0


# ------------------------------------------------------------------ dynamics with locks
@njit(cache=True, python=False)
def _accelerations(model, data, transmissions, state, q, v, scratch, acc):
    """q̈ with the locked coordinates held (q̈ = 0 there): M_ff a_f = Q_f − h_f.

    Leaves M (rows 0…n−1 of scratch), h (X_H) and Q (X_F) for :func:`_reaction`. Its callers
    reach it through its address (:func:`_accelerations_at`): compiled apart, the rigid-body
    dynamics in it are not optimised and emitted again in each of them.
    """
    n = q.shape[0]
    x0 = 2 * n
    kernels.mass_matrix(model, data, q, scratch[:n])
    kernels.bias_forces(model, data, q, v, scratch[x0 + X_H])
    _forces(transmissions, state, q, v, scratch[x0 + X_T], scratch[x0 + X_F])
    solve_locked(scratch, n, acc)


@njit(cache=True, inline="always")
def solve_locked(scratch, n, acc):
    """M_ff a_f = Q_f − h_f: q̈ into ``acc`` from M (rows 0…n−1 of ``scratch``), h (X_H) and
    Q (X_F), 0 on the coordinates the lock mask (X_LOCKED) holds — whoever computed M and h
    (exo-rt's dynamics here, MuJoCo's in the world plant)."""
    x0 = 2 * n
    m = scratch[:n]
    mff = scratch[n:x0]
    h, f, rhs, x = scratch[x0 + X_H], scratch[x0 + X_F], scratch[x0 + X_RHS], scratch[x0 + X_X]
    free, mask = scratch[x0 + X_FREE], scratch[x0 + X_LOCKED]
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


@njit(cache=True, inline="always")
def _accelerations_at(model, data, transmissions, state, q, v, scratch, acc):
    """:func:`_accelerations`, called where :func:`new_scratch` says it starts."""
    call_at(int(scratch[2 * q.shape[0] + X_FN, 0]), model, data, transmissions, state, q, v,
            scratch, acc)


@njit(cache=True, inline="always")
def _reaction(scratch, n, acc, r):
    """(M q̈ + h − Q)_r: the torque (N·m) a lock must supply on coordinate r."""
    x0 = 2 * n
    need = scratch[x0 + X_H, r] - scratch[x0 + X_F, r]
    for j in range(n):
        need += scratch[r, j] * acc[j]
    return need


@njit(cache=True, python=False)
def _stick_or_slip(model, data, transmissions, state, q, v, scratch, acc):
    """Decide which rotors stick this sub-step; leaves the stage-1 accelerations in acc.

    Rotors at rest become stick candidates (locked). Then, one at a time, the most overloaded
    locked rotor (|reaction| above breakaway) is released to slide the way the unbalanced
    torque pushes it, and the reactions are recomputed.
    """
    n = q.shape[0]
    x0 = 2 * n
    tq = scratch[x0 + X_T]
    for t in range(transmissions.shape[0]):
        r = int(transmissions[t, T_ROTOR])
        if (state[ST_STUCK, t] < 0.5 and abs(v[r]) < REST_SPEED
                and (has_dry_friction(transmissions[t, T_DRIVE:T_MOTOR])
                     or _brake(transmissions, state, t) > 0.0)):
            state[ST_STUCK, t] = 1.0
            v[r] = 0.0
    _lock_mask(transmissions, state, n, scratch[x0 + X_LOCKED])
    _accelerations_at(model, data, transmissions, state, q, v, scratch, acc)
    for _ in range(transmissions.shape[0]):
        worst = -1
        excess = 0.0
        push = 0.0
        for t in range(transmissions.shape[0]):
            if state[ST_STUCK, t] < 0.5:
                continue
            need = _reaction(scratch, n, acc, int(transmissions[t, T_ROTOR]))
            over = (abs(need) - breakaway(tq[t], transmissions[t, T_DRIVE:T_MOTOR])
                    - _brake(transmissions, state, t))
            if over > excess:
                worst, excess, push = t, over, need
        if worst < 0:
            return
        state[ST_STUCK, worst] = 0.0
        state[ST_DIR, worst] = -1.0 if push > 0.0 else 1.0  # friction supplied +need: it moves −
        _lock_mask(transmissions, state, n, scratch[x0 + X_LOCKED])
        _accelerations_at(model, data, transmissions, state, q, v, scratch, acc)


@njit(cache=True, python=False)
def _rk4(model, data, transmissions, state, q, v, dt, scratch):
    """One classical RK4 step on (q, v), the first stage already in X_A1; locks hold."""
    n = q.shape[0]
    x0 = 2 * n
    q0, v0, qs, vs = scratch[x0 + X_Q0], scratch[x0 + X_V0], scratch[x0 + X_QS], scratch[x0 + X_VS]
    v2, v3 = scratch[x0 + X_V2], scratch[x0 + X_V3]
    a1, a2, a3, a4 = scratch[x0 + X_A1], scratch[x0 + X_A2], scratch[x0 + X_A3], scratch[x0 + X_A4]
    mask = scratch[x0 + X_LOCKED]
    _stage_currents(transmissions, state, scratch, n, 0.5 * dt)
    for i in range(n):
        q0[i] = q[i]
        v0[i] = v[i]
        qs[i] = q0[i] + 0.5 * dt * v0[i]
        vs[i] = v0[i] + 0.5 * dt * a1[i]
        v2[i] = vs[i]
    _accelerations_at(model, data, transmissions, state, qs, vs, scratch, a2)
    for i in range(n):
        qs[i] = q0[i] + 0.5 * dt * v2[i]
        vs[i] = v0[i] + 0.5 * dt * a2[i]
        v3[i] = vs[i]
    _accelerations_at(model, data, transmissions, state, qs, vs, scratch, a3)
    for i in range(n):
        qs[i] = q0[i] + dt * v3[i]
        vs[i] = v0[i] + dt * a3[i]
    _stage_currents(transmissions, state, scratch, n, dt)
    _accelerations_at(model, data, transmissions, state, qs, vs, scratch, a4)
    for i in range(n):
        if mask[i] > 0.5:
            v[i] = 0.0
        else:
            q[i] = q0[i] + dt / 6.0 * (v0[i] + 2.0 * v2[i] + 2.0 * v3[i] + vs[i])
            v[i] = v0[i] + dt / 6.0 * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i])


# ------------------------------------------------------------------ one sub-step, one period
@njit(cache=True, python=False)
def _current_slopes(transmissions, state, cmd, v, acc, h, scratch):
    """Rate (A/s) at which each target moves over the step: the voltage limit follows the rotor
    speed, predicted as ω_r + q̈_r·τ from the first stage."""
    x0 = 2 * v.shape[0]
    for t in range(transmissions.shape[0]):
        r = int(transmissions[t, T_ROTOR])
        end = 0.0
        if state[ST_ON, t] > 0.5:
            end = current_target(cmd[t], v[r] + acc[r] * h, transmissions[t, T_MOTOR:])
        elif transmissions[t, T_MOTOR + M_SHORT] > 0.5:  # the phases shorted: back-EMF alone
            end = short_circuit_current(v[r] + acc[r] * h, transmissions[t, T_MOTOR:])
        scratch[x0 + X_IS, t] = (end - scratch[x0 + X_IT, t]) / h


@njit(cache=True, python=False)
def _stage_currents(transmissions, state, scratch, n, tau):
    """Motor currents at time τ (s) into the step: the loop's exact response to a target
    i*(τ) = i*₀ + s·τ, i(τ) = i*(τ) − s/ω_c + (i₀ − i*₀ + s/ω_c)·exp(−ω_c τ) — every RK4
    stage sees the current of its own time."""
    x0 = 2 * n
    for t in range(transmissions.shape[0]):
        wc = transmissions[t, T_MOTOR + M_BANDWIDTH]
        i0, target, slope = scratch[x0 + X_I0, t], scratch[x0 + X_IT, t], scratch[x0 + X_IS, t]
        lag = slope / wc
        state[ST_I, t] = target + slope * tau - lag + (i0 - target + lag) * math.exp(-wc * tau)


@njit(cache=True, python=False)
def _end_substep(transmissions, state, q, v, tw0):
    """End of a (partial) sub-step: a sliding rotor (with dry friction) whose velocity
    reversed stops and sticks; Dahl's hysteresis torque follows the sub-step's twist
    increment (from ``tw0``)."""
    for t in range(transmissions.shape[0]):
        r = int(transmissions[t, T_ROTOR])
        if (state[ST_STUCK, t] < 0.5 and v[r] * state[ST_DIR, t] < 0.0
                and has_dry_friction(transmissions[t, T_DRIVE:T_MOTOR])):
            v[r] = 0.0
            state[ST_STUCK, t] = 1.0
        delta, _ = twist(transmissions, t, q)
        state[ST_TH, t] = hysteresis_update(state[ST_TH, t], delta - tw0[t],
                                            transmissions[t, T_DRIVE:T_MOTOR])


@njit(cache=True, python=False)
def _first_reversal(transmissions, state, v0, v):
    """(θ, t): the earliest fraction θ of the last step at which a sliding rotor's velocity
    (linear between v0 and v) crossed zero against its direction, and which; (1.0, −1): none."""
    theta, first = 1.0, -1
    for t in range(transmissions.shape[0]):
        r = int(transmissions[t, T_ROTOR])
        s = state[ST_DIR, t]
        if (state[ST_STUCK, t] < 0.5 and v[r] * s < 0.0
                and has_dry_friction(transmissions[t, T_DRIVE:T_MOTOR])):
            a, b = v0[r] * s, v[r] * s
            th = a / (a - b) if a > 0.0 else 0.0
            if th < theta:
                theta, first = th, t
    return theta, first


@njit(cache=True, python=False)
def _begin(transmissions, state, cmd, q, v, scratch):
    """Start of a (partial) sub-step: per transmission, the start current and the value the
    loop tends to over the sub-step (A) — the command within the drive's and the supply's
    limits at the rotor speed of the sub-step's start, 0 with the power stage off (the
    back-EMF's short-circuit current where the drive shorts the phases) —, the
    twist, and the sliding direction."""
    x0 = 2 * q.shape[0]
    i0, target = scratch[x0 + X_I0], scratch[x0 + X_IT]
    for t in range(transmissions.shape[0]):
        r = int(transmissions[t, T_ROTOR])
        i0[t] = state[ST_I, t]
        if state[ST_ON, t] > 0.5:
            target[t] = current_target(cmd[t], v[r], transmissions[t, T_MOTOR:])
        elif transmissions[t, T_MOTOR + M_SHORT] > 0.5:  # off, the phases shorted: the
            # back-EMF's current, reached with the loop's lag (the winding's L/R, about
            # 0.5 ms, is of the same order)
            target[t] = short_circuit_current(v[r], transmissions[t, T_MOTOR:])
        else:  # the power stage is off: no current at once
            target[t] = 0.0
            i0[t] = 0.0
            state[ST_I, t] = 0.0
        scratch[x0 + X_TW, t], _ = twist(transmissions, t, q)
        if state[ST_STUCK, t] < 0.5 and v[r] != 0.0:
            state[ST_DIR, t] = 1.0 if v[r] > 0.0 else -1.0


@njit(cache=True, python=False)
def _restore(transmissions, state, q, v, scratch):
    """Back to the state at the start of the last RK4 step (positions, velocities, currents)."""
    x0 = 2 * q.shape[0]
    for i in range(q.shape[0]):
        q[i] = scratch[x0 + X_Q0, i]
        v[i] = scratch[x0 + X_V0, i]
    for t in range(transmissions.shape[0]):
        state[ST_I, t] = scratch[x0 + X_I0, t]


@njit(cache=True, inline="always")
def _substep(model, data, transmissions, state, cmd, q, v, h, scratch):
    """Advance by h (s). A sliding rotor whose velocity reverses inside the step is stopped at
    the (linearly estimated) crossing and locked there; the step then continues from that
    instant with a fresh stick–slip decision — at most one split per transmission."""
    x0 = 2 * q.shape[0]
    left = h
    for split in range(transmissions.shape[0] + 1):
        _begin(transmissions, state, cmd, q, v, scratch)
        _stick_or_slip(model, data, transmissions, state, q, v, scratch, scratch[x0 + X_A1])
        _current_slopes(transmissions, state, cmd, v, scratch[x0 + X_A1], left, scratch)
        _rk4(model, data, transmissions, state, q, v, left, scratch)
        theta, first = _first_reversal(transmissions, state, scratch[x0 + X_V0], v)
        if first < 0 or split == transmissions.shape[0] or theta * left < MIN_SPLIT * h:
            _end_substep(transmissions, state, q, v, scratch[x0 + X_TW])
            return
        _restore(transmissions, state, q, v, scratch)
        # stage 1 and the stick set still hold
        _rk4(model, data, transmissions, state, q, v, theta * left, scratch)
        v[int(transmissions[first, T_ROTOR])] = 0.0
        state[ST_STUCK, first] = 1.0
        _end_substep(transmissions, state, q, v, scratch[x0 + X_TW])
        left -= theta * left


@njit(cache=True)
def plant_step(model, data, transmissions, state, cmd, dt, substeps, scratch):
    """Advance the plant by dt (s) in ``substeps`` RK4 sub-steps; ``cmd``: current commands (A).

    Allocates nothing; every array is the caller's (see :class:`HarmonicDrivePlant` for their
    layout).
    """
    q = state[ST_Q]
    v = state[ST_V]
    if scratch[2 * q.shape[0] + X_FN, 0] == 0.0:
        raise ValueError("the plant's scratch does not say where its accelerations start: "
                         "make it with new_scratch(n)")
    h = dt / substeps
    for _ in range(substeps):
        _substep(model, data, transmissions, state, cmd, q, v, h, scratch)


# ------------------------------------------------------------------ read-outs
@njit(cache=True)
def plant_run(model, data, transmissions, state, cmd, dt, substeps, scratch, currents, log):
    """Step through ``currents`` (A; one row of motor commands per period) and log the first
    ``log.shape[1]`` coordinates (rad) after each period into ``log`` — a whole open-loop
    experiment inside njit, for benchmarks and sub-step studies (no allocation)."""
    for k in range(currents.shape[0]):
        for t in range(cmd.shape[0]):
            cmd[t] = currents[k, t]
        plant_step(model, data, transmissions, state, cmd, dt, substeps, scratch)
        for j in range(log.shape[1]):
            log[k, j] = state[0, j]


@njit(cache=True)
def transmitted_torques(transmissions, state, out):
    """out[t] = T_s(Δ) + T_h (N·m at the output) of every flexspline."""
    for t in range(transmissions.shape[0]):
        delta, _ = twist(transmissions, t, state[ST_Q])
        out[t] = stiffness_torque(delta, transmissions[t, T_DRIVE:T_MOTOR]) + state[ST_TH, t]


@njit(cache=True)
def plant_energy(model, data, transmissions, state, out2):
    """Kinetic (out2[0]) and gravity (out2[1]) energy of the bodies; returns the flexsplines'
    elastic energy Σ U(Δ) (J)."""
    kernels.energy(model, data, state[ST_Q], state[ST_V], out2)
    spring = 0.0
    for t in range(transmissions.shape[0]):
        delta, _ = twist(transmissions, t, state[ST_Q])
        spring += stiffness_energy(delta, transmissions[t, T_DRIVE:T_MOTOR])
    return spring


# ------------------------------------------------------------------ facade
@plants.model("harmonic_drive", doc="rigid bodies, compliant harmonic drives with friction and "
                                    "hysteresis, motor current loops (RK4 sub-steps)")
class HarmonicDrivePlant(plants.PlantModel):
    """Facade over the plant arrays: reset, step with motor currents, read the state (SI).

    ``HarmonicDrivePlant(mech)`` takes the robot's (rigid) mechanism with its transmissions; q
    of the plant is the robot's joints followed by one rotor per transmission. For njit
    callers, :attr:`args` is the argument tuple of :func:`plant_step`.
    """

    kernel = staticmethod(plant_step)

    def __init__(self, mech: Mechanism, *, dt: float = 1e-3, substeps: int = SUBSTEPS,
                 friction: bool = True, hysteresis: bool = True) -> None:
        if not mech.transmissions:
            raise ValueError("the plant needs a mechanism with transmissions")
        if mech.closure is not None:
            raise ValueError(f"the plant simulates trees; '{mech.name}' has loop closures")
        if not (dt > 0.0 and substeps >= 1):
            raise ValueError("the plant needs dt > 0 and at least one sub-step")
        self.robot = mech
        self.mech, self.transmissions = plant_arrays(mech, friction=friction,
                                                     hysteresis=hysteresis)
        self.dt, self.substeps = float(dt), int(substeps)
        n = self.mech.nq
        n_tr = len(mech.transmissions)
        self.n_joints = mech.nq
        self.model, self.data = kernels.model_and_data(self.mech)
        self.state = np.zeros((ST_ROWS, n))
        self.scratch = new_scratch(n)
        self.cmd = np.zeros(n_tr)
        self._e2 = np.zeros(2)
        self._torques = np.zeros(n_tr)
        self.reset(np.zeros(mech.nq))

    def __setstate__(self, state: dict) -> None:
        """Unpickled (another process: a batch's worker): the scratch points at this
        process's accelerations, not the pickling one's."""
        self.__dict__.update(state)
        _point_at_accelerations(self.scratch)

    @property
    def stuck(self) -> np.ndarray:
        """Whether each rotor is held by static friction (copy)."""
        return self.state[ST_STUCK, : len(self.transmissions)] > 0.5

    @property
    def twists(self) -> np.ndarray:
        """Flexspline twists Δ (rad at the output), one per transmission (new array)."""
        return np.array([twist(self.transmissions, t, self.q)[0]
                         for t in range(len(self.transmissions))])

    @property
    def flexspline_torques(self) -> np.ndarray:
        """Transmitted torques T = T_s(Δ) + T_h (N·m at the output), one per transmission."""
        transmitted_torques(self.transmissions, self.state, self._torques)
        return self._torques

    output_torques = flexspline_torques

    def energy(self) -> float:
        """Kinetic + gravity + flexspline elastic energy (J)."""
        spring = plant_energy(self.model, self.data, self.transmissions, self.state, self._e2)
        return float(self._e2[0] + self._e2[1] + spring)

    # --- bench set-up
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
        rows = self.transmissions
        for t in range(len(rows)):
            j, r, k = int(rows[t, T_JOINT]), int(rows[t, T_ROTOR]), rows[t, T_K]
            q[r], v[r] = k * q[j], k * v[j]
        if equilibrium and not np.any(v):
            self._pretwist()
        for t in range(len(rows)):
            at_rest = v[int(rows[t, T_ROTOR])] == 0.0
            dry = has_dry_friction(rows[t, T_DRIVE:T_MOTOR])
            self.state[ST_STUCK, t] = 1.0 if (at_rest and dry) else 0.0
        self.state[ST_ON, : len(rows)] = 1.0
        self.cmd[:] = 0.0

    def _pretwist(self) -> None:
        """Rotor angles with T_s(Δ_t) = −g_j(q): each flexspline holds its joint's weight.

        Fixed-point iteration: a rotor's angle moves its own gravity (an off-axis COM) and the
        kinematic error; both are small, so a few passes converge.
        """
        q, rows = self.state[ST_Q], self.transmissions
        g = np.zeros(len(q))
        for _ in range(5):
            kernels.gravity_forces(self.model, self.data, q, g)
            for t in range(len(rows)):
                j, r, k = int(rows[t, T_JOINT]), int(rows[t, T_ROTOR]), rows[t, T_K]
                d = rows[t, T_DRIVE:T_MOTOR]
                delta = twist_for_torque(-g[j], d)
                q[r] = k * (q[j] - delta - kinematic_error(q[r], d)[0])


Plant = HarmonicDrivePlant  # the built-in model by its former name
