"""Model-in-the-loop simulation: the law on the controller's rigid model against the plant
(a registered plant model, :mod:`exo_rt.sim.plants`; by default ``harmonic_drive``: compliant
drives, friction, current loops) with encoder quantisation, entirely inside njit — the plant
through its compiled step — for fast gain design (docs/config-controller.md;
``tools/mil.py``).

The timing is that of drives on a SYNC-driven bus: a drive samples its encoder at a SYNC and
applies, at that same SYNC, the command the controller computed from the *previous* sample.
So a command acts one period after the measurement it answers (a transport delay of one
period, as on the exoskeleton and in :mod:`exo_rt.sim.simbus`); gains designed without it
are too high for the real loop.

Optionally a *wearer* moves the leg too: a torque on each joint from their own limbs'
inverse dynamics along the reference plus a joint stiffness and damping towards it
(τ_w = ID_wearer(q, q̇, q̈_d) + K_p e + K_d ė). It measures how much of the exoskeleton the
wearer feels: the interaction torque τ_w − ID_wearer(q, q̇, q̈) on the actual motion.

Or a *walker* (:mod:`exo_rt.sim.walker`) moves it: a wearer who walks their own gait at their
own cadence (changing mid-run, or standing still) by their own torques, whatever the
controller's reference does, and reports their heel strikes to the cycle (its ``heel``
input, in the cycle after the strike, some dropped as a board misses them). Their effort
(RMS of their joint torque) measures what the assistance saves them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from exo_rt.control import estimate, trajectory
from exo_rt.control.config import ControllerConfig
from exo_rt.cycle import governor, safety, segment
from exo_rt.cycle import step as cy
from exo_rt.cycle.layout import V_OFFSET
from exo_rt.cycle.states import RUN, SAFE
from exo_rt.dynamics import Dynamics, kernels
from exo_rt.errors import ComputeError
from exo_rt.jit import njit
from exo_rt.model.mechanism import Mechanism
from exo_rt.schema.top import SafetyConfig
from exo_rt.sim import plants
from exo_rt.sim import walker as wk
from exo_rt.sim.plants import ST_EXT, ST_I, ST_Q, ST_V, T_JOINT, T_K, T_ROTOR
from exo_rt.unraisable import Swallowed

# the safety checks of model-in-the-loop: a top config's defaults, but the tracking error is
# what it measures (a law that does not track — passive, transparent — would stop on it)
MIL_SAFETY = dataclasses.replace(SafetyConfig(), tracking_error=math.inf)

# log columns: t, then blocks of n: q (true), q_ref, current cmd, τ law, τ wearer, v (true),
# the walker's own reference q_w (0 without a walker); then the walker's phase (strides since
# the start, unwrapped), the cycle's heel input this cycle (1: a heel strike reported), the
# cycle's gait-phase estimate (strides, [0, 1)), its ``walking`` (0–1) and the first joint's
# assistance level (0–1); then each joint's winding temperature (°C), current-limit factor and
# measured motor current (A)
LOG_T = 0
BLOCKS = 7
B_TAU_WEARER, B_WALKER = 4, 6


def log_width(n: int) -> int:
    """The log's columns for ``n`` joints."""
    return 1 + BLOCKS * n + 5 + 3 * n


def log_phase(n: int) -> int:
    """The column of the walker's phase (strides, unwrapped); then the heel input's, the
    estimated phase's, ``walking``'s and the level's, then n winding temperatures (°C), n
    current-limit factors (:mod:`exo_rt.actuators.thermal`) and n measured motor currents
    (A)."""
    return 1 + BLOCKS * n


@njit(cache=True)
def _measure(d, plant, sensors):
    """The encoders, as the drives read them at a SYNC, into the cycle's measured positions:
    the motor's (through the transmission) or the joint's, quantised to ``sensors[1]``
    counts a revolution (``sensors[0]`` 1: on the motor); and the motors' actual currents
    (A), as the drives report them."""
    leg_transmissions, leg_state = plant[2], plant[3]
    q = d.v[cy.V_Q]
    for m in range(leg_transmissions.shape[0]):
        j = int(leg_transmissions[m, T_JOINT])
        d.v[cy.V_I_MEAS, j] = leg_state[ST_I, m]
        if sensors[0] > 0.5:
            r = int(leg_transmissions[m, T_ROTOR])
            rotor = estimate.quantize(leg_state[ST_Q, r], sensors[1])
            q[j] = estimate.joint_from_motor(rotor, leg_transmissions[m, T_K])
        else:
            q[j] = estimate.quantize(leg_state[ST_Q, j], sensors[1])


