"""Identification procedures on the bench (docs/bench.md; issue 9): wave-generator friction from
constant-speed sweeps, harmonic-drive stiffness with the output locked, the leg's (and
wearer's) masses and COMs. Each returns a report with the fitted values, the data behind the
fit (for the plot) and a YAML snippet for the robot file; the fits are in :mod:`exo_rt.hil.fit`.
"""

from __future__ import annotations

import numpy as np

from exo_rt.control.config import rotor_inertias
from exo_rt.hil import fit, registry
from exo_rt.hil.bench import HOLD, Bench, BenchAbort, Gains, move_to, track
from exo_rt.progress import progress

# Hz, ζ, integral of the sweeps' loop: stiff enough to slide steadily, under the hip's resonance
# and what the loop's one period of transport delay allows (docs/config-controller.md)
SWEEP_GAINS = (3.0, 1.0, 1.0)
SPEEDS = (0.016, 0.03, 0.06, 0.12, 0.25, 0.5)  # rad/s at the joint


def _transmission(bench: Bench, joint: str):
    for tr in bench.robot.transmissions:
        if tr.joint == joint:
            return tr
    raise ValueError(f"joint '{joint}' has no transmission")


def sweep_profile(c: float, span: float, speed: float, dt: float):
    """Reference (q, q̇) for a pass c − span/2 → c + span/2 → back at ``speed`` (rad/s, joint),
    trapezoidal speed with ramps of max(0.05 s, speed/4 s), 0.2 s holds at the ends; and the
    mask of samples at constant speed (0.1…0.2 s after a ramp, at most 0.1 rad on): +1 forward,
    −1 backward, 0 neither."""
    ramp = max(0.05, speed / 4.0)
    t_const = max(span / speed - ramp, 0.0)
    k_r, k_c, k_h = int(ramp / dt), int(t_const / dt), int(0.2 / dt)
    prof = np.r_[np.linspace(0, 1, k_r, endpoint=False), np.ones(k_c), np.linspace(1, 0, k_r),
                 np.zeros(k_h)]
    settle = int(min(0.2, max(0.1, 0.1 / speed)) / dt)  # the loop settles in ~40 ms
    steady = np.zeros_like(prof)
    steady[k_r + settle: k_r + k_c] = 1.0
    v = np.r_[speed * prof, -speed * prof]
    direction = np.r_[steady, -steady]
    q = c - span / 2 + np.cumsum(v) * dt
    return q, v, direction


def sweep(bench: Bench, pose: np.ndarray, j: int, centre: float, length: float, speed: float):
    """One back-and-forth pass of joint j over ``centre`` ± ``length``/2 at ``speed`` (the
    others held at ``pose``) → (bin centres, τ forward, τ backward, mean pose, the speed the
    steady samples held — rad/s, measured: the loop is still settling), or None if the
    pass could not hold its speed (stick–slip: the measured speed outside ½…1½ of the
    reference for over 30 % of it). Samples off their speed are dropped."""
    qj, vj, direction = sweep_profile(centre, length, speed, bench.dt)
    start = np.asarray(pose, float).copy()
    start[j] = qj[0]
    move_to(bench, start)
    ref = np.repeat(start[None, :], len(qj), axis=0)
    ref[:, j] = qj
    vel = np.zeros_like(ref)
    vel[:, j] = vj
    log = track(bench, ref, Gains.for_bandwidth(bench.n, *SWEEP_GAINS), qd_ref=vel).trimmed()
    ratio = np.where(direction != 0, log.qd[:, j] / np.where(vj == 0, 1.0, vj), 0.0)
    steady = (direction != 0) & (ratio > 0.5) & (ratio < 1.5)
    if steady.sum() < 20 or steady.sum() < 0.7 * np.sum(direction != 0):
        return None
    tau = bench.joint_torque(log.i_meas)[:, j]
    c, up, down = fit.sweep_halves(log.q[steady, j], tau[steady], direction[steady] > 0)
    return c, up, down, np.mean(log.q[steady], axis=0), float(np.mean(np.abs(log.qd[steady, j])))


def settle(bench: Bench, pose: np.ndarray, gains: Gains, still: float = 2e-6,
           seconds: float = 2.0) -> None:
    """Hold ``pose`` until no joint has moved more than ``still`` rad over 0.1 s."""
    ref = np.repeat(np.asarray(pose, float)[None, :], int(0.1 / bench.dt), axis=0)
    for _ in range(int(seconds / 0.1)):
        log = track(bench, ref, gains).trimmed()
        if np.ptp(log.q, axis=0).max() <= still:
            return


