"""The board link: protocol vectors, the C99 codec against Python, fuzzing, the emulated
board's watchdog, and the runtime's reactions to e-stop and link loss (docs/board.md)."""

from __future__ import annotations

import shutil
import subprocess
import time
import tty
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exo_rt.control import trajectory
from firmware_bridge import protocol as p
from firmware_bridge import ttyio
from firmware_bridge.emulator import BoardEmulator
from firmware_bridge.fastdecode import MIN_SWING_FRAMES
from firmware_bridge.link import BoardLink

ROOT = Path(__file__).resolve().parents[1]
C_DIR = ROOT / "firmware_bridge" / "c"
MESSAGES = [
    (p.Heartbeat(5), 0), (p.Power(True), 1), (p.Power(False), 2), (p.Indicator(3, 255, 0, 9), 3),
    (p.Status(True, False, True, 24123), 7), (p.Status(False, True, False, 11800), 255),
    (p.Pressure((10, 20, 30, 40)), 8), (p.Pressure(()), 9), (p.FirmwareVersion(1, 2, 3), 10),
    (p.Error(0xBEEF), 11),
    # the session frames (tests/test_board_buttons.py): buttons, answers, the display's menu
    (p.Buttons(0x05, 513), 12), (p.Buttons(0, 0), 13), (p.Answer(1, 2, 4, 0xFF), 14),
    (p.Menu(4, 1, 0xFF, 2, 0x8000_0005, 41, 1250, 80), 15), (p.Buttons(0x05, 514), 16),
]
# hand-checked: COBS(01 81 07 03 05 3b 5e + CRC-16/CCITT-FALSE 0xad83 little-endian) + 00
VECTOR = (p.Status(True, False, True, 24123), 7, bytes.fromhex("0a01810703053b5e83ad00"))


def _compile(tmp: Path, sanitize: bool = False) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the C codec (apt-get install gcc)")
    exe = tmp / ("ebt_san" if sanitize else "ebt")
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"] if sanitize \
        else ["-O2"]
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", *flags, "-o", str(exe),
                    str(C_DIR / "exo_bridge.c"), str(C_DIR / "exo_bridge_test.c")], check=True)
    return exe


@pytest.fixture(scope="module")
def c_codec(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("c"))


def test_vector_and_round_trips():
    body, seq, frame = VECTOR
    assert p.encode(body, seq) == frame
    for body, seq in MESSAGES:
        (msg,) = p.FrameDecoder().feed(p.encode(body, seq))
        assert msg == p.Message(seq, body)


