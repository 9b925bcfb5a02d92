"""The crutch on the board link (issue 35, docs/board.md): the BUTTONS, ANSWER and MENU
frames in Python, in the C99 codec (cross-checked both ways, fuzzed) and in the compiled
receive path; the PC's view of the buttons (mask, presses, changes, liveness); the emulated
crutch's buttons on its clock, its silence, and the answers and menus it records."""

from __future__ import annotations

import binascii
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from cobs import cobs
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge import fastdecode as fd
from firmware_bridge import protocol as p
from firmware_bridge import requests as rq
from firmware_bridge.emulator import BoardEmulator, apply_command, button_mask
from firmware_bridge.link import BoardLink
from tests.test_firmware_bridge import C_DIR, _compile

DT = 1e-3  # s: the lockstep cycle
PERIOD = rq.BUTTON_PERIOD_S
FRAMES = [  # (body, sequence): every field at its limits somewhere
    (p.Buttons(rq.B_GO | rq.B_NEXT, 0), 0), (p.Buttons(0xFF, 0xFFFF), 255),
    (p.Buttons(0, 7), 3),
    (p.Answer(rq.START, rq.ACCEPTED, rq.R_NONE, 2), 1),
    (p.Answer(rq.STOP, rq.REJECTED, rq.R_NOT_WALKING), 2),
    (p.Answer(rq.START, rq.FINISHED, rq.R_NONE, 0), 4), (p.Answer(255, 255, 255, 255), 5),
    (p.Menu(4, 1, p.NO_INDEX, 2, 0b1011, 123, 1100, 80), 6),
    (p.Menu(0, p.NO_INDEX, p.NO_INDEX, p.NO_INDEX, 0, 0, 0, 0), 7),
    (p.Menu(255, 254, 31, 0, 0xFFFF_FFFF, 0xFFFF, 0xFFFF, 100), 8),
]
LENGTHS = {p.BUTTONS: 3, p.ANSWER: 4, p.MENU: 13}


def _line(body, seq: int) -> str:
    """The C test program's line of a session frame (exo_bridge_test.c, fields-*)."""
    name = {p.Buttons: "buttons", p.Answer: "answer", p.Menu: "menu"}[type(body)]
    values = [getattr(body, f) for f in body.__dataclass_fields__]
    return " ".join(str(v) for v in (name, seq, *values))


def _raw_frame(kind: int, seq: int, payload: bytes) -> bytes:
    """A frame with a good CRC, whatever its payload (to test the decoders' length checks)."""
    raw = bytes((p.VERSION, kind, seq, len(payload))) + payload
    return cobs.encode(raw + struct.pack("<H", binascii.crc_hqx(raw, 0xFFFF))) + b"\x00"


def _compiled_decode(stream: bytes):
    """The compiled receive path's state after ``stream``."""
    st_, partial, other, raw = fd.new_state()
    data = np.frombuffer(stream, dtype=np.uint8).copy()
    fd.decode_stream(data, len(data), st_, partial, other, raw, 200.0)
    return st_, other


@pytest.fixture(scope="module")
def c_codec(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("c"))


def _c(exe, mode: str, data: bytes) -> list[str]:
    return subprocess.run([str(exe), mode], input=data, capture_output=True, check=True,
                          timeout=60).stdout.decode().splitlines()


# ---------------------------------------------------------------- the frames
def test_frames_round_trip_and_their_layout():
    for body, seq in FRAMES:
        frame = p.encode(body, seq)
        assert p.FrameDecoder().feed(frame) == [p.Message(seq, body)]
        kind, payload = p._payload(body)
        assert len(payload) == LENGTHS[kind]
    # the layout by hand: kind u8, answer u8, reason u8, motion u8 / mask u8, presses u16 LE
    assert p._payload(p.Answer(rq.STOP, rq.REJECTED, rq.R_NOT_WALKING)) == (
        0x04, bytes((2, 2, 7, 0xFF)))
    assert p._payload(p.Buttons(rq.B_GO | rq.B_MODE, 0x1234)) == (0x85, bytes((0x11, 0x34, 0x12)))
    assert p._payload(p.Menu(4, 1, 0xFF, 2, 0x0102_0304, 0x0506, 0x0708, 99))[1] == bytes(
        (4, 1, 0xFF, 2, 4, 3, 2, 1, 6, 5, 8, 7, 99))
    assert p.encode(p.Buttons(1, 0x1_0003), 0) == p.encode(p.Buttons(1, 3), 0)  # wraps