def breakaway(bench: Bench, joint: str, pose: np.ndarray, *, rate: float = 20.0,
              moved: float = 5e-5) -> tuple[float, float]:
    """Torques (N·m, from the measured current) at which ``joint`` starts to move upwards and
    downwards from rest at ``pose``: the position loop holds until everything is still, then
    this joint's torque ramps at ``rate`` N·m/s (the others stay in the loop) until its encoder
    moves by ``moved`` rad; the loop takes over again at once."""
    j = bench.robot.joint_names.index(joint)
    hold = Gains.for_bandwidth(bench.n, *HOLD)
    gains = Gains.for_bandwidth(bench.n, *SWEEP_GAINS)
    out = []
    zero = np.zeros(bench.n)
    for sign in (1.0, -1.0):
        move_to(bench, pose)
        settle(bench, pose, hold)
        q_start = bench.q[j]
        tau = np.zeros(bench.n)
        cur = np.zeros(bench.n)
        t0 = bench.joint_torque(bench.i_meas)[j]
        at = None
        for k in range(int(2 * 100.0 / rate / bench.dt)):  # at most ±100 N·m
            bench.dyn.inverse_dynamics(bench.q, bench.qd, gains.kp * (pose - bench.q)
                                       - gains.kd * bench.qd, out=tau)
            tau[j] = t0 + sign * rate * k * bench.dt
            bench.currents_for(tau, zero, cur, friction=False)
            bench.cycle(cur)
            if abs(bench.q[j] - q_start) > moved:
                at = float(bench.joint_torque(bench.i_meas)[j])
                break
        if at is None:
            raise BenchAbort(f"{joint} did not move under ±100 N·m: is the output locked?")
        out.append(at)
    move_to(bench, pose, seconds=0.3)
    return out[0], out[1]


@registry.procedure("friction", per_joint=True, snippet=True,
                    moves="breakaway torque ramps, then back-and-forth sweeps over up to "
                          f"±0.3 rad at {SPEEDS[0]:g} … {SPEEDS[-1]:g} rad/s (about 50 s)")
def friction(bench: Bench, joint: str, *, pose=None, speeds=SPEEDS, span: float = 0.6,
             slow_seconds: float = 2.5, breakaways: int = 3) -> dict:
    """Breakaway tests and constant-speed sweeps of ``joint`` in both directions (the others
    held) → the wave generator's Coulomb, static (breakaway) and viscous friction, the
    load-dependent μ and — if a steady sweep reaches into it — the Stribeck velocity.

    Everything runs twice, the other joints at the default pose and at 45 % of their range,
    so the load on the drive (and its μ|T| share) varies. At each speed the pass over
    [c − L/2, c + L/2] (L = min(span, speed·slow_seconds), at least 10 mrad) runs forwards and
    backwards; at the same position the torques' half-difference is the friction at that speed
    (gravity cancels) and their mean the load it carries. A pass that does not hold its speed
    (stick–slip: the measured speed outside ½…1½ of the reference for over 30 % of the pass)
    is left out of the fit and listed; single samples off their speed are dropped.
    """
    j = bench.robot.joint_names.index(joint)
    tr = _transmission(bench, joint)
    bench.start()
    home = bench.home() if pose is None else np.asarray(pose, float)
    sp, half, load, where, unsteady = [], [], [], [], []
    others = [home, np.where(np.arange(bench.n) == j, home, bench.at_fraction(0.45))]
    for q0 in (bench.centred(x, span / 2) for x in others[: 1 if bench.n == 1 else 2]):
        for dq in np.linspace(-span / 3, span / 3, breakaways) if breakaways > 1 else [0.0]:
            at = q0.copy()
            at[j] += dq
            up, down = breakaway(bench, joint, at)
            sp.append(0.0)
            half.append((up - down) / 2)
            load.append((up + down) / 2)
            where.append(float(at[j]))
        for v in progress(speeds, f"{joint}: friction sweeps", unit="speed"):
            length = float(np.clip(v * slow_seconds, 0.01, span))
            passes = sweep(bench, q0, j, q0[j], length, v)
            if passes is None:
                unsteady.append(v)
                continue
            c, up, down, _, held = passes
            sp += [held] * len(c)
            half += list((up - down) / 2)
            load += list((up + down) / 2)
            where += list(c)
    bench.disable_all()  # no cycles while fitting: the drives must not sit enabled and unsynced
    p = fit.friction_fit(np.array(sp), np.array(half), np.array(load), tr.drive.ratio)
    d = tr.drive
    configured = {"coulomb": d.coulomb, "static": d.static, "viscous": d.viscous,
                  "stribeck_velocity": d.stribeck_velocity, "load_friction": d.load_friction}
    values = fit.identified(p, configured)
    return {"joint": joint, "pose_rad": home.tolist(), "fit": p, "configured": configured,
            "unsteady_speeds": sorted(set(unsteady)),
            "data": {"speed": sp, "friction_Nm": half, "load_Nm": load, "position": where},
            "snippet": fit.drive_snippet({joint: values},
                                         f"exo-rt bench-test friction, joint {joint}")}


