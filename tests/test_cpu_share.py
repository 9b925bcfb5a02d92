"""The workers' CPU-sharing lock (tests/cpu_share.py): tests side by side, an exclusive one
alone, and an exclusive one that waits is not starved by the others' next tests."""

from __future__ import annotations

import threading
import time

from cpu_share import CpuShare


def _enter(share: CpuShare, exclusive: bool) -> threading.Event:
    got = threading.Event()

    def go():
        share.enter(exclusive)
        got.set()

    threading.Thread(target=go, daemon=True).start()
    return got


def test_an_exclusive_test_waits_for_the_running_ones_and_the_next_wait_for_it(tmp_path):
    running, alone, nxt, other = (CpuShare(tmp_path) for _ in range(4))
    running.enter(exclusive=False)
    other.enter(exclusive=False)  # two tests side by side
    got_alone = _enter(alone, exclusive=True)
    assert not got_alone.wait(0.3)  # it waits for both
    got_next = _enter(nxt, exclusive=False)
    assert not got_next.wait(0.3)  # a later test waits behind it: no starvation
    running.leave()
    assert not got_alone.wait(0.2)
    other.leave()
    assert got_alone.wait(5.0)
    assert not got_next.wait(0.3)  # still alone
    alone.leave()
    assert got_next.wait(5.0)
    nxt.leave()


def test_background_work_holds_an_exclusive_test_off(tmp_path):
    worker, alone = CpuShare(tmp_path), CpuShare(tmp_path)
    release = threading.Event()
    held = threading.Event()

    def background():
        with worker.background():
            held.set()
            release.wait(5.0)

    threading.Thread(target=background, daemon=True).start()
    assert held.wait(5.0)
    got = _enter(alone, exclusive=True)
    assert not got.wait(0.3)
    release.set()
    t0 = time.monotonic()
    assert got.wait(5.0) and time.monotonic() - t0 < 5.0
    alone.leave()


def test_outside_xdist_there_is_no_lock(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert CpuShare.for_worker() is None
