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


def test_the_workers_units_are_modules_and_the_shared_runs_readers_together(pytestconfig):
    """tests/conftest.py's scheduler (``--dist loadgroup``): a test goes with its module's
    tests, a module that reads a shared run with the other readers — from the plain node id,
    which pytest-xdist's own groups no longer reach under pytest 9 (every test was a unit of
    its own, a module's fixtures made on each worker). Another ``--dist``: xdist's own."""
    from conftest import pytest_xdist_make_scheduler

    class Config:  # what the scheduler reads of the controller's configuration
        rootpath = pytestconfig.rootpath
        dist = "loadgroup"

        def getvalue(self, name):
            return {"dist": self.dist, "tx": ["2*popen"]}.get(name)

    units = pytest_xdist_make_scheduler(Config(), None)
    assert units._split_scope("tests/test_scene.py::test_layout_has_a_3d_panel") == \
        "tests/test_scene.py"
    assert units._split_scope("tests/test_world_peaks.py::test_x[computed_torque.yaml]") == \
        "tests/test_world_peaks.py"
    assert units._split_scope("tests/test_figures.py::test_any") == "shared_runs"
    assert units._split_scope("tests/test_report_html.py::test_any") == "shared_runs"
    # test_runtime.py names a *default_run*, no shared run's fixture
    assert units._split_scope("tests/test_runtime.py::test_any") == "tests/test_runtime.py"
    other = Config()
    other.dist = "load"
    assert pytest_xdist_make_scheduler(other, None) is None
