"""Robot files (``configs/robots/*.yaml``): an open tree of rigid bodies in URDF conventions
(or a URDF file), closed by loops, with what URDF cannot say — harmonic-drive transmissions
and motors, modules, the wearer, settings (docs/config-robot.md). SI units everywhere.

This declares each mapping's keys; :mod:`exo_rt.model.robot_yaml` turns the file into the
loader-neutral specs and :func:`exo_rt.model.topology.build_mechanism` checks the physics
and topology that span keys (names that must exist, unit axes, trees, closures).
"""

from __future__ import annotations

import math

from exo_rt.schema.core import (
    REQUIRED,
    AnyOf,
    Choice,
    Flag,
    ListOf,
    MapOf,
    Name,
    Num,
    Sub,
    Vec,
    key,
    section,
)
from exo_rt.schema.wearer import HEIGHT_RANGE, MASS_RANGE, Speed

NUMBER = Num()
RATING_FIX = "give the catalogue's value (> 0, SI), or leave the key out when it is not known"
SAFE_REACTIONS = ("none", "brake", "friction", "short_circuit")
MASS = Num(ge=0)
MAGNITUDE = Num(ge=0, inf=True)
ZERO = (0.0, 0.0, 0.0)
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")  # URDF's, less floating, planar


@section("origin")
class Origin:
    """A frame in its parent's frame: translation, then roll-pitch-yaw about fixed x, y, z."""

    xyz: tuple = key(Vec(3), ZERO, unit="m", doc="translation")
    rpy: tuple = key(Vec(3), ZERO, unit="rad", doc="roll, pitch, yaw about fixed x, y, z")


@section("inertia")
class Inertia:
    """The inertia tensor about the COM, in the body's frame (omitted components are 0)."""

    ixx: float = key(NUMBER, 0.0, unit="kg·m²", doc="moment about x")
    iyy: float = key(NUMBER, 0.0, unit="kg·m²", doc="moment about y")
    izz: float = key(NUMBER, 0.0, unit="kg·m²", doc="moment about z")
    ixy: float = key(NUMBER, 0.0, unit="kg·m²", doc="product of inertia xy (as URDF)")
    ixz: float = key(NUMBER, 0.0, unit="kg·m²", doc="product of inertia xz")
    iyz: float = key(NUMBER, 0.0, unit="kg·m²", doc="product of inertia yz")


@section("a body")
class Body:
    """A rigid body (a URDF link); no inertial data: a massless frame."""

    name: str = key(Name(), REQUIRED, doc="unique name")
    mass: float = key(MASS, 0.0, unit="kg", doc="mass of the rigid part")
    com: tuple = key(Vec(3), ZERO, unit="m", doc="centre of mass, body frame")
    inertia: Inertia = key(Sub(Inertia), Inertia(), doc="about the COM, body frame; "
                           "symmetric positive semidefinite, triangle inequality")
    point_masses: tuple = key(ListOf(Vec(4)), (), unit="kg, m",
                              doc="lumped masses [m, x, y, z] added to the rigid part")


@section("limit")
class Limit:
    """A joint's limits (SI: rad, rad/s, N·m for rotary joints; m, m/s, N for prismatic)."""

    lower: float = key(Num(inf=True), -math.inf, unit="rad or m", shown="none",
                       doc="lower position limit (not for continuous joints)")
    upper: float = key(Num(inf=True), math.inf, unit="rad or m", shown="none",
                       doc="upper position limit (not for continuous joints)")
    velocity: float = key(MAGNITUDE, math.inf, unit="rad/s or m/s", shown="none",
                          doc="speed limit", fix="limits on speed and effort are magnitudes")
    effort: float = key(MAGNITUDE, math.inf, unit="N·m or N", shown="none",
                        doc="torque or force limit",
                        fix="limits on speed and effort are magnitudes")


