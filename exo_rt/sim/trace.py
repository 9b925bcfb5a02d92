"""What the simulated leg did, period by period: the record that shows whether the layers
below the controller — the drives' own watchdogs, the board's relay — kept the wearer safe
when the controller could not (``exo-rt drives --trace FILE``).

The controller's own recording stops with the controller; this one is kept by the process
that stands in for the hardware, so it also covers what happens after the controller was
killed, stopped or cut off. One row per physics period, written into preallocated arrays
(the serving loop allocates nothing per period) and saved as ``.npz`` when the simulation
ends:

- ``t`` — s, ``time.monotonic()`` at the end of the period (CLOCK_MONOTONIC is one clock for
  every process of the machine, so a test can put its own events on the same axis);
- ``q`` — rad, the joint angles (columns in the robot's joint order, ``joints``);
- ``current`` — A, the current each motor actually carries (columns: ``drives``);
- ``power_stage`` — 1 while the drive's power stage is on (OPERATION ENABLED or a quick stop
  ramp), else 0;
- ``motor_power`` — 1 while the board's relay feeds the drives.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from exo_rt.sim.plants import ST_I, ST_ON, ST_Q


class PlantTrace:
    """Rows of the simulated leg's state, one per physics period, up to ``capacity``
    (the oldest are overwritten beyond it: the trace keeps the last ``capacity`` periods)."""

    def __init__(self, world, capacity: int = 600_000) -> None:
        self.world = world
        plant = world.plant
        self.joints = list(plant.robot.joint_names)
        self.drives = [f"{ch}:{d.node}" for ch, ep in world.endpoints.items()
                       for d, _t in ep.drives]
        self._transmissions = np.array([t for ep in world.endpoints.values()
                                        for _d, t in ep.drives], dtype=np.int64)
        self.capacity = capacity
        nj, nd = len(self.joints), len(self.drives)
        self.t = np.zeros(capacity)
        self.q = np.zeros((capacity, nj))
        self.current = np.zeros((capacity, nd))
        self.power_stage = np.zeros((capacity, nd), dtype=np.int8)
        self.motor_power = np.zeros(capacity, dtype=np.int8)
        self.n = 0

    def record(self, now: float) -> None:
        """One row: the state after the period that just ended at ``now`` (s, monotonic)."""
        world = self.world
        state = world.plant.state
        k = self.n % self.capacity
        self.t[k] = now
        self.q[k] = state[ST_Q, : self.q.shape[1]]
        for col in range(len(self._transmissions)):
            tr = self._transmissions[col]
            self.current[k, col] = state[ST_I, tr]
            self.power_stage[k, col] = state[ST_ON, tr] > 0.5
        self.motor_power[k] = world.motor_power
        self.n += 1

    def rows(self) -> dict[str, np.ndarray]:
        """The recorded rows in time order."""
        n = min(self.n, self.capacity)
        order = (np.arange(n) + (self.n - n)) % self.capacity
        return {"t": self.t[order], "q": self.q[order], "current": self.current[order],
                "power_stage": self.power_stage[order], "motor_power": self.motor_power[order]}

    def save(self, path: str | Path) -> None:
        np.savez(path, joints=np.array(self.joints), drives=np.array(self.drives),
                 **self.rows())


def load_trace(path: str | Path) -> dict[str, np.ndarray]:
    """A saved trace as a dict of arrays (``joints`` and ``drives`` as lists of names)."""
    with np.load(path) as z:
        out = {k: z[k] for k in z.files}
    out["joints"] = [str(x) for x in out["joints"]]
    out["drives"] = [str(x) for x in out["drives"]]
    return out
