"""The plant: rigid-body dynamics of exoskeleton and wearer with compliant harmonic drives,
wave-generator friction and motor current loops, stepped entirely inside njit.

The plant's mechanism is the robot's with every transmission's rotor released into an
independent coordinate (:func:`exo_rt.dynamics.couplings.released`); the flexspline's
compliance couples rotor and joint (:mod:`exo_rt.actuators.harmonic_drive`). Inputs are the
motor current commands; one :func:`plant_step` advances one control period with ``substeps``
RK4 sub-steps (the flexspline is stiff: its rotor-side mode is ~200 rad/s for the default leg,
so 10 sub-steps of 0.1 ms keep ω·dt ≈ 0.02).

Stick–slip without chatter or drift: a rotor at rest whose required holding torque stays
within the breakaway friction (T_s + μ|T|/N) is *locked* — its velocity and acceleration are
exactly zero, the free coordinates are solved with it removed. It breaks away when the
holding torque exceeds breakaway, and slides in the direction the net torque pushes, with the
friction direction held over a sub-step; a sliding rotor whose velocity would reverse within a
sub-step stops and locks instead. The same locking holds an output joint for bench tests
("locked output").
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exo_rt.actuators.harmonic_drive import (
    D_COULOMB,
    D_HYST,
    D_MU,
    D_STATIC,
    D_VISCOUS,
    D_WIDTH,
    breakaway,
    drive_row,
    hysteresis_rate,
    kinematic_error,
    sliding_friction,
    stiffness_energy,
    stiffness_torque,
    twist_for_torque,
)
from exo_rt.actuators.motor import M_WIDTH, current_step, motor_row, motor_torque
from exo_rt.dynamics import kernels
from exo_rt.dynamics.couplings import released
from exo_rt.model.mechanism import Mechanism

# --- columns of a transmission row of the plant
T_JOINT = 0  # index of the output joint in the plant's q
T_ROTOR = 1  # index of the rotor in the plant's q
T_K = 2  # multiplier k (z_rotor = k·q_joint when rigid)
T_DRIVE = 3
T_MOTOR = T_DRIVE + D_WIDTH
T_WIDTH = T_MOTOR + M_WIDTH

# --- per-coordinate state rows (state[row, i])
S_Q, S_V, S_LOCK = 0, 1, 2  # position, velocity, locked by the user (1.0) — outputs on a bench
# --- per-transmission state rows (state[row, t]) after the coordinate rows
S_I, S_TH, S_STUCK, S_DIR = 3, 4, 5, 6  # current (A), hysteresis torque, stuck flag, slip dir
S_ON = 7  # 1.0: the drive's power stage is on; 0.0: off (open circuit: no current, no braking)
S_EXT = 8  # per coordinate: external generalized force (N·m), e.g. the wearer's muscles
S_ROWS = 9

V_STOP = 1e-12  # rad/s: a rotor this slow at a sub-step's start counts as at rest


def plant_arrays(mech: Mechanism, *, friction: bool = True, hysteresis: bool = True):
    """(plant mechanism, transmission rows) for a robot with transmissions."""
    plant = released(mech)
    rows = np.zeros((len(mech.transmissions), T_WIDTH))
    for n, tr in enumerate(mech.transmissions):
        rows[n, T_JOINT] = plant.joint_names.index(tr.joint)
        rows[n, T_ROTOR] = plant.joint_names.index(tr.rotor_joint)
        rows[n, T_K] = tr.multiplier
        d = drive_row(tr.drive)
        if not friction:
            d[[D_COULOMB, D_STATIC, D_VISCOUS, D_MU]] = 0.0
        if not hysteresis:
            d[D_HYST] = 0.0
        rows[n, T_DRIVE:T_MOTOR] = d
        rows[n, T_MOTOR:] = motor_row(tr.motor, tr.motor_sign)
    return plant, rows


def scratch_shape(n: int) -> tuple[int, int]:
    """Shape of the plant's scratch array for n plant coordinates."""
    return (2 * n + 16, max(n, 1))


@njit(cache=True)
def _twist(tp, t, q):
    k = tp[t, T_K]
    e, de = kinematic_error(q[int(tp[t, T_ROTOR])], tp[t, T_DRIVE:T_MOTOR])
    return q[int(tp[t, T_JOINT])] - q[int(tp[t, T_ROTOR])] / k - e, 1.0 / k + de