def test_c_and_python_agree_both_ways(c_codec):
    lines = []
    for body, seq in MESSAGES:
        kind, payload = p._payload(body)
        lines.append(f"{kind} {seq} {payload.hex() or '-'}")
    out = subprocess.run([str(c_codec), "encode"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [p.encode(body, seq).hex() for body, seq in MESSAGES]
    stream = b"".join(p.encode(body, seq) for body, seq in MESSAGES)
    dec = subprocess.run([str(c_codec), "decode"], input=stream, capture_output=True,
                         check=True).stdout.decode().splitlines()
    assert dec[:-1] == lines and dec[-1] == f"stats {len(MESSAGES)} 0 0 0 0 0"


def _corrupt(data, frames):
    kind = data.draw(st.sampled_from(["random", "truncate", "flip", "concat", "mixed"]))
    stream = b"".join(frames)
    if kind == "random":
        return data.draw(st.binary(max_size=300))
    if kind == "truncate":
        return stream[: data.draw(st.integers(0, len(stream)))]
    if kind == "flip":
        b = bytearray(stream)
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << data.draw(st.integers(0, 7))
        return bytes(b)
    if kind == "concat":
        return stream + data.draw(st.binary(max_size=50)) + stream
    return data.draw(st.binary(max_size=40)) + b"\x00" + stream


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None)
@given(data=st.data())
def test_decoder_never_raises_and_never_returns_a_bad_frame(data):
    frames = [p.encode(b, s) for b, s in MESSAGES]
    blob = _corrupt(data, frames)
    dec = p.FrameDecoder()
    cut = data.draw(st.integers(0, len(blob)))
    msgs = dec.feed(blob[:cut]) + dec.feed(blob[cut:])
    valid = {(m.sequence, m.body) for m in (p.Message(s, b) for b, s in MESSAGES)}
    for m in msgs:  # anything returned passed its CRC: it is one of the frames we made
        assert (m.sequence, m.body) in valid
    # after garbage, a delimiter and a good frame always decode (the delimiter may also end a
    # whole frame that was waiting for it)
    assert dec.feed(b"\x00" + frames[4])[-1] == p.Message(7, MESSAGES[4][0])


def _reference_state(msgs, contact):
    """What the compiled receive path must hold after ``msgs`` (protocol.FrameDecoder's)."""
    status = next((m.body for m in reversed(msgs) if isinstance(m.body, p.Status)), None)
    pressures = [m.body for m in msgs if isinstance(m.body, p.Pressure)]
    strikes, inside, swing = 0, False, 0
    for body in pressures:  # BoardLink's heel-strike rule, with the foot switch's debounce
        heel = body.newton[0] if body.newton else 0
        if inside:
            if heel < contact * 0.5:
                inside, swing = False, 0
        else:
            swing += 1
            if heel >= contact:
                inside = True
                strikes += swing >= MIN_SWING_FRAMES or strikes == 0
    others = [(m.sequence, m.body) for m in msgs
              if not isinstance(m.body, (p.Status, p.Pressure, p.Buttons))]
    changes, last = [], None  # the buttons: each change of mask or presses
    for m in msgs:
        if isinstance(m.body, p.Buttons) and (m.body.mask, m.body.presses) != last:
            last = (m.body.mask, m.body.presses)
            changes.append(last)
    return status, pressures[-1].newton if pressures else None, strikes, others, changes


def test_a_heel_strike_needs_a_swing_before_it():
    """The foot switch's debounce (fastdecode.MIN_SWING_FRAMES: 0.2 s of the board's 1 kHz
    PRESSURE frames): a stance load that dips under the release and comes back within a few
    hundredths of a second is no heel strike; the first landing counts, and so does each one
    after a swing of at least that long — one strike per stride on a foot that bounces."""
    from firmware_bridge import fastdecode as fd

    def strikes(heels):
        st_, partial, other, raw = fd.new_state()
        blob = b"".join(p.encode(p.Pressure((h, 0)), i % 256) for i, h in enumerate(heels))
        chunk = np.frombuffer(blob, dtype=np.uint8).copy()
        fd.decode_stream(chunk, len(chunk), st_, partial, other, raw, 200.0)
        return int(st_[fd.D_HEEL_N])

    swing = [0] * MIN_SWING_FRAMES
    stance = [400] * 300
    bounce = [80] * 30 + [400] * 20  # released for 30 ms, loaded again: the foot bouncing
    assert strikes(stance + bounce + stance) == 1  # the first landing only
    assert strikes(stance + swing + stance) == 2  # a swing of 0.2 s: a second landing
    assert strikes(stance + swing[:-2] + stance) == 1  # 2 ms short of it: none
    # the first landing, then one a stride: each stance's bounce left out
    assert strikes(stance + 3 * (bounce + swing + stance)) == 4


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(data=st.data())
def test_compiled_receive_path_is_the_python_decoder(data):
    """firmware_bridge.fastdecode against protocol.FrameDecoder on the same corrupted streams
    cut at the same places: the same statistics, the same latest status and pressures, the
    same heel strikes, the same rare frames."""
    from firmware_bridge import fastdecode as fd

    bodies = MESSAGES + [(p.Pressure((h,)), 20 + i) for i, h in enumerate((0, 250, 90, 300))]
    blob = _corrupt(data, [p.encode(b, s) for b, s in bodies])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=3)))
    dec = p.FrameDecoder()
    st_, partial, other, raw = fd.new_state()
    msgs, rare = [], []
    for a, b in zip([0, *cuts], [*cuts, len(blob)], strict=True):
        msgs += dec.feed(blob[a:b])
        chunk = np.frombuffer(blob[a:b], dtype=np.uint8).copy()
        fd.decode_stream(chunk, len(chunk), st_, partial, other, raw, 200.0)
        for row in range(st_[fd.D_OTHER]):
            n = int(other[row, 2])
            rare.append((int(other[row, 1]), p._body(int(other[row, 0]),
                                                       bytes(other[row, 3:3 + n]))))
        st_[fd.D_OTHER] = 0
    ref = dec.stats
    assert [int(st_[c]) for c in (fd.D_FRAMES, fd.D_CRC, fd.D_BAD_LENGTH, fd.D_UNKNOWN,
                                  fd.D_BAD_VERSION, fd.D_OVERSIZE, fd.D_COBS, fd.D_RESYNCS,
                                  fd.D_GAPS)] == [
        ref.frames, ref.crc_errors, ref.bad_length, ref.unknown_type, ref.bad_version,
        ref.oversize, ref.cobs_errors, ref.resyncs, ref.gaps]
    status, newton, strikes, others, changes = _reference_state(msgs, 200.0)
    if status is None:
        assert st_[fd.D_STATUS_N] == 0
    else:
        assert (bool(st_[fd.D_ESTOP]), bool(st_[fd.D_POWER]), bool(st_[fd.D_TRIPPED]),
                int(st_[fd.D_SUPPLY])) == (status.estop, status.motor_power,
                                           status.watchdog_tripped, status.supply_mV)
    if newton is not None:
        k = int(st_[fd.D_N_SENSORS])
        assert tuple(int(x) for x in st_[fd.D_SENSORS:fd.D_SENSORS + k]) == newton
    assert st_[fd.D_HEEL_N] == strikes and rare == others
    assert st_[fd.D_BUTTONS_N] == sum(isinstance(m.body, p.Buttons) for m in msgs)
    assert st_[fd.D_CHANGES] == len(changes)
    ring = [tuple(int(x) for x in st_[fd.D_CHANGE_RING + 2 * (c % fd.CHANGE_SLOTS):][:2])
            for c in range(max(0, len(changes) - fd.CHANGE_SLOTS), len(changes))]
    assert ring == changes[-fd.CHANGE_SLOTS:]
    if changes:
        assert (int(st_[fd.D_BUTTONS]), int(st_[fd.D_PRESSES])) == changes[-1]


