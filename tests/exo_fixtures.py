"""Hidalgo & Rocón's one-leg exoskeleton with compliant harmonic drives, built by hand for tests.

Frames: world = pelvis, x forward, y left, z up; q = 0 hangs the leg straight down. Hip flexion
> 0 swings the thigh forward (axis −y), knee flexion > 0 bends the shank back (axis +y), so
q = (0, π/2) holds the shank horizontal behind the knee.

Bodies (SI): exoskeleton links (thigh 0.43 m, 3.2 kg; shank 0.42 m, 1.8 kg; foot plate 0.6 kg)
with the wearer's segments lumped in — 75 kg male, de Leva (1996) Table 4: thigh 0.1416·75 =
10.6 kg, shank 0.0433·75 = 3.25 kg, foot 0.0137·75 = 1.03 kg, COM and radii of gyration as
fractions of the exoskeleton link lengths (:mod:`exo_rt.model.anthropometry`).

Drives: both joints through CSF-20-100-style harmonic drives (HD LLC catalogue), N = 100
(z_rotor = −100·q_joint, Hidalgo & Rocón eq. 23): K1/K2/K3 = 1.6/2.5/2.9·10⁴ N·m/rad,
T1/T2 = 7/25 N·m (K unverified: docs/references.md), hysteresis half-width 0.4 N·m (an
assumption: the catalogue's hysteresis-loss table was not read). Rotor = wave generator 0.193e-4 +
maxon EC 45 flat 70 W rotor 0.181e-4 = 0.374e-4 kg·m² about its axis (0.35 kg), on the
circular spline's link: the pelvis (hip) and the thigh (knee). Motor: k_M 0.0404 N·m/A (24 V
winding), I_nom 3.29 A, R 0.573 Ω, L 0.301 mH, the drive's peak 20 A, 1 kHz current loop.

Wave-generator friction: breakaway T_s = 0.08 N·m, Coulomb 0.03 N·m, viscous 1.5e-4 N·m·s/rad,
Stribeck 0.5 rad/s, and a load-dependent mesh friction μ·|T|/N with μ = 0.6 (forward efficiency
≈ 1/(1+μ) = 63 %, backward 1−μ = 40 %, inside the catalogue's 60–80 % forward). What this implies at
the output — honestly compared with the catalogue's "backdriving torque: several N·m":

- unloaded, the output breaks the rotor loose at N·T_s = 8 N·m: "several N·m", as listed;
- under load the mesh friction grows with the torque, so an output torque T back-drives the
  rotor only when T/N > T_s + μ·T/N, i.e. T > N·T_s/(1−μ) = 20 N·m.

The shank horizontal (q = (0, π/2)) loads the knee (and the hip) with about 16 N·m of gravity:
above the unloaded figure — a drive with only its no-load friction *would* be back-driven —
but below the loaded 20 N·m threshold, so the leg holds at zero current (Hidalgo & Rocón §3). The
non-back-drivability of this model therefore rests on the load-dependent friction, whose μ is
an assumption to be identified on the bench (docs/bench.md), like the K's.
"""

from __future__ import annotations

import numpy as np

from exo_rt.model.anthropometry import segment, segment_link
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism
from exo_rt.model.transmission import HarmonicDrive, Motor, Transmission

RATIO = 100.0
THIGH_LENGTH = 0.43  # m, hip axis → knee axis
SHANK_LENGTH = 0.42  # m, knee axis → ankle
LATERAL = np.array([0.0, 1.0, 0.0])
ROTOR_MASS = 0.35  # kg: wave generator + motor rotor
ROTOR_AXIAL = 0.193e-4 + 0.181e-4  # kg·m²: CSF-20 WG + EC 45 flat rotor (181 g·cm²)
ROTOR_TRANSVERSE = 2.3e-5  # kg·m²


def csf20_100(*, friction: bool = True, hysteresis: bool = True,
              kinematic_error: tuple = ()) -> HarmonicDrive:
    """The CSF-20-100-style drive described in the module docstring."""
    dry = dict(coulomb=0.03, static=0.08, viscous=1.5e-4, load_friction=0.6) if friction else {}
    return HarmonicDrive(ratio=RATIO, k1=1.6e4, k2=2.5e4, k3=2.9e4, t1=7.0, t2=25.0,
                         hysteresis=0.4 if hysteresis else 0.0, stribeck_velocity=0.5,
                         efficiency=0.7, kinematic_error=tuple(kinematic_error), **dry)


