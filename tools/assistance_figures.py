#!/usr/bin/env python3
"""The figures of docs/assistance.md: the gait-phase estimate and the three assistance laws on
the one-leg exoskeleton in model-in-the-loop (:func:`exo_rt.sim.mil.run_mil`), moved by a
simulated wearer who walks by themselves (:class:`exo_rt.sim.walker.Walker`).

    python tools/assistance_figures.py [--out DIR] [--only NAME …]

NAME: ``estimate`` (the estimate against the walker's true phase over cadence steps of
±20 %, 10 % of the heel strikes dropped), ``phase_profile``, ``impedance``,
``assist_as_needed`` (each law's torque over a stride), ``level`` (a level change waiting for
the stride boundary and ramping over a stride). Each writes ``DIR/assistance_NAME.png``
(default ``docs/img``) and prints its figures. Deterministic: the same run gives the same
numbers.

The walker here is firm — 400 N·m/rad and 20 N·m·s/rad on every joint, not the swing
impedance van der Kooij et al. 2022 identified (the walker's default, hip 50 N·m/rad): this
exoskeleton's harmonic drives are not back-drivable and reflect their rotors' inertia, and a
leg that soft cannot move it along its gait. The safety checks are model-in-the-loop's
(:data:`exo_rt.sim.mil.MIL_SAFETY`) with ``stop_time`` ≈ 0: the default speed-dependent margin
(0.05 s) trips the knee's position limit at its terminal-swing extension at a natural
cadence (docs/assistance.md, "Safety").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ROBOT = ROOT / "configs" / "robots" / "exo_leg.yaml"
CONTROLLERS = ROOT / "configs" / "controllers"
FIRM = {"stiffness": {"*": 400.0}, "damping": {"*": 20.0}}  # the walker's joints (see above)
STRIDE = 1.1  # s: the walker's natural stride
FIRST, SEGMENT = 16, 12  # strides: the estimate's walk, its first cadence and the others
SETTLE = 6  # strides from the start left out of the averages (the estimate starts at 2 s)
SEED = 3  # the board's missed heel strikes (as tests/test_assistance.py draws them)
FIGURES = ("estimate", "phase_profile", "impedance", "assist_as_needed", "level")


# ------------------------------------------------------------------ model-in-the-loop runs
@dataclasses.dataclass
class Walk:
    """One model-in-the-loop run with a walker, its log split into named columns (SI)."""

    cfg: object  # the controller (exo_rt.control.config.ControllerConfig)
    result: object  # exo_rt.sim.mil.MilResult
    t: np.ndarray  # s
    q: np.ndarray  # (steps, n) rad: the true joint angles
    qd: np.ndarray  # (steps, n) rad/s: the true joint speeds
    qr: np.ndarray  # (steps, n) rad: the controller's reference
    tau: np.ndarray  # (steps, n) N·m: the law's torque
    wearer: np.ndarray  # (steps, n) N·m: the walker's own joint torque
    phase: np.ndarray  # strides since the start, unwrapped: the walker's true phase
    heel: np.ndarray  # 1 where the cycle got a heel strike
    est: np.ndarray  # strides, [0, 1): the cycle's estimate
    walking: np.ndarray  # 0–1
    level: np.ndarray  # the first joint's assistance level

    def error(self) -> np.ndarray:
        """The estimate less the true phase (strides, in [−0.5, 0.5))."""
        return (self.est - self.phase % 1.0 + 0.5) % 1.0 - 0.5

    def stride(self) -> np.ndarray:
        """The walker's stride each sample is in (0, 1, …)."""
        return np.floor(self.phase)


