"""A robot's buses, as the controller opens them: the simulated exoskeleton (``sim``,
``sim-realtime``: :mod:`exo_rt.sim.launch`) or a python-can interface for every bus
(``INTERFACE:CHANNEL[@BITRATE]``). Either gives the same small interface: ``buses`` (python-can
buses in the top config's order), ``lockstep``, ``clock``, ``board_path()`` (the embedded
board's link when it is emulated), ``board_command(line)``, ``tick()``, ``close()``; the
simulated one also ``inject(...)`` and ``due(k)``.
"""

from __future__ import annotations

import time

from exo_rt.errors import BusError, ConfigError
from exo_rt.model.mechanism import Mechanism
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.processes import Helper
from exo_rt.sim.launch import HARDWARE_NICE


def open_buses(top: TopConfig, spec: str, *, realtime: bool, start_pose, seed: int,
               plant: Mechanism | None, cpus: set[int], rt_setup: bool = True):
    """The robot's buses: simulated (``sim``, ``sim-realtime``) or a python-can interface.
    With the real-time set-up, a simulation in its own process runs SCHED_FIFO below the
    control thread on the helper CPUs (it stands in for the drives' own hardware)."""
    from exo_rt.sim.launch import HARDWARE_FIFO_BELOW, SIM_SPECS, SimulatedBuses

    if spec in SIM_SPECS:
        fifo = max(1, top.realtime.priority - HARDWARE_FIFO_BELOW) if rt_setup else None
        return SimulatedBuses(top, spec, realtime=realtime, start_pose=start_pose, seed=seed,
                              plant=plant, cpus=cpus, fifo=fifo)
    return HardwareBuses(top, spec, cpus)


class HardwareBuses:
    """Every bus of the robot on a python-can interface ``INTERFACE:CHANNEL[@BITRATE]``; an
    emulated board, if asked for, in its own process (``python -m firmware_bridge.emulator``)."""

    lockstep = False
    world = None
    process = None
    clock = staticmethod(time.monotonic)
    pending: list = []

    def __init__(self, top: TopConfig, spec: str, cpus: set[int] | None = None) -> None:
        import can

        self.board_process = None
        self._cpus = cpus
        interface, _, rest = spec.partition(":")
        channel, _, bitrate = rest.partition("@")
        if not interface or not channel:
            raise ConfigError(f"cannot read the bus spec '{spec}'", None,
                              "write INTERFACE:CHANNEL[@BITRATE], e.g. socketcan:can0")
        self.buses, self.specs = [], []
        for _ in top.buses:
            try:
                kw = {"bitrate": int(bitrate)} if bitrate else {}
                if interface == "slcan":
                    kw["sleep_after_open"] = 0
                self.buses.append(can.Bus(interface=interface, channel=channel, **kw))
                self.specs.append(spec)
            except (can.CanError, OSError, ValueError, ImportError) as exc:
                self.close()
                raise BusError(f"cannot open bus '{spec}' ({exc})", None,
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
