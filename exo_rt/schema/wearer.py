"""Wearer profiles (``configs/wearers/*.yaml``, ``exo-rt run --wearer FILE``): the person in
the exoskeleton — body height and mass, ranges of motion, the walking speeds and step lengths
allowed, the crutch's speed presets, the assistance level per leg and postures that differ
from the activities file's (docs/config-wearer.md). What spans the robot (joint names, ranges
inside its limits, strides its legs reach) is checked by :mod:`exo_rt.session.wearer`.
:class:`Range`, :class:`Speed`, :class:`StepLength` and :class:`Assistance` are both the
schema of their sections and what :class:`exo_rt.session.wearer.Wearer` holds."""

from __future__ import annotations

from exo_rt.schema.core import (
    REQUIRED,
    Choice,
    ListOf,
    MapOf,
    Name,
    Num,
    Sub,
    key,
    section,
)

# the statures and masses the anthropometric tables hold for (exo_rt.model.anthropometry, de
# Leva 1996: adults)
HEIGHT_RANGE = (1.2, 2.2)  # m
MASS_RANGE = (30.0, 200.0)  # kg
SPEED = Num(gt=0, le=3.0)  # m/s: walking (a person runs above ≈ 2.5 m/s)
LEVEL = Num(ge=0, le=1)
ROLES = ("passive", "leading")  # who moves the legs in a simulated world


@section("a range of motion", result=True)
class Range:
    """A joint's range of motion (rad, flexion > 0): the wearer's, inside the robot's
    limits."""

    lower: float = key(Num(), REQUIRED, unit="rad", doc="the least angle (extension)")
    upper: float = key(Num(), REQUIRED, unit="rad", doc="the largest angle (flexion)")


@section("speed", result=True)
class Speed:
    """The walking speeds the wearer may be asked for (SPEED requests, the MODE button)."""

    min: float = key(SPEED, 0.2, unit="m/s", doc="the slowest speed")
    max: float = key(SPEED, 0.6, unit="m/s", doc="the fastest speed")
    default: float = key(SPEED, 0.4, unit="m/s", doc="the speed a walk starts at")
    presets: tuple = key(ListOf(SPEED), (0.3, 0.4, 0.5), unit="m/s",
                         doc="the speeds the crutch's MODE button cycles through, in order "
                             "(within min … max)")


@section("step_length", result=True)
class StepLength:
    """The step lengths allowed (STEP_LENGTH requests; the walk ratio's steps at every speed
    of the range must lie within)."""

    min: float = key(Num(gt=0, le=1.5), 0.25, unit="m", doc="the shortest step")
    max: float = key(Num(gt=0, le=1.5), 0.6, unit="m", doc="the longest step")


@section("assistance", result=True)
class Assistance:
    """The assistance level per leg: 0 (none) … 1 (full)."""

    default: float = key(LEVEL, 1.0, doc="the level of a leg not named under `legs`")
    legs: dict = key(MapOf(LEVEL, "left: 0.6"), {}, shown="all `default`",
                     doc="level per leg, named by its joints' prefix (`left`, `right`)")


@section("the wearer profile")
class WearerFile:
    """A wearer: body, ranges of motion, walking speeds, step lengths, assistance, postures."""

    height: float = key(Num(ge=HEIGHT_RANGE[0], le=HEIGHT_RANGE[1]), REQUIRED, unit="m",
                        what="wearer height", doc="body height (sets the walk ratio)",
                        fix="give the height in metres (e.g. 1.75)")
    mass: float = key(Num(ge=MASS_RANGE[0], le=MASS_RANGE[1]), REQUIRED, unit="kg",
                      what="wearer mass", doc="body mass",
                      fix="give the body mass in kilograms (e.g. 75)")
    sex: str = key(Choice(("male", "female"), "sex"), REQUIRED,
                   doc="as the robot file's wearer (de Leva's table)")
    range_of_motion: dict = key(MapOf(Sub(Range), "knee: {lower: 0.0, upper: 1.9}"), {},
                                shown="the robot's limits",
                                doc="per joint (names as the robot's q; `hip` also names "
                                    "`left_hip` and `right_hip`)")
    speed: Speed = key(Sub(Speed), Speed(), doc="walking speeds")
    step_length: StepLength = key(Sub(StepLength), StepLength(), doc="step lengths")
    assistance: Assistance = key(Sub(Assistance), Assistance(), doc="assistance per leg")
    postures: dict = key(MapOf(MapOf(Num(), "knee: 1.5"), "sitting: {hip: 1.5, knee: 1.5}"),
                         {}, unit="rad", shown="the activities file's",
                         doc="posture name → {joint: angle} replacing the activities file's "
                             "angles of those joints")
    role: str = key(Choice(ROLES, "wearer role"), "passive",
                    doc="who moves the legs in a simulated world: `passive` (paraplegic: "
                        "joint damping and range only, the exoskeleton does the work) or "
                        "`leading` (they walk by their own joint torques and the exoskeleton "
                        "follows: docs/world.md)")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = WearerFile
