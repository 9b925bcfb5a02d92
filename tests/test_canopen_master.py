"""The emulated drives are CANopen devices any master can talk to: the canopen library (2.4) as
an independent master on the in-process simulated bus — identity, segmented SDO, PDO
configuration read and re-mapped by the standard sequence, the CiA 402 state machine through
canopen's ``BaseNode402``, EMCY through canopen's consumer, and the SDO abort codes."""

from __future__ import annotations

import math
import struct
import time
from pathlib import Path

import can
import canopen
import pytest
from canopen.sdo import SdoAbortedError

from exo_rt.bus import cia402 as c
from exo_rt.bus import pdo
from exo_rt.bus.config import load_buses
from exo_rt.bus.drives import Drives
from exo_rt.model import load_mechanism
from exo_rt.sim.simbus import SimWorld

ROOT = Path(__file__).resolve().parents[1]
EDS = ROOT / "configs" / "buses" / "eds"


def _world(name: str, bus_file: str = "exo_leg"):
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    buses = load_buses(ROOT / "configs" / "buses" / f"{bus_file}.yaml", robot)
    sim = SimWorld.open(name, robot, buses)
    sim.reset([0.0, math.pi / 2])
    return robot, buses, sim


@pytest.fixture
def master():
    """A canopen Network (with its own notifier thread) on a simulated bus of the exo leg."""
    robot, buses, sim = _world("canopen-master")
    network = canopen.Network(can.Bus(interface="exo_sim", channel="leg", world="canopen-master"))
    network.connect()
    yield network, buses, sim
    network.sync.stop()
    network.disconnect()


def _entries(pdo_map):
    return [(v.index, v.subindex, v.length) for v in pdo_map.map]


def test_identity_segmented_upload_and_pdo_configuration(master):
    network, buses, _ = master
    node = network.add_node(1, str(EDS / "exo_drive.eds"))
    assert node.sdo[0x1000].raw == 0x00020192
    assert node.sdo[0x1018][1].raw == 0x00000000  # the bus file's vendor_id
    assert node.sdo[0x1018][2].raw == 0x00000402  # and product_code
    name = node.sdo[0x1008].raw  # 29 characters: a segmented upload
    assert name == "exo-rt emulated CiA 402 drive" and len(name) > 4
    assert node.sdo.upload(0x1008, 0) == name.encode()
    with node.sdo.open(0x1008, 0, "rb") as f:  # a segmented read through a stream
        assert f.read() == name.encode()
    node.tpdo.read()
    node.rpdo.read()
    profile = buses[0].drives[0].profile
    assert _entries(node.tpdo[1]) == [(e.index, e.sub, e.bits) for e in profile.tpdo]
    assert _entries(node.rpdo[1]) == [(e.index, e.sub, e.bits) for e in profile.rpdo]
    for p, cob in ((node.tpdo[1], 0x181), (node.rpdo[1], 0x201)):
        assert p.enabled and p.cob_id == cob and p.trans_type == profile.transmission_type


def test_remap_by_the_standard_sequence_then_tpdos_in_the_new_layout(master):
    network, _, sim = master
    node = network.add_node(2, str(EDS / "exo_drive.eds"))
    node.tpdo.read()
    tpdo = node.tpdo[1]
    tpdo.clear()  # statusword + torque actual (i16) + position actual (i32)
    tpdo.add_variable(0x6041)
    tpdo.add_variable(0x6077)
    tpdo.add_variable(0x6064)
    tpdo.trans_type = 1
    tpdo.enabled = True
    tpdo.save()  # COB-ID invalid, type, sub0 = 0, entries, sub0 = 3, COB-ID valid
    node.tpdo.read()
    assert _entries(node.tpdo[1]) == [(0x6041, 0, 16), (0x6077, 0, 16), (0x6064, 0, 32)]
    node.nmt.state = "OPERATIONAL"
    frames = []
    network.subscribe(0x182, lambda cob, data, t: frames.append(bytes(data)))
    for _ in range(3):
        network.sync.transmit()
        time.sleep(0.02)
    assert frames and all(len(f) == 8 for f in frames)
    sw, torque, counts = struct.unpack("<Hhi", frames[-1])
    drive = sim.endpoints["leg"].drives[1][0]
    assert sw == drive.statusword() and counts == drive._counts
    assert tpdo["Statusword"].raw == sw and tpdo[0x6064].raw == counts
    # the host's decoder on that mapping's field table reads the same frame
    from exo_rt.bus import pdo_fields as pf

    layout = pdo.Layout((pdo.MapEntry(0x6041, 0, 16, False, pdo.STATUSWORD),
                         pdo.MapEntry(0x6077, 0, 16, True, pdo.TORQUE),
                         pdo.MapEntry(0x6064, 0, 32, True, pdo.POSITION)))
    values = pf.decode(frames[-1], pf.tpdo_fields(layout), layout.size)
    assert values[pf.TPDO_POSITION] == counts and values[pf.TPDO_CURRENT] == torque
    assert values[pf.TPDO_STATUSWORD] == sw
    network.unsubscribe(0x182)


