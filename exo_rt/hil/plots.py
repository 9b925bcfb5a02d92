"""PNG plots of the bench procedures' reports (fit against data): one figure per procedure,
a panel per joint. Needs matplotlib (the ``plot`` extra); without it the reports and YAML
snippets are still written."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from exo_rt.hil import fit


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _panels(plt, n: int, rows: int = 1):
    fig, axes = plt.subplots(rows, n, figsize=(5.5 * n, 4 * rows), squeeze=False)
    return fig, axes


def _step(ax, r: dict) -> None:
    """The step's saved trace — the very data its metrics come from — with the reference,
    where the joint started and settled, and the metrics in the title."""
    tr = r["trace"]
    t = np.asarray(tr["t_s"])
    ax[0].plot(t, np.asarray(tr["q_rad"]) * 1e3, label="measured")
    ax[0].plot(t, np.asarray(tr["q_ref_rad"]) * 1e3, color="k", lw=0.8, ls="--",
               label="reference")
    s = r["step"]
    ax[0].axhline(s["final_rad"] * 1e3, color="grey", lw=0.6, ls=":", label="settled")
    ax[0].set_title(f"{r['joint']} step {r['amplitude_rad'] * 1e3:g} mrad: rise "
                    f"{s['rise_time_s'] * 1e3:.0f} ms, overshoot {100 * s['overshoot']:.1f} %,\n"
                    f"settling {s['settling_time_s'] * 1e3:.0f} ms, steady-state error "
                    f"{s['steady_state_error_rad'] * 1e3:+.1f} mrad "
                    f"({100 * s['steady_state_error']:+.0f} %)", fontsize=10)
    ax[0].set_xlabel("time after the step (s)")
    ax[0].set_ylabel("joint angle − reference before the step (mrad)")
    ax[0].legend(loc="lower right")


def _bode(ax, r: dict) -> None:
    b = r["bode"]
    f = np.asarray(b["f_hz"])
    e = r["expected"]
    wn, z = 2 * math.pi * e["natural_hz"], e["damping"]
    s = 2j * math.pi * f
    model = wn**2 / (s**2 + 2 * z * wn * s + wn**2)
    ax[0].semilogx(f, b["magnitude_db"], "o-", ms=3, label="measured")
    ax[0].semilogx(f, 20 * np.log10(np.abs(model)), "k--", lw=0.8, label="2nd-order design")
    ax[0].axhline(-3, color="grey", lw=0.6)
    bw = r["chirp"]["bandwidth_hz"]
    ax[0].set_title(f"{r['joint']}: −3 dB at {bw:.2f} Hz (design {e['bandwidth_hz']:.2f} Hz)"
                    if bw else f"{r['joint']}: no −3 dB crossing in the band")
    ax[0].set_xlabel("frequency (Hz)")
    ax[0].set_ylabel("|q/q_ref| (dB)")
    ax[0].legend()
    ax[1].semilogx(f, b["phase_deg"], "o-", ms=3)
    ax[1].semilogx(f, np.degrees(np.unwrap(np.angle(model))), "k--", lw=0.8)
    ax[1].set_xlabel("frequency (Hz)")
    ax[1].set_ylabel("phase (deg)")


def _friction(ax, r: dict, ratio: float) -> None:
    """Friction at the joint against the joint's speed: the sweeps (coloured by the load),
    the breakaways at rest (speed 0, on the axis's linear part), and the fitted model at the
    10th and 90th percentile of the load; the title gives the fit at the wave generator (the
    motor side, where the model's parameters are) and what it is at the joint (× the ratio)."""
    d = r["data"]
    v, h, load = (np.asarray(d[k]) for k in ("speed", "friction_Nm", "load_Nm"))
    p = r["fit"]
    moving = v > 0
    sc = ax[0].scatter(v[moving], h[moving], c=np.abs(load[moving]), s=10, cmap="viridis",
                       label="sweep (colour: |load|)")
    if (~moving).any():
        ax[0].scatter(v[~moving], h[~moving], marker="^", s=22, color="#d62728",
                      label="breakaway (at rest)")
    top = max(float(v.max()), 1e-2)
    grid = np.geomspace(1e-3, top, 100)
    styles = ("--", ":")
    for level, ls in zip(np.percentile(np.abs(load), [10, 90]), styles, strict=True):
        ax[0].plot(grid, fit.friction_model(grid, level, p, ratio), "k", ls=ls, lw=0.9,
                   label=f"fitted model, |load| {level:.0f} N·m")
    ax[0].set_xscale("symlog", linthresh=1e-2)
    ax[0].set_xlim(0.0, top * 1.3)
    ax[0].set_xlabel("joint speed (rad/s)")
    ax[0].set_ylabel("friction at the joint (N·m)")
    n = float(ratio)
    ax[0].set_title(f"{r['joint']}: wave generator T_c {p['coulomb']:.3g}, T_s "
                    f"{p['static']:.3g} N·m (at the joint ×{n:g}: {n * p['coulomb']:.3g}, "
                    f"{n * p['static']:.3g} N·m), μ {p['load_friction']:.2f}", fontsize=9)
    ax[0].legend(loc="upper left", fontsize=8, frameon=False)
    ax[0].figure.colorbar(sc, ax=ax[0], label="|load| (N·m)")


def _stiffness(ax, r: dict, t1: float, t2: float) -> None:
    q = np.asarray(r["data"]["q"])
    t = np.asarray(r["data"]["torque_Nm"])
    p = r["fit"]
    ax[0].plot((q - p["locked_at"]) * 1e3, t, lw=0.5, label="measured")
    k = [p[x] if p[x] is not None else math.inf for x in ("k1", "k2", "k3")]
    tt = np.linspace(t.min(), t.max(), 200)
    tw = fit.twist_regressors(tt, t1, t2) @ [1 / k[0], 1 / k[1], 1 / k[2]]
    ax[0].plot(tw * 1e3, tt, "k--", lw=1, label="fitted curve")
    ax[0].set_xlabel("twist (mrad)")
    ax[0].set_ylabel("output torque (N·m)")
    ax[0].set_title(f"{r['joint']}: K1 {k[0]:.3g}, K2 {k[1]:.3g}, K3 {k[2]:.3g} N·m/rad, "
                    f"H {p['hysteresis']:.2f} N·m")
    ax[0].legend()


def _inertia(ax, r: dict, robot) -> None:
    from exo_rt.dynamics import Dynamics
    from exo_rt.model.robot_yaml import load_robot_yaml

    d = r["data"]
    poses = np.asarray(d["gravity_pose"])
    joints = np.asarray(d["gravity_joint"])
    g = np.asarray(d["gravity_Nm"])
    before = Dynamics(robot)
    after = Dynamics(load_robot_yaml(r["robot_path"], segments=r["segments"]))
    pb = np.array([before.gravity(q)[j] for q, j in zip(poses, joints, strict=True)])
    pa = np.array([after.gravity(q)[j] for q, j in zip(poses, joints, strict=True)])
    ax[0].plot(g, pb, "o", ms=3, label="model before")
    ax[0].plot(g, pa, "o", ms=3, label="model after")
    lim = [float(g.min()), float(g.max())]
    ax[0].plot(lim, lim, "k--", lw=0.8)
    ax[0].set_xlabel("measured gravity torque (N·m)")
    ax[0].set_ylabel("model gravity torque (N·m)")
    f = r["fit"]
    ax[0].set_title(f"gravity RMS {f['gravity_rms_before_Nm']:.2f} → "
                    f"{f['gravity_rms_Nm']:.2f} N·m")
    ax[0].legend()


def _controller(ax, r: dict, joint: str) -> None:
    """The controller's run on the bench: the joint angle and its reference (deg)."""
    tr = r["trace"]
    t = np.asarray(tr["t_s"])
    ax[0].plot(t, np.degrees(tr["q_rad"]), label="measured")
    ax[0].plot(t, np.degrees(tr["q_ref_rad"]), color="k", lw=0.8, ls="--", label="reference")
    ax[0].set_xlabel("time (s)")
    ax[0].set_ylabel("joint angle (deg)")
    ax[0].set_title(f"{joint}: RMS error {r['rms_error_deg']:.3f}°, max {r['max_error_deg']:.3f}°, "
                    f"max |i| {r['max_abs_current_A']:.1f} A")
    ax[0].legend()


def plot(name: str, report: dict, robot, out: Path) -> Path | None:
    """The procedure's PNG (``bench-<name>.png``), or None (no plot for it, or no matplotlib)."""
    plt = _pyplot()
    per_joint = report.get("joints", {})
    if plt is None or name in ("bringup", "latency") or (name != "inertia" and not per_joint):
        return None
    drives = {tr.joint: tr.drive for tr in robot.transmissions}
    if name == "inertia":
        fig, axes = _panels(plt, 1)
        _inertia(axes[:, 0], report, robot)
    else:
        rows = 2 if name == "chirp" else 1
        fig, axes = _panels(plt, len(per_joint), rows)
        for col, (joint, r) in enumerate(per_joint.items()):
            ax = axes[:, col]
            if name == "step":
                _step(ax, r)
            elif name == "chirp":
                _bode(ax, r)
            elif name == "friction":
                _friction(ax, r, drives[joint].ratio)
            elif name == "stiffness":
                _stiffness(ax, r, drives[joint].t1, drives[joint].t2)
            elif name == "controller":
                _controller(ax, r, joint)
    fig.tight_layout()
    from exo_rt.plotting import save_png

    path = out / f"bench-{name}.png"
    save_png(fig, path, dpi=90)
    plt.close(fig)
    return path
