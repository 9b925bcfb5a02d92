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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from exo_rt.model.mechanism import Mechanism
from exo_rt.record.sizing import AT_PEAK

SMOOTH = 5  # cycles each side: q̈ is the central difference of q̇ over 2·SMOOTH + 1 samples


@dataclass
class Regeared:
    """One joint's figures through one ratio (SI)."""

    joint: str
    ratio: float
    reflected: float  # kg·m²: N²·I_rotor
    rms_current: float  # A
    peak_current: float  # A
    motor_rms_torque: float  # N·m at the motor: k_M·i_RMS
    peak_motor_speed: float  # rad/s at the motor
    peak_voltage: float  # V: max of R·|i| + k_M·|ω_m| (the back-EMF and the winding's drop)
    verdict: str = "ok"
    reasons: list[str] = field(default_factory=list)


def acceleration(qd: np.ndarray, dt: float) -> np.ndarray:
    """q̈ (rad/s²) from the recorded speeds: the central difference over ±SMOOTH cycles (an
    encoder's speed differentiated over one cycle is mostly its quantisation)."""
    out = np.zeros_like(qd)
    h = SMOOTH
    if len(qd) > 2 * h:
        out[h:-h] = (qd[2 * h:] - qd[:-2 * h]) / (2 * h * dt)
        out[:h], out[-h:] = out[h], out[-h - 1]
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


def regear(runs: list[np.ndarray], names: list[str], mech: Mechanism, ratios: list[float],
           dt: float) -> list[Regeared]:
    """Every joint of ``names`` through every ratio of ``ratios`` and the robot's own, in
    ascending order, over the runs' records together (each run's q̈ its own)."""
    from exo_rt.control.config import rotor_inertias

    by_joint = {tr.joint: tr for tr in mech.transmissions}
    reflected = rotor_inertias(mech)
    out = []
    for j, name in enumerate(names):
        tr = by_joint[name]
        i_rotor = reflected[mech.joint_index(name)] / tr.ratio ** 2
        motions = []
        for records in runs:
            cur, qd = records["current"][:, j], records["qd"][:, j]
            ok = np.isfinite(cur) & np.isfinite(qd)
            cur, qd = cur[ok], qd[ok]
            qdd = acceleration(qd, dt)
            motions.append((link_torque(cur, qd, qdd, tr, i_rotor), qd, qdd))
        tau, qd, qdd = (np.concatenate(x) for x in zip(*motions, strict=True))
        m = tr.motor
        for n in sorted({tr.ratio, *ratios}):
            i = motor_current(tau, qd, qdd, tr, i_rotor, n)
            w = n * np.abs(qd)
            volts = m.resistance * np.abs(i) + m.torque_constant * w
            g = Regeared(name, n, n * n * i_rotor, float(np.sqrt(np.mean(i * i))),
                         float(np.max(np.abs(i))), 0.0, float(np.max(w)), float(np.max(volts)))
            g.motor_rms_torque = m.torque_constant * g.rms_current
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


def table(rows: list[Regeared], own: dict[str, float]) -> list[str]:
    """The lines ``exo-rt size --ratio`` prints: one row per joint and ratio (``own``: each
    joint's ratio in the robot file, marked *), then why a ratio is over its peak."""
    head = ("joint", "ratio", "J_r kg·m²", "RMS i A", "peak i A", "motor RMS τ N·m",
            "peak ω_m rad/s", "peak V", "verdict")
    body = []
    for g in rows:
        body.append((g.joint, f"{g.ratio:g}{'*' if own.get(g.joint) == g.ratio else ''}",
                     f"{g.reflected:.2f}",
                     f"{g.rms_current:.2f}", f"{g.peak_current:.1f}",
                     f"{g.motor_rms_torque:.3f}", f"{g.peak_motor_speed:.0f}",
                     f"{g.peak_voltage:.1f}", g.verdict))
    table_rows = [head, *body]
    widths = [max(len(r[c]) for r in table_rows) for c in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in table_rows]
    lines += [f"{g.joint} at {g.ratio:g}: {why}" for g in rows if g.verdict == "over peak"
              for why in g.reasons if not why.startswith("RMS")]
    return lines


def best(rows: list[Regeared]) -> dict[str, Regeared]:
    """Per joint, the ratio of the least RMS current (the coolest motor) among those not over
    their peak."""
    out: dict[str, Regeared] = {}
    for g in rows:
        if g.verdict == "over peak":
            continue
        if g.joint not in out or g.rms_current < out[g.joint].rms_current:
            out[g.joint] = g
    return out


def study(run_dirs: list, robot=None, ratios: list[float] = (), window=None
          ) -> tuple[list[Regeared], dict[str, float]]:
    """:func:`regear` of run folders (their robot as ``exo-rt size`` finds it; ``window``:
    their cycles in [t0, t1] s); (the rows, each recorded joint's own ratio)."""
    from exo_rt.record.sizing import load_runs, read_run

    runs, names, mech, _ = load_runs(run_dirs, robot, window)
    rate = float(read_run(run_dirs[0])[1].get("rate_hz") or 1000.0)
    own = {tr.joint: tr.ratio for tr in mech.transmissions if tr.joint in names}
    return regear(runs, names, mech, list(ratios), 1.0 / rate), own
