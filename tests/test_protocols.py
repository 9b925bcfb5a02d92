"""Every registered drive protocol, back to back on the simulated bus: bring-up, enable,
command → feedback, the absolute angle, fault and its explicit reset, disable, and malformed or
foreign frames that never raise (hypothesis) — the same tests for each family, parametrised
over the registry. Then what is each family's own: MIT's homing step, RMD-X's communication
timeout (B3h) and the registry's entry points."""

from __future__ import annotations

import math
from pathlib import Path

import can
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exo_rt import plugins
from exo_rt.bus import protocols
from exo_rt.bus.config import load_buses
from exo_rt.bus.flags import F_FAULT, F_MISSING, F_NOT_ENABLED
from exo_rt.bus.protocols import rmdx
from exo_rt.errors import BusError, ConfigError
from exo_rt.model import load_mechanism
from exo_rt.sim.simbus import SimWorld

ROOT = Path(__file__).resolve().parents[1]
ROBOT = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
FAMILIES = sorted(protocols.names())


def _leg_bus_files() -> dict[str, str]:
    """Each family's first shipped bus file for the one-leg robot (configs/buses/exo_leg*.yaml,
    by name): a new family's own bus file brings it into every test here."""
    import yaml

    out: dict[str, str] = {}
    for path in sorted((ROOT / "configs" / "buses").glob("exo_leg*.yaml")):
        for bus in yaml.safe_load(path.read_text())["buses"]:
            out.setdefault(bus.get("protocol", protocols.DEFAULT), path.name)
    return out


BUS_FILES = _leg_bus_files()


def test_every_registered_family_has_a_bus_file_for_the_leg():
    assert set(FAMILIES) <= set(BUS_FILES)
    assert BUS_FILES["cia402"] == "exo_leg.yaml" and BUS_FILES["rmdx"] == "exo_leg_rmdx.yaml"


class Leg:
    """The leg on the simulated bus with one family's host sides (one per bus)."""

    def __init__(self, family: str, pose=(0.0, 0.0), bus_file: Path | None = None) -> None:
        self.buses = load_buses(bus_file or ROOT / "configs" / "buses" / BUS_FILES[family],
                                ROBOT)
        name = f"proto-{family}"
        self.world = SimWorld.open(name, ROBOT, self.buses)
        self.world.reset(list(pose))
        self.drives = [protocols.get(b.protocol).host_class()(
            can.Bus(interface="exo_sim", channel=b.channel, world=name), b, ROBOT,
            sdo_timeout=0.2) for b in self.buses]
        for d in self.drives:
            assert d.config.protocol == family

    def cycle(self, current: np.ndarray) -> None:
        """One period: every bus's commands, then the ticks, then the replies."""
        for d in self.drives:
            d.send_rpdos(current[d.joint_index])
        for d in self.drives:
            d.send_sync()
        for d in self.drives:
            d.collect()

    def up(self) -> Leg:
        for d in self.drives:
            d.configure()
        for d in self.drives:
            d.enable()
        self.cycle(np.zeros(2))
        return self

    def flags(self) -> np.ndarray:
        out = np.zeros(2, dtype=np.int64)
        for d in self.drives:
            out[d.joint_index] = d.flags
        return out

    def measured(self, name: str) -> np.ndarray:
        out = np.zeros(2)
        for d in self.drives:
            out[d.joint_index] = getattr(d, name)
        return out

    def emulated(self, joint: int):
        for ep in self.world.endpoints.values():
            for drive, t in ep.drives:
                if t == joint:
                    return ep.config.channel, drive
        raise KeyError(joint)


@pytest.mark.parametrize("family", FAMILIES)
def test_bring_up_enable_and_the_absolute_angle(family):
    leg = Leg(family)
    for d in leg.drives:
        d.configure()
    assert all(not any(f.get("stopped") for f in d.found) for d in leg.drives)
    for d in leg.drives:
        assert d.enable() >= 1
    leg.cycle(np.zeros(2))
    assert not (leg.flags() & (F_MISSING | F_NOT_ENABLED | F_FAULT)).any()
    assert all(s in ("OPERATION ENABLED", "enabled") for d in leg.drives for s in d.states())
    assert all(leg.emulated(j)[1].power_on for j in range(2))
    # the joint angle as the plant has it (MIT: homed at 0; the others: absolute encoders)
    q = leg.world.plant.motor_positions / np.array([t.multiplier for t in ROBOT.transmissions])
    assert np.max(np.abs(leg.measured("position") - q)) < math.radians(0.02)


