"""The simulated bus: bring-up frame by frame, lockstep determinism, physics through the bus,
fault visibility, bus load."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import can
import numpy as np
import pytest

from exo_rt.bus import cia402 as c
from exo_rt.bus.config import load_buses
from exo_rt.bus.drives import Drives
from exo_rt.bus.flags import (
    F_DUPLICATE,
    F_FAULT,
    F_GLITCH,
    F_HEARTBEAT,
    F_MALFORMED,
    F_MISSING,
    F_SATURATED,
)
from exo_rt.bus.port import FramePort
from exo_rt.errors import BusError, ConfigError
from exo_rt.model import load_mechanism
from exo_rt.sim import Plant
from exo_rt.sim.simbus import SimWorld

ROOT = Path(__file__).resolve().parents[1]
KNEE_90 = [0.0, math.pi / 2]


def _open(robot_name: str, bus_name: str, world: str):
    robot = load_mechanism(ROOT / "configs" / "robots" / f"{robot_name}.yaml")
    buses = load_buses(ROOT / "configs" / "buses" / f"{bus_name}.yaml", robot)
    sim = SimWorld.open(world, robot, buses)
    sim.reset(KNEE_90 * (robot.nq // 2))
    drives = []
    for b in buses:
        bus = can.Bus(interface="exo_sim", channel=b.channel, world=world)
        drives.append(Drives(bus, b, robot))
    return robot, sim, drives


def _cycle_all(drives, currents):
    for d in drives:
        d.send_rpdos(currents[: d.n])
    for d in drives:
        d.send_sync()
    for d in drives:
        d.collect()


@pytest.mark.parametrize(("robot", "buses"), [("exo_leg", "exo_leg"), ("exo_2leg", "exo_2leg")])
def test_bring_up_to_operation_enabled(robot, buses):
    _robot, sim, drives = _open(robot, buses, f"bringup-{robot}")
    sent = []
    for d in drives:
        original = d.bus.send
        d.bus.send = lambda msg, timeout=None, o=original: (sent.append(
            (msg.arbitration_id, bytes(msg.data))), o(msg))[1]
        d.configure()
    ids = [a for a, _ in sent]
    # NMT pre-operational, SDO set-up of mode 10 and the heartbeat, mapping read, NMT start
    assert sent[0] == c.nmt(c.NMT_PRE_OPERATIONAL, 0)
    assert c.sdo_download(1, 0x6060, 0, 10, 1) in sent
    assert c.nmt(c.NMT_START, 0) in sent and ids.count(0x601) >= 6
    for ep in sim.endpoints.values():
        for drive, _t in ep.drives:
            assert drive.nmt_state == c.HB_OPERATIONAL and drive.mode == c.MODE_CST
    # the power state machine: shutdown (0x06) then enable operation (0x0F), as RPDOs
    for _ in range(2):
        for d in drives:
            for k in range(d.n):
                st = c.state_of(int(d.statusword[k])) if d.seen[k] else None
                d.controlword[k] = (c.CW_SHUTDOWN if st in (None, c.SWITCH_ON_DISABLED)
                                    else c.CW_ENABLE_OPERATION)
        _cycle_all(drives, np.zeros(2))
    _cycle_all(drives, np.zeros(2))
    for d in drives:
        assert all(c.state_of(int(sw)) == c.OPERATION_ENABLED for sw in d.statusword)
    cws = [c.decode_rpdo1(p)[0] for a, p in sent if a == 0x201]
    assert cws[0] == c.CW_SHUTDOWN and c.CW_ENABLE_OPERATION in cws


def _run(world: str, cycles: int, current):
    robot, sim, (d,) = _open("exo_leg", "exo_leg", world)
    log = []
    d.configure()
    d.enable()
    for k in range(cycles):
        d.send_commands(current(k))
        while (msg := d.bus.recv(0)) is not None:
            log.append((msg.timestamp, msg.arbitration_id, bytes(msg.data)))
            d._frame(msg)
    return robot, sim, d, log


def test_lockstep_runs_are_bit_identical():
    def current(k):
        return np.array([2.0 * math.sin(k / 50), -1.0])

    *_, log_a = _run("det-a", 300, current)
    *_, log_b = _run("det-b", 300, current)
    assert len(log_a) > 600 and log_a == log_b


def test_passive_current_through_the_bus_equals_the_plant_alone():
    robot, sim, d, _ = _run("phys", 500, lambda k: np.zeros(2))
    alone = Plant(robot)
    alone.reset(KNEE_90)
    for _ in range(sim.cycle):
        alone.step([0.0, 0.0])
    np.testing.assert_allclose(sim.plant.state, alone.state, rtol=0, atol=1e-12)


def test_measured_positions_follow_a_current_step():
    robot, sim, d, _ = _run("step", 300, lambda k: np.array([0.0, -12.0 if k > 50 else 0.0]))
    quantum = 2 * math.pi / 65536 / 100
    rotor = sim.plant.motor_positions / np.array([t.multiplier for t in robot.transmissions])
    assert np.max(np.abs(d.position - rotor)) <= quantum
    # −12 A: +48 N·m at the knee (k = −100) beats gravity and the drive's load-dependent
    # friction, and lifts the shank
    assert d.position[1] > math.pi / 2 + 0.05


@pytest.mark.parametrize(("kind", "flag"), [
    ("drop", F_MISSING), ("corrupt", F_MALFORMED), ("duplicate", F_DUPLICATE),
    ("delay", F_MISSING), ("encoder_glitch", F_GLITCH), ("fault", F_FAULT),
    ("current_saturation", F_SATURATED)])
def test_injected_faults_are_flagged_within_one_cycle(kind, flag):
    robot, sim, (d,) = _open("exo_leg", "exo_leg", f"fault-{kind}")
    d.configure()
    d.enable()
    d.cycle(np.zeros(2))
    assert not d.flags.any()
    sim.inject(kind, "leg", 2, cycles=3)
    d.cycle(np.array([0.0, -12.0]) if kind == "current_saturation" else np.zeros(2))
    assert d.flags[1] & flag and not d.flags[0]
    if kind == "fault":
        assert d.emcy_codes == [(2, c.EMCY_OVERCURRENT)]
        for _ in range(5):
            d.cycle(np.zeros(2))
        assert c.state_of(int(d.statusword[1])) == c.FAULT  # latched: no silent re-enable
        d.fault_reset()
        d.cycle(np.zeros(2))
        assert c.state_of(int(d.statusword[1])) in (c.SWITCH_ON_DISABLED, c.READY_TO_SWITCH_ON)
        d.enable()
        assert c.state_of(int(d.statusword[1])) == c.OPERATION_ENABLED


def test_bus_load_refuses_four_drives_on_one_bus(tmp_path):
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml")
    path = tmp_path / "one.yaml"
    path.write_text("buses:\n  - name: all\n    drives:\n" + "".join(
        f"      - {{joint: {j}, node: {k + 1}}}\n" for k, j in enumerate(robot.joint_names)))
    with pytest.raises(ConfigError, match="98 % loaded"):
        load_buses(path, robot)
    two = load_buses(ROOT / "configs" / "buses" / "exo_2leg.yaml", robot)
    assert [round(b.load(1000), 3) for b in two] == [0.515, 0.515]
    res = subprocess.run([sys.executable, "-m", "exo_rt", "check",
                          str(ROOT / "configs" / "robots" / "exo_2leg.yaml"), "--buses", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "98 % loaded" in res.stderr and "Traceback" not in res.stderr


def test_missing_drive_fails_bring_up_clearly():
    robot, sim, (d,) = _open("exo_leg", "exo_leg", "missing")
    sim.endpoints["leg"].drives.pop()  # node 2 is not on the bus
    d.sdo_timeout = 0.05
    from exo_rt.errors import BusError

    with pytest.raises(BusError, match="drive 2 on bus 'leg' does not answer SDO"):
        d.configure()


def test_heartbeat_loss_and_bus_off_are_flagged():
    robot, sim, (d,) = _open("exo_leg", "exo_leg", "hb")
    d.configure()
    d.enable()
    for _ in range(150):
        d.cycle(np.zeros(2))
    assert not (d.flags & F_HEARTBEAT).any()
    sim.inject("heartbeat_loss", "leg", 1, cycles=400)
    flagged = []
    for k in range(400):
        d.cycle(np.zeros(2))
        if d.flags[0] & F_HEARTBEAT:
            flagged.append(k)
    # the first missed heartbeat is noticed 3 periods (300 ms) after the last one
    assert flagged and flagged[0] <= 300 and not (d.flags[1] & F_HEARTBEAT)
    sim.inject("bus_off", "leg", 0, cycles=5)
    d.cycle(np.zeros(2))
    assert (d.flags & F_MISSING).all()


def test_an_overloaded_simulated_bus_delivers_frames_late():
    """Four drives on one 500 kbit/s bus need ≈ 975 bits per 1 ms period for 500: the TPDOs
    that do not fit arrive a period late (the host sees them missing, then stale)."""
    import dataclasses

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml")
    left, right = load_buses(ROOT / "configs" / "buses" / "exo_2leg.yaml", robot)
    drives = tuple(dataclasses.replace(d, node=k + 1)
                   for k, d in enumerate(left.drives + right.drives))
    one = dataclasses.replace(left, name="all", channel="all", drives=drives, bitrate=500_000)
    assert one.load(1000) > 1.0
    sim = SimWorld.open("overload", robot, (one,))
    sim.reset([0.0, 0.5, 0.0, 0.5])
    host = Drives(can.Bus(interface="exo_sim", channel="all", world="overload"), one, robot)
    host.configure()
    late = 0
    for _ in range(20):
        host.cycle(np.zeros(4))
        late += int((host.flags & F_MISSING).sum())
    assert late >= 20  # at least one drive's TPDO misses every cycle
    ok = load_buses(ROOT / "configs" / "buses" / "exo_2leg.yaml", robot)
    sim2 = SimWorld.open("fits", robot, ok)
    sim2.reset([0.0, 0.5, 0.0, 0.5])
    h2 = Drives(can.Bus(interface="exo_sim", channel="left", world="fits"), ok[0], robot)
    h2.configure()
    for _ in range(20):
        h2.cycle(np.zeros(2))
        assert not (h2.flags & F_MISSING).any()


def test_faults_from_the_bus_file(tmp_path):
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    path = tmp_path / "faulty.yaml"
    eds = str(ROOT / "configs" / "buses" / "eds" / "exo_drive.eds")
    path.write_text((ROOT / "configs" / "buses" / "exo_leg.yaml").read_text()
                    .replace("eds/exo_drive.eds", eds) +
                    "    faults:\n      - {kind: drop, node: 2, at: 0.050, duration: 0.003}\n")
    buses = load_buses(path, robot)
    sim = SimWorld.open("cfg-faults", robot, buses)
    sim.reset(KNEE_90)
    d = Drives(can.Bus(interface="exo_sim", channel="leg", world="cfg-faults"), buses[0], robot)
    d.configure()
    d.enable()
    missed = []
    while sim.cycle < 100:
        d.cycle(np.zeros(2))
        if d.flags[1] & F_MISSING:
            missed.append(sim.cycle)
    assert missed == [51, 52, 53]
    path.write_text(path.read_text().replace("kind: drop", "kind: dorp"))
    with pytest.raises(ConfigError, match="unknown fault kind 'dorp'.*did you mean 'drop'"):
        load_buses(path, robot)


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_world_samples_the_leg_at_each_sync():
    """Real time: each SYNC advances the physics to its arrival, jitter and a stalled
    master's late SYNC included — the drives sample when the
    SYNC arrives; a gap longer than MAX_CATCH_UP (this process held up) is not made up, the
    rest counted in periods."""
    from exo_rt.sim.server import MAX_CATCH_UP, RealtimeServer

    robot, sim, (d,) = _open("exo_leg", "exo_leg", "rt")
    d.configure()
    d.enable()
    server = RealtimeServer(sim, {})
    t = server._t_phys = 1000.0
    t_sim = sim.t
    for late in (0.0003, 0.0, 0.0002, 0.0, 0.00045, 0.0, 0.0):
        t += 1e-3
        server._advance_to(t + late)  # SYNCs due 1 ms apart, some late (0.3 ms, …)
        assert sim.t - t_sim == pytest.approx(t + late - 1000.0, abs=1e-9)
    assert server.overruns == 0
    server._advance_to(t + 5e-3)  # a master stalled 5 ms: the leg moved meanwhile
    assert sim.t - t_sim == pytest.approx(t + 5e-3 - 1000.0, abs=1e-9)
    assert server.overruns == 0
    server._advance_to(t + 5e-3 + MAX_CATCH_UP + 0.2)  # this process held up 0.25 s
    assert sim.t - t_sim == pytest.approx(t + 5e-3 + MAX_CATCH_UP - 1000.0, abs=1e-9)
    assert server.overruns == 200


def _served_leg(world: str):
    """exo_leg's drives enabled, its world served in real time from the monotonic instant
    1000 s: (the world, its server, reached() — the instant its physics has reached)."""
    from exo_rt.sim.server import RealtimeServer

    _robot, sim, (d,) = _open("exo_leg", "exo_leg", world)
    d.configure()
    d.enable()
    server = RealtimeServer(sim, {})
    server._t_phys = 1000.0
    t_sim = sim.t
    return sim, server, lambda: 1000.0 + sim.t - t_sim


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_world_computes_the_coming_period_ahead():
    """Between two SYNCs the drives' latched currents hold, so once a SYNC is answered the
    physics is computed up to GUARD before the next is due on the master's grid; the next
    SYNC waits only for the rest. A late SYNC (a long control cycle) leaves the grid where
    it was; a SYNC earlier than the grid (a master that began a new one) moves it and, if it
    finds the physics past its arrival, is counted."""
    from exo_rt.sim.server import GUARD, SETTLE

    sim, server, reached = _served_leg("ahead")
    T, t = server.period, server._t_phys

    server._sync_arrived(t + T)  # on the grid
    assert reached() == pytest.approx(t + T, abs=1e-9)
    server._sync_arrived(t + T + 20e-6)  # the other bus's SYNC of the same cycle: no step
    assert reached() == pytest.approx(t + T, abs=1e-9)
    assert server._ahead_at == pytest.approx(t + T + 20e-6 + SETTLE * T)
    server._compute_ahead()
    assert reached() == pytest.approx(t + 2 * T - GUARD * T, abs=1e-9)
    n = server.n_physics
    server._sync_arrived(t + 2 * T + 40e-6)  # 40 µs late: only the rest is computed now
    assert reached() == pytest.approx(t + 2 * T + 40e-6, abs=1e-9)
    assert server.n_physics == n + 1
    server._compute_ahead()
    assert reached() == pytest.approx(t + 3 * T - GUARD * T, abs=1e-9)
    server._sync_arrived(t + 3 * T + 0.8 * T)  # a control cycle that waited for answers
    server._compute_ahead()  # ahead to the grid's next SYNC, not a period after this one
    assert reached() == pytest.approx(t + 4 * T - GUARD * T, abs=1e-9)
    server._sync_arrived(t + 4 * T + 0.95 * T)  # later still: its next SYNC is in 0.05 T
    server._compute_ahead()
    assert reached() == pytest.approx(t + 4.95 * T, abs=1e-9)  # (nothing computed ahead)
    server._sync_arrived(t + 5 * T + 40e-6)
    assert server.ahead == 0
    early = t + 6 * T - 0.3 * T  # a new grid, 0.3 periods earlier: past the physics'
    server._compute_ahead()
    server._sync_arrived(early)
    assert server.ahead == 1
    assert reached() == pytest.approx(t + 6 * T - GUARD * T, abs=1e-9)  # (not undone)
    server._compute_ahead()
    assert reached() == pytest.approx(early + T - GUARD * T, abs=1e-9)  # the new grid's
    server._sync_arrived(early + T)
    assert server.ahead == 1 and reached() == pytest.approx(early + T, abs=1e-9)
    assert server.overruns == 0


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_world_expects_a_late_master_s_sync_late():
    """A controller whose cycles wait for late answers sends its SYNCs late for a while: the
    coming period is computed up to the least late of the last LATE_CYCLES SYNCs (less
    GUARD), so the next one waits for a tenth of a period, not for the lateness; a SYNC on
    time again finds the physics past its arrival, is answered from it (the encoders read
    back along the rotors' speeds) and counted, and the cycles after it are expected on time."""
    from exo_rt.sim.server import GUARD, LATE_CYCLES

    sim, server, reached = _served_leg("late")
    T, t = server.period, server._t_phys

    server._sync_arrived(t + T)  # the grid
    server._compute_ahead()
    for k in range(2, 2 + LATE_CYCLES):  # half a period late, cycle after cycle
        assert reached() < t + k * T + 0.5 * T
        server._sync_arrived(t + k * T + 0.5 * T)
        server._compute_ahead()
    k = 2 + LATE_CYCLES
    assert reached() == pytest.approx(t + k * T + 0.5 * T - GUARD * T, abs=1e-9)
    server._sync_arrived(t + k * T + 0.5 * T)  # only a tenth of a period to compute now
    assert reached() == pytest.approx(t + k * T + 0.5 * T, abs=1e-9)
    assert server.ahead == 0
    server._compute_ahead()
    on_time = t + (k + 1) * T + 0.05 * T  # the answers came in time again
    server._sync_arrived(on_time)
    assert server.ahead == 1
    assert sim.sample_offset == pytest.approx(-0.35 * T, abs=1e-9)  # read back 0.35 periods
    server._compute_ahead()
    # the next expected on time: the least late of the last cycles is this one
    assert reached() == pytest.approx(t + (k + 2) * T + 0.05 * T - GUARD * T, abs=1e-9)
    for j in range(k + 2, k + 2 + LATE_CYCLES):  # on time, cycle after cycle
        server._sync_arrived(t + j * T + 0.05 * T)
        server._compute_ahead()
    assert reached() == pytest.approx(t + (k + 2 + LATE_CYCLES) * T + 0.05 * T - GUARD * T,
                                      abs=1e-9)  # expected on time again
    assert server.ahead == 1


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_drives_read_their_encoders_at_their_sync_s_arrival():
    """A SYNC answered from physics that is not at its arrival (within JITTER of it, or
    computed past it) reads each encoder where the rotor's speed takes it by the arrival."""
    import struct

    from exo_rt.sim.plants import ST_Q, ST_V, T_ROTOR
    from exo_rt.sim.server import RealtimeServer

    robot, sim, (d,) = _open("exo_leg", "exo_leg", "offset")
    d.configure()
    d.enable()
    server = RealtimeServer(sim, {})
    channel, ep = next(iter(sim.endpoints.items()))
    rotors = sim.plant.transmissions[:, T_ROTOR].astype(int)
    speed = np.array([150.0, -300.0])  # rad/s at the motors
    t_sim = sim.t
    for offset in (0.0, 40e-6, -3e-4):
        sim.plant.state[ST_V, rotors] = speed
        server._t_phys = 1000.0
        server._sync_arrived(1000.0 + offset)
        assert sim.sample_offset == pytest.approx(offset, abs=1e-12)
        assert sim.t == t_sim  # (no physics: within JITTER, or past the arrival)
        ep.rx.clear()
        sim.receive(channel, can.Message(arbitration_id=c.SYNC, data=b""))
        counts = {m.arbitration_id - 0x180: struct.unpack_from("<i", bytes(m.data), 2)[0]
                  for m in ep.rx if 0x181 <= m.arbitration_id <= 0x1FF}  # TPDO1: position
        read = np.array([counts[drive.node] for drive, _ in ep.drives]) * 2 * math.pi / 65536
        expected = sim.plant.state[ST_Q, rotors] + speed * offset  # rad at the motors
        assert read == pytest.approx(expected, abs=2 * math.pi / 65536)  # (a count)
    assert server.ahead == 1


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_serving_answers_every_bus_s_sync_before_computing_ahead():
    """The serving loop computes the coming period ahead only in a turn that found no frame
    waiting: a bus whose SYNC is read a turn later than the other's (it came in meanwhile) is
    answered from the physics at its arrival, not from the period computed past it."""
    import time as wall

    from exo_rt.sim.server import GUARD, RealtimeServer

    class Port(FramePort):  # a bus's socket: its SYNC, readable from the given turn on
        def __init__(self, turn):
            super().__init__(None)
            self.sync = can.Message(arbitration_id=c.SYNC, data=b"")
            self.from_turn, self.turn, self.sent = turn, 0, []

        def recv(self):
            if self.turn < self.from_turn or self.sync is None:
                return None
            if self.from_turn == 0:  # the first bus's SYNC arrives now, the other's 10 µs on
                self.sync.timestamp = wall.time()
                ports[right].sync.timestamp = self.sync.timestamp + 1e-5
            frame, self.sync = self.sync, None
            return frame

        def send(self, arbitration_id, data, extended=False):
            self.sent.append(arbitration_id)
            wall.sleep(1e-4)  # (a slow turn: past the moment the period would be computed)

    robot, sim, drives = _open("exo_2leg", "exo_2leg", "turns")
    for d in drives:
        d.configure()
        d.enable()
    left, right = (d.config.channel for d in drives)
    ports = {left: Port(0), right: Port(1)}  # the right bus's SYNC is read a turn later
    server = RealtimeServer(sim, ports)
    turns = iter(range(3))  # the left SYNC, the right one, the period computed ahead

    def stop():
        k = next(turns, 99)
        for port in ports.values():
            port.turn = k
        return k == 99

    server.serve(stop=stop, poll_s=1e-5)
    assert server.ahead == 0  # the right bus's SYNC: from the physics at its arrival
    # then, in the turn after, the period computed ahead (or, on a machine that held this
    # process 1.5 periods, run on by itself: past it too)
    assert server._t_phys >= server._due - GUARD * server.period - 1e-9
    for port in ports.values():  # each bus's drives answered their SYNC
        assert sum(0x180 < a < 0x200 for a in port.sent) == 2, port.sent


class _OneFramePort(FramePort):
    """A bus's socket for the serving loop's tests: ``pending`` is read once; what is sent is
    kept with what the physics had reached as it left (id, data, time s, commands A). The
    tables the loop reads and sends are the per-frame path's (FramePort)."""

    def __init__(self, sim):
        super().__init__(None)
        self.sim, self.pending, self.sent = sim, None, []

    def recv(self):
        frame, self.pending = self.pending, None
        return frame

    def send(self, arbitration_id, data, extended=False):
        self.sent.append((arbitration_id, bytes(data), self.sim.t, self.sim.cmd.copy()))


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_serving_answers_a_sync_before_the_physics_reaches_it():
    """Answer first: a SYNC that comes 0.3 period after the physics' instant is answered at
    once — the TPDOs leave while the physics is still where it was, each encoder read along its
    rotor's speed to the SYNC's arrival — and then the physics is computed up to the arrival
    under the commands of the SYNC before; only after it do the commands this SYNC latched act.
    A SYNC over ANSWER_FIRST periods late waits for its physics, as before."""
    import struct
    import time as wall

    from exo_rt.sim.plants import ST_Q, ST_V, T_ROTOR
    from exo_rt.sim.server import ANSWER_FIRST, RealtimeServer

    _robot, sim, (d,) = _open("exo_leg", "exo_leg", "first")
    d.configure()
    d.enable()
    (channel,) = sim.endpoints
    drives = [drive for drive, _ in sim.endpoints[channel].drives]
    rotors = sim.plant.transmissions[:, T_ROTOR].astype(int)
    T = sim.dt

    port = _OneFramePort(sim)  # its SYNC arrives `late` s after the physics' instant
    server = RealtimeServer(sim, {channel: port})
    steps = []  # the commands each physics step ran under
    step = sim.plant.step
    sim.plant.step = lambda cmd=None, duration=None: (steps.append(np.array(cmd)),
                                                      step(cmd, duration))
    for late, first in ((0.3 * T, True), ((ANSWER_FIRST + 0.3) * T, False)):
        sim.plant.state[ST_V, rotors] = speed = np.array([200.0, -100.0])  # rad/s at the motors
        before = sim.cmd.copy()
        for k, drive in enumerate(drives):  # an RPDO's new target, latched for this SYNC
            drive.target_permille = 300 * (k + 1) * (1 if first else -1)
        q0, t_sim, port.sent[:] = sim.plant.state[ST_Q, rotors].copy(), sim.t, []
        steps.clear()
        server._t_phys = wall.monotonic() - late
        port.pending = can.Message(arbitration_id=c.SYNC, data=b"", timestamp=wall.time())
        server._answer()
        tpdos = [m for m in port.sent if 0x181 <= m[0] <= 0x1FF]
        assert len(tpdos) == len(drives), port.sent
        if first:  # sent from the physics where it was, under the old commands
            assert all(m[2] == t_sim and np.array_equal(m[3], before) for m in tpdos)
            counts = {m[0] - 0x180: struct.unpack_from("<i", m[1], 2)[0] for m in tpdos}
            read = np.array([counts[drive.node] for drive in drives]) * 2 * math.pi / 65536
            # (the arrival 0.3 T after the physics, within this turn's own few hundred µs)
            assert read == pytest.approx(q0 + speed * late, abs=np.abs(speed).max() * 3e-4)
            assert not steps  # no physics yet
            server.settle()  # (the serving loop's, once the answers are out)
        else:  # over ANSWER_FIRST late: the physics to the arrival first, then the answer
            assert all(m[2] > t_sim for m in tpdos)
        assert sim.t - t_sim == pytest.approx(late, abs=3e-4)  # the physics at the arrival
        assert steps and all(np.array_equal(c_, before) for c_ in steps)  # old commands
        assert not np.array_equal(sim.cmd, before)  # the SYNC's commands act from now on
        assert np.sign(sim.cmd).tolist() == [1 if first else -1] * len(drives)


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_realtime_serving_answers_the_first_sync_after_a_free_run_first():
    """With no SYNC the physics runs on by itself, FREE_RUN − 1 to FREE_RUN periods behind the
    clock (before the controller's first cycle, or after a pause); the first SYNC then — here
    1.2 periods after the physics' instant — is answered at once, the physics computed after
    the answers left, where it waited for that physics before (the controller's cycle 0 went
    without an answer in 4 of 6 real-time runs). One 1.2 periods after the physics that was
    computed ahead (a SYNC later than those before it) too; 1.8 periods, the physics first."""
    import time as wall

    from exo_rt.sim.server import FREE_RUN, RealtimeServer

    _robot, sim, (d,) = _open("exo_leg", "exo_leg", "free")
    d.configure()
    d.enable()
    (channel,) = sim.endpoints
    T = sim.dt

    port = _OneFramePort(sim)
    server = RealtimeServer(sim, {channel: port})
    for k, (periods, first) in enumerate(((1.2, True), (1.2, True), (1.8, False))):
        if k == 0:  # no SYNC for a few periods: the serving loop runs the physics on by itself
            until = wall.monotonic() + 5 * T
            server.serve(stop=lambda until=until: wall.monotonic() > until)
            behind = wall.monotonic() - server._t_phys
            assert (FREE_RUN - 1.0) * T <= behind <= FREE_RUN * T + 5e-4
        t_sim, port.sent[:] = sim.t, []
        server._t_phys = wall.monotonic() - periods * T
        port.pending = can.Message(arbitration_id=c.SYNC, data=b"", timestamp=wall.time())
        server._answer()
        tpdos = [m for m in port.sent if 0x181 <= m[0] <= 0x1FF]
        assert tpdos and all(bool(m[2] == t_sim) is first for m in tpdos), (k, port.sent)
        server.settle()
        assert sim.t - t_sim == pytest.approx(periods * T, abs=3e-4)  # the physics at the arrival


def test_mit_mode_actuators_through_the_simulated_bus():
    from exo_rt.bus.protocols.mit import MitDrives

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    buses = load_buses(ROOT / "configs" / "buses" / "exo_leg_mit.yaml", robot)
    sim = SimWorld.open("mit", robot, buses)
    sim.reset([0.0, 0.0])
    d = MitDrives(can.Bus(interface="exo_sim", channel="leg", world="mit"), buses[0], robot)
    k_mult = np.array([t.multiplier for t in robot.transmissions])
    d.configure()  # the homing step: zeroed in the home posture (0, 0)
    d.enable()
    assert d.seen.all() and d.enabled.all()
    r0 = sim.plant.motor_positions / k_mult
    for k in range(400):  # −12 A at the knee flexes it; its rotor wraps many times ±12.5 rad
        d.cycle(np.array([0.0, -12.0 if k > 20 else 0.0]))
    assert not (d.flags & F_MISSING).any()
    moved = sim.plant.motor_positions / k_mult - r0
    # the absolute joint angle, unwrapped (16-bit position over ±12.5 rad at the motor)
    assert np.max(np.abs(d.position - moved)) < 1e-3
    assert moved[1] > 0.5 and abs(sim.plant.motor_positions[1]) > 50
    d.disable()
    d.cycle(np.array([0.0, -12.0]))  # out of motor mode the command is not sent
    assert not sim.endpoints["leg"].drives[1][0].enabled and sim.cmd[1] == 0.0


def test_encoder_noise_is_seeded_and_of_the_configured_size():
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    buses = load_buses(ROOT / "configs" / "buses" / "exo_leg.yaml", robot)
    readings = []
    for name in ("noise-a", "noise-b"):
        sim = SimWorld.open(name, robot, buses, encoder_noise=2.0, seed=4)
        sim.reset(KNEE_90)
        d = Drives(can.Bus(interface="exo_sim", channel="leg", world=name), buses[0], robot)
        d.configure()
        d.enable()
        pos = []
        for _ in range(400):
            d.cycle(np.zeros(2))
            pos.append(d.position.copy())
        readings.append(np.array(pos))
    np.testing.assert_array_equal(readings[0], readings[1])
    counts = readings[0][:, 1] * -100 / (2 * math.pi) * 65536  # joint → rotor counts
    spread = np.std(counts - np.median(counts))
    assert spread > 1.5 and spread < 2.6  # counts; configured σ = 2


def test_eds_objects_are_checked_and_served(tmp_path):
    from exo_rt.bus.eds import read_eds

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    eds = ROOT / "configs" / "buses" / "eds" / "exo_drive.eds"
    objects = read_eds(eds)
    assert objects[(0x6071, 0)].size == 2 and objects[(0x1A00, 2)].default == 0x60640020
    buses = load_buses(ROOT / "configs" / "buses" / "exo_leg.yaml", robot)
    sim = SimWorld.open("eds", robot, buses)
    d = Drives(can.Bus(interface="exo_sim", channel="leg", world="eds"), buses[0], robot)
    assert d.sdo_read(1, (0x1000, 0)) == 0x00020192  # the device type, from the EDS
    # an EDS without the target torque object is refused before bring-up
    bad = tmp_path / "bad.eds"
    bad.write_text(eds.read_text().replace("[6071]", "[6072]"))
    path = tmp_path / "bus.yaml"
    path.write_text("buses:\n  - name: leg\n    drives:\n"
                    f"      - {{joint: hip, node: 1, eds: {bad}}}\n")
    with pytest.raises(ConfigError, match="EDS has no 6071h/0"):
        load_buses(path, robot)
    assert sim.cycle == 0


@pytest.mark.parametrize(("hip_lost", "knee_lost"), [((0, 2), (2, 2)), ((0, 3), (2, 4)),
                                                    ((1, 2), (3, 2)), ((0, 1), (4, 2))])
def test_enable_survives_lost_statuswords(hip_lost, knee_lost):
    """A TPDO lost during bring-up must not make the master act on a stale statusword: with
    the old logic the drive whose TPDO was missing got SHUTDOWN (0x06) and fell back from
    OPERATION ENABLED to READY TO SWITCH ON right after ``enable()`` returned (seen in a
    cross-process slcan run on a cold numba cache). (start, periods) of the lost TPDOs."""
    _robot, sim, (d,) = _open("exo_leg", "exo_leg", f"enable-lost-{hip_lost}-{knee_lost}")
    d.configure()
    for drive, (start, periods) in zip(d.config.drives, (hip_lost, knee_lost), strict=True):
        sim.schedule(sim.cycle + start, "drop", d.config.channel, drive.node, periods)
    d.enable(max_cycles=50)
    for _ in range(10):
        d.cycle(np.zeros(2))
    states = [c.state_of(int(sw)) for sw in d.statusword]
    assert states == [c.OPERATION_ENABLED, c.OPERATION_ENABLED]
    assert (d.controlword == c.CW_ENABLE_OPERATION).all()
    d.bus.shutdown()


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_the_registry_keeps_the_newest_world_last_and_forgets_a_finished_runs(tmp_path,
                                                                               monkeypatch):
    """``SimWorld.open`` of a name already open replaces it and moves it last (a run's world
    is named by its bus set's ``id()``, which Python reuses: a tool that took the registry's
    last world measured another run's wearer); a lockstep run's world leaves the registry when
    the run closes its buses (a process running run after run kept every run's plant)."""
    from exo_rt import cli

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    buses = load_buses(ROOT / "configs" / "buses" / "exo_leg.yaml", robot)
    first = SimWorld.open("registry-a", robot, buses)
    SimWorld.open("registry-b", robot, buses)
    again = SimWorld.open("registry-a", robot, buses)
    assert list(SimWorld._worlds)[-1] == "registry-a"
    assert SimWorld.get("registry-a") is again and again is not first
    for name in ("registry-a", "registry-b"):
        SimWorld.discard(name)
    with pytest.raises(BusError, match="no simulated robot named 'registry-a'"):
        SimWorld.get("registry-a")
    SimWorld.discard("registry-a")  # none open: nothing
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    before = dict(SimWorld._worlds)
    assert cli.main(["run", "--config", str(ROOT / "configs" / "exo_leg.yaml"),
                     "--duration", "0.5", "--out", str(tmp_path / "run")]) == 0
    assert SimWorld._worlds == before


WARM_PROBE = """
import sys
from exo_rt.runtime.config import load_top
from exo_rt.sim.plant import transmitted_torques
from exo_rt.sim.simbus import SimWorld
top = load_top(sys.argv[1])
world = SimWorld(top.robot, top.buses, fixture_node=int(sys.argv[2]))
world.warm_up([0.3, 0.6])
print(len(transmitted_torques.signatures))
"""


@pytest.mark.parametrize("node, compiled", [(0x70, 1), (0, 0)])  # 0x70: fixture.FIXTURE_NODE
def test_a_served_fixture_s_load_cells_are_compiled_before_the_first_frame(node, compiled):
    """``SimWorld.warm_up`` compiles (or loads from the cache) the fixture's load-cell torques
    with the plant's step when it serves a fixture node, in a fresh process: compiled at the
    first clamp instead, on an empty numba cache, they held the served drives' replies back
    and the stiffness identification over slcan aborted on stale feedback. Without a fixture,
    not."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", WARM_PROBE, str(ROOT / "configs" / "exo_leg.yaml"),
                          str(node)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == compiled


def test_the_simulation_s_compiled_code_raising_ends_the_served_drives(capfd):
    """The plant is compiled code numba calls through its C wrapper: an exception there is
    only reported (exo_rt.unraisable). The served drives then stop answering — the
    controller's stale_feedback — with one line on stderr, rather than answer from a broken
    physics. (The report stood in for here: the hook numba calls, with numba's own object.)"""
    import types

    from exo_rt.sim.server import RealtimeServer
    from exo_rt.unraisable import Swallowed

    _robot, sim, (d,) = _open("exo_leg", "exo_leg", "raised")
    d.configure()
    d.enable()
    server = RealtimeServer(sim, {})
    turns = iter(range(1000))

    def stop():
        k = next(turns)
        if k == 3:  # what numba does when the plant's cfunc raises
            sys.unraisablehook(types.SimpleNamespace(
                exc_type=ZeroDivisionError, exc_value=ZeroDivisionError("division by zero"),
                exc_traceback=None, err_msg=None, object="<numba.core.cpu.CPUContext>"))
        return k > 100

    server.serve(stop=stop, poll_s=1e-5)
    assert next(turns) == 4  # it returned in the turn of the report, not at stop()
    assert not isinstance(sys.unraisablehook, Swallowed)  # (the hook given back)
    err = capfd.readouterr().err
    assert "the simulation's compiled code raised ZeroDivisionError('division by zero'): " \
           "the emulated drives stop answering" in err
