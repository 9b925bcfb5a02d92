"""The numeric work of one control cycle: :func:`step` on the cycle's model and data.

Between reading the drives and writing their commands the cycle runs: velocity estimate →
reference (by state) → the wearer's torque along it (for assistance) → control law → torque
→ current → safety check (and, in SAFE, the ramped safe action) → the cycle's record (into
the recording ring's row and the in-memory history) → running figures for the summary.
Python keeps only what is not numeric: bus I/O, state changes and events.

Its arguments are two records, Pinocchio's split (:mod:`exo_rt.structs`), made once by
:func:`build` — the one factory the controller, model-in-the-loop, the bench and replay use:

- :data:`CYCLE_MODEL` — fixed for a run: the law's model (options, gains, the rigid models),
  the law compiled, the cycle's parameters (:data:`PARAMS`: period, velocity
  filter, safe action …), the safety limits and options, the transmissions, the gait's
  coefficients;
- :data:`CYCLE_DATA` — what a cycle reads and writes: the law's data (workspaces, its state,
  scratch and views of the joint vectors), the scalars (:data:`SCALARS`, by name: cycle,
  time, state, inputs Python sets, outputs it reads), the session's reference segment
  (:data:`SEGMENT`, by name: what the activity machine writes), the joint vectors ``v``
  (rows ``V_*``: measured, estimated, reference, command, summary figures — a matrix, so
  that the record row is copied from it in one pass), the drives' flags and the safety
  check's streaks, the recording ring's rows (``s.slot`` the row to fill, −1: not
  recording) and the history (``s.hist`` the row, −1: not kept).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from numba import types

from exo_rt import structs
from exo_rt.actuators import thermal
from exo_rt.bus.flags import F_LATE, F_MALFORMED, F_MISSING
from exo_rt.control import laws, phase_estimate, registry, trajectory
from exo_rt.control.config import stance_rows, transmission_rows
from exo_rt.control.estimate import filter_gain
from exo_rt.cycle import assistance, governor, safety, segment
from exo_rt.cycle.layout import (
    PARAMS,
    ROWS,
    SCALARS,
    SEGMENT,
    SETTLE_SAMPLES,
    V_ASSIST,
    V_CUR,
    V_DERATE,
    V_I_MEAS,
    V_LEVEL,
    V_LEVEL_ASKED,
    V_LEVEL_TO,
    V_MAX_CURRENT,
    V_MAX_ERROR,
    V_OFFSET,
    V_Q,
    V_Q_HOLD,
    V_Q_MAX,
    V_Q_MIN,
    V_Q_PREV,
    V_Q_SAFE,
    V_QD,
    V_QD_SAFE,
    V_QDDR,
    V_QDR,
    V_QR,
    V_SETTLE,
    V_SSE,
    V_T_HOUSING,
    V_T_PREV,
    V_T_REPORTED,
    V_T_WINDING,
    V_TAU,
    V_WIDTH,
)
from exo_rt.cycle.states import READY, RUN, SAFE, STOPPING
from exo_rt.dynamics import kernels
from exo_rt.jit import njit
from exo_rt.record.recorder import SOLES, column_start, row_columns, row_width
from firmware_bridge import fastdecode as fd

# the check's output
_OUT = 2


class CycleModelType(structs.Struct):
    """The numba type of :class:`CycleModel`."""


class CycleModel(structs.Record):
    """The cycle's model: what it reads and never writes during a run."""


class CycleDataType(structs.Struct):
    """The numba type of :class:`CycleData`."""


class CycleData(structs.Record):
    """The cycle's data: what it reads and writes, cycle by cycle."""


@njit(cache=True)
def _new_model(*fields):
    return CycleModel(*fields)


@njit(cache=True)
def _new_data(*fields):
    return CycleData(*fields)


CYCLE_MODEL = structs.declare(CycleModelType, CycleModel, [
    ("law", registry.LAW_MODEL),  # the law's model (options, gains, rigid models, period)
    ("torque", registry.FUNCTION),  # the law compiled (registry.function)
    ("p", structs.records(PARAMS)),  # one PARAMS record
    ("limits", structs.records(safety.LIMITS)),  # per joint
    ("sopts", structs.VEC),  # the safety check's options (safety.SOPT_*)
    ("transmissions", structs.records(laws.TRANSMISSION)),  # per joint
    ("coeffs", structs.MAT),  # the gait's Fourier rows per joint (rad)
    ("thermal", structs.records(thermal.THERMAL)),  # per joint: the winding's thermal model
    ("wearer", registry.FUNCTION),  # wearer_torque compiled (a NaN stand-in without assist)
], _new_model)
CYCLE_DATA = structs.declare(CycleDataType, CycleData, [
    ("law", registry.LAW_DATA),  # the law's data (views of v's rows)
    ("s", structs.records(SCALARS)),  # one SCALARS record
    ("seg", structs.records(SEGMENT)),  # one SEGMENT record: the session's reference segment
    ("v", structs.MAT),  # (V_WIDTH, n) joint vectors
    ("flags", structs.IVEC),  # the drives' flags per joint (exo_rt.bus.flags)
    ("streaks", structs.IMAT),  # (safety.STREAKS, n)
    ("check_out", structs.IVEC),  # the safety check's cause and joint
    ("rows", structs.MAT),  # the recording ring's rows
    ("hist", structs.MAT),  # the run's first records, in memory
    ("gaits", structs.ARR3),  # the session's gait Fourier rows: (segment.SLOTS, n, 11) rad
    ("board", structs.IVEC),  # the board link's decoder state (fastdecode's ``st``: its latest
    # PRESSURE frame; a zero one where no board is bound — no frame, stale)
], _new_data)