def test_c_decoder_survives_the_corpus_under_sanitizers(tmp_path):
    exe = _compile(tmp_path, sanitize=True)
    rng = np.random.default_rng(0)
    frames = b"".join(p.encode(b, s) for b, s in MESSAGES)
    corpus = [rng.bytes(int(rng.integers(0, 400))) for _ in range(300)]
    for _ in range(300):
        b = bytearray(frames)
        for _ in range(3):
            b[int(rng.integers(0, len(b)))] ^= 1 << int(rng.integers(0, 8))
        corpus.append(bytes(b))
    corpus.append(b"\x01" * 5000 + b"\x00" + frames)  # oversize then a resync
    blob = b"\x00".join(corpus)
    res = subprocess.run([str(exe), "decode"], input=blob, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert b"runtime error" not in res.stderr and b"ERROR: AddressSanitizer" not in res.stderr


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
@pytest.mark.hazard("H-BOARD-WATCHDOG")
def test_watchdog_cuts_power_and_latches():
    """Heartbeats stop: the board cuts motor power at its first tick that finds the last
    heartbeat older than ``watchdog_s`` — not before, not a tick later — and keeps it off
    when heartbeats come back, until re-armed.

    The figure is the emulator's own tick times, recorded as it runs: a host that stalls the
    emulator's thread (a CI run saw 80 ms) delays that tick, not the verdict. Where the
    ticks around the expiry came on time, the cut is within 0.05 s + 3 ms of the last
    heartbeat, as the board's firmware must be."""
    emu = BoardEmulator(watchdog_s=0.05)
    ticks: list[float] = []
    tick = emu.tick

    def recorded_tick(now=None):
        now = emu.clock()
        ticks.append(now)
        tick(now)

    emu.tick = recorded_tick  # the emulator's thread ticks through the instance
    emu.start()
    link = BoardLink(emu.path, link_timeout=0.05)
    link.start()
    try:
        assert link.wait_for_power(2.0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.3:
            link.send_heartbeat(4)
            time.sleep(0.002)
        assert emu.motor_power
        last = emu.last_heartbeat  # heartbeats stop here
        time.sleep(0.25)
        assert not emu.motor_power and emu.watchdog_tripped
        seen = np.array(ticks)
        k = int(np.argmax(seen - last > 0.05))  # the first tick past the expiry
        assert seen[k] - last > 0.05 and seen[k - 1] - last <= 0.05
        assert seen[k] <= emu.power_off_at < seen[k + 1]  # cut at that tick
        gap = seen[k] - seen[k - 1]  # the emulator's period there, as the host ran it
        assert emu.power_off_at - last <= 0.05 + max(gap, 0.002) + 0.001
        for _ in range(50):  # heartbeats again: still off until re-armed
            link.send_heartbeat(4)
            time.sleep(0.002)
        assert not emu.motor_power
        assert link.wait_for_power(2.0) and emu.motor_power
    finally:
        link.close()
        emu.close()


@pytest.mark.parametrize("transport", ["pty", "socketpair"])
def test_polls_read_only_what_the_line_holds(transport):
    """The link and the emulator ask the line how many bytes it holds before reading
    (firmware_bridge.ttyio): an idle line reads as 0, never as a read that waits on the tty
    worker; what was written arrives whole, over one or more polls."""
    emu = BoardEmulator(transport=transport)
    link = BoardLink(emu.path)
    try:
        assert ttyio.waiting(link._fd, ttyio.probe()) == 0
        link.poll()  # an idle line: nothing, no error
        assert link.status is None
        emu.tick()  # one status, one pressure and the firmware version
        written = len(p.encode(p.Status(False, False, False, 24000), 0))
        count = ttyio.probe()
        end = time.monotonic() + 1.0
        while ttyio.waiting(link._fd, count) < written and time.monotonic() < end:
            time.sleep(0.001)  # a pty hands bytes over in a kernel worker
        assert ttyio.waiting(link._fd, count) >= written
        end = time.monotonic() + 1.0
        while link.version is None and time.monotonic() < end:
            link.poll()
        assert link.status is not None and link.version == p.FirmwareVersion(1, 0, 0)
        assert ttyio.waiting(link._fd, count) == 0
        link.send_heartbeat(3, force=True)
        end = time.monotonic() + 1.0
        while emu.last_state != 3 and time.monotonic() < end:
            emu.tick()
        assert emu.last_state == 3
        assert ttyio.waiting(-1, count) == 0  # a descriptor that cannot say: 0, no error
    finally:
        link.close()
        emu.close()


def test_gait_phase_from_emulated_foot_contacts():
    """Heel strikes from the emulated board's foot-sole pressure give the gait phase within
    2 % of a cycle of the emulated cadence."""
    t = [0.0]
    clock = lambda: t[0]  # noqa: E731
    emu = BoardEmulator(stride_s=1.3, clock=clock, transport="socket")
    link = BoardLink(emu.path, clock=clock)
    state = np.array([0.0, 1.0, 0.0])
    seen = 0
    worst = 0.0
    for k in range(20_000):  # 20 s at 1 kHz
        t[0] = k * 1e-3
        emu.tick(t[0])
        link.poll()
        while link.heel_strikes:
            trajectory.phase_on_heel_strike(state, link.heel_strikes.popleft(), 0.5, 3.0, 0.8)
            seen += 1
        if seen >= 5:  # once the period estimate has converged
            true = (t[0] / 1.3) % 1.0
            est = trajectory.phase_from_events(state, t[0])
            worst = max(worst, min(abs(est - true), 1 - abs(est - true)))
    link.close()
    emu.close()
    assert seen >= 14 and worst <= 0.02


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "cause", "limit"), [("estop@0.5", "estop", 3),
                                                      ("board_link_loss@0.5+0.1",
                                                       "board_link_loss", 20 + 3)])