@njit(cache=True)
def _forces(tp, st, q, v, out, with_friction):
    """Generalized forces of drives and motors (flexspline, motor torque, WG friction) and the
    external forces of state row S_EXT."""
    for i in range(out.shape[0]):
        out[i] = st[S_EXT, i]
    for t in range(tp.shape[0]):
        j = int(tp[t, T_JOINT])
        r = int(tp[t, T_ROTOR])
        d = tp[t, T_DRIVE:T_MOTOR]
        delta, dtwist = _twist(tp, t, q)
        torque = stiffness_torque(delta, d) + st[S_TH, t]
        out[j] -= torque
        out[r] += torque * dtwist
        out[r] += motor_torque(st[S_I, t], tp[t, T_MOTOR:])
        if with_friction and st[S_STUCK, t] < 0.5:
            out[r] += sliding_friction(v[r], st[S_DIR, t], torque, d)


@njit(cache=True)
def _locked(st, tp, i):
    if st[S_LOCK, i] > 0.5:
        return True
    for t in range(tp.shape[0]):
        if int(tp[t, T_ROTOR]) == i and st[S_STUCK, t] > 0.5:
            return True
    return False


@njit(cache=True)
def _accelerations(pk, ws, tp, st, q, v, sc, acc):
    """Accelerations with the locked coordinates held (a = 0 there); M and h left in sc."""
    n = q.shape[0]
    m = sc[:n]
    mff = sc[n : 2 * n]
    h = sc[2 * n]
    f = sc[2 * n + 1]
    rhs = sc[2 * n + 2]
    x = sc[2 * n + 3]
    free = sc[2 * n + 4]
    kernels.mass_matrix(pk, ws, q, m)
    kernels.bias_forces(pk, ws, q, v, h)
    _forces(tp, st, q, v, f, True)
    nf = 0
    for i in range(n):
        if not _locked(st, tp, i):
            free[nf] = i
            nf += 1
    for a in range(nf):
        ia = int(free[a])
        rhs[a] = f[ia] - h[ia]
        for b in range(nf):
            mff[a, b] = m[ia, int(free[b])]
    for i in range(n):
        acc[i] = 0.0
    if nf > 0:
        kernels.cholesky_solve(mff[:nf, :nf], rhs[:nf], x[:nf])
        for a in range(nf):
            acc[int(free[a])] = x[a]


@njit(cache=True)
def _holding_torque(pk, ws, tp, st, q, v, sc, acc, t):
    """Torque the wave generator's static friction must supply to keep rotor t at rest."""
    n = q.shape[0]
    _accelerations(pk, ws, tp, st, q, v, sc, acc)
    r = int(tp[t, T_ROTOR])
    m = sc[:n]
    h = sc[2 * n]
    f = sc[2 * n + 1]  # drive forces without friction for a stuck rotor
    need = h[r] - f[r]
    for j in range(n):
        need += m[r, j] * acc[j]
    return need


@njit(cache=True)
def _rk4(pk, ws, tp, st, q, v, dt, sc):
    """One classical RK4 step of the plant with the stick set and slip directions held."""
    n = q.shape[0]
    q0, v0 = sc[2 * n + 5], sc[2 * n + 6]
    qs, vs = sc[2 * n + 7], sc[2 * n + 8]
    a1, a2, a3, a4 = sc[2 * n + 9], sc[2 * n + 10], sc[2 * n + 11], sc[2 * n + 12]
    v2, v3 = sc[2 * n + 14], sc[2 * n + 15]
    for i in range(n):
        q0[i] = q[i]
        v0[i] = v[i]
    _accelerations(pk, ws, tp, st, q0, v0, sc, a1)
    for i in range(n):
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
    _accelerations(pk, ws, tp, st, qs, vs, sc, a4)
    for i in range(n):
        if _locked(st, tp, i):
            v[i] = 0.0
            continue
        q[i] = q0[i] + dt / 6.0 * (v0[i] + 2.0 * v2[i] + 2.0 * v3[i] + vs[i])
        v[i] = v0[i] + dt / 6.0 * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i])


