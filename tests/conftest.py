"""Every CAN bus a test opens is shut down when the test ends — python-can warns, at garbage
collection, of a bus that was not ("… was not properly shut down"): a bus left open is a
socket and, for a simulated bus, a world that outlives its test. Buses opened at import or by
a module's fixtures are shut down at the session's end.

Tests run side by side on the session's workers (pytest-xdist, ``-n`` in pyproject.toml), a test
marked ``exclusive`` alone (tests/cpu_share.py).

Runs several tests read (the clinic's scripted session, a run sent SAFE by a fault:
tests/report_fixtures.py) are made once a session, in the background while the other tests of
their modules are drawn: the tests that read them run last."""

from __future__ import annotations

import weakref
from pathlib import Path

import can
import pytest
from cpu_share import CpuShare
from report_fixtures import SharedRuns, reads
from run_cache import RunCache

_OPEN: weakref.WeakSet = weakref.WeakSet()  # every bus opened, until it is collected
_init = can.BusABC.__init__
_READERS: set = set()  # the files of the tests that read a shared run
_SHARED: list[SharedRuns] = []  # the session's shared runs, once started
_CPU = CpuShare.for_worker()  # the workers' CPU-sharing lock (None: no other worker)


def _tracked_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _OPEN.add(self)


can.BusABC.__init__ = _tracked_init


def _close_all() -> None:
    for bus in list(_OPEN):
        if not getattr(bus, "_is_shutdown", True):
            try:
                bus.shutdown()
            except Exception:  # a bus whose peer is gone: shut down is all we ask of it
                bus._is_shutdown = True


