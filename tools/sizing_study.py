"""What a wearer needs of each joint's drive (docs/sizing.md): sit-to-stand quasi-statically
from exo-rt's own masses, walking from exo-rt's gait reference and dynamics, beside the
published figures — for the default wearer (75 kg, 1.75 m) and a heavy one (100 kg, 1.90 m).

    python tools/sizing_study.py [--robot configs/robots/exo_2leg.yaml]

Sit-to-stand, quasi-static: both feet flat on the floor, the ankle fixed (the exoskeleton's
foot plate: the shank stays vertical), the body symmetric; a posture is the knee flexion k
and the pelvis's forward pitch p, the hip flexion h = p + k. The pitch is chosen so that the
whole body's centre of mass is over the mid-foot (balance). The joint torques per leg that
hold it are ½·∂V/∂h and ½·∂V/∂k (virtual work, V the potential energy of every body of the
robot file with its wearer, the upper body on the pelvis as the world has it): a rise from
k = 95° (a 0.45 m chair) to standing, the peak over it.

Walking at 0.4 and 0.8 m/s: the gait reference at the wearer's cadence (walk ratio, docs/
config-wearer.md) gives the joints' speeds; the swing leg's torque is exo-rt's inverse
dynamics of the hanging leg on that reference (rotors' reflected inertia included); the
stance moments are the normative peaks (gaitutils 0.13.9 normal.gcd, about 1.2 m/s: hip
1.19, knee 0.46 N·m/kg) times the body mass — an upper bound at these slower speeds.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exo_rt.control import flat_foot, gait_speed, trajectory  # noqa: E402
from exo_rt.control.config import rotor_inertias  # noqa: E402
from exo_rt.dynamics import Dynamics  # noqa: E402
from exo_rt.model import anthropometry, load_mechanism  # noqa: E402
from exo_rt.sim.world.scene import UPPER_BODY_COM_HEIGHT  # noqa: E402

WEARERS = {"default": (75.0, 1.75), "heavy": (100.0, 1.90)}
YOSHIOKA = 1.53  # N·m/kg, hip + knee per leg at the peak of sit-to-stand (Yoshioka et al. 2007)
WALK_MOMENT = {"hip": 1.19, "knee": 0.46}  # N·m/kg, normative peaks (gaitutils normal.gcd)
SEAT_KNEE = math.radians(95.0)  # rad: knee flexion sitting on a 0.45 m chair (shank vertical)
MID_FOOT = 0.065  # m ahead of the ankle: the middle of the sole (−0.06 … 0.19 m)


def with_wearer(robot: Path, mass: float, height: float) -> Path:
    """A copy of ``robot`` with the wearer's mass and height (includes made absolute)."""
    import yaml

    doc = yaml.safe_load(robot.read_text())
    doc["wearer"]["mass"], doc["wearer"]["height"] = mass, height
    for inc in doc.get("include", ()):
        inc["file"] = str((robot.parent / inc["file"]).resolve())
    out = Path(tempfile.mkdtemp()) / robot.name
    out.write_text(yaml.safe_dump(doc))
    return out


def _rot(a: float) -> np.ndarray:
    """Rotation about +y by a (rad) in the sagittal (x, z) plane."""
    return np.array([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])


def bodies(mech, mass: float, height: float, sex: str = "male"):
    """(name, mass kg, COM (x, z) in its frame, frame) of each body, sagittal: 'pelvis' (with
    the wearer's upper body and the hip rotors), a leg's 'thigh' (with the knee rotor) and
    'shank' (with the foot); one leg's bodies (the other is the same)."""
    out = []
    for i, name in enumerate(mech.body_names):
        m, c = float(mech.mass[i]), np.asarray(mech.com[i], float)
        if name.startswith("right_"):
            continue
        frame = ("pelvis" if name == "pelvis" or name.endswith("hip_rotor") else
                 "thigh" if name.endswith("thigh") or name.endswith("knee_rotor") else "shank")
        out.append((name, m, np.array([c[0], c[2]]), frame))
    upper = anthropometry.upper_body_fraction(sex) * mass
    out.append(("upper_body", upper, np.array([0.0, UPPER_BODY_COM_HEIGHT * height]),
                "pelvis"))
    return out


