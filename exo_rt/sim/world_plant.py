"""The plant model ``world``: the rigid bodies in MuJoCo (Todorov, Erez & Tassa 2012), the
drives exo-rt's own (docs/world.md, "The world as a plant").

Two scenes (:class:`Room`): the **test stand** — the pelvis welded to the world, no floor,
today's hanging leg, so that every figure measured on ``harmonic_drive`` can be measured again
here — and the **floor**: the pelvis free in x, z and pitch, the feet on the floor, a chair
behind them (:mod:`exo_rt.sim.world.room`; docs/world.md, "The floor scene").

How it is split.

- **MuJoCo: the rigid bodies.** The MuJoCo model is built (:func:`exo_rt.sim.world.build_world`)
  from the robot's mechanism with every rotor *released* into a hinge of its own
  (:func:`exo_rt.dynamics.couplings.released`, as ``harmonic_drive`` integrates them): each
  rotor is a MuJoCo body on its carrier, turning about its own axis — its mass, its inertia,
  its coupling to its carrier's rotation and its gyroscopic terms are MuJoCo's, and nothing is
  folded into ``armature`` (the world builder's fold, for a model whose rotors follow their
  joints rigidly, would count the reflected inertia a second time here). Each integration stage
  MuJoCo computes the joint-space mass matrix M (``mj_fullM``) and the bias forces h
  (``qfrc_bias``: Coriolis, centrifugal, gravity) at the stage's (q, q̇), called from compiled
  code through MuJoCo's C API — where they change: a sub-step's first stage is at the (q, q̇)
  its contacts' ``mj_forward`` computed them at, and takes them from there (bit for bit the
  same: one of a sub-step's five evaluations saved, the floor's period 8–12 % cheaper in
  paired before/after runs, ``exo_2leg`` standing on the floor, min of 15 rounds of 300).
- **exo-rt: the drives.** The motor current loop, the flexspline's compliance and hysteresis,
  the wave generator's friction with exact stick–slip and the power-off brake are
  ``harmonic_drive``'s own functions (:mod:`exo_rt.sim.plant`), unchanged: its step
  (:func:`exo_rt.sim.plant.plant_step`, RK4 sub-steps) calls the accelerations where the plant's
  scratch says they start, and here that is :func:`_world_accelerations` — the drives'
  generalized forces (flexspline torque on joint and rotor, motor torque, sliding friction,
  ST_EXT) applied to MuJoCo's M and h, with the locked coordinates (stuck rotors, clamped
  outputs) held exactly.

Why not ``mj_step`` with the drive torques in ``qfrc_applied``: a flexspline is a stiff spring
between a joint and its rotor (ω ≈ 260–350 rad/s); a torque written once per MuJoCo step and
held over its integrator's stages is explicit in that spring and pumps energy into it (the
step's map of a linear spring has determinant 1 + (ω·h)²/2; measured, ``exo_leg`` coasting
under MuJoCo's RK4 at 0.5 ms gains 1 J in 0.18 s and goes unstable at 0.72 s:
``tools/bench_world.py``), and MuJoCo's dry friction (``frictionloss``) is a soft constraint,
not the exact stick–slip that holds a leg at zero current. Evaluating the drives at every
stage of one integrator keeps both, and leaves MuJoCo every rigid-body term. On the floor,
MuJoCo's contact forces are solved once per sub-step (:func:`_contacts`: ``mj_forward`` with the
drives' forces applied) and held over its stages, as soft contacts (5 ms) allow.

MuJoCo is called from compiled code with no Python between: a MuJoCo error there (``mju_error``,
e.g. its arena full) would end the process, not raise. The stages' calls (kinematics, the
mass matrix, RNE) take nothing from the arena, its usual cause; the floor's ``mj_forward``
does, for its contacts, which the room bounds: only the feet touch the floor and only the
thighs the seat, at most two contacts each (:mod:`exo_rt.sim.world.scene`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from exo_rt.actuators.harmonic_drive import twist_for_torque
from exo_rt.dynamics.couplings import released
from exo_rt.jit import address, c_call_at, njit
from exo_rt.model.mechanism import Mechanism
from exo_rt.sim import plants
from exo_rt.sim.plant import (
    ST_ROWS,
    SUBSTEPS,
    T_DRIVE,
    T_MOTOR,
    X_F,
    X_FN,
    X_H,
    X_KIN,
    X_ROWS,
    X_T,
    HarmonicDrivePlant,
    _forces,
    _substep,
    kinematic_error,
    new_scratch,
    solve_locked,
    stiffness_energy,
    twist,
)
from exo_rt.sim.plants import ST_Q, ST_V, T_JOINT, T_K, T_ROTOR

# --- rows of the world plant's ``model`` array (read-only in its kernel)
W_PTR = 0  # the addresses of MuJoCo's model, data and the C functions called (_P_*)
W_QPOS = 1  # per plant coordinate: its index in ``data`` (a view of MuJoCo's qpos …)
W_QVEL = 2  # … of its qvel …
W_BIAS = 3  # … of its qfrc_bias …
W_DOF = 4  # … its dof in MuJoCo's order (the dense M's row and column) …
W_APPLIED = 5  # … of its qfrc_applied …
W_CONSTRAINT = 6  # … of its qfrc_constraint …
W_DAMPING = 7  # … and the passive wearer's damping on it (N·m·s/rad; 0 off the joints)
W_ROOM = 8  # the room's scalars (R_*)
W_STIFF = 9  # per plant coordinate: a passive spring on it (N·m/rad; the ankles') …
W_REST = 10  # … towards this angle (rad; the ankles' rest)
W_ROWS = 11
_P_MODEL, _P_DATA, _P_KIN, _P_COMPOS, _P_MAKEM, _P_COMVEL, _P_RNE, _P_FULLM, _P_FORWARD = range(9)
_N_PTR = 9
# W_ROOM: 1.0 on the floor (contacts each sub-step); the base's first coordinate in the
# plant's q; the pitch stabiliser's stiffness (N·m/rad) and damping (N·m·s/rad); the
# body-weight support's upward force on the pelvis (N)
R_FLOOR, R_BASE, R_KP, R_KD, R_SUPPORT = range(5)
# … and, for a one-leg exoskeleton, the wearer's other leg (:func:`_other_leg_target`): its
# hip's coordinate (its knee's follows; −1: none), the exoskeleton leg's hip and knee
# coordinates it follows, the wearer's own stiffness (N·m/rad) and damping (N·m·s/rad) at hip
# and knee, the delay while walking (s: half the wearer's stride period), the delay line's
# sample period (s) and length (samples), and how far the exoskeleton's shank leaves the
# vertical (|hip − knee|, rad) when it steps
(R_OTHER, R_MIRROR_HIP, R_MIRROR_KNEE, R_OTHER_KP_HIP, R_OTHER_KD_HIP, R_OTHER_KP_KNEE,
 R_OTHER_KD_KNEE, R_DELAY, R_SAMPLE, R_LINE, R_STEPPING) = range(5, 16)
# the wearer's other leg's hip and knee: stiffness (N·m/rad) and damping (N·m·s/rad) towards
# its target. A stand-in for the wearer's muscles, plan and impedance together (the walker,
# exo_rt/sim/walker.py, has both: its leg's inverse dynamics, and van der Kooij et al. 2022's
# swing impedance about it — hip 50, knee 1.75 N·m/rad — which alone would let a stance knee
# fold): as stiff as the floor scene's other joint stand-ins (3000 N·m/rad), so that the stance
# leg sags < 1° under the carried weight (docs/world.md, "The one-leg exoskeleton")
OTHER_LEG = ((3000.0, 100.0), (3000.0, 100.0))
STEPPING = 0.05  # rad: the exoskeleton's shank this far off the vertical (|hip − knee|) steps
# … and the chair a therapist keeps behind the wearer (``seat_follows``): its centre's x in
# MuJoCo's data (the seat's mocap position; −1: the chair stays where it was put), and how far
# (m) the pelvis may get ahead of that centre before the chair is pulled along
R_SEAT, R_SEAT_LEASH = range(16, 18)
# … and the shortest half stride the wearer walks (s: at their fastest speed) — a one-leg
# exoskeleton's wearer's other leg takes its delay from the strides it sees, not shorter
R_FAST = 18
R_WIDTH = 19
SEAT_SLACK = 0.02  # m: the chair this much further back than where a wearer standing up left it
ST_CONTACT = ST_ROWS  # the world's own state row: MuJoCo's contact forces (generalized, N·m
# or N) at the sub-step's start, held over its stages
ST_OTHER = ST_ROWS + 1  # the other leg's target and its delay line's bookkeeping (O_*)
ST_STRIDE = ST_ROWS + 2  # the stride the other leg measures on the exoskeleton's hip (S_*)
ST_LINE = ST_ROWS + 3  # from here: the delay line, (hip, knee) rad per sample, row-major
ST_WORLD_ROWS = ST_ROWS + 3  # … plus the delay line's rows (:func:`_line_rows`)
# ST_OTHER's columns: the target's hip and knee (rad) and their rates (rad/s) this sub-step;
# the plant's clock (s since its reset); the samples written; the clock until which the leg
# walks (the last sample whose shank was off the vertical, the exoskeleton stepping, + R_DELAY)
O_HIP, O_KNEE, O_HIP_V, O_KNEE_V, O_CLOCK, O_WRITTEN, O_UNTIL = range(7)
O_WIDTH = 7
# ST_STRIDE's columns (:func:`_other_leg_stride`): the sample time (s) of the exoskeleton hip's
# last rise through the level (0: none yet in this walk; negative: the level moved after it,
# so the next period spans two levels and is none); the hip at the previous sample (rad); its
# highest and lowest angle since that rise (rad); half the last stride's period (s; 0: none
# measured — R_DELAY); the delay in use (s; 0: R_DELAY), slewed towards that half period; the
# level the next rise is to cross (rad). Seven: a one-leg world's rows are at least seven wide
# (the leg's hip and knee, the pelvis's three, the other leg's two)
S_PEAK, S_PREV_Q, S_HI, S_LO, S_GOAL, S_DELAY, S_LEVEL = range(7)
S_WIDTH = 7
LEVEL_BAND = 0.2  # of a stride's hip range: the level kept while this far inside it
PEAK_RISE = 0.35  # rad: above the walk's lowest yet, the first stride's mid-range (the
# flat-foot gait's hip spans 0.6–0.8 rad a stride, its smaller maximum mid-stride rises
# 0.2–0.3 rad above its lowest)
DELAY_SLEW = 0.25  # s of delay per s: how fast the other leg's delay follows a new pace


@njit(cache=True, python=False)
def _world_accelerations(model, data, transmissions, state, q, v, scratch, acc):
    """q̈ with the locked coordinates held (q̈ = 0 there): M_ff a_f = Q_f − h_f, with M and h
    MuJoCo's at (q, q̇) and Q the drives' forces (:func:`exo_rt.sim.plant._forces`).

    Leaves M (rows 0…n−1 of scratch, exo-rt's order), h (X_H) and Q (X_F) as
    ``harmonic_drive``'s accelerations do: its stick–slip reads them.
    """
    n = q.shape[0]
    x0 = 2 * n
    m = scratch[:n]
    mff = scratch[n:x0]  # (MuJoCo's dense M first: its dofs' order)
    h = scratch[x0 + X_H]
    # MuJoCo's terms are computed again only where they change: a sub-step's first stage is at
    # the (q, q̇) its contacts' mj_forward computed them at (but for a rotor that stuck), and
    # the stick–slip decision may evaluate that stage more than once — the same numbers
    kept = scratch[x0 + X_KIN, 0] > 0.5  # MuJoCo's terms are those of its qpos and qvel
    moved = False
    sped = False
    for i in range(n):
        k = int(model[W_QPOS, i])
        if data[k] != q[i]:
            data[k] = q[i]
            moved = True
        k = int(model[W_QVEL, i])
        if data[k] != v[i]:
            data[k] = v[i]
            sped = True
    mptr = np.int64(model[W_PTR, _P_MODEL])
    dptr = np.int64(model[W_PTR, _P_DATA])
    # the rigid bodies only: no collision, no constraint (the contacts are the sub-step's)
    if moved or not kept:  # the position terms: kinematics, inertias, M
        c_call_at(np.int64(model[W_PTR, _P_KIN]), mptr, dptr)
        c_call_at(np.int64(model[W_PTR, _P_COMPOS]), mptr, dptr)
        c_call_at(np.int64(model[W_PTR, _P_MAKEM]), mptr, dptr)
    if moved or sped or not kept:  # the velocity terms: h (qfrc_bias)
        c_call_at(np.int64(model[W_PTR, _P_COMVEL]), mptr, dptr)
        c_call_at(np.int64(model[W_PTR, _P_RNE]), mptr, dptr, np.int32(0),
                  np.int64(data.ctypes.data)
                  + np.int64(8 * int(model[W_BIAS, 0] - model[W_DOF, 0])))
    scratch[x0 + X_KIN, 0] = 1.0
    c_call_at(np.int64(model[W_PTR, _P_FULLM]), mptr, dptr, np.int64(mff.ctypes.data))
    for i in range(n):
        di = int(model[W_DOF, i])
        h[i] = data[int(model[W_BIAS, i])]
        for j in range(n):
            m[i, j] = mff.flat[di * n + int(model[W_DOF, j])]
    f = scratch[x0 + X_F]
    _forces(transmissions, state, q, v, scratch[x0 + X_T], f)
    _room_forces(model, state, q, v, f)
    for i in range(n):
        f[i] += state[ST_CONTACT, i]
    solve_locked(scratch, n, acc)


@njit(cache=True, inline="always")
def _room_forces(model, state, q, v, f):
    """What the room adds to the generalized forces (N·m, N): the passive wearer's joint
    damping, the ankles' springs and damping, and on the floor the pelvis-pitch stabiliser
    (towards the trunk upright, pitch 0), the body-weight support and the wearer's own torques
    on their other leg (towards :func:`_other_leg_target`'s target)."""
    for i in range(q.shape[0]):
        f[i] -= model[W_DAMPING, i] * v[i] + model[W_STIFF, i] * (q[i] - model[W_REST, i])
    if model[W_ROOM, R_FLOOR] > 0.5:
        b = int(model[W_ROOM, R_BASE])
        f[b + 1] += model[W_ROOM, R_SUPPORT]
        f[b + 2] -= model[W_ROOM, R_KP] * q[b + 2] + model[W_ROOM, R_KD] * v[b + 2]
        o = int(model[W_ROOM, R_OTHER])
        if o >= 0:
            t = state[ST_OTHER]
            hip, knee = int(model[W_ROOM, R_MIRROR_HIP]), int(model[W_ROOM, R_MIRROR_KNEE])
            if t[O_CLOCK] >= t[O_UNTIL]:  # not walking: together,
                qh, qk, vh, vk = q[hip], q[knee], v[hip], v[knee]  # at this very stage
            else:  # walking: half a stride late (the sub-step's target)
                qh, qk, vh, vk = t[O_HIP], t[O_KNEE], t[O_HIP_V], t[O_KNEE_V]
            f[o] += (model[W_ROOM, R_OTHER_KP_HIP] * (qh - q[o])
                     + model[W_ROOM, R_OTHER_KD_HIP] * (vh - v[o]))
            f[o + 1] += (model[W_ROOM, R_OTHER_KP_KNEE] * (qk - q[o + 1])
                         + model[W_ROOM, R_OTHER_KD_KNEE] * (vk - v[o + 1]))


@njit(cache=True, inline="always")
def _other_leg_target(model, state, q, v, h):
    """The wearer's other leg's target at the start of a sub-step of h (s), into ST_OTHER: a
    walker's — the exoskeleton leg's hip and knee half a stride earlier (R_DELAY s) while it
    walks, the same instant otherwise (sitting down, standing up, standing).

    The delay line (rows ST_LINE…, allocated with the state) holds the exoskeleton leg's
    (hip, knee) sampled every R_SAMPLE s of the plant's own clock (which follows the sub-steps,
    whatever length the periods have: a sample due inside a sub-step is taken back to its
    instant by the joint's velocity); the target is its linear interpolation at clock −
    R_DELAY, the rate the slope between its two samples. The leg walks while the exoskeleton's
    shank has been off the vertical (|hip − knee| > R_STEPPING: its postures and the moves
    between them keep hip = knee, a step does not) within the last R_DELAY s: the delay comes in
    when the first step begins, the other leg still where the exoskeleton's leg stood, and goes
    once both have been upright for R_DELAY s — both switches between equal targets."""
    n = q.shape[0]
    t, s = state[ST_OTHER], state[ST_STRIDE]
    hip, knee = int(model[W_ROOM, R_MIRROR_HIP]), int(model[W_ROOM, R_MIRROR_KNEE])
    ts, line = model[W_ROOM, R_SAMPLE], int(model[W_ROOM, R_LINE])
    delay = _other_leg_delay(model, s, h, (line - 3) * ts)
    while t[O_WRITTEN] * ts <= t[O_CLOCK] + 1e-9 * ts:  # the samples due by now
        k = int(t[O_WRITTEN]) % line
        late = t[O_CLOCK] - t[O_WRITTEN] * ts  # s (0 when the sub-steps meet the samples)
        state[ST_LINE + (2 * k) // n, (2 * k) % n] = q[hip] - v[hip] * late
        state[ST_LINE + (2 * k + 1) // n, (2 * k + 1) % n] = q[knee] - v[knee] * late
        _other_leg_stride(model, s, t[O_WRITTEN] * ts, q[hip] - v[hip] * late,
                          t[O_CLOCK] < t[O_UNTIL], (line - 3) * ts)
        if abs(q[hip] - q[knee]) > model[W_ROOM, R_STEPPING]:
            t[O_UNTIL] = t[O_CLOCK] + delay
        t[O_WRITTEN] += 1.0
    at = max(t[O_CLOCK] - delay, 0.0) / ts
    last = int(t[O_WRITTEN]) - 1  # the newest sample
    j = max(min(int(at), last - 1), 0)
    frac = min(max(at - j, 0.0), 1.0)
    a, b = j % line, min(j + 1, last) % line
    for c in range(2):
        lo = state[ST_LINE + (2 * a + c) // n, (2 * a + c) % n]
        hi = state[ST_LINE + (2 * b + c) // n, (2 * b + c) % n]
        t[O_HIP + c] = lo + frac * (hi - lo)
        t[O_HIP_V + c] = (hi - lo) / ts
    t[O_CLOCK] += h


@njit(cache=True, inline="always")
def _other_leg_delay(model, s, h, longest):
    """The other leg's delay (s) for a sub-step of h (s): the one in use (ST_STRIDE's S_DELAY;
    R_DELAY, the wearer's default pace, until one is measured) moved towards half the last
    stride's period by at most DELAY_SLEW·h — a new pace comes in over a second or so, the
    target never jumps — and at most ``longest`` (what the delay line holds)."""
    goal = s[S_GOAL] if s[S_GOAL] > 0.0 else model[W_ROOM, R_DELAY]
    d = s[S_DELAY] if s[S_DELAY] > 0.0 else model[W_ROOM, R_DELAY]
    step = DELAY_SLEW * h
    d = min(d + min(max(goal - d, -step), step), longest)
    s[S_DELAY] = d
    return d


@njit(cache=True, inline="always")
def _other_leg_stride(model, s, now, qh, walking, longest):
    """The exoskeleton leg's stride, measured as a walker would feel it (ST_STRIDE, one call a
    delay-line sample at ``now`` s of the plant's clock, its hip at ``qh`` rad): the time
    between its hip's rises through one level — a steep crossing, once a stride, where a
    gait's hip maximum is flat (a heel strike's jolt moves it by a tenth of a stride) and a
    smaller maximum mid-stride stays below the level. The level is ``PEAK_RISE`` above the
    walk's lowest hip at its first rise and stays while it lies in the middle of each
    stride's range (LEVEL_BAND), else it moves to the mid-range (and the period across the
    move is none). A rise sooner than three quarters of the wearer's fastest stride
    (1.5·R_FAST) or half the stride in use after the last is none. Half the period, up to
    ``longest``, becomes the delay's goal. Outside a walk the measure starts again; the goal
    stays (the next walk starts at the last pace)."""
    if not walking:
        s[S_PEAK], s[S_HI], s[S_LO] = 0.0, qh, qh
    else:
        s[S_HI], s[S_LO] = max(s[S_HI], qh), min(s[S_LO], qh)
        rose = s[S_PEAK] != 0.0  # a rise already in this walk
        level = s[S_LEVEL] if rose else s[S_LO] + PEAK_RISE
        period = now - abs(s[S_PEAK])
        if s[S_PREV_Q] < level <= qh and not (
                rose and period < max(1.5 * model[W_ROOM, R_FAST], s[S_DELAY])):
            following = level
            if rose:
                if s[S_PEAK] > 0.0 and period <= 2.0 * longest:  # (one level: a period)
                    s[S_GOAL] = 0.5 * period
                span = s[S_HI] - s[S_LO]  # the stride's range (rad)
                if not s[S_LO] + LEVEL_BAND * span <= level <= s[S_HI] - LEVEL_BAND * span:
                    following = 0.5 * (s[S_HI] + s[S_LO])
            s[S_PEAK] = now if following == level else -now
            s[S_LEVEL] = following
            s[S_HI] = s[S_LO] = qh
    s[S_PREV_Q] = qh


@njit(cache=True, python=False)
def _contacts(model, data, transmissions, state, q, v, scratch):
    """MuJoCo's contact (and joint-stop) forces at the sub-step's start into ST_CONTACT: the
    drives' and the room's forces written into ``qfrc_applied``, ``mj_forward`` solves the
    constraints, ``qfrc_constraint`` read back. Held over the sub-step's stages: the contacts
    are soft (a 5 ms time constant), a sub-step 0.1 ms."""
    n = q.shape[0]
    x0 = 2 * n
    f = scratch[x0 + X_F]
    _forces(transmissions, state, q, v, scratch[x0 + X_T], f)
    _room_forces(model, state, q, v, f)
    for i in range(n):
        data[int(model[W_QPOS, i])] = q[i]
        data[int(model[W_QVEL, i])] = v[i]
        data[int(model[W_APPLIED, i])] = f[i]
    c_call_at(np.int64(model[W_PTR, _P_FORWARD]), np.int64(model[W_PTR, _P_MODEL]),
              np.int64(model[W_PTR, _P_DATA]))
    scratch[x0 + X_KIN, 0] = 1.0  # (its terms are those of q, q̇: the first stage's)
    for i in range(n):
        state[ST_CONTACT, i] = data[int(model[W_CONSTRAINT, i])]


@njit(cache=True, inline="always")
def _carry_seat(model, data, q):
    """The chair a therapist keeps behind the wearer, on a one-way leash: it never comes
    closer, and once the pelvis is ``R_SEAT_LEASH`` ahead of its centre it is pulled along the
    floor. The leash is where the chair was, behind a wearer who stood up from it with their
    feet where they sat (plus :data:`SEAT_SLACK`): standing up leaves it in place, a walk
    pulls it along, and a wearer who stops and sits down (the stand-up reversed) finds it
    under their thighs as they left it."""
    k = int(model[W_ROOM, R_SEAT])
    reach = q[int(model[W_ROOM, R_BASE])] - model[W_ROOM, R_SEAT_LEASH]
    if data[k] < reach:
        data[k] = reach


@njit(cache=True)
def world_step(model, data, transmissions, state, cmd, dt, substeps, scratch):
    """Advance the world plant by dt (s) in ``substeps`` sub-steps: on the floor, MuJoCo's
    contact forces at each sub-step's start (:func:`_contacts`), then ``harmonic_drive``'s
    sub-step (RK4, stick–slip) with the world's accelerations. Allocates nothing."""
    q = state[ST_Q]
    v = state[ST_V]
    x0 = 2 * q.shape[0]
    if scratch[x0 + X_FN, 0] == 0.0:
        raise ValueError("the plant's scratch does not say where its accelerations start")
    h = dt / substeps
    floor = model[W_ROOM, R_FLOOR] > 0.5
    other = floor and model[W_ROOM, R_OTHER] >= 0.0
    if floor and model[W_ROOM, R_SEAT] >= 0.0:
        _carry_seat(model, data, q)
    # between steps MuJoCo's data is anyone's (a reset, a read-out): its terms are trusted
    # only from what this step computed itself
    scratch[x0 + X_KIN, 0] = 0.0
    for _ in range(substeps):
        if other:
            _other_leg_target(model, state, q, v, h)
        if floor:
            _contacts(model, data, transmissions, state, q, v, scratch)
        _substep(model, data, transmissions, state, cmd, q, v, h, scratch)
    scratch[x0 + X_KIN, 0] = 0.0


class _Keep(bytearray):
    """A buffer for an array of addresses that holds what they point at (``refs``): the
    arrays in a plant's ``args`` keep MuJoCo's model and data alive after the plant is gone."""


def _c_function(lib, name: str) -> int:
    import ctypes
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


@dataclass(frozen=True)
class Room:
    """Where the world plant's exoskeleton is (docs/world.md; the top config's
    ``simulation:`` keys of the same names).

    ``scene``: ``test_stand`` (the pelvis welded to the world, no floor) or ``floor`` (the
    pelvis free in x, z and pitch; the floor, a chair). ``seat_height`` (m; 0: no chair): the
    chair's top, lowered to the thighs if they are lower at the start. ``stabiliser``: the
    pelvis-pitch stiffness (N·m/rad) and damping (N·m·s/rad) that hold the trunk upright as a
    wearer's crutches do. ``support``: the body-weight support, the fraction of the whole
    weight a harness lifts at the pelvis (0–1). ``wearer_damping``: the passive wearer's joint
    damping (N·m·s/rad, on every joint of the robot). ``ankle_stiffness`` (N·m/rad; 0: the
    ankles fixed, as the robot file has them) and ``ankle_damping`` (N·m·s/rad): each foot on a
    sprung hinge at the ankle (:func:`exo_rt.sim.world.room.foot`), a spring ankle as the
    world's own (the controller's model keeps the ankle fixed); ``ankle_rest`` (rad,
    dorsiflexion < 0): the angle the spring holds an unloaded foot at, as an ankle-foot
    orthosis's dorsiflexion assist lifts the toe in swing. ``seat_follows``: the chair moves
    along the floor behind a standing or walking wearer and stops when they sit down
    (:func:`_carry_seat`), so a session that walks away from it sits down on it again.
    """

    scene: str = "test_stand"
    seat_height: float = 0.45
    stabiliser: tuple[float, float] = (3000.0, 300.0)
    support: float = 0.0
    wearer_damping: float = 0.0
    ankle_stiffness: float = 0.0
    ankle_damping: float = 0.0
    ankle_rest: float = 0.0
    seat_follows: bool = False

    @classmethod
    def from_options(cls, options: dict) -> Room:
        """The room of the top config's ``simulation:`` keys (``plant_options()``)."""
        o = dict(options)
        kp = o.pop("stabiliser_stiffness", cls.stabiliser[0])
        kd = o.pop("stabiliser_damping", cls.stabiliser[1])
        return cls(stabiliser=(float(kp), float(kd)), **o)


@plants.model("world", doc="rigid bodies in MuJoCo — on the test stand (pelvis fixed) or on "
                           "the floor with a chair — harmonic_drive's drives, motors and "
                           "friction (RK4 sub-steps)")
class WorldPlant(HarmonicDrivePlant):
    """The leg's rigid bodies in MuJoCo, its drives exo-rt's (the module's docstring): the
    same interface, state layout, rows and kernel as :class:`HarmonicDrivePlant`, so a
    ``harmonic_drive`` run and a ``world`` run differ only in who computes M and h — and, on
    the floor, in the contacts, the pelvis's three coordinates and the room's forces.

    ``WorldPlant(mech, dt=1e-3, substeps=10, friction=True, hysteresis=True, room=Room())``.
    On the floor the plant's q is the robot's joints, the rotors, then the pelvis's x, z (m)
    and pitch (rad) (:attr:`base`). :attr:`world` is the compiled
    :class:`~exo_rt.sim.world.World` of the released mechanism and :attr:`mj_data` its
    ``MjData``.
    """

    SCENES = ("test_stand", "floor")
    kernel = staticmethod(world_step)
    has_room = True

    def __init__(self, mech: Mechanism, *, dt: float = 1e-3, substeps: int = SUBSTEPS,
                 friction: bool = True, hysteresis: bool = True,
                 room: Room | dict | None = None, scene: str | None = None) -> None:
        room = Room.from_options(room) if isinstance(room, dict) else (room or Room())
        if scene is not None:
            room = replace(room, scene=scene)
        if room.scene not in self.SCENES:
            raise ValueError(f"the world plant has no scene '{room.scene}' (it has "
                             f"{', '.join(self.SCENES)})")
        if not 0.0 <= room.support <= 1.0:
            raise ValueError("the body-weight support is a fraction of the weight, 0 … 1")
        self.room = room
        self.scene = room.scene
        super().__init__(mech, dt=dt, substeps=substeps, friction=friction,
                         hysteresis=hysteresis)
        # exo-rt's packed model of the same released mechanism (no pelvis) stays for checks
        # only — never in the step
        self._exo_model, self._exo_data = self.model, self.data
        self._attach()
        self.reset(np.zeros(mech.nq))

    @property
    def floor(self) -> bool:
        """Whether the exoskeleton stands in the room (the pelvis free) rather than on the
        test stand."""
        return self.scene == "floor"

    @property
    def base(self) -> np.ndarray:
        """The pelvis's x, z (m) and pitch (rad) in the room (a view; empty on the test
        stand)."""
        return self.state[ST_Q, self.mech.nq:self.mech.nq + 3]

    @property
    def other_leg(self) -> np.ndarray:
        """A one-leg exoskeleton's wearer's other leg: their hip and knee (rad; a view; empty
        where the exoskeleton has both legs or stands on the test stand)."""
        a = self.mech.nq + 3
        return self.state[ST_Q, a:a + self._extra[0]]

    @property
    def other_leg_delay(self) -> float:
        """s: how late the wearer's other leg follows the exoskeleton's leg while walking
        (half the stride period it measured, else the wearer's default pace's; 0 where there
        is no other leg)."""
        if not self._extra[0]:
            return 0.0
        d = float(self.state[ST_STRIDE, S_DELAY])
        return d if d > 0.0 else float(self.model[W_ROOM, R_DELAY])

    @property
    def other_leg_target(self) -> np.ndarray:
        """The wearer's other leg's target now: hip, knee (rad) — the exoskeleton leg's half a
        stride ago while it walks, else its own angles (a copy; empty without the leg)."""
        if not self._extra[0]:
            return np.zeros(0)
        t = self.state[ST_OTHER]
        if t[O_CLOCK] >= t[O_UNTIL]:
            return self.q[mirrored_of(self)].copy()
        return t[O_HIP:O_KNEE + 1].copy()

    @property
    def ankles(self) -> np.ndarray:
        """The feet's angles on their sprung ankles (rad, dorsiflexion < 0: the foot's toe up
        about the shank's y; a view; empty with the ankles fixed)."""
        a = self.mech.nq + 3 + self._extra[0]
        return self.state[ST_Q, a:a + self._extra[1]]

    # --- MuJoCo's side
    def _attach(self) -> None:
        """Build the MuJoCo model of the released mechanism and point the kernel at it."""
        import ctypes

        import mujoco

        from exo_rt.sim.world import build_world
        from exo_rt.sim.world.room import build_room

        plant_mech, room = released(self.robot), self.room
        h = self.dt / self.substeps
        if self.floor:
            world = build_room(plant_mech, _wearer(self.robot), seat_height=room.seat_height,
                               timestep=h, ankles=room.ankle_stiffness > 0.0)
        else:
            world = build_world(plant_mech, timestep=h)
        from exo_rt.sim.world.room import ankle_joints, mirrored, other_leg_joints

        oq, od = other_leg_joints(world)
        aq, ad = ankle_joints(world)
        nb = len(world.base_dof)
        n = self.mech.nq + nb + len(oq) + len(aq)
        self._extra = (len(oq), len(aq))  # the wearer's other leg's and the ankles' coordinates
        if world.model.nv != n or np.any(world.model.dof_armature):
            raise RuntimeError("the world's model must hold the plant's coordinates, rotors "
                               "as bodies and no armature")
        if len(oq) and n < max(O_WIDTH, S_WIDTH):  # (the other leg's rows hold these)
            raise RuntimeError(f"a one-leg world of {n} coordinates: at least "
                               f"{max(O_WIDTH, S_WIDTH)} expected")
        delay = _half_stride(self.robot) if self.floor and len(oq) else (0.0, 0.0, 0.0)
        line = int(np.ceil(delay[1] / self.dt)) + 3  # samples: the slowest walk's half stride
        rows = ST_WORLD_ROWS + _line_rows(line if len(oq) else 0, n)
        if self.state.shape[1] != n or self.state.shape[0] != rows:
            self.state = np.zeros((rows, n))
            self.scratch = new_scratch(n)
        self.world = world
        self.mj_data = d = world.new_data()
        arrays = (d.qpos, d.qvel, d.qfrc_bias, d.qfrc_applied, d.qfrc_constraint, d.mocap_pos)
        start = min(a.ctypes.data for a in arrays)  # one view of MuJoCo's buffer spans them
        end = max(a.ctypes.data + a.nbytes for a in arrays)
        if any((a.ctypes.data - start) % 8 for a in arrays):
            raise RuntimeError("MuJoCo's state and force arrays are not 8 bytes apart")
        buf = (ctypes.c_double * ((end - start) // 8)).from_address(start)
        buf.keep = (world.model, d)  # the view's base holds MuJoCo's model and data alive
        self.data = np.ctypeslib.as_array(buf)  # a view of MuJoCo's arrays: the kernel's data
        off = lambda a: (a.ctypes.data - start) // 8  # noqa: E731
        lib = ctypes.CDLL(str(Path(mujoco.__file__).parent / f"libmujoco.so.{mujoco.__version__}"))
        width = max(n, _N_PTR, R_WIDTH, O_WIDTH)
        keep = _Keep(8 * W_ROWS * width)  # the array's base holds what it points at
        keep.refs = (world.model, d, lib)
        model = np.frombuffer(keep).reshape(W_ROWS, width)
        model[W_PTR, :_N_PTR] = (world.model._address, d._address, *(
            _c_function(lib, f) for f in ("mj_kinematics", "mj_comPos", "mj_makeM",
                                          "mj_comVel", "mj_rne", "mj_fullM", "mj_forward")))
        qpos = np.concatenate([world.qpos, world.base_qpos, oq, aq])
        dof = np.concatenate([world.dof, world.base_dof, od, ad])
        self._addresses = (qpos, dof)
        model[W_QPOS, :n] = off(d.qpos) + qpos
        model[W_QVEL, :n] = off(d.qvel) + dof
        model[W_BIAS, :n] = off(d.qfrc_bias) + dof
        model[W_DOF, :n] = dof
        model[W_APPLIED, :n] = off(d.qfrc_applied) + dof
        model[W_CONSTRAINT, :n] = off(d.qfrc_constraint) + dof
        model[W_DAMPING, : self.n_joints] = room.wearer_damping
        model[W_DAMPING, n - len(aq):n] = room.ankle_damping
        model[W_STIFF, n - len(aq):n] = room.ankle_stiffness
        model[W_REST, n - len(aq):n] = room.ankle_rest
        if self.floor:
            weight = float(world.model.body_mass.sum()) * float(np.linalg.norm(
                world.model.opt.gravity))
            model[W_ROOM, :5] = (1.0, self.mech.nq, *room.stabiliser, room.support * weight)
            model[W_ROOM, R_OTHER] = self.mech.nq + 3 if len(oq) else -1.0
            if len(oq):
                model[W_ROOM, R_MIRROR_HIP:R_MIRROR_KNEE + 1] = mirrored(world)
                model[W_ROOM, R_OTHER_KP_HIP:R_OTHER_KD_KNEE + 1] = np.ravel(OTHER_LEG)
                model[W_ROOM, R_DELAY:R_STEPPING + 1] = (delay[0], self.dt, line, STEPPING)
                model[W_ROOM, R_FAST] = delay[2]
            model[W_ROOM, R_SEAT] = -1.0
            if room.seat_follows and room.seat_height > 0.0:
                seat = world.model.body("seat")
                model[W_ROOM, R_SEAT] = off(d.mocap_pos) + 3 * int(seat.mocapid[0])
        if not np.all(model[W_PTR, :_N_PTR] < 2**53):
            raise RuntimeError("an address does not fit a float64 exactly")
        model.flags.writeable = False
        self.model = model
        self._lib = lib
        _point_at_world(self.scratch)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for k in ("world", "mj_data", "data", "model", "_lib"):
            state.pop(k, None)
        return state

    def __setstate__(self, state: dict) -> None:
        """Unpickled (another process): MuJoCo's model and data are built again here."""
        self.__dict__.update(state)
        self._attach()
        if self.floor:
            self._place_seat()

    # --- what differs from harmonic_drive's
    @property
    def total_mass(self) -> float:
        """Everything in the world that moves (kg): exoskeleton, wearer, rotors."""
        return float(self.world.model.body_mass.sum())

    def reset(self, q_joints, v_joints=None, *, equilibrium: bool = True) -> None:
        """As :meth:`HarmonicDrivePlant.reset`; on the floor, also the pelvis upright where the
        posture's soles touch the floor and the chair under the thighs
        (:func:`exo_rt.sim.world.room.place`); at rest with ``equilibrium``, settled there with
        the flexsplines carrying the joints' static torques (:meth:`_settle`)."""
        if not hasattr(self, "world"):  # the base class's constructor: not attached yet
            return super().reset(q_joints, v_joints, equilibrium=equilibrium)
        super().reset(q_joints, v_joints, equilibrium=equilibrium and not self.floor)
        # (the state zeroed: the other leg's delay line empty, its clock at 0, not walking)
        if self.floor:
            self._place_seat()
            if equilibrium and not np.any(self.state[ST_V]):
                self._settle()

    def _settle(self) -> None:
        """At rest on the floor: the pelvis where the floor and the chair carry the wearer
        (:func:`exo_rt.sim.world.room.settle`) and the flexsplines pre-twisted to hold the
        joints' share — the plant starts in static equilibrium instead of dropping onto its
        drives (measured without it: 334 N·m on a hip in the first milliseconds)."""
        from exo_rt.sim.world.room import settle

        n, q, rows = self.mech.nq, self.state[ST_Q], self.transmissions
        joints, rotors = rows[:, T_JOINT].astype(int), rows[:, T_ROTOR].astype(int)
        base, tau, ankles = settle(
            self.world, q[:n], q[n:n + 3], joints=joints, rotors=rotors, k=rows[:, T_K],
            stabiliser=self.room.stabiliser, support=float(self.model[W_ROOM, R_SUPPORT]),
            ankle=(self.room.ankle_stiffness, self.room.ankle_damping, self.room.ankle_rest))
        q[n:n + 3] = base
        self.ankles[:] = ankles
        for t in range(len(rows)):
            drive = rows[t, T_DRIVE:T_MOTOR]
            delta = twist_for_torque(-tau[t], drive)
            for _ in range(3):  # the kinematic error moves with the rotor: a fixed point
                q[rotors[t]] = rows[t, T_K] * (q[joints[t]] - delta
                                               - kinematic_error(q[rotors[t]], drive)[0])

    def _place_seat(self) -> None:
        from exo_rt.sim.world.room import move_seat, place

        q = self.state[ST_Q]
        base, top, front, feet, ankles = place(self.world, q[: self.mech.nq],
                                               self.room.seat_height)
        n = self.mech.nq
        if not np.any(self.state[ST_V, n:]) and not np.any(q[n:]):
            q[n:n + 3] = base
            self.ankles[:] = ankles
            if self._extra[0]:  # the wearer's other leg as the exoskeleton's leg
                from exo_rt.sim.world.room import mirrored

                self.other_leg[:] = q[mirrored(self.world)]
        if self.room.seat_height > 0.0:
            move_seat(self.world, top, front, self.mj_data)
        self.seat = (top, front) if self.room.seat_height > 0.0 else None
        if self.model[W_ROOM, R_SEAT] >= 0.0:  # standing up puts the pelvis over the feet
            half_depth = float(self.world.model.geom("seat").size[0])
            self.model.flags.writeable = True
            self.model[W_ROOM, R_SEAT_LEASH] = feet - front + SEAT_SLACK + half_depth
            self.model.flags.writeable = False

    def energy(self) -> float:
        """Kinetic + gravity (MuJoCo's, ``mj_energyPos``/``mj_energyVel``: gravity's zero at
        the world origin) + the flexsplines' and the sprung ankles' elastic energy (J)."""
        import mujoco

        w, d = self.world, self.mj_data
        qpos, dof = self._addresses
        d.qpos[qpos] = self.q
        d.qvel[dof] = self.v
        mujoco.mj_kinematics(w.model, d)
        mujoco.mj_comPos(w.model, d)
        mujoco.mj_energyPos(w.model, d)
        mujoco.mj_comVel(w.model, d)
        mujoco.mj_energyVel(w.model, d)
        spring = sum(stiffness_energy(twist(self.transmissions, t, self.q)[0],
                                      self.transmissions[t, T_DRIVE:T_MOTOR])
                     for t in range(len(self.transmissions)))
        rest = self.ankles - self.room.ankle_rest
        spring += 0.5 * self.room.ankle_stiffness * float(rest @ rest)
        return float(d.energy[0] + d.energy[1] + spring)

    def _pretwist(self) -> None:
        """Rotor angles whose flexsplines carry the joints' static gravity torques, gravity
        from MuJoCo (``qfrc_bias`` at rest) — as :meth:`HarmonicDrivePlant._pretwist`."""
        if not hasattr(self, "world"):  # the base class's constructor: not attached yet
            return
        import mujoco

        w, d = self.world, self.mj_data
        q, rows = self.state[ST_Q], self.transmissions
        for _ in range(5):
            d.qpos[w.qpos] = q[: self.mech.nq]
            d.qvel[:] = 0.0
            mujoco.mj_fwdPosition(w.model, d)
            mujoco.mj_fwdVelocity(w.model, d)
            g = d.qfrc_bias[w.dof]
            for t in range(len(rows)):
                j, r, k = int(rows[t, T_JOINT]), int(rows[t, T_ROTOR]), rows[t, T_K]
                drive = rows[t, T_DRIVE:T_MOTOR]
                delta = twist_for_torque(-g[j], drive)
                q[r] = k * (q[j] - delta - kinematic_error(q[r], drive)[0])

    def contact_forces(self) -> dict[str, np.ndarray]:
        """Each contact geom's force from the floor or the seat (N, world x, y, z), at the
        state of the last sub-step's contact solve: {geom name: force}, summed over its
        contacts."""
        import mujoco

        m, d = self.world.model, self.mj_data
        out: dict[str, np.ndarray] = {}
        f = np.zeros(6)
        for i in range(d.ncon):
            c = d.contact[i]
            mujoco.mj_contactForce(m, d, i, f)
            world_f = c.frame.reshape(3, 3).T @ f[:3]  # on geom2 from geom1; the floor is 1
            g1, g2 = (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in c.geom)
            body = g2 if g1 in ("floor", "seat") else g1
            sign = 1.0 if g1 in ("floor", "seat") else -1.0
            out[body] = out.get(body, np.zeros(3)) + sign * world_f
        return out


def _wearer(robot: Mechanism) -> tuple[float, float, str]:
    """(mass kg, height m, sex) of the robot file's wearer: the upper body on the pelvis."""
    from exo_rt.yamlio import read_yaml

    top = read_yaml(Path(str(robot.source))).value
    w = top.get("wearer") if isinstance(top, dict) else None
    if w is None or not isinstance(w.value, dict):
        raise ValueError(f"'{robot.source}' names no wearer: the floor scene needs the "
                         "wearer's mass, height and sex (its 'wearer:' section)")
    w = w.value
    return float(w["mass"].value), float(w["height"].value), str(w.get("sex").value
                                                                 if "sex" in w else "male")


def _half_stride(robot: Mechanism) -> tuple[float, float, float]:
    """(s, s, s): half the stride period of the robot file's wearer at their default walking
    speed, at their slowest and at their fastest — a one-leg exoskeleton's wearer's other
    leg's delay until it has measured a stride, the longest its delay line must hold, and the
    shortest a measured one may be. The period is the walk ratio's
    cadence for the wearer's height (:func:`exo_rt.control.gait_speed.pace`, the same for the
    normal and the flat-foot gait: ``flat_foot.walk``'s period is ``120 / cadence``); the
    speeds are the wearer section's ``speed:`` (default, min, max), else the wearer profile's
    defaults (:class:`exo_rt.schema.wearer.Speed`)."""
    from exo_rt.control import flat_foot
    from exo_rt.schema.wearer import Speed
    from exo_rt.yamlio import read_yaml

    _, height, _ = _wearer(robot)
    top = read_yaml(Path(str(robot.source))).value
    given = top["wearer"].value.get("speed")
    given = given.value if given is not None and isinstance(given.value, dict) else {}
    speed = {k: float(given[k].value) if k in given else float(getattr(Speed(), k))
             for k in ("default", "min", "max")}
    return tuple(flat_foot.walk(speed[k], height).period / 2.0 for k in ("default", "min", "max"))


def mirrored_of(plant: WorldPlant) -> np.ndarray:
    """The plant coordinates (hip, knee) of the exoskeleton leg a wearer's other leg follows."""
    return plant.model[W_ROOM, R_MIRROR_HIP:R_MIRROR_KNEE + 1].astype(np.int64)


def _line_rows(samples: int, n: int) -> int:
    """State rows (of n columns) that hold a delay line of ``samples`` (hip, knee) pairs."""
    return -(-2 * samples // n)


def _point_at_world(scratch: np.ndarray) -> None:
    """The plant step's accelerations: :func:`_world_accelerations` (compiled or loaded now)."""
    model, vec, mat = plants.STEP_SIGNATURE.args[:3]
    n = (scratch.shape[0] - X_ROWS) // 2
    scratch[2 * n + X_FN, 0] = address(_world_accelerations,
                                       (model, vec, mat, mat, vec, vec, mat, vec))