@pytest.mark.parametrize(("body", "field"), [
    (p.Menu(4, level_pct=101), "level_pct"), (p.Menu(4, speed_mm_s=70_000), "speed_mm_s"),
    (p.Menu(4, possible=1 << 32), "possible"), (p.Answer(1, 1, 0, 256), "motion"),
    (p.Answer(1.0, 1), "kind"), (p.Buttons(-1, 0), "mask"), (p.Menu(4, steps=-1), "steps")])
def test_a_field_out_of_range_is_named(body, field):
    with pytest.raises(ValueError, match=rf"\.{field} = .* does not fit its frame"):
        p.encode(body, 0)


def test_numpy_integers_encode():
    assert p.encode(p.Menu(np.int64(4), steps=np.uint16(9)), 0) == p.encode(p.Menu(4, steps=9), 0)


def test_wrong_lengths_are_counted_everywhere(c_codec):
    """A session frame one byte short or long, or a menu's level over 100 % (good CRC):
    refused and counted by the Python decoder, the compiled receive path and the C decoders —
    never an exception."""
    stream = b"".join(_raw_frame(kind, i, bytes(n + d))
                      for i, (kind, n) in enumerate(LENGTHS.items()) for d in (-1, 1))
    stream += _raw_frame(p.MENU, 9, bytes(12) + b"\x65")
    dec = p.FrameDecoder()
    assert dec.feed(stream) == []
    assert dec.stats.unknown_type == 7 and dec.stats.frames == 0
    st_, _ = _compiled_decode(stream)
    assert st_[fd.D_UNKNOWN] == 7 and st_[fd.D_FRAMES] == 0 and st_[fd.D_OTHER] == 0
    assert st_[fd.D_BUTTONS_N] == 0
    out = _c(c_codec, "fields-decode", stream)
    assert out[:-1] == [f"reject {k}" for k in LENGTHS for _ in (-1, 1)] + [f"reject {p.MENU}"]
    assert out[-1] == "stats 7 0 0 0 0 0 rejected 7"


def test_the_c_header_has_python_s_codes():
    """Every code of firmware_bridge.requests the frames carry is in exo_bridge.h under its
    name, with its value, and the header has no other (a code appended in Python and not in C
    fails here)."""
    header = (C_DIR / "exo_bridge.h").read_text()
    defined = {m[1]: int(m[2], 0) for m in re.finditer(r"#define (EB_\w+) (0x[0-9A-F]+|\d+)u",
                                                       header)}
    want = {f"EB_B_{n.upper()}": b for b, n in rq.BUTTONS.items()}
    want |= {f"EB_K_{n.upper()}": k for k, n in rq.KINDS.items()}
    want |= {f"EB_A_{n.upper()}": a for a, n in rq.ANSWERS.items()}
    want |= {f"EB_R_{n.upper()}": r for r, n in rq.REASONS.items()}
    got = {k: v for k, v in defined.items() if re.match(r"EB_[BKAR]_", k)}
    assert got == want
    assert defined["EB_BUTTON_PERIOD_MS"] == round(rq.BUTTON_PERIOD_S * 1000)
    assert defined["EB_BUTTON_SILENCE_MS"] == round(rq.BUTTON_SILENCE_S * 1000)
    assert (defined["EB_ANSWER"], defined["EB_MENU"], defined["EB_BUTTONS"],
            defined["EB_NO_INDEX"]) == (p.ANSWER, p.MENU, p.BUTTONS, p.NO_INDEX)
    assert {defined[f"EB_{n}_LEN"] for n in ("BUTTONS", "ANSWER", "MENU")} == set(
        LENGTHS.values())


def test_c_and_python_agree_both_ways(c_codec):
    lines = [_line(b, s) for b, s in FRAMES]
    c_frames = _c(c_codec, "fields-encode", ("\n".join(lines) + "\n").encode())
    assert c_frames == [p.encode(b, s).hex() for b, s in FRAMES]  # C encodes → Python's bytes
    decoded = p.FrameDecoder().feed(b"".join(bytes.fromhex(h) for h in c_frames))
    assert decoded == [p.Message(s, b) for b, s in FRAMES]  # … which Python decodes
    out = _c(c_codec, "fields-decode", b"".join(p.encode(b, s) for b, s in FRAMES))
    assert out == [*lines, f"stats {len(FRAMES)} 0 0 0 0 0 rejected 0"]  # and C Python's
    assert _c(c_codec, "fields-encode", b"menu 1 0 0 0 0 0 0 0 101\n") == ["refused"]