@njit(cache=True)
def estimate(m, d):
    """Filtered joint velocities from the positions, over the real gap between the samples:
    the drives sample at each SYNC, so the gap is the time between the SYNCs behind them (a
    SYNC sent late by a slow cycle makes one gap longer and the next shorter; after a stall of
    the loop the motion is spread over all the time it took, not charged to one period).

    A joint without feedback this cycle keeps its estimate and its last position. Once its
    feedback went missing, the next SETTLE_SAMPLES fresh samples only re-anchor the estimate:
    a drive that answered late may deliver the answer to an older SYNC after a newer one went
    out, and dividing its motion by the newer SYNC's time would make a velocity out of
    nothing (seen: 19 rad/s at a knee moving at 3.5, after a 1.7 ms late answer). Two SYNCs
    less than half a period apart (a late one, then one on time) re-anchor the same way: the
    drive's sample for the second may be as old as a period, and divided by the short gap it
    is a velocity out of nothing (seen: 6.2 rad/s at a hip moving at 0.73, under load)."""
    v, flags, s = d.v, d.flags, d.s[0]
    q, q_prev, qd, t_prev, settle = v[V_Q], v[V_Q_PREV], v[V_QD], v[V_T_PREV], v[V_SETTLE]
    dt, alpha, t = m.p[0].dt, m.p[0].alpha, s.sample_t
    for j in range(q.shape[0]):
        if flags[j] & (F_MISSING | F_MALFORMED | F_LATE):
            settle[j] = SETTLE_SAMPLES
            continue
        if settle[j] > 0.0:
            settle[j] -= 1.0
            q_prev[j] = q[j]
            t_prev[j] = t
            continue
        gap = t - t_prev[j]
        if gap < 0.5 * dt:  # SYNCs back to back (a late one, then one on time): which of the
            settle[j] = SETTLE_SAMPLES - 1  # two the drive sampled for is unsure — re-anchor
            q_prev[j] = q[j]  # (seen: a full period's motion over 0.08 ms, 6.2 rad/s at a
            t_prev[j] = t  # hip moving at 0.73, under load: SAFE on velocity)
            continue
        raw = (q[j] - q_prev[j]) / gap
        qd[j] += alpha * (raw - qd[j])
        q_prev[j] = q[j]
        t_prev[j] = t


@njit(cache=True, inline="always")
def windings(m, d):
    """The motors' winding temperatures (:mod:`exo_rt.actuators.thermal`) one period on,
    under the measured currents and the drives' own readings, and each joint's current-limit
    factor for them (a winding at its limit is a safety cause: :func:`exo_rt.cycle.safety.
    check`)."""
    v = d.v
    temps = v[V_T_WINDING:V_T_HOUSING + 1]
    thermal.thermal_step(m.thermal, temps, v[V_I_MEAS], v[V_T_REPORTED], m.p[0].dt)
    thermal.derate(m.thermal, temps, v[V_DERATE])


@njit(cache=True, inline="always")
def wearer_gait(m, d):
    """The wearer's gait phase (:mod:`exo_rt.control.phase_estimate`) from the measured hip,
    corrected by a heel strike reported since the last cycle; then the assistance level
    (:mod:`exo_rt.cycle.assistance`), which changes at its stride boundaries."""
    s, v, gait = d.s[0], d.v, d.law.gait
    phase_estimate.update(m.law.gp, gait, v[V_Q], v[V_QD], s.heel, m.p[0].dt)
    s.heel = 0.0
    assistance.level_update(s, v, gait[0], m.p[0].dt)


