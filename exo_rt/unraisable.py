"""Exceptions numba's compiled code could not raise.

A kernel called through a C wrapper — the cycle's step through its address
(:data:`exo_rt.cycle.step.STEP_VALUE`), every control law and plant as a ``cfunc`` — has no
way to hand an exception to its caller: numba reports it to ``sys.unraisablehook`` and
returns, the rest of the kernel undone. :class:`Swallowed`, installed as that hook while such
code runs, keeps the first one and counts them, so that the caller can act on it: the run's
cycle goes SAFE (:mod:`exo_rt.runtime.cycle_io`), model-in-the-loop refuses its figures
(:mod:`exo_rt.sim.mil`). Anything else goes on to the hook installed before it.
"""

from __future__ import annotations

import sys


class Swallowed:
    """The exceptions numba reported instead of raising (the module's docstring): the first
    kept, all counted, while installed as ``sys.unraisablehook``; a context manager too."""

    def __init__(self) -> None:
        self.first: BaseException | None = None
        self.count = 0
        self._before = None

    def __call__(self, unraisable) -> None:
        where = unraisable.object
        if isinstance(where, str) and where.startswith("<numba."):
            if self.first is None:
                self.first = unraisable.exc_value
            self.count += 1
        elif self._before is not None:
            self._before(unraisable)

    def describe(self) -> str | None:
        """The first exception and how many there were (None: none)."""
        if self.first is None:
            return None
        return f"{self.first!r}, {self.count} time(s)"

    def install(self) -> None:
        if sys.unraisablehook is not self:
            self._before = sys.unraisablehook
            sys.unraisablehook = self

    def remove(self) -> None:
        if sys.unraisablehook is self:
            sys.unraisablehook = self._before

    def __enter__(self) -> Swallowed:
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