class Rig:
    """The one-leg exoskeleton, its exoskeleton-alone model and the runs' safety checks;
    runs are kept by their arguments (one figure may reuse another's)."""

    def __init__(self) -> None:
        from exo_rt.dynamics import Dynamics
        from exo_rt.model import load_mechanism
        from exo_rt.sim import mil

        self.robot = load_mechanism(ROBOT)
        self.exo = load_mechanism(ROBOT, wearer=False)
        self.exo_dyn = Dynamics(self.exo)
        self.safety = dataclasses.replace(mil.MIL_SAFETY, stop_time=1e-6)
        self.names = list(self.robot.joint_names)
        self._runs: dict = {}

    def controller(self, law: str):
        from exo_rt.control.config import load_controller

        return load_controller(CONTROLLERS / f"{law}.yaml", self.robot)

    def walk(self, law: str, cadence, duration: float, level: float = 1.0,
             drop: float = 0.0) -> Walk:
        """``law``'s shipped controller against a firm walker of ``cadence`` ((t s, stride
        s) steps) for ``duration`` s at assistance ``level``; ``drop``: the fraction of heel
        strikes the board misses (seeded)."""
        key = (law, tuple(cadence), duration, level, drop)
        if key not in self._runs:
            from exo_rt.sim import mil
            from exo_rt.sim.walker import Walker

            cfg = self.controller(law)
            r = mil.run_mil(self.robot, cfg, walker=Walker(cadence=cadence, drop=drop, seed=SEED,
                                                            **FIRM),
                            exo_model=self.exo, duration=duration, safety_cfg=self.safety,
                            level=level)
            n, log = self.robot.nq, r.log
            o = mil.log_phase(n)
            self._runs[key] = Walk(cfg, r, log[:, 0], r.column(0), r.column(5), r.column(1),
                                   r.column(3), r.column(mil.B_TAU_WEARER), log[:, o],
                                   log[:, o + 1], log[:, o + 2], log[:, o + 3], log[:, o + 4])
        return self._runs[key]

    def assistance(self, w: Walk, rows: np.ndarray | None = None) -> np.ndarray:
        """The law's torque less what it spends carrying the exoskeleton, h_exo(q, q̇) (its
        gravity and velocity forces at the true state), N·m: what the wearer gets."""
        rows = np.arange(len(w.t)) if rows is None else np.flatnonzero(rows)
        zero = np.zeros(self.robot.nq)
        carry = np.array([self.exo_dyn.inverse_dynamics(w.q[k], w.qd[k], zero) for k in rows])
        return w.tau[rows] - carry


def fold(phase: np.ndarray, values: np.ndarray, bins: int = 100):
    """Values over the stride: their mean, min and max in ``bins`` bins of the phase
    (strides, [0, 1)); returns the bins' centres (%) and the three curves."""
    idx = np.minimum((phase % 1.0 * bins).astype(int), bins - 1)
    mean = np.array([values[idx == b].mean() for b in range(bins)])
    lo = np.array([values[idx == b].min() for b in range(bins)])
    hi = np.array([values[idx == b].max() for b in range(bins)])
    return (np.arange(bins) + 0.5) * 100.0 / bins, mean, lo, hi


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path) -> None:
    """The figure as ``out``, checked first (:func:`exo_rt.plotting.problems`: labels with
    units, no internal name in a legend): a figure that fails is not written (SystemExit)."""
    from exo_rt.plotting import problems, save_png

    bad = problems(fig)
    if bad:
        raise SystemExit(f"{out.name}: " + "; ".join(bad))
    fig.tight_layout()
    save_png(fig, out, metadata={"Software": None})
    _pyplot().close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


# ----------------------------------------------------------------------- 1. the estimate
def cadence_steps(period: float) -> tuple[tuple, np.ndarray, tuple]:
    """The estimate's walk at ``period``: 16 strides (the estimate starts at the controller
    file's 2 s stride), then 12 at 1.2× (+20 %), then 12 at 0.96× (−20 % of that): the
    walker's cadence steps, the segments' start times (and the end) and their periods."""
    periods = (period, 1.2 * period, 0.96 * period)
    counts = (FIRST, SEGMENT, SEGMENT)
    starts = np.concatenate(([0.0], np.cumsum([n * p for n, p in zip(counts, periods,
                                                                       strict=True)])))
    return tuple((float(t), p) for t, p in zip(starts[:-1], periods, strict=True)), starts, \
        periods


