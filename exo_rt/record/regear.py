"""What a recorded run would ask of each joint's motor through another gear ratio
(``exo-rt size RUN --ratio N…``, docs/sizing.md): a ratio study for picking a gear, from the
motions and loads a run really had.

A run records each joint's motor current i and speed q̇. Through the drive the plant
simulates (:mod:`exo_rt.actuators.harmonic_drive`, taken rigid), with k = ±N the rotor's
multiplier, J_r = k²·I_rotor the rotor's inertia at the joint and ω = k·q̇ the wave
generator's speed, the torque the gear hands the link is

    τ_link = k·(k_M·i·s_m − sgn(ω)·T_f(ω) − B·ω) − J_r·q̈ − sgn(q̇)·μ·|τ_link|

(k_M the torque constant, s_m the motor's sign, T_f = T_c + (T_s − T_c)·exp(−(ω/ω_s)²) the
Coulomb–Stribeck friction, B the viscous one, μ the mesh friction per N·m carried: forward
efficiency 1/(1 + μ), backward 1 − μ — Taghirad & Bélanger 1998's wave-generator friction).
Solved for τ_link (its sign is the right-hand side's: μ < 1), it is what the link needed —
the wearer, the floor, gravity and the link's own inertia — whatever the gear. The same law
read forward through a ratio N′ (same motor, same gear size and friction, rotor inertia
I_rotor) gives the current that ratio would have drawn for the same motion:

    i′ = [ (τ_link + sgn(q̇)·μ·|τ_link| + N′²·I_rotor·q̈) / k′ + sgn(ω′)·T_f(ω′) + B·ω′ ] / (k_M·s_m)

So the rotor's share grows with N′ and the load's share falls with it: the RMS current has
a best ratio per joint, and the motor's RMS torque k_M·i_RMS there is the continuous torque
a motor of this rotor must give. Not modelled: the gear's compliance (the rotor taken at
k·q), the current loop's lag, a controller that would track differently through another
gear — the motion is the run's. The gear's own ratings (rated, peak torque) are the robot
file's gear's, at its ratio: at another they are not judged.

Another rotor inertia I′ (``--rotor``) is another motor: the forward law with I′ gives the
motor torque k_M·i′ it must give — its continuous rating is held against the RMS — but its
torque constant, resistance and ratings are unknown, so no current, voltage or verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from exo_rt.record.sizing import AT_PEAK, Runs, aligned, load_runs

SMOOTH = 5  # cycles each side: q̈ is the central difference of q̇ over 2·SMOOTH + 1 samples


@dataclass
class Regeared:
    """One joint's figures through one ratio and one rotor (SI). The currents, the voltage
    and the verdict are the fitted motor's (its k_M, R, ratings): for another rotor — another
    motor, whose electrical data the study does not know — they are None and "—"."""

    joint: str
    ratio: float
    rotor: float  # kg·m² at the motor: its rotor and the gear's wave generator
    reflected: float  # kg·m²: N²·rotor
    motor_rms_torque: float  # N·m at the motor: the continuous torque a motor must give
    motor_peak_torque: float  # N·m at the motor
    peak_motor_speed: float  # rad/s at the motor
    rms_current: float | None = None  # A
    peak_current: float | None = None  # A
    peak_voltage: float | None = None  # V: max of R·|i| + k_M·|ω_m| (back-EMF and drop)
    verdict: str = "—"
    reasons: list[str] = field(default_factory=list)


def acceleration(qd: np.ndarray, dt: float) -> np.ndarray:
    """q̈ (rad/s²) from the recorded speeds: the central difference over ±SMOOTH cycles (an
    encoder's speed differentiated over one cycle is mostly its quantisation); within SMOOTH
    of either end over as many cycles as there are, the very ends one-sided."""
    n = len(qd)
    out = np.zeros_like(qd)
    if n < 2:
        return out
    h = min(SMOOTH, (n - 1) // 2)
    if h >= 1:
        out[h:n - h] = (qd[2 * h:] - qd[:n - 2 * h]) / (2 * h * dt)
    for i in range(1, h):  # the ends: the widest central window that fits
        out[i] = (qd[2 * i] - qd[0]) / (2 * i * dt)
        out[n - 1 - i] = (qd[n - 1] - qd[n - 1 - 2 * i]) / (2 * i * dt)
    out[0] = (qd[1] - qd[0]) / dt
    out[n - 1] = (qd[n - 1] - qd[n - 2]) / dt
    return out


def _friction(omega: np.ndarray, drive) -> np.ndarray:
    """sgn(ω)·T_f(ω) + B·ω (N·m at the wave generator), the drive's friction without the
    mesh's load share."""
    w = omega / max(drive.stribeck_velocity, 1e-12)
    static = max(drive.static, drive.coulomb)
    mag = drive.coulomb + (static - drive.coulomb) * np.exp(-w * w)
    return np.sign(omega) * mag + drive.viscous * omega


def link_torque(current, qd, qdd, tr, rotor_inertia: float) -> np.ndarray:
    """τ_link (N·m) the gear handed the link, from the motor's current (module docstring)."""
    k, d = tr.multiplier, tr.drive
    a = (k * (tr.motor.torque_constant * tr.motor_sign * current - _friction(k * qd, d))
         - k * k * rotor_inertia * qdd)
    return a / (1.0 + np.sign(qd) * np.sign(a) * d.load_friction)


def motor_current(tau_link, qd, qdd, tr, rotor_inertia: float, ratio: float) -> np.ndarray:
    """i′ (A) the motor would draw through ``ratio`` for the same motion and link torques."""
    k = math.copysign(ratio, tr.multiplier)
    d = tr.drive
    t_rotor = ((tau_link + np.sign(qd) * d.load_friction * np.abs(tau_link)
                + k * k * rotor_inertia * qdd) / k + _friction(k * qd, d))
    return t_rotor / (tr.motor.torque_constant * tr.motor_sign)


def regear(runs: Runs, ratios: list[float], rotors: list[float] = ()) -> list[Regeared]:
    """Every joint of the runs through every ratio of ``ratios`` and the robot's own, in
    ascending order, with the fitted rotor and each of ``rotors`` (kg·m² at the motor), over
    the runs' records together (each run's q̈ its own)."""
    from exo_rt.control.config import rotor_inertias

    mech = runs.mech
    by_joint = {tr.joint: tr for tr in mech.transmissions}
    reflected = rotor_inertias(mech)
    out = []
    for j, name in enumerate(runs.names):
        tr = by_joint[name]
        fitted = reflected[mech.joint_index(name)] / tr.ratio ** 2
        motions = []
        for records in runs.records:
            cur, qd = records["current"][:, j], records["qd"][:, j]
            ok = np.isfinite(cur) & np.isfinite(qd)
            cur, qd = cur[ok], qd[ok]
            qdd = acceleration(qd, runs.dt)
            motions.append((link_torque(cur, qd, qdd, tr, fitted), qd, qdd))
        tau, qd, qdd = (np.concatenate(x) for x in zip(*motions, strict=True))
        m = tr.motor
        for rotor in [fitted, *(r for r in rotors if r != fitted)]:
            for n in sorted({tr.ratio, *ratios}):
                i = motor_current(tau, qd, qdd, tr, rotor, n)
                torque = m.torque_constant * np.abs(i)
                w = n * np.abs(qd)
                g = Regeared(name, n, rotor, n * n * rotor,
                             float(np.sqrt(np.mean(torque * torque))), float(np.max(torque)),
                             float(np.max(w)))
                if rotor == fitted:
                    g.rms_current = g.motor_rms_torque / m.torque_constant
                    g.peak_current = g.motor_peak_torque / m.torque_constant
                    g.peak_voltage = float(np.max(m.resistance * np.abs(i)
                                                  + m.torque_constant * w))
                    _judge(g, m)
                out.append(g)
    return out


def _judge(g: Regeared, m) -> None:
    """ok / over rated (RMS current) / over peak (the drive's current, the supply's voltage,
    the motor's permissible speed)."""
    level = 0
    if g.rms_current > m.rated_current:
        level = 1
        g.reasons.append(f"RMS current {g.rms_current:.3g} A > {m.rated_current:.3g}")
    if g.peak_current >= AT_PEAK * m.peak_current:
        level = 2
        g.reasons.append(f"peak current {g.peak_current:.3g} A: at or over the drive's "
                         f"{m.peak_current:.3g}")
    if g.peak_voltage > m.voltage:
        level = 2
        g.reasons.append(f"voltage {g.peak_voltage:.3g} V > the supply's {m.voltage:.3g}")
    if m.max_speed is not None and g.peak_motor_speed > m.max_speed:
        level = 2
        g.reasons.append(f"motor speed {g.peak_motor_speed:.4g} rad/s > {m.max_speed:.4g}")
    g.verdict = ("ok", "over rated", "over peak")[level]


def _cell(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def table(rows: list[Regeared], own: dict[str, float]) -> list[str]:
    """The lines ``exo-rt size --ratio`` prints: one row per joint, rotor and ratio (``own``:
    each joint's ratio in the robot file, marked *), then why a ratio is over its peak."""
    head = ("joint", "ratio", "rotor g·cm²", "J_r kg·m²", "motor RMS τ N·m",
            "motor peak τ N·m", "RMS i A", "peak i A", "peak ω_m rad/s", "peak V", "verdict")
    body = []
    for g in rows:
        body.append((g.joint, f"{g.ratio:g}{'*' if own.get(g.joint) == g.ratio else ''}",
                     f"{g.rotor * 1e7:.0f}", f"{g.reflected:.2f}",
                     f"{g.motor_rms_torque:.3f}", f"{g.motor_peak_torque:.2f}",
                     _cell(g.rms_current, ".2f"), _cell(g.peak_current, ".1f"),
                     f"{g.peak_motor_speed:.0f}", _cell(g.peak_voltage, ".1f"), g.verdict))
    lines = aligned([head, *body])
    lines += [f"{g.joint} at {g.ratio:g}: {why}" for g in rows if g.verdict == "over peak"
              for why in g.reasons if not why.startswith("RMS")]
    return lines


def best(rows: list[Regeared]) -> dict[tuple[str, float], Regeared]:
    """Per joint and rotor, the ratio of the least RMS motor torque (the coolest motor) among
    those not over the fitted motor's peak."""
    out: dict[tuple[str, float], Regeared] = {}
    for g in rows:
        if g.verdict == "over peak":
            continue
        key = (g.joint, g.rotor)
        if key not in out or g.motor_rms_torque < out[key].motor_rms_torque:
            out[key] = g
    return out


def summary(rows: list[Regeared], own: dict[str, float]) -> list[str]:
    """Per joint and rotor, the line naming the best ratio and the continuous torque a motor
    must give there; a joint whose every ratio is over the peak, said so."""
    coolest = best(rows)
    lines = []
    for joint in own:
        rotors = list(dict.fromkeys(g.rotor for g in rows if g.joint == joint))
        for k, rotor in enumerate(rotors):
            g = coolest.get((joint, rotor))
            if g is None:
                lines.append(f"{joint}: every ratio studied is over the drive's peak")
            elif k == 0:
                lines.append(f"{joint}: least RMS current at ratio {g.ratio:g}: "
                             f"{g.rms_current:.2f} A, a motor giving "
                             f"{g.motor_rms_torque:.3f} N·m continuous")
            else:
                lines.append(f"{joint}: with a rotor of {rotor * 1e7:.0f} g·cm², least at "
                             f"ratio {g.ratio:g}: a motor giving {g.motor_rms_torque:.3f} N·m "
                             "continuous")
    return lines


def study(run_dirs: list | Runs, robot=None, ratios: list[float] = (), window=None,
          rotors: list[float] = ()) -> tuple[list[Regeared], dict[str, float]]:
    """:func:`regear` of run folders (their robot as ``exo-rt size`` finds it; ``window``:
    their cycles in [t0, t1] s), or of :class:`~exo_rt.record.sizing.Runs` read already;
    (the rows, each recorded joint's own ratio)."""
    runs = run_dirs if isinstance(run_dirs, Runs) else load_runs(run_dirs, robot, window)
    own = {tr.joint: tr.ratio for tr in runs.mech.transmissions if tr.joint in runs.names}
    return regear(runs, list(ratios), list(rotors)), own


def main(runs: Runs, ratios: list[float] = (), rotors: list[float] = ()) -> None:
    """``exo-rt size --ratio … --rotor …``: print the study after the sizing table."""
    print("\nthrough other ratios (the same gear size; the runs' motion and link torques; "
          "* the robot's own ratio; currents, voltage and verdict: the fitted motor's):")
    rows, own = study(runs, ratios=ratios, rotors=rotors)
    for line in table(rows, own) + summary(rows, own):
        print(line)