@njit(cache=True)
def soles(m, d):
    """The stance-load feedforward's forces (``d.law.load``, N per leg of ``m.law.stance``)
    from the board's foot-sole sensors (its latest PRESSURE frame in ``d.board``): each
    clamped to 0 … max_N and through a first-order filter (time constant τ: a landing's
    few-millisecond spike kept out) — and exactly 0, the filter reset, while the sensors are
    stale: no PRESSURE frame for the board link's timeout (``sole_timeout``, s of the cycle's
    time), none yet, no board, or a frame without the leg's sensor."""
    st, load, s = d.board, d.law.load, d.s[0]
    legs = m.law.stance
    if legs.shape[0] == 0:
        return
    count = st[fd.D_PRESSURE_N]
    if count != s.sole_count:
        s.sole_count = count
        s.sole_time = s.t
    fresh = count > 0 and s.t - s.sole_time <= m.p[0].sole_timeout
    for r in range(legs.shape[0]):
        leg = legs[r]
        if not fresh or leg.sensor >= st[fd.D_N_SENSORS]:
            load[r] = 0.0
            continue
        f = min(max(float(st[fd.D_SENSORS + leg.sensor]), 0.0), leg.max_n)
        load[r] += leg.alpha * (f - load[r])


@njit(cache=True, inline="always")  # a few operations: compiled into its caller
def _fresh(flags):
    """Every joint's feedback arrived this cycle (none missing, late or malformed)."""
    for j in range(flags.shape[0]):
        if flags[j] & (F_MISSING | F_MALFORMED | F_LATE):
            return False
    return True


@njit(cache=True, inline="always")
def _reference(state, m, d):
    v, s = d.v, d.s[0]
    q, qr, qdr, qddr = v[V_Q], v[V_QR], v[V_QDR], v[V_QDDR]
    n = q.shape[0]
    if state == READY:
        for j in range(n):
            qr[j] = q[j]
            qdr[j] = 0.0
            qddr[j] = 0.0
    elif state == RUN:
        segment.reference(s, d.seg[0], v, d.gaits, v[V_OFFSET], m.p[0].dt)
        governor.govern(s, v, m.p[0].dt)  # (the last word on it, whatever asked)
        return
    elif state == STOPPING:
        for j in range(n):
            qdr[j] = 0.0
            qddr[j] = 0.0
    governor.follow(v)


def wearer_torque(lm, ld):
    """The wearer's own torque along the reference (N·m) into ``ld.assist``, for assistance:
    the inverse dynamics of the whole leg less those of the exoskeleton alone at (q_r, q̇_r,
    q̈_r) — what the wearer's own limbs take to follow it (the ``transparent`` law adds the
    fraction ``assist`` of it). A function of the laws' signature (the law's model and data),
    compiled as theirs are (:func:`wearer_function`) and called through the cycle model's
    ``wearer``: the step compiles without the rigid-body dynamics, which the law's process
    compiles anyway."""
    n = ld.q.shape[0]
    t_exo = ld.scratch[n + 3]
    kernels.inverse_dynamics(lm.model, ld.data, ld.qr, ld.qdr, ld.qddr, ld.assist)
    kernels.inverse_dynamics(lm.model_exo, ld.data_exo, ld.qr, ld.qdr, ld.qddr, t_exo)
    for j in range(n):
        ld.assist[j] -= t_exo[j]


@functools.cache
def wearer_function():
    """:func:`wearer_torque` compiled (a ``cfunc`` of the laws' signature, cached on disk)."""
    return registry.compiled(wearer_torque)


@njit(cache=True, inline="always")
def command(m, d):
    """The law's torque and the motor currents for it, through the transmission."""
    if m.p[0].assist:
        m.wearer(m.law, d.law)
    laws.law_torque(m.torque, m.law, d.law)
    v = d.v
    laws.torque_to_current(v[V_TAU], laws.friction_speed(m.law.opts, v[V_QD], v[V_QDR]),
                           laws.friction_acceleration(m.law.opts, v[V_QDDR], d.law.scratch),
                           m.transmissions, m.p[0].friction_comp, v[V_CUR])
    cur, factor = v[V_CUR], v[V_DERATE]
    for j in range(cur.shape[0]):  # the limit derated for a hot winding
        lim = factor[j] * m.transmissions[j].current_limit
        cur[j] = min(max(cur[j], -lim), lim)


@njit(cache=True)
def clock(d, k, dt):
    """The cycle's time: its index ``k`` and time k·dt (s). Every user of the cycle keeps
    time by it (RUN's gait phase is the segment's own, integrated cycle by cycle:
    :mod:`exo_rt.cycle.segment`)."""
    s = d.s[0]
    s.k = k
    s.t = k * dt


@njit(cache=True, inline="always")
def _safe_command(m, d):
    """The ramped safe action on finite measurements; zero current once ramped out."""
    s, v, p = d.s[0], d.v, m.p[0]
    k = s.k
    ramp = max(1.0, p.ramp)
    fraction = max(0.0, 1.0 - (k - s.safe_k0) / ramp)
    q, qd, qs, qds = v[V_Q], v[V_QD], v[V_Q_SAFE], v[V_QD_SAFE]
    for j in range(q.shape[0]):
        qs[j] = q[j] if math.isfinite(q[j]) else v[V_Q_HOLD, j]
        qds[j] = qd[j] if math.isfinite(qd[j]) else 0.0
    safety.safe_action(p.action, qs, qds, v[V_Q_HOLD], p.damping, p.stiffness, fraction,
                       v[V_TAU])
    compensate = int(s.state) != SAFE  # False (in SAFE the drives' friction only damps) — a
    # value numba types bool: the constant False would compile torque_to_current a second time
    laws.torque_to_current(v[V_TAU], qds, v[V_QDDR], m.transmissions, compensate, v[V_CUR])
    if fraction <= 0.0:
        v[V_CUR, :] = 0.0
        s.disable = 1.0
        if k - s.safe_k0 > ramp + 2:
            s.safe_done = 1.0


