"""The top configuration (``configs/exo_leg.yaml``): the one file a run starts from — the
robot, bus and controller files it names (relative to it), the control rate, the alignment and
stop phases, the safety supervisor's limits, where runs are written, where the real-time
thread runs and which plant model the simulated exoskeleton uses (docs/config.md).
:class:`SafetyConfig`, :class:`RealtimeConfig` and :class:`SimulationConfig` are both the
schema of their sections and what the run uses."""

from __future__ import annotations

from exo_rt.schema.core import REQUIRED, Choice, Flag, MapOf, Name, Num, Sub, key, section

POSITIVE = Num(gt=0)
COUNT = Num(integer=True, gt=0)
# the safety supervisor's reactions, in the order of their codes: the one definition
# (exo_rt.cycle.safety.ACTIONS maps each to its code from here)
ACTIONS = ("zero_current", "damping", "hold")
DEFAULT_PLANT = "harmonic_drive"  # the built-in model (exo_rt.sim.plant)
SCENES = ("test_stand", "floor")  # the world plant's scenes (exo_rt.sim.world_plant)
# the simulation section's keys that place the plant in a room (a plant model with one takes
# them: exo_rt.sim.world_plant.Room)
ROOM_KEYS = ("scene", "seat_height", "stabiliser_stiffness", "stabiliser_damping", "support",
             "wearer_damping", "ankle_stiffness", "ankle_damping", "ankle_rest",
             "seat_follows")


@section("thermal", result=True)
class ThermalLevels:
    """The motors' winding temperature levels (the thermal model of
    :mod:`exo_rt.actuators.thermal`, docs/assistance.md "Thermal protection")."""

    ambient: float = key(Num(ge=-40, le=100), 25.0, unit="°C",
                         fix="give the air temperature around the motors in °C (-40 … 100)",
                         doc="the motors' surroundings (the model's T_a; inside a cover, "
                             "warmer than the room)")
    warning: float = key(Num(), 90.0, unit="°C",
                         doc="winding temperature above which the current limit derates")
    limit: float = key(Num(), 110.0, unit="°C",
                       doc="winding temperature at which the cycle goes SAFE; below the "
                           "motor's `thermal.max_winding_temperature` (125 °C) with a margin "
                           "for what the model leaves out (iron losses, the hot spot)")
    slow_walk: float = key(Num(), None, unit="°C", shown="15 °C below the warning",
                           fix="give a winding temperature in °C below the warning",
                           doc="winding temperature above which a walk slows to the wearer's "
                               "slowest speed preset, and a faster speed is refused "
                               "`winding_warm`, until it cools (docs/sessions.md): a slower "
                               "walk asks less current, so the walk goes on longer before "
                               "the warning stops it")
    floor: float = key(Num(gt=0, le=1), None, shown="each motor's rated / peak current",
                       fix="give a fraction of the current limit in (0, 1]",
                       doc="derating factor of the current limit at the limit temperature "
                           "(linear from 1 at the warning); default per motor")


