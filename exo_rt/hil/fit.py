"""Fits of the identification procedures (pure numpy, no bus): wave-generator friction,
harmonic-drive stiffness and hysteresis, the leg's wearer segments — and the YAML snippets
that carry the results back into the robot file.

Conventions. Joint torques τ (N·m) are what the motor current gives through the rigid gear,
τ_m = k·s·k_M·i (:meth:`exo_rt.hil.bench.Bench.joint_torque`). The drive's friction acts at the
wave generator (rotor speed ω = k·q̇, N = |k|), so at the joint (Taghirad & Bélanger 1998; the
plant's :func:`exo_rt.actuators.harmonic_drive.sliding_friction`):

    τ_f(q̇, T) = sgn(q̇)·[N·T_c + N·(T_s − T_c)·exp(−(N q̇/ω_s)²) + μ·|T|] + N²·B·q̇

with T the transmitted (load) torque.
"""

from __future__ import annotations

import math

import numpy as np

# ----------------------------------------------------------------------------- friction


def sweep_halves(q: np.ndarray, tau: np.ndarray, forward: np.ndarray, bins: int = 12):
    """Torques of the forward and backward passes over the same positions: (centres, τ+, τ−)
    per position bin that both passes cover (bins without both, and the two end bins where a
    pass has just reached its speed, are dropped)."""
    lo, hi = float(q.min()), float(q.max())
    edges = np.linspace(lo, hi, bins + 1)
    centres, up, down = [], [], []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        inside = (q >= a) & (q <= b)
        f, r = inside & forward, inside & ~forward
        if f.sum() >= 3 and r.sum() >= 3:
            centres.append(0.5 * (a + b))
            up.append(float(np.mean(tau[f])))
            down.append(float(np.mean(tau[r])))
    return np.array(centres[1:-1]), np.array(up[1:-1]), np.array(down[1:-1])


def friction_fit(speed: np.ndarray, half: np.ndarray, load: np.ndarray, ratio: float) -> dict:
    """Wave-generator friction from constant-speed sweeps and breakaway tests, robustly: a
    first fit, then again without the samples more than 5 robust σ (1.4826·MAD, at least
    0.05 N·m) off it — a position bin where the rotor stuck for a moment reads far off the
    sliding law. See :func:`_friction_fit` for the model."""
    speed, half, load = (np.asarray(x, float) for x in (speed, half, load))
    first = _friction_fit(speed, half, load, ratio)
    r = half - friction_model(speed, load, first, ratio)
    sigma = max(1.4826 * float(np.median(np.abs(r - np.median(r)))), 0.01)
    keep = (np.abs(r) <= max(5 * sigma, 0.05)) | (speed == 0)  # breakaways always count
    if keep.all() or keep.sum() < 8:
        return first | {"outliers": 0}
    return _friction_fit(speed[keep], half[keep], load[keep], ratio) | {
        "outliers": int((~keep).sum())}