@njit(cache=True)
def check(m, d):
    """The safety check (:func:`exo_rt.cycle.safety.check`) and the board's word: SAFE
    from this very cycle on when a cause is found — as :func:`step` runs it, and alone for a
    caller that measures through the cycle but commands by its own law (the bench's
    position loop, :mod:`exo_rt.hil.bench`): its cause and joint in the scalars, the posture
    to hold."""
    s, v, out = d.s[0], d.v, d.check_out
    safety.check(m, d)
    board = int(s.board)
    if s.broken != 0.0:  # the cycle's own code raised: its cause before any other
        out[0], out[1] = safety.CYCLE_EXCEPTION, -1
    elif out[0] == safety.OK and board & 1:
        out[0], out[1] = safety.ESTOP, -1
    elif out[0] == safety.OK and board & 2:
        out[0], out[1] = safety.BOARD_LINK_LOSS, -1
    elif out[0] == safety.OK and board & 4:
        out[0], out[1] = safety.MOTOR_POWER_OFF, -1
    if out[0] != safety.OK:
        s.state = SAFE
        s.cause = out[0]
        s.joint = out[1]
        s.new_fault = 1.0
        s.safe_k0 = s.k
        s.disable = 0.0
        s.safe_done = 0.0
        q = v[V_Q]
        for j in range(q.shape[0]):
            if math.isfinite(q[j]):
                v[V_Q_HOLD, j] = q[j]


# each column of the cycle log's row (recorder.ROW) by name, where it starts: (a, b), at
# a + b·n for n joints — constants the compiled record folds (it writes a column by its name,
# in no particular order; a test reads every column back from its source by name)
_T, _CYCLE, _STATE, _CAUSE = (column_start(c) for c in ("t", "cycle", "state", "cause"))
_Q, _QD, _Q_REF, _CURRENT = (column_start(c) for c in ("q", "qd", "q_ref", "current"))
_COMMAND, _TORQUE, _FLAGS = (column_start(c) for c in ("command", "torque", "flags"))
_OVERRUN_STREAK, _BOARD, _WAKE_US = (column_start(c) for c in ("overrun_streak", "board",
                                                                "wake_us"))
_COMPUTE_US, _OVERRUNS, _SAMPLE_T = (column_start(c) for c in ("compute_us", "overruns",
                                                                "sample_t"))
_QD_REF, _PHASE, _STRIDE = (column_start(c) for c in ("qd_ref", "phase", "stride"))
_GAIT_PHASE, _STRIDE_HZ, _WALKING, _HEELS = (column_start(c) for c in (
    "gait_phase", "stride_hz", "walking", "heels"))
_LEVEL, _WINDING, _DERATE, _DRIVE_TEMP = (column_start(c) for c in (
    "level", "winding", "derate", "drive_temp"))
_SOLE_FRAMES, _SOLE_SENSORS, _SOLES = (column_start(c) for c in (
    "sole_frames", "sole_sensors", "soles"))


