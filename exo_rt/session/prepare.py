"""Work a request needs that is too long for one control cycle, made beside it.

A walking-parameter request (speed, step length, the crutch's MODE) at a pace the session has
not walked yet needs that pace's gait rows (the flat-foot fit: ≈ 30 ms), its floor steps
(≈ 0.1 s) and the check of the blend into it (8–11 ms): many 1 ms periods. Made inside the
cycle, a real-time run stalls and its drives' heartbeat watchdogs fault them.

:class:`Preparer` holds that work. In real time (``threaded``) one worker thread makes it: the
request's handler gets :data:`WAIT` and the session asks it again once the work is made (the
cycle in between runs as before; the answer, and what it changes, comes in the cycle it is
asked again in). Without a wall-clock deadline — lockstep, where simulated time stands still
while a cycle computes, and replay — the work is made in the cycle, so a lockstep run is the
same run every time, and replay, which asks each recorded request in the cycle it was
answered in, answers it there bit for bit as the real-time run did.

The worker is started with the session, before the loop takes its real-time priority and CPU,
so it runs at the process's ordinary priority on the other CPUs; it waits on a queue (no CPU)
when there is nothing to make, and the loop's 100 µs GIL switch interval bounds how long it
holds the interpreter from the cycle.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable

WAIT = object()  # a handler's "not yet": the work its answer needs is being made


class Preparer:
    """Work made once per key: in the calling cycle, or (``threaded``) by one worker thread.

    :meth:`get` returns the work's result (raising what it raised), or :data:`WAIT` while the
    worker makes it. ``finished`` counts the works the worker has ended (the session asks a
    waiting request again only when it moved)."""

    def __init__(self, threaded: bool = False) -> None:
        self.threaded = threaded
        self.finished = 0
        self._done: dict[Hashable, tuple[bool, object]] = {}  # key → (raised, result)
        self._asked: set[Hashable] = set()
        self._queue: queue.SimpleQueue | None = None
        if threaded:
            self._queue = queue.SimpleQueue()
            threading.Thread(target=self._serve, name="exo-rt prepare", daemon=True).start()

    def get(self, key: Hashable, work: Callable[[], object]):
        """``work()``'s result for ``key`` (made once per key), or :data:`WAIT`."""
        found = self._done.get(key)
        if found is None:
            if self._queue is not None:
                if key not in self._asked:
                    self._asked.add(key)
                    self._queue.put((key, work))
                return WAIT
            found = _made(work)
            self._done[key] = found
        raised, result = found
        if raised:
            raise result  # type: ignore[misc]
        return result

    def close(self) -> None:
        """The worker told to end (after what it is making)."""
        if self._queue is not None:
            self._queue.put(None)
            self._queue = None

    def _serve(self) -> None:
        q = self._queue
        while True:
            item = q.get()
            if item is None:
                return
            key, work = item
            self._done[key] = _made(work)
            self.finished += 1


def _made(work: Callable[[], object]) -> tuple[bool, object]:
    """(False, result) or (True, the exception raised): an error is the request's answer
    (or the session's fault), never the worker's end."""
    try:
        return False, work()
    except Exception as e:  # noqa: BLE001 (handed to the cycle that asks for it)
        return True, e