@pytest.fixture(autouse=True)
def _buses_shut_down():
    """Each test's buses shut down at its end (module-level buses at the session's end)."""
    before = set(_OPEN)
    yield
    for bus in [b for b in list(_OPEN) if b not in before]:
        if not getattr(bus, "_is_shutdown", True):
            try:
                bus.shutdown()
            except Exception:
                bus._is_shutdown = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test (its set-up and tear-down too) shares the CPUs with the other workers' tests, or
    has them alone if marked ``exclusive`` — and keeps them for the next test if that is
    exclusive too: released in between, the other worker would start a test of its own there
    (up to half a minute) and the next exclusive test wait for it (measured: 174 s of such
    waits in a 16 min suite)."""
    if _CPU is None:
        yield
        return
    exclusive = item.get_closest_marker("exclusive") is not None
    _CPU.enter(exclusive)
    try:
        yield
    finally:
        if not (exclusive and nextitem is not None
                and nextitem.get_closest_marker("exclusive") is not None):
            _CPU.leave()  # (an exclusive test followed by another keeps the CPUs)


def pytest_sessionfinish(session, exitstatus):
    _close_all()
    for runs in _SHARED:  # an interrupted session: no run outlives it
        runs.close()


@pytest.fixture(scope="module")
def exo_leg():
    """The shipped one-leg exoskeleton with its wearer (configs/robots/exo_leg.yaml), once a
    module."""
    from exo_rt.model import load_mechanism
    return load_mechanism(Path(__file__).resolve().parents[1] / "configs" / "robots"
                          / "exo_leg.yaml")


@pytest.fixture(scope="module")
def exo_leg_alone():
    """The same exoskeleton without its wearer (the assistance laws' carried part)."""
    from exo_rt.model import load_mechanism
    return load_mechanism(Path(__file__).resolve().parents[1] / "configs" / "robots"
                          / "exo_leg.yaml", wearer=False)


def pytest_xdist_make_scheduler(config, log):
    """The workers' units of work (``--dist loadgroup``, pyproject.toml): a module's tests on
    one worker (its module-scoped fixtures made once), the modules that read the shared runs
    together (the runs made once) — the groups :func:`pytest_collection_modifyitems` names.

    pytest-xdist's own ``loadgroup`` finds a test's group in a suffix it appends to the item's
    ``_nodeid``, which pytest 9's ``Node.nodeid`` no longer returns: every test became a unit
    of its own, a module's fixtures were made on each worker its tests went to (measured: the
    suite's module fixtures made up to twice, the shared runs once per worker). So the units
    are drawn from the plain node ids here, by module; a module reads a shared run when its
    source names one of their fixtures."""
    if config.getvalue("dist") != "loadgroup":
        return None
    import re

    from report_fixtures import JOBS
    from xdist.scheduler import LoadScopeScheduling

    root = Path(config.rootpath)
    uses = re.compile(r"\b(" + "|".join(JOBS) + r")\b")
    readers = {f.relative_to(root).as_posix() for f in (Path(__file__).parent).glob("test_*.py")
               if uses.search(f.read_text(encoding="utf-8"))}

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "shared_runs" if module in readers else module

    return ModuleUnits(config, log)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    """The order: the modules with slow tests first (a worker's long units start early, not at
    the session's tail), the tests that read a shared run last (in their order: their modules'
    other tests are drawn while the runs are made); a module's ``exclusive`` tests first in it,
    one after the other (they keep the CPUs between them: :func:`pytest_runtest_protocol`).

    The workers' units of work (``--dist loadgroup``): a module's tests on one worker (its
    module-scoped fixtures made once), the modules that read the shared runs together (the
    runs made once)."""
    slow = {it.path for it in items if it.get_closest_marker("slow") is not None}
    order = {path: k for k, path in enumerate(dict.fromkeys(it.path for it in items))}
    items.sort(key=lambda it: (reads(it), it.path not in slow, order[it.path],
                               it.get_closest_marker("exclusive") is None))
    reading = {it.path for it in items if reads(it)}
    _READERS.update(reading)
    for it in items:
        it.add_marker(pytest.mark.xdist_group("shared_runs" if it.path in reading
                                              else it.path.stem))
        if it.get_closest_marker("exclusive") is not None and \
                it.get_closest_marker("flaky") is None:
            it.add_marker(pytest.mark.flaky(reruns=EXCLUSIVE_RERUNS))


# an exclusive test's figure is the machine's wall clock: on a shared VM a stall of its vCPUs
# can spoil one run (seen in CI: a cycle's 6.8 ms, a drive's SYNC watchdog tripped), so it
# runs once more (pytest-rerunfailures; the summary names every rerun); a fault of the code
# fails both runs
EXCLUSIVE_RERUNS = 1


def pytest_runtest_setup(item):
    """A test of a module that reads no shared run waits for them: nothing else shares the
    CPUs with its test."""
    if _SHARED and item.path not in _READERS:
        _SHARED[0].settle()


@pytest.fixture(scope="session")
def shared_runs(request, tmp_path_factory):
    """The runs the session's tests read, started now (``pytestmark =
    pytest.mark.usefixtures("shared_runs")`` in a module that reads them: from its first
    test)."""
    runs = SharedRuns(tmp_path_factory.mktemp("shared_runs"), request.session.items,
                      hold=_CPU.background if _CPU is not None else None)
    _SHARED.append(runs)
    runs.start()
    yield runs
    runs.close()


@pytest.fixture(scope="session")
def exo_rt_runs(tmp_path_factory) -> RunCache:
    """``exo-rt run`` command lines made once a test session, whichever worker asks first
    (tests/run_cache.py): ``exo_rt_runs.run(*args)`` → (run folder, the process's result)."""
    import os

    base = tmp_path_factory.getbasetemp()  # a worker's is in the session's own directory
    return RunCache((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
                    / "exo-rt-runs")


@pytest.fixture(scope="session")
def clinic_session_run(shared_runs) -> Path:
    """The clinic's scripted session (report_fixtures.SCRIPT on exo_2leg) run and reported,
    once a session: its run folder, alone in its archive folder (to read; copy it to write)."""
    out, (run, rep) = shared_runs.get("clinic_session_run")
    assert run.returncode == 0, run.stderr[-2000:]
    assert rep.returncode == 0, rep.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def fault_run(shared_runs):
    """exo_leg's default lockstep run, 2 s, the knee's feedback dropped at 0.5 s, once a
    session: (its process, its run folder — to read; copy it to write)."""
    out, (res,) = shared_runs.get("fault_run")
    return res, out