@njit(cache=True)
def _wearer(m, d, plant, gains, work):
    """The wearer's muscles (true state: proprioception): their own limbs' inverse dynamics
    along the reference plus a joint stiffness and damping towards it, onto the plant."""
    leg_state, lm, ld = plant[3], m.law, d.law
    tw, t_exo, qw, vw = work[0], work[1], work[2], work[3]
    for j in range(tw.shape[0]):
        qw[j] = leg_state[ST_Q, j]
        vw[j] = leg_state[ST_V, j]
    kernels.inverse_dynamics(lm.model, ld.data, qw, vw, ld.qddr, tw)
    kernels.inverse_dynamics(lm.model_exo, ld.data_exo, qw, vw, ld.qddr, t_exo)
    for j in range(tw.shape[0]):
        leg_state[ST_EXT, j] = (tw[j] - t_exo[j] + gains[0] * (ld.qr[j] - qw[j])
                                + gains[1] * (ld.qdr[j] - vw[j]))


@njit(cache=True)
def mil_loop(m, d, plant, sensors, wearer, walker, log):
    """Run ``len(log)`` control periods of the cycle (``m``, ``d``: :func:`exo_rt.runtime.
    cycle.build`'s, in RUN) against the plant: ``plant`` = (its model, data, transmissions,
    state, scratch, compiled step, sub-steps) in its model's common layout
    (:mod:`exo_rt.sim.plants`); ``sensors`` = [source (0 output, 1 motor), counts/rev];
    ``walker``: :func:`exo_rt.sim.walker.compile_walker`'s tuple (an empty schedule: none).

    Each period: the walker's heel strike of the last cycle into the cycle's ``heel`` input
    → the encoders read → :func:`exo_rt.cycle.step.step` (the controller's own: estimate,
    reference, the wearer's torque, law, current, safety) → the currents latched for the next
    SYNC → the wearer's or the walker's torque → the plant's step. Returns the largest
    |current| commanded (A) relative to its limit (≤ 1 by construction)."""
    leg_model, leg_data, leg_transmissions, leg_state, leg_scratch, leg_step, substeps = plant
    wearer_gains, external = wearer
    s, v = d.s[0], d.v
    dt = m.p[0].dt
    n = v.shape[1]
    n_tr = leg_transmissions.shape[0]
    cmd = np.zeros(n_tr)  # A: what the drives apply this period (last period's law)
    latched = np.zeros(n_tr)  # A: this period's law, applied at the next SYNC
    work = np.zeros((4, n))  # the wearer's torques and state
    walking = walker[wk.W_SCHEDULE].shape[0] > 0
    qw = walker[wk.W_WORK][0]  # the walker's reference (walker_step writes it)
    w_state = walker[wk.W_STATE]
    o_phase = 1 + BLOCKS * n
    worst = 0.0
    for j in range(n):
        v[cy.V_Q_PREV, j] = leg_state[ST_Q, j]
        v[cy.V_QD, j] = leg_state[ST_V, j]
        v[cy.V_T_PREV, j] = -dt
    for k in range(log.shape[0]):
        t = k * dt
        s.sample_t = t
        cy.clock(d, k, dt)  # (RUN from cycle 0)
        heel = 0.0
        if walking:  # the board's report of last cycle's heel strike (0: none, or dropped)
            heel = wk.heel_report(walker)
            s.heel = heel
        _measure(d, plant, sensors)
        cy.step(m, d)
        cur = v[cy.V_CUR]
        for j in range(n):
            lim = m.transmissions[j].current_limit
            if lim > 0.0:
                worst = max(worst, abs(cur[j]) / lim)
        for i in range(n_tr):
            cmd[i] = latched[i]
            latched[i] = cur[int(leg_transmissions[i, T_JOINT])]
        if wearer_gains[0] > 0.0:
            _wearer(m, d, plant, wearer_gains, work)
        if walking:
            wk.walker_step(walker, t, leg_state)
        if external.shape[0] > 0:  # a known perturbation, on top of the wearer's torque
            for j in range(n):
                leg_state[ST_EXT, j] = external[k, j] + (
                    leg_state[ST_EXT, j] if walking or wearer_gains[0] > 0.0 else 0.0)
        log[k, LOG_T] = t
        for j in range(n):
            log[k, 1 + j] = leg_state[ST_Q, j]
            log[k, 1 + n + j] = v[cy.V_QR, j]
            log[k, 1 + 2 * n + j] = cur[j]
            log[k, 1 + 3 * n + j] = v[cy.V_TAU, j]
            log[k, 1 + 4 * n + j] = leg_state[ST_EXT, j]
            log[k, 1 + 5 * n + j] = leg_state[ST_V, j]
            log[k, 1 + B_WALKER * n + j] = qw[j] if walking else 0.0
        log[k, o_phase] = w_state[wk.S_PHASE]
        log[k, o_phase + 1] = heel
        log[k, o_phase + 2] = d.law.gait[0].phase
        log[k, o_phase + 3] = d.law.gait[0].walking
        log[k, o_phase + 4] = v[cy.V_LEVEL, 0]
        for j in range(n):
            log[k, o_phase + 5 + j] = v[cy.V_T_WINDING, j]
            log[k, o_phase + 5 + n + j] = v[cy.V_DERATE, j]
            log[k, o_phase + 5 + 2 * n + j] = v[cy.V_I_MEAS, j]
        leg_step(leg_model, leg_data, leg_transmissions, leg_state, cmd, dt, substeps,
                 leg_scratch)
    return worst


