"""The cycle's layout, declared once by name: its parameters (:data:`PARAMS`, the model's one
record), its scalars (:data:`SCALARS`, the data's one record), the session's reference
segment (:data:`SEGMENT`, the data's one record of it), the rows of its joint vectors
(:data:`ROWS`, indexed by the ``V_*`` constants: a matrix, so that a cycle's record is
copied from it in one pass). A leaf module: the cycle (:mod:`exo_rt.cycle.step`) and
the safety check read it.
"""

from __future__ import annotations

import numpy as np

# the cycle's parameters, fixed for a run (the model's one PARAMS record)
PARAMS = np.dtype([
    ("dt", "f8"),  # s: the period
    ("alpha", "f8"),  # the velocity filter's gain
    ("friction_comp", "?"),  # compensate friction in torque → current
    ("assist", "?"),  # some joint's gain ``assist`` is set: compute the wearer's torque
    ("action", "i8"),  # the safe action (safety.ACTION_*)
    ("damping", "f8"),  # N·m·s/rad of the safe action
    ("stiffness", "f8"),  # N·m/rad of the safe action
    ("ramp", "f8"),  # cycles of the safe action's ramp
    ("sole_timeout", "f8"),  # s: a foot-sole sensor without a PRESSURE frame this long is
    #                          stale (the safety's board_timeout, the board link's)
])

# the cycle's scalars (the data's one SCALARS record): inputs Python sets, outputs it reads
SCALARS = np.dtype([
    ("k", "f8"),  # the cycle's index
    ("t", "f8"),  # s: k·dt
    ("state", "f8"),  # state (exo_rt.cycle.states)
    ("phase", "f8"),  # gait phase (RUN), in strides
    ("overrun_streak", "f8"),  # consecutive late cycles
    ("board", "f8"),  # 1: e-stop pressed, 2: board link lost, 4: motor power off
    ("broken", "f8"),  # in: 1 once the step's own compiled code raised (an exception numba
    #                    reports and swallows at the step's C wrapper, exo_rt.runtime.cycle_io):
    #                    from then on only the safety's path runs — SAFE, cycle_exception
    ("safe_k0", "f8"),  # the cycle SAFE was entered
    ("cause", "f8"),  # out: the safety cause of SAFE (safety.CAUSES), 0 while all is well
    ("joint", "f8"),  # out: its joint, −1 for none
    ("new_fault", "f8"),  # out: 1 in the cycle a fault is detected
    ("disable", "f8"),  # out: 1 once the safe action has ramped out (drives to be disabled)
    ("safe_done", "f8"),  # out: 1 when SAFE has finished (ramp + disabled)
    ("wake_us", "f8"),  # the previous cycle's wake latency (µs), for the record
    ("compute_us", "f8"),  # the previous cycle's compute time (µs)
    ("overruns", "f8"),  # overruns so far
    ("slot", "f8"),  # the recording ring's row to fill, −1: not recording
    ("hist", "f8"),  # the history's row to fill, −1: not kept
    ("run_cycles", "f8"),  # out: cycles spent in RUN (summary)
    ("cycles", "f8"),  # out: cycles run
    ("sample_t", "f8"),  # s: when the drives sampled this cycle's feedback (its SYNC)
    # the wearer's gait, as the cycle estimates it (exo_rt.control.phase_estimate)
    ("heel", "f8"),  # in: 1 in the cycle a heel strike of the estimate's leg is reported
    # the assistance level (exo_rt.cycle.assistance): v[V_LEVEL_ASKED] asked for, applied
    # at the next stride boundary and ramped over a stride
    ("level_pending", "f8"),  # in: 1 when v[V_LEVEL_ASKED] waits for the next stride boundary
    ("level_ramp", "f8"),  # the ramp's progress, 0 → 1 (≥ 1: none running)
    # the reference governor (exo_rt.cycle.governor): the last word on every reference
    ("governed", "f8"),  # out: cycles in RUN whose reference the governor had to change
    ("governing", "f8"),  # out: 1 while it does (a joint's reference is not the segment's)
    # the board's foot-sole sensors (the stance-load feedforward, exo_rt.cycle.step.soles)
    ("sole_count", "f8"),  # PRESSURE frames the board link had decoded at the last change
    ("sole_time", "f8"),  # s: the cycle's t when that count last changed
])

# the session's reference segment (the data's one SEGMENT record, exo_rt.cycle.segment): the
# activity machine writes it between cycles, the cycle evaluates and advances it in RUN
SEGMENT = np.dtype([
    ("seg_kind", "f8"),  # segment.HOLD / MOVE / GAIT
    ("seg_tau", "f8"),  # s: a move's progress
    ("seg_duration", "f8"),  # s: a move's duration at full rate
    ("seg_rate", "f8"),  # progress rate, 0–1 (follows seg_go smoothly: segment._slew)
    ("seg_rate_dot", "f8"),  # 1/s: its rate of change (continuous: no step in q̈_r)
    ("seg_go", "f8"),  # 1: progress (GO held, or not needed), 0: freeze
    ("seg_slew", "f8"),  # rad/s: the rate filter's natural frequency ω (critically damped)
    ("seg_done", "f8"),  # out: 1 once a move or the closing step has ended (end posture)
    ("blend_start", "f8"),  # strides: where the running blend began
    ("blend_len", "f8"),  # strides: its length (0: none)
    ("a_kind", "f8"),  # the blend's side A: segment.POSTURE (v[V_SEG_FROM]) or GAIT_SOURCE,
    # or POSTURE_STEP (a walk's floor steps: the blend corrected by gaits[SLOT_OPEN])
    ("b_kind", "f8"),  # side B: POSTURE (v[V_SEG_TO]), GAIT_SOURCE or GAIT_STEPS
    ("a_period", "f8"),  # s: A's stride period
    ("b_period", "f8"),  # s: B's stride period
    ("next_pending", "f8"),  # 1: gaits[SLOT_NEXT] starts at the next stride boundary
    ("next_period", "f8"),  # s: its stride period
    ("next_blend", "f8"),  # strides: the blend into it
    ("stop_req", "f8"),  # 1: the closing step from the next half-stride boundary
    ("closing_len", "f8"),  # strides: the closing step's length
    ("closing", "f8"),  # 1 while the closing step runs
    ("stride", "f8"),  # out: stride boundaries crossed in this segment
])

