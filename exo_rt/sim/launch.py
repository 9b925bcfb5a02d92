"""Opening a robot's buses on the simulated exoskeleton.

- ``sim`` (lockstep): the plant and the emulated drives in this process, behind python-can's
  ``exo_sim`` interface; the physics advances one period per SYNC — deterministic and faster
  than real time (tests, replay, CI).
- ``sim-realtime``: the plant and the emulated drives in their own process (``exo-rt drives
  --bus udp_multicast``) at wall-clock rate, reached through python-can's ``udp_multicast``
  interface — the controller's process is then exactly the one that runs on the exoskeleton,
  with nothing of the simulation inside it.
"""

from __future__ import annotations

import os

import can
import numpy as np

from exo_rt.errors import BusError
from exo_rt.model.mechanism import Mechanism
from exo_rt.runtime.processes import Helper

SIM_SPECS = ("sim", "sim-realtime")


def group_for(index: int, seed: int | None = None) -> str:
    """The multicast group of a run's ``index``-th bus (administratively scoped 239/8), made
    from the process id so that runs side by side do not hear each other."""
    x = os.getpid() if seed is None else seed
    return f"239.{74 + index}.{(x >> 8) & 0xFF}.{x & 0xFF}"


class SimulatedBuses:
    """The opened buses (in the top config's order) and what stands behind them."""

    def __init__(self, top, spec: str, *, realtime: bool, start_pose=None, seed: int = 0,
                 plant: Mechanism | None = None, cpus: set[int] | None = None) -> None:
        self.world = None  # lockstep: the in-process SimWorld (injections, board clock)
        self.process: Helper | None = None
        self.lockstep = not realtime and spec == "sim"
        pose = np.zeros(top.robot.nq) if start_pose is None else np.asarray(start_pose, float)
        if self.lockstep:
            from exo_rt.sim.simbus import SimWorld

            name = f"run-{id(self)}"
            self.world = SimWorld.open(name, plant or top.robot, top.buses, dt=1.0 / top.rate_hz,
                                       seed=seed)
            self.world.reset(pose)
            self.buses = [can.Bus(interface="exo_sim", channel=b.channel, world=name)
                          for b in top.buses]
            self.specs = [f"exo_sim:{b.channel}" for b in top.buses]
            return
        if plant is not None:
            raise BusError("a plant other than the robot's model runs on the lockstep "
                           "simulated bus only", None, "run without --realtime")
        base = group_for(0)
        args = ["drives", "--config", str(top.robot_path), "--buses", str(top.buses_path),
                "--bus", f"udp_multicast:{base}", "--parent", str(os.getpid()),
                "--pose", *[repr(float(x)) for x in pose]]
        self.process = Helper("simulation", "exo_rt", args, cpus=cpus)
        served = dict(item.split("=", 1) for item in self.process.ready_line.split()[1:])
        self.buses, self.specs = [], []
        try:
            for b in top.buses:
                interface, _, group = served[b.channel].partition(":")
                self.buses.append(can.Bus(interface=interface, channel=group))
                self.specs.append(served[b.channel])
        except (KeyError, can.CanError, OSError) as exc:
            self.close()
            raise BusError(f"cannot reach the simulation's buses ({exc})", None,
                           "check that multicast on the loopback works (msgpack installed)"
                           ) from None

    def close(self) -> None:
        for bus in getattr(self, "buses", []):
            bus.shutdown()
        if self.process is not None:
            self.process.stop()
