"""Every CAN bus a test opens is shut down when the test ends — python-can warns, at garbage
collection, of a bus that was not ("… was not properly shut down"): a bus left open is a
socket and, for a simulated bus, a world that outlives its test. Buses opened at import or by
a module's fixtures are shut down at the session's end."""

from __future__ import annotations

import weakref
from pathlib import Path

import can
import pytest

_OPEN: weakref.WeakSet = weakref.WeakSet()  # every bus opened, until it is collected
_init = can.BusABC.__init__


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


def pytest_sessionfinish(session, exitstatus):
    _close_all()


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

