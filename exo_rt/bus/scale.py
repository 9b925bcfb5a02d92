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


def held(si: float, unit: float) -> float:
    """What a drive's object of ``unit`` (SI per count: mN·m is 1e-3) holds of the value
    ``si``: the integer it stores, round(si / unit), times its unit — the rated current and
    torque a drive scales its per mille by."""
    return int(round(si / unit)) * unit


def permille_current(permille, rated_torque: float, torque_constant: float):
    """The current (A) a drive commands for a torque target of ``permille`` ‰ of its rated
    torque (N·m, as it holds it: :func:`held`) — the emulated drives' arithmetic, which a
    plant replay repeats bit for bit (numpy arrays too)."""
    return permille / 1000.0 * rated_torque / torque_constant

