"""What SAFE does to the wearer, in the world: once a run on the lockstep simulated bus has
ended SAFE, the world runs on by itself up to ``AFTER_SAFE_S`` s after the fault's onset —
the drives as SAFE left them (disabled: their power stages off, each joint held by what its
robot file declares: a brake, the gear's friction, shorted phases), the embedded board's
relay as it is (an E-stop keeps it open; its watchdog, no longer fed, opens it), the wearer
on the floor — and the pelvis's drop and each joint's motion over that time are the run's
``after_safe`` figures (docs/world.md, "SAFE under load").

The controller's loop ends a few cycles after SAFE (its reaction done, the drives disabled);
the exoskeleton and its wearer go on, and a person standing in it goes where the floor, the
brakes and the gears let them. On the test stand (no floor, no wearer to drop) and in real
time (the simulation is another process, which lingers by itself) there is nothing to run on.

:class:`Trail` keeps the pelvis's height and the joints' angles of the last ``TRAIL`` physics
periods (the fault's onset is some cycles before the loop ends); :func:`run_on` advances the
world and measures from the trail.
"""

from __future__ import annotations

import numpy as np

AFTER_SAFE_S = 2.0  # s after the fault's onset: the window issue 44's "SAFE under load" asks
TRAIL = 4096  # periods kept: the loop's last cycles after a fault and the whole run-on


class Trail:
    """The last ``TRAIL`` periods of a floor world: (simulated time s, pelvis height m, each
    joint's angle rad), one row a period, in a ring (allocated once)."""

    def __init__(self, plant) -> None:
        self.plant = plant
        self.rows = np.full((TRAIL, 2 + plant.n_joints), np.nan)
        self.n = 0

    def put(self, t: float, cycle: int) -> None:
        """The period that ended at ``t`` (s; its ``cycle``)."""
        row = self.rows[cycle % TRAIL]
        row[0] = t
        row[1] = self.plant.base[1]
        row[2:] = self.plant.joint_positions
        self.n += 1

    def figures(self, t0: float, t1: float, names) -> dict:
        """From the last row at or before ``t0`` (s) to ``t1``: the pelvis's drop (m, > 0
        down) and each joint's largest motion each way (rad: flexion the angle's increase).
        {} where the trail no longer holds ``t0``."""
        rows = self.rows[np.isfinite(self.rows[:, 0])]
        rows = rows[np.argsort(rows[:, 0])]
        eps = 1e-9
        before = np.flatnonzero(rows[:, 0] <= t0 + eps)
        if not len(before) or (self.n > TRAIL and before[-1] == 0):
            return {}
        ref = rows[before[-1]]
        win = rows[(rows[:, 0] >= ref[0] - eps) & (rows[:, 0] <= t1 + eps)]
        change = win[:, 2:] - ref[2:]
        return {"window_s": float(win[-1, 0] - ref[0]),
                "pelvis_drop_m": float(ref[1] - win[:, 1].min()),
                "joints": {name: {"flexion_rad": float(change[:, j].max()),
                                  "extension_rad": float(-change[:, j].min())}
                           for j, name in enumerate(names)}}


def run_on(world, board, since: float, seconds: float = AFTER_SAFE_S) -> dict:
    """The lockstep ``world`` (a :class:`~exo_rt.sim.simbus.SimWorld`) run on by itself up
    to ``seconds`` after the fault whose onset was ``since`` s before its clock, the emulated
    ``board`` (or None) ticked beside it; the figures of :meth:`Trail.figures` and the time
    run on. {} without a trail (no floor)."""
    trail = world.trail
    if trail is None:
        return {}
    if world.truth is not None:  # (the run's recording has its last rows: none after them)
        world.truth.ring = None
    t0 = world.t - since
    end = t0 + seconds
    n = max(0, int(round((end - world.t) / world.dt)))
    for _ in range(n):
        if board is not None:
            board.tick(world.t)
            world.motor_power = board.motor_power
        world.advance()
    out = trail.figures(t0, end, world.plant.robot.joint_names)
    if out:
        out["seconds"] = seconds
        out["run_on_s"] = n * world.dt
    return out
