"""Frame codecs against hand-checked vectors of the published layouts, round trips and fuzz."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exo_rt.bus import cia402 as c
from exo_rt.bus import mit


def test_nmt_sync_heartbeat_vectors():
    assert c.nmt(c.NMT_START, 3) == (0x000, b"\x01\x03")
    assert c.nmt(c.NMT_RESET_NODE) == (0x000, b"\x81\x00")
    assert c.sync() == (0x080, b"")
    assert c.heartbeat(5, c.HB_OPERATIONAL) == (0x705, b"\x05")
    assert c.decode_heartbeat(b"\x7f") == c.HB_PRE_OPERATIONAL
    assert c.decode_heartbeat(b"") is None and c.decode_heartbeat(b"\x05\x00") is None


def test_statusword_states_from_the_published_table():
    cases = {0x0000: c.NOT_READY, 0x0250: c.SWITCH_ON_DISABLED, 0x0221: c.READY_TO_SWITCH_ON,
             0x0233: c.SWITCHED_ON, 0x0237: c.OPERATION_ENABLED, 0x0217: c.QUICK_STOP_ACTIVE,
             0x021F: c.FAULT_REACTION_ACTIVE, 0x0218: c.FAULT, 0x0008: c.FAULT}
    for sw, state in cases.items():
        assert c.state_of(sw) == state, hex(sw)
    for state, sw in c.STATUSWORD.items():
        assert c.state_of(sw) == state


def test_pdo_vectors():
    # RPDO1 of node 2: controlword 0x000F, target torque −250 ‰ → 0F 00 06 FF
    assert c.rpdo1(2, c.CW_ENABLE_OPERATION, -250) == (0x202, bytes.fromhex("0f0006ff"))
    assert c.rpdo1(1, 0x0F, 10**6)[1][2:] == (32767).to_bytes(2, "little")  # saturates
    # TPDO1 of node 1: statusword 0x0237, position −2 counts, current 1000 ‰
    assert c.tpdo1(1, 0x0237, -2, 1000) == (0x181, bytes.fromhex("3702feffffffe803"))
    assert c.decode_tpdo1(bytes.fromhex("3702feffffffe803")) == (0x0237, -2, 1000)
    assert c.decode_tpdo1(b"\x37\x02") is None


def test_emcy_and_sdo_vectors():
    assert c.emcy(4, c.EMCY_OVERCURRENT, c.ERRREG_CURRENT) == (
        0x084, bytes.fromhex("1023020000000000"))
    assert c.decode_emcy(bytes.fromhex("1023020000000000")) == (0x2310, 0x02, b"\0" * 5)
    assert c.sdo_download(1, 0x6060, 0, 10, 1) == (0x601, bytes.fromhex("2f6060000a000000"))
    assert c.sdo_download(1, 0x1017, 0, 100, 2) == (0x601, bytes.fromhex("2b17100064000000"))
    assert c.sdo_upload_request(1, 0x6041, 0) == (0x601, bytes.fromhex("4041600000000000"))
    cmd, idx, sub, data = c.decode_sdo(bytes.fromhex("4b41600037020000"))
    assert (idx, sub, c.sdo_value(cmd, data)) == (0x6041, 0, 0x0237)
    assert c.sdo_abort(1, 0x2000, 0, c.ABORT_NO_OBJECT)[1] == bytes.fromhex("8000200000000206")


def test_mit_vectors_and_ranges():
    r = mit.MitRanges(p_max=12.5, v_max=50.0, t_max=18.0)
    # zero command: p at mid-range 32767, v 2047, kp 0, kd 0, t 2047
    assert mit.pack_command(0, 0, 0, 0, 0, r) == bytes.fromhex("7fff7ff0000007ff")
    p, v, kp, kd, t = mit.unpack_command(mit.pack_command(1.0, -3.0, 50.0, 1.0, 4.5, r), r)
    assert abs(p - 1.0) < 25 / 65535 and abs(v + 3.0) < 100 / 4095 and abs(t - 4.5) < 36 / 4095
    assert mit.pack_command(99, 0, 0, 0, 0, r)[:2] == b"\xff\xff"  # clamped to the range
    assert mit.unpack_command(mit.ENTER, r) is None
    rid, p, v, i, err = mit.unpack_reply(mit.pack_reply(3, -2.0, 5.0, -7.0, r, error=2), r)
    assert rid == 3 and err == 2 and abs(p + 2.0) < 1e-3 and abs(i + 7.0) < 1e-2


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
@settings(max_examples=3000, deadline=None)
@given(data=st.binary(max_size=12))
def test_decoders_never_raise(data):
    r = mit.MitRanges()
    for decode in (c.decode_nmt, c.decode_heartbeat, c.decode_emcy, c.decode_rpdo1,
                   c.decode_tpdo1, c.decode_sdo):
        decode(data)
    mit.unpack_command(data, r)
    mit.unpack_reply(data, r)


@settings(max_examples=500, deadline=None)
@given(sw=st.integers(0, 0xFFFF), pos=st.integers(-(2**31), 2**31 - 1),
       cur=st.integers(-32768, 32767))
def test_tpdo_round_trip(sw, pos, cur):
    assert c.decode_tpdo1(c.tpdo1(1, sw, pos, cur)[1]) == (sw, pos, cur)


@settings(max_examples=300, deadline=None)
@given(line=st.text(max_size=30))
def test_slcan_command_decoder_never_raises(line):
    from exo_rt.sim.slcan_server import decode_command

    decode_command(line)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=400))
def test_eds_reader_raises_only_config_errors(tmp_path_factory, text):
    from exo_rt.bus.eds import read_eds
    from exo_rt.errors import ConfigError

    path = tmp_path_factory.mktemp("eds") / "x.eds"
    path.write_text("[6071]\nDataType=0x0003\n" + text, encoding="utf-8", errors="replace")
    try:
        read_eds(path)
    except ConfigError:
        pass


# ----------------------------------------------------------------------------- rig fixture
def test_fixture_frames_round_trip():
    from exo_rt.bus import fixture as fx

    arb, data = fx.command(fx.FIXTURE_NODE, 0b10)
    assert arb == 0x270 and data == b"\x02" and fx.decode_command(data) == 2
    arb, data = fx.measurement(fx.FIXTURE_NODE, [12.346, -0.02, 400.0])
    assert arb == 0x1F0 and len(data) == 6
    assert fx.decode_measurement(data, 3) == pytest.approx([12.35, -0.02, 327.67])
    assert fx.decode_measurement(data, 2) is None and fx.decode_command(b"") is None


@given(st.binary(max_size=8), st.integers(0, 5))
def test_fixture_decoders_never_raise(data, n):
    from exo_rt.bus import fixture as fx

    out = fx.decode_measurement(data, n)
    assert out is None or (len(out) == n and all(abs(x) <= 327.68 for x in out))
    cmd = fx.decode_command(data)
    assert cmd is None or 0 <= cmd <= 255


def _encoder_drives():
    """One bus of the default leg's drives on a virtual bus, its frames captured."""
    import can

    from exo_rt.bus.drives import Drives
    from exo_rt.runtime.config import load_top

    top = load_top(Path(__file__).resolve().parents[1] / "configs" / "exo_leg.yaml")
    drives = Drives(can.Bus(interface="virtual", channel="clamp"), top.buses[0], top.robot)

    from exo_rt.bus.port import FramePort

    class Capture(FramePort):  # a port that keeps what it is given to send
        frames: list = []

        def send(self, arb, data, extended=False):
            self.frames.append(data)

        def recv(self):
            return None

    drives.port = Capture(drives.bus)
    return drives


_ENCODER = _encoder_drives()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=2,
                max_size=2))
def test_the_frame_encoder_is_the_last_clamp_on_current(currents):
    """Whatever the law computed, the RPDO carries at most the drive's peak current, 0 for
    NaN/Inf, and the command itself (to the ‰ resolution) inside the range."""
    import math

    import numpy as np

    d = _ENCODER
    d.port.frames.clear()
    d.send_rpdos(np.array(currents))
    for k, data in enumerate(d.port.frames):
        permille = c.decode_rpdo1(data)[1]
        amps_per_permille = d.rated_torque[k] / d.torque_constant[k] / 1000.0
        amps = permille * amps_per_permille
        peak = d.peak_current[k]
        assert abs(amps) <= peak + amps_per_permille
        if not math.isfinite(currents[k]):
            assert permille == 0
        elif abs(currents[k]) < 0.5 * peak:
            assert abs(amps - currents[k]) <= amps_per_permille
