"""The simulated CAN bus: a python-can interface (``interface="exo_sim"``) behind which
emulated drives and the plant answer, frame for frame.

A :class:`SimWorld` holds the plant and the emulated drives of every bus of a robot. In
*lockstep* timing the first SYNC of a period (on any bus) ends the period before: the plant
steps one period under the commands the drives applied at the last SYNC, then the drives apply
their newly latched RPDOs; each bus's drives answer their own SYNC with their TPDOs, sampled at
that instant. So, as on the exoskeleton's bus, a command acts from the SYNC after the
measurement it was computed from (one period of transport delay). A host with several buses
sends every bus's RPDOs before the SYNCs (:meth:`exo_rt.bus.drives.Drives.send_rpdos`, then
``send_sync``). Timestamps are simulated time, so two identical runs give identical frame logs.
The controller cannot tell this bus from hardware except by timing.

    world = SimWorld.open("default", robot, buses)           # once
    bus = can.Bus(interface="exo_sim", channel="leg")         # like any adapter
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass, field

import can
import numpy as np

from exo_rt.bus import cia402 as c
from exo_rt.bus import fixture as fx
from exo_rt.bus import protocols
from exo_rt.bus.config import FAULT_KINDS, BusConfig, frame_bits
from exo_rt.errors import BusError
from exo_rt.model.mechanism import Mechanism
from exo_rt.plugins import load_attr
from exo_rt.schema.buses import FOREIGN_KINDS
from exo_rt.sim import plants, world_truth
from exo_rt.sim.after_safe import Trail
from exo_rt.sim.plants import ST_I, ST_ON, ST_Q, ST_V, T_JOINT, T_ROTOR

# the emulated drives the simulation registers for families of exo_rt.bus.protocols (name →
# "module:Class", imported when a bus of that family opens), as python-can's interfaces are
# named from above the bus they serve: the bus layer names nothing of the simulation. A family
# not here names its own (Protocol.emulator).
EMULATORS = {"cia402": "exo_rt.sim.drive_emulator:EmulatedDrive"}


def emulator_class(family: protocols.Protocol) -> type:
    """The emulated drive of a drive-protocol family: registered here, else the family's."""
    ref = EMULATORS.get(family.name)
    return load_attr(ref) if ref else family.emulator_class()


@dataclass
class _Endpoint:
    config: BusConfig
    drives: list[tuple[object, int]]  # (emulated drive of the bus's family, transmission)
    fixture: int = 0  # the clamp mask of the rig's fixture node (bit k: k-th drive's output)
    rx: collections.deque = field(default_factory=collections.deque)
    synced: bool = False
    late: list = field(default_factory=list)  # delayed frames, sent after the next SYNC
    bits: int = 0  # bits the host has put on this bus since its last SYNC