# the joint vectors: the rows of v, one value per joint, by name — declared once: the cycle's
# compiled code indexes them by the V_* constants made from these names, Python reads each as
# a view of the same name (exo_rt.cycle.step.Cycle)
ROWS = (
    "q",  # rad, measured
    "q_prev",  # rad: the last position the velocity estimate used
    "qd",  # rad/s, estimated
    "i_meas",  # A, measured
    "qr",  # rad: the reference
    "qdr",  # rad/s
    "qddr",  # rad/s²
    "q_start",  # rad: where the gait starts
    "tau",  # N·m, commanded joint torque
    "cur",  # A, commanded current
    "assist",  # N·m, the wearer's own torque along the reference (transparent law)
    "q_hold",  # rad, the posture SAFE holds
    "q_safe",  # scratch: finite positions for the safe action
    "qd_safe",  # scratch: finite velocities
    "sse",  # summary: Σ(q − q_ref)² over RUN (deg²)
    "max_error",  # deg, over RUN
    "max_current",  # A, |command|
    "q_min",  # rad
    "q_max",  # rad
    "t_prev",  # s: when the joint's last used sample was taken (its sample_t then)
    "settle",  # fresh samples still to re-anchor on before the velocity estimate resumes
    "seg_from",  # rad: the segment's start posture (a move's start, the opening step's)
    "seg_to",  # rad: its end posture (a move's end, the closing step's, a hold's)
    "phase_offset",  # strides: each joint's gait phase offset (the right leg half a stride late)
    "level",  # the assistance level applied, 0–1
    "level_from",  # where its ramp began
    "level_to",  # where it ends (the level asked for)
    "winding",  # °C: the motor winding's temperature (exo_rt.actuators.thermal)
    "housing",  # °C: the motor housing's
    "reported_temp",  # °C: the drive's own reading (NaN where it reports none)
    "derate",  # the current limit's factor for the winding's temperature, 0–1
    "level_asked",  # the assistance level asked for (the session writes it; the cycle takes it
    # into level_to at the next stride boundary)
    # the reference governor (exo_rt.cycle.governor): each joint's bounds on the reference
    # and the reference it let through last cycle
    "gov_lo",  # rad: the lowest q_r (the soft limit, or the wearer's range where tighter)
    "gov_hi",  # rad: the highest
    "gov_vel",  # rad/s: the largest |q̇_r|
    "gov_acc",  # rad/s²: the largest |q̈_r| (and |Δq̇_r| per cycle over the period)
    "gov_q",  # rad: the reference let through last cycle
    "gov_qd",  # rad/s
    "gov_on",  # 1 while the joint's reference is the governor's, not the segment's
)
V_WIDTH = len(ROWS)


def row(name: str) -> int:
    """The row of v holding the joint vector ``name`` (:data:`ROWS`)."""
    return ROWS.index(name)


# the rows as integer constants, for compiled code (each from its name)
V_Q, V_Q_PREV, V_QD, V_I_MEAS = row("q"), row("q_prev"), row("qd"), row("i_meas")
V_QR, V_QDR, V_QDDR, V_Q_START = row("qr"), row("qdr"), row("qddr"), row("q_start")
V_TAU, V_CUR, V_ASSIST, V_Q_HOLD = row("tau"), row("cur"), row("assist"), row("q_hold")
V_Q_SAFE, V_QD_SAFE, V_SSE = row("q_safe"), row("qd_safe"), row("sse")
V_MAX_ERROR, V_MAX_CURRENT = row("max_error"), row("max_current")
V_Q_MIN, V_Q_MAX, V_T_PREV, V_SETTLE = row("q_min"), row("q_max"), row("t_prev"), row("settle")
V_SEG_FROM, V_SEG_TO, V_OFFSET = row("seg_from"), row("seg_to"), row("phase_offset")
V_LEVEL, V_LEVEL_FROM, V_LEVEL_TO = row("level"), row("level_from"), row("level_to")
V_LEVEL_ASKED = row("level_asked")
V_T_WINDING, V_T_HOUSING, V_T_REPORTED = row("winding"), row("housing"), row("reported_temp")
V_DERATE = row("derate")
V_GOV_LO, V_GOV_HI, V_GOV_VEL, V_GOV_ACC = (row("gov_lo"), row("gov_hi"), row("gov_vel"),
                                            row("gov_acc"))
V_GOV_Q, V_GOV_QD, V_GOV_ON = row("gov_q"), row("gov_qd"), row("gov_on")

SETTLE_SAMPLES = 2  # after feedback went missing: which SYNC the next samples answer is unsure