@section("safety", result=True)
class SafetyConfig:
    """What the safety supervisor checks every cycle, and how it reacts (docs/config.md)."""

    joint_margin: float = key(POSITIVE, 0.02, unit="rad",
                              doc="soft limits this far inside the robot's joint limits")
    stop_time: float = key(POSITIVE, 0.05, unit="s",
                           doc="velocity-dependent margin: a joint moving at v towards a soft "
                               "limit trips at \\|v\\|·t before it")
    tracking_error: float = key(POSITIVE, 0.15, unit="rad",
                                doc="largest tracking error while tracking (RUN)")
    stale_cycles: int = key(COUNT, 2, doc="consecutive cycles without (or with late or "
                                          "malformed) feedback from a drive")
    overrun_streak: int = key(COUNT, 2, doc="consecutive overrunning cycles")
    saturation_cycles: int = key(COUNT, 20, doc="consecutive cycles a drive's actual current "
                                                "falls short of its command by more than 20 % "
                                                "of its peak (the drive cannot deliver, or "
                                                "obeys someone else)")
    duplicate_cycles: int = key(COUNT, 3, doc="consecutive cycles a drive answers twice (a "
                                              "second SYNC producer; once is a late answer)")
    action: str = key(Choice(ACTIONS, "safe action"), "zero_current",
                      doc="the reaction: `zero_current` (the harmonic drives hold by friction),"
                          " `damping`, `hold`")
    ramp_cycles: int = key(COUNT, 20, doc="the reaction is ramped to zero over these cycles, "
                                          "then the drives are disabled")
    damping: float = key(POSITIVE, 20.0, unit="N·m·s/rad", doc="damping of the reaction "
                                                                "(damping, hold)")
    stiffness: float = key(POSITIVE, 200.0, unit="N·m/rad", doc="stiffness of the reaction "
                                                                 "(hold)")
    board_timeout: float = key(POSITIVE, 0.02, unit="s",
                               doc="without a status from the embedded board for this long, "
                                   "its link counts as lost")
    thermal: ThermalLevels = key(Sub(ThermalLevels), ThermalLevels(), shown="",
                                 doc="the motors' winding temperature: derating and limit")
    reference_speed: float = key(
        Num(gt=0, le=1), 0.8, fix="give a fraction in (0, 1]",
        doc="the reference's largest speed, as a fraction of each joint's velocity limit "
            "(the rest is the tracking's margin before the velocity check): every motion is "
            "checked against it at load and at each request, and the cycle's reference "
            "governor holds to it (docs/safety.md)")
    reference_acceleration: dict = key(
        MapOf(Num(gt=0), "hip: 25.0, knee: 50.0"), {}, unit="rad/s²",
        shown="50 rad/s² for every joint not named",
        doc="the reference's largest acceleration per joint (a joint's name, or a kind: "
            "`hip` names every `*_hip`): what the drive can give the leg with its wearer "
            "without saturating, measured by the walks at the edge (docs/safety.md); also "
            "bounds the change of q̇_r per cycle")


@section("realtime", result=True)
class RealtimeConfig:
    """Where the control thread runs with ``--realtime`` (docs/config.md)."""

    cpu: int | None = key(Num(integer=True, ge=0), None, shown="the last CPU",
                          fix="give a CPU number (0 is the first; see nproc)",
                          doc="the CPU the control thread is pinned to (SCHED_FIFO); every "
                              "helper process runs SCHED_OTHER on the other CPUs")
    priority: int = key(Num(integer=True, ge=1, le=99), 80,
                        fix="SCHED_FIFO priorities are 1 … 99",
                        doc="SCHED_FIFO priority of the control thread")
    cpu_latency_us: int = key(
        Num(integer=True, ge=0), 0, unit="µs", fix="give whole µs (0: CPUs never sleep)",
        doc="the longest any CPU may take to wake from idle while the loop runs (PM QoS, "
            "/dev/cpu_dma_latency): 0 keeps the CPUs out of their sleep states, so a deadline "
            "or a drive's frame never waits for one to wake (it costs power); 1000000 puts "
            "no bound on it")


