"""A simulated wearer who walks by themselves: model-in-the-loop's leg is moved by the wearer's
own joint torques along their own gait at their own cadence, so that a gait-phase estimate and
the assistance laws are tested against a leg that moves the exoskeleton — not one the
exoskeleton moves (:func:`exo_rt.sim.mil.run_mil`'s ``walker``).

The walker (:class:`Walker`, compiled for one run by :func:`compile_walker`):

- **their gait**: the robot's normal gait — the cycle's own Fourier rows (``cycle.coeffs``:
  :func:`exo_rt.control.trajectory.gait_coefficients` with the joint kinds and amplitude of
  the controller file) — and each joint's phase offset in strides, the cycle's
  ``v[V_OFFSET]`` row (the right leg half a stride late on two-leg robots), so the walker
  and the controller's reference agree;
- **their cadence**: a schedule of (t s, stride period s) steps; the period changes stepwise
  at those times and the phase integrates φ̇ = 1/period exactly (the gait's angle stays
  continuous, its velocity steps with the cadence). A period of ``inf`` (cadence 0) is
  standing still: the phase freezes and they hold the posture they were at;
- **their torque** on each joint (N·m, onto the plant's ``ST_EXT``):
  τ_w = ID_wearer(q_w, q̇_w, q̈_w) + K (q_w − q) + D (q̇_w − q̇): the inverse dynamics of their
  own limbs (the whole leg less the exoskeleton alone) along their own reference
  (q_w, q̇_w, q̈_w) as feedforward, and a joint stiffness K and damping D towards it on the
  true joint state (proprioception). The defaults are the hip and knee impedance van der
  Kooij et al. 2022 identified on a free-swinging leg during treadmill walking at 0.5 m/s
  (nine subjects, three instants of swing; across-subject means): hip stiffness 34–66
  N·m/rad and damping 1.9–4.6 N·m·s/rad, knee stiffness 0–3.5 N·m/rad and damping
  0.02–0.14 N·m·s/rad — the midpoints of those ranges. The exoskeleton's leg has no
  ground contact (the pelvis is fixed): every stride is a swing, so the swing's impedance is
  the one that applies;
- **their heel strikes**: one at each integer crossing of their phase (stride start, the
  leg with offset 0), a fraction of them dropped as a board would miss them — a seeded
  Bernoulli mask drawn once before the run (deterministic).

- **their stance** (optional, on a floor): while a joint's leg is in stance — its phase,
  offset included, below ``stance`` (the flat-foot gait's 0.62) — the stiffness and damping
  are ``stance_stiffness`` and ``stance_damping`` instead. A swing impedance cannot carry a
  loaded leg: the stance knee behaves as a linear torsional spring (its quasi-stiffness,
  Shamaei, Sawicki & Dollar 2013) an order of magnitude stiffer than the swing knee van der
  Kooij et al. 2022 identified, and in the world the feedforward (the hanging limbs'
  inverse dynamics) knows nothing of the body weight the stance leg carries: the
  stiffness holds it. :data:`STANCE_STIFFNESS`, :data:`STANCE_DAMPING` are the values the
  world's runs use.

Everything the loop calls (:func:`walker_step`) is njit and allocates nothing; the compiled
state is one tuple (:data:`W_*` indices), so the loop keeps a short signature.

:class:`Leader` is the same wearer in a run's simulated world (``exo-rt run`` on the lockstep
simulated bus, a wearer profile with ``role: leading``): their own torques, from the limbs'
inverse dynamics and their joint impedance, towards the walk the session plans at the
profile's speed, in stance (their foot loaded, from the world's contacts) at the stance
values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from exo_rt.cycle import segment
from exo_rt.cycle.layout import V_OFFSET, V_QDDR, V_QDR, V_QR
from exo_rt.dynamics import kernels
from exo_rt.jit import njit
from exo_rt.sim.plants import ST_EXT, ST_Q, ST_V

# N·m/rad and N·m·s/rad by joint kind (the end of a joint's name; "*": any other joint):
# midpoints of van der Kooij et al. 2022's swing-phase ranges (hip 34–66, 1.9–4.6; knee
# 0–3.5, 0.02–0.14). A joint they did not measure (ankle, abduction) takes the hip's.
STIFFNESS = {"hip": 50.0, "knee": 1.75, "*": 50.0}
DAMPING = {"hip": 3.25, "knee": 0.08, "*": 3.25}
# in the world, on the sized drives (docs/world.md, "Every controller on the floor"): swing
# as docs/assistance.md's firm walker — a leg as soft as van der Kooij's cannot move the
# drives' reflected rotors (3.06 kg·m² each on exo_2leg_sized, ten times the test stand's) —
# and stance stiffer: a stance knee's quasi-stiffness in weight acceptance is a few hundred
# N·m/rad (Shamaei, Sawicki & Dollar 2013), and here the stiffness also carries the body
# weight the swing-leg feedforward leaves out (the harness takes half)
FIRM_STIFFNESS = {"*": 400.0}
FIRM_DAMPING = {"*": 20.0}
STANCE_STIFFNESS = {"hip": 800.0, "knee": 800.0, "*": 800.0}
STANCE_DAMPING = {"hip": 80.0, "knee": 80.0, "*": 80.0}
LOADED_N = 100.0  # N: a foot carrying this vertical reaction is in stance (Leader)

# the compiled walker's tuple
W_COEFFS = 0  # (n, 11) rad: the gait's Fourier rows
W_OFFSETS = 1  # (n,) strides: each joint's phase offset
W_SCHEDULE = 2  # (m, 2): [t s, phase rate 1/s (0: standing)] steps, t ascending from 0
W_GAINS = 3  # (5, n): stiffness N·m/rad, damping N·m·s/rad; in stance the same; the stance
# fraction of the stride (0: no stance values)
W_DROP = 4  # (capacity,) 1.0: the board misses this heel strike
W_HEELS = 5  # (capacity,) s: each heel strike's time (out)
W_STATE = 6  # (S_WIDTH,) the walker's state
W_FULL = 7  # the whole leg's packed model (the plant's robot: exoskeleton and wearer)
W_FULL_DATA = 8
W_EXO = 9  # the exoskeleton alone
W_EXO_DATA = 10
W_WORK = 11  # (5, n) scratch: reference q, q̇, q̈, the two inverse dynamics

# the state (W_STATE)
S_PHASE = 0  # strides since t = 0 (unwrapped)
S_RATE = 1  # strides/s now
S_NEXT = 2  # the schedule's next step
S_T = 3  # s: the time of the last step passed
S_BASE = 4  # strides: the phase at it
S_STRIKES = 5  # heel strikes so far
S_PENDING = 6  # 1: a heel strike the board reports in the next cycle
S_WIDTH = 7
EPS = 1e-9  # strides: an integer reached within this is crossed


@dataclass(frozen=True)
class Walker:
    """A wearer who walks their own gait (see the module's docstring).

    ``cadence``: (t s, stride period s) steps, the first at t = 0; a period of ``inf`` is
    standing still. ``stiffness``, ``damping``: N·m/rad, N·m·s/rad by the end of a joint's
    name (``hip`` is ``left_hip``'s too), ``*`` for the others. ``drop``: the fraction of heel
    strikes the board misses (0–1), drawn with ``seed``. ``offsets``: strides each joint's
    gait runs late, by joint name or leg (``right``); ``None``: the right leg half a stride
    on a robot with ``left_`` and ``right_`` joints, else 0 — model-in-the-loop writes them
    into the cycle's ``v[V_OFFSET]`` so the controller's reference agrees. ``stance`` (0–1):
    the stride's fraction from the heel strike a leg is in stance, where
    ``stance_stiffness`` and ``stance_damping`` (as ``stiffness``; None: the same) hold.
    """

    cadence: tuple[tuple[float, float], ...] = ((0.0, 1.1),)
    stiffness: dict = field(default_factory=lambda: dict(STIFFNESS))
    damping: dict = field(default_factory=lambda: dict(DAMPING))
    drop: float = 0.0
    seed: int = 0
    offsets: dict | None = None
    stance_stiffness: dict | None = None
    stance_damping: dict | None = None
    stance: float = 0.0

    def __post_init__(self) -> None:
        steps = [(float(t), float(p)) for t, p in self.cadence]
        if not steps or steps[0][0] != 0.0:
            raise ValueError(f"walker cadence {self.cadence}: the first step must be at t = 0 "
                             f"— give ((0.0, period), …)")
        for (t0, _), (t1, _) in zip(steps, steps[1:], strict=False):
            if not t1 > t0:
                raise ValueError(f"walker cadence: step at t = {t1:g} s is not after the one "
                                 f"at {t0:g} s — give the steps in ascending time")
        for t, p in steps:
            if not p > 0.0:
                raise ValueError(f"walker cadence: stride period {p:g} s at t = {t:g} s — give "
                                 f"a period > 0 s (inf: standing still)")
        if not 0.0 <= self.drop <= 1.0:
            raise ValueError(f"walker drop {self.drop:g}: the fraction of heel strikes "
                             f"dropped must be within 0…1")
        object.__setattr__(self, "cadence", tuple(steps))

    def rates(self) -> np.ndarray:
        """The schedule as (m, 2) rows [t s, phase rate strides/s] (0: standing)."""
        return np.array([(t, 0.0 if math.isinf(p) else 1.0 / p) for t, p in self.cadence])

    def phase_at(self, t: float) -> float:
        """Strides walked by time ``t`` (s): φ(t) = ∫₀ᵗ 1/period, exact."""
        rows = self.rates()
        ends = np.append(rows[1:, 0], math.inf)
        spans = np.clip(np.minimum(ends, t) - rows[:, 0], 0.0, None)
        return float(np.sum(spans * rows[:, 1]))

    def strike_times(self, t_end: float) -> np.ndarray:
        """The times (s) their phase crosses each integer 1, 2, … up to ``t_end``: the heel
        strikes, exactly."""
        rows = self.rates()
        out = []
        phase = 0.0
        for i, (t0, rate) in enumerate(rows):
            t1 = min(rows[i + 1, 0] if i + 1 < len(rows) else math.inf, t_end)
            if rate > 0.0 and t1 > t0:
                end = phase + (t1 - t0) * rate
                out += [t0 + (k - phase) / rate
                        for k in range(math.floor(phase + EPS) + 1, math.floor(end + EPS) + 1)]
                phase = end
        return np.array(out)

    def gains(self, joint_names) -> np.ndarray:
        """(5, n): each joint's stiffness and damping (by the end of its name, else ``*``),
        the same in stance, and the stance fraction (:data:`W_GAINS`)."""
        out = np.zeros((5, len(joint_names)))
        out[4] = self.stance
        for row, table, what in ((0, self.stiffness, "stiffness"), (1, self.damping, "damping"),
                                 (2, self.stance_stiffness or self.stiffness,
                                  "stance stiffness"),
                                 (3, self.stance_damping or self.damping, "stance damping")):
            for j, name in enumerate(joint_names):
                key = next((k for k in table if k != "*" and (name == k or name.endswith(
                    "_" + k))), "*")
                if key not in table:
                    raise ValueError(f"walker {what}: no value for joint '{name}' — name it "
                                     f"(or its kind, e.g. 'hip'), or give '*'")
                out[row, j] = table[key]
        return out

    def joint_offsets(self, joint_names) -> np.ndarray:
        """(n,) strides: each joint's phase offset (see the class's docstring)."""
        names = list(joint_names)
        legs = {nm.split("_", 1)[0] for nm in names if "_" in nm}
        spec = self.offsets
        if spec is None:
            spec = {"right": 0.5} if {"left", "right"} <= legs else {}
        out = np.zeros(len(names))
        for key, value in sorted(spec.items(), key=lambda kv: kv[0] in names):  # names last
            idx = [j for j, nm in enumerate(names) if nm == key or nm.startswith(key + "_")]
            if not idx:
                raise ValueError(f"walker offsets: '{key}' is no joint or leg of the robot — "
                                 f"its joints are {', '.join(names)}")
            out[idx] = value
        return out


def compile_walker(walker: Walker, robot, exo, cycle, duration: float) -> tuple:
    """The walker's tuple for the loop (:data:`W_*`): ``robot`` the plant's mechanism (the
    whole leg), ``exo`` the exoskeleton alone, ``cycle`` model-in-the-loop's (its gait rows
    and its ``v[V_OFFSET]``, which the caller set), ``duration`` (s) the run's length (sizes
    the heel-strike arrays)."""
    n = robot.nq
    capacity = int(math.floor(walker.phase_at(duration))) + 2
    drop = (np.random.default_rng(walker.seed).random(capacity) < walker.drop).astype(float)
    state = np.zeros(S_WIDTH)
    rows = walker.rates()
    state[S_RATE] = rows[0, 1]
    state[S_NEXT] = 1.0
    full, full_data = kernels.model_and_data(robot)
    alone, alone_data = kernels.model_and_data(exo)
    return (np.array(cycle.coeffs), cycle.v[V_OFFSET].copy(), rows,
            walker.gains(robot.joint_names), drop, np.zeros(capacity), state,
            full, full_data, alone, alone_data, np.zeros((5, n)))


@njit(cache=True)
def reference(w, q, qd, qdd):
    """The walker's own reference at its phase now: q_w, q̇_w, q̈_w (rad, /s, /s²)."""
    coeffs, offsets, st = w[W_COEFFS], w[W_OFFSETS], w[W_STATE]
    phase, rate = st[S_PHASE], st[S_RATE]
    for j in range(q.shape[0]):
        p, d1, d2 = segment.fourier(coeffs, j, phase + offsets[j])
        q[j] = p
        qd[j] = d1 * rate
        qdd[j] = d2 * rate * rate