@pytest.mark.hazard("H-ESTOP")
@pytest.mark.hazard("H-BOARD-LINK")
def test_runtime_reacts_to_the_board(spec, cause, limit):
    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller, Injection

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    c = Controller(top, "sim", injections=(Injection.parse(spec, top.robot.joint_names),))
    s = c.run(3.0, None).summary
    (fault,) = s["faults"]
    assert s["final_state"] == "SAFE" and fault["cause"] == cause
    assert fault["reaction_cycles"] <= limit  # e-stop: 3 cycles; link loss: its 20 ms timeout


@pytest.mark.slow
def test_event_driven_gait_follows_the_heel_strikes():
    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller

    top = load_top(ROOT / "configs" / "exo_leg.yaml", controller="computed_torque_events")
    c = Controller(top, "sim")
    s = c.run(8.0, None).summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"]
    assert c.phase_state[trajectory.PH_COUNT] >= 3  # heel strikes reached the reference
    assert abs(c.phase_state[trajectory.PH_PERIOD] - 2.0) < 0.02
    for j in s["joints"].values():
        assert j["rms_error_deg"] <= 0.5


@pytest.mark.hazard("H-BOARD-WATCHDOG")
def test_the_boards_watchdog_cuts_the_simulated_drives_current():
    """Motor power is physical in simulation: the board's watchdog (no heartbeat for 50 ms)
    opens its relay, and the simulated drives then deliver no current, whatever they were told
    — the layer that stops the leg when the PC is dead."""
    from exo_rt.bus.drives import Drives
    from exo_rt.runtime.config import load_top
    from exo_rt.sim.launch import SimulatedBuses
    from firmware_bridge.link import BoardLink

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    bs = SimulatedBuses(top, "sim", realtime=False, start_pose=[0.3, 0.6])
    try:
        board = BoardLink(bs.board_path(), clock=bs.clock, link_timeout=0.02)
        assert board.wait_for_power(2.0, tick=bs.tick)
        (d,) = [Drives(bus, b, top.robot) for bus, b in zip(bs.buses, top.buses, strict=True)]
        d.configure()
        d.enable()
        command = np.array([3.0, -2.0])  # A: a current the drives keep being told
        plant = bs.world.plant
        for _ in range(20):  # heartbeats on: the current flows
            board.send_heartbeat(4)
            d.send_rpdos(command)
            d.send_sync()
            d.collect()
            bs.tick()
        assert np.allclose(plant.currents[:2], command, rtol=0.05)
        t_last = bs.world.t
        cut = None
        for _ in range(120):  # the PC goes silent on the board link; the drives are still told
            d.send_rpdos(command)
            d.send_sync()
            d.collect()
            bs.tick()
            board.poll()
            if cut is None and not bs.world.motor_power:
                cut = bs.world.t - t_last
        assert cut is not None and 0.05 <= cut <= 0.05 + 2e-3  # the watchdog's 50 ms (+1 tick)
        assert np.all(np.abs(plant.currents[:2]) < 0.05)  # no current: the relay is open
        assert board.status.watchdog_tripped and not board.motor_power  # and the board says so
    finally:
        bs.close()


def test_the_kept_heartbeat_frames_are_the_encoders():
    """send_heartbeat keeps each (state, sequence) frame it encoded: every frame on the line is
    p.encode's, its sequence numbers counting on, its state the one asked for — also after
    the sequence wrapped and the kept frames are used again."""
    import os

    board, pc = os.openpty()
    link = BoardLink(f"fd:{pc}")
    dec = p.FrameDecoder()
    try:
        tty.setraw(board)
        states = [k % 5 for k in range(600)]
        line = b""
        for k, state in enumerate(states):
            expected = p.encode(p.Heartbeat(state), k & 0xFF)
            link.send_heartbeat(state, force=True)
            got = os.read(board, 4096)
            assert got == expected
            line += got
        msgs = dec.feed(line)
        assert [m.body for m in msgs] == [p.Heartbeat(s) for s in states]
        assert [m.sequence for m in msgs] == [k & 0xFF for k in range(600)]
        assert len(link._heartbeats) == len({(s, k & 0xFF) for k, s in enumerate(states)})
    finally:
        link.close()
        os.close(board)
