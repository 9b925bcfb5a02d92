"""The safety supervisor: always on, also in simulation and replay.

Every cycle :func:`check` looks at the measurements, the flags of the drives, the law's
torque and the commanded currents, and returns the first cause found (or ``OK``) and its
joint. A cause latches the controller into SAFE; :func:`safe_action` then gives the configured
reaction — zero current (the harmonic drive holds by friction), damping, or hold position —
ramped down over ``ramp`` cycles, after which the drives are disabled. The current is clamped
again in the frame encoder, the last line.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.bus.flags import (
    F_DUPLICATE,
    F_FAULT,
    F_FOREIGN,
    F_GLITCH,
    F_HEARTBEAT,
    F_MALFORMED,
    F_MISSING,
    F_SATURATED,
)
from exo_rt.cycle.layout import (
    V_CUR,
    V_DERATE,
    V_I_MEAS,
    V_Q,
    V_QD,
    V_QR,
    V_T_WINDING,
    V_TAU,
)
from exo_rt.cycle.states import RUN
from exo_rt.jit import njit
from exo_rt.schema import top

OK = 0
POSITION_LIMIT = 1
VELOCITY_LIMIT = 2
CURRENT_LIMIT = 3
TRACKING_ERROR = 4
STALE_FEEDBACK = 5
DRIVE_FAULT = 6
HEARTBEAT_LOSS = 7
OVERRUN = 8
NOT_FINITE = 9
ENCODER_GLITCH = 10
OPERATOR_STOP = 11
ESTOP = 12
BOARD_LINK_LOSS = 13
MOTOR_POWER_OFF = 14  # the board cut motor power (its watchdog, or a relay fault)
FOREIGN_MASTER = 15  # another node sent what only the controller may send on its bus
DUPLICATE_ANSWER = 16  # a drive answered twice a cycle for several cycles in a row (someone
# else's SYNC, or a drive whose TPDO is not SYNC-triggered): which answer is this cycle's is
# unknown. (Once is no fault: a late answer to the last SYNC, read after the next SYNC left,
# looks like an answer to it — a held-up simulation or drive does that.)
CURRENT_SATURATION = 17  # a drive's current fell short of its command for too many cycles
WINDING_TEMPERATURE = 18  # a motor winding reached its limit (exo_rt.actuators.thermal)
CYCLE_EXCEPTION = 19  # the cycle's own compiled code raised (a division by zero, a domain
# error): what it computed that cycle and after is not trusted (exo_rt.runtime.cycle_io)
CAUSES = ("ok", "position_limit", "velocity_limit", "current_limit", "tracking_error",
          "stale_feedback", "drive_fault", "heartbeat_loss", "overrun", "not_finite",
          "encoder_glitch", "operator_stop", "estop", "board_link_loss", "motor_power_off",
          "foreign_master", "duplicate_answer", "current_saturation", "winding_temperature",
          "cycle_exception")

# the safe actions by name → code: their names and order are the top config's (one list)
ACTIONS = {name: code for code, name in enumerate(top.ACTIONS)}
ACTION_ZERO_CURRENT = ACTIONS["zero_current"]  # 0
ACTION_DAMPING = ACTIONS["damping"]  # 1
ACTION_HOLD = ACTIONS["hold"]  # 2

# limits, one record per joint, read by field name (docs/performance.md, "Named layouts")
LIMITS = np.dtype([
    ("lower", "f8"),  # rad: soft limits (inside the joint's limits by a margin)
    ("upper", "f8"),  # rad
    ("velocity", "f8"),  # rad/s
    ("current", "f8"),  # A: measured current beyond this (10 % over the command limit): a fault
    ("tracking", "f8"),  # rad: |q_ref − q| beyond this while tracking: a fault
])
# options (one row)
SOPT_STOP_TIME = 0  # s: velocity-dependent margin = |v|·stop_time before a soft limit
SOPT_STALE_CYCLES = 1  # consecutive cycles without feedback before it is stale
SOPT_OVERRUN_STREAK = 2
SOPT_SATURATION_CYCLES = 3  # consecutive cycles a drive's current falls short of its command
SOPT_DUPLICATE_CYCLES = 4  # consecutive cycles a drive answers twice
SOPT_WIDTH = 5
# the per-joint streaks the check keeps (rows of an int64 (STREAKS, n) array)
STREAK_MISSING, STREAK_SATURATED, STREAK_DUPLICATE = range(3)
STREAKS = 3


def options(sc) -> np.ndarray:
    """The check's options row (``SOPT_*``) from a top config's ``safety`` section."""
    opts = np.zeros(SOPT_WIDTH)
    opts[SOPT_STOP_TIME] = sc.stop_time
    opts[SOPT_STALE_CYCLES] = sc.stale_cycles
    opts[SOPT_OVERRUN_STREAK] = sc.overrun_streak
    opts[SOPT_SATURATION_CYCLES] = sc.saturation_cycles
    opts[SOPT_DUPLICATE_CYCLES] = sc.duplicate_cycles
    return opts



@njit(cache=True)
def check(m, d):
    """First safety cause (``d.check_out[0]``) and its joint (``d.check_out[1]``); OK if all
    is well — on the cycle's model (``m.limits``, ``m.sopts``) and data (its measured and
    commanded joint vectors, the drives' flags, the state: the tracking error counts in
    RUN unless the wearer leads the motion, the overrun streak).

    ``d.streaks`` (int64, ``STREAKS`` × n) counts per joint the consecutive cycles without
    feedback (F_MISSING/F_MALFORMED), with the current short of its command (F_SATURATED) and
    with two answers (F_DUPLICATE), updated here. Another master on the bus (F_FOREIGN) is a
    cause in the cycle it is read: after it, which frames move the motors is no longer the
    controller's to say.
    """
    v, s, flags, streaks, out = d.v, d.s[0], d.flags, d.streaks, d.check_out
    limits, opts = m.limits, m.sopts
    q, qd, current_meas, current_cmd, tau, q_ref = (v[V_Q], v[V_QD], v[V_I_MEAS], v[V_CUR],
                                                    v[V_TAU], v[V_QR])
    state = int(s.state)
    tracking_on = state == RUN and not m.law.opts[0].follows_wearer  # (a law the wearer
    # leads — transparent, the assistance laws — tracks nothing: no tracking error)
    overrun_streak = int(s.overrun_streak)
    n = q.shape[0]
    out[0] = OK
    out[1] = -1
    for j in range(n):
        if flags[j] & (F_MISSING | F_MALFORMED):  # a late frame leaves the cycle missing too
            streaks[STREAK_MISSING, j] += 1
        else:
            streaks[STREAK_MISSING, j] = 0
        if flags[j] & F_SATURATED:
            streaks[STREAK_SATURATED, j] += 1
        else:
            streaks[STREAK_SATURATED, j] = 0
        if flags[j] & F_DUPLICATE:
            streaks[STREAK_DUPLICATE, j] += 1
        else:
            streaks[STREAK_DUPLICATE, j] = 0
    for j in range(n):
        if flags[j] & F_FOREIGN:
            out[0] = FOREIGN_MASTER
            out[1] = j
            return
    for j in range(n):
        if not (math.isfinite(q[j]) and math.isfinite(qd[j]) and math.isfinite(tau[j])
                and math.isfinite(current_cmd[j]) and math.isfinite(current_meas[j])):
            out[0] = NOT_FINITE
            out[1] = j
            return
    for j in range(n):
        if flags[j] & F_FAULT:
            out[0] = DRIVE_FAULT
        elif streaks[STREAK_MISSING, j] >= opts[SOPT_STALE_CYCLES]:
            out[0] = STALE_FEEDBACK
        elif streaks[STREAK_DUPLICATE, j] >= opts[SOPT_DUPLICATE_CYCLES]:
            out[0] = DUPLICATE_ANSWER
        elif flags[j] & F_HEARTBEAT:
            out[0] = HEARTBEAT_LOSS
        elif flags[j] & F_GLITCH:
            out[0] = ENCODER_GLITCH
        elif abs(current_meas[j]) > limits[j].current:
            out[0] = CURRENT_LIMIT
        elif streaks[STREAK_SATURATED, j] >= opts[SOPT_SATURATION_CYCLES]:
            out[0] = CURRENT_SATURATION
        elif abs(qd[j]) > limits[j].velocity:
            out[0] = VELOCITY_LIMIT
        elif m.thermal[j].c_w > 0.0 and v[V_T_WINDING, j] >= m.thermal[j].limit:
            out[0] = WINDING_TEMPERATURE
        else:
            margin = abs(qd[j]) * opts[SOPT_STOP_TIME]
            if (q[j] < limits[j].lower + (margin if qd[j] < 0 else 0.0)
                    or q[j] > limits[j].upper - (margin if qd[j] > 0 else 0.0)):
                out[0] = POSITION_LIMIT
            elif tracking_on and abs(q_ref[j] - q[j]) > limits[j].tracking:
                # (lost while its current limit is derated for a hot winding: that is why)
                out[0] = WINDING_TEMPERATURE if v[V_DERATE, j] < 1.0 else TRACKING_ERROR
        if out[0] != OK:
            out[1] = j
            return
    if overrun_streak >= opts[SOPT_OVERRUN_STREAK]:
        out[0] = OVERRUN


@njit(cache=True, python=False)
def safe_action(action, q, qd, q_hold, damping, stiffness, fraction, tau):
    """The reaction's joint torque, scaled by ``fraction`` (1 → 0 over the ramp)."""
    for j in range(q.shape[0]):
        if action == ACTION_DAMPING:
            tau[j] = -damping * qd[j] * fraction
        elif action == ACTION_HOLD:
            tau[j] = (stiffness * (q_hold[j] - q[j]) - damping * qd[j]) * fraction
        else:
            tau[j] = 0.0


def limits_array(mech, joint_margin: float, tracking_limit: float,
                 current_limit: np.ndarray) -> np.ndarray:
    """Per-joint safety limits (:data:`LIMITS` records): soft limits ``joint_margin`` inside
    the robot's limits."""
    c = [mech.coordinate_names.index(name) for name in mech.joint_names]
    lim = np.zeros(mech.nq, LIMITS)
    lim["lower"] = mech.lower[c] + joint_margin
    lim["upper"] = mech.upper[c] - joint_margin
    lim["velocity"] = mech.velocity_limit[c]
    lim["current"] = np.where(current_limit > 0, 1.1 * current_limit, np.inf)
    lim["tracking"] = tracking_limit
    return lim
