"""Drive protocols as plug-ins: one registry from a bus file's ``protocol:`` name to its family.

A family (:class:`Protocol`) says, for its name:

- ``host``: the host-side class of one bus of its drives (``"module:Class"``, imported when a
  bus is opened). Its interface is :class:`exo_rt.bus.protocols.base.HostDrives`: ``configure``,
  ``enable``, ``disable``, ``fault_reset``, ``request_disable``, ``send_rpdos`` (the cycle's
  commands), ``send_sync``, ``collect`` (feedback into the preallocated ``position``,
  ``current`` and ``flags`` arrays), ``cycle``/``paced_cycle``;
- ``emulator``: its emulated drive for the simulated bus (``"module:Class"``), built by
  ``emulator_class().from_config(drive, bus, period)`` (:mod:`exo_rt.sim.simbus`);
- its bus-file keys (``bus_keys``, ``drive_keys``) and how they are read (``parse_options``,
  ``parse_drive``, ``check``): :mod:`exo_rt.bus.config` asks the family, and keeps nothing of
  it;
- ``cycle_frames(bus)``: the payload sizes (bytes) of one control cycle's frames on the bus,
  the frame budget of the bus-load check.

The built-in families are listed in :data:`BUILTIN`; a third-party one registers under the
entry-point group ``exo_rt.protocols`` (its name → a :class:`Protocol` subclass or instance),
as python-can's interfaces do under ``can.interface``::

    [project.entry-points."exo_rt.protocols"]
    odrive = "my_package.odrive:ODriveProtocol"
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from exo_rt.errors import ConfigError, Where

GROUP = "exo_rt.protocols"
DEFAULT = "cia402"

# name → "module:attribute" of the family's Protocol (imported on first use)
BUILTIN = {
    "cia402": "exo_rt.bus.protocols.cia402:CiA402",
    "mit": "exo_rt.bus.protocols.mit:Mit",
    "rmdx": "exo_rt.bus.protocols.rmdx:RmdX",
}


def load_attr(ref: str):
    """``"package.module:Attribute"`` → the attribute (imported now)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


class Protocol:
    """One drive-protocol family. Subclass it, set the class attributes, override what the
    family needs; every method has a default that a family without such keys can keep."""

    name = ""
    host = ""  # "module:Class" of the host side (a HostDrives)
    emulator = ""  # "module:Class" of the emulated drive (simulated bus)
    bus_keys: dict[str, bool] = {}  # extra bus-level keys (name → required)
    drive_keys: dict[str, bool] = {}  # extra per-drive keys
    has_sync = True  # the host sends a SYNC (0x080) each cycle (counted in the budget)
    drive_timeout = ""  # one line: the drive-side communication timeout (docs/safety.md)

    def host_class(self):
        return load_attr(self.host)

    def emulator_class(self):
        return load_attr(self.emulator)

    def parse_options(self, bus: dict, item) -> object:
        """The bus's own options from its bus-file keys (``bus``: key → yamlio Node)."""
        return None

    def parse_drive(self, bus: dict, drive: dict, node: int) -> tuple[object, object, object]:
        """One drive's (EDS objects, CiA 402 profile, options) from its and its bus's keys."""
        return None, None, None

    def check(self, config, bus: dict, item) -> None:
        """Checks over the whole bus once it is read (ConfigError with file:line)."""

    def cycle_frames(self, config) -> list[int]:
        """Payload sizes (bytes) of the frames one control cycle puts on the bus."""
        return [0] * self.has_sync + [8, 8] * len(config.drives)

    def log_decoder(self, config, mech):
        """A reader of this family's frames in a bare CAN log (replay), or None: an object
        with ``frame(arb, data, cmd, meas, on)`` that writes, per joint index, the commanded
        current (A), the measured joint angle (rad) and whether the power stage is on."""
        return None


_registry: dict[str, Protocol] | None = None


def registry() -> dict[str, Protocol]:
    """Every registered family by name: the built-ins, then the ``exo_rt.protocols`` entry
    points (which may not replace a built-in)."""
    global _registry
    if _registry is None:
        found: dict[str, object] = dict(BUILTIN)
        for ep in entry_points(group=GROUP):
            if ep.name not in found:
                found[ep.name] = ep
        _registry = {name: _Lazy(name, ref) for name, ref in found.items()}
    return _registry


def names() -> tuple[str, ...]:
    return tuple(registry())


def register(protocol: Protocol) -> None:
    """Register a family at run time (tests; a plug-in normally uses the entry point)."""
    registry()[protocol.name] = _Lazy(protocol.name, protocol)


def unregister(name: str) -> None:
    registry().pop(name, None)


def get(name: str) -> Protocol:
    """The family registered as ``name``; a ConfigError names the registered ones."""
    try:
        return registry()[name].get()
    except KeyError:
        raise ConfigError(f"no drive protocol '{name}' is registered", Where("protocol"),
                          f"use one of {', '.join(names())} (docs/bus.md), or install the "
                          f"package that registers it under '{GROUP}'") from None


class _Lazy:
    """A registry entry: imported on first use, so that reading a bus file imports only the
    families it names."""

    def __init__(self, name: str, ref) -> None:
        self.name, self.ref, self.obj = name, ref, None

    def get(self) -> Protocol:
        if self.obj is None:
            ref = self.ref
            obj = load_attr(ref) if isinstance(ref, str) else (
                ref if isinstance(ref, Protocol) else ref.load() if hasattr(ref, "load") else ref)
            if isinstance(obj, type):
                obj = obj()
            if not isinstance(obj, Protocol):
                raise ConfigError(f"the drive protocol '{self.name}' ({ref}) is not an "
                                  "exo_rt.bus.protocols.Protocol", Where(GROUP),
                                  "fix or uninstall the package that registers it")
            if not obj.name:
                obj.name = self.name
            self.obj = obj
        return self.obj