@njit(cache=True)
def plant_step(pk, ws, tp, st, cmd, dt, substeps, sc):
    """Advance the plant by dt (s) with motor current commands ``cmd`` (A, per transmission)."""
    q = st[S_Q]
    v = st[S_V]
    n = q.shape[0]
    acc = sc[2 * n + 13]
    h = dt / substeps
    for _ in range(substeps):
        for t in range(tp.shape[0]):
            r = int(tp[t, T_ROTOR])
            if st[S_ON, t] > 0.5:
                st[S_I, t] = current_step(st[S_I, t], cmd[t], v[r], h, tp[t, T_MOTOR:])
            else:
                st[S_I, t] = 0.0
            if st[S_STUCK, t] > 0.5:
                need = _holding_torque(pk, ws, tp, st, q, v, sc, acc, t)
                delta, _ = _twist(tp, t, q)
                load = stiffness_torque(delta, tp[t, T_DRIVE:T_MOTOR]) + st[S_TH, t]
                if abs(need) > breakaway(load, tp[t, T_DRIVE:T_MOTOR]):
                    st[S_STUCK, t] = 0.0
                    st[S_DIR, t] = -1.0 if need > 0.0 else 1.0
            elif abs(v[r]) > V_STOP:
                st[S_DIR, t] = 1.0 if v[r] > 0.0 else -1.0
        # hysteresis: Dahl state driven by the twist rate at the sub-step's start
        for t in range(tp.shape[0]):
            _, dtw = _twist(tp, t, q)
            rate = v[int(tp[t, T_JOINT])] - v[int(tp[t, T_ROTOR])] * dtw
            hmax = tp[t, T_DRIVE + D_HYST]
            th = st[S_TH, t] + hysteresis_rate(st[S_TH, t], rate, tp[t, T_DRIVE:T_MOTOR]) * h
            st[S_TH, t] = min(max(th, -hmax), hmax)
        _rk4(pk, ws, tp, st, q, v, h, sc)
        for t in range(tp.shape[0]):
            r = int(tp[t, T_ROTOR])
            if st[S_STUCK, t] < 0.5 and v[r] * st[S_DIR, t] < 0.0 and tp[t, T_DRIVE + D_STATIC] > 0:
                v[r] = 0.0  # the velocity would reverse: the rotor stops and sticks
                st[S_STUCK, t] = 1.0


@njit(cache=True)
def plant_energy(pk, ws, tp, st, out2):
    """Kinetic + gravity energy of the bodies (out2[0], out2[1]) and the springs' (returned)."""
    kernels.energy(pk, ws, st[S_Q], st[S_V], out2)
    spring = 0.0
    for t in range(tp.shape[0]):
        delta, _ = _twist(tp, t, st[S_Q])
        spring += stiffness_energy(delta, tp[t, T_DRIVE:T_MOTOR])
    return spring


