"""The numeric work of one control cycle in ONE njit call (:func:`control_step`).

Between reading the drives and writing their commands the cycle runs: velocity estimate →
reference (by state) → control law → torque → current → safety check (and, in SAFE, the
ramped safe action) → the cycle's record (into the recording ring's row and the in-memory
history) → running figures for the summary. Python keeps only what is not numeric: bus I/O,
state changes and events. One call instead of ten saves the dispatcher's cost per call
and the Python glue between them.

Its arrays (all preallocated by :class:`CycleArrays`):

- ``s``: float64 scalars, indexed by the ``S_*`` constants below (cycle, time, state, inputs
  the Python side sets, outputs it reads);
- ``v``: float64 (``V_WIDTH``, n) joint vectors, rows ``V_*`` (measured, estimated,
  reference, command and summary figures);
- ``flags`` (drive flags), int64 (n), and ``streaks`` (per joint, consecutive cycles
  without feedback and with the current short of its command: :func:`exo_rt.runtime.safety.
  check`), int64 (``safety.STREAKS``, n);
- the law's, safety's and transmission's parameter tables (records read by field name), the
  law's state and scratch, the dynamics' packed model and workspace (``model``, ``data``; of
  the robot, and ``model_exo``, ``data_exo`` of the exoskeleton alone);
- ``rows`` (the recording ring's rows; ``s[S_SLOT]`` the row to fill, −1: not recording) and
  ``hist`` (the run's records in memory; ``s[S_HIST]`` the row, −1: not kept).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.bus.flags import F_LATE, F_MALFORMED, F_MISSING
from exo_rt.control import laws, trajectory
from exo_rt.jit import njit
from exo_rt.runtime import safety
from exo_rt.runtime.states import ALIGN, READY, RUN, SAFE, STOPPING

# scalars (s)
S_K = 0  # cycle index
S_T = 1  # s: k·dt
S_STATE = 2  # state (exo_rt.runtime.states)
S_DT = 3  # s
S_ALPHA = 4  # velocity filter gain
S_PHASE = 5  # gait phase (RUN), set by the Python side
S_PERIOD = 6  # s: stride period (RUN)
S_ALIGN_T = 7  # s: time in ALIGN
S_ALIGN_DURATION = 8  # s
S_OVERRUN_STREAK = 9
S_BOARD = 10  # 1: e-stop pressed, 2: board link lost, 4: motor power off
S_FRICTION_COMP = 11  # 1: compensate friction in torque → current
S_ACTION = 12  # safe action (safety.ACTION_*)
S_DAMPING = 13  # N·m·s/rad
S_STIFFNESS = 14  # N·m/rad
S_RAMP = 15  # cycles of the safe action's ramp
S_SAFE_K0 = 16  # cycle SAFE was entered
S_CAUSE = 17  # out: the safety cause of SAFE (safety.CAUSES), 0 while all is well
S_JOINT = 18  # out: its joint, −1 for none
S_NEW_FAULT = 19  # out: 1 in the cycle a fault is detected
S_DISABLE = 20  # out: 1 once the safe action has ramped out (drives to be disabled)
S_SAFE_DONE = 21  # out: 1 when SAFE has finished (ramp + disabled)
S_WAKE_US = 22  # the previous cycle's wake latency (µs), for the record
S_COMPUTE_US = 23  # the previous cycle's compute time (µs)
S_OVERRUNS = 24  # overruns so far
S_SLOT = 25  # the recording ring's row to fill, −1: not recording
S_HIST = 26  # the history's row to fill, −1: not kept
S_RUN_CYCLES = 27  # out: cycles spent in RUN (summary)
S_CYCLES = 28  # out: cycles run
S_SAMPLE_T = 29  # s: when the drives sampled this cycle's feedback (its SYNC), loop's clock
S_WIDTH = 30

# joint vectors (v rows)
V_Q = 0  # rad, measured
V_Q_PREV = 1
V_QD = 2  # rad/s, estimated
V_I_MEAS = 3  # A, measured
V_QR = 4  # reference
V_QDR = 5
V_QDDR = 6
V_Q_ALIGN0 = 7  # where ALIGN starts
V_Q_START = 8  # where the gait starts
V_TAU = 9  # N·m, commanded joint torque
V_CUR = 10  # A, commanded current
V_ASSIST = 11  # N·m, the wearer's own torque along the reference (transparent law)
V_Q_HOLD = 12  # rad, the posture SAFE holds
V_Q_SAFE = 13  # scratch: finite positions for the safe action
V_QD_SAFE = 14  # scratch: finite velocities
V_SSE = 15  # summary: Σ(q − q_ref)² over RUN (deg²)
V_MAX_ERROR = 16  # deg, over RUN
V_MAX_CURRENT = 17  # A, |command|
V_Q_MIN = 18  # rad
V_Q_MAX = 19
V_T_PREV = 20  # s: when the joint's last used sample was taken (S_SAMPLE_T then)
V_SETTLE = 21  # fresh samples still to re-anchor on before the velocity estimate resumes
V_WIDTH = 22

SETTLE_SAMPLES = 2  # after feedback went missing: which SYNC the next samples answer is unsure

# the check's output
_OUT = 2


@njit(cache=True)
def _estimate(s, v, flags):
    """Filtered joint velocities from the positions, over the real gap between the samples:
    the drives sample at each SYNC, so the gap is the time between the SYNCs behind them (a
    SYNC sent late by a slow cycle makes one gap longer and the next shorter; after a stall of
    the loop the motion is spread over all the time it took, not charged to one period).

    A joint without feedback this cycle keeps its estimate and its last position. Once its
    feedback went missing, the next SETTLE_SAMPLES fresh samples only re-anchor the estimate:
    a drive that answered late may deliver the answer to an older SYNC after a newer one went
    out, and dividing its motion by the newer SYNC's time would make a velocity out of
    nothing (seen: 19 rad/s at a knee moving at 3.5, after a 1.7 ms late answer)."""
    q, q_prev, qd, t_prev, settle = v[V_Q], v[V_Q_PREV], v[V_QD], v[V_T_PREV], v[V_SETTLE]
    dt, alpha, t = s[S_DT], s[S_ALPHA], s[S_SAMPLE_T]
    for j in range(q.shape[0]):
        if flags[j] & (F_MISSING | F_MALFORMED | F_LATE):
            settle[j] = SETTLE_SAMPLES
            continue
        if settle[j] > 0.0:
            settle[j] -= 1.0
            q_prev[j] = q[j]
            t_prev[j] = t
            continue
        gap = max(t - t_prev[j], 0.1 * dt)  # (two SYNCs back to back: no division by ~0)
        raw = (q[j] - q_prev[j]) / gap
        qd[j] += alpha * (raw - qd[j])
        q_prev[j] = q[j]
        t_prev[j] = t


@njit(cache=True, inline="always")  # a few operations: compiled into its caller
def _fresh(flags):
    """Every joint's feedback arrived this cycle (none missing, late or malformed)."""
    for j in range(flags.shape[0]):
        if flags[j] & (F_MISSING | F_MALFORMED | F_LATE):
            return False
    return True