_u8, _u16 = st.integers(0, 0xFF), st.integers(0, 0xFFFF)
_bodies = st.one_of(
    st.builds(p.Buttons, _u8, _u16), st.builds(p.Answer, _u8, _u8, _u8, _u8),
    st.builds(p.Menu, _u8, _u8, _u8, _u8, st.integers(0, 0xFFFF_FFFF), _u16, _u16,
              st.integers(0, 100)))


@settings(max_examples=40, deadline=None)
@given(frames=st.lists(st.tuples(_bodies, _u8), min_size=1, max_size=60))
def test_random_fields_cross_both_ways(c_codec, frames):
    lines = [_line(b, s) for b, s in frames]
    c_frames = _c(c_codec, "fields-encode", ("\n".join(lines) + "\n").encode())
    assert c_frames == [p.encode(b, s).hex() for b, s in frames]
    out = _c(c_codec, "fields-decode", b"".join(p.encode(b, s) for b, s in frames))
    assert out[:-1] == lines


_payloads = st.tuples(st.sampled_from(sorted(LENGTHS)), _u8, st.binary(max_size=20))


@settings(max_examples=30, deadline=None)
@given(frames=st.lists(_payloads, min_size=1, max_size=80))
def test_random_payloads_decode_alike(c_codec, frames):
    """Frames of the session kinds with any payload (good CRC): Python's decoder, the compiled
    receive path and C accept the same ones with the same fields, refuse and count the same
    others, and nothing raises."""
    stream = b"".join(_raw_frame(k, s, b) for k, s, b in frames)
    dec = p.FrameDecoder()
    msgs = dec.feed(stream)
    good = [(k, s, b) for k, s, b in frames if len(b) == LENGTHS[k]
            and (k != p.MENU or b[12] <= 100)]
    assert [(m.sequence, p._payload(m.body)) for m in msgs] == [(s, (k, b)) for k, s, b in good]
    assert dec.stats.unknown_type == len(frames) - len(good)
    out = _c(c_codec, "fields-decode", stream)
    assert [x for x in out[:-1] if not x.startswith("reject")] == [
        _line(m.body, m.sequence) for m in msgs]
    assert out[-1].endswith(f"rejected {len(frames) - len(good)}")
    st_, _ = _compiled_decode(stream)
    assert st_[fd.D_UNKNOWN] == dec.stats.unknown_type
    assert st_[fd.D_BUTTONS_N] == sum(isinstance(m.body, p.Buttons) for m in msgs)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(data=st.binary(max_size=40), kind=st.sampled_from(sorted(LENGTHS)), cut=_u8)
def test_python_decoder_takes_any_session_payload(data, kind, cut):
    """Any payload of a session kind, fed whole or cut anywhere: a message of its type, or a
    counted refusal; never an exception."""
    frame = _raw_frame(kind, 0, data)
    dec = p.FrameDecoder()
    msgs = dec.feed(frame[:cut]) + dec.feed(frame[cut:])
    assert len(msgs) + dec.stats.unknown_type == 1
    if msgs:
        assert p._payload(msgs[0].body) == (kind, data)