def _friction_fit(speed: np.ndarray, half: np.ndarray, load: np.ndarray, ratio: float) -> dict:
    """Wave-generator friction from constant-speed sweeps and breakaway tests.

    Each sample: ``speed`` (rad/s at the joint; 0 for a breakaway), ``half`` = (τ+ − τ−)/2 at
    the same position (N·m: the friction there, gravity cancelled; for a breakaway the torques
    at which the joint starts to move up and down), ``load`` the transmitted torque (N·m, the
    mean of the two). The model, linear in (T_c, T_s, μ, B) for a given ω_s:

        half = N·T_c·(1 − E) + N·T_s·E + μ·|load| + N²·B·v,   E = exp(−(N v/ω_s)²)

    is solved by least squares for each ω_s on a log grid and refined by golden section on
    log ω_s. ω_s is observable only if the band lies inside the steady sweeps (three speeds at
    least, E > 0.1 at the slowest, < 0.1 at the fastest) and explains the data (the RMS 20 %
    below the fit without it): otherwise it is None and T_s rests on the breakaways.
    """
    n = float(ratio)

    def solve(ws: float | None):
        e = (speed == 0).astype(float) if ws is None else np.exp(-(n * speed / ws) ** 2)
        a = np.column_stack([n * (1 - e), n * e, np.abs(load), n * n * speed])
        x, *_ = np.linalg.lstsq(a, half, rcond=None)
        return x, float(np.sqrt(np.mean((a @ x - half) ** 2)))

    grid = np.geomspace(0.01, 100.0, 81)
    costs = [solve(w)[1] for w in grid]
    k = int(np.argmin(costs))
    lo, hi = math.log(grid[max(k - 1, 0)]), math.log(grid[min(k + 1, len(grid) - 1)])
    g = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        if solve(math.exp(c))[1] < solve(math.exp(d))[1]:
            hi = d
        else:
            lo = c
    ws: float | None = math.exp(0.5 * (lo + hi))
    moving = speed[speed > 0]
    levels = np.unique(moving)
    if (len(levels) < 3 or math.exp(-(n * float(levels[0]) / ws) ** 2) < 0.1
            or math.exp(-(n * float(levels[-1]) / ws) ** 2) > 0.1
            or solve(ws)[1] > 0.8 * solve(None)[1]):
        ws = None  # the Stribeck band is not inside the swept speeds: not observable here
    x, rms = solve(ws)
    return {"coulomb": float(x[0]), "static": float(x[1]), "viscous": float(x[3]),
            "stribeck_velocity": ws, "load_friction": float(x[2]), "rms_Nm": rms}


def friction_model(speed, load, p: dict, ratio: float) -> np.ndarray:
    """τ_f at the joint (N·m) of fitted parameters ``p`` for speed > 0 (rad/s) and load (N·m)."""
    n = float(ratio)
    ws = p["stribeck_velocity"]
    e = 0.0 if ws is None else np.exp(-(n * np.asarray(speed) / ws) ** 2)
    return (n * p["coulomb"] + n * (p["static"] - p["coulomb"]) * e
            + p["load_friction"] * np.abs(load) + n * n * p["viscous"] * np.asarray(speed))


# ----------------------------------------------------------------------------- stiffness


def twist_regressors(torque: np.ndarray, t1: float, t2: float) -> np.ndarray:
    """Columns of Δ(T) = sgn(T)·[min(|T|, T1)/K1 + clip(|T| − T1, 0, T2 − T1)/K2
    + max(|T| − T2, 0)/K3] (the catalogue curve, inverted), linear in (1/K1, 1/K2, 1/K3)."""
    a = np.abs(torque)
    s = np.sign(torque)
    return np.column_stack([s * np.minimum(a, t1), s * np.clip(a - t1, 0.0, t2 - t1),
                            s * np.maximum(a - t2, 0.0)])


def stiffness_fit(q: np.ndarray, torque: np.ndarray, t1: float, t2: float) -> dict:
    """Flexspline stiffness and hysteresis from the torque–twist loop of a locked output.

    ``q`` the joint angle from the motor encoder (rad), ``torque`` the fixture's reaction
    torque (N·m). The encoder reads q = c + Δ, c the locked angle and Δ the flexspline's twist;
    the flexspline carries T = T_s(Δ) + s·H (s the sign of the last twist change: the
    hysteresis branch). For a given H, q = c + Δ_cat(T − s·H) is linear in (c, 1/K1, 1/K2,
    1/K3) with the catalogue's T1, T2 (:func:`twist_regressors`); H is found by golden-section
    search on the residual. A segment the torques never reach (under 5 % of the samples) is
    reported None. Near a reversal the branch changes over a twist of a few H/K1 (Dahl), which
    the fit treats as noise.
    """
    dq = np.diff(q, prepend=q[0])
    s = np.zeros_like(q)
    last = 1.0
    for k, step in enumerate(dq):
        if step != 0.0:
            last = 1.0 if step > 0 else -1.0
        s[k] = last

    def solve(h: float):
        reg = twist_regressors(torque - s * h, t1, t2)
        use = [k for k in range(3) if k == 0 or np.mean(np.abs(reg[:, k]) > 0) >= 0.05]
        a = np.column_stack([np.ones_like(q), reg[:, use]])
        x, *_ = np.linalg.lstsq(a, q, rcond=None)
        return x, use, float(np.sqrt(np.mean((a @ x - q) ** 2)))

    lo, hi = -0.1 * t1, 0.5 * t1
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        if solve(c)[2] < solve(d)[2]:
            hi = d
        else:
            lo = c
    h = 0.5 * (lo + hi)
    x, use, rms = solve(h)
    ks = [None, None, None]
    for col, k in enumerate(use):
        ks[k] = float(1.0 / x[col + 1])
    return {"k1": ks[0], "k2": ks[1], "k3": ks[2], "hysteresis": h, "locked_at": float(x[0]),
            "rms_twist_rad": rms, "torque_range_Nm": [float(torque.min()), float(torque.max())]}


