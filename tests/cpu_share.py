"""The CPUs shared by the test session's workers (pytest-xdist, ``-n``): tests run side by side,
except a test marked ``exclusive`` — one that measures wall-clock timing (a real-time run's
stale cycles, a cycle's length under load, a live run's pace) or opens a ``udp_multicast`` bus
(Linux delivers a wildcard-bound multicast socket every group joined on the host: two such
tests side by side would hear each other) — which runs alone.

A readers-writer lock on two files (``flock``), shared by the session's workers through the
temporary directory named for the run (xdist's ``testrunuid``): every test holds the *cpu*
lock shared, an exclusive test holds it alone. A *turnstile* taken before the cpu lock gives an
exclusive test its turn: once it waits, the other workers' next tests wait behind it rather
than keep the lock shared for ever. Background work of a worker (the shared runs of
tests/report_fixtures.py) holds the cpu lock shared on its own descriptor while it runs.

Without xdist (a plain ``pytest``) nothing is locked: there is no other worker.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path


class CpuShare:
    """The session's two lock files (directory ``base``), opened by one worker."""

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self._turnstile_path = base / "turnstile.lock"
        self._cpu_path = base / "cpu.lock"
        self._turnstile = os.open(self._turnstile_path, os.O_RDWR | os.O_CREAT, 0o600)
        self._cpu = os.open(self._cpu_path, os.O_RDWR | os.O_CREAT, 0o600)
        self._exclusive = False

    @classmethod
    def for_worker(cls) -> CpuShare | None:
        """The lock of this xdist run, or None outside xdist."""
        uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if not uid or not os.environ.get("PYTEST_XDIST_WORKER"):
            return None
        return cls(Path(tempfile.gettempdir()) / f"exo-rt-tests-{uid}")

    def enter(self, exclusive: bool) -> None:
        """Before a test: the cpu lock, shared or alone."""
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._cpu, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except BaseException:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            raise
        self._exclusive = exclusive
        if not exclusive:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def leave(self) -> None:
        """After a test."""
        fcntl.flock(self._cpu, fcntl.LOCK_UN)
        if self._exclusive:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self._exclusive = False

    @contextlib.contextmanager
    def background(self):
        """The cpu lock held shared on a descriptor of its own (a thread's background work):
        an exclusive test of another worker waits for it."""
        fd = os.open(self._cpu_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases its lock
