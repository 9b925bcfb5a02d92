"""Opening a robot's buses — and its embedded board — on the simulated exoskeleton.

- ``sim`` (lockstep): the plant, the emulated drives and the emulated board in this process,
  the drives behind python-can's ``exo_sim`` interface; the physics advances one period per
  SYNC — deterministic and faster than real time (tests, replay, CI).
- ``sim-realtime``: the plant, the emulated drives and the emulated board in their own process
  (``exo-rt drives --bus udp_multicast --board``) at wall-clock rate, reached through
  python-can's ``udp_multicast`` interface and a pseudo-terminal — the controller's process is
  then exactly the one that runs on the exoskeleton, with nothing of the simulation inside.

Either way the leg is the top config's plant model (``simulation: {plant: …}``,
:mod:`exo_rt.sim.plants`), the board's motor-power relay feeds the simulated drives, and faults
are injected the same way (:meth:`SimulatedBuses.inject`, :meth:`SimulatedBuses.board_command`).
A leading wearer (a wearer profile with ``role: leading``) walks with their own torques either
way: in real time the cycle's reference rows reach the simulation's process through a block of
shared memory (:mod:`exo_rt.sim.lead`).
"""

from __future__ import annotations

import json
import os
import time

import can
import numpy as np

from exo_rt.cycle.layout import V_WIDTH
from exo_rt.errors import BusError
from exo_rt.model.mechanism import Mechanism
from exo_rt.processes import Helper
from exo_rt.sim import lead
from exo_rt.sim.lead import RowsMirror, SharedRows

SIM_SPECS = ("sim", "sim-realtime")
HARDWARE_NICE = -10  # the simulated drives and leg stand in for hardware: they win their CPU
HARDWARE_FIFO_BELOW = 10  # real time: the simulation runs SCHED_FIFO this far below the control


def hardware_fifo(control_priority: int | None = None) -> int:
    """The simulation's SCHED_FIFO priority: ``HARDWARE_FIFO_BELOW`` below the control
    thread's (``realtime.priority``; by default its default, 80: 70). ``exo-rt drives`` takes
    it itself, so that it holds when started by hand too (docs/deploy.md)."""
    if control_priority is None:
        from exo_rt.schema.top import RealtimeConfig

        control_priority = RealtimeConfig().priority
    return max(1, control_priority - HARDWARE_FIFO_BELOW)


def group_for(index: int, seed: int | None = None) -> str:
    """The multicast group of a run's ``index``-th bus (administratively scoped 239/8), made
    from the process id so that runs side by side do not hear each other."""
    x = os.getpid() if seed is None else seed
    return f"239.{74 + index}.{(x >> 8) & 0xFF}.{x & 0xFF}"