# ----------------------------------------------------------------------------- inertia


def savgol(q: np.ndarray, dt: float, half: int = 25, order: int = 3):
    """(q, q̇, q̈) smoothed by a Savitzky–Golay fit (local polynomial of ``order`` over 2·half+1
    samples, zero phase: offline only); the first and last ``half`` samples are dropped."""
    t = np.arange(-half, half + 1) * dt
    coef = np.linalg.pinv(np.vander(t, order + 1, increasing=True))  # rows: c0, c1, c2 …
    out = []
    for row, scale in ((coef[0], 1.0), (coef[1], 1.0), (coef[2], 2.0)):
        kernel = row[::-1] * scale
        out.append(np.column_stack([np.convolve(q[:, j], kernel, mode="valid")
                                    for j in range(q.shape[1])]))
    return out[0], out[1], out[2]


def steady_sliding(qd: np.ndarray, v_min: float, window: int) -> np.ndarray:
    """Mask of samples (per joint) moving faster than ``v_min`` with the same direction for
    ``window`` samples either side: away from reversals, where the wave generator sticks and
    the friction is not the sliding law's."""
    s = np.sign(qd) * (np.abs(qd) > v_min)
    ok = np.abs(s) > 0
    for shift in range(1, window + 1):
        ok[shift:] &= s[shift:] == s[:-shift]
        ok[:-shift] &= s[:-shift] == s[shift:]
        ok[:shift] = False
        ok[-shift:] = False
    return ok