@section("mimic")
class Mimic:
    """A dependent coordinate: q = multiplier · q_joint + offset (not in q)."""

    joint: str = key(Name(), REQUIRED, doc="the joint it follows")
    multiplier: float = key(NUMBER, 1.0, doc="finite, non-zero")
    offset: float = key(NUMBER, 0.0, unit="rad or m", doc="offset")


@section("a joint")
class Joint:
    """A joint between a parent and a child body, in URDF conventions."""

    name: str = key(Name(), REQUIRED, doc="unique name")
    type: str = key(Choice(JOINT_TYPES, "type"), REQUIRED,
                    doc="`fixed` merges the child into the parent")
    parent: str = key(Name(), REQUIRED, doc="the parent body")
    child: str = key(Name(), REQUIRED, doc="the child body")
    origin: Origin = key(Sub(Origin), Origin(), doc="the joint frame in the parent's frame")
    axis: tuple = key(Vec(3), (1.0, 0.0, 0.0), doc="unit vector in the joint frame (ignored "
                                                   "for fixed joints)")
    limit: Limit = key(Sub(Limit), Limit(), doc="omitted keys: no limit (`.inf` allowed)")
    mimic: Mimic = key(Sub(Mimic), None, shown="—", doc="makes the joint dependent")


@section("rotor")
class Rotor:
    """The wave generator with the motor rotor: a body on the output joint's parent link."""

    name: str = key(Name(), "", shown="<joint>_rotor", doc="the rotor body (its joint: "
                                                           "<name>_joint)")
    mass: float = key(MASS, REQUIRED, unit="kg", doc="mass")
    inertia: Inertia = key(Sub(Inertia), REQUIRED, doc="about its COM")
    com: tuple = key(Vec(3), ZERO, unit="m", doc="centre of mass, rotor frame")
    origin: Origin = key(Sub(Origin), Origin(), doc="in the parent link's frame")
    axis: tuple = key(Vec(3), (0.0, 0.0, 1.0), doc="rotation axis, rotor frame")


@section("drive")
class Drive:
    """Plant parameters of a harmonic drive (catalogue values; output side unless noted)."""

    catalogue: str = key(Name(), "", shown="", doc="free text, for people (e.g. CSF-20-100)")
    k1: float = key(MAGNITUDE, math.inf, unit="N·m/rad", shown="∞ (rigid)",
                    doc="stiffness below t1")
    k2: float = key(MAGNITUDE, math.inf, unit="N·m/rad", doc="stiffness between t1 and t2")
    k3: float = key(MAGNITUDE, math.inf, unit="N·m/rad (cubic: N·m/rad³)",
                    doc="stiffness above t2 (or the cubic coefficient)")
    t1: float = key(MAGNITUDE, math.inf, unit="N·m", doc="first knee of the stiffness curve")
    t2: float = key(MAGNITUDE, math.inf, unit="N·m", doc="second knee of the stiffness curve")
    cubic: bool = key(Flag(), False, doc="T = k1·Δ + k3·Δ³ instead of the piecewise curve")
    hysteresis: float = key(MAGNITUDE, 0.0, unit="N·m", doc="half-width of the torque–twist "
                                                            "loop")
    coulomb: float = key(MAGNITUDE, 0.0, unit="N·m", doc="Coulomb friction at the wave "
                                                         "generator")
    static: float = key(MAGNITUDE, 0.0, unit="N·m", doc="breakaway friction at the wave "
                                                        "generator")
    viscous: float = key(MAGNITUDE, 0.0, unit="N·m·s/rad", doc="viscous friction at the wave "
                                                               "generator")
    stribeck_velocity: float = key(MAGNITUDE, 0.1, unit="rad/s",
                                   doc="Stribeck velocity at the wave generator")
    load_friction: float = key(MAGNITUDE, 0.0, doc="μ: extra wave-generator friction μ·\\|T\\|/N "
                                                   "under load")
    efficiency: float = key(MAGNITUDE, 1.0, doc="forward efficiency assumed by torque → "
                                                "current")
    kinematic_error: tuple = key(ListOf(Vec(2)), (), unit="rad, rad",
                                 doc="[amplitude, phase] harmonics of 2·θ_WG added to the twist")
    # the catalogue's ratings (output side; `exo-rt size` compares a run against them)
    rated_torque: float = key(Num(gt=0), None, unit="N·m", shown="—",
                              what="drive rated_torque", fix=RATING_FIX,
                              doc="rated torque (at 2000 r/min input: the catalogue's "
                                  "continuous rating)")
    peak_torque: float = key(Num(gt=0), None, unit="N·m", shown="—",
                             what="drive peak_torque", fix=RATING_FIX,
                             doc="limit for repeated peak torque (starting and stopping)")
    momentary_torque: float = key(Num(gt=0), None, unit="N·m", shown="—",
                                  what="drive momentary_torque", fix=RATING_FIX,
                                  doc="limit for momentary peak torque (a collision, an "
                                      "emergency stop; a limited number of times)")
    max_input_speed: float = key(Num(gt=0), None, unit="rad/s", shown="—",
                                 what="drive max_input_speed", fix=RATING_FIX,
                                 doc="largest input (wave generator) speed: the catalogue's "
                                     "r/min × 2π/60")