def estimate_figures(rig: Rig, period: float, drop: float = 0.1) -> tuple[dict, Walk]:
    """The estimate through :func:`cadence_steps` at ``period``, ``drop`` of the heel strikes
    missed: RMS error per stride (steady: the last 5 of each cadence; after each step), the
    error at the heel strikes the cycle got in steady strides (rad), the phase's step at the
    stride's wrap less a cycle's advance (rad)."""
    cadence, starts, _ = cadence_steps(period)
    w = rig.walk("phase_profile", cadence, float(starts[-1]), drop=drop)
    err, stride = w.error(), w.stride()

    def rms(i) -> float:
        return float(np.sqrt(np.mean(err[stride == i] ** 2)))

    steps = (FIRST, FIRST + SEGMENT)
    steady = [i for b in (FIRST - SEGMENT, *steps) for i in range(b + 7, b + SEGMENT)]
    first = [rms(i) for i in range(FIRST)]
    heel = (w.heel > 0) & np.isin(stride, steady)
    step = np.diff(w.est)
    wrap = step < -0.5
    advance = np.median(step[~wrap])
    f = {"steady_pct": 100.0 * max(rms(i) for i in steady),
         "after_pct": [[100.0 * rms(b + i) for i in range(3)] for b in steps],
         "later_pct": 100.0 * max(rms(i) for b in steps for i in range(b + 3, b + SEGMENT)),
         "settled_stride": next(i for i in range(FIRST) if max(first[i:]) < 0.05),
         "heel_rad": float(np.abs(err[heel]).max() * 2 * math.pi),
         "wrap_rad": float(np.max(np.abs(step[wrap] + 1.0 - advance)) * 2 * math.pi),
         "strikes": len(w.result.heel_strike_times),
         "dropped": int(w.result.heel_dropped.sum()), "safe": w.result.safe}
    return f, w


def estimate(rig: Rig, out: Path) -> dict:
    """The estimate against the walker's true phase through cadence steps of ±20 % at three
    cadences, 10 % of the heel strikes dropped; the picture: strides of 1.1 s."""
    rows = {}
    print(f"estimate: {FIRST} strides, then {SEGMENT} at +20 %, {SEGMENT} at −20 % of that; "
          f"10 % of the heel strikes dropped (RMS error per stride, % of the stride)")
    for period in (1.1, 1.5, 2.0):
        f, w = estimate_figures(rig, period)
        rows[period] = f
        after = ", ".join("/".join(f"{x:.1f}" for x in a) for a in f["after_pct"])
        print(f"  {period:.1f} s: steady {f['steady_pct']:.2f} %; the 3 strides after each "
              f"step {after} %, then at most {f['later_pct']:.2f} %; under 5 % from stride "
              f"{f['settled_stride']}; at the heel strikes {f['heel_rad']:.3f} rad; wrap "
              f"{f['wrap_rad']:.4f} rad; {f['strikes']} heel strikes, {f['dropped']} "
              f"dropped; SAFE: {f['safe']}")
    f, w = estimate_figures(rig, STRIDE)
    _, starts, periods = cadence_steps(STRIDE)
    err = w.error()
    strikes, dropped = w.result.heel_strike_times, w.result.heel_dropped
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7.5, 5.6), dpi=110)
    t1 = starts[1]
    zoom = (w.t >= t1 - 2 * periods[0]) & (w.t <= t1 + 3 * periods[1])
    a1.plot(w.t[zoom], w.phase[zoom] % 1.0, color="0.6", lw=2.5, label="walker's true phase")
    a1.plot(w.t[zoom], w.est[zoom], color="#1f5fa8", lw=1.0, label="estimate")
    for t, d in zip(strikes, dropped, strict=True):
        if zoom[min(np.searchsorted(w.t, t), len(w.t) - 1)]:
            a1.axvline(t, color="#c0392b" if d else "0.3", lw=0.8, ls=":" if d else "-")
    a1.axvline(t1, color="#d9730d", lw=1.5)
    a1.text(t1, 1.04, f" strides {periods[0]:.2f} → {periods[1]:.2f} s", color="#d9730d",
            va="bottom", fontsize=8)
    a1.set_ylabel("gait phase (strides)")
    a1.set_ylim(0, 1.3)
    a1.set_xlabel("time (s)")
    a1.plot([], [], color="0.3", lw=0.8, label="heel strike")
    a1.plot([], [], color="#c0392b", lw=0.8, ls=":", label="dropped heel strike")
    a1.plot([], [], color="#d9730d", lw=1.5, label="cadence step")
    a1.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, ncol=3, frameon=False)
    a2.plot(w.t, 100.0 * err, color="#1f5fa8", lw=0.8)
    a2.axhspan(-5, 5, color="0.9", zorder=0)
    for t in starts[1:-1]:
        a2.axvline(t, color="#d9730d", lw=1.2)
    a2.plot(strikes[dropped], np.full(int(dropped.sum()), -9.0), "x", color="#c0392b",
            label="dropped heel strike")
    a2.set_ylim(-10, 10)
    a2.plot([], [], color="#d9730d", lw=1.2, label="cadence step")
    a2.set_xlabel("time (s)")
    a2.set_ylabel("estimate − true (% stride)")
    a2.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, ncol=2, frameon=False)
    fig.suptitle("Gait-phase estimate: adaptive oscillator on the hip, heel-strike corrected",
                 fontsize=10)
    _save(fig, out / "assistance_estimate.png")
    return rows