@section("simulation", result=True)
class SimulationConfig:
    """The simulated exoskeleton (`--bus sim`, `sim-realtime`, replay): what stands in for
    the leg behind the emulated drives (docs/architecture.md, "Recipes": a plant model)."""

    plant: str = key(Name(), DEFAULT_PLANT,
                     doc="the plant model: a registered one's name (exo_rt.sim.plants; "
                         "checked where the top config is read, exo_rt.runtime.config); "
                         "`harmonic_drive`: rigid bodies, compliant harmonic drives with "
                         "friction and hysteresis, motor current loops; `world`: the "
                         "rigid bodies in MuJoCo (docs/world.md)")
    scene: str = key(Choice(SCENES, "scene"), "test_stand",
                     doc="where the `world` plant's exoskeleton is: `test_stand` (the pelvis "
                         "fixed, the leg in the air) or `floor` (the pelvis free in x, z and "
                         "pitch, feet on the floor, a chair behind them: docs/world.md)")
    seat_height: float = key(Num(ge=0, le=1.0), 0.45, unit="m",
                             fix="give the chair's seat height in m (0: no chair; chairs are "
                                 "0.40 … 0.46 m)",
                             doc="the `floor` scene's chair: its seat's top (0: no chair; "
                                 "lowered to the thighs if they are lower at the start)")
    seat_follows: bool = key(Flag(), False,
                             doc="the `floor` scene's chair is kept behind the wearer, as a "
                                 "therapist does: it moves along the floor with the pelvis "
                                 "while the wearer stands or walks and stays where it is once "
                                 "they sit down (false: it stays where it was put)")
    stabiliser_stiffness: float = key(Num(ge=0), 3000.0, unit="N·m/rad",
                                      doc="the `floor` scene's pelvis-pitch stabiliser — the "
                                          "crutches that keep the trunk upright: stiffness")
    stabiliser_damping: float = key(Num(ge=0), 300.0, unit="N·m·s/rad",
                                    doc="… and damping")
    support: float = key(Num(ge=0, le=1), 0.0, unit="1",
                         fix="give the fraction of the body weight a harness lifts, 0 … 1",
                         doc="the `floor` scene's body-weight support: the fraction of the "
                             "whole weight a harness lifts at the pelvis (0.3: 30 %)")
    wearer_damping: float = key(Num(ge=0), 0.0, unit="N·m·s/rad",
                                doc="the `world` plant's passive wearer: damping of their "
                                    "joints (on every joint of the robot)")
    ankle_stiffness: float = key(Num(ge=0), 0.0, unit="N·m/rad",
                                 doc="the `floor` scene's ankles: each foot on a sprung hinge "
                                     "of this stiffness (0: fixed to the shank, as the robot "
                                     "file has it); the controller's model keeps them fixed")
    ankle_damping: float = key(Num(ge=0), 0.0, unit="N·m·s/rad", doc="… and its damping")
    ankle_rest: float = key(Num(ge=-0.6, le=0.6), 0.0, unit="rad",
                            doc="… and the angle its spring holds an unloaded foot at "
                                "(dorsiflexion < 0: toe up, as an ankle-foot orthosis's "
                                "dorsiflexion assist lifts it in swing)")

    def plant_options(self) -> dict:
        """The room's keys that differ from their defaults ({} on the default test stand):
        what a plant model that has a room (``world``) takes, and one without refuses."""
        return {f: getattr(self, f) for f in ROOM_KEYS
                if getattr(self, f) != getattr(type(self), f, None)}


@section("stop")
class Stop:
    """STOPPING: the hold at the end of RUN."""

    duration: float = key(POSITIVE, 0.5, unit="s",
                          doc="hold at the end of RUN before the drives are disabled")


@section("logging")
class Logging:
    """Where a run's files go."""

    runs: str = key(Name(), "runs", doc="folder of the run folders (`runs/<date-time>/`), "
                                        "relative to the working directory for a shipped "
                                        "config, else to the folder above the config's")


@section("the top config")
class TopFile:
    """The top configuration of a run: robot, buses, controller, rate, phases, safety."""

    robot: str = key(Name(), REQUIRED, doc="the robot file (docs/config-robot.md), relative "
                                           "to this file")
    buses: str = key(Name(), REQUIRED, doc="the bus file (docs/config-buses.md); every joint "
                                           "must have a drive")
    controller: str = key(Name(), REQUIRED, doc="the controller file "
                                                "(docs/config-controller.md); `--controller` "
                                                "overrides")
    rate_hz: float = key(POSITIVE, 1000.0, unit="Hz", doc="control rate; the bus load is "
                                                          "checked at this rate")
    stop: Stop = key(Sub(Stop), Stop(), shown="", doc="the stop phase")
    safety: SafetyConfig = key(Sub(SafetyConfig), SafetyConfig(), shown="",
                               doc="the safety supervisor")
    logging: Logging = key(Sub(Logging), Logging(), shown="", doc="where runs are written")
    realtime: RealtimeConfig = key(Sub(RealtimeConfig), RealtimeConfig(), shown="",
                                   doc="the control thread's CPU and priority, the CPUs' "
                                       "wake-up latency")
    simulation: SimulationConfig = key(Sub(SimulationConfig), SimulationConfig(), shown="",
                                       doc="the simulated exoskeleton's plant model")
    session: str = key(Name(), "", shown="sessions/default.yaml",
                       doc="the session script a run without `--session` runs, relative to "
                           "this file (docs/config-session.md); none: the shipped default, "
                           "home, walk for `--duration`, stop, end")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = TopFile