@dataclass
class MilResult:
    """Figures of one model-in-the-loop run (angles in degrees)."""

    joint_names: tuple[str, ...]
    log: np.ndarray
    rms_error_deg: np.ndarray
    max_error_deg: np.ndarray
    max_abs_current_A: np.ndarray
    worst_current_fraction: float
    interaction_rms_Nm: np.ndarray | None = None
    safe: dict | None = None  # the safety cause that ended tracking (cause, t, joint), if any
    # with a wearer or a walker: the RMS of their joint torque (N·m) over the options' window
    wearer_effort_rms_Nm: np.ndarray | None = None
    # with a walker: the RMS of the true joint angle against their own reference (deg) over
    # the window, their phase (strides since the start, unwrapped, one per cycle), each heel
    # strike's time (s: the first cycle at or past the integer crossing) and whether the
    # board dropped it
    walker_rms_deg: np.ndarray | None = None
    walker_phase: np.ndarray | None = None
    heel_strike_times: np.ndarray | None = None
    heel_dropped: np.ndarray | None = None

    def column(self, block: int) -> np.ndarray:
        n = len(self.joint_names)
        return self.log[:, 1 + block * n : 1 + (block + 1) * n]


@dataclass(frozen=True)
class MilOptions:
    """How a model-in-the-loop run goes, beside the robot and the controller file."""

    model: Mechanism | None = None  # the controller's rigid model (default: the robot's)
    exo_model: Mechanism | None = None  # the exoskeleton alone (the transparent law's)
    wearer_gains: tuple[float, float] = (0.0, 0.0)  # (K_p N·m/rad, K_d N·m·s/rad): the
    # wearer's tracking (0: no wearer torque)
    dt: float = 1e-3  # s: the control period
    substeps: int = 10  # the plant's sub-steps a period
    plant_model: str = plants.DEFAULT  # the registered plant model (exo_rt.sim.plants)
    plant_room: dict | None = None  # where it stands (the top config's simulation: room keys)
    safety_cfg: SafetyConfig | None = None  # the checks (default MIL_SAFETY)
    walker: wk.Walker | None = None  # a wearer who walks by themselves (needs exo_model)
    duration: float | None = None  # s: the run's length (default: ``cycles`` strides of the
    # controller's gait)
    window: tuple[float, float] = (0.0, math.inf)  # s: where the wearer's effort and the
    # walker's tracking are measured (to leave out the start)
    level: float = 1.0  # the assistance level, every joint (0–1)
    external: np.ndarray | None = None  # (steps, n) N·m: a known torque on each joint, cycle
    # by cycle (a perturbation), on top of the wearer's
    gait: tuple[np.ndarray, float] | None = None  # (Fourier rows (n, 11) rad, stride period
    # s): the gait the reference and the walker walk instead of the controller file's normal
    # gait (the activities' gait: flat_foot on the floor, exo_rt.session.session.
    # gait_function)