@section("thermal", result=True)
class MotorThermal:
    """The motor's thermal catalogue data (the two-node winding model of
    :mod:`exo_rt.actuators.thermal`, docs/assistance.md). The defaults are the maxon EC 45 flat
    ∅43.5 mm 70 W (maxon catalogue, p. 324, lines 17–22)."""

    resistance_winding_housing: float = key(
        Num(gt=0), 6.64, unit="K/W", doc="thermal resistance winding–housing R_wh (line 18)")
    resistance_housing_ambient: float = key(
        Num(gt=0), 2.55, unit="K/W", doc="thermal resistance housing–ambient R_ha (line 17)")
    time_constant_winding: float = key(
        Num(gt=0), 43.1, unit="s", doc="thermal time constant of the winding τ_w (line 19)")
    time_constant_motor: float = key(
        Num(gt=0), 127.0, unit="s", doc="thermal time constant of the motor τ_m (line 20)")
    max_winding_temperature: float = key(
        Num(gt=0), 125.0, unit="°C", doc="maximum winding temperature (line 22): the top "
                                         "config's `safety.thermal.limit` stays below it")


@section("motor")
class Motor:
    """A brushless DC motor and its drive's current loop (catalogue values)."""

    name: str = key(Name(), "", shown="", doc="free text, for people")
    torque_constant: float = key(Num(gt=0), REQUIRED, unit="N·m/A", doc="k_M")
    rated_current: float = key(Num(gt=0), REQUIRED, unit="A", doc="continuous current")
    peak_current: float = key(Num(gt=0), REQUIRED, unit="A",
                              doc="the drive's limit (also clamped in the frame encoder)")
    resistance: float = key(MAGNITUDE, 0.0, unit="Ω", doc="terminal resistance")
    inductance: float = key(MAGNITUDE, 0.0, unit="H", doc="terminal inductance")
    voltage: float = key(Num(gt=0, inf=True), math.inf, unit="V", shown="∞",
                         doc="supply voltage (limits the current at speed)")
    current_bandwidth_hz: float = key(Num(gt=0, inf=True), 1000.0, unit="Hz",
                                      doc="drive current loop (first-order lag)")
    rated_speed: float = key(Num(gt=0), None, unit="rad/s", shown="—",
                             what="motor rated_speed", fix=RATING_FIX,
                             doc="nominal speed at the nominal voltage and current (the data "
                                 "sheet's r/min × 2π/60)")
    max_speed: float = key(Num(gt=0), None, unit="rad/s", shown="—",
                           what="motor max_speed", fix=RATING_FIX,
                           doc="largest permissible speed (the data sheet's limit, r/min × "
                               "2π/60)")
    brake_torque: float = key(Num(ge=0), 0.0, unit="N·m",
                              fix="write the brake's holding torque (N·m at the motor shaft, "
                                  "≥ 0; 0: no brake)",
                              doc="power-off holding brake at the motor shaft (0: none)")
    thermal: MotorThermal = key(Sub(MotorThermal), None, shown="EC 45 flat 70 W's",
                                doc="thermal catalogue data of the winding temperature model "
                                    "(docs/assistance.md); omitted: the defaults below")