@njit(cache=True)
def _advance(w, t):
    """The phase at ``t`` (s): φ = φ_step + (t − t_step)·rate from the schedule's last step
    passed, exact (no sum of small steps drifting); a heel strike (an integer reached, to
    1e-9 strides: a crossing that falls on a cycle's time is that cycle's) recorded at ``t``
    and, unless the board drops it, pending for the next cycle."""
    st, sched = w[W_STATE], w[W_SCHEDULE]
    last = st[S_PHASE]
    nxt = int(st[S_NEXT])
    while nxt < sched.shape[0] and sched[nxt, 0] <= t:
        st[S_BASE] += (sched[nxt, 0] - st[S_T]) * st[S_RATE]
        st[S_T] = sched[nxt, 0]
        st[S_RATE] = sched[nxt, 1]
        nxt += 1
    st[S_NEXT] = nxt
    st[S_PHASE] = st[S_BASE] + (t - st[S_T]) * st[S_RATE]
    if math.floor(st[S_PHASE] + EPS) > math.floor(last + EPS):
        k = int(st[S_STRIKES])
        heels, drop = w[W_HEELS], w[W_DROP]
        if k < heels.shape[0]:
            heels[k] = t
            st[S_PENDING] = 0.0 if drop[k] > 0.5 else 1.0
        st[S_STRIKES] = k + 1