@njit(cache=True, python=False)
def _record(d, row):
    """The cycle's row of the cycle log (recorder.ROW), each column by its name from where
    the cycle holds it (written out, not through helpers: a compiled call per column would
    cost more than the copying)."""
    s, v, flags = d.s[0], d.v, d.flags
    n = v.shape[1]
    row[_T[0] + _T[1] * n] = s.t
    row[_CYCLE[0] + _CYCLE[1] * n] = s.k
    row[_STATE[0] + _STATE[1] * n] = s.state
    row[_CAUSE[0] + _CAUSE[1] * n] = s.cause if int(s.state) == SAFE else 0.0
    o = _Q[0] + _Q[1] * n
    for j in range(n):
        row[o + j] = v[V_Q, j]
    o = _QD[0] + _QD[1] * n
    for j in range(n):
        row[o + j] = v[V_QD, j]
    o = _Q_REF[0] + _Q_REF[1] * n
    for j in range(n):
        row[o + j] = v[V_QR, j]
    o = _CURRENT[0] + _CURRENT[1] * n
    for j in range(n):
        row[o + j] = v[V_I_MEAS, j]
    o = _COMMAND[0] + _COMMAND[1] * n
    for j in range(n):
        row[o + j] = v[V_CUR, j]
    o = _TORQUE[0] + _TORQUE[1] * n
    for j in range(n):
        row[o + j] = v[V_TAU, j]
    o = _FLAGS[0] + _FLAGS[1] * n
    for j in range(n):
        row[o + j] = flags[j]
    row[_OVERRUN_STREAK[0] + _OVERRUN_STREAK[1] * n] = s.overrun_streak
    row[_BOARD[0] + _BOARD[1] * n] = s.board
    row[_WAKE_US[0] + _WAKE_US[1] * n] = s.wake_us
    row[_COMPUTE_US[0] + _COMPUTE_US[1] * n] = s.compute_us
    row[_OVERRUNS[0] + _OVERRUNS[1] * n] = s.overruns
    row[_SAMPLE_T[0] + _SAMPLE_T[1] * n] = s.sample_t
    o = _QD_REF[0] + _QD_REF[1] * n
    for j in range(n):
        row[o + j] = v[V_QDR, j]
    row[_PHASE[0] + _PHASE[1] * n] = s.phase
    row[_STRIDE[0] + _STRIDE[1] * n] = d.seg[0].stride
    est = d.law.gait[0]
    row[_GAIT_PHASE[0] + _GAIT_PHASE[1] * n] = est.phase
    row[_STRIDE_HZ[0] + _STRIDE_HZ[1] * n] = est.omega / (2.0 * math.pi)
    row[_WALKING[0] + _WALKING[1] * n] = est.walking
    row[_HEELS[0] + _HEELS[1] * n] = est.heels
    o = _LEVEL[0] + _LEVEL[1] * n
    for j in range(n):
        row[o + j] = v[V_LEVEL, j]
    o = _WINDING[0] + _WINDING[1] * n
    for j in range(n):
        row[o + j] = v[V_T_WINDING, j]
    o = _DERATE[0] + _DERATE[1] * n
    for j in range(n):
        row[o + j] = v[V_DERATE, j]
    o = _DRIVE_TEMP[0] + _DRIVE_TEMP[1] * n
    for j in range(n):
        row[o + j] = v[V_T_REPORTED, j]
    st = d.board  # the board's decoder state, as soles() read it this cycle
    sensors = st[fd.D_N_SENSORS]
    row[_SOLE_FRAMES[0] + _SOLE_FRAMES[1] * n] = st[fd.D_PRESSURE_N]
    row[_SOLE_SENSORS[0] + _SOLE_SENSORS[1] * n] = sensors
    o = _SOLES[0] + _SOLES[1] * n
    for i in range(SOLES):
        row[o + i] = st[fd.D_SENSORS + i] if i < sensors else 0.0


@njit(cache=True, inline="always")
def _keep(d):
    """The cycle's record into the recording ring's row and the history's."""
    s = d.s[0]
    slot = int(s.slot)
    if slot >= 0:
        _record(d, d.rows[slot])
    k = int(s.hist)
    if 0 <= k < d.hist.shape[0]:
        if slot >= 0:
            row, kept = d.rows[slot], d.hist[k]
            for i in range(row.shape[0]):  # an element loop: no shape-check code to compile
                kept[i] = row[i]
        else:
            _record(d, d.hist[k])


@njit(cache=True, inline="always")
def _figures(state, d):
    """Running summary figures: tracking error over RUN, peak command, position range."""
    v, s = d.v, d.s[0]
    q = v[V_Q]
    for j in range(q.shape[0]):
        if state == RUN:
            e = math.degrees(q[j] - v[V_QR, j])
            v[V_SSE, j] += e * e
            if abs(e) > v[V_MAX_ERROR, j] or not math.isfinite(e):
                v[V_MAX_ERROR, j] = abs(e)
        c = abs(v[V_CUR, j])
        if c > v[V_MAX_CURRENT, j]:
            v[V_MAX_CURRENT, j] = c
        if math.isfinite(q[j]):
            v[V_Q_MIN, j] = min(v[V_Q_MIN, j], q[j])
            v[V_Q_MAX, j] = max(v[V_Q_MAX, j], q[j])
    if state == RUN:
        s.run_cycles += 1.0
    s.cycles += 1.0


@njit(cache=True, no_cfunc_wrapper=False)  # (its C wrapper: called through its address)
def step(m, d):
    """One cycle's numbers, from the measurements in ``d.v`` to the currents in
    ``d.v[V_CUR]`` (and the record, the summary's figures)."""
    s = d.s[0]
    state = int(s.state)
    s.new_fault = 0.0
    if s.broken != 0.0:  # this step raised in an earlier cycle: only the safety's path runs
        if state != SAFE:  # (estimates, references and laws are not trusted; the record is
            check(m, d)  # kept: the safe action's cycles are recorded as any other's)
        _safe_command(m, d)
        _keep(d)
        _figures(SAFE, d)
        return
    estimate(m, d)
    wearer_gait(m, d)
    windings(m, d)
    soles(m, d)
    _reference(state, m, d)
    if state == RUN or state == STOPPING:
        if _fresh(d.flags):
            command(m, d)
        # else: a joint's feedback is missing this cycle — the last commands stand (the law
        # neither acts on a stale position nor winds up on it; safety counts the missing cycles)
    elif state != SAFE:
        d.v[V_TAU, :] = 0.0
        d.v[V_CUR, :] = 0.0
    if state != SAFE:
        check(m, d)
        state = int(s.state)
    if state == SAFE:
        _safe_command(m, d)
    _keep(d)
    _figures(state, d)