def potential(parts, h: float, k: float, thigh: float, shank: float, g: float = 9.81):
    """(V J, COM x m) of the symmetric body, ankle at the origin, shank vertical."""
    p = h - k  # the pelvis's forward pitch
    knee = np.array([0.0, shank])
    hip = knee - _rot(-k) @ np.array([0.0, -thigh])  # thigh turned by −k about +y
    frames = {"pelvis": (hip, _rot(p)), "thigh": (hip, _rot(-k)),
              "shank": (knee, _rot(0.0))}
    v, mx, mt = 0.0, 0.0, 0.0
    for name, m, c, frame in parts:
        o, r = frames[frame]
        x = o + r @ c
        w = m if frame == "pelvis" and name in ("pelvis", "upper_body") else 2.0 * m
        if name.endswith("hip_rotor"):
            w = 2.0 * m  # the right hip's rotor is the left's mirror image
        v += w * g * x[1]
        mx += w * x[0]
        mt += w
    return v, mx / mt


def sit_to_stand(parts, thigh: float, shank: float):
    """Peak hip and knee torque per leg (N·m, extension negative) over the rise, and where."""
    best = {"hip": (0.0, 0.0), "knee": (0.0, 0.0)}
    for k in np.linspace(SEAT_KNEE, 0.0, 96):
        lo, hi = -1.0, 1.5  # the pitch that puts the COM over the mid-foot (bisection)
        for _ in range(60):
            p = 0.5 * (lo + hi)
            if potential(parts, p + k, k, thigh, shank)[1] < MID_FOOT:
                lo = p
            else:
                hi = p
        h, e = p + k, 1e-6
        tau_h = 0.5 * (potential(parts, h + e, k, thigh, shank)[0]
                       - potential(parts, h - e, k, thigh, shank)[0]) / (2 * e)
        tau_k = 0.5 * (potential(parts, h, k + e, thigh, shank)[0]
                       - potential(parts, h, k - e, thigh, shank)[0]) / (2 * e)
        for j, tau in (("hip", tau_h), ("knee", tau_k)):
            if abs(tau) > abs(best[j][0]):
                best[j] = (tau, math.degrees(k))
    return best


def walking(leg_robot: Path, mass: float, height: float, speed: float):
    """(peak |q̇| hip, knee rad/s; peak |τ| of the swinging leg hip, knee N·m) at ``speed``."""
    mech = load_mechanism(with_wearer(leg_robot, mass, height))
    thigh, shank = gait_speed.leg_lengths(mech)
    w = gait_speed.walk(speed, height, thigh, shank)
    coeffs = trajectory.gait_coefficients(["hip", "knee"], ["hip", "knee"], w.amplitude)
    dyn = Dynamics(mech)
    q, qd, qdd = np.zeros(2), np.zeros(2), np.zeros(2)
    speeds, torques = np.zeros(2), np.zeros(2)
    for phase in np.linspace(0.0, 1.0, 400, endpoint=False):
        trajectory.gait(phase, w.period, coeffs, q, qd, qdd)
        speeds = np.maximum(speeds, np.abs(qd))
        if phase >= 0.6:  # swing: the leg hangs from the hip (stance: the normative moments)
            torques = np.maximum(torques, np.abs(dyn.inverse_dynamics(q, qd, qdd)))
    return speeds, torques, w