@pytest.mark.parametrize("family", FAMILIES)
def test_command_to_feedback(family):
    leg = Leg(family).up()
    command = np.array([2.0, -3.0])  # A
    for _ in range(60):
        leg.cycle(command)
    assert not (leg.flags() & (F_MISSING | F_FAULT)).any()
    # the motors' current loops follow (0.1 A: the coarsest family's resolution, MIT 12 bits)
    assert np.max(np.abs(leg.measured("current") - command)) < 0.1
    assert np.max(np.abs(leg.world.cmd - command)) < 0.02  # what reached the plant
    q = leg.world.plant.motor_positions / np.array([t.multiplier for t in ROBOT.transmissions])
    assert np.max(np.abs(leg.measured("position") - q)) < math.radians(0.02)


@pytest.mark.parametrize("family", FAMILIES)
def test_fault_latches_until_the_explicit_reset(family):
    leg = Leg(family).up()
    channel, drive = leg.emulated(1)
    leg.world.inject("fault", channel, drive.node)
    cycles = 0  # each family's way: EMCY (CiA 402), the error byte (MIT), 9Ah (RMD-X)
    while cycles < 3 and not leg.flags()[1] & F_FAULT:
        leg.cycle(np.array([0.0, 1.0]))
        cycles += 1
    assert leg.flags()[1] & F_FAULT
    assert not drive.power_on and leg.world.cmd[1] == 0.0  # the drive's output is off
    for _ in range(5):  # latched: still a fault five cycles on
        leg.cycle(np.array([0.0, 1.0]))
    assert leg.flags()[1] & F_FAULT
    host = next(d for d in leg.drives if 1 in d.joint_index)
    with pytest.raises(BusError, match="--reset-faults"):
        host.enable()  # restart is explicit
    host.fault_reset()
    host.enable()
    leg.cycle(np.array([0.0, 1.0]))
    leg.cycle(np.array([0.0, 1.0]))
    assert not leg.flags()[1] & (F_FAULT | F_NOT_ENABLED) and drive.power_on


@pytest.mark.parametrize("family", FAMILIES)
def test_disable_cuts_the_current(family):
    leg = Leg(family).up()
    for _ in range(5):
        leg.cycle(np.array([3.0, 3.0]))
    for d in leg.drives:
        d.request_disable()  # inside the cycle: no I/O until the next commands
    for _ in range(3):
        leg.cycle(np.array([3.0, 3.0]))
    assert not any(leg.emulated(j)[1].power_on for j in range(2))
    assert np.all(leg.world.cmd == 0.0)
    assert leg.flags().all() and (leg.flags() & F_NOT_ENABLED).all()
    assert not (leg.flags() & F_MISSING).any()  # the state keeps coming while disabled
    for d in leg.drives:
        d.disable()
        assert all(s != "enabled" and s != "OPERATION ENABLED" for s in d.states())


_LEGS: dict[str, Leg] = {}


def _fuzz_leg(family: str) -> Leg:
    if family not in _LEGS:
        _LEGS[family] = Leg(family).up()
    return _LEGS[family]


# payloads: any bytes, and 8-byte frames led by a command byte some family knows (RMD-X's
# commands, MIT's FF… specials) so that the decoders' deeper paths are reached too
payloads = st.binary(max_size=8) | st.builds(
    lambda head, rest: bytes([head]) + rest,
    st.sampled_from([0xA1, 0x9A, 0x9C, 0x92, 0x80, 0xB3, 0xFF]), st.binary(min_size=7, max_size=7))