@registry.procedure("stiffness", per_joint=True, snippet=True,
                    moves="OUTPUT LOCKED in the fixture (with its torque sensor): motor "
                          "torque cycles up to ±75 % of the current limit, 3 cycles")
def stiffness(bench: Bench, joint: str, *, amplitude: float | None = None, rate: float = 150.0,
              cycles: int = 3) -> dict:
    """Harmonic-drive stiffness with ``joint``'s output locked in the fixture → K1, K2, K3 and
    the hysteresis H (:func:`exo_rt.hil.fit.stiffness_fit`).

    Triangular motor-torque cycles 0 → +A → −A → … → 0 at ``rate`` N·m/s on the joint (the
    others held by the loop); the fixture's torque sensor gives the flexspline's torque and
    the motor encoder the twist. The motor current cannot stand in for the sensor: the wave
    generator's friction (N·T_c + μ|T|, tens of N·m on a non-back-drivable drive) dwarfs H and
    makes the rotor stick–slip along the loop. A defaults to 75 % of the joint's current limit
    in torque; the first quarter cycle (the virgin curve from rest) is left out of the fit.
    """
    j = bench.robot.joint_names.index(joint)
    tr = _transmission(bench, joint)
    d = tr.drive
    limit = bench.motor_torque_limit()[j]
    amp = 0.75 * limit if amplitude is None else float(amplitude)
    bench.start()
    pose = bench.q.copy()
    hold = Gains.for_bandwidth(bench.n, *HOLD)
    settle(bench, pose, hold)
    quarter = int(amp / rate / bench.dt)
    wave = np.r_[np.linspace(0, 1, quarter, endpoint=False),
                 np.tile(np.r_[np.linspace(1, -1, 2 * quarter, endpoint=False),
                               np.linspace(-1, 1, 2 * quarter, endpoint=False)], cycles),
                 np.linspace(1, 0, quarter)] * amp
    k_n = len(wave)
    q = np.zeros(k_n)
    torque = np.zeros(k_n)
    tau = np.zeros(bench.n)
    cur = np.zeros(bench.n)
    zero = np.zeros(bench.n)
    bench.fixture.lock(joint)
    try:
        track(bench, np.repeat(pose[None, :], 20, axis=0), hold)  # the first readings
        if bench.fixture.torque(joint) is None:
            raise BenchAbort("the stiffness identification needs the fixture's torque sensor "
                             "(docs/bench.md: a fixture node on the bus, or "
                             "OperatorFixture(torque_sensor=…))")
        t0 = bench.joint_torque(bench.i_meas)[j]
        for k in range(k_n):
            bench.dyn.inverse_dynamics(bench.q, bench.qd, hold.kp * (pose - bench.q)
                                       - hold.kd * bench.qd, out=tau)
            tau[j] = t0 * (1 - k / k_n) + wave[k]
            bench.currents_for(tau, zero, cur, friction=False)
            bench.cycle(cur)
            q[k], torque[k] = bench.q[j], bench.fixture.torque(joint)
    finally:
        bench.fixture.release(joint)
    bench.disable_all()
    keep = slice(quarter, k_n - quarter)
    p = fit.stiffness_fit(q[keep], torque[keep], d.t1, d.t2)
    configured = {"k1": d.k1, "k2": d.k2, "k3": d.k3, "hysteresis": d.hysteresis}
    values = fit.identified(p, configured)
    return {"joint": joint, "amplitude_Nm": amp, "fit": p, "configured": configured,
            "data": {"q": q.tolist(), "torque_Nm": torque.tolist()},
            "snippet": fit.drive_snippet({joint: values},
                                         f"exo-rt bench-test stiffness, joint {joint}")}


def multisine(dt: float, seconds: float, amplitudes, freqs, fade: float = 1.0) -> np.ndarray:
    """Σ a_i·sin(2π f_i t) (rad), faded in and out over ``fade`` s (a smooth start and end)."""
    t = np.arange(int(seconds / dt)) * dt
    x = sum(a * np.sin(2 * np.pi * f * t) for a, f in zip(amplitudes, freqs, strict=True))
    return x * np.clip(np.minimum(t, seconds - t) / fade, 0.0, 1.0)


COM_SIGMA = 0.03  # spread of a segment's COM fraction between people (de Leva's tables ± ~0.03)
MULTISINE = ((0.2, 0.08, 0.03), (0.3, 0.8, 1.6))  # rad, Hz: the fast motions' base spectrum