# ----------------------------------------------------------------- 2. the phase profile
def phase_profile(rig: Rig, out: Path) -> dict:
    """The hip's assistance over a stride against the profile at the walker's true phase;
    the walker's own hip torque at level 0 and 1; the fade when they stop."""
    from exo_rt.control.laws import profile_torque

    cfg = rig.controller("phase_profile")
    period = cfg.reference.period  # the pace its lobes were chosen for
    strides, settle = 10, 4
    w1 = rig.walk("phase_profile", ((0.0, period),), strides * period, level=1.0)
    w0 = rig.walk("phase_profile", ((0.0, period),), strides * period, level=0.0)
    hip = rig.names.index("hip")
    g = w1.cfg.gains[hip]
    m = w1.phase >= settle
    assist = rig.assistance(w1, m)[:, hip]
    ph = w1.phase[m]
    ideal = np.array([profile_torque(g, x % 1.0) for x in ph])
    peak = max(abs(g['peak_torque']), abs(g['peak_torque_2']))
    track = float(np.sqrt(np.mean((assist - ideal) ** 2)) / peak)
    offsets = []  # each stride's largest torque in each lobe against its `peak`
    for lobe in ("", "_2"):
        onset, top, end, sign = (g['onset' + lobe], g['peak' + lobe], g['end' + lobe],
                                 np.sign(g['peak_torque' + lobe]))
        inside = (ph % 1.0 - onset) % 1.0 <= (end - onset) % 1.0
        for i in range(settle, strides):
            k = np.flatnonzero((np.floor(ph) == i) & inside)
            late = (ph[k[np.argmax(sign * assist[k])]] - top + 0.5) % 1.0 - 0.5
            offsets.append(late)
    e1 = float(np.sqrt(np.mean(w1.wearer[m, hip] ** 2)))
    e0 = float(np.sqrt(np.mean(w0.wearer[w0.phase >= settle, hip] ** 2)))
    # standing still: the walker stops mid-lobe (at the second lobe's peak) after 8 strides
    fades = {}
    for p in (STRIDE, period):
        stop = (8 + g['peak_2']) * p
        ws = rig.walk("phase_profile", ((0.0, p), (stop, math.inf)), stop + max(2.0, p + 0.5))
        a_s = rig.assistance(ws, ws.t >= stop - p)[:, hip]
        t_s = ws.t[ws.t >= stop - p]
        above = np.flatnonzero(np.abs(a_s[t_s >= stop]) >= 0.05 * peak)
        fades[p] = (float(t_s[t_s >= stop][above[-1]] - stop) if len(above) else 0.0,
                    ws, a_s, t_s, stop)
    f = {"tracking_rms_of_peak": track, "peak_offset_pct": 100.0 * float(np.max(np.abs(offsets))),
         "peak_offset_mean_pct": 100.0 * float(np.mean(offsets)),
         "effort_level1": e1, "effort_level0": e0, "effort_reduction": 1.0 - e1 / e0,
         "fade_s": {p: v[0] for p, v in fades.items()},
         "safe": [w1.result.safe, w0.result.safe] + [v[1].result.safe for v in fades.values()]}
    print(f"phase_profile: hip lobes {g['onset']:.2f}/{g['peak']:.2f}/{g['end']:.2f} "
          f"{g['peak_torque']:+g} N·m and {g['onset_2']:.2f}/{g['peak_2']:.2f}/"
          f"{g['end_2']:.2f} {g['peak_torque_2']:+g} N·m; strides of {period:g} s (the "
          f"reference's), strides {settle}–{strides - 1}")
    print(f"  assistance (law − carried exoskeleton) against the profile at the true phase: "
          f"RMS {100 * track:.1f} % of the peak")
    print(f"  each lobe's peak: within {f['peak_offset_pct']:.2f} % of the stride of its "
          f"`peak` (mean {f['peak_offset_mean_pct']:+.2f} %)")
    print(f"  wearer's hip effort (RMS torque): level 0 {e0:.1f} N·m, level 1 {e1:.1f} N·m: "
          f"{100 * f['effort_reduction']:.0f} % less")
    for p, (fade, *_rest) in fades.items():
        print(f"  standing still (stopped at the second lobe's peak, strides of {p:g} s): "
              f"assistance below 5 % of the peak {fade:.2f} s after they stop")
    print(f"  SAFE: {f['safe']}")
    fade, ws, a_s, t_s, stop = fades[period]
    plt = _pyplot()
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(7.5, 7.6), dpi=110)
    x, mean, lo, hi = fold(ph, assist)
    a1.fill_between(x, lo, hi, color="#1f5fa8", alpha=0.2, lw=0)
    a1.plot(x, mean, color="#1f5fa8", label="assistance: law − carried exoskeleton")
    grid = np.linspace(0, 1, 401)
    a1.plot(100 * grid, [profile_torque(g, p) for p in grid], "--", color="k", lw=1,
            label="profile at the true phase")
    a1.set_ylabel("hip torque (N·m)")
    a1.set_xlabel("walker's gait phase (% stride, 0: heel strike)")
    a1.legend(loc="lower left", fontsize=8)
    for w, lvl, col in ((w0, 0, "0.5"), (w1, 1, "#d9730d")):
        mm = w.phase >= settle
        x, mean, lo, hi = fold(w.phase[mm], w.wearer[mm, hip])
        eff = e0 if lvl == 0 else e1
        a2.plot(x, mean, color=col, label=f"level {lvl}: RMS {eff:.1f} N·m")
    a2.set_ylabel("wearer's hip torque (N·m)")
    a2.set_xlabel("walker's gait phase (% stride)")
    a2.legend(loc="lower left", fontsize=8)
    a3.plot(t_s - stop, a_s, color="#1f5fa8", label="hip assistance (N·m)")
    a3.axhspan(-0.05 * peak, 0.05 * peak, color="0.9", zorder=0)
    a3.axvline(0, color="#d9730d", lw=1.2)
    a3b = a3.twinx()
    a3b.plot(t_s - stop, ws.walking[ws.t >= stop - period], color="0.4", lw=1, ls="--")
    a3b.set_ylabel("walking, dashed (0–1)")
    a3b.set_ylim(-0.05, 1.05)
    a3.set_xlabel(f"time since the walker stopped at the second lobe's peak, strides of "
                  f"{period:g} s (s)")
    a3.set_ylabel("hip assistance (N·m)")
    a3.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"phase_profile (configs/controllers/phase_profile.yaml), strides of {period:g} s",
                 fontsize=10)
    _save(fig, out / "assistance_phase_profile.png")
    return f