class Plant:
    """Facade over the plant arrays: reset, step with motor currents, read the state.

    ``Plant(mech)`` takes the robot's (rigid) mechanism with its transmissions.
    """

    def __init__(self, mech: Mechanism, *, dt: float = 1e-3, substeps: int = 10,
                 friction: bool = True, hysteresis: bool = True) -> None:
        if not mech.transmissions:
            raise ValueError("the plant needs a mechanism with transmissions")
        self.robot = mech
        self.mech, self.tp = plant_arrays(mech, friction=friction, hysteresis=hysteresis)
        self.dt, self.substeps = float(dt), int(substeps)
        n = self.mech.nq
        self.n_joints = mech.nq
        self.pk = self.mech.packed
        self.ws = np.zeros(kernels.workspace_size(self.mech.n_bodies, self.mech.nz))
        self.state = np.zeros((S_ROWS, max(n, len(mech.transmissions))))
        self.scratch = np.zeros(scratch_shape(n))
        self.cmd = np.zeros(len(mech.transmissions))
        self._e2 = np.zeros(2)
        self.reset(np.zeros(mech.nq))

    # --- state views (SI)
    @property
    def q(self) -> np.ndarray:
        """Plant coordinates: joints (as the robot's q), then rotors."""
        return self.state[S_Q, : self.mech.nq]

    @property
    def v(self) -> np.ndarray:
        return self.state[S_V, : self.mech.nq]

    @property
    def joint_positions(self) -> np.ndarray:
        return self.state[S_Q, : self.n_joints]

    @property
    def joint_velocities(self) -> np.ndarray:
        return self.state[S_V, : self.n_joints]

    @property
    def motor_positions(self) -> np.ndarray:
        """Rotor angles (rad), one per transmission."""
        return self.state[S_Q, self.tp[:, T_ROTOR].astype(int)]

    @property
    def motor_velocities(self) -> np.ndarray:
        return self.state[S_V, self.tp[:, T_ROTOR].astype(int)]

    @property
    def currents(self) -> np.ndarray:
        """Actual motor currents (A), one per transmission."""
        return self.state[S_I, : len(self.tp)]

    @property
    def stuck(self) -> np.ndarray:
        return self.state[S_STUCK, : len(self.tp)] > 0.5

    def twists(self) -> np.ndarray:
        """Flexspline twist Δ (rad at the output), one per transmission."""
        return np.array([_twist(self.tp, t, self.q)[0] for t in range(len(self.tp))])

    def transmitted_torques(self) -> np.ndarray:
        """Flexspline torque T = T_s(Δ) + T_h (N·m at the output), one per transmission."""
        return np.array([stiffness_torque(d, self.tp[t, T_DRIVE:T_MOTOR]) + self.state[S_TH, t]
                         for t, d in enumerate(self.twists())])

    def energy(self) -> float:
        """Kinetic + gravity + flexspline elastic energy (J)."""
        spring = plant_energy(self.pk, self.ws, self.tp, self.state, self._e2)
        return float(self._e2[0] + self._e2[1] + spring)

    def apply(self, joint_torques) -> None:
        """External torques on the joints (N·m; e.g. the wearer's), held until changed."""
        self.state[S_EXT, : self.n_joints] = joint_torques

    def power(self, on: bool) -> None:
        """Switch the drives' power stages on or off (off: no current, the motors coast)."""
        self.state[S_ON, : len(self.tp)] = 1.0 if on else 0.0

    def lock(self, joint: str, locked: bool = True) -> None:
        """Hold a plant coordinate (e.g. an output on a test bench) at its current position."""
        i = self.mech.joint_names.index(joint)
        self.state[S_LOCK, i] = 1.0 if locked else 0.0
        if locked:
            self.state[S_V, i] = 0.0

    def reset(self, q_joints, v_joints=None, *, equilibrium: bool = True) -> None:
        """Joints at q (rad), rotors where the rigid drive puts them, currents zero.

        With ``equilibrium`` (and zero velocity) the flexsplines are pre-twisted so that each
        carries its joint's static gravity torque and the rotors are stuck: the plant starts
        at rest instead of ringing.
        """
        q_joints = np.asarray(q_joints, dtype=float)
        self.state[:] = 0.0
        q = self.state[S_Q]
        q[: self.n_joints] = q_joints
        if v_joints is not None:
            self.state[S_V, : self.n_joints] = v_joints
        for t in range(len(self.tp)):
            q[int(self.tp[t, T_ROTOR])] = self.tp[t, T_K] * q[int(self.tp[t, T_JOINT])]
        at_rest = v_joints is None or not np.any(v_joints)
        if equilibrium and at_rest:
            g = np.zeros(self.mech.nq)
            for _ in range(3):  # the rotors' own gravity depends (weakly) on their angle
                kernels.gravity_forces(self.pk, self.ws, q[: self.mech.nq], g)
                for t in range(len(self.tp)):
                    j, r, k = int(self.tp[t, T_JOINT]), int(self.tp[t, T_ROTOR]), self.tp[t, T_K]
                    delta = twist_for_torque(-g[j], self.tp[t, T_DRIVE:T_MOTOR])
                    q[r] = k * (q[j] - delta)
            self.state[S_STUCK, : len(self.tp)] = 1.0
        self.state[S_ON, : len(self.tp)] = 1.0
        self.cmd[:] = 0.0

    def step(self, current_cmd=None) -> None:
        """Advance one period with motor current commands (A), one per transmission."""
        if current_cmd is not None:
            self.cmd[:] = current_cmd
        plant_step(self.pk, self.ws, self.tp, self.state, self.cmd, self.dt, self.substeps,
                   self.scratch)
