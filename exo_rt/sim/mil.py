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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exo_rt.config import ControllerConfig, transmission_rows
from exo_rt.control import estimate, laws, registry, trajectory
from exo_rt.dynamics import Dynamics, kernels
from exo_rt.jit import njit
from exo_rt.model.mechanism import Mechanism
from exo_rt.sim import plants
from exo_rt.sim.plants import ST_EXT, ST_Q, ST_V, T_JOINT, T_K, T_ROTOR

# log columns: t, then blocks of n: q (true), q_ref, current cmd, τ law, τ wearer, v (true)
LOG_T = 0


@njit(cache=True)
def mil_loop(model, data, model_exo, data_exo, leg_model, leg_data, leg_transmissions, leg_state,
             leg_scratch, leg_step, table, opts, gains, law_state, transmissions, law_scratch,
             coeffs, period, enc, wearer_gains, dt, substeps, steps, log):
    """Run ``steps`` control periods; ``enc`` = [source (0 output, 1 motor), counts/rev, α].

    ``model``/``data`` (``model_exo``/``data_exo``): the controller's packed rigid model and
    workspace (of the exoskeleton alone); the ``leg_*`` arrays are the plant's (its model's
    common layout, :mod:`exo_rt.sim.plants`) and ``leg_step`` its compiled step
    (:func:`exo_rt.sim.plants.compiled_step`).

    Returns the largest |current| commanded (A) relative to its limit (≤ 1 by construction).
    """
    n = coeffs.shape[0]
    qr = np.zeros(n)
    qdr = np.zeros(n)
    qddr = np.zeros(n)
    qm = np.zeros(n)
    qm_prev = np.zeros(n)
    vm = np.zeros(n)
    tau = np.zeros(n)
    cur = np.zeros(n)
    n_tr = leg_transmissions.shape[0]
    cmd = np.zeros(n_tr)  # A: what the drives apply this period (last period's law)
    latched = np.zeros(n_tr)  # A: this period's law, applied at the next SYNC
    assist = np.zeros(n)
    tw = np.zeros(n)
    qw = np.zeros(n)
    vw = np.zeros(n)
    t_exo = np.zeros(n)
    worst = 0.0
    for j in range(n):
        qm_prev[j] = leg_state[ST_Q, j]
        vm[j] = leg_state[ST_V, j]
    for k in range(steps):
        t = k * dt
        trajectory.gait(t / period, period, coeffs, qr, qdr, qddr)
        # encoders → joint angles and filtered velocities
        for m in range(n_tr):
            j = int(leg_transmissions[m, T_JOINT])
            if enc[0] > 0.5:
                r = int(leg_transmissions[m, T_ROTOR])
                rotor = estimate.quantize(leg_state[ST_Q, r], enc[1])
                qm[j] = estimate.joint_from_motor(rotor, leg_transmissions[m, T_K])
            else:
                qm[j] = estimate.quantize(leg_state[ST_Q, j], enc[1])
        estimate.velocity_update(qm, qm_prev, vm, dt, enc[2])
        # the wearer's own torque along the reference, for assistance
        if gains[0].assist > 0.0 or gains[n - 1].assist > 0.0:
            kernels.inverse_dynamics(model, data, qr, qdr, qddr, assist)
            kernels.inverse_dynamics(model_exo, data_exo, qr, qdr, qddr, t_exo)
            for j in range(n):
                assist[j] -= t_exo[j]
        laws.law_torque(table, opts, model, data, model_exo, data_exo, gains, law_state, qm, vm,
                        qr, qdr, qddr, assist, dt, tau, law_scratch)
        laws.torque_to_current(tau, laws.friction_speed(opts, vm, qdr), qddr, transmissions,
                               opts[0].friction_compensation, cur)
        for j in range(n):
            lim = transmissions[j].current_limit
            if lim > 0.0:
                worst = max(worst, abs(cur[j]) / lim)
        for m in range(n_tr):
            cmd[m] = latched[m]
            latched[m] = cur[int(leg_transmissions[m, T_JOINT])]
        # the wearer's muscles (true state: proprioception): their own limbs' inverse dynamics
        # along the reference plus a joint stiffness and damping towards it
        if wearer_gains[0] > 0.0:
            for j in range(n):
                qw[j] = leg_state[ST_Q, j]
                vw[j] = leg_state[ST_V, j]
            kernels.inverse_dynamics(model, data, qw, vw, qddr, tw)
            kernels.inverse_dynamics(model_exo, data_exo, qw, vw, qddr, t_exo)
            for j in range(n):
                leg_state[ST_EXT, j] = (tw[j] - t_exo[j] + wearer_gains[0] * (qr[j] - qw[j])
                                        + wearer_gains[1] * (qdr[j] - vw[j]))
        log[k, LOG_T] = t
        for j in range(n):
            log[k, 1 + j] = leg_state[ST_Q, j]
            log[k, 1 + n + j] = qr[j]
            log[k, 1 + 2 * n + j] = cur[j]
            log[k, 1 + 3 * n + j] = tau[j]
            log[k, 1 + 4 * n + j] = leg_state[ST_EXT, j]
            log[k, 1 + 5 * n + j] = leg_state[ST_V, j]
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

    def column(self, block: int) -> np.ndarray:
        n = len(self.joint_names)
        return self.log[:, 1 + block * n : 1 + (block + 1) * n]


