"""Drive protocols as plug-ins: one registry from a bus file's ``protocol:`` name to its family.

A family (:class:`Protocol`) says, for its name:

- ``host``: the host-side class of one bus of its drives (``"module:Class"``, imported when a
  bus is opened). Its interface is :class:`exo_rt.bus.protocols.base.HostDrives`: ``configure``,
  ``enable``, ``disable``, ``fault_reset``, ``request_disable``, ``send_rpdos`` (the cycle's
  commands), ``send_sync``, ``collect`` (feedback into the preallocated ``position``,
  ``current`` and ``flags`` arrays), ``cycle``/``paced_cycle``;
- ``emulator``: its emulated drive for the simulated bus (``"module:Class"``), built by
  ``emulator_class().from_config(drive, bus, period)`` (:mod:`exo_rt.sim.simbus`); empty for
  a family whose emulated drive the simulation registers itself
  (:data:`exo_rt.sim.simbus.EMULATORS`: CiA 402's);
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

from exo_rt import plugins
from exo_rt.errors import ConfigError, Where
from exo_rt.plugins import load_attr

GROUP = "exo_rt.protocols"
DEFAULT = "cia402"

# name → "module:attribute" of the family's Protocol (imported on first use)
BUILTIN = {
    "cia402": "exo_rt.bus.protocols.cia402:CiA402",
    "mit": "exo_rt.bus.protocols.mit:Mit",
    "rmdx": "exo_rt.bus.protocols.rmdx:RmdX",
}


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


def _family(name: str, obj: object) -> Protocol:
    """The family a reference names (a :class:`Protocol` subclass or instance), checked."""
    if isinstance(obj, type):
        obj = obj()
    if not isinstance(obj, Protocol):
        raise ConfigError(f"the drive protocol '{name}' ({obj!r}) is not an "
                          "exo_rt.bus.protocols.Protocol", Where(GROUP),
                          "fix or uninstall the package that registers it")
    if not obj.name:
        obj.name = name
    return obj


# every family by name: the built-ins, then the entry points (which may not replace one),
# each imported on first use, so that reading a bus file imports only the families it names
_REGISTRY: plugins.Registry[Protocol] = plugins.Registry(
    GROUP, "drive protocol", BUILTIN, make=_family, docs="docs/bus.md")


def names() -> tuple[str, ...]:
    return _REGISTRY.names()


def register(protocol: Protocol) -> None:
    """Register a family at run time (tests; a plug-in normally uses the entry point)."""
    _REGISTRY.add(protocol.name, _family(protocol.name, protocol))


def unregister(name: str) -> None:
    _REGISTRY.unregister(name)


def get(name: str) -> Protocol:
    """The family registered as ``name``; a ConfigError names the registered ones."""
    try:
        return _REGISTRY.get(name)
    except plugins.NotRegistered as err:
        raise ConfigError(err.what, Where("protocol"), err.fix) from None