def test_cia402_state_machine_through_basenode402_and_emcy(master):
    network, _, sim = master
    node = canopen.BaseNode402(2, str(EDS / "exo_drive.eds"))
    node.TIMEOUT_SWITCH_STATE_FINAL = 5.0  # a shared, loaded test machine
    node.TIMEOUT_SWITCH_STATE_SINGLE = 2.0
    node.TIMEOUT_SWITCH_OP_MODE = 2.0
    node.TIMEOUT_CHECK_TPDO = 1.0
    network.add_node(node)
    node.nmt.state = "PRE-OPERATIONAL"
    node.setup_402_state_machine()  # reads the PDO configuration by SDO
    node.op_mode = "CYCLIC SYNCHRONOUS TORQUE"  # 6060h by SDO, checked on 6061h
    assert node.op_mode == "CYCLIC SYNCHRONOUS TORQUE"
    node.nmt.state = "OPERATIONAL"
    network.sync.start(0.002)  # TPDOs answer each SYNC (transmission type 1)
    node.rpdo[1].start(0.002)  # the controlword goes out in RPDO1
    try:
        node.state = "OPERATION ENABLED"
        assert node.state == "OPERATION ENABLED"
        assert sim.endpoints["leg"].drives[1][0].state == c.OPERATION_ENABLED
        sim.inject("fault", "leg", 2)  # the drive faults and sends its EMCY
        err = node.emcy.wait(c.EMCY_OVERCURRENT, timeout=2.0)
        assert err is not None and err.code == c.EMCY_OVERCURRENT
        assert err.register == c.ERRREG_CURRENT and node.emcy.active
        node.check_statusword()
        assert node.is_faulted()
    finally:
        node.rpdo[1].stop()
        network.sync.stop()


def test_sdo_abort_codes(master, tmp_path):
    network, _, sim = master
    node = network.add_node(1, str(EDS / "exo_drive.eds"))

    def abort(fn, *args):
        with pytest.raises(SdoAbortedError) as e:
            fn(*args)
        return e.value.code

    down, up = node.sdo.download, node.sdo.upload
    assert abort(down, 0x6041, 0, b"\x06\x00") == 0x06010002  # read-only
    assert abort(up, 0x2345, 0) == 0x06020000  # no object
    assert abort(up, 0x1018, 9) == 0x06090011  # no sub-index
    assert abort(down, 0x1017, 0, b"\x64\x00\x00\x00") == 0x06070010  # u16 given 4 bytes
    assert abort(down, 0x6060, 0, b"\x0b") == 0x06090031  # above the EDS's HighLimit (10)
    assert abort(down, 0x60C2, 1, b"\x00") == 0x06090032  # below its LowLimit (1)
    assert abort(down, 0x1800, 2, b"\xf5") == 0x06090030  # a reserved transmission type
    assert abort(down, 0x1A00, 1, b"\x10\x00\x41\x60") == 0x06010000  # mapping while valid
    down(0x1800, 1, struct.pack("<I", 0x80000181))  # the standard sequence: invalid first,
    down(0x1A00, 0, b"\x00")  # then sub0 = 0
    assert abort(down, 0x1A00, 1, struct.pack("<I", 0x10170010)) == 0x06040041  # not mappable
    for sub, word in ((1, 0x60640020), (2, 0x60640020), (3, 0x60640020)):
        down(0x1A00, sub, struct.pack("<I", word))
    assert abort(down, 0x1A00, 0, b"\x03") == 0x06040042  # 96 bits: longer than a frame
    for mode in ("rb", "wb"):  # block transfers: refused, as CiA 301 allows
        assert abort(lambda m=mode: node.sdo.open(0x1008, 0, m, block_transfer=True, size=4)
                     .close()) == 0x05040001
    # a write-only object (an EDS with one)
    eds = tmp_path / "wo.eds"
    eds.write_text((EDS / "exo_drive.eds").read_text() + "\n[2000]\nParameterName=Command\n"
                   "ObjectType=0x7\nDataType=0x0007\nAccessType=wo\nDefaultValue=0\n"
                   "PDOMapping=0\n")
    from exo_rt.sim.drive_emulator import DriveScale, EmulatedDrive

    drive = EmulatedDrive(5, DriveScale(), eds=eds)
    (reply,) = drive.handle(0x605, c.sdo_upload_request(5, 0x2000, 0)[1])
    assert reply[0] == 0x585 and c.decode_sdo(reply[1])[0] == c.SDO_ABORT
    assert int.from_bytes(reply[1][4:], "little") == 0x06010001
    assert sim.cycle == 0


def test_exo_rt_bring_up_then_canopen_reads_the_bus_files_mapping():
    """A factory-default EPOS4 (emulated from its DCF): exo-rt's bring-up writes the bus
    file's mapping, and an independent master reads exactly that back."""
    robot, buses, sim = _world("canopen-epos4", "exo_leg_epos4")
    bus = can.Bus(interface="exo_sim", channel="leg", world="canopen-epos4")
    drives = Drives(bus, buses[0], robot)
    drives.configure()
    assert can.Notifier.find_instances(bus) == ()  # nothing of canopen left on the bus
    network = canopen.Network(bus)
    network.connect()
    try:
        for d in buses[0].drives:
            node = network.add_node(d.node, d.profile.eds)
            node.tpdo.read()
            node.rpdo.read()
            assert _entries(node.tpdo[1]) == [(e.index, e.sub, e.bits) for e in d.profile.tpdo]
            assert _entries(node.rpdo[1]) == [(e.index, e.sub, e.bits) for e in d.profile.rpdo]
            assert node.tpdo[1].trans_type == node.rpdo[1].trans_type == 1
            assert node.sdo[0x1017].raw == buses[0].heartbeat_ms
            assert node.sdo[0x6061].raw == c.MODE_CST
            assert not any(node.tpdo[n].enabled for n in (2, 3, 4))
    finally:
        network.disconnect()
