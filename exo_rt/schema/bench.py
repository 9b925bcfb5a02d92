"""Bench procedure options (``exo-rt bench-test NAME --options FILE``): one mapping per
procedure, each key a keyword of that procedure (docs/config-bench.md). Options left out keep
the procedure's own default, which is the one declared here (a test keeps them equal)."""

from __future__ import annotations

from exo_rt.schema.core import ListOf, Name, Num, Sub, key, section

POS = Num(gt=0)
POSE = key(ListOf(Num()), None, unit="rad", shown="the bench's home pose",
           doc="joint angles to start from, one per joint of q")
HZ = key(POS, 3.0, unit="Hz", doc="natural frequency of the bench's position loop")
ZETA = key(POS, 0.7, doc="damping ratio of the bench's position loop")


@section("bringup")
class Bringup:
    """Every node answers, mapping written, state machine, heartbeats and bus load."""

    seconds: float = key(POS, 0.5, unit="s", doc="how long the bus load and heartbeats are "
                                                 "measured")


@section("latency")
class Latency:
    """Cycles from a current step to the drive reporting it and to the joint moving."""

    step_A: float = key(POS, 6.0, unit="A", doc="the current step")


@section("step")
class Step:
    """A position step: step metrics and the fitted bandwidth."""

    amplitude: float = key(Num(), 0.05, unit="rad", doc="the step")
    pose: tuple = POSE
    hz: float = HZ
    zeta: float = ZETA
    seconds: float = key(POS, 1.5, unit="s", doc="recorded after the step")


@section("chirp")
class Chirp:
    """A logarithmic sine sweep: the frequency response and −3 dB bandwidth."""

    amplitude: float = key(Num(), 0.03, unit="rad", doc="the sweep's amplitude")
    pose: tuple = POSE
    hz: float = HZ
    zeta: float = ZETA
    f0: float = key(POS, 0.3, unit="Hz", doc="start frequency")
    f1: float = key(POS, 15.0, unit="Hz", doc="end frequency")
    seconds: float = key(POS, 20.0, unit="s", doc="the sweep's length")


@section("friction")
class Friction:
    """Breakaway tests and constant-speed sweeps → the wave generator's friction."""

    pose: tuple = POSE
    speeds: tuple = key(ListOf(POS), (0.016, 0.03, 0.06, 0.12, 0.25, 0.5), unit="rad/s",
                        doc="the sweeps' joint speeds")
    span: float = key(POS, 0.6, unit="rad", doc="longest sweep")
    slow_seconds: float = key(POS, 2.5, unit="s", doc="a slow sweep's length is at most "
                                                      "speed × this")
    breakaways: int = key(Num(integer=True, gt=0), 3, doc="breakaway tests per direction")


@section("stiffness")
class Stiffness:
    """Torque cycles with the output locked → the harmonic drive's stiffness and hysteresis."""

    amplitude: float = key(POS, None, unit="N·m", shown="75 % of the current limit",
                           doc="the torque cycles' amplitude")
    rate: float = key(POS, 150.0, unit="N·m/s", doc="torque ramp rate")
    cycles: int = key(Num(integer=True, gt=0), 3, doc="torque cycles")


@section("inertia")
class Inertia:
    """Slow sweeps and a multi-sine → the wearer's segment masses and COMs."""

    segments: tuple = key(ListOf(Name()), None, shown="those on bodies a joint moves",
                          doc="the wearer segments fitted")
    speed: float = key(POS, 0.25, unit="rad/s", doc="speed of the slow sweeps")
    seconds: float = key(POS, 20.0, unit="s", doc="length of the multi-sine")


@section("controller")
class ControllerRun:
    """The controller's own run on the bench: its law, reference and safety, as in a run."""

    seconds: float = key(POS, 10.0, unit="s", doc="time in RUN (the gait)")


@section("the bench options file")
class BenchFile:
    """Options of the bench procedures, one mapping per procedure."""

    bringup: Bringup = key(Sub(Bringup), Bringup(), doc="`exo-rt bench-test bringup`")
    latency: Latency = key(Sub(Latency), Latency(), doc="`exo-rt bench-test latency`")
    step: Step = key(Sub(Step), Step(), doc="`exo-rt bench-test step`")
    chirp: Chirp = key(Sub(Chirp), Chirp(), doc="`exo-rt bench-test chirp`")
    friction: Friction = key(Sub(Friction), Friction(), doc="`exo-rt bench-test friction`")
    stiffness: Stiffness = key(Sub(Stiffness), Stiffness(),
                               doc="`exo-rt bench-test stiffness`")
    inertia: Inertia = key(Sub(Inertia), Inertia(), doc="`exo-rt bench-test inertia`")
    controller: ControllerRun = key(Sub(ControllerRun), ControllerRun(),
                                    doc="`exo-rt bench-test controller`")
    description: str = key(Name(), "", shown="", doc="free text, for people")


SCHEMA = BenchFile
