"""One decoder of a CiA 402 bus's frames: a python-can port's frames (the table filled from
its messages) and a compiled port's (recvmmsg) end bit for bit in the same arrays; the CAN-log
decoder reads a non-default mapping as the emulated drive wrote and read it; the cycle's
functions take at most 8 parameters; records refuse what would part them from compiled
code."""

from __future__ import annotations

import inspect
import struct
import time
import uuid
from pathlib import Path

import can
import numpy as np
import pytest

from exo_rt.bus import fastio, pdo_cycle
from exo_rt.bus import pdo_fields as pf
from exo_rt.bus.drives import Drives
from exo_rt.bus.port import loopback_bus
from exo_rt.model import load_mechanism

# alone on the CPUs (tests/cpu_share.py): udp_multicast buses
pytestmark = pytest.mark.exclusive

ROOT = Path(__file__).resolve().parents[1]
# the arrival stamps of each port's own clock, and what follows from them alone
STAMPS = ("rx_time", "now", "heartbeat_time", "expect", "deadline")


def _frames(rng: np.random.Generator, d: Drives) -> list[tuple[int, bytes]]:
    """A cycle's frames on a bus of ``d``'s mapping: each drive's TPDO (statusword enabled,
    faulted or disabled; a position that may jump; a current that may fall short), some
    missing, duplicated or of the wrong length; heartbeats; now and then an EMCY, another
    device's frame, an SDO request to a drive from another master."""
    out = []
    for k, node in enumerate(int(n) for n in d.nodes):
        tx = d.model.tx[k]
        size = int(d.model.tx_size[k])
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            raw = np.zeros(size, np.uint8)[None, :]
            values = {pf.TPDO_STATUSWORD: int(rng.choice([0x0237, 0x0218, 0x0240])),
                      pf.TPDO_POSITION: int(rng.integers(-3000, 3000)),
                      pf.TPDO_CURRENT: int(rng.integers(-900, 900))}
            for q, v in values.items():
                pf.write(raw, 0, tx[q], v)
            data = raw[0].tobytes()
            out.append((0x180 + node, data if rng.random() > 0.1 else data[:-1]))
        if rng.random() < 0.7:
            out.append((0x700 + node, b"\x05"))
    if rng.random() < 0.3:
        out.append((0x080 + int(d.nodes[0]), bytes([0x10, 0x23, 1, 0, 0, 0, 0, 0])))
    if rng.random() < 0.3:
        out.append((0x123, bytes(rng.integers(0, 256, 3, dtype=np.uint8))))
    if rng.random() < 0.2:
        out.append((0x600 + int(d.nodes[-1]), b"\x2b\x71\x60\x00\xf4\x01\x00\x00"))
    return out


@pytest.mark.parametrize("bus_file", ["exo_leg", "exo_leg_epos4"])
def test_a_python_can_port_and_a_compiled_port_decode_the_same_frames_bit_for_bit(bus_file):
    """The same frames through python-can (a virtual bus: the port fills the frame table
    from its messages) and through a compiled port (udp_multicast: recvmmsg), under the
    default mapping and the EPOS4's (torque actual): every array of the bus's data equal byte
    for byte, but the arrival stamps each port's clock gives; the same EMCYs for Python."""
    from exo_rt.bus.config import load_buses

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    (bus,) = load_buses(ROOT / "configs" / "buses" / f"{bus_file}.yaml", robot)
    g = f"239.77.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
    channel = f"bits{uuid.uuid4().hex}"
    slow = Drives(can.Bus(interface="virtual", channel=channel), bus, robot)
    fast = Drives(can.Bus(interface="udp_multicast", channel=g), bus, robot)
    peers = [can.Bus(interface="virtual", channel=channel), loopback_bus(g)]
    rng = np.random.default_rng(34)
    try:
        assert fast.port.compiled and not slow.port.compiled
        for cycle in range(12):
            currents = rng.normal(0.0, 4.0, slow.n)
            for d in (slow, fast):
                d.controlword[:] = 0x000F
                d.send_commands(currents)
            slow.data.sync_time[0] = fast.data.sync_time[0]  # (a virtual bus stamps none)
            for peer in peers:
                while peer.recv(0.02) is not None:  # the commands, read off the wire
                    pass
            frames = _frames(rng, slow)
            for arb, data in frames:
                for peer in peers:
                    peer.send(can.Message(arbitration_id=arb, data=data, is_extended_id=False))
            time.sleep(0.02)  # every frame arrived
            for d in (slow, fast):
                d.collect(time.monotonic() + 0.05)
            for name in slow.data.FIELDS:
                a, b = getattr(slow.data, name), getattr(fast.data, name)
                if name in STAMPS:
                    assert np.array_equal(np.isnan(a), np.isnan(b)), (cycle, name)
                else:
                    assert a.tobytes() == b.tobytes(), (cycle, name, a, b, frames)
            assert slow.emcy_codes == fast.emcy_codes
        assert fast.flags.any() and fast.seen.any() and fast.emcy_codes  # (it was exercised)
        assert fast.malformed_count.sum() > 0 and fast.foreign[pdo_cycle.FOREIGN_COUNT] > 0
    finally:
        for b in (slow.bus, fast.bus, *peers):
            b.shutdown()