EC45_FLAT_70W_24V = Motor(torque_constant=0.0404, rated_current=3.29, peak_current=20.0,
                          resistance=0.573, inductance=0.301e-3, voltage=24.0,
                          current_bandwidth_hz=1000.0, name="maxon EC 45 flat 70 W 24 V")


def _link(name, mass, com, diag) -> LinkSpec:
    return LinkSpec(name, mass, np.array(com, float), np.diag(np.array(diag, float)))


def _fixed(name, parent, child, xyz=(0.0, 0.0, 0.0)) -> JointSpec:
    return JointSpec(name, "fixed", parent, child, origin_xyz=np.array(xyz, float))


def _wearer(name: str, body: str, proximal, distal) -> tuple[LinkSpec, JointSpec]:
    """de Leva's segment of a 75 kg, 1.75 m man on ``body`` (lumped in by a fixed joint)."""
    length = float(np.linalg.norm(np.subtract(distal, proximal)))
    link = segment_link(segment(name, 75.0, 1.75, "male", length), body, proximal, distal,
                        LATERAL)
    return link, _fixed(f"{link.name}_mount", body, link.name)


def exo_leg_with_drives(friction: bool = True, hysteresis: bool = True, *, drives: bool = True,
                        kinematic_error: tuple = ()) -> Mechanism:
    """Hidalgo & Rocón's leg (pelvis fixed, hip and knee) with the wearer and two harmonic drives.

    ``drives=False`` gives the same bodies and masses with ordinary revolute pairs: each rotor
    is fixed to its link instead of turning, and there are no transmissions.
    """
    links = [
        _link("pelvis", 6.0, (-0.05, 0.0, 0.05), (0.06, 0.05, 0.06)),
        _link("thigh", 3.2, (0.0, 0.0, -0.22), (0.049, 0.049, 0.004)),
        _link("shank", 1.8, (0.0, 0.0, -0.17), (0.026, 0.026, 0.002)),
        _link("foot", 0.6, (0.05, 0.0, -0.05), (0.001, 0.002, 0.002)),
    ]
    joints = [
        JointSpec("hip", "revolute", "pelvis", "thigh", axis=np.array([0.0, -1.0, 0.0])),
        JointSpec("knee", "revolute", "thigh", "shank", origin_xyz=np.array([0, 0, -THIGH_LENGTH]),
                  axis=np.array([0.0, 1.0, 0.0])),
        _fixed("ankle", "shank", "foot", (0.0, 0.0, -SHANK_LENGTH)),
    ]
    for seg, body, prox, dist in (
        ("thigh", "thigh", (0, 0, 0), (0, 0, -THIGH_LENGTH)),
        ("shank", "shank", (0, 0, 0), (0, 0, -SHANK_LENGTH)),
        ("foot", "foot", (-0.06, 0.0, -0.07), (0.19, 0.0, -0.07)),
    ):
        link, mount = _wearer(seg, body, prox, dist)
        links.append(link)
        joints.append(mount)
    transmissions = []
    # (joint, circular-spline link, rotor position on it, joint axis)
    for joint, parent, xyz, axis in (("hip", "pelvis", (0.0, 0.09, 0.0), (0.0, -1.0, 0.0)),
                                     ("knee", "thigh", (0.0, 0.08, -THIGH_LENGTH), LATERAL)):
        rotor = f"{joint}_rotor"
        links.append(_link(rotor, ROTOR_MASS, (0, 0, 0),
                           np.abs(np.array(axis)) * (ROTOR_AXIAL - ROTOR_TRANSVERSE)
                           + ROTOR_TRANSVERSE))
        if not drives:
            joints.append(_fixed(f"{rotor}_joint", parent, rotor, xyz))
            continue
        joints.append(JointSpec(f"{rotor}_joint", "continuous", parent, rotor,
                                origin_xyz=np.array(xyz, float), axis=np.array(axis, float),
                                mimic=(joint, -RATIO, 0.0)))
        drive = csf20_100(friction=friction, hysteresis=hysteresis,
                          kinematic_error=kinematic_error)
        transmissions.append(Transmission(joint, f"{rotor}_joint", rotor, -RATIO, drive,
                                          EC45_FLAT_70W_24V))
    name = "exo_leg_fixture" if drives else "exo_leg_fixture_rigid_pairs"
    return build_mechanism(name, links, joints, np.array([0.0, 0.0, -9.81]),
                           "tests/exo_fixtures.py", base="pelvis",
                           transmissions=tuple(transmissions))