@njit(cache=True)
def heel_report(w):
    """1.0 in the cycle after a heel strike the board did not drop (then cleared), else 0.0:
    the cycle's ``heel`` input."""
    st = w[W_STATE]
    out = st[S_PENDING]
    st[S_PENDING] = 0.0
    return out


@njit(cache=True)
def walker_step(w, t, leg_state):
    """The walker at time ``t`` (s): the phase advanced to it, then their torque onto the
    plant's joints (``leg_state[ST_EXT]``, N·m) from its true joint state."""
    _advance(w, t)
    work = w[W_WORK]
    qw, vw, aw, t_full, t_exo = work[0], work[1], work[2], work[3], work[4]
    reference(w, qw, vw, aw)
    kernels.inverse_dynamics(w[W_FULL], w[W_FULL_DATA], qw, vw, aw, t_full)
    kernels.inverse_dynamics(w[W_EXO], w[W_EXO_DATA], qw, vw, aw, t_exo)
    gains, offsets, phase = w[W_GAINS], w[W_OFFSETS], w[W_STATE][S_PHASE]
    for j in range(qw.shape[0]):
        r = 2 if (phase + offsets[j]) % 1.0 < gains[4, j] else 0  # in stance: its own values
        leg_state[ST_EXT, j] = (t_full[j] - t_exo[j]
                                + gains[r, j] * (qw[j] - leg_state[ST_Q, j])
                                + gains[r + 1, j] * (vw[j] - leg_state[ST_V, j]))