def _remapped_bus(tmp_path: Path, robot):
    """The leg's bus with a mapping of no default's order: RPDO target torque then
    controlword, TPDO position, torque actual, statusword."""
    from exo_rt.bus.config import load_buses

    eds = ROOT / "configs" / "buses" / "eds" / "exo_drive.eds"
    path = tmp_path / "remapped.yaml"
    path.write_text(f"""buses:
  - name: leg
    interface: exo_sim
    bitrate: 1000000
    heartbeat_ms: 100
    rpdo: [target_torque, controlword]
    tpdo: [position_actual, torque_actual, statusword]
    drives:
      - {{joint: hip, node: 1, counts_per_rev: 65536, eds: {eds}}}
      - {{joint: knee, node: 2, counts_per_rev: 65536, eds: {eds}}}
""")
    return load_buses(path, robot)


def test_the_can_log_decoder_reads_a_remapped_bus_as_the_emulated_drive_does(tmp_path):
    """A bus whose PDOs are mapped in no default order, brought up on emulated drives: each
    RPDO the controller sends, the CAN-log decoder reads as the command the drive latched;
    each TPDO the drive sends, as the position it encoded (and the controller read: the same
    float) and its power state."""
    from exo_rt.bus.protocols.cia402 import Cia402LogDecoder
    from exo_rt.sim.simbus import SimWorld

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    buses = _remapped_bus(tmp_path, robot)
    assert [e.kind for e in buses[0].drives[0].profile.rpdo] == ["target_torque", "controlword"]
    name = f"remap{uuid.uuid4().hex}"
    world = SimWorld.open(name, robot, buses)
    world.reset([0.0, np.pi / 4])
    d = Drives(can.Bus(interface="exo_sim", channel="leg", world=name), buses[0], robot)
    sent, received = [], []
    send, recv = d.bus.send, d.bus.recv

    def capture_send(msg, timeout=None):
        sent.append((msg.arbitration_id, bytes(msg.data)))
        send(msg, timeout)

    def capture_recv(timeout=None):
        msg = recv(timeout)
        if msg is not None:
            received.append((msg.arbitration_id, bytes(msg.data)))
        return msg

    d.bus.send, d.bus.recv = capture_send, capture_recv
    try:
        d.configure()
        d.enable()
        log = Cia402LogDecoder(buses[0], robot)
        emulated = {drive.node: drive for drive, _t in world.endpoints["leg"].drives}
        rad = 2 * np.pi / d.counts_per_rev / d.multiplier
        checked = 0
        for k in range(20):
            sent.clear()
            received.clear()
            d.cycle(np.array([0.8 * np.sin(k / 3), -1.5 * np.cos(k / 4)]))
            cmd, meas, on = np.zeros(2), np.full(2, np.nan), np.zeros(2)
            for arb, data in sent + received:
                log.frame(arb, data, cmd, meas, on)
            for j, node in enumerate(int(n) for n in d.nodes):
                drive, sc = emulated[node], buses[0].drives[j].scale
                assert any(a == 0x200 + node for a, _ in sent)
                assert cmd[j] == drive.target_permille / 1000.0 * sc.rated_torque \
                    / sc.torque_constant
                if any(a == 0x180 + node for a, _ in received):
                    assert meas[j] == drive._counts * rad[j] == d.position[j]
                    assert on[j] == drive.enabled
                    checked += 1
        assert checked >= 30 and np.abs(cmd).max() > 0.0
    finally:
        d.bus.shutdown()


