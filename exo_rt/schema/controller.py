"""Controller files (``configs/controllers/*.yaml``): the law, its gains per joint, the
current limits, the joint-state estimate and the reference (docs/config-controller.md).
:class:`Reference` is both the schema of ``reference:`` and what the run uses; the gains and
limits become per-joint arrays in :class:`exo_rt.control.config.ControllerConfig`."""

from __future__ import annotations

from exo_rt.schema.core import REQUIRED, AnyOf, Choice, Flag, MapOf, Name, Num, Sub, key, section
from exo_rt.schema.gains import COLUMNS, MAGNITUDE, Gains, gain  # noqa: F401 (the file's keys)

REFERENCE_TYPES = ("gait", "hold", "min_jerk")


@section("reference", result=True)
class Reference:
    """What the joints track: the normal gait, a held posture or a minimum-jerk move."""

    type: str = key(Choice(REFERENCE_TYPES, "reference type"), "gait",
                    doc="`gait` (normal gait over the phase), `hold` (a posture), `min_jerk` "
                        "(a move to a posture)")
    period: float = key(Num(gt=0, inf=True), 2.0, unit="s", doc="per stride (gait; a "
                        "rehabilitation pace within the drives' torque)")
    amplitude: float = key(MAGNITUDE, 1.0, doc="scale of the excursion about the mean (gait)")
    gait_joints: dict = key(MapOf(Choice(("hip", "knee", "hold"), "gait pattern"),
                                  "knee: knee"), {}, name="joints", shown="by name",
                            doc="which gait curve each joint follows (gait)")
    posture: dict = key(MapOf(Num(), "knee: 0.3"), {}, unit="rad",
                        doc="the posture of hold and min_jerk")
    duration: float = key(Num(gt=0, inf=True), 2.0, unit="s", doc="of a minimum-jerk move")
    phase: str = key(Choice(("time", "events"), "phase source"), "time",
                     doc="`time` (the session's cadence) or `events`: the wearer's heel "
                         "strikes from the embedded board set the stride period (the phase "
                         "is integrated at it)")


@section("phase_estimate", result=True)
class PhaseEstimate:
    """The wearer's gait phase, from an adaptive oscillator on one hip (docs/assistance.md)."""

    joint: str = key(Name(), "", shown="the first hip flexion joint",
                     doc="the hip joint followed (`hip`, `left_hip`)")
    nu_phase: float = key(Num(gt=0), 2.0, unit="1/rad", doc="k_φ: phase coupling, "
                          "ν_φ = k_φ·ω (ω the stride's angular frequency)")
    nu_freq: float = key(Num(gt=0), 0.6, unit="1/rad²", doc="k_ω: frequency learning, "
                         "ν_ω = k_ω·ω²")
    eta: float = key(Num(gt=0), 0.35, unit="1/rad", doc="k_η: amplitude learning, η = k_η·ω")
    heel_gain: float = key(Num(ge=0, le=1), 0.5, doc="fraction of a heel strike's phase "
                                                     "and stride-time error corrected")
    slew: float = key(Num(gt=0), 0.002, unit="rad", doc="the heel-strike correction's largest "
                                                         "step per cycle")
    still_speed: float = key(Num(ge=0), 0.1, unit="rad/s", doc="RMS hip speed at or below "
                                                               "which the wearer stands still")
    walk_speed: float = key(Num(gt=0), 0.3, unit="rad/s", doc="RMS hip speed at or above "
                                                              "which they walk")
    speed_tau: float = key(Num(gt=0), 0.25, unit="s", doc="time constant of the hip's mean "
                                                           "square speed")


@section("stance_load", result=True)
class StanceLoad:
    """The stance leg's load fed forward (the model-based tracking laws: model_pid,
    computed_torque, sliding_mode): τ −= J_a(q)ᵀ f, f the vertical force a foot carries,
    read from the board's foot-sole sensors and applied at the ankle joint's centre in the
    controller's model, the pelvis taken upright (docs/world.md, "Where the currents peak")."""

    sensors: dict = key(MapOf(Num(integer=True, ge=0, le=32), "left: 0, right: 1"), REQUIRED,
                        doc="which of the board's PRESSURE sensors is under which leg: "
                            "{leg: index}, a leg named by its joints' prefix (`left` for "
                            "`left_hip`, `left_knee`, `left_ankle`; `leg` for a one-leg "
                            "robot's `hip`, `knee`, `ankle`); legs the robot lacks are "
                            "skipped (a file serving robots of one and two legs)")
    tau_s: float = key(Num(gt=0), 0.02, unit="s", doc="time constant of the first-order "
                       "filter on each force (keeps a landing's few-ms spike out)")
    max_N: float = key(Num(gt=0), 1000.0, unit="N", doc="each force clamped to this "
                       "before the filter")


@section("encoder")
class Encoder:
    """Which encoder the joint position comes from."""

    source: str = key(Choice(("motor", "output"), "encoder source"), "motor",
                      doc="`motor` (through the drive; collocated) or `output`")
    counts_per_rev: float = key(Num(gt=0), 65536.0, doc="encoder counts per revolution")


@section("the controller file")
class ControllerFile:
    """A controller: the law, its gains per joint, limits, estimate and reference."""

    law: str = key(Name(), REQUIRED, doc="the control law: a registered one's name "
                   "(exo_rt.control.registry; checked where the file is read, "
                   "exo_rt.control.config)")
    joints: dict = key(MapOf(Sub(Gains), "kp: 1600, kd: 80"), {}, shown="all 0",
                       doc="gains per joint (names as the robot's q; `hip` also names "
                           "`left_hip` and `right_hip`)")
    current_limit: object = key(AnyOf((MAGNITUDE, MapOf(MAGNITUDE, "knee: 10"))), None,
                                unit="A", shown="the drive's peak current",
                                doc="one value or {joint: A}; at most the drive's "
                                    "peak_current")
    inertia_feedforward: bool = key(Flag(), False, doc="model_pid: add M(q) q̈_d")
    friction_compensation: bool = key(Flag(), None, shown="true (pid, passive: false)",
                                      doc="compensate the wave generator's friction in "
                                          "torque → current (never for passive)")
    velocity_filter_hz: float = key(Num(gt=0, inf=True), 80.0, unit="Hz",
                                    doc="first-order filter on encoder differences")
    encoder: Encoder = key(Sub(Encoder), Encoder(), doc="the position feedback")
    reference: Reference = key(Sub(Reference), Reference(), doc="what the joints track")
    phase_estimate: PhaseEstimate = key(Sub(PhaseEstimate), PhaseEstimate(),
                                        doc="the wearer's gait phase (the assistance laws')")
    stance_load: StanceLoad = key(Sub(StanceLoad), None, shown="off",
                                  doc="the stance leg's load fed forward from the board's "
                                      "foot-sole sensors (the model-based tracking laws); "
                                      "a sensor without a PRESSURE frame for the safety's "
                                      "board_timeout gives none")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = ControllerFile