@section("a transmission")
class Transmission:
    """A harmonic drive and its motor on an output joint."""

    joint: str = key(Name(), REQUIRED, doc="the output joint")
    type: str = key(Choice(("harmonic_drive",), "transmission type"), "harmonic_drive",
                    fix="use harmonic_drive (a gear is a harmonic drive without compliance)",
                    doc="the only kind")
    ratio: float = key(Num(ge=1), REQUIRED, doc="reduction N",
                       fix="a harmonic drive reduces speed: ratio N ≥ 1 (e.g. 100)")
    direction: float = key(NUMBER, -1.0, doc="z_rotor = direction·N·q_joint; −1: circular "
                                             "spline on the parent link, flexspline on the "
                                             "output")
    rotor: Rotor = key(Sub(Rotor), None, shown="—", doc="the rotor body, added here (or "
                                                        "`rotor_joint`)")
    rotor_joint: str = key(Name(), None, shown="—", doc="with `urdf:`: the URDF's mimic "
                                                        "joint of the rotor (or `rotor`)")
    drive: Drive = key(Sub(Drive), Drive(), doc="the drive's plant parameters")
    motor: Motor = key(Sub(Motor), REQUIRED, doc="the motor")
    motor_sign: float = key(NUMBER, 1.0, doc="+1 if positive current turns the rotor in "
                                             "+z_rotor")
    safe_reaction: str = key(Choice(SAFE_REACTIONS, "safe reaction"), "none",
                             fix="use one of " + ", ".join(SAFE_REACTIONS) + " (docs/safety.md)",
                             doc="what holds the joint once SAFE has disabled its drive: "
                                 "`brake` (the motor's power-off brake), `friction` (the "
                                 "gear's own, not back-drivable), `short_circuit` (the drive "
                                 "shorts the motor's phases: damping k_M²·ω/R); `none`: "
                                 "nothing declared")


@section("a loop")
class Loop:
    """A loop closure between two bodies: their points coincide (and, revolute, the axis
    stays aligned)."""

    name: str = key(Name(), REQUIRED, doc="unique name")
    type: str = key(Choice(("revolute", "point"), "loop type"), "revolute",
                    doc="`revolute` (point + axis, 5 equations) or `point` (3)")
    body_a: str = key(Name(), REQUIRED, doc="first body")
    point_a: tuple = key(Vec(3), REQUIRED, unit="m", doc="in body_a's frame")
    body_b: str = key(Name(), REQUIRED, doc="second body")
    point_b: tuple = key(Vec(3), REQUIRED, unit="m", doc="in body_b's frame")
    axis: tuple = key(Vec(3), (0.0, 0.0, 1.0), doc="revolute: the axis in body_a's frame")


@section("an include")
class Include:
    """A module (another robot file) mounted on a body of this one."""

    file: str = key(Name(), REQUIRED, doc="the module's robot file, relative to this file")
    mount: str = key(Name(), REQUIRED, doc="the body the module's base is fixed to")
    origin: Origin = key(Sub(Origin), Origin(), doc="the module's base frame in the mount's")
    prefix: str = key(Name(), "", shown="", doc="prepended to every body, joint and loop name "
                                                "of the module")