# -------------------------------------------------------------------- 3. the impedance
def impedance(rig: Rig, out: Path) -> dict:
    """The hip's and knee's torque over a stride of the walking leg, and the stance/swing
    blend the law read from the estimate."""
    from exo_rt.control.laws import _swing

    strides = 16
    w = rig.walk("impedance", ((0.0, STRIDE),), strides * STRIDE)
    m = w.phase >= SETTLE
    assist = rig.assistance(w, m)
    ph = w.phase[m]
    gains = w.cfg.gains
    blend = np.array([[w.walking[k] * _swing(w.est[k], gains[j]['stance_end'])
                       for j in range(rig.robot.nq)] for k in np.flatnonzero(m)])
    # the law's formula at the true state, the estimate's phase (the law reads the measured
    # state: an encoder count and the speed filter apart)
    k_, b_, eq_ = (g0 + blend * (g1 - g0) for g0, g1 in (
        (gains['stiffness'], gains['swing_stiffness']), (gains['damping'], gains['swing_damping']),
        (gains['equilibrium'], gains['swing_equilibrium'])))
    formula = k_ * (eq_ - w.q[m]) - b_ * w.qd[m]
    diff = np.sqrt(np.mean((assist - formula) ** 2, axis=0))
    f = {"formula_rms_diff": diff.tolist(), "range": [(float(a.min()), float(a.max()))
                                                       for a in assist.T],
         "safe": w.result.safe}
    print(f"impedance: strides of {STRIDE} s, strides {SETTLE}–{strides - 1}; SAFE: {f['safe']}")
    for j, name in enumerate(rig.names):
        g = gains[j]
        print(f"  {name}: stance K {g['stiffness']:g} B {g['damping']:g} θ₀ "
              f"{g['equilibrium']:g}, swing K {g['swing_stiffness']:g} B "
              f"{g['swing_damping']:g} θ₀ {g['swing_equilibrium']:g} from {g['stance_end']:g}: "
              f"torque {f['range'][j][0]:+.1f} … {f['range'][j][1]:+.1f}"
              f" N·m; against the formula at the true state: RMS {diff[j]:.3f} N·m")

    plt = _pyplot()
    fig, (a0, a1, a2) = plt.subplots(3, 1, figsize=(7.5, 7.4), dpi=110, sharex=True,
                                     gridspec_kw={"height_ratios": (2, 2, 1)})
    for j, (name, col) in enumerate(zip(rig.names, ("#1f5fa8", "#d9730d"), strict=False)):
        x, mean, _, _ = fold(ph, w.q[m, j])
        a0.plot(x, mean, color=col, label=f"{name} q")
        x, mean, _, _ = fold(ph, eq_[:, j])
        a0.plot(x, mean, color=col, ls="--", lw=1, label=f"{name} equilibrium")
        x, mean, lo, hi = fold(ph, assist[:, j])
        a1.fill_between(x, lo, hi, color=col, alpha=0.2, lw=0)
        a1.plot(x, mean, color=col, label=f"{name}: law − carried exoskeleton")
        x, mean, _, _ = fold(ph, blend[:, j])
        a2.plot(x, mean, color=col, label=f"{name} (stance_end {gains[j]['stance_end']:g})")
    a0.set_ylabel("angle (rad)")
    a0.legend(loc="upper left", fontsize=8, ncol=2)
    a1.axhline(0, color="0.6", lw=0.6)
    a1.set_ylabel("torque (N·m)")
    a1.legend(loc="upper left", fontsize=8)
    a2.set_ylabel("swing blend\n(0 stance, 1 swing)")
    a2.set_xlabel("walker's gait phase (% stride, 0: heel strike)")
    a2.set_ylim(-0.05, 1.05)
    a2.legend(loc="center left", fontsize=8)
    fig.suptitle("impedance (configs/controllers/impedance.yaml), strides of 1.1 s",
                 fontsize=10)
    _save(fig, out / "assistance_impedance.png")
    return f