class SimWorld:
    """The plant and every emulated drive of one simulated robot; ``plant_model`` names the
    registered plant model that simulates the leg (:mod:`exo_rt.sim.plants`), ``plant_room``
    where it stands (the top config's ``simulation:`` room keys)."""

    _worlds: dict[str, SimWorld] = {}

    def __init__(self, robot: Mechanism, buses: tuple[BusConfig, ...], dt: float = 1e-3,
                 substeps: int = 10, encoder_noise: float = 0.0, seed: int = 0,
                 fixture_node: int = fx.FIXTURE_NODE, plant_model: str = plants.DEFAULT,
                 plant_room: dict | None = None) -> None:
        self.plant = plants.create(plant_model, robot, dt=dt, substeps=substeps, room=plant_room)
        # the world's own truth after every period (a world on the floor; else None): the
        # recording's pelvis, ground reactions and seat, the board's foot-sole sensors
        self.truth = world_truth.for_world(self)
        # on the floor, the pelvis's height and the joints of the last periods: what a SAFE
        # end does to the wearer is measured from the fault's onset (exo_rt.sim.after_safe)
        self.trail = Trail(self.plant) if getattr(self.plant, "floor", False) else None
        # a leading wearer's muscles (exo_rt.sim.walker.Leader: a world on the floor, set when
        # the session begins), onto the plant's joints before each period; None: passive
        self.wearer = None
        self.encoder_noise = float(encoder_noise)  # counts (standard deviation)
        # the test rig's fixture (exo_rt.bus.fixture); 0: none, or when a drive has its node id
        taken = {d.node for bus in buses for d in bus.drives}
        self.fixture_node = 0 if fixture_node in taken else fixture_node
        self._rng = np.random.default_rng(seed)
        self.dt = dt
        self.t = 0.0
        self.cycle = 0
        # the period each transmission's power stage first came on (−1: not yet) — the drives
        # of different buses enable at their own SYNCs, and a plant replay must too (a seated
        # wearer's brakes released a period apart move the start it replays from)
        self.powered_at = np.full(len(robot.transmissions), -1, dtype=np.int64)
        self.transmission_joints = [tr.joint for tr in robot.transmissions]
        self.endpoints: dict[str, _Endpoint] = {}
        joint_to_tr = {tr.joint: n for n, tr in enumerate(robot.transmissions)}
        for bus in buses:  # each bus's family gives its emulated drive (the registry)
            emulated = emulator_class(protocols.get(bus.protocol))
            drives = []
            for d in bus.drives:
                drive = emulated.from_config(d, bus, dt)
                t = joint_to_tr[d.joint]
                drive.plant = lambda t=t: self._rotor(t)  # its motor's state, when it asks
                drives.append((drive, t))
            self.endpoints[bus.channel] = _Endpoint(bus, drives)
        self.cmd = np.zeros(len(robot.transmissions))
        self.faults: list[list] = []  # [kind, channel, node, last period it affects]
        self.scheduled: list[tuple[int, str, str, int, int]] = []  # (cycle, kind, bus, node, n)
        self.realtime = False  # True: the physics advances on the wall clock (advance())
        # real time: the wall-clock instant (s) the period being advanced ends at, given by
        # the serving loop that computes it ahead (None: when it is computed)
        self.stamp: float | None = None
        # real time: s after the physics' instant that the drives read their encoders (their
        # SYNC's arrival; negative: before it), each rotor's angle taken along its speed
        self.sample_offset = 0.0
        # real time, answer first (RealtimeServer): a SYNC's answers leave before the physics
        # reaches its arrival; the commands it latched wait here (per transmission: current
        # A, power stage on) until :meth:`commit` — the physics up to the SYNC runs under the
        # commands of the SYNC before, as on the exoskeleton's bus
        self.defer_apply = False
        self._pending: dict[str, list[tuple[int, float, bool]]] = {}
        self._into_period = 0.0  # real time: s of the current period already simulated
        self._injected_at = -1  # the period whose scheduled injections were applied
        self.motor_power = True  # the board's relay: off, no drive gets current
        self._lock = threading.RLock()
        # heartbeats on the simulated clock (every n-th period) — or, for drives served to
        # another process in lockstep, on the wall clock like real drives (SlcanServer)
        self.wall_heartbeats = False
        for bus in buses:  # fault injection by configuration
            for kind, node, at, duration in bus.faults:
                self.schedule(int(round(at / dt)), kind, bus.channel, node,
                              max(1, int(round(duration / dt))))

    # ---------------------------------------------------------------- real-time timing
    def advance(self, duration: float | None = None) -> None:
        """Real time: the physics of one period, or of ``duration`` s (at most a period). The
        serving loop of the simulation's own process (:class:`exo_rt.sim.server.RealtimeServer`)
        advances it to each SYNC's arrival (most of a period computed ahead of it); SYNCs then
        only apply the drives' latched commands and answer with the current state (the
        encoders read along the rotors' speeds at ``sample_offset``)."""
        with self._lock:
            self._physics(duration)

    def schedule(self, at_cycle: int, kind: str, channel: str, node: int, cycles: int) -> None:
        """Inject a fault at a given period (fault injection by configuration)."""
        self.scheduled.append((at_cycle, kind, channel, node, cycles))

    def inject(self, kind: str, channel: str, node: int, cycles: int = 1) -> None:
        """Fault injection on the drive ``node`` of bus ``channel`` for ``cycles`` periods:
        ``drop`` / ``corrupt`` / ``duplicate`` / ``delay`` (one period late) its TPDOs,
        ``encoder_glitch`` (position jumps by half a motor turn), ``heartbeat_loss``,
        ``bus_off`` (nothing on that bus, either way; ``node`` ignored),
        ``current_saturation`` (the drive delivers at most 20 % of its peak current),
        ``overcurrent`` (the drive measures 1.6 × its peak current), or
        ``fault`` (the drive enters FAULT, its power stage off, and sends an EMCY — latched
        until a reset)."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(FAULT_KINDS)}")
        if kind == "current_saturation":  # the drive's current limit drops to 20 %
            ep = self.endpoints[channel]
            drive = next(d for d, _t in ep.drives if d.node == node)
            drive.saturation = (self.cycle + cycles, 0.2 * drive.scale.peak_current)
            return
        if kind == "fault":  # the family's own fault state (CiA 402: FAULT and an EMCY)
            ep = self.endpoints[channel]
            drive = next(d for d, _t in ep.drives if d.node == node)
            for frame in drive.inject_fault():
                self._queue(ep, *frame)
            return
        if kind in FOREIGN_KINDS and kind != "foreign_sync":  # another master, one frame
            ep = self.endpoints[channel]
            self._foreign(ep, *{
                "foreign_nmt_stop": c.nmt(c.NMT_STOP, node),
                "foreign_nmt_reset": c.nmt(c.NMT_RESET_NODE, node),
                # its target torque, 6071h, set to half the rated torque (500 ‰)
                "foreign_sdo": c.sdo_download(node, 0x6071, 0, 500, 2),
                "foreign_heartbeat": c.heartbeat(ep.config.master_node, c.HB_OPERATIONAL),
            }[kind])
            return
        if kind == "bus_off":  # what socketcan hands the host: an error frame, bus-off class
            self.endpoints[channel].rx.append(can.Message(
                timestamp=self.t, arbitration_id=0x040, data=bytes(8), is_extended_id=False,
                is_error_frame=True, channel=channel))
        self.faults.append([kind, channel, node, self.cycle + cycles])  # last affected period

    def _active(self, channel: str, node: int | None) -> set[str]:
        return {f[0] for f in self.faults if f[1] == channel and f[3] >= self.cycle
                and (node is None or f[2] == node or f[0] == "bus_off")}

    @classmethod
    def open(cls, name: str, robot: Mechanism, buses: tuple[BusConfig, ...], **kw) -> SimWorld:
        """Create (replacing any former one) the world ``name``; buses then attach by channel.
        The registry keeps the worlds in the order they were opened, the newest last (a name
        used again moves to the end)."""
        world = cls(robot, buses, **kw)
        cls._worlds.pop(name, None)
        cls._worlds[name] = world
        return world

    @classmethod
    def discard(cls, name: str) -> None:
        """Forget the world ``name`` once its run is over (its buses shut down), so that a
        process running run after run does not keep every run's plant; none open: nothing."""
        cls._worlds.pop(name, None)

    @classmethod
    def get(cls, name: str) -> SimWorld:
        try:
            return cls._worlds[name]
        except KeyError:
            raise BusError(f"no simulated robot named '{name}' is open", None,
                           "open it first: SimWorld.open(name, robot, buses)") from None

    def reset(self, q_joints, **kw) -> None:
        self.plant.reset(q_joints, **kw)

    def warm_up(self, q_joints, **kw) -> None:
        """Compile the plant step (numba, seconds on a cold cache) before serving frames: one
        throw-away step at zero current, then the reset to ``q_joints`` again. A server that
        compiled on its first frame would stall the controller's bring-up meanwhile. With a
        fixture node, its load cells' torques too: compiled at the first clamp, they held the
        served drives' replies back for longer than the bench's cycle waits, and the stiffness
        identification aborted on stale feedback (seen with a cold cache)."""
        self.plant.reset(q_joints, **kw)
        self.plant.step(np.zeros_like(self.cmd))
        if self.fixture_node:
            self.plant.output_torques  # noqa: B018  (compiled here, not at the first clamp)
        if self.truth is not None:  # (its row's kernel too, taken after every period)
            self.truth.prepare()
        self.plant.reset(q_joints, **kw)

    # ---------------------------------------------------------------- frames
    def receive(self, channel: str, msg: can.Message) -> None:
        ep = self.endpoints[channel]
        if msg.is_error_frame or msg.is_remote_frame or "bus_off" in self._active(channel, None):
            return
        data = bytes(msg.data)
        arb = msg.arbitration_id  # the cyclic traffic shares the period's bits (bring-up's
        if arb == c.SYNC or any(d.cyclic(arb, data) for d, _ in ep.drives):  # frames aside)
            ep.bits += frame_bits(len(data))
        if msg.arbitration_id == c.SYNC:
            with self._lock:
                if self.realtime:  # the physics thread keeps time; SYNC applies and answers
                    if self.defer_apply:  # (the serving loop commits them: commit())
                        self._pending[channel] = self._latched(ep)
                    else:
                        self._apply(ep)
                # lockstep: the first SYNC of a period (or a bus's second one) ends the period
                # before; every bus's drives answer their own SYNC from the state at this SYNC
                elif ep.synced or not any(e.synced for e in self.endpoints.values()):
                    for e in self.endpoints.values():
                        e.synced = False
                    self._step()
                ep.synced = True
                self._reply(ep)
            return
        if self.fixture_node and msg.arbitration_id == fx.COMMAND + self.fixture_node:
            self._clamp(ep, fx.decode_command(data))
            return
        with self._lock:
            for drive, _t in ep.drives:
                for arb, payload in drive.handle(msg.arbitration_id, data):
                    self._queue(ep, arb, payload)

    def _foreign(self, ep: _Endpoint, arb: int, data: bytes) -> None:
        """Another node on the bus sends a frame: every node sees it (the controller too, in
        its receive queue) and the drives act on it as on any frame."""
        self._queue(ep, arb, data)
        with self._lock:
            for drive, _t in ep.drives:
                for reply in drive.handle(arb, data):
                    self._queue(ep, *reply)

    def _clamp(self, ep: _Endpoint, mask: int | None) -> None:
        """The fixture clamps (bit set) or releases the outputs of the bus's drives' joints."""
        if mask is None:
            return
        with self._lock:
            ep.fixture = mask
            for k, (_, t) in enumerate(ep.drives):
                self.plant.lock(self.plant.robot.transmissions[t].joint, bool(mask >> k & 1))

    def _queue(self, ep: _Endpoint, arb: int, payload: bytes) -> None:
        ep.rx.append(can.Message(timestamp=self.t, arbitration_id=arb, data=payload,
                                 is_extended_id=False, channel=ep.config.channel))

    def _step(self) -> None:
        """Lockstep, at a period's first SYNC: the physics of the period that ends now (under
        the commands applied at the last SYNC), then every drive applies its latched command."""
        self._physics()
        for ep in self.endpoints.values():
            self._apply(ep)

    def _rotor(self, t: int) -> tuple[float, float, float]:
        """(angle, speed, actual current) of transmission t's rotor."""
        state = self.plant.state
        r = int(self.plant.transmissions[t, T_ROTOR])
        return state[ST_Q, r], state[ST_V, r], state[ST_I, t]

    def _apply(self, ep: _Endpoint) -> None:
        """The drives' latched commands become the plant's current commands."""
        self._install(self._latched(ep))

    def _latched(self, ep: _Endpoint) -> list[tuple[int, float, bool]]:
        """What a SYNC makes of the bus's drives' latched commands: (transmission, current
        A, power stage on) each — the drives' own state taken at the SYNC."""
        out = []
        for drive, t in ep.drives:
            cmd = drive.on_sync()
            until, limit = drive.saturation
            if self.cycle < until:
                cmd = max(-limit, min(limit, cmd))
            out.append((t, cmd, drive.power_on))
        return out

    def _install(self, latched: list[tuple[int, float, bool]]) -> None:
        for t, cmd, on in latched:
            self.cmd[t] = cmd
            self._power(t, on)

    def commit(self, channel: str) -> None:
        """Real time, answer first: the commands ``channel``'s last SYNC latched become the
        plant's (the physics has reached that SYNC's arrival)."""
        with self._lock:
            latched = self._pending.pop(channel, None)
            if latched is not None:
                self._install(latched)

    def _power(self, t: int, on: bool) -> None:
        """Transmission t's power stage on or off for the coming period."""
        self.plant.state[ST_ON, t] = 1.0 if on else 0.0
        if on and self.powered_at[t] < 0:
            self.powered_at[t] = self.cycle

    def _physics(self, duration: float | None = None) -> None:
        """The plant over one period (or ``duration`` s: real time only)."""
        if self._injected_at != self.cycle:  # a period begins: its scheduled injections
            self._injected_at = self.cycle
            for at, kind, channel, node, n in self.scheduled:
                if at == self.cycle:
                    self.inject(kind, channel, node, n)
        plant = self.plant
        for ep in self.endpoints.values():  # each drive's own clock, SYNCs or not: its
            for drive, t in ep.drives:  # heartbeat and SYNC watchdogs, its quick stop ramp
                for frame in drive.tick(self.t):
                    self._queue(ep, *frame)
                if not drive.enabled:  # stopped (by itself, or told) since its SYNC
                    self.cmd[t] = drive.current_command()
                    self._power(t, drive.power_on)
        if not self.motor_power:  # the relay is open: no current, whatever the drives say
            self.cmd[:] = 0.0
            plant.state[ST_ON, : len(self.cmd)] = 0.0
        if self.wearer is not None:
            self.wearer.apply(plant.state, self.truth.force, self.t)
        cycle = self.cycle
        if duration is None:
            plant.step(self.cmd)
            self.t += self.dt
            self.cycle += 1
        else:
            plant.step(self.cmd, duration)
            self.t += duration
            self._into_period += duration
            while self._into_period >= self.dt * (1.0 - 1e-9):
                self._into_period -= self.dt
                self.cycle += 1
        self.faults = [f for f in self.faults if f[3] >= self.cycle]
        if self.truth is not None and self.cycle != cycle:  # (real time: once a period)
            self.truth.update(self)
        if self.trail is not None and self.cycle != cycle:
            self.trail.put(self.t, self.cycle)

    def _reply(self, ep: _Endpoint) -> None:
        """A bus's TPDOs (and heartbeats when due) after its SYNC, faults applied."""
        plant = self.plant
        budget = ep.config.bitrate * self.dt  # bits the bus carries in one period
        late, ep.late = ep.late, []
        for msg in late:  # last period's late frames go first, if there is room; else lost
            ep.bits += frame_bits(len(msg.data))
            if ep.bits <= budget:
                ep.rx.append(msg)  # stamped when it was due: a late frame is an old one
        for drive, t in ep.drives:
            faults = self._active(ep.config.channel, drive.node)
            if "bus_off" in faults:
                continue
            r = int(plant.transmissions[t, T_ROTOR])
            rotor = plant.state[ST_Q, r] + plant.state[ST_V, r] * self.sample_offset
            if self.encoder_noise > 0.0:  # counts, Gaussian, seeded: runs stay reproducible
                rotor += self._rng.normal(0.0, self.encoder_noise) * 2 * math.pi / (
                    drive.scale.counts_per_rev)
            if "encoder_glitch" in faults:
                rotor += math.pi  # half a motor turn: a lost index or a bit error
            current = plant.currents[t]
            if "overcurrent" in faults:  # a shorted phase: the drive measures 1.6 × its peak
                current = 1.6 * drive.scale.peak_current
            for frame in drive.sync_frames(rotor, current):  # TPDO, or this period's replies
                if "drop" in faults:
                    continue
                if "corrupt" in faults:
                    frame = (frame[0], frame[1][:5])  # a truncated frame
                ep.bits += frame_bits(len(frame[1]))
                if "delay" in faults or ep.bits > budget:  # late: the bus is full this period
                    ep.late.append(can.Message(timestamp=self.t, arbitration_id=frame[0],
                                               data=frame[1], is_extended_id=False,
                                               channel=ep.config.channel))
                else:
                    self._queue(ep, *frame)
                    if "duplicate" in faults:
                        self._queue(ep, *frame)
            hb = drive.heartbeat_ms
            due = hb and self.cycle % max(1, int(round(hb * 1e-3 / self.dt))) == 0
            if due and not self.wall_heartbeats and "heartbeat_loss" not in faults:
                self._queue(ep, *drive.heartbeat())  # (drives with heartbeat_ms)
        if any(f[0] == "foreign_sync" and f[1] == ep.config.channel and f[3] >= self.cycle
               for f in self.faults):  # another node's SYNC: the drives answer it too
            self._queue(ep, c.SYNC, b"")
            self._apply(ep)
            for drive, t in ep.drives:
                rotor = plant.state[ST_Q, int(plant.transmissions[t, T_ROTOR])]
                for frame in drive.sync_frames(rotor, plant.currents[t]):
                    self._queue(ep, *frame)
        if ep.fixture:  # the load cells: −the torque each clamped output's transmission passes
            torques = plant.output_torques
            self._queue(ep, *fx.measurement(self.fixture_node, [
                -float(torques[t]) if ep.fixture >> k & 1 else 0.0
                for k, (_, t) in enumerate(ep.drives)]))
        ep.bits = 0

    def heartbeats(self, channel: str, period_ms: float) -> list[can.Message]:
        """The heartbeats of ``channel``'s drives whose period is ``period_ms`` (wall clock)."""
        with self._lock:
            ep = self.endpoints[channel]
            out = []
            for drive, _ in ep.drives:
                faults = self._active(channel, drive.node)
                if drive.heartbeat_ms == period_ms and "heartbeat_loss" not in faults:
                    arb, data = drive.heartbeat()
                    out.append(can.Message(timestamp=self.t, arbitration_id=arb, data=data,
                                           is_extended_id=False, channel=channel))
            return out

    def joint_of(self, t: int) -> int:
        return int(self.plant.transmissions[t, T_JOINT])


class SimBus(can.BusABC):
    """python-can bus on a :class:`SimWorld`: ``can.Bus(interface="exo_sim", channel=…)``."""

    def __init__(self, channel: str, world: str = "default", **kwargs) -> None:
        self._world = SimWorld.get(world)
        if channel not in self._world.endpoints:
            raise BusError(f"the simulated robot '{world}' has no bus '{channel}'", None,
                           f"use one of {', '.join(self._world.endpoints)}")
        self.channel_info = f"exo_sim {world}:{channel}"
        self._channel = channel
        super().__init__(channel=channel, **kwargs)

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        self._world.receive(self._channel, msg)

    def _recv_internal(self, timeout: float | None):
        rx = self._world.endpoints[self._channel].rx
        if rx:
            return rx.popleft(), False
        if timeout:  # a blocking reader (a canopen Notifier at bring-up): wait, GIL released
            time.sleep(min(timeout, 1e-4))
        return None, False

    def shutdown(self) -> None:
        super().shutdown()
