"""MIT-mode actuators (mini-cheetah firmware, CubeMars/T-motor AK in MIT mode) as a
registered drive protocol: bus key ``mit_ranges`` (the firmware's ranges)."""

from __future__ import annotations

from exo_rt.bus.protocols import Protocol


class Mit(Protocol):
    name = "mit"
    host = "exo_rt.bus.drives:MitDrives"
    emulator = "exo_rt.sim.drive_emulator:EmulatedMitMotor"
    bus_keys = {"mit_ranges": False}
    drive_timeout = "none in the protocol (docs/safety.md)"

    def parse_options(self, bus, item):
        from exo_rt.bus.config import mit_ranges

        return mit_ranges(bus)

    def cycle_frames(self, config) -> list[int]:
        """The lockstep SYNC, then per motor an 8-byte command and its 8-byte reply."""
        return [0] + [8, 8] * len(config.drives)
