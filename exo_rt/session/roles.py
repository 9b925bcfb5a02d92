"""The roles an object plays in a session (:class:`exo_rt.session.session.Session`), as
typed protocols: a :class:`Source` asks the activity machine, a :class:`Listener` follows
what was answered and the strides walked, a :class:`Sink` shows the machine to someone.

A class that takes a role subclasses its protocol and so inherits a no-op for every method it
does not need (:pep:`544`'s explicit subclassing); the session calls every method of every
role it was given, and never asks an object what it has.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from firmware_bridge.requests import Answer, Request


class Source(Protocol):
    """Asks: the requests of cycle ``k`` (an empty iterable when nothing was asked)."""

    def poll(self, k: int) -> Iterable[Request]: ...


class Listener(Protocol):
    """Follows the session: every answer (its own requests' and others'), every stride."""

    def notify(self, answer: Answer, k: int) -> None:
        """Told every answer, in the cycle it was given."""

    def on_stride(self, steps: int, k: int) -> None:
        """Told the strides walked so far, in the cycle a stride ended."""


class Sink(Protocol):
    """Shows the session: every answer, the machine whenever a display would change, and the
    end of the run."""

    def answer(self, ans: Answer, k: int) -> None:
        """Told every answer, in the cycle it was given."""

    def show(self, machine, k: int) -> None:
        """Told the machine (:class:`~exo_rt.session.machine.ActivityMachine`) after a change."""

    def close(self) -> None:
        """The run is over: let go of what it holds (a terminal, a process)."""