@section("a wearer segment")
class Segment:
    """One of the wearer's segments, strapped rigidly to an exoskeleton body."""

    segment: str = key(Name(), REQUIRED, doc="de Leva segment (thigh, shank, foot, …)")
    body: str = key(Name(), REQUIRED, doc="the exoskeleton body it is strapped to")
    proximal: tuple = key(Vec(3), ZERO, unit="m", doc="proximal end, body frame")
    distal: object = key(AnyOf((Name(), Vec(3))), REQUIRED, unit="m",
                         doc="distal end: a child joint of the body, or a point")
    lateral: tuple = key(Vec(3), (0.0, 1.0, 0.0), doc="the flexion axis, body frame")
    mass: float = key(Num(gt=0), None, unit="kg", shown="de Leva's", what="wearer segment mass",
                      fix="give a mass > 0 kg and a com_fraction in 0…1",
                      doc="identified mass (exo-rt bench-test inertia)")
    com_fraction: float = key(Num(ge=0, le=1), None, shown="de Leva's",
                              what="wearer segment com_fraction",
                              fix="give a mass > 0 kg and a com_fraction in 0…1",
                              doc="identified COM, fraction of proximal → distal")


@section("wearer")
class Wearer:
    """The wearer: de Leva's (1996) segment tables scaled to the person."""

    mass: float = key(Num(ge=MASS_RANGE[0], le=MASS_RANGE[1]), REQUIRED, unit="kg",
                      what="wearer mass", fix="give the body mass in kilograms (e.g. 75)",
                      doc="body mass")
    height: float = key(Num(ge=HEIGHT_RANGE[0], le=HEIGHT_RANGE[1]), REQUIRED, unit="m",
                        what="wearer height", doc="body height",
                        fix="give the height in metres (e.g. 1.75); the de Leva tables are "
                            "for adults")
    sex: str = key(Choice(("male", "female"), "sex"), REQUIRED, doc="selects de Leva's table")
    segments: tuple = key(ListOf(Sub(Segment)), REQUIRED, doc="each strapped to a body")
    speed: Speed = key(Sub(Speed), None, shown="the wearer profile's",
                       doc="the walking speeds a run without --wearer allows (a wearer "
                           "profile's speed section): what this exoskeleton's drives follow")


@section("the robot file")
class RobotFile:
    """A robot: bodies and joints (or a URDF), transmissions, loops, modules, the wearer."""

    name: str = key(Name(), REQUIRED, doc="the robot's name")
    gravity: tuple = key(Vec(3), (0.0, 0.0, -9.81), unit="m/s²",
                         doc="in the world (= base) frame")
    base: str = key(Name(), None, shown="the body that is nobody's child",
                    doc="the root body (fixed to the world)")
    urdf: str = key(Name(), None, shown="—", doc="a URDF file, relative to this file (then "
                                                  "no `bodies`/`joints`)")
    bodies: tuple = key(ListOf(Sub(Body)), (), doc="the bodies (URDF links)")
    joints: tuple = key(ListOf(Sub(Joint)), (), doc="the joints; movable ones are q in this "
                                                     "order")
    transmissions: tuple = key(ListOf(Sub(Transmission)), (), doc="harmonic drives + motors")
    loops: tuple = key(ListOf(Sub(Loop)), (), doc="loop closures")
    independent: tuple = key(ListOf(Name()), (), shown="chosen by LU",
                             doc="the independent (actuated) coordinates of a closed chain")
    initial: dict = key(MapOf(NUMBER, "crank_joint: 1.2"), {}, unit="rad or m",
                        doc="{joint: value}: Newton start of the closed reference "
                            "configuration")
    include: tuple = key(ListOf(Sub(Include)), (), doc="modules mounted on a body")
    wearer: Wearer = key(Sub(Wearer), None, shown="—", doc="the wearer's segments")
    settings: dict = key(MapOf(NUMBER, "thigh_length: 0.03"), {}, unit="rad or m",
                         doc="{joint: value}: joints fixed at a wearer's setting")


SCHEMA = RobotFile