@njit(cache=True)
def _reference(state, s, v, coeffs):
    q, qr, qdr, qddr = v[V_Q], v[V_QR], v[V_QDR], v[V_QDDR]
    n = q.shape[0]
    if state == READY:
        for j in range(n):
            qr[j] = q[j]
            qdr[j] = 0.0
            qddr[j] = 0.0
    elif state == ALIGN:
        trajectory.minimum_jerk(s[S_ALIGN_T], s[S_ALIGN_DURATION], v[V_Q_ALIGN0], v[V_Q_START],
                                qr, qdr, qddr)
    elif state == RUN:
        trajectory.gait(s[S_PHASE], s[S_PERIOD], coeffs, qr, qdr, qddr)
    elif state == STOPPING:
        for j in range(n):
            qdr[j] = 0.0
            qddr[j] = 0.0


@njit(cache=True)
def _safe_command(s, v, transmissions):
    """The ramped safe action on finite measurements; zero current once ramped out."""
    k = s[S_K]
    ramp = max(1.0, s[S_RAMP])
    fraction = max(0.0, 1.0 - (k - s[S_SAFE_K0]) / ramp)
    q, qd, qs, qds = v[V_Q], v[V_QD], v[V_Q_SAFE], v[V_QD_SAFE]
    for j in range(q.shape[0]):
        qs[j] = q[j] if math.isfinite(q[j]) else v[V_Q_HOLD, j]
        qds[j] = qd[j] if math.isfinite(qd[j]) else 0.0
    safety.safe_action(int(s[S_ACTION]), qs, qds, v[V_Q_HOLD], s[S_DAMPING], s[S_STIFFNESS],
                       fraction, v[V_TAU])
    no_friction_comp = s[S_FRICTION_COMP] > 2.0  # False, as the cycle's own flag is typed
    laws.torque_to_current(v[V_TAU], qds, v[V_QDDR], transmissions, no_friction_comp,
                           v[V_CUR])
    if fraction <= 0.0:
        v[V_CUR, :] = 0.0
        s[S_DISABLE] = 1.0
        if k - s[S_SAFE_K0] > ramp + 2:
            s[S_SAFE_DONE] = 1.0