STEP_SIGNATURE = types.void(CYCLE_MODEL, CYCLE_DATA)
STEP = types.FunctionType(STEP_SIGNATURE)  # step's type as a first-class function value


class _StepValue(types.WrapperAddressProtocol):
    """:func:`step` as a first-class function value (numba's wrapper-address protocol): the
    one compiled call (:func:`exo_rt.cycle.cycle_call.run`) calls it through its address,
    so that it compiles apart from the step — in another process at once — and its machine
    code holds no second copy of the step's (a cold start's 2.8 s of compiling)."""

    def __wrapper_address__(self) -> int:
        cres = step.get_compile_result(STEP_SIGNATURE)  # (compiled or loaded first if not)
        return cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)

    def signature(self):
        return STEP_SIGNATURE


STEP_VALUE = _StepValue()


@njit(cache=True)
def set_rows(d, rows):
    """The recording ring's rows (when the recording starts or stops)."""
    d.rows = rows


@njit(cache=True)
def set_hist(d, hist):
    """The rows of history kept in memory (before the run)."""
    d.hist = hist


@njit(cache=True)
def set_board(d, st):
    """The board link's decoder state the cycle reads the foot-sole sensors from."""
    d.board = st


def warm(cycle: Cycle) -> None:
    """Compile (or load) :func:`step` and run it once in every state, on throw-away data of
    ``cycle``'s model: a cold numba cache never stalls a cycle, and the first real cycles
    are warm."""
    w = cycle.fresh(1)
    w.s_array[:] = cycle.s_array
    w.q[:] = cycle.q_start
    w.set_rows(np.zeros((1, cycle.width)))
    w.set_hist(np.zeros((1, cycle.width)))  # (a run keeps its first records: set_hist)
    w.bind_board(None)  # (a run binds its board's decoder state: set_board)
    for state in (READY, RUN, STOPPING, SAFE):
        w.s["state"] = state
        w.s["slot"] = 0.0
        w.s["hist"] = 0.0
        step(w.model, w.data)
        clock(w.data, 0.0, cycle.p["dt"])  # as a caller that keeps time calls it
    estimate(w.model, w.data)  # and the parts a caller runs alone (the bench measures and
    check(w.model, w.data)  # checks through them)


