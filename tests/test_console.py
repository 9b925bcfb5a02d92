"""The therapist's console (exo_rt/session/console.py): keys typed on a stream become requests
(source CONSOLE) without poll ever blocking, unknown keys a hint and no request; the status
line shows state, posture or motion with progress, the possible motions numbered, strides,
speed, assistance and the last answer; the view writes it at most every 0.2 s, in place on a
terminal."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
import warnings

import pytest

from exo_rt.session.console import (
    EMPTY,
    HELP,
    KEYS_PER_POLL,
    ConsoleSource,
    ConsoleView,
    render,
    status_lines,
)
from firmware_bridge import requests as rq

LOST_NOTE = ("console input lost: end of input — no key is heard any more; a walk stops at "
             "the end of its stride")


def _keys(text: str) -> ConsoleSource:
    src = ConsoleSource(io.StringIO(text))
    src.join(5.0)
    assert src.closed
    return src


def _kinds(reqs):
    return [(rq.KINDS[r.kind], r.motion, r.value) for r in reqs]


def test_every_key_and_its_request():
    src = _keys("g s\nn p m c q g 2 1 + - x h\n")
    src.set_possible(("walk", "sit_down"))
    src.set_status({"speed": 0.5})
    first = src.poll(42)
    assert len(first) == KEYS_PER_POLL  # a cycle takes at most KEYS_PER_POLL keys
    reqs = [*first, *src.poll(42)]
    assert all(r.source == rq.CONSOLE and r.cycle == 42 for r in reqs)
    kinds = _kinds(reqs)
    assert kinds[:10] == [("go", None, None), ("stop", None, None), ("next", None, None),
                          ("prev", None, None), ("mode", None, None),
                          ("confirm", None, None), ("end", None, None),
                          ("go_release", None, None), ("start", "sit_down", None),
                          ("start", "walk", None)]
    assert [k[0] for k in kinds[10:]] == ["speed", "speed"] and len(kinds) == 12
    assert kinds[10][2] == pytest.approx(0.6, abs=1e-12)
    assert kinds[11][2] == pytest.approx(0.4, abs=1e-12)
    notes = src.messages()
    assert notes == (LOST_NOTE, "unknown key 'x' — h for help", HELP)
    assert src.lost == "end of input"
    assert src.messages() is EMPTY and src.poll(43) is EMPTY


def test_keys_that_cannot_act_give_a_hint_and_no_request():
    src = _keys("3+")
    src.set_status({"possible": ["stand_up"], "speed": None})
    assert src.poll(0) == []
    assert src.messages() == (LOST_NOTE, "no motion 3 here (possible: 1 stand_up)",
                              "the speed is not known yet: + and - change it while walking")
    src = _keys("1")
    assert src.poll(0) == [] and src.messages() == (LOST_NOTE,
                                                    "no motion 1 here (possible: none)",)


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_keys_through_a_pipe_arrive_while_poll_never_blocks():
    r, w = os.pipe()
    stream = os.fdopen(r, "r", encoding="utf-8")
    src = ConsoleSource(stream)
    try:
        src.set_possible(["walk"])
        t0 = time.perf_counter()
        for c in range(1000):
            assert src.poll(c) is EMPTY
        per_poll = (time.perf_counter() - t0) / 1000
        assert per_poll < 1e-4, per_poll  # s: nothing waits on the stream
        os.write(w, b"1")
        deadline = time.monotonic() + 5.0
        got = []
        while not got and time.monotonic() < deadline:
            got = list(src.poll(7))
            time.sleep(0.001)
        assert _kinds(got) == [("start", "walk", None)] and got[0].cycle == 7
        os.write(w, b"gg")
        deadline = time.monotonic() + 5.0
        while len(got) < 3 and time.monotonic() < deadline:
            got += src.poll(8)
            time.sleep(0.001)
        assert _kinds(got[1:]) == [("go", None, None), ("go_release", None, None)]
        assert not src.closed
    finally:
        os.close(w)
    src.join(5.0)
    assert src.closed
    src.close()
    stream.close()


STATUS = {"time": 12.34, "state": "RUN", "posture": "standing",
          "possible": ["walk", "sit_down"], "strides": 0, "speed": 0.4,
          "level": 1.0, "go": False,
          "answer": rq.Answer(rq.FINISHED, rq.START, motion="stand_up", posture="standing")}


def test_the_status_line():
    assert render(STATUS) == ("   12.3 s | RUN | standing | possible: 1 walk, 2 sit_down | "
                              "strides 0 | 0.40 m/s | assist 100% | GO – | "
                              "last: finished stand_up → standing")
    walking = {**STATUS, "motion": "walk", "progress": 0.437, "strides": 7, "speed": 0.45,
               "step_length": 0.31, "level": {"left": 0.6, "right": 1.0}, "go": True,
               "answer": rq.Answer(rq.REJECTED, rq.START, rq.R_BUSY, motion="sit_down")}
    line = render(walking)
    assert " walk  44% | " in line and "possible" not in line and "standing" not in line
    assert "strides 7 | 0.45 m/s × 0.31 m | assist L 60% R 100% | GO held" in line
    assert line.endswith("last: rejected start sit_down: busy")
    paused = render({"motion": "stand_up", "progress": 0.5, "paused": True,
                     "answer": {"answer": "accepted", "request": "go_release"}})
    assert paused == "stand_up  50% (paused: hold GO) | last: accepted go_release"
    assert render({"state": "RUN", "posture": None, "possible": ["home"],
                   "waiting": "confirm"}) == \
        "RUN | no posture | waiting for confirm | possible: 1 home"


def test_the_status_line_says_what_each_motion_needs_and_what_waits_for_what():
    """What each possible motion needs (GO held, a CONFIRM), what waits for what (HOME for
    CONFIRM, the next motion for GO's release), a GO-held move's GO, the time against the
    run's limit, and keys no longer heard."""
    standing = {**STATUS, "time": 3.0, "duration": 60.0, "ends": 90.0,
                "needs": {"sit_down": "hold GO: g"}}
    assert render(standing).startswith(
        "    3.0 s of 60 s | RUN | standing | possible: 1 walk, 2 sit_down (hold GO: g) | ")
    home = render({"posture": None, "possible": ["home"], "waiting": "confirm",
                   "pending": "home", "needs": {"home": "then CONFIRM: c"}})
    assert home == "no posture | home waits for CONFIRM: c | possible: 1 home (then CONFIRM: c)"
    moving = {"motion": "sit_down", "progress": 0.0, "hold": True, "go": False}
    assert render(moving) == "sit_down   0% (waits for GO: g) | GO –"
    assert render({**moving, "progress": 0.25, "go": True}) == \
        "sit_down  25% (GO held: g pauses) | GO held"
    assert render({"motion": "walk", "stopping": True}) == "walk (stopping)"
    assert render({"posture": "sitting", "go_block": True, "go": True}) == \
        "sitting | release GO (g) before the next motion | GO held"
    late = render({"time": 75.0, "duration": 60.0, "ends": 90.0, "state": "RUN",
                   "lost": "end of input", "posture": "standing"})
    assert late == "   75.0 s: past 60 s, stopped at 90 s | RUN | NO KEYS: end of input | standing"


def test_a_status_on_a_narrow_terminal_is_cut_between_its_parts():
    status = {**STATUS, "needs": {"sit_down": "hold GO: g"}}
    for width in (40, 80, 200):
        lines = status_lines(status, width)
        assert all(len(x) <= width - 1 for x in lines), (width, lines)
        if width > 40:  # (at 40, the possible motions' part is cut)
            assert " | ".join(lines) == render(status)
    assert len(status_lines(status, 200)) == 1 and len(status_lines(status, 80)) == 2
    (cut,) = status_lines({"posture": "x" * 50}, 40)
    assert cut == "x" * 38 + "…"  # 39 characters: the width less one


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_view_writes_at_most_every_0_2_s_and_only_changes():
    clock, out = Clock(), io.StringIO()
    view = ConsoleView(out, clock=clock)
    assert view.update(STATUS)
    clock.t = 0.1
    assert not view.update({**STATUS, "strides": 1})  # too soon
    clock.t = 0.25
    assert not view.update(STATUS)  # unchanged
    assert view.update({**STATUS, "strides": 1})
    view.update(STATUS, notes=("no motion 3 here",))
    lines = out.getvalue().split("\n")
    assert lines[0] == render(STATUS) and lines[1] == render({**STATUS, "strides": 1})
    assert lines[2] == "no motion 3 here" and lines[3] == "" and len(lines) == 4


def test_on_a_terminal_the_status_block_is_rewritten_in_place_the_hints_above_it():
    clock, tty = Clock(), Tty()
    view = ConsoleView(tty, clock=clock)  # (a StringIO has no size: 80 columns)
    assert view.tty and view.update(STATUS)
    clock.t = 0.2
    view.note("hint")
    assert view.update({**STATUS, "strides": 2})
    view.close()
    one, two = status_lines(STATUS, 80), status_lines({**STATUS, "strides": 2}, 80)
    assert len(one) == len(two) == 2  # 133 characters on 80 columns
    up = "\x1b[1A\r\x1b[J"  # to the block's first line, cleared to the screen's end
    assert tty.getvalue() == ("\r\x1b[J" + "\n".join(one) + up + "hint\n" + "\n".join(one)
                              + up + "\n".join(two) + "\n")


def test_the_process_own_lines_go_above_the_status_block_not_into_it(monkeypatch):
    """While the console holds the terminal, a line another part of the run writes to
    sys.stderr (a derating line, from its own thread) goes above the status block, whole."""
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    view = ConsoleView(clock=Clock())
    view.take_stderr()
    assert view.update(STATUS)
    block = "\n".join(status_lines(STATUS, 80))
    writer = threading.Thread(target=lambda: print("derating: hip from 1.2 s", file=sys.stderr))
    writer.start()
    writer.join()
    sys.stderr.write("a line not ended")
    view.close()
    assert sys.stderr is tty
    up = "\x1b[1A\r\x1b[J"
    assert tty.getvalue() == ("\r\x1b[J" + block + up + "derating: hip from 1.2 s\n" + block
                              + up + "a line not ended\n" + block + "\n")


# ----------------------------------------------------------------------------- hazards
def _wait_for(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.001)
    return pred()


@pytest.mark.hazard("H-CONSOLE-BYTE")
def test_a_byte_that_is_not_text_under_a_strict_locale_is_a_hint_and_stop_is_still_heard():
    """Standard input decoded strictly as ASCII (a strict locale): a byte 0xFF, and a cut
    UTF-8 sequence, are each a hint; the reader lives on and hears STOP; its end is said."""
    r, w = os.pipe()
    stream = os.fdopen(r, "r", encoding="ascii", errors="strict")
    src = ConsoleSource(stream)
    try:
        os.write(w, b"\xff")
        os.write(w, b"\xc3")
        reqs, notes = [], []  # (messages() hands each hint once: kept, the bytes may come
        # to the reader in one read or two, and the polls between them)
        assert _wait_for(lambda: reqs.extend(src.poll(1)) or notes.extend(src.messages())
                         or len(notes) == 2)
        assert reqs == [] and src.lost is None and not src.closed
        os.write(w, b"s")
        got = _wait_for(lambda: src.poll(2))
        assert _kinds(got) == [("stop", None, None)]
    finally:
        os.close(w)
    src.join(5.0)
    assert src.closed and src.lost == "end of input"
    assert src.messages() == (LOST_NOTE,)
    stream.close()


class Broken:
    """A stream whose reading fails (a terminal gone, a driver's error)."""

    def isatty(self):
        return False

    def read(self, n=-1):
        raise RuntimeError("device vanished")


@pytest.mark.hazard("H-CONSOLE-BYTE")
def test_a_read_error_is_said_not_silent(monkeypatch):
    src = ConsoleSource(Broken())
    src.join(5.0)
    assert src.lost == "read error (RuntimeError: device vanished)"
    assert src.messages() == ("console input lost: read error (RuntimeError: device "
                              "vanished) — no key is heard any more; a walk stops at the end "
                              "of its stride",)
    monkeypatch.setattr("sys.stdin", None)  # started with standard input closed (<&-)
    src = ConsoleSource()
    src.join(5.0)
    assert src.lost == "no standard input" and src.poll(0) is EMPTY


PASTE_BYTES = 3 * 2 ** 20  # 3 MiB


def paste(seed: int = 43) -> bytes:
    """3 MiB of printable ASCII (every key among it) with a byte 0xFF every 1000th."""
    import random
    import string

    text = bytearray(random.Random(seed).choices(string.printable.encode(), k=PASTE_BYTES))
    text[::1000] = b"\xff" * len(text[::1000])
    return bytes(text)


def keys_in(data: bytes) -> int:
    return len(data) - sum(data.count(c.encode()) for c in " \t\r\n")


@pytest.mark.hazard("H-REQUEST-FLOOD")
def test_a_3_mb_paste_is_dropped_whole_with_one_warning_and_keys_typed_after_it_act():
    data = paste()
    r, w = os.pipe()
    stream = os.fdopen(r, "r", encoding="utf-8")
    src = ConsoleSource(stream)
    src.set_status({"possible": ["walk", "sit_down"], "speed": 0.4})
    writer = threading.Thread(target=os.write, args=(w, data), daemon=True)
    writer.start()
    reqs, longest = [], 0.0
    try:
        end = time.monotonic() + 30.0
        while (writer.is_alive() or src.dropped < keys_in(data)) and time.monotonic() < end:
            t0 = time.thread_time()
            got = src.poll(0)
            longest = max(longest, time.thread_time() - t0)
            assert len(got) <= KEYS_PER_POLL
            reqs += got
            time.sleep(0.0005)
        assert src.dropped == keys_in(data) and reqs == []
        time.sleep(0.15)  # a pause: the paste is over
        os.write(w, b"s")
        got = _wait_for(lambda: src.poll(1))
        assert _kinds(got) == [("stop", None, None)]
    finally:
        os.close(w)
    notes = src.messages()
    assert sum("a paste ignored" in n for n in notes) == 1, notes
    assert longest < 1e-3, longest  # s of CPU in one poll during the paste
    src.join(5.0)
    stream.close()


# ----------------------------------------------------------------------------- in a run
def _console_sink(ctl):
    from exo_rt.session.session import ConsoleSink

    (sink,) = [s for s in ctl.session.sources if isinstance(s, ConsoleSink)]
    return sink


class WallClock:
    """A source that asks nothing: the wall clock at its first and last poll (RUN's
    cycles)."""

    def __init__(self) -> None:
        self.first = self.last = None

    def poll(self, k: int):
        now = (k, time.monotonic())
        self.first = self.first or now
        self.last = now
        return EMPTY

    def pace(self) -> float:
        """Wall-clock ms a cycle between the first poll and the last."""
        (k0, t0), (k1, t1) = self.first, self.last
        return (t1 - t0) / ((k1 - k0) * 1e-3)


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
@pytest.mark.slow
@pytest.mark.hazard("H-CONSOLE-BYTE")
def test_the_end_of_the_consoles_input_stops_a_walk_at_the_end_of_its_stride(tmp_path,
                                                                            monkeypatch):
    """Key 1 (walk), then the input ends: the console asks STOP itself (noted why) and the
    walk ends standing within its stride, as when the crutch goes silent — not SAFE. The run
    goes at the wall clock's pace (lockstep with --console)."""
    from tests.sessions_fixtures import requests, run_session

    r, w = os.pipe()
    os.write(w, b"1")
    os.close(w)
    monkeypatch.setattr("sys.stdin", os.fdopen(r, "r"))
    clock = WallClock()
    ctl, res = run_session(tmp_path, [{"request": "end", "at": 4.0}], duration=4.0,
                           board=None, console=True, sources=(lambda ctl: clock,))
    s = res.summary
    assert s["final_state"] == "SHUTDOWN" and not s["faults"]
    asked = [(e["request"], e["source"], e["answer"], e.get("note")) for e in requests(ctl)]
    assert asked == [("start", "console", "accepted", None),
                     ("stop", "console", "accepted", "console input lost: end of input"),
                     ("end", "script", "accepted", None)]
    start, stop = requests(ctl)[:2]
    assert stop["cycle"] - start["cycle"] <= 2
    (walk,) = [e for e in ctl.events if e["event"] == "finished"]
    assert walk["posture"] == "standing"
    assert (walk["cycle"] - stop["cycle"]) * 1e-3 <= start["period"] + 1e-3  # s
    assert _console_sink(ctl).source.lost == "end of input"
    # paced: a millisecond of wall time a cycle over the session (unpaced lockstep: ≈ 0.3)
    print(f"paced: {clock.pace():.3f} ms of wall time a cycle")
    assert 0.95 <= clock.pace() <= 1.5, clock.pace()


def _paste_run(tmp_path, monkeypatch, data: bytes | None):
    """A walk on the script (STOP at 3 s, END once it finished) with the console on a pipe:
    ``data`` written into it 0.5 s into RUN. Returns (controller, result)."""
    from exo_rt.cycle.states import RUN
    from tests.sessions_fixtures import Asks, run_session

    r, w = os.pipe()
    monkeypatch.setattr("sys.stdin", os.fdopen(r, "r"))
    box = {}

    def keep(ctl):  # (the paster waits for the run)
        box["ctl"] = ctl
        return Asks(())

    def paster():
        while "ctl" not in box or RUN not in box["ctl"].k0 or \
                box["ctl"].cycles < box["ctl"].k0[RUN] + 500:
            time.sleep(0.01)
        if data:
            t0 = time.monotonic()
            os.write(w, data)
            box["paste_s"] = time.monotonic() - t0  # (the figure docs/sessions.md gives)

    thread = threading.Thread(target=paster, daemon=True)
    thread.start()
    script = [{"request": "start", "motion": "walk", "at": 0.0},
              {"request": "stop", "at": 3.0}, {"request": "end", "after": "finished"}]
    try:
        ctl, res = run_session(tmp_path, script, duration=8.0, board=None, console=True,
                               sources=(keep,))
        ctl.paste_s = box.get("paste_s")
        return ctl, res
    finally:
        thread.join(10.0)
        os.close(w)


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
@pytest.mark.slow
@pytest.mark.hazard("H-REQUEST-FLOOD")
def test_a_3_mb_paste_mid_walk_asks_nothing_and_no_cycle_lasts_long(tmp_path, monkeypatch,
                                                                    capsys):
    """The same walk with and without a 3 MiB paste on the console 0.5 s into it (lockstep,
    paced): the paste asks nothing (dropped whole, one warning), the session is the same,
    and the longest cycle with it is at most twice the longest without (a paste used to
    make one cycle of 130 s). A VM's stall of the whole process lands on one cycle of either
    run at random (one of 6.8 ms was seen, the paste's run otherwise as quiet as the other);
    the paste's cost lands on the cycles that read it every time: a pair over the bound is
    run once more, and the second must pass."""
    for attempt in range(2):
        quiet, pasted = _paste_pair(tmp_path / f"try{attempt}", monkeypatch, capsys)
        if pasted <= max(2.0 * quiet, 5000.0):
            break
        warnings.warn(f"the longest cycle {pasted:.0f} µs with the paste against {quiet:.0f} "
                      "µs without: run once more (a stall of the machine hits one cycle)",
                      stacklevel=1)
    # as the bound for 20 000 requests at once: ≤ 2× the longest without (µs; on a
    # shared machine the longest cycle is another process's doing, hence a floor of 5 ms)
    assert pasted <= max(2.0 * quiet, 5000.0), (quiet, pasted)


def _paste_pair(tmp_path, monkeypatch, capsys):
    """The walk without the paste and with it (the test above): their longest cycles (µs),
    having checked that the paste asked nothing."""
    from tests.sessions_fixtures import sequence

    data = paste()
    ctl_a, res_a = _paste_run(tmp_path / "quiet", monkeypatch, None)
    ctl_b, res_b = _paste_run(tmp_path / "paste", monkeypatch, data)
    for res in (res_a, res_b):
        assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    assert sequence(ctl_b) == sequence(ctl_a)
    assert not [e for e in ctl_b.events if e.get("source") == "console"]
    assert _console_sink(ctl_b).source.dropped == keys_in(data)
    assert capsys.readouterr().err.count("a paste ignored") == 1
    (qa, pa), (qb, pb) = [(r.summary["timing"]["compute_us"]["max"],
                           r.summary["timing"]["compute_us"]["p99"]) for r in (res_a, res_b)]
    quiet, pasted = qa, qb
    print(f"longest cycle {qa:.0f} µs (p99 {pa:.0f}) without the paste, {qb:.0f} µs (p99 "
          f"{pb:.0f}) with it; the paste read and dropped in {ctl_b.paste_s:.2f} s")
    return quiet, pasted
