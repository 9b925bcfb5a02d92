"""The units of one drive, as the bus file gives them and both sides of the bus use them: the
host's drive protocols (:mod:`exo_rt.bus.config` reads them) and the emulated drive
(:mod:`exo_rt.sim.drive_emulator`) that answers in them. Here, below both, so that the bus
layer imports nothing from the simulation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DriveScale:
    """Units of one drive: encoder counts per motor turn, rated current (A) and torque (N·m)."""

    counts_per_rev: int = 65536
    rated_current: float = 3.29
    rated_torque: float = 0.133  # N·m at the motor (0x6076 = 133 mN·m)
    torque_constant: float = 0.0404
    peak_current: float = 15.0