def build_cycle(robot: Mechanism, cfg: ControllerConfig, options: MilOptions) -> cy.Cycle:
    """Model-in-the-loop's cycle: the controller's (:func:`exo_rt.cycle.step.build`) on
    the options' rigid models and safety checks, its reference governor bounding the range
    alone; RUN tracks its default segment (the gait from phase 0:
    :func:`exo_rt.cycle.segment.walk_from_start`)."""
    o = options
    model = o.model or robot
    c = cy.build(model, o.exo_model or model, cfg, o.safety_cfg or MIL_SAFETY, dt=o.dt)
    if o.gait is not None:  # the activities' gait, at its own stride, from phase 0
        rows, period = o.gait
        c.coeffs[:] = rows
        c.gaits[:] = rows
        c.period = float(period)
        segment.walk_from_start(c.s, c.seg, float(period))
        c.q_start[:] = trajectory.start_position(c.coeffs)
    # the reference governor keeps the joints' range, not a session's speed and acceleration
    # bounds: the walker or the study sets the pace model-in-the-loop measures
    governor.set_bounds(c.v, c.limits, math.inf, math.inf)
    return c


def run_mil(robot: Mechanism, cfg: ControllerConfig, cycles: float = 10,
            **options) -> MilResult:
    """Track ``cycles`` gait cycles of the controller ``cfg`` on the plant of ``robot``;
    ``options``: :class:`MilOptions`' fields by name — the controller's rigid ``model``
    (default: the robot's own — nominal), the exoskeleton alone ``exo_model`` (transparent
    law), the wearer's ``wearer_gains``, the registered ``plant_model`` that simulates the
    leg, and ``safety_cfg`` the safety section the cycle checks (default
    :data:`MIL_SAFETY`) — a cause found ends tracking with the safe action, as on the
    exoskeleton, and is in the result's ``safe``; a ``walker`` who moves the leg instead of
    the wearer (:mod:`exo_rt.sim.walker`: the plant starts at their posture at their phase
    0, their phase offsets go into the cycle's ``v[V_OFFSET]``), the run's ``duration`` (s)
    instead of ``cycles`` and the ``window`` (s) the wearer's effort is measured over.
    """
    o = MilOptions(**options)
    model, exo_model, wearer_gains = o.model, o.exo_model, o.wearer_gains
    dt, substeps, plant_model = o.dt, o.substeps, o.plant_model
    model = model or robot
    exo_model = exo_model or model
    n = robot.nq
    plant = plants.create(plant_model, robot, dt=dt, substeps=substeps, room=o.plant_room)
    c = build_cycle(robot, cfg, o)
    c.s["state"] = RUN
    c.v[cy.V_LEVEL] = c.v[cy.V_LEVEL_TO] = c.v[cy.V_LEVEL_ASKED] = o.level
    duration = cycles * c.period if o.duration is None else o.duration
    steps = int(round(duration / dt))
    walker = _walker(robot, o, c, duration)
    if o.walker is not None:
        q0, v0 = wk.start(walker)
    else:
        q0, v0, a0 = np.zeros(n), np.zeros(n), np.zeros(n)
        trajectory.gait(0.0, c.period, c.coeffs, q0, v0, a0)
    plant.reset(q0, v0, equilibrium=False)
    log = np.zeros((steps, log_width(n)))
    sensors = np.array([1.0 if cfg.encoder == "motor" else 0.0, cfg.counts_per_rev])
    with Swallowed() as swallowed:  # a law or the plant raised: numba can only report it
        worst = mil_loop(c.model, c.data, (plant.model, plant.data, plant.transmissions,
                                           plant.state, plant.scratch,
                                           plants.compiled_step(plant), substeps),
                         sensors, (np.array(wearer_gains, dtype=float),
                                   _external(o, steps, n)), walker, log)
    if swallowed.count:
        raise ComputeError(f"the compiled law or plant raised {swallowed.first!r} in "
                           f"{swallowed.count} call(s) of {steps} cycles: the run's figures "
                           "are a broken run's", None,
                           "find the division or domain error in the law (numba cannot "
                           "raise out of a compiled law: it reports the error and goes on)")
    q, qr = log[:, 1 : 1 + n], log[:, 1 + n : 1 + 2 * n]
    err = np.degrees(q - qr)
    result = MilResult(robot.joint_names, log, np.sqrt(np.mean(err**2, axis=0)),
                       np.max(np.abs(err), axis=0),
                       np.max(np.abs(log[:, 1 + 2 * n : 1 + 3 * n]), axis=0), float(worst))
    if wearer_gains[0] > 0.0:
        result.interaction_rms_Nm = _interaction_rms(robot, exo_model, log, n, dt)
    inside = (log[:, LOG_T] >= o.window[0]) & (log[:, LOG_T] <= o.window[1])
    if wearer_gains[0] > 0.0 or o.walker is not None:
        result.wearer_effort_rms_Nm = np.sqrt(np.mean(result.column(B_TAU_WEARER)[inside]**2,
                                                      axis=0))
    if o.walker is not None:
        e = np.degrees(q - result.column(B_WALKER))[inside]
        result.walker_rms_deg = np.sqrt(np.mean(e**2, axis=0))
        result.walker_phase = log[:, log_phase(n)]
        result.heel_strike_times, result.heel_dropped = wk.heel_strikes(walker)
    if c.s["state"] == SAFE:  # the safety check is the controller's, on here too
        k = int(c.s["safe_k0"])
        result.safe = {"cause": safety.CAUSES[int(c.s["cause"])], "t": k * dt,
                       "joint": robot.joint_names[int(c.s["joint"])]
                       if c.s["joint"] >= 0 else None}
    return result


