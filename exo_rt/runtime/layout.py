"""The cycle's layout, declared once by name: its parameters (:data:`PARAMS`, the model's one
record), its scalars (:data:`SCALARS`, the data's one record) and the rows of its joint
vectors (``V_*``: a matrix, so that a cycle's record is copied from it in one pass). A leaf
module: the cycle (:mod:`exo_rt.runtime.cycle`) and the safety check read it.
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
])

# the cycle's scalars (the data's one SCALARS record): inputs Python sets, outputs it reads
SCALARS = np.dtype([
    ("k", "f8"),  # the cycle's index
    ("t", "f8"),  # s: k·dt
    ("state", "f8"),  # state (exo_rt.runtime.states)
    ("phase", "f8"),  # gait phase (RUN), in strides
    ("overrun_streak", "f8"),  # consecutive late cycles
    ("board", "f8"),  # 1: e-stop pressed, 2: board link lost, 4: motor power off
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
    # the session's reference segment (exo_rt.runtime.segment; the activity machine writes it)
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
    ("a_kind", "f8"),  # the blend's side A: segment.POSTURE (v[V_SEG_FROM]) or GAIT_SOURCE
    ("b_kind", "f8"),  # side B: POSTURE (v[V_SEG_TO]) or GAIT_SOURCE
    ("a_period", "f8"),  # s: A's stride period
    ("b_period", "f8"),  # s: B's stride period
    ("next_pending", "f8"),  # 1: gaits[SLOT_NEXT] starts at the next stride boundary
    ("next_period", "f8"),  # s: its stride period
    ("next_blend", "f8"),  # strides: the blend into it
    ("stop_req", "f8"),  # 1: the closing step from the next half-stride boundary
    ("closing_len", "f8"),  # strides: the closing step's length
    ("closing", "f8"),  # 1 while the closing step runs
    ("stride", "f8"),  # out: stride boundaries crossed in this segment
    # the wearer's gait, as the cycle estimates it (exo_rt.control.phase_estimate)
    ("heel", "f8"),  # in: 1 in the cycle a heel strike of the estimate's leg is reported
    # the assistance level (exo_rt.runtime.assistance): v[V_LEVEL_ASKED] asked for, applied
    # at the next stride boundary and ramped over a stride
    ("level_pending", "f8"),  # in: 1 when v[V_LEVEL_ASKED] waits for the next stride boundary
    ("level_ramp", "f8"),  # the ramp's progress, 0 → 1 (≥ 1: none running)
    # the reference governor (exo_rt.runtime.governor): the last word on every reference
    ("governed", "f8"),  # out: cycles in RUN whose reference the governor had to change
    ("governing", "f8"),  # out: 1 while it does (a joint's reference is not the segment's)
])

# joint vectors (v rows)
V_Q = 0  # rad, measured
V_Q_PREV = 1
V_QD = 2  # rad/s, estimated
V_I_MEAS = 3  # A, measured
V_QR = 4  # reference
V_QDR = 5
V_QDDR = 6
V_Q_START = 7  # where the gait starts
V_TAU = 8  # N·m, commanded joint torque
V_CUR = 9  # A, commanded current
V_ASSIST = 10  # N·m, the wearer's own torque along the reference (transparent law)
V_Q_HOLD = 11  # rad, the posture SAFE holds
V_Q_SAFE = 12  # scratch: finite positions for the safe action
V_QD_SAFE = 13  # scratch: finite velocities
V_SSE = 14  # summary: Σ(q − q_ref)² over RUN (deg²)
V_MAX_ERROR = 15  # deg, over RUN
V_MAX_CURRENT = 16  # A, |command|
V_Q_MIN = 17  # rad
V_Q_MAX = 18
V_T_PREV = 19  # s: when the joint's last used sample was taken (its sample_t then)
V_SETTLE = 20  # fresh samples still to re-anchor on before the velocity estimate resumes
V_SEG_FROM = 21  # rad: the segment's start posture (a move's start, the opening step's)
V_SEG_TO = 22  # rad: its end posture (a move's end, the closing step's, a hold's)
V_OFFSET = 23  # strides: each joint's gait phase offset (the right leg half a stride late)
V_LEVEL = 24  # the assistance level applied, 0–1
V_LEVEL_FROM = 25  # where its ramp began
V_LEVEL_TO = 26  # where it ends (the level asked for)
V_T_WINDING = 27  # °C: the motor winding's temperature (exo_rt.actuators.thermal)
V_T_HOUSING = 28  # °C: the motor housing's
V_T_REPORTED = 29  # °C: the drive's own reading (NaN where it reports none)
V_DERATE = 30  # the current limit's factor for the winding's temperature, 0–1
V_LEVEL_ASKED = 31  # the assistance level asked for (the session writes it; the cycle takes it
# into V_LEVEL_TO at the next stride boundary)
# the reference governor (exo_rt.runtime.governor): each joint's bounds on the reference and
# the reference it let through last cycle
V_GOV_LO = 32  # rad: the lowest q_r (the soft limit, or the wearer's range where tighter)
V_GOV_HI = 33  # rad: the highest
V_GOV_VEL = 34  # rad/s: the largest |q̇_r|
V_GOV_ACC = 35  # rad/s²: the largest |q̈_r| (and |Δq̇_r| per cycle over the period)
V_GOV_Q = 36  # rad: the reference let through last cycle
V_GOV_QD = 37  # rad/s
V_GOV_ON = 38  # 1 while the joint's reference is the governor's, not the segment's
V_WIDTH = 39

SETTLE_SAMPLES = 2  # after feedback went missing: which SYNC the next samples answer is unsure

# the joint vectors Python reads and writes by name (rows of v)
VECTORS = {"q": V_Q, "q_prev": V_Q_PREV, "qd": V_QD, "i_meas": V_I_MEAS, "qr": V_QR,
           "qdr": V_QDR, "qddr": V_QDDR, "q_start": V_Q_START,
           "tau": V_TAU, "cur": V_CUR, "assist": V_ASSIST, "t_prev": V_T_PREV,
           "seg_from": V_SEG_FROM, "seg_to": V_SEG_TO, "phase_offset": V_OFFSET,
           "level": V_LEVEL, "level_to": V_LEVEL_TO, "level_asked": V_LEVEL_ASKED,
           "winding": V_T_WINDING, "gov_lo": V_GOV_LO, "gov_hi": V_GOV_HI,
           "gov_vel": V_GOV_VEL, "gov_acc": V_GOV_ACC, "gov_on": V_GOV_ON,
           "housing": V_T_HOUSING, "reported_temp": V_T_REPORTED, "derate": V_DERATE}