class SimulatedBuses:
    """The opened buses (in the top config's order) and what stands behind them."""

    injectable = True  # the simulated drives act out --inject's faults
    board_process = None  # the board emulator runs in this process (lockstep) or the sim's

    def __init__(self, top, spec: str, *, realtime: bool, start_pose=None, seed: int = 0,
                 plant: Mechanism | None = None, cpus: set[int] | None = None,
                 fifo: int | None = None, leading: bool = False) -> None:
        self.world = None  # lockstep: the in-process SimWorld
        self.process: Helper | None = None
        self.board = None  # lockstep: the in-process BoardEmulator
        self._board_path: str | None = None
        self.pending: list[tuple[int, str]] = []  # real time: (control cycle, command line)
        self.lead: RowsMirror | None = None  # real time: the cycle's reference rows, shared
        self.lockstep = not realtime and spec == "sim"
        self.clock = self._world_clock if self.lockstep else time.monotonic
        pose = np.zeros(top.robot.nq) if start_pose is None else np.asarray(start_pose, float)
        if self.lockstep:
            from exo_rt.sim.simbus import SimWorld

            name = self._world_name = f"run-{id(self)}"
            self.world = SimWorld.open(name, plant or top.robot, top.buses, dt=1.0 / top.rate_hz,
                                       seed=seed, plant_model=top.simulation.plant,
                                       plant_room=top.simulation.plant_options())
            self.world.reset(pose)
            self.buses = [can.Bus(interface="exo_sim", channel=b.channel, world=name)
                          for b in top.buses]
            self.specs = [f"exo_sim:{b.channel}" for b in top.buses]
            return
        if plant is not None:
            raise BusError("a plant other than the robot's model runs on the lockstep "
                           "simulated bus only", None, "run without --realtime")
        # a leading wearer's reference rows, of the cycle's v shape (exo_rt.sim.lead), where
        # the run's wearer profile leads and the world has a floor (their feet to stand on):
        # the simulation prepares their Leader on them at start-up, idle until told "lead"
        # (not for a passive wearer: the Leader's models cost the start-up ≈ 0.2 s)
        room = top.simulation.plant_options()
        if leading and top.simulation.plant == "world" and room.get("scene") == "floor":
            try:
                self.lead = RowsMirror(SharedRows((V_WIDTH, top.robot.nq)))
            except OSError:  # (no shared memory here: a leading wearer stays passive)
                self.lead = None
        args = ["drives", "--config", str(top.robot_path), "--buses", str(top.buses_path),
                "--bus", f"udp_multicast:{group_for(0)}", "--board",
                "--parent", str(os.getpid()), "--plant", top.simulation.plant,
                "--room", json.dumps(room),
                "--fifo", str(fifo or 0),  # (placed here too: the placement line says so)
                *(["--lead", *self.lead.block.spec()] if self.lead is not None else []),
                "--pose", *[repr(float(x)) for x in pose]]
        try:
            self.process = Helper("simulation", "exo_rt", args, cpus=cpus, nice=HARDWARE_NICE,
                                  fifo=fifo)
        except BaseException:
            self.close()
            raise
        served = dict(item.split("=", 1) for item in self.process.ready_line.split()[1:])
        self._board_path = served.get("board")
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

    def _world_clock(self) -> float:
        return self.world.t

    def replay_start(self) -> dict:
        """What a plant replay needs of the lockstep simulation's start (the run's recording
        keeps it): the periods it stepped before the controller's first cycle and the period
        each joint's power stage first came on (``sim_start``); real time: nothing (the
        replay starts from the measured posture)."""
        if not self.lockstep:
            return {}
        w = self.world
        return {"sim_start": {"periods": int(w.cycle), "powered_at": dict(zip(
            w.transmission_joints, (int(p) for p in w.powered_at), strict=True))}}

    def after_safe(self, since: float) -> dict:
        """Lockstep, on the world's floor: the world run on by itself after a SAFE end, up to
        :data:`~exo_rt.sim.after_safe.AFTER_SAFE_S` after the fault's onset (``since`` s ago)
        — the drives as SAFE left them, the board ticked beside it — and what it did to the
        wearer (:func:`exo_rt.sim.after_safe.run_on`). Real time (the simulation lingers in
        its own process) or the test stand: {}."""
        if self.world is None:
            return {}
        from exo_rt.sim.after_safe import run_on

        return run_on(self.world, self.board, since)

    # ---------------------------------------------------------------- the board
    def board_path(self) -> str:
        """The emulated board's link (BoardLink opens it)."""
        if self._board_path is None:  # lockstep: in this process, ticked by the cycle
            from firmware_bridge.emulator import BoardEmulator

            self.board = BoardEmulator(clock=self.clock, transport="socket")
            if self.world.truth is not None:  # in the world: the feet's contacts press
                self.board.soles = self.world.truth.soles  # its sole sensors, not a timer
            self._board_path = self.board.path
        return self._board_path

    def tick(self) -> None:
        """Lockstep: the board to the simulated time; its relay to the drives. Real time, a
        leading wearer: the cycle's reference rows into the shared block (one copy of 3 × n
        values, after the cycle's commands went out)."""
        if self.board is not None:
            self.board.tick(self.world.t)
            self.world.motor_power = self.board.motor_power
        elif self.lead is not None and self.lead.pairs:
            self.lead.put()

    def board_command(self, line: str) -> None:
        """``estop 1``, ``stall S``, ``walk`` (firmware_bridge.emulator.apply_command); and
        ``lead TOKEN`` (the session's start, a leading wearer: :mod:`exo_rt.sim.lead`)."""
        if line.startswith("lead "):
            self._lead(line.split()[1])
            return
        if self.board is not None:
            from firmware_bridge.emulator import apply_command

            apply_command(self.board, line)
        else:
            self._send(line)

    # ---------------------------------------------------------------- faults
    def inject(self, at_cycle: int, kind: str, channel: str, node: int, cycles: int) -> None:
        """A drive fault (the lockstep bus's kinds) from control cycle ``at_cycle`` on:
        scheduled in the world in lockstep; in real time sent to the simulation's process
        when the controller's cycle ``at_cycle`` comes (:meth:`due`)."""
        if self.world is not None:
            self.world.schedule(self.world.cycle + at_cycle, kind, channel, node, cycles)
        else:
            self.pending.append((at_cycle, f"fault {kind} {channel} {node} {cycles}"))
            self.pending.sort()

    def due(self, k: int) -> None:
        """Real time: send the injections due at control cycle ``k``."""
        while self.pending and self.pending[0][0] <= k:
            self._send(self.pending.pop(0)[1])

    def _lead(self, token: str) -> None:
        """Real time: the cycle's ``v`` offered under ``token`` mirrored into the shared block
        from now on, and the simulation's prepared Leader made the world's wearer."""
        v = lead.claim(token)
        if v is None or self.lead is None:
            return
        self.lead.follow(v)
        self._send("lead")

    def _send(self, line: str) -> None:
        if self.process is not None:
            self.process.send(line)

    def close(self) -> None:
        try:
            for bus in getattr(self, "buses", []):
                bus.shutdown()
            if self.board is not None:
                self.board.close()
            if self.process is not None:
                self.process.stop()
        finally:  # the shared rows' name goes whatever failed (the simulation's mapping,
            if self.lead is not None:  # if it still runs, outlives it)
                self.lead.close()
            if self.world is not None:  # the registry forgets it (this object keeps it)
                from exo_rt.sim.simbus import SimWorld

                SimWorld.discard(self._world_name)