# ------------------------------------------------------------- 4. assist-as-needed
def assist_as_needed(rig: Rig, out: Path) -> dict:
    """Torque against the excursion from the reference; over a stride with a walker at
    1.2× the reference's stride period (drifting out of the tunnel); and a walker on the
    reference (inside it). Outside the tunnel the law's spring (on the excursion past the
    edge) and damper (on the error's rate) are fitted together, where the damper is fully
    engaged (1 cm past the edge) and the limit not reached."""
    cfg = rig.controller("assist_as_needed")
    period = cfg.reference.period
    on = rig.walk("assist_as_needed", ((0.0, period),), 6 * period)
    slow = 1.2 * period
    w = rig.walk("assist_as_needed", ((0.0, slow),), 5 * slow)
    gains = w.cfg.gains
    a_on = rig.assistance(on)
    a = rig.assistance(w)
    e = w.qr - w.q
    de = np.gradient(w.qr, w.t, axis=0) - w.qd  # q̇_r − q̇, rad/s
    f = {"on_ref_excursion": np.abs(on.qr - on.q).max(axis=0).tolist(),
         "on_ref_assist": np.abs(a_on).max(axis=0).tolist(), "slopes": [], "dampers": [],
         "inside_max": [],
         "limit_max": [], "safe": [on.result.safe, w.result.safe]}
    print(f"assist_as_needed: reference strides of {period:g} s")
    for j, name in enumerate(rig.names):
        g = gains[j]
        out_ = np.abs(e[:, j]) - g['tunnel']
        inside = out_ < -0.005  # (an encoder count and the carried model apart at the edge)
        spring = (out_ > 0.011) & (np.abs(a[:, j]) < 0.9 * g['assist_limit'])
        regressors = np.c_[np.sign(e[spring, j]) * out_[spring], de[spring, j]]
        (slope, damper), *_ = np.linalg.lstsq(regressors, a[spring, j], rcond=None)
        f["slopes"].append(float(slope))
        f["dampers"].append(float(damper))
        f["inside_max"].append(float(np.abs(a[inside, j]).max()))
        f["limit_max"].append(float(np.abs(a[:, j]).max()))
        print(f"  {name}: tunnel {g['tunnel']:g} rad, stiffness {g['stiffness']:g} N·m/rad, "
              f"damping {g['damping']:g} N·m·s/rad, limit {g['assist_limit']:g} N·m")
        print(f"    walker on the reference: largest excursion {f['on_ref_excursion'][j]:.3f} "
              f"rad, largest assistance {f['on_ref_assist'][j]:.2f} N·m")
        print(f"    walker at {slow:g} s strides: inside the tunnel at most "
              f"{f['inside_max'][j]:.2f} N·m; outside, fitted spring {slope:.0f} N·m/rad and "
              f"damper {damper:.1f} N·m·s/rad; largest {f['limit_max'][j]:.1f} N·m")
    print(f"  SAFE: {f['safe']}")

    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 7.6), dpi=110)
    cols = ("#1f5fa8", "#d9730d")
    a1 = axes[0]
    reach = float(np.abs(e).max())
    span = np.linspace(-reach, reach, 601)
    for j, (name, col) in enumerate(zip(rig.names, cols, strict=False)):
        g = gains[j]
        law = np.sign(span) * np.minimum(g['stiffness'] * np.maximum(np.abs(span) - g['tunnel'], 0),
                                         g['assist_limit'])
        a1.plot(e[::20, j], a[::20, j], ".", ms=2, color=col, alpha=0.5)
        a1.plot(span, law, color=col, lw=1, label=f"{name}: tunnel {g['tunnel']:g} rad, "
                f"{g['stiffness']:g} N·m/rad (+ {g['damping']:g} N·m·s/rad), limit "
                f"{g['assist_limit']:g} N·m")
    a1.set_xlabel("excursion q_r − q; dots: the run at 1.2× the stride, lines: the spring "
                  "alone (rad)")
    a1.set_ylabel("assistance (N·m)")
    a1.legend(loc="upper left", fontsize=8)
    hip = rig.names.index("hip")
    win = w.phase < 2.0  # the first two strides: the reference drifts ahead by 0.2 a stride
    x = 100 * w.phase[win]
    a2 = axes[1]
    g = gains[hip]
    a2.fill_between(x, w.qr[win, hip] - g['tunnel'], w.qr[win, hip] + g['tunnel'], color="0.85",
                    lw=0, label="tunnel around q_r")
    a2.plot(x, w.qr[win, hip], color="0.4", lw=1, label="reference q_r (2.0 s strides)")
    a2.plot(x, w.q[win, hip], color=cols[0], label="hip q (walker, 2.4 s strides)")
    a2.set_ylabel("hip angle (rad)")
    a2.legend(loc="lower left", fontsize=8)
    a3 = axes[2]
    a2.sharex(a3)  # the same strides: the phase labelled once, below
    for j, (name, col) in enumerate(zip(rig.names, cols, strict=False)):
        a3.plot(x, a[win, j], color=col, label=name)
    a3.axhline(0, color="0.6", lw=0.6)
    a3.set_ylabel("assistance (N·m)")
    a3.set_xlabel("walker's gait phase (% of their stride, from the start)")
    a3.legend(loc="lower left", fontsize=8)
    fig.suptitle("assist_as_needed (configs/controllers/assist_as_needed.yaml)", fontsize=10)
    _save(fig, out / "assistance_assist_as_needed.png")
    return f


