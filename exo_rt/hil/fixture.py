"""Fixtures of the test rig: what clamps a joint's output (for the stiffness identification)
and measures its reaction torque.

- :class:`CanFixture` — the rig's fixture node on the CAN bus (:mod:`exo_rt.bus.fixture`);
  the simulated bus and ``exo-rt drives`` emulate it, so the same procedure runs in process,
  over SLCAN and on a rig that has one;
- :class:`OperatorFixture` — a person clamps the output and confirms; a torque sensor read some
  other way plugs in as ``torque_sensor(joint) -> N·m``.
"""

from __future__ import annotations

import abc

import can

from exo_rt.bus import fixture as fx


class BenchAbort(Exception):
    """A procedure stopped: the safety check's cause, or the operator's abort."""


class Fixture(abc.ABC):
    """Clamps and releases joint outputs, and reads a clamped output's reaction torque (N·m,
    positive where the motor pushes the joint's angle up) where the fixture measures it."""

    @abc.abstractmethod
    def lock(self, joint: str) -> None:
        """Clamp ``joint``'s output where it is."""

    @abc.abstractmethod
    def release(self, joint: str) -> None:
        """Let ``joint``'s output go."""

    def torque(self, joint: str) -> float | None:
        """The clamped output's reaction torque (N·m); None without a sensor or reading."""
        return None


class OperatorFixture(Fixture):
    """A person at the rig clamps the output and confirms (Enter), or aborts (a)."""

    def __init__(self, ask=input, torque_sensor=None) -> None:
        self.ask = ask
        self.torque_sensor = torque_sensor

    def lock(self, joint: str) -> None:
        answer = self.ask(f"Clamp the {joint} output in the fixture, then press Enter "
                          "(a to abort): ")
        if answer.strip().lower().startswith("a"):
            raise BenchAbort("operator abort (fixture)")

    def release(self, joint: str) -> None:
        self.ask(f"Release the {joint} output from the fixture, then press Enter: ")

    def torque(self, joint: str) -> float | None:
        return None if self.torque_sensor is None else float(self.torque_sensor(joint))


class CanFixture(Fixture):
    """The fixture node on the bus of each joint's drive: clamp commands out, reaction torques
    in (decoded by the drives' cycle through :attr:`exo_rt.bus.drives.Drives.listeners`)."""

    def __init__(self, drives, node: int = fx.FIXTURE_NODE) -> None:
        self.node = node
        self._where: dict[str, tuple] = {}  # joint → (drives, slot)
        self._mask: dict[int, int] = {}  # id(drives) → clamp mask
        self._torque: dict[str, float | None] = {}
        for d in drives:
            names = [d.config.drives[k].joint for k in range(d.n)]
            for k, joint in enumerate(names):
                self._where[joint] = (d, k)
                self._torque[joint] = None
            self._mask[id(d)] = 0
            d.listeners[fx.MEASUREMENT + node] = (
                lambda msg, names=names: self._measured(names, bytes(msg.data)))

    def _measured(self, names: list[str], data: bytes) -> None:
        values = fx.decode_measurement(data, len(names))
        if values is not None:
            for joint, value in zip(names, values, strict=True):
                self._torque[joint] = value

    def _send(self, joint: str, clamp: bool) -> None:
        d, k = self._where[joint]
        mask = self._mask[id(d)]
        mask = mask | (1 << k) if clamp else mask & ~(1 << k)
        self._mask[id(d)] = mask
        arb, data = fx.command(self.node, mask)
        d.bus.send(can.Message(arbitration_id=arb, data=data, is_extended_id=False))
        self._torque[joint] = None

    def lock(self, joint: str) -> None:
        self._send(joint, True)

    def release(self, joint: str) -> None:
        self._send(joint, False)

    def torque(self, joint: str) -> float | None:
        return self._torque[joint]