def flat_foot_walk(sized: Path, height: float, speed: float):
    """The flat-foot gait (the world's walk) at ``speed``: per joint (hip, knee) the peak
    |q̇| (rad/s), peak |q̈| and RMS q̈ (rad/s²) over a stride, the largest ratio at which
    ``sized``'s motor reaches that speed on its supply with no current left (V/(k_M·q̇)),
    and the motor's RMS torque its rotor alone asks at the fitted ratio, J·N·q̈_RMS (N·m)."""
    mech = load_mechanism(sized)
    thigh, shank = gait_speed.leg_lengths(mech, "left_")
    w = flat_foot.walk(speed, height)
    rows = flat_foot.leg_rows(w.stride_length, thigh, shank)
    coeffs = np.stack([rows["hip"], rows["knee"]])
    q, qd, qdd = np.zeros(2), np.zeros(2), np.zeros(2)
    phases = np.arange(2000) / 2000
    speeds, accels = np.zeros((len(phases), 2)), np.zeros((len(phases), 2))
    for i, phase in enumerate(phases):
        trajectory.gait(phase, w.period, coeffs, q, qd, qdd)
        speeds[i], accels[i] = qd, qdd
    tr = next(t for t in mech.transmissions if t.joint == "left_knee")
    rotor = rotor_inertias(mech)[mech.joint_index("left_knee")] / tr.ratio ** 2
    peak_qd = np.max(np.abs(speeds), axis=0)
    rms_qdd = np.sqrt(np.mean(accels ** 2, axis=0))
    return (w, peak_qd, np.max(np.abs(accels), axis=0), rms_qdd,
            tr.motor.voltage / (tr.motor.torque_constant * peak_qd),
            rotor * tr.ratio * rms_qdd, tr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default=str(ROOT / "configs/robots/exo_2leg.yaml"))
    ap.add_argument("--leg", default=str(ROOT / "configs/robots/exo_leg.yaml"),
                    help="the one-leg robot file for the swing leg's dynamics")
    ap.add_argument("--sized", default=str(ROOT / "configs/robots/exo_2leg_sized.yaml"),
                    help="the robot file whose motors the flat-foot walk is held against")
    args = ap.parse_args()
    robot, leg = Path(args.robot), Path(args.leg)
    for who, (mass, height) in WEARERS.items():
        mech = load_mechanism(with_wearer(robot, mass, height))
        thigh, shank = gait_speed.leg_lengths(mech, "left_")
        parts = bodies(mech, mass, height)
        total = sum(m * (1 if f == "pelvis" and n in ("pelvis", "upper_body") else 2)
                    for n, m, _, f in parts)
        sts = sit_to_stand(parts, thigh, shank)
        print(f"{who}: {mass:g} kg, {height:g} m; robot with wearer and upper body "
              f"{total:.1f} kg")
        for j in ("hip", "knee"):
            tau, at = sts[j]
            print(f"  sit-to-stand, quasi-static: {j} {abs(tau):.1f} N·m per leg "
                  f"({abs(tau) / mass:.2f} N·m/kg) at knee {at:.0f}°")
        s = abs(sts["hip"][0]) + abs(sts["knee"][0])
        print(f"  sit-to-stand hip + knee: {s:.1f} N·m per leg ({s / mass:.2f} N·m/kg); "
              f"Yoshioka et al. 2007: {YOSHIOKA} N·m/kg = {YOSHIOKA * mass:.1f} N·m")
        for speed in (0.4, 0.8):
            qd, tau, w = walking(leg, mass, height, speed)
            print(f"  walking {speed} m/s (stride {w.period:.2f} s, amplitude "
                  f"{w.amplitude:.2f}): peak speed hip {qd[0]:.2f}, knee {qd[1]:.2f} rad/s; "
                  f"swing torque hip {tau[0]:.1f}, knee {tau[1]:.1f} N·m; stance (normative) "
                  f"hip {WALK_MOMENT['hip'] * mass:.1f}, knee {WALK_MOMENT['knee'] * mass:.1f}"
                  " N·m")
    for speed in (0.4, 0.8):  # the world's walk: its shape is the stride's, not the wearer's
        w, qd, qdd, rms, n_max, rotor, tr = flat_foot_walk(Path(args.sized), 1.75, speed)
        m = tr.motor
        print(f"flat-foot gait {speed} m/s (stride {w.stride_length:.3f} m, {w.period:.2f} s)")
        for j, name in enumerate(("hip", "knee")):
            print(f"  {name}: peak speed {qd[j]:.2f} rad/s, peak acceleration {qdd[j]:.1f} "
                  f"rad/s² (RMS {rms[j]:.1f}); {m.name}: ratio ≤ {n_max[j]:.0f} at "
                  f"{m.voltage:g} V, its rotor alone {rotor[j]:.2f} N·m RMS at {tr.ratio:g}:1 "
                  f"(continuous {m.torque_constant * m.rated_current:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