# ----------------------------------------------------------------------- 5. the level
def level(rig: Rig, out: Path) -> dict:
    """A level asked for mid-stride (0 → 0.5, then → 1) waits for the estimate's next stride
    boundary and ramps over one stride: the cycle's own estimate and level update
    (:func:`exo_rt.cycle.assistance.level_update`) run on a recorded walk's hip."""
    from exo_rt.control import phase_estimate
    from exo_rt.cycle import assistance
    from exo_rt.cycle.layout import V_LEVEL, V_LEVEL_ASKED, V_LEVEL_TO
    from exo_rt.sim import mil

    strides = 14
    w = rig.walk("phase_profile", ((0.0, STRIDE),), strides * STRIDE, level=0.0)
    c = mil.build_cycle(rig.robot, w.cfg, mil.MilOptions(exo_model=rig.exo))
    gp, gait, s, v = c.model.law.gp, c.data.law.gait, c.data.s, c.data.v
    phase_estimate.reset(gp, gait)
    v[V_LEVEL] = v[V_LEVEL_TO] = v[V_LEVEL_ASKED] = 0.0
    asks = ((7.4 * STRIDE, 0.5), (10.55 * STRIDE, 1.0))  # s, level: mid-stride
    dt = float(w.t[1] - w.t[0])
    applied, phase = np.zeros(len(w.t)), np.zeros(len(w.t))
    wrapped = np.zeros(len(w.t), bool)
    asked = np.zeros(len(w.t))
    nxt, now = 0, 0.0
    for k in range(len(w.t)):
        if nxt < len(asks) and w.t[k] >= asks[nxt][0]:
            v[V_LEVEL_ASKED] = asks[nxt][1]
            s[0]["level_pending"] = 1.0
            now = asks[nxt][1]
            nxt += 1
        phase_estimate.update(gp, gait, w.q[k], w.qd[k], w.heel[k], dt)
        assistance.level_update(s[0], v, gait[0], dt)
        applied[k], phase[k] = v[V_LEVEL, 0], gait[0]["phase"]
        wrapped[k], asked[k] = gait[0]["wrapped"] > 0.5, now
    boundaries = w.t[wrapped]
    f = {"changes": []}
    print(f"level: asked for mid-stride, strides of {STRIDE} s (the estimate on a recorded "
          f"walk's hip)")
    for i, (t_ask, lvl) in enumerate(asks):
        b = boundaries[boundaries >= t_ask][0]
        until = asks[i + 1][0] if i + 1 < len(asks) else math.inf
        moving = (w.t >= b) & (w.t < until) & (np.abs(applied - lvl) > 1e-9)
        t_end = float(w.t[np.flatnonzero(moving)[-1] + 1]) if moving.any() else b
        start_idx = np.searchsorted(w.t, b)
        prev = applied[start_idx - 1]
        mid = w.t[np.flatnonzero((w.t >= b) & (np.abs(applied - prev) >= 0.5 * abs(lvl - prev)))
                  [0]]
        ch = {"asked": float(t_ask), "level": lvl, "boundary": float(b),
              "wait_strides": float((b - t_ask) / STRIDE),
              "ramp_strides": float((t_end - b) / STRIDE),
              "half_strides": float((mid - b) / STRIDE),
              "before_boundary": float(np.abs(applied[(w.t >= t_ask) & (w.t < b)] - prev).max())}
        f["changes"].append(ch)
        print(f"  {prev:.1f} → {lvl:.1f} asked at {t_ask:.3f} s (estimated phase "
              f"{phase[np.searchsorted(w.t, t_ask)]:.2f}): moved {ch['before_boundary']:.1e} until "
              f"the boundary at {b:.3f} s ({ch['wait_strides']:.2f} strides later), half-way "
              f"after {ch['half_strides']:.2f}, there after {ch['ramp_strides']:.2f} strides")

    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7.5, 4.8), dpi=110, sharex=True,
                                 gridspec_kw={"height_ratios": (2, 1)})
    win = (w.t >= 6.5 * STRIDE) & (w.t <= 13 * STRIDE)
    a1.step(w.t[win], asked[win], where="post", color="0.5", lw=1.2, ls="--",
            label="level asked for (request)")
    a1.plot(w.t[win], applied[win], color="#1f5fa8", lw=1.8, label="level applied by the cycle")
    for b in boundaries[(boundaries >= w.t[win][0]) & (boundaries <= w.t[win][-1])]:
        a1.axvline(b, color="0.8", lw=0.8)
        a2.axvline(b, color="0.8", lw=0.8)
    a1.plot([], [], color="0.8", lw=0.8, label="the estimate's stride boundary")
    a1.set_ylabel("assistance level (0–1)")
    a1.set_ylim(-0.05, 1.1)
    a1.legend(loc="upper left", fontsize=8)
    a2.plot(w.t[win], phase[win], color="#d9730d", lw=1)
    a2.set_ylabel("estimated\nphase (strides)")
    a2.set_xlabel("time (s)")
    fig.suptitle("The level: applied at the next stride boundary, ramped over one stride",
                 fontsize=10)
    _save(fig, out / "assistance_level.png")
    return f


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img",
                    help="where the PNGs go (default docs/img)")
    ap.add_argument("--only", nargs="+", choices=FIGURES, default=list(FIGURES),
                    help="these figures only")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rig = Rig()
    for name in FIGURES:
        if name in args.only:
            globals()[name](rig, args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
