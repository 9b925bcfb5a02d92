"""Activities files (``configs/activities/*.yaml``): a robot's named postures (joint angles,
rad) and the motions that join them — minimum-jerk moves (sit ↔ stand), walking (opening
step → strides → closing step) and the slow homing move from wherever the leg is
(docs/config-activities.md). What spans several keys (posture names, joint names, the soft
limits, the robot's velocity limits) is checked by the loader,
:func:`exo_rt.session.activities.load_activities`."""

from __future__ import annotations

from exo_rt.schema.core import REQUIRED, Choice, Flag, MapOf, Name, Num, Sub, key, section

MOTION_KINDS = ("move", "walk", "home")
GAITS = ("normal", "flat_foot")  # the walking references (exo_rt.session.session.gait_function)
ANGLES = MapOf(Num(), "hip: 0.0, knee: 0.05")


@section("a motion")
class MotionEntry:
    """One motion: its kind, the postures it starts and ends in, its timing and how the
    wearer's GO and STOP act on it."""

    kind: str = key(Choice(MOTION_KINDS, "motion kind"), REQUIRED,
                    doc="`move` (minimum-jerk from `from` to `to`), `walk` (opening step → "
                        "strides → closing step, from and back to a posture) or `home` (a "
                        "slow minimum-jerk move from wherever the leg is to `to`; it needs "
                        "the operator's confirmation)")
    start: str | None = key(Name(), None, name="from", shown="— (home: none)",
                            doc="the posture it starts in (move, walk); home has none")
    end: str = key(Name(), REQUIRED, name="to", doc="the posture it ends in")
    duration: float | None = key(Num(gt=0), None, unit="s", shown="— (home: 1)",
                                 doc="move: its duration; home: the shortest homing move. "
                                     "With `max_speed` too, the longer of the two wins")
    max_speed: float | None = key(Num(gt=0), None, unit="rad/s",
                                  doc="move, home: the largest joint speed; the duration is "
                                      "set so that the minimum-jerk peak 1.875·Δq/T of the "
                                      "joint moving farthest is this (home: required)")
    hold_go: bool = key(Flag(), False, doc="the motion progresses only while GO is held; "
                                           "released, it freezes smoothly")
    stoppable: bool | None = key(Flag(), None, shown="walk: true, else false",
                                 doc="STOP may cut it (walk: STOP ends it with the closing "
                                     "step; a walk must be stoppable)")
    opening: float | None = key(Num(gt=0, le=2), None, unit="strides", shown="0.5 (walk)",
                                doc="walk: how long the opening step takes")
    closing: float | None = key(Num(gt=0, le=2), None, unit="strides", shown="0.5 (walk)",
                                doc="walk: how long the closing step takes")
    stride_change: float | None = key(Num(gt=0, le=0.5), None, shown="— (2 strides)",
                                      doc="walk: a speed change blends over as many whole "
                                          "strides (at least 2) as keep the stride period's "
                                          "change within this fraction of it per stride — "
                                          "for a one-leg exoskeleton, whose wearer's other "
                                          "leg takes up the pace it feels")
    phase_offsets: dict = key(MapOf(Num(ge=0, le=1), "right: 0.5"), {}, unit="strides",
                              shown="all 0",
                              doc="walk: how far behind the gait a joint runs — by joint "
                                  "name, joint kind (`hip`) or leg (`right`: its joints)")
    frozen_timeout: float = key(Num(gt=0, le=600), 30.0, unit="s",
                                doc="a move that needs GO held, frozen (GO released) this "
                                    "long, ends by itself as `on_frozen` says: a half-done "
                                    "move never stays forever")
    on_frozen: str = key(Choice(("return", "finish"), "frozen move's ending"), "return",
                         doc="`return`: back to its start posture; `finish`: on to its end "
                             "posture — either as a move of its own speed, no GO needed")
    description: str = key(Name(), "", shown="", doc="free text, for people")


@section("the activities file")
class ActivitiesFile:
    """A robot's activities: named postures and the motions between them."""

    tolerance: float = key(Num(gt=0), 0.1, unit="rad",
                           doc="the leg is in a posture when every joint is this close to it")
    gait: str = key(Choice(GAITS, "gait"), "normal",
                    doc="the walks' reference: `normal` (a healthy walker's hip and knee, "
                        "scaled to the speed) or `flat_foot` (designed from where the feet "
                        "must be, for a wearer on the floor whose feet stay flat in stance: "
                        "exo_rt/control/flat_foot.py, docs/world.md)")
    go_debounce: float = key(Num(ge=0, le=0.5), 0.05, unit="s",
                             doc="GO must be held this long before it moves a motion that "
                                 "needs it held: a shorter press (a chattering contact) never "
                                 "reaches the move; releasing GO acts at once")
    postures: dict = key(MapOf(ANGLES, "standing: {hip: 0.0, knee: 0.05}"), REQUIRED,
                         unit="rad", shown="required",
                         doc="name → joint angles, by joint kind (`hip`: every leg's) or full "
                             "joint name (`right_knee`); joints not named are 0; each inside "
                             "the soft limits")
    motions: dict = key(MapOf(Sub(MotionEntry), "walk: {kind: walk, from: standing, "
                                                "to: standing}"), REQUIRED,
                        doc="name → motion, in the order the crutch's menu lists them")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = ActivitiesFile
