"""The test-bench fixture in simulation: a joint's output held by the plant's lock
(:meth:`exo_rt.sim.plant.Plant.lock`) — what the operator's clamp does on a real rig — with
a reaction-torque sensor: the flexspline's transmitted torque, quantised like a 16-bit load
cell over ±200 N·m (6 mN·m)."""

from __future__ import annotations

from exo_rt.hil.bench import Fixture

SENSOR_QUANTUM = 400.0 / 65536  # N·m


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

    def torque(self, joint: str) -> float:
        """The reaction torque on the locked output (N·m): −T of the joint's flexspline."""
        plant = self.world.plant
        with self.world._lock:
            t = [tr.joint for tr in plant.robot.transmissions].index(joint)
            value = -float(plant.flexspline_torques[t])
        return round(value / SENSOR_QUANTUM) * SENSOR_QUANTUM