def inertial_fit(build, p0: np.ndarray, gravity, motion, friction, v_min: float = 0.1,
                 window: int = 10, iterations: int = 15, prior_sigma=None) -> dict:
    """Levenberg–Marquardt on the wearer's parameters p (e.g. segment masses and COM
    fractions) so the model's torques match the measured ones.

    ``build(p)`` → a :class:`~exo_rt.dynamics.Dynamics` of the robot with those parameters;
    ``gravity`` = (Q, J, G): poses, the joint measured there, its gravity torque (N·m, from
    forward/backward sweeps: friction cancelled); ``motion`` = (Q, QD, QDD, TAU): states and
    motor torques (N·m) of fast motions; ``friction`` = per joint (N, T_c, μ, B, J_rotor) with
    J_rotor = k²·I_rotor (kg·m²): the motor torque is predicted as τ + sgn(q̇)·(N·T_c + μ|T|)
    + N²·B·q̇, T = τ − J_rotor·q̈ the flexspline's share (only samples sliding steadily,
    :func:`steady_sliding`, count). The two sets weigh alike (gravity rows scaled by
    √(motion rows / gravity rows)). Jacobian by finite differences.

    ``prior_sigma`` (per parameter, inf for none) keeps a parameter near p0 where the data
    hardly tell it apart from the others: a row (p − p0)/σ weighted like 1 % of the data
    (the joint torques fix each segment's first moment and inertia about the joint well, but
    the split between its mass and its COM poorly).
    """
    gq, gj, gv = gravity
    mq, mqd, mqdd, mtau = motion
    fr = np.asarray(friction, float)
    use = steady_sliding(mqd, v_min, window)
    weight = math.sqrt(max(int(use.sum()), 1) / max(len(gv), 1))
    tau = np.zeros(mq.shape[1])
    sig = np.full(len(p0), np.inf) if prior_sigma is None else np.asarray(prior_sigma, float)
    p_prior = np.asarray(p0, float)
    w_prior = math.sqrt(0.01 * (use.sum() + len(gv)))

    def residual(p):
        dyn = build(p)
        rg = weight * (np.array([dyn.gravity(q)[j] for q, j in zip(gq, gj, strict=True)]) - gv)
        pred = np.zeros_like(mtau)
        for k in range(len(mq)):
            dyn.inverse_dynamics(mq[k], mqd[k], mqdd[k], out=tau)
            link = tau - fr[:, 4] * mqdd[k]
            pred[k] = (tau + np.sign(mqd[k]) * (fr[:, 0] * fr[:, 1] + fr[:, 2] * np.abs(link))
                       + fr[:, 0] ** 2 * fr[:, 3] * mqd[k])
        return np.r_[rg, (pred - mtau)[use], w_prior * (p - p_prior) / sig]

    p = np.asarray(p0, float).copy()
    r = residual(p)
    lam = 1e-3
    for _ in range(iterations):
        jac = np.zeros((len(r), len(p)))
        for i in range(len(p)):
            step = 1e-4 * max(abs(p[i]), 1e-2)
            dp = p.copy()
            dp[i] += step
            jac[:, i] = (residual(dp) - r) / step
        jtj, jtr = jac.T @ jac, jac.T @ r
        while True:
            delta = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj)), -jtr)
            trial = p + delta
            rt = residual(trial)
            if rt @ rt < r @ r:
                p, r, lam = trial, rt, lam / 3
                break
            lam *= 10
            if lam > 1e8:
                break
        if lam > 1e8 or np.max(np.abs(delta) / np.maximum(np.abs(p), 1e-2)) < 1e-6:
            break
    r0 = residual(np.asarray(p0, float))
    ng, nm = len(gv), len(gv) + int(use.sum())
    return {"p": p.tolist(), "gravity_rms_Nm": float(np.sqrt(np.mean(r[:ng] ** 2))) / weight,
            "gravity_rms_before_Nm": float(np.sqrt(np.mean(r0[:ng] ** 2))) / weight,
            "motion_rms_Nm": float(np.sqrt(np.mean(r[ng:nm] ** 2))),
            "motion_rms_before_Nm": float(np.sqrt(np.mean(r0[ng:nm] ** 2))),
            "gravity_samples": int(len(gv)), "motion_samples": int(use.sum())}


def wearer_snippet(values: dict[str, dict[str, float]], source: str) -> str:
    """Identified wearer segments as robot-file YAML (keys to add to each segment's entry)."""
    lines = [f"# {source}", "# Add these keys to the matching entries of the robot file's",
             "# wearer.segments (docs/config-robot.md); body, proximal and distal stay.",
             "wearer:", "  segments:"]
    for seg, keys in values.items():
        body = ", ".join(f"{k}: {_number(v)}" for k, v in keys.items())
        lines.append(f"    - {{segment: {seg}, {body}}}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- snippets


def _number(x: float) -> str:
    """4 significant digits as a YAML float (``1e+04`` is a string to YAML 1.1: ``1.0e+04``)."""
    text = f"{x:.4g}"
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text


def identified(fitted: dict, configured: dict) -> dict[str, float]:
    """The fitted values of the robot file's keys (``configured``), unobservable ones (None)
    left out — the robot file keeps its value there."""
    return {k: fitted[k] for k in configured if fitted.get(k) is not None}


def drive_snippet(values: dict[str, dict[str, float]], source: str) -> str:
    """The identified drive values as robot-file YAML: per joint, the keys to put into that
    joint's transmission ``drive:`` mapping."""
    lines = [f"# {source}", "# Put these keys into each joint's transmission `drive:` mapping",
             "# (docs/config-robot.md); the other drive keys stay as they are.", "transmissions:"]
    for joint, keys in values.items():
        body = ", ".join(f"{k}: {_number(v)}" for k, v in keys.items())
        lines.append(f"  - joint: {joint}")
        lines.append(f"    drive: {{{body}}}")
    return "\n".join(lines) + "\n"