def _external(o: MilOptions, steps: int, n: int) -> np.ndarray:
    """The options' perturbation as a (steps, n) array (none: (0, n))."""
    if o.external is None:
        return np.zeros((0, n))
    ext = np.asarray(o.external, dtype=float)
    if ext.shape != (steps, n):
        raise ValueError(f"run_mil: external torques of shape {ext.shape}, the run needs "
                         f"({steps}, {n}): one row per control period, one column per joint")
    return ext


def _walker(robot: Mechanism, o: MilOptions, c: cy.Cycle, duration: float) -> tuple:
    """The options' walker compiled for the loop, its phase offsets written into the cycle's
    ``v[V_OFFSET]`` (so the controller's reference agrees); without one an idle walker (an
    empty schedule) of the same types."""
    if o.walker is None:
        w = wk.compile_walker(wk.Walker(), robot, robot, c, 0.0)
        return w[:wk.W_SCHEDULE] + (np.zeros((0, 2)),) + w[wk.W_SCHEDULE + 1:]
    if o.wearer_gains[0] > 0.0:
        raise ValueError("run_mil: give either wearer_gains (a wearer who tracks the "
                         "controller's reference) or walker (one who walks by themselves), "
                         "not both")
    if o.exo_model is None:
        raise ValueError("run_mil: a walker needs exo_model, the exoskeleton alone (e.g. "
                         "load_mechanism(robot_file, wearer=False)): their own limbs are the "
                         "leg less the exoskeleton")
    c.v[V_OFFSET] = o.walker.joint_offsets(robot.joint_names)
    return wk.compile_walker(o.walker, robot, o.exo_model, c, duration)


def _interaction_rms(robot, exo, log, n, dt):
    """RMS of τ_w − ID_wearer(q, q̇, q̈): the wearer's torque spent on the exoskeleton."""
    full, alone = Dynamics(robot), Dynamics(exo)
    q, tw, v = log[:, 1 : 1 + n], log[:, 1 + 4 * n : 1 + 5 * n], log[:, 1 + 5 * n : 1 + 6 * n]
    a = np.gradient(v, dt, axis=0)
    inter = np.array([tw[k] - (full.inverse_dynamics(q[k], v[k], a[k])
                               - alone.inverse_dynamics(q[k], v[k], a[k]))
                      for k in range(len(q))])
    return np.sqrt(np.mean(inter**2, axis=0))
