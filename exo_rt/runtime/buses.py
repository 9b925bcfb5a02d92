"""A robot's buses, as the controller opens them: the simulated exoskeleton (``sim``,
``sim-realtime``: :mod:`exo_rt.sim.launch`) or a python-can interface per bus
(``INTERFACE:CHANNEL[@BITRATE]``: each bus's own from its bus file — ``interface``, ``channel``,
``bitrate``, ``can_options`` —, or from the command line, ``--bus SPEC`` for every bus and
``--bus NAME=SPEC`` for one: :func:`resolve_specs`). Either gives the same small interface:
``buses`` (python-can buses in the top config's order), ``specs`` (what each opened),
``lockstep``, ``clock``, ``board_path()`` (the embedded board's link when it is emulated),
``board_command(line)``, ``tick()``, ``close()``; the simulated one also ``inject(...)`` and
``due(k)``.
"""

from __future__ import annotations

import time
from typing import Protocol

from exo_rt.errors import BusError, ConfigError
from exo_rt.model.parsing import did_you_mean
from exo_rt.processes import Helper
from exo_rt.runtime.config import TopConfig
from exo_rt.sim.launch import HARDWARE_NICE

SIM_INTERFACE = "exo_sim"  # a bus file's default interface: the simulated exoskeleton
# interfaces that take the bit rate from the system (ip link, the network), not from python-can
NO_BITRATE = ("socketcan", "udp_multicast", "virtual", SIM_INTERFACE)


def parse_spec(spec: str) -> tuple[str, str, int | None]:
    """``INTERFACE:CHANNEL[@BITRATE]`` → (interface, channel, bit rate or None)."""
    interface, _, rest = spec.partition(":")
    channel, _, bitrate = rest.partition("@")
    try:
        rate = int(bitrate) if bitrate else None
    except ValueError:
        rate = -1
    if not interface or not channel or rate is not None and rate <= 0:
        raise ConfigError(f"cannot read the bus spec '{spec}'", None,
                          "write INTERFACE:CHANNEL[@BITRATE], e.g. socketcan:can0 or "
                          "pcan:PCAN_USBBUS1@1000000 (docs/cli.md)")
    return interface, channel, rate


def resolve_specs(buses, values: list[str] | tuple[str, ...] | None):
    """What each of ``buses`` (a robot's BusConfigs) opens: ``sim``/``sim-realtime`` (the
    simulated exoskeleton), or
    {bus name: ``INTERFACE:CHANNEL[@BITRATE]``}. ``values`` are the command line's ``--bus``:
    none — every bus from its bus file, or ``sim`` where no bus file names an interface; one
    plain ``SPEC`` — every bus; ``NAME=SPEC`` (repeatable) — that bus, the others from the
    plain spec or their bus file."""
    from exo_rt.sim.launch import SIM_SPECS

    values = list(values or [])
    plain = [v for v in values if "=" not in v]
    named = {}
    names = [b.name for b in buses]
    for v in values:
        if "=" in v:
            name, _, spec = v.partition("=")
            if name not in names:
                raise ConfigError(f"--bus {v}: the robot has no bus '{name}'", None,
                                  did_you_mean(name, names) or f"its buses: {', '.join(names)}")
            if name in named:
                raise ConfigError(f"--bus {name}=… is given twice", None, "give each bus once")
            parse_spec(spec)
            named[name] = spec
    if len(plain) > 1:
        raise ConfigError(f"--bus is given {len(plain)} times without a bus name", None,
                          "give one SPEC for every bus, or NAME=SPEC per bus (docs/cli.md)")
    default = plain[0] if plain else None
    if default in SIM_SPECS:
        if named:
            raise ConfigError(f"--bus {default} cannot be mixed with NAME=SPEC", None,
                              "the simulated exoskeleton serves every bus; drop one of them")
        return default
    if default is None and not named and all(
            not b.interface_given or b.interface == SIM_INTERFACE for b in buses):
        return "sim"
    out = {}
    for b in buses:
        spec = named.get(b.name) or default
        if spec is None:
            if not b.interface_given or b.interface == SIM_INTERFACE:
                raise ConfigError(
                    f"bus '{b.name}' has no interface in its bus file and none was given",
                    None, f"give --bus {b.name}=INTERFACE:CHANNEL, or interface/channel in "
                          "the bus file (docs/bus.md)")
            # the bus file's; its bit rate where python-can sets it (not socketcan's, …)
            spec = b.spec if b.interface not in NO_BITRATE else f"{b.interface}:{b.channel}"
        parse_spec(spec)
        out[b.name] = spec
    _one_bus_a_channel(buses, out)
    return out