def test_c_session_decoders_under_sanitizers(tmp_path):
    """The C decoders of the session frames under AddressSanitizer/UBSan on a corpus of any
    payloads of their types (0–64 bytes), bit flips and garbage: no error, and the frames
    accepted are Python's."""
    exe = _compile(tmp_path, sanitize=True)
    rng = np.random.default_rng(35)
    kinds = sorted(LENGTHS)
    parts = [_raw_frame(kinds[i % 3], i & 0xFF, rng.bytes(int(rng.integers(0, 65))))
             for i in range(600)]
    parts += [_raw_frame(k, 0, rng.bytes(LENGTHS[k])) for k in kinds for _ in range(100)]
    good = b"".join(p.encode(b, s) for b, s in FRAMES)
    for _ in range(200):
        flipped = bytearray(good)
        flipped[int(rng.integers(0, len(flipped)))] ^= 1 << int(rng.integers(0, 8))
        parts += [bytes(flipped), rng.bytes(int(rng.integers(0, 80)))]
    stream = b"".join(parts)
    res = subprocess.run([str(exe), "fields-decode"], input=stream, capture_output=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert b"runtime error" not in res.stderr and b"AddressSanitizer" not in res.stderr
    msgs = [m for m in p.FrameDecoder().feed(stream)
            if isinstance(m.body, (p.Buttons, p.Answer, p.Menu))]
    out = [x for x in res.stdout.decode().splitlines()[:-1] if not x.startswith("reject")]
    assert len(msgs) > 300 and out == [_line(m.body, m.sequence) for m in msgs]


# ---------------------------------------------------------------- the PC's view
class Clock(list):
    """The simulated clock: ``t[0]`` (s), and the next cycle to run (``k``)."""

    k = 0


def _lockstep(**kw):
    """An emulated board and a link on one simulated clock (a socket pair, as the simulated
    run has them)."""
    t = Clock([0.0])
    clock = lambda: t[0]  # noqa: E731
    emu = BoardEmulator(clock=clock, transport="socket", **kw)
    link = BoardLink(emu.path, clock=clock)
    return t, emu, link


def _run(t, emu, link, until: float, each=None) -> None:
    """Cycles of DT up to ``until``: the board's tick, then the link's poll (as a cycle)."""
    while t.k * DT <= until + 1e-12:
        t[0] = t.k * DT
        emu.tick(t[0])
        link.poll()
        if each is not None:
            each(t[0])
        t.k += 1


def test_scheduled_buttons_reach_the_link_on_time():
    """The emulator's plan (holds, a click, a press shorter than a frame) reaches the link's
    ``button_changes`` within one cycle of its time; ``buttons`` and ``button_presses`` follow;
    a frame goes out every BUTTON_PERIOD_S between changes."""
    t, emu, link = _lockstep()
    try:
        assert np.isnan(link.buttons_time) and link.buttons == 0
        emu.schedule_buttons([(0.100, "go"), (0.530, rq.B_GO | rq.B_NEXT), (0.7, "none")])
        emu.click("stop", at=1.0)
        gaps = []
        _run(t, emu, link, 0.9, lambda now: gaps.append(now - link.buttons_time))
        emu.press("mode", held=False)  # pressed and released between two frames
        _run(t, emu, link, 1.5)
        changes = list(link.button_changes)
        want = [(0.0, 0, 0), (0.1, rq.B_GO, 1), (0.53, rq.B_GO | rq.B_NEXT, 2),
                (0.7, 0, 2), (0.901, 0, 3), (1.0, rq.B_STOP, 4), (1.0 + PERIOD, 0, 4)]
        assert len(changes) == len(want)
        for (tc, mask, presses), (tw, mw, pw) in zip(changes, want, strict=True):
            assert (mask, presses) == (mw, pw) and abs(tc - tw) <= DT + 1e-9
        assert [c[1:] for c in emu.button_changes] == [w[1:] for w in want]
        assert (link.buttons, link.button_presses) == (0, 4)
        assert max(gaps) <= PERIOD + 1e-9  # a frame every period, and at once on a change
    finally:
        link.close()
        emu.close()


def test_buttons_time_stops_while_silent():
    """``silence``: no BUTTONS frame for its time (the status goes on: the link is alive);
    ``buttons_time`` stops and resumes within a frame period of its end; a change made
    meanwhile goes out after it."""
    t, emu, link = _lockstep()
    try:
        apply_command(emu, "silence 0.5 1.2")  # (the command line a session script would send)
        apply_command(emu, "buttons 1.0 go")
        seen = []
        _run(t, emu, link, 2.5, lambda now: seen.append((now, link.buttons_time,
                                                         link.status_time, link.buttons)))
        now, bt, status, mask = np.array(seen).T
        quiet = now - bt
        assert quiet.max() == pytest.approx(1.2 + PERIOD, abs=PERIOD)  # 0.5 → 1.7 s
        assert quiet[now < 0.5].max() <= PERIOD + 1e-9
        assert quiet[now >= 1.7 + DT].max() <= PERIOD + 1e-9
        assert (now - status).max() <= DT + 1e-9  # the board itself kept talking
        assert not link.link_lost
        assert mask[(now > 1.0) & (now < 1.7)].max() == 0  # GO not seen before the end
        (t_go,) = [c[0] for c in link.button_changes if c[1] == rq.B_GO]
        assert t_go == pytest.approx(1.7, abs=DT + 1e-9)
        assert quiet.max() > rq.BUTTON_SILENCE_S  # what the session reads as the input lost
    finally:
        link.close()
        emu.close()


def test_many_changes_in_one_read_each_reach_the_link_once():
    """Changes that arrive in one read are each queued once (up to CHANGE_SLOTS; older ones
    lost), with the time of that read."""
    t, emu, link = _lockstep()
    try:
        _run(t, emu, link, 0.01)
        before = len(link.button_changes)
        for n in range(1, 21):  # 20 changes, polled once
            emu.press(rq.B_GO if n % 2 else rq.B_NEXT, held=bool(n % 2))
            emu.tick(t[0])
            if n % 2:
                emu.release("go")
        link.poll()
        got = list(link.button_changes)[before:]
        assert len(got) == fd.CHANGE_SLOTS and {c[0] for c in got} == {t[0]}
        assert got[-1][1:] == emu.button_changes[-1][1:] == (link.buttons, link.button_presses)
        assert [c[1:] for c in got] == [c[1:] for c in list(emu.button_changes)[-16:]]
        link.poll()
        assert len(link.button_changes) == before + fd.CHANGE_SLOTS  # nothing twice
    finally:
        link.close()
        emu.close()


def test_the_poll_reports_buttons_for_python():
    """The compiled poll says when a BUTTONS frame came (N_BUTTONS, part of N_PYTHON: what a
    compiled cycle must hand to BoardLink.take_news)."""
    assert fd.N_PYTHON & fd.N_BUTTONS and not fd.N_PYTHON & fd.N_STATUS
    assert fd.N_PYTHON | fd.N_STATUS < 1 << fd.WORD_SHIFT
    st_, partial, other, raw = fd.new_state()
    count, data = np.zeros(1, np.int32), np.zeros(256, np.uint8)
    frame = np.frombuffer(p.encode(p.Buttons(1, 1), 0), np.uint8)
    count[0] = len(frame)
    data[:len(frame)] = frame
    out = fd.poll(-1, 0, count, data, st_, partial, other, raw, 200.0)
    assert out & fd.N_PYTHON == fd.N_BUTTONS
    count[0] = 0
    assert fd.poll(-1, 0, count, data, st_, partial, other, raw, 200.0) & fd.N_BUTTONS == 0


# ---------------------------------------------------------------- answers and menus
def test_answers_and_menus_reach_the_crutch_within_a_cycle():
    """ANSWER and MENU frames a BoardLink sends are recorded by the emulated board with its
    time: in lockstep, at its next tick (one cycle ≤ 10 ms); the display shows the menu."""
    t, emu, link = _lockstep()
    try:
        _run(t, emu, link, 0.05)
        emu.click("go", at=0.1)
        sent = {}

        def answer(now):
            if link.button_changes[-1][1] == rq.B_GO and "answer" not in sent:
                sent["answer"] = now
                link.send_answer(rq.START, rq.ACCEPTED, rq.R_NONE, 1)
                assert link.send_menu(4, 0, 1, 1, 0b110, 0, 0.0, 80)
        _run(t, emu, link, 0.3, answer)
        link.send_answer(rq.STOP, rq.REJECTED, rq.R_NOT_WALKING)
        _run(t, emu, link, 0.31)
        (t_ans, a1), (_, a2) = emu.answers
        assert a1 == p.Answer(rq.START, rq.ACCEPTED, rq.R_NONE, 1)
        assert a2 == p.Answer(rq.STOP, rq.REJECTED, rq.R_NOT_WALKING, p.NO_INDEX)
        t_press = next(c[0] for c in emu.button_changes if c[1] == rq.B_GO)
        assert t_ans - t_press <= 0.010 and t_ans - sent["answer"] == pytest.approx(DT)
        assert [m for _, m in emu.menus] == [p.Menu(4, 0, 1, 1, 0b110, 0, 0, 80)]
        assert emu.display(["sit", "stand_up", "walk"]) == (
            "state 4 posture 0 motion stand_up selected stand_up possible [stand_up, walk] "
            "steps 0 speed 0.00 m/s level 80 %")
    finally:
        link.close()
        emu.close()


def test_send_menu_sends_changes_and_refreshes():
    t, emu, link = _lockstep()
    try:
        args = (4, None, None, 2, 0b101, 17, 1234.4, 79.6)
        assert link.send_menu(*args)
        assert not link.send_menu(*args)  # the same, at once: not sent
        assert link.send_menu(*args[:6], 1100.0, 79.6)  # another speed: sent
        t[0] = 0.2
        assert not link.send_menu(*args[:6], 1100.0, 79.6)
        t[0] = 0.2 + link.menu_refresh_s
        assert link.send_menu(*args[:6], 1100.0, 79.6)  # refreshed
        assert link.send_menu(*args[:6], 1100.0, 79.6, force=True)
        emu.tick(t[0])
        assert [m for _, m in emu.menus] == [p.Menu(4, 0xFF, 0xFF, 2, 0b101, 17, 1234, 80)] + [
            p.Menu(4, 0xFF, 0xFF, 2, 0b101, 17, 1100, 80)] * 3
        with pytest.raises(ValueError, match="level_pct"):
            link.send_menu(4, None, None, None, 0, 0, 0, 120)
    finally:
        link.close()
        emu.close()


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_answers_over_a_pty_on_the_wall_clock():
    """The same over a pseudo-terminal (the real board's kind of line), each side in its own
    thread: the buttons arrive, the answer goes back; both within 10 ms."""
    emu = BoardEmulator()
    emu.start()
    link = BoardLink(emu.path)
    try:
        assert link.wait_for_status(2.0)
        emu.press("go")
        t_press = time.monotonic()
        end = t_press + 2.0
        while link.buttons != rq.B_GO and time.monotonic() < end:
            link.poll()
            time.sleep(1e-4)  # (the emulator's thread runs meanwhile)
        t_seen = time.monotonic()
        link.send_answer(rq.GO, rq.ACCEPTED)
        while not emu.answers and time.monotonic() < end:
            time.sleep(1e-4)
        assert link.buttons == rq.B_GO and link.button_presses == 1
        assert emu.answers[0][1] == p.Answer(rq.GO, rq.ACCEPTED, 0, p.NO_INDEX)
        assert emu.answers[0][0] - t_seen <= 0.010  # the emulator ticks every 0.5 ms
        assert t_seen - t_press <= 0.010
        assert abs(link.buttons_time - t_seen) <= 0.010
    finally:
        link.close()
        emu.close()


# ---------------------------------------------------------------- the emulator's commands
def test_button_names_and_commands():
    assert button_mask("go+next") == rq.B_GO | rq.B_NEXT == button_mask(["next", "GO"])
    assert button_mask("none") == 0 == button_mask([]) and button_mask(0x11) == 0x11
    for bad in ("jump", "go+", 256):
        with pytest.raises(ValueError):
            button_mask(bad)
    t, emu, link = _lockstep()
    try:
        for line in ("buttons 0.1 0x3", "click 0.2 mode", "buttons 0.3 prev+stop",
                     "buttons", "buttons 1 2 3", "click 0.5 jump", "silence x",
                     "buttons 0.4 none"):
            assert apply_command(emu, line)  # malformed lines are ignored
        _run(t, emu, link, 0.5)
        assert [c[1:] for c in emu.button_changes] == [
            (0, 0), (3, 2), (3 | rq.B_MODE, 3), (3, 3), (rq.B_PREV | rq.B_STOP, 4), (0, 4)]
    finally:
        link.close()
        emu.close()


def test_the_emulator_process_takes_button_commands():
    """``python -m firmware_bridge.emulator``: ``buttons MASK`` on its standard input reaches a
    BoardLink on its pseudo-terminal."""
    proc = subprocess.Popen([sys.executable, "-m", "firmware_bridge.emulator"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    link = None
    try:
        path = proc.stdout.readline().strip().removeprefix("serving board=")
        link = BoardLink(path)
        proc.stdin.write("buttons go+mode\n")
        proc.stdin.flush()
        end = time.monotonic() + 5.0
        while link.buttons != rq.B_GO | rq.B_MODE and time.monotonic() < end:
            link.poll()
            time.sleep(1e-3)
        assert link.buttons == rq.B_GO | rq.B_MODE and link.button_presses == 2
    finally:
        if link is not None:
            link.close()
        proc.stdin.write("stop\n")
        proc.stdin.close()
        proc.wait(timeout=10)