@njit(cache=True)
def _record(s, v, flags, row):
    n = v.shape[1]
    row[0] = s[S_T]
    row[1] = s[S_K]
    row[2] = s[S_STATE]
    row[3] = s[S_CAUSE] if int(s[S_STATE]) == SAFE else 0.0
    o = 4
    for r in (V_Q, V_QD, V_QR, V_I_MEAS, V_CUR, V_TAU):
        for j in range(n):
            row[o + j] = v[r, j]
        o += n
    for j in range(n):
        row[o + j] = flags[j]
    o += n
    row[o] = s[S_OVERRUN_STREAK]
    row[o + 1] = s[S_BOARD]
    row[o + 2] = s[S_WAKE_US]
    row[o + 3] = s[S_COMPUTE_US]
    row[o + 4] = s[S_OVERRUNS]
    row[o + 5] = s[S_SAMPLE_T]


@njit(cache=True)
def _figures(state, s, v):
    """Running summary figures: tracking error over RUN, peak command, position range."""
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
        s[S_RUN_CYCLES] += 1.0
    s[S_CYCLES] += 1.0


@njit(cache=True)
def control_step(s, v, flags, streaks, limits, sopts, law_table, opts, gains, transmissions,
                 coeffs, law_state, scratch, check_out, model, data, model_exo, data_exo, rows,
                 hist):
    """One cycle's numbers, from the measurements in ``v`` to the currents in ``v[V_CUR]``
    (``law_table``: the compiled control laws, :func:`exo_rt.control.registry.table`)."""
    state = int(s[S_STATE])
    s[S_NEW_FAULT] = 0.0
    _estimate(s, v, flags)
    _reference(state, s, v, coeffs)
    if state == ALIGN or state == RUN or state == STOPPING:
        if _fresh(flags):
            laws.law_torque(law_table, opts, model, data, model_exo, data_exo, gains, law_state,
                            v[V_Q], v[V_QD], v[V_QR], v[V_QDR], v[V_QDDR], v[V_ASSIST], s[S_DT],
                            v[V_TAU], scratch)
            laws.torque_to_current(v[V_TAU], laws.friction_speed(opts, v[V_QD], v[V_QDR]),
                                   v[V_QDDR], transmissions, s[S_FRICTION_COMP] > 0.5, v[V_CUR])
        # else: a joint's feedback is missing this cycle — the last commands stand (the law
        # neither acts on a stale position nor winds up on it; safety counts the missing cycles)
    elif state != SAFE:
        v[V_TAU, :] = 0.0
        v[V_CUR, :] = 0.0
    if state != SAFE:
        tracking = state == ALIGN or state == RUN
        safety.check(limits, sopts, v[V_Q], v[V_QD], v[V_I_MEAS], v[V_CUR], v[V_TAU], flags,
                     streaks, int(s[S_OVERRUN_STREAK]), tracking, v[V_QR], check_out)
        board = int(s[S_BOARD])
        if check_out[0] == safety.OK and board & 1:
            check_out[0], check_out[1] = safety.ESTOP, -1
        elif check_out[0] == safety.OK and board & 2:
            check_out[0], check_out[1] = safety.BOARD_LINK_LOSS, -1
        elif check_out[0] == safety.OK and board & 4:
            check_out[0], check_out[1] = safety.MOTOR_POWER_OFF, -1
        if check_out[0] != safety.OK:  # SAFE from this very cycle on
            state = SAFE
            s[S_STATE] = SAFE
            s[S_CAUSE] = check_out[0]
            s[S_JOINT] = check_out[1]
            s[S_NEW_FAULT] = 1.0
            s[S_SAFE_K0] = s[S_K]
            s[S_DISABLE] = 0.0
            s[S_SAFE_DONE] = 0.0
            q = v[V_Q]
            for j in range(q.shape[0]):
                if math.isfinite(q[j]):
                    v[V_Q_HOLD, j] = q[j]
    if state == SAFE:
        _safe_command(s, v, transmissions)
    slot = int(s[S_SLOT])
    if slot >= 0:
        _record(s, v, flags, rows[slot])
    k = int(s[S_HIST])
    if 0 <= k < hist.shape[0]:
        if slot >= 0:
            row, kept = rows[slot], hist[k]
            for i in range(row.shape[0]):  # an element loop: no shape-check code to compile
                kept[i] = row[i]
        else:
            _record(s, v, flags, hist[k])
    _figures(state, s, v)


class CycleArrays:
    """The preallocated arrays of :func:`control_step` for n joints and a record ``width``."""

    def __init__(self, n: int, width: int, history: int) -> None:
        self.s = np.zeros(S_WIDTH)
        self.v = np.zeros((V_WIDTH, n))
        self.v[V_Q_MIN] = np.inf
        self.v[V_Q_MAX] = -np.inf
        self.flags = np.zeros(n, dtype=np.int64)
        self.streaks = np.zeros((safety.STREAKS, n), dtype=np.int64)
        self.check_out = np.zeros(_OUT, dtype=np.int64)
        self.hist = np.zeros((max(history, 0), width))
        self.no_rows = np.zeros((1, width))
        self.s[S_SLOT] = -1.0
        self.s[S_HIST] = -1.0
        self.s[S_JOINT] = -1.0