frames = st.lists(st.tuples(st.sampled_from([0x000, 0x001, 0x002, 0x080, 0x081, 0x181, 0x182,
                                              0x141, 0x142, 0x241, 0x242, 0x701, 0x7FF]) |
                            st.integers(0, 0x7FF), payloads), max_size=6)


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=frames)
def test_malformed_and_foreign_frames_never_raise(family, frames):
    """Any frame on the bus — short, long, another family's, garbage — reaches the host's
    decoder through collect() and the emulated drives through the bus, and never raises."""
    leg = _fuzz_leg(family)
    for d in leg.drives:
        rx = leg.world.endpoints[d.config.channel].rx
        for arb, data in frames:
            rx.append(can.Message(arbitration_id=arb, data=data, is_extended_id=False,
                                  timestamp=leg.world.t))
            d.bus.send(can.Message(arbitration_id=arb, data=data, is_extended_id=False))
        d.collect()
        assert d.position.shape == (d.n,) and np.isfinite(d.position).all()


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=12))
def test_rmdx_decoders_never_raise(data):
    for decode in (rmdx.decode_feedback, rmdx.decode_status1, rmdx.decode_multi_turn):
        out = decode(data)
        assert out is None or len(data) == 8


def test_rmdx_codec_vectors():
    # A1h, iq = −3.21 A → −321 = 0xFEBF little-endian at bytes 4–5
    assert rmdx.torque_command(-3.21) == bytes.fromhex("a1000000bffe0000")
    assert rmdx.torque_command(1e6)[4:6] == (32767).to_bytes(2, "little", signed=True)
    assert rmdx.torque_command(float("nan")) == bytes.fromhex("a100000000000000")
    fb = rmdx.feedback(rmdx.TORQUE, 35, 1.5, -720.0, -2.0)
    assert rmdx.decode_feedback(fb) == (0xA1, 35, 1.5, -720.0, 65534)
    assert rmdx.decode_status1(rmdx.status1(40, 48.0, 0x0010)) == (40, 1, 48.0, 0x0010)
    assert rmdx.decode_multi_turn(rmdx.multi_turn(-1234.56)) == pytest.approx(-1234.56)
    assert rmdx.timeout_command(20) == bytes.fromhex("b300000014000000")


def test_rmdx_writes_its_communication_timeout_and_stops_without_commands():
    leg = Leg("rmdx").up()
    assert all(leg.emulated(j)[1].timeout_ms == 20 for j in range(2))
    assert [v["B3h_comm_timeout_ms"] for d in leg.drives for v in d.protection().values()] \
        == [20, 20]
    for _ in range(5):
        leg.cycle(np.array([2.0, 2.0]))
    for _ in range(19):  # the controller goes silent; the world goes on
        leg.world.advance()
    assert all(leg.emulated(j)[1].power_on for j in range(2))  # 19 ms: not yet
    for _ in range(2):
        leg.world.advance()
    assert not any(leg.emulated(j)[1].power_on for j in range(2))
    assert np.all(leg.world.cmd == 0.0)


def test_mit_has_no_drive_side_timeout():
    leg = Leg("mit").up()
    for _ in range(5):
        leg.cycle(np.array([2.0, 2.0]))
    for _ in range(200):  # 200 ms of silence: the motors keep their last torque
        leg.world.advance()
    assert all(leg.emulated(j)[1].power_on for j in range(2))
    assert np.max(np.abs(leg.world.cmd - 2.0)) < 0.02
    assert all(v == {"communication_timeout": None}
               for v in leg.drives[0].protection().values())


def test_mit_homing_gives_the_absolute_angle(tmp_path):
    """Bring-up zeroes each motor where the leg stands; the bus file's ``home`` is the joint
    angle there. The leg stands at (0.3, 0.8) rad: the knee's motor is 80 rad from its
    zero, several ±12.5 rad wraps."""
    text = (ROOT / "configs" / "buses" / "exo_leg_mit.yaml").read_text()
    text = text.replace("{joint: hip, node: 1, home: 0.0}", "{joint: hip, node: 1, home: 0.3}")
    text = text.replace("{joint: knee, node: 2, home: 0.0}", "{joint: knee, node: 2, home: 0.8}")
    path = tmp_path / "mit.yaml"
    path.write_text(text)
    leg = Leg("mit", pose=(0.3, 0.8), bus_file=path).up()
    assert np.max(np.abs(leg.measured("position") - [0.3, 0.8])) < 1e-3
    for _ in range(300):
        leg.cycle(np.array([0.0, -12.0]))
    q = leg.world.plant.motor_positions / np.array([t.multiplier for t in ROBOT.transmissions])
    assert q[1] > 1.0  # it moved through many wraps
    assert np.max(np.abs(leg.measured("position") - q)) < 1e-3