def _gravity_sweeps(bench: Bench, speed: float) -> tuple[list, list, list]:
    """Forward/backward sweeps of each joint over [10 %, 50 %] of its soft range, the others
    held at 20 % and 45 % of theirs → (poses, joint, gravity torque), the passes' mean torque."""
    lo, hi = bench.soft_range()
    span = hi - lo
    poses, joints, torques = [], [], []
    for j in range(bench.n):
        for frac in (0.2, 0.45):
            base = lo + frac * span
            passes = sweep(bench, base, j, lo[j] + 0.3 * span[j], 0.4 * span[j], speed)
            if passes is None:
                continue
            c, up, down, mean_pose, _ = passes
            for cj, g in zip(c, (up + down) / 2, strict=True):
                pose = mean_pose.copy()
                pose[j] = cj
                poses.append(pose)
                joints.append(j)
                torques.append(float(g))
    return poses, joints, torques


@registry.procedure("inertia", per_joint=False, snippet=True,
                    moves="every joint swept over 10–50 % of its range at 0.25 rad/s, then 20 s "
                          "of multi-sine motion about 30 % of its range")
def inertia(bench: Bench, *, segments=None, speed: float = 0.25, seconds: float = 20.0) -> dict:
    """The wearer's segment masses and COMs from slow and fast motions of the leg → corrected
    ``mass`` and ``com_fraction`` per segment (:func:`exo_rt.hil.fit.inertial_fit`).

    Slow: forward/backward sweeps of each joint (gravity, friction cancelled). Fast: a
    multi-sine on every joint at once (``seconds`` long, amplitudes scaled so the inertial
    torque stays under 30 % of the current limit), with the drive's friction — identified
    first — predicted. The segments fitted default to those strapped to a body a joint moves
    (segments on bodies lumped into them, like the foot, keep their values: a body's mass and
    its lumped parts' cannot be told apart from joint torques). The radii of gyration stay
    de Leva's, so each segment's inertia follows its mass and COM.
    """
    from exo_rt.dynamics import Dynamics
    from exo_rt.model.robot_yaml import load_robot_yaml, wearer_segments

    robot = bench.robot
    path = bench.top.robot_path
    segs = [(name, seg) for name, body, seg in wearer_segments(path)
            if (segments is None and body in robot.body_names)
            or (segments is not None and name in segments)]
    if not segs:
        raise BenchAbort("the robot file has no wearer segment to identify")
    p0 = np.array([v for _, seg in segs for v in (seg.mass, seg.com_fraction)])

    def build(p):
        over = {name: {"mass": p[2 * i], "com_fraction": p[2 * i + 1]}
                for i, (name, _) in enumerate(segs)}
        return Dynamics(load_robot_yaml(path, segments=over))

    bench.start()
    gravity = _gravity_sweeps(bench, speed)
    centre = bench.home()
    move_to(bench, centre)
    amps, freqs = (np.array(x) for x in MULTISINE)
    limit = bench.motor_torque_limit()
    m_jj = bench.inertia(centre)
    ref = np.repeat(centre[None, :], int(seconds / bench.dt), axis=0)
    for j in range(bench.n):
        f = freqs * (1 + 0.17 * j)
        scale = min(1.0, 0.3 * limit[j] / (m_jj[j] * float(amps @ (2 * np.pi * f) ** 2)))
        ref[:, j] += multisine(bench.dt, seconds, scale * amps, f)
    log = track(bench, ref, Gains.for_bandwidth(bench.n, *SWEEP_GAINS)).trimmed()
    bench.disable_all()  # the fit takes seconds: no enabled drive waits for cycles meanwhile
    q, qd, qdd = fit.savgol(log.q, bench.dt)
    tau_m = fit.savgol(bench.joint_torque(log.i_meas), bench.dt)[0]  # the same low-pass
    every = slice(None, None, 2)
    rotor = rotor_inertias(robot)
    friction = []
    for j, name in enumerate(robot.joint_names):
        d = _transmission(bench, name).drive
        friction.append((d.ratio, d.coulomb, d.load_friction, d.viscous, rotor[j]))
    res = fit.inertial_fit(build, p0, (np.array(gravity[0]), np.array(gravity[1]),
                                       np.array(gravity[2])),
                           (q[every], qd[every], qdd[every], tau_m[every]), friction,
                           prior_sigma=[np.inf, COM_SIGMA] * len(segs))
    p = res["p"]
    values = {name: {"mass": p[2 * i], "com_fraction": p[2 * i + 1]}
              for i, (name, _) in enumerate(segs)}
    prior = {name: {"mass": seg.mass, "com_fraction": seg.com_fraction} for name, seg in segs}
    return {"segments": values, "prior": prior, "fit": res,
            "data": {"gravity_pose": [list(map(float, x)) for x in gravity[0]],
                     "gravity_joint": gravity[1], "gravity_Nm": gravity[2]},
            "snippet": fit.wearer_snippet(values, "exo-rt bench-test inertia")}