def start(w: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The walker's posture and joint velocities at its phase 0 (rad, rad/s): where the plant
    starts."""
    n = w[W_OFFSETS].shape[0]
    q, qd, qdd = np.zeros(n), np.zeros(n), np.zeros(n)
    reference(w, q, qd, qdd)
    return q, qd


def heel_strikes(w: tuple) -> tuple[np.ndarray, np.ndarray]:
    """After a run: each heel strike's time (s) and whether the board dropped it."""
    k = min(int(w[W_STATE][S_STRIKES]), w[W_HEELS].shape[0])
    return w[W_HEELS][:k].copy(), w[W_DROP][:k] > 0.5


# ------------------------------------------------------------------ the world's leading wearer
class Leader:
    """A leading wearer in a run's simulated world (:attr:`exo_rt.sim.simbus.SimWorld.wearer`,
    stepped before each physics period): onto the plant's joints (``ST_EXT``, N·m)
    τ_w = ID_wearer(q_p, q̇_p, q̈_p) + K (q_p − q) + D (q̇_p − q̇) — the inverse dynamics of
    their own limbs (``robot`` less ``exo``) along the walk the session plans (``v``: the
    cycle's rows, read each period: the reference at the profile's speed) and their joint
    impedance towards it on the true joint state; K, D the stance values (``stance_*``) while
    the joint's foot carries more than ``loaded`` N (the world's contacts), else the swing's.
    What they intend is the session's plan; what moves the leg is theirs, and the
    exoskeleton's law only adds to it. The world's time, their torque and the joint state
    they acted on each period go into :attr:`log` (the first ``capacity`` periods;
    :meth:`torques`, :meth:`states`): their effort and what it answered."""

    def __init__(self, robot, exo, v: np.ndarray, feet, *, stiffness=None, damping=None,
                 stance_stiffness=None, stance_damping=None, loaded: float = LOADED_N,
                 capacity: int = 1 << 18) -> None:
        names = list(robot.joint_names)
        walker = Walker(stiffness=dict(stiffness or FIRM_STIFFNESS),
                        damping=dict(damping or FIRM_DAMPING),
                        stance_stiffness=dict(stance_stiffness or STANCE_STIFFNESS),
                        stance_damping=dict(stance_damping or STANCE_DAMPING))
        self.gains = walker.gains(names)
        self.v, self.loaded = v, float(loaded)
        self.rows = np.array([V_QR, V_QDR, V_QDDR], np.int64)
        legs = [f.split("_", 1)[0] for f in feet]
        self.foot = np.array([legs.index(nm.split("_", 1)[0]) if nm.split("_", 1)[0] in legs
                              else -1 for nm in names], np.int64)
        self.full, self.full_data = kernels.model_and_data(robot)
        self.exo, self.exo_data = kernels.model_and_data(exo)
        self.work = np.zeros((2, len(names)))
        # [t s, torque N·m …, q rad …, q̇ rad/s …] by period (pages touched only as written)
        self.log = np.zeros((capacity, 1 + 3 * len(names)))
        self.count = np.zeros(1, np.int64)  # periods stepped

    def apply(self, state: np.ndarray, force: np.ndarray, t: float = 0.0) -> None:
        """Their torque onto ``state[ST_EXT]`` from the plant's ``state`` and the feet's
        ``force`` (feet × 3, N: the world's truth after the last period) at the world's time
        ``t`` (s)."""
        lead_step(self.full, self.full_data, self.exo, self.exo_data, self.v, self.rows,
                  state, self.gains, self.foot, force, self.loaded, self.work, self.log,
                  self.count, t)

    def torques(self) -> np.ndarray:
        """(periods, 1 + n): the world's time (s) and their torque on each joint (N·m), one
        row per physics period from the session's start (at most ``capacity``)."""
        return self.rows_logged()[:, : 1 + len(self.foot)]

    def states(self) -> np.ndarray:
        """(periods, 1 + 2n): the world's time (s) and the true joint state each torque acted
        on — q (rad) then q̇ (rad/s) by joint — what their impedance answered, one row per
        physics period (the feedback a controller's records hold comes later and may lag)."""
        rows = self.rows_logged()
        return np.concatenate([rows[:, :1], rows[:, 1 + len(self.foot):]], axis=1)

    def rows_logged(self) -> np.ndarray:
        """The whole log so far: [t, torque …, q …, q̇ …] by physics period (a copy)."""
        return self.log[: min(int(self.count[0]), self.log.shape[0])].copy()


@njit(cache=True)
def lead_step(full, full_data, exo, exo_data, v, rows, state, gains, foot, force, loaded, work,
              log, count, t):
    """:class:`Leader`'s torque, logged (allocates nothing)."""
    qr, qdr, qddr = v[rows[0]], v[rows[1]], v[rows[2]]
    t_full, t_exo = work[0], work[1]
    kernels.inverse_dynamics(full, full_data, qr, qdr, qddr, t_full)
    kernels.inverse_dynamics(exo, exo_data, qr, qdr, qddr, t_exo)
    for j in range(t_full.shape[0]):
        f = foot[j]
        r = 2 if f >= 0 and force[f, 2] > loaded else 0
        state[ST_EXT, j] = (t_full[j] - t_exo[j] + gains[r, j] * (qr[j] - state[ST_Q, j])
                            + gains[r + 1, j] * (qdr[j] - state[ST_V, j]))
    k = count[0]
    if k < log.shape[0]:
        log[k, 0] = t
        n = t_full.shape[0]
        for j in range(n):
            log[k, 1 + j] = state[ST_EXT, j]
            log[k, 1 + n + j] = state[ST_Q, j]
            log[k, 1 + 2 * n + j] = state[ST_V, j]
    count[0] = k + 1
