"""The host side of one bus of drives, as the controller sees it: the interface every drive
protocol's host class implements (CiA 402's :class:`exo_rt.bus.drives.Drives`, the reply
protocols' :class:`exo_rt.bus.protocols.base.ReplyDrives`, replay's recorded drives).

Structural (a :class:`typing.Protocol`, as python-can's ``BusABC`` is to its interfaces): a
class need not inherit it, and ``isinstance(obj, HostDrives)`` checks the methods are there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from exo_rt.bus.drives import ENABLE_CYCLES

if TYPE_CHECKING:
    from exo_rt.bus.pdo_cycle import CycleBus


@runtime_checkable
class HostDrives(Protocol):
    """One bus of drives. Arrays are preallocated and filled in place (the controller may
    hand its own views of the cycle's joint vectors as ``position``/``current``/``flags``):

    - ``n`` drives on joints ``joint_index``; ``position`` (rad), ``current`` (A) and
      ``flags`` (:mod:`exo_rt.bus.flags`) per drive, the cycle's feedback;
    - ``foreign`` [own node, frames seen, first COB-ID] of another master on the bus;
    - ``temperature`` (°C) per drive, as its replies give it (NaN where its protocol carries
      none): a floor for the winding model's housing (:mod:`exo_rt.actuators.thermal`);
    - ``config`` the bus's :class:`~exo_rt.bus.config.BusConfig`; ``bus`` its python-can bus
      and ``port`` its frame port (the recording taps both);
    - ``bringup_warnings``: one line each, what bring-up could not set.
    """

    n: int
    joint_index: np.ndarray
    position: np.ndarray
    current: np.ndarray
    flags: np.ndarray
    foreign: np.ndarray
    temperature: np.ndarray
    bringup_warnings: list[str]

    def configure(self) -> None:
        """Bring-up: identify and configure every drive (before any is enabled)."""

    def warm_up(self) -> None:
        """Compile (or load) the compiled code of its cycle, on no frames."""

    def enable(self, max_cycles: int = ENABLE_CYCLES, reset_faults: bool = False) -> int:
        """Every drive to its operating state; the cycles it took."""

    def found_stopped(self) -> str | None:
        """One line if a drive was found stopped by its own watchdog, else None."""

    def collect(self, deadline: float | None = None) -> None:
        """This cycle's feedback into ``position``, ``current``, ``flags`` (waiting for the
        answers until ``deadline``, monotonic s; None: lockstep)."""

    def send_rpdos(self, current_A: np.ndarray) -> None:
        """The cycle's current commands (A; clamped again in the frame encoder)."""

    def send_sync(self) -> None:
        """The cycle's SYNC (where the protocol has one): the drives sample at it."""

    def send_commands(self, current_A: np.ndarray) -> None:
        """The commands and the SYNC together (one system call where the port allows)."""

    def request_disable(self) -> None:
        """The next commands disable the power stages instead."""

    def disable(self) -> None:
        """Disable every drive now (bring-down)."""

    def fault_reset(self) -> None:
        """The operator's explicit fault reset."""

    def compiled_cycle(self, current_A: np.ndarray) -> CycleBus | None:
        """The bus's part of the compiled cycle (:mod:`exo_rt.cycle.cycle_call`): its
        record, or None where its frames are read and written in Python."""

    def handed_back(self, pending: int) -> None:
        """The compiled cycle's frames for Python (EMCY, errors, other devices): take them."""

    def count_send_errors(self) -> None:
        """Sends the OS refused in the compiled cycle, counted into the bus's errors."""