class Cycle:
    """One cycle's model and data (:data:`CYCLE_MODEL`, :data:`CYCLE_DATA`) and, for Python,
    the same arrays by name: what :func:`build` makes. Every attribute is declared here (its
    slots); the joint vectors are views of ``v``'s rows, one per name of
    :data:`exo_rt.cycle.layout.ROWS` (``cycle.q``, ``cycle.cur`` …)."""

    # the data's arrays (new_data)
    model: CycleModel
    data: CycleData
    s: np.void  # the scalars record (SCALARS), as Python reads and writes it by field name
    s_array: np.ndarray  # the same, an array of one (as compiled code takes it)
    seg: np.void  # the segment record (SEGMENT): the activity machine writes it by field name
    seg_array: np.ndarray  # the same, an array of one
    v: np.ndarray  # (V_WIDTH, n) the joint vectors
    flags: np.ndarray  # the drives' flags per joint
    streaks: np.ndarray  # (safety.STREAKS, n) the safety check's streaks
    check_out: np.ndarray  # the safety check's cause and joint
    rows: np.ndarray  # the rows the cycle records into (a recording ring's, or no_rows)
    no_rows: np.ndarray  # the one row recorded into where nothing is recorded
    hist: np.ndarray  # the run's first records, in memory
    law_state: np.ndarray  # the law's state per joint (registry.STATE)
    gait: np.ndarray  # the wearer's gait-phase estimate (phase_estimate.STATE, one)
    scratch: np.ndarray  # the law's work space
    gaits: np.ndarray  # the session's gait Fourier rows (segment.SLOTS, n, 11), rad
    board: np.ndarray  # the board link's decoder state (fastdecode's st) the soles come from
    load: np.ndarray  # N per stance-load leg: the force its foot carries, as the law reads it
    n: int  # joints
    width: int  # float64 values of a record (the cycle log's row)
    law_arrays: dict  # the rigid models' workspaces a fresh cycle copies
    # the model's, for Python (build; a fresh cycle of the same model has none)
    p: np.void  # the cycle's parameters (PARAMS)
    opts: np.ndarray  # the law's options (registry.OPTIONS, one)
    gains: np.ndarray  # per joint (registry.GAINS)
    coeffs: np.ndarray  # the gait's Fourier rows per joint, rad
    limits: np.ndarray  # per joint (safety.LIMITS)
    sopts: np.ndarray  # the safety check's options
    transmissions: np.ndarray  # per joint (laws.TRANSMISSION)
    thermal: np.ndarray  # per joint (thermal.THERMAL)
    period: float  # s: the reference's stride period
    __slots__ = ("model", "data", "s", "s_array", "seg", "seg_array", "v", "flags", "streaks",
                 "check_out", "rows", "no_rows", "hist", "law_state", "gait", "scratch", "gaits",
                 "board", "load", "n", "width", "law_arrays", "p", "opts", "gains", "coeffs",
                 "limits", "sopts", "transmissions", "thermal", "period", *ROWS)
    _DATA = __slots__[:22]  # what new_data gives

    def __init__(self, model: CycleModel, data: CycleData, **arrays) -> None:
        if sorted(arrays) != sorted(self._DATA[2:]):
            raise TypeError(f"Cycle: give {', '.join(self._DATA[2:])}")
        self.model, self.data = model, data
        for name, value in arrays.items():
            setattr(self, name, value)
        for i, name in enumerate(ROWS):  # (views made once: Python reads them every cycle)
            setattr(self, name, self.v[i])

    def set_rows(self, rows: np.ndarray) -> None:
        """Record into ``rows`` (a recording ring's; :attr:`no_rows`: nothing recorded)."""
        self.rows = rows
        set_rows(self.data, rows)
        self.data.rebind("rows", rows)

    def set_hist(self, hist: np.ndarray) -> None:
        """Keep the run's first ``len(hist)`` records in ``hist``."""
        self.hist = hist
        set_hist(self.data, hist)
        self.data.rebind("hist", hist)

    def bind_board(self, st: np.ndarray | None) -> None:
        """Read the foot-sole sensors (the stance-load feedforward) from a board's decoder
        state ``st`` — :attr:`firmware_bridge.link.BoardLink.decoder_state`, filled in place by
        its poll, compiled or Python's; None (a run without a board, a replay): a zero state,
        never a frame (no feedforward)."""
        if st is None:
            st = np.zeros(fd.D_WIDTH, np.int64)
        self.board = st
        set_board(self.data, st)
        self.data.rebind("board", st)

    def fresh(self, history: int = 0) -> Cycle:
        """A cycle of the same model on new data (throw-away: warming up, a side test)."""
        return new_data(self.model, self.n, self.width, history, self.law_arrays)


def new_data(model: CycleModel, n: int, width: int, history: int, law_arrays: dict) -> Cycle:
    """Fresh cycle data for ``model`` (n joints, a record ``width``, ``history`` rows kept):
    zero, the position range empty, not recording."""
    v = np.zeros((V_WIDTH, n))
    v[V_Q_MIN] = np.inf
    v[V_Q_MAX] = -np.inf
    v[V_DERATE] = 1.0
    v[V_T_REPORTED] = np.nan  # (no drive's own reading until one reports it)
    thermal.reset(model.thermal, v[V_T_WINDING:V_T_HOUSING + 1])  # at ambient
    s = np.zeros(1, SCALARS)
    s[0]["slot"] = s[0]["hist"] = s[0]["joint"] = -1.0
    law_state, scratch = laws.law_state(n), laws.law_scratch(n)
    data, data_exo = law_arrays["data"].copy(), law_arrays["data_exo"].copy()
    v[V_LEVEL] = v[V_LEVEL_TO] = v[V_LEVEL_ASKED] = 1.0  # (full assistance until a session
    # sets the wearer's)
    s[0]["level_ramp"] = 1.0
    seg = np.zeros(1, SEGMENT)
    governor.set_bounds(v, model.limits, 1.0, np.inf)  # (the joints' own: build narrows them)
    governor.unset(v)
    gait = np.zeros(1, phase_estimate.STATE)
    phase_estimate.reset(model.law.gp, gait)
    load = np.zeros(model.law.stance.shape[0])
    ld = registry.law_data(data, data_exo, law_state, scratch, q=v[V_Q], qd=v[V_QD],
                           qr=v[V_QR], qdr=v[V_QDR], qddr=v[V_QDDR], assist=v[V_ASSIST],
                           tau=v[V_TAU], gait=gait, level=v[V_LEVEL], offsets=v[V_OFFSET],
                           load=load, jac=np.zeros((3, n)))
    flags = np.zeros(n, np.int64)
    streaks = np.zeros((safety.STREAKS, n), np.int64)
    check_out = np.zeros(_OUT, np.int64)
    no_rows = np.zeros((1, width))
    hist = np.zeros((max(history, 0), width))
    gaits = np.zeros((segment.SLOTS, n, 1 + 2 * trajectory.MAX_HARMONICS))
    board = np.zeros(fd.D_WIDTH, np.int64)  # (no board bound: no PRESSURE frame, ever)
    d = CycleData(law=ld, s=s, seg=seg, v=v, flags=flags, streaks=streaks, check_out=check_out,
                  rows=no_rows, hist=hist, gaits=gaits, board=board)
    structs.check(d, CYCLE_DATA, "cycle data")
    return Cycle(model, d, s=s[0], s_array=s, seg=seg[0], seg_array=seg, v=v, flags=flags,
                 streaks=streaks, check_out=check_out, rows=no_rows, no_rows=no_rows, hist=hist,
                 law_state=law_state, gait=gait, scratch=scratch, gaits=gaits, board=board,
                 load=load, n=n, width=width, law_arrays=law_arrays)