def _one_bus_a_channel(buses, specs: dict[str, str]) -> None:
    """Refuse two buses on one interface and channel: each bus is a CAN network of its own —
    its SYNC, its node ids (the shipped two-leg buses both have nodes 1 and 2) — and on one
    wire two drives would answer each id and each master hear the other's SYNC."""
    first: dict[tuple[str, str], str] = {}
    for b in buses:
        interface, channel, _ = parse_spec(specs[b.name])
        other = first.setdefault((interface, channel), b.name)
        if other != b.name:
            raise ConfigError(
                f"buses '{other}' and '{b.name}' would both open {interface}:{channel}", None,
                f"give each bus its own channel: --bus {other}={interface}:… --bus "
                f"{b.name}={interface}:…, or its own channel in the bus file (docs/bus.md)")


def describe(buses, specs) -> list[str]:
    """One line per bus (a robot's BusConfigs): what it opens (``exo-rt check --buses``)."""
    lines = []
    for b in buses:
        if isinstance(specs, str):
            what = f"the simulated exoskeleton ({specs}), channel '{b.channel}'"
        else:
            interface, channel, rate = parse_spec(specs[b.name])
            rate = rate or (None if interface in NO_BITRATE else b.bitrate)
            extra = ", ".join(f"{k}={v!r}" for k, v in b.can_options)
            what = (f"python-can interface={interface} channel={channel}"
                    + (f" bitrate={rate}" if rate else "") + (f", {extra}" if extra else ""))
        lines.append(f"bus {b.name} ({b.protocol}, {len(b.drives)} drives): {what}")
    return lines


def per_bus(top: TopConfig, spec) -> dict[str, str]:
    """Each bus's spec by name: one spec for all (a string), or a {name: spec} already."""
    return {b.name: spec for b in top.buses} if isinstance(spec, str) else dict(spec)


def check_specs(top: TopConfig, spec) -> None:
    """Refuse a bus spec python-can has no interface for, before anything slow (a cold numba
    cache compiles for seconds before the buses open): the same error as at opening."""
    import can

    from exo_rt.sim.launch import SIM_SPECS

    specs = per_bus(top, spec)
    known = sorted(can.interfaces.VALID_INTERFACES)
    for b in top.buses:
        if specs.get(b.name) in SIM_SPECS or ":" not in specs.get(b.name, ""):
            continue  # simulated, replayed or unreadable (said when the bus opens)
        interface = parse_spec(specs[b.name])[0]
        if interface not in known:
            raise BusError(f"cannot open bus '{b.name}' on '{specs[b.name]}' (unknown "
                           f"interface '{interface}')", None,
                           did_you_mean(interface, known) or
                           f"use one of python-can's interfaces: {', '.join(known)}")


class BusSet(Protocol):
    """A run's buses as the controller uses them (:class:`HardwareBuses`, the simulated
    exoskeleton's :class:`exo_rt.sim.launch.SimulatedBuses`, replay's recorded ones):
    ``lockstep`` (the buses wait for the controller: no wall clock), ``injectable``
    (``--inject`` acts on them), their ``clock`` (s), the simulated ``world`` and ``board``
    emulator in this process (None: none), the helper ``process``es, injections ``pending``
    (control cycle, command); ``tick`` advances what they simulate by a period, ``due(k)``
    hands over cycle k's injections, ``board_command`` tells the emulated board,
    ``after_safe`` runs a simulated world on after a SAFE end."""

    lockstep: bool
    injectable: bool
    world: object
    board: object
    process: object
    board_process: object
    pending: list

    def clock(self) -> float: ...
    def tick(self) -> None: ...
    def due(self, k: int) -> None:
        """Cycle k's pending injections handed over (none pending: nothing to do)."""

    def board_path(self) -> str: ...
    def board_command(self, line: str) -> None: ...
    def inject(self, at_cycle: int, kind: str, channel: str, node: int, cycles: int) -> None:
        """A fault acted out at control cycle ``at_cycle`` (only where ``injectable``)."""

    def close(self) -> None: ...

    def replay_start(self) -> dict:
        """What a plant replay needs of how the buses started, for the run's recording
        (a lockstep simulation's: :meth:`exo_rt.sim.launch.SimulatedBuses.replay_start`);
        none: {}."""
        return {}

    def after_safe(self, since: float) -> dict:
        """A run that ended SAFE, its fault's onset ``since`` s ago: what the simulated world
        did to its wearer after it (a lockstep world on the floor run on:
        :meth:`exo_rt.sim.launch.SimulatedBuses.after_safe`); nothing simulated: {}."""
        return {}