def test_a_silent_drive_is_one_clear_error():
    for family in ("mit", "rmdx"):
        leg = Leg(family)
        ep = next(iter(leg.world.endpoints.values()))
        ep.drives.pop()
        d = leg.drives[0]
        d.reply_timeout = 0.05
        with pytest.raises(BusError, match=rf"does not answer .*\({family}\)|does not answer"):
            d.configure()


class Clone(protocols.Protocol):
    """A third-party family registered by entry point: MIT under another name."""

    host = "exo_rt.bus.protocols.mit:MitDrives"
    emulator = "exo_rt.bus.protocols.mit:EmulatedMitMotor"
    bus_keys = {"mit_ranges": False}
    drive_keys = {"home": False}

    def parse_options(self, bus, item):
        from exo_rt.bus.config import mit_ranges

        return mit_ranges(bus)


def test_entry_point_registration(tmp_path, monkeypatch, request):
    class EntryPoint:
        name = "clone"

        def load(self):
            return Clone

    monkeypatch.setattr(plugins, "entry_points",
                        lambda group: [EntryPoint()] if group == protocols.GROUP else [])
    request.addfinalizer(lambda: protocols.unregister("clone"))
    assert "clone" in protocols.names() and protocols.get("clone").name == "clone"
    path = tmp_path / "clone.yaml"
    path.write_text((ROOT / "configs" / "buses" / "exo_leg_mit.yaml").read_text()
                    .replace("protocol: mit", "protocol: clone"))
    leg = Leg("clone", bus_file=path).up()
    for _ in range(20):
        leg.cycle(np.array([1.0, 1.0]))
    assert np.max(np.abs(leg.measured("current") - 1.0)) < 0.1
    path.write_text(path.read_text().replace("protocol: clone", "protocol: clown"))
    with pytest.raises(ConfigError, match="unknown protocol 'clown'"):
        load_buses(path, ROBOT)


def test_bus_keys_belong_to_their_family(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("buses:\n  - name: leg\n    protocol: rmdx\n    mit_ranges: {p_max: 1}\n"
                    "    drives:\n      - {joint: hip, node: 1}\n")
    with pytest.raises(ConfigError, match=r"b.yaml:4.*unknown key 'mit_ranges' in a bus \(rmdx\)"):
        load_buses(path, ROBOT)
    path.write_text("buses:\n  - name: leg\n    protocol: rmdx\n    comm_timeout_ms: -5\n"
                    "    drives:\n      - {joint: hip, node: 1}\n")
    with pytest.raises(ConfigError, match=r"b.yaml:4.*comm_timeout_ms -5"):
        load_buses(path, ROBOT)
    path.write_text("buses:\n  - name: leg\n    protocol: rmdx\n"
                    "    drives:\n      - {joint: hip, node: 1}\n      - {joint: knee, node: 2}\n")
    with pytest.raises(ConfigError, match="would be 86 % loaded"):  # two and the 9Ah poll
        load_buses(path, ROBOT)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=200, deadline=None)
@given(frames=frames)
def test_log_decoders_never_raise(family, frames):
    """Each family's bare-CAN-log decoder (replay) on any frames: never an exception, only
    finite values written."""
    buses = load_buses(ROOT / "configs" / "buses" / BUS_FILES[family], ROBOT)
    decoders = [protocols.get(b.protocol).log_decoder(b, ROBOT) for b in buses]
    cmd, meas, on = np.zeros(2), np.full(2, np.nan), np.zeros(2)
    for arb, data in frames:
        for dec in decoders:
            dec.frame(arb, data, cmd, meas, on)
    assert np.isfinite(cmd).all() and not np.isinf(meas).any()