def estimate_params(robot, cfg, coeffs: np.ndarray) -> np.ndarray:
    """The gait-phase estimate's parameters (:func:`exo_rt.control.phase_estimate.params`)
    of a controller: its hip, the session's stride frequency to start from (a stride of
    1.1 s where the reference has none), the normal gait's heel strike on that hip's curve."""
    joint = cfg.estimate_joint(robot)
    period = cfg.reference.period if math.isfinite(cfg.reference.period) else 1.1
    given = dataclasses.asdict(cfg.phase_estimate)  # the file's keys, by name
    del given["joint"]  # (a name: the index is `joint`)
    offset0 = phase_estimate.hip_offset(coeffs[joint]) if joint >= 0 else 0.0
    return phase_estimate.params(joint, 2.0 * math.pi / period, offset0, **given)


def build(robot, exo, cfg, safety_cfg, *, dt: float,
          history: int = 0) -> Cycle:
    """The cycle of a controller: ``robot`` (the controller's rigid model: exoskeleton,
    wearer, rotors) and ``exo`` (the exoskeleton alone) :class:`~exo_rt.model.mechanism.
    Mechanism`, ``cfg`` its :class:`~exo_rt.control.config.ControllerConfig`, ``safety_cfg``
    the top config's safety section, the period ``dt`` (s) and the rows
    of history kept (a record's width is the cycle log's row's, :data:`exo_rt.record.recorder.
    ROW`: what :func:`step` writes a cycle's record into). The one factory of the
    cycle: the controller, model-in-the-loop, the bench and replay all build theirs here."""
    n = robot.nq
    width = row_width(row_columns(n))
    model, data = kernels.model_and_data(robot)
    model_exo, data_exo = kernels.model_and_data(exo)
    opts = cfg.options()
    gains = cfg.gains
    ref = cfg.reference
    kinds = [ref.gait_joints.get(nm, "hip" if nm.endswith("hip") else "knee")
             for nm in robot.joint_names]
    coeffs = trajectory.gait_coefficients(list(robot.joint_names), kinds, ref.amplitude)
    lm = registry.law_model(opts, gains, model, model_exo, dt,
                            estimate_params(robot, cfg, coeffs),
                            *stance_rows(robot, cfg, dt))
    p = np.zeros(1, PARAMS)
    p[0]["dt"] = dt
    p[0]["alpha"] = filter_gain(cfg.velocity_cutoff_hz, dt)
    p[0]["friction_comp"] = bool(opts[0]["friction_compensation"])
    p[0]["assist"] = cfg.assists
    p[0]["action"] = safety.ACTIONS[safety_cfg.action]
    p[0]["damping"] = safety_cfg.damping
    p[0]["stiffness"] = safety_cfg.stiffness
    p[0]["ramp"] = safety_cfg.ramp_cycles
    p[0]["sole_timeout"] = safety_cfg.board_timeout
    limits = safety.limits_array(robot, safety_cfg.joint_margin, safety_cfg.tracking_error,
                                 cfg.current_limit)
    sopts = safety.options(safety_cfg)
    transmissions = transmission_rows(robot, cfg)
    torque = registry.function(cfg.law)  # the cycle's law compiled
    windings = thermal.thermal_rows(robot, safety_cfg)
    wearer = wearer_function() if p[0]["assist"] else registry.stand_in()
    m = CycleModel(law=lm, torque=torque, p=p, limits=limits, sopts=sopts,
                   transmissions=transmissions, coeffs=coeffs, thermal=windings, wearer=wearer)
    structs.check(m, CYCLE_MODEL, "cycle model")
    law_arrays = dict(data=data, data_exo=data_exo)
    cycle = new_data(m, n, width, history, law_arrays)
    cycle.p, cycle.opts, cycle.gains, cycle.coeffs = p[0], opts, gains, coeffs
    cycle.limits, cycle.sopts, cycle.transmissions = limits, sopts, transmissions
    cycle.thermal, cycle.period = windings, ref.period
    cycle.gaits[:] = coeffs
    governor.set_bounds(cycle.v, limits, safety_cfg.reference_speed,
                        governor.accelerations(robot.joint_names,
                                               safety_cfg.reference_acceleration))
    segment.walk_from_start(cycle.s, cycle.seg, ref.period)
    cycle.q_start[:] = trajectory.start_position(coeffs)
    return cycle