def run_mil(robot: Mechanism, cfg: ControllerConfig, *, cycles: float = 10,
            model: Mechanism | None = None, exo_model: Mechanism | None = None,
            wearer_gains: tuple[float, float] = (0.0, 0.0), dt: float = 1e-3,
            substeps: int = 10, plant_model: str = plants.DEFAULT) -> MilResult:
    """Track ``cycles`` gait cycles of the controller ``cfg`` on the plant of ``robot``.

    ``model`` is the controller's rigid model (default: the robot's own — nominal);
    ``exo_model`` the exoskeleton alone (transparent law); ``wearer_gains`` = (K_p, K_d) in
    N·m/rad, N·m·s/rad of the wearer's tracking (0: no wearer torque); ``plant_model`` the
    registered plant model that simulates the leg (:mod:`exo_rt.sim.plants`).
    """
    model = model or robot
    exo_model = exo_model or model
    n = robot.nq
    plant = plants.create(plant_model, robot, dt=dt, substeps=substeps)
    ref = cfg.reference
    kinds = [ref.gait_joints.get(nm, nm if nm in ("hip", "knee") else
                                 ("hip" if nm.endswith("hip") else "knee"))
             for nm in robot.joint_names]
    coeffs = trajectory.gait_coefficients(list(robot.joint_names), kinds, ref.amplitude)
    q0, v0, a0 = np.zeros(n), np.zeros(n), np.zeros(n)
    trajectory.gait(0.0, ref.period, coeffs, q0, v0, a0)
    plant.reset(q0, v0, equilibrium=False)
    dyn_c, dyn_e = Dynamics(model), Dynamics(exo_model)
    steps = int(round(cycles * ref.period / dt))
    log = np.zeros((steps, 1 + 6 * n))
    enc = np.array([1.0 if cfg.encoder == "motor" else 0.0, cfg.counts_per_rev,
                    estimate.filter_gain(cfg.velocity_cutoff_hz, dt)])
    worst = mil_loop(dyn_c.packed, dyn_c.workspace, dyn_e.packed, dyn_e.workspace, plant.model,
                     plant.data, plant.transmissions, plant.state, plant.scratch,
                     plants.compiled_step(plant), registry.table(), cfg.options(), cfg.gains,
                     laws.law_state(n), transmission_rows(robot, cfg), laws.law_scratch(n),
                     coeffs, ref.period, enc, np.array(wearer_gains, dtype=float), dt, substeps,
                     steps, log)
    q, qr = log[:, 1 : 1 + n], log[:, 1 + n : 1 + 2 * n]
    err = np.degrees(q - qr)
    result = MilResult(robot.joint_names, log, np.sqrt(np.mean(err**2, axis=0)),
                       np.max(np.abs(err), axis=0),
                       np.max(np.abs(log[:, 1 + 2 * n : 1 + 3 * n]), axis=0), float(worst))
    if wearer_gains[0] > 0.0:
        result.interaction_rms_Nm = _interaction_rms(robot, exo_model, log, n, dt)
    return result


def _interaction_rms(robot, exo, log, n, dt):
    """RMS of τ_w − ID_wearer(q, q̇, q̈): the wearer's torque spent on the exoskeleton."""
    full, alone = Dynamics(robot), Dynamics(exo)
    q, tw, v = log[:, 1 : 1 + n], log[:, 1 + 4 * n : 1 + 5 * n], log[:, 1 + 5 * n : 1 + 6 * n]
    a = np.gradient(v, dt, axis=0)
    inter = np.array([tw[k] - (full.inverse_dynamics(q[k], v[k], a[k])
                               - alone.inverse_dynamics(q[k], v[k], a[k]))
                      for k in range(len(q))])
    return np.sqrt(np.mean(inter**2, axis=0))