def open_buses(top: TopConfig, spec, options, cpus: set[int], *,
               leading: bool = False) -> BusSet:
    """The robot's buses: simulated (``sim``, ``sim-realtime``) or a python-can interface,
    as the run's ``options`` (:class:`~exo_rt.runtime.options.RunOptions`: real time, start
    pose, seed, plant, real-time set-up) say. With the real-time set-up, a simulation in its
    own process runs SCHED_FIFO below the control thread on the helper CPUs (it stands in for
    the drives' own hardware); ``leading``: the run's wearer walks with their own torques (a
    real-time simulation prepares their Leader: :mod:`exo_rt.sim.lead`)."""
    from exo_rt.sim.launch import HARDWARE_FIFO_BELOW, SIM_SPECS, SimulatedBuses

    o = options
    if spec in SIM_SPECS:
        fifo = max(1, top.realtime.priority - HARDWARE_FIFO_BELOW) if o.rt_setup else None
        return SimulatedBuses(top, spec, realtime=o.realtime, start_pose=o.start_pose,
                              seed=o.seed, plant=o.plant, cpus=cpus, fifo=fifo,
                              leading=leading)
    return HardwareBuses(top, spec, cpus)


class HardwareBuses(BusSet):
    """Every bus of the robot on a python-can interface ``INTERFACE:CHANNEL[@BITRATE]`` — one
    spec for all (a string) or each bus its own ({name: spec}, :func:`resolve_specs`); an
    emulated board, if asked for, in its own process (``python -m firmware_bridge.emulator``)."""

    lockstep = False
    injectable = False  # real drives: nothing to inject into
    world = None
    board = None  # (an emulated board runs in its own process: board_process)
    process = None
    clock = staticmethod(time.monotonic)
    pending: list = []

    def __init__(self, top: TopConfig, spec, cpus: set[int] | None = None) -> None:
        import can

        self.board_process = None
        self._cpus = cpus
        specs = per_bus(top, spec)
        self.buses, self.specs = [], []
        for b in top.buses:
            interface, channel, bitrate = parse_spec(specs[b.name])
            kw = dict(b.can_options)
            if bitrate is None and interface not in NO_BITRATE:
                bitrate = b.bitrate  # the bus file's
            if bitrate is not None:
                kw["bitrate"] = bitrate
            if interface == "slcan":
                kw.setdefault("sleep_after_open", 0)
            try:
                self.buses.append(can.Bus(interface=interface, channel=channel, **kw))
                self.specs.append(specs[b.name])
            except (can.CanError, OSError, ValueError, TypeError, ImportError) as exc:
                self.close()
                raise BusError(f"cannot open bus '{b.name}' on '{specs[b.name]}' ({exc})", None,
                               "check the interface name, the channel and that the adapter is "
                               "connected (see docs/deploy.md)") from None

    def board_path(self) -> str:
        self.board_process = Helper("board emulator", "firmware_bridge.emulator", [],
                                    cpus=self._cpus, nice=HARDWARE_NICE)
        return self.board_process.ready_line.split("=", 1)[1]

    def board_command(self, line: str) -> None:
        if self.board_process is not None:
            self.board_process.send(line)

    def tick(self) -> None:
        """Nothing to advance: hardware keeps its own time."""

    def close(self) -> None:
        for bus in self.buses:
            bus.shutdown()
        if self.board_process is not None:
            self.board_process.stop()