def test_the_default_mapping_codecs_go_through_the_field_tables():
    """cia402.decode_tpdo1/decode_rpdo1 read the default mapping through the cycle's
    decoder: what the pure encoders pack, any value of each type, and None for a wrong
    length."""
    from exo_rt.bus import cia402 as c

    for sw, pos, cur in ((0x0237, -2, 1000), (0xFFFF, 2**31 - 1, -32768), (0, -2**31, 32767)):
        assert c.decode_tpdo1(c.tpdo1(1, sw, pos, cur)[1]) == (sw, pos, cur)
    assert c.decode_rpdo1(c.rpdo1(1, 0x8F, -250)[1]) == (0x8F, -250)
    assert c.decode_tpdo1(bytes(7)) is None and c.decode_rpdo1(bytes(5)) is None


CYCLE_PATH = (pdo_cycle.take_tpdos, pdo_cycle.collect_flags, pdo_cycle.take_frames,
              pdo_cycle.gather, pdo_cycle.begin, pdo_cycle.put_rpdos, pdo_cycle.command,
              pdo_cycle.sync_rows, fastio.receive, fastio.send, fastio.tap,
              fastio.decode_datagram, fastio.encode_datagram, fastio.decode_can_frame,
              fastio.encode_can_frame)


@pytest.mark.parametrize("fn", CYCLE_PATH, ids=lambda f: f.__name__)
def test_the_bus_cycle_functions_take_at_most_eight_parameters(fn):
    assert len(inspect.signature(fn.py_func).parameters) <= 8


def test_a_record_refuses_a_missing_field_and_a_rebound_one():
    with pytest.raises(TypeError, match="missing field.*capacity.*no field.*size"):
        fastio.Tap(header=np.zeros(8, np.int64), slots=np.zeros(24, np.uint8), bus=0,
                   size=3)
    b = fastio.FrameBatch(2)
    with pytest.raises(AttributeError, match="fixed once the record is made"):
        b.data = np.zeros((2, 64), np.uint8)
    b.flags |= fastio.FB_EXTENDED  # in place: the same array, compiled code sees it
    assert b.flags.tolist() == [fastio.FB_EXTENDED] * 2


def test_the_drives_fill_the_arrays_they_are_given_in_place():
    """The controller hands a bus views of its own joint vectors (``drives.position = q[lo:
    hi]``): the cycle's decoder writes into them from then on; ``flags |= F`` stays in place;
    an array of another shape or type is refused at once."""
    from exo_rt.bus.config import load_buses
    from exo_rt.bus.flags import F_BUS_ERROR, F_MISSING

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    (bus,) = load_buses(ROOT / "configs" / "buses" / "exo_leg.yaml", robot)
    channel = f"fill{uuid.uuid4().hex}"
    d = Drives(can.Bus(interface="virtual", channel=channel), bus, robot)
    peer = can.Bus(interface="virtual", channel=channel)
    try:
        q, i, f = np.full(4, 9.0), np.full(4, 9.0), np.full(4, 9, np.int64)
        d.position, d.current, d.flags = q[1:3], i[1:3], f[1:3]
        data = d.data
        d.flags |= F_BUS_ERROR
        assert d.data is data and f.tolist() == [9, 9 | F_BUS_ERROR, 9 | F_BUS_ERROR, 9]
        peer.send(can.Message(arbitration_id=0x180 + int(d.nodes[0]), is_extended_id=False,
                              data=struct.pack("<Hih", 0x0237, 12345, -250)))
        d.collect()
        scale = d.model.scale
        # (the knee did not answer: its last values stay)
        assert q.tolist() == [9.0, 12345 * scale[0, pdo_cycle.SCALE_RAD], 9.0, 9.0]
        assert i.tolist() == [9.0, -250 * scale[0, pdo_cycle.SCALE_AMP], 9.0, 9.0]
        assert f[2] & F_MISSING and not f[1] & F_MISSING and f[0] == f[3] == 9
        with pytest.raises(ValueError, match="position must be a float64 array of shape"):
            d.position = np.zeros(3)
    finally:
        d.bus.shutdown()
        peer.shutdown()
