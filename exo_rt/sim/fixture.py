"""The test-bench fixture in simulation: a joint's output held by the plant's lock
(:meth:`exo_rt.sim.plant.Plant.lock`) — what the operator's clamp does on a real rig."""

from __future__ import annotations

from exo_rt.hil.bench import Fixture


class SimFixture(Fixture):
    """Locks and releases joint outputs of a :class:`~exo_rt.sim.simbus.SimWorld`'s plant."""

    def __init__(self, world) -> None:
        self.world = world

    def lock(self, joint: str) -> None:
        with self.world._lock:
            self.world.plant.lock(joint, True)

    def release(self, joint: str) -> None:
        with self.world._lock:
            self.world.plant.lock(joint, False)
