"""Bus files (``configs/buses/*.yaml``): per bus its interface, channel and bit rate, its
drive protocol, its drives (joint, node id, scales), the controller's heartbeat and what the
drives do when it stops, and simulated faults (docs/config-buses.md, docs/bus.md).

The keys every bus has are declared here. A drive protocol adds its own keys
(``Protocol.bus_keys``, ``drive_keys``) and reads them itself (:mod:`exo_rt.bus.protocols`).
The built-in protocols' keys are declared here too, for the JSON Schema and the docs tables
(and the readers in :mod:`exo_rt.bus.config`): which family takes which key
(:data:`PROTOCOL_OWN_KEYS`, checked against the families by tests/test_layers.py) and their
types (:data:`PROTOCOL_KEYS`). The schema sits below the protocols and imports none of them;
a plug-in's keys are checked by the loader, which asks the registry.
"""

from __future__ import annotations

from exo_rt.schema.core import (
    REQUIRED,
    AnyOf,
    Choice,
    Flag,
    ListOf,
    MapOf,
    Name,
    Num,
    Plain,
    Sub,
    key,
    section,
)

# 6007h abort connection option code and 1029h/1 communication error behaviour (CiA 402-2,
# CiA 301): what the bus file's names mean. 6007h "no action" (0) is not offered: it leaves the
# last torque applied when the controller goes silent.
ABORT_CONNECTION = {"fault": 1, "disable_voltage": 2, "quick_stop": 3}
ERROR_BEHAVIOUR = {"pre_operational": 0, "no_change": 1, "stopped": 2}
FAULT_KINDS = ("drop", "corrupt", "duplicate", "delay", "encoder_glitch", "heartbeat_loss",
               "bus_off", "current_saturation", "overcurrent", "fault")
# another node on the bus acting as a master (the simulated bus sends its frames: every node,
# the controller included, sees them, and the drives obey them as real drives would)
FOREIGN_KINDS = ("foreign_sync", "foreign_nmt_stop", "foreign_nmt_reset", "foreign_sdo",
                 "foreign_heartbeat")
FAULT_KINDS += FOREIGN_KINDS
NODE_ID = Num(integer=True, ge=1, le=127)
MS16 = Num(integer=True, ge=0, le=65535)


@section("master")
class Master:
    """The controller on the bus: its node id and heartbeat."""

    node: int = key(NODE_ID, 127, what="master node id",
                    fix="the controller's own node id, 1…127 (127 is the usual master's)",
                    doc="the controller's node id: its heartbeat is 0x700 + this")
    heartbeat_ms: int = key(MS16, 10, unit="ms", what="master heartbeat_ms",
                            fix="the controller's heartbeat period in ms, e.g. 10 (0: none)",
                            doc="the controller's heartbeat period (0: none)")


@section("drive_watchdog")
class Watchdog:
    """What bring-up writes on each CiA 402 drive so that it stops by itself when the
    controller, its PC or the bus dies (docs/safety.md)."""

    heartbeat_periods: int = key(Num(integer=True, ge=0, le=100), 4,
                                 what="drive_watchdog heartbeat_periods",
                                 fix="3…5 missed heartbeats, e.g. 4 (0: the drives do not "
                                     "watch it)",
                                 doc="the controller's heartbeat is lost after this many "
                                     "periods (1016h; 0: not watched)")
    abort_connection: str = key(Choice(tuple(ABORT_CONNECTION), "abort_connection (6007h)"),
                                "disable_voltage", doc="what a drive does when it is lost "
                                                       "(6007h)")
    error_behaviour: str = key(Choice(tuple(ERROR_BEHAVIOUR), "error_behaviour (1029h)"),
                               "pre_operational", doc="the drive's NMT state after a "
                                                      "communication error (1029h/1)")
    sync_watchdog: bool = key(Flag(), False, what="sync_watchdog",
                              doc="the drive watches the SYNC (1006h = the control period)")
    required: bool = key(Flag(), False, what="required",
                         doc="an EDS without these objects is refused, not warned about")


@section("a fault")
class Fault:
    """A fault the simulated bus injects."""

    kind: str = key(Choice(FAULT_KINDS, "fault kind"), REQUIRED, doc="what goes wrong")
    node: int = key(Num(integer=True, ge=0, le=127), 0, doc="the drive (0: the bus, bus_off)")
    at: float = key(Num(ge=0), REQUIRED, unit="s", doc="from the run's start")
    duration: float = key(Num(ge=0), 0.0, unit="s", doc="how long it lasts")


@section("a drive")
class Drive:
    """One drive on the bus and the joint it moves."""

    joint: str = key(Name(), REQUIRED, doc="the joint (it needs a transmission)")
    node: int = key(NODE_ID, REQUIRED, what="node id",
                    fix="give each drive a unique id 1…127", doc="CAN node id")
    counts_per_rev: int = key(Num(integer=True, gt=0), 65536, doc="encoder counts per "
                                                                  "revolution (motor side)")
    rated_current: float = key(Num(gt=0), None, unit="A", shown="the motor's",
                               doc="the drive's rated current (6075h, held in mA)")
    rated_torque: float = key(Num(gt=0), None, unit="N·m", shown="k_M × rated current",
                              doc="the drive's rated torque (6076h, held in mN·m)")


@section("a bus")
class Bus:
    """One CAN bus, its drive protocol and its drives."""

    name: str = key(Name(), REQUIRED, doc="the bus's name")
    interface: str = key(Name(), "exo_sim", doc="python-can interface (socketcan, slcan, …)")
    channel: object = key(AnyOf((Name(), Num(integer=True, ge=0))), None,
                          shown="the bus's name", doc="python-can channel (e.g. can0)")
    bitrate: int = key(Num(integer=True, ge=10_000, le=8_000_000), 1_000_000, unit="bit/s",
                       what="bitrate", fix="the bus's bit rate in bit/s, e.g. 1000000",
                       doc="bit rate (the bus load is checked against it)")
    can_options: dict = key(MapOf(Plain(), "fd: false"), {}, what="can_options",
                            doc="further python-can keyword arguments")
    protocol: str = key(Name(), "cia402", doc="the drive protocol (its registry name)")
    drives: tuple = key(ListOf(Sub(Drive)), REQUIRED, doc="the drives")
    heartbeat_ms: int = key(MS16, 100, unit="ms", what="heartbeat_ms",
                            fix="the drives' heartbeat period in ms, e.g. 100",
                            doc="the drives' heartbeat period (1017h)")
    faults: tuple = key(ListOf(Sub(Fault)), (), doc="simulated bus only: faults to inject")
    master: Master = key(Sub(Master), Master(), doc="the controller's node")
    drive_watchdog: Watchdog = key(Sub(Watchdog), Watchdog(), doc="CiA 402 drives' own "
                                                                  "watchdog")


@section("the bus file")
class BusesFile:
    """The CAN buses of a robot and their drives."""

    buses: tuple = key(ListOf(Sub(Bus)), REQUIRED, doc="one entry per bus")


# ----------------------------------------------------------------------------- protocols' keys
@section("an object")
class Object:
    """A CANopen object (index, sub-index)."""

    index: int = key(Num(integer=True, gt=0, le=0xFFFF), REQUIRED, doc="e.g. 0x6075")
    sub: int = key(Num(integer=True, ge=0, le=0xFF), 0, doc="sub-index")


@section("an object")
class TorqueObject:
    """The rated-torque object and its unit."""

    index: int = key(Num(integer=True, gt=0, le=0xFFFF), REQUIRED, doc="e.g. 0x6076")
    sub: int = key(Num(integer=True, ge=0, le=0xFF), 0, doc="sub-index")
    unit: str = key(Choice(("mNm", "uNm"), "torque unit"), "mNm", doc="its unit")


@section("a PDO entry")
class Entry:
    """A PDO entry given by object and the quantity it carries."""

    index: int = key(Num(integer=True, gt=0, le=0xFFFF), REQUIRED, doc="object index")
    sub: int = key(Num(integer=True, ge=0, le=0xFF), 0, doc="sub-index")
    as_: str = key(Name(), REQUIRED, name="as", doc="the quantity (docs/bus.md)")


@section("mit_ranges")
class MitRanges:
    """The MIT-mode firmware's ranges (each > 0)."""

    p_max: float = key(Num(gt=0), 12.5, unit="rad", doc="position range ±p_max")
    v_max: float = key(Num(gt=0), 50.0, unit="rad/s", doc="velocity range")
    t_max: float = key(Num(gt=0), 18.0, unit="N·m", doc="torque range")
    kp_max: float = key(Num(gt=0), 500.0, unit="N·m/rad", doc="kp range")
    kd_max: float = key(Num(gt=0), 5.0, unit="N·m·s/rad", doc="kd range")


PDO = ListOf(AnyOf((Name(), Sub(Entry))))
# the built-in protocols' own keys (bus- and drive-level): their types
PROTOCOL_KEYS = {
    "eds": (Name(), "cia402: the drive's EDS/DCF file, relative to this file (default: the "
                    "built-in drive's)"),
    "vendor_id": (Num(integer=True, ge=0, le=0xFFFFFFFF), "cia402: expected 1018h/1"),
    "product_code": (Num(integer=True, ge=0, le=0xFFFFFFFF), "cia402: expected 1018h/2"),
    "rpdo": (PDO, "cia402: RPDO1 mapping (names or {index, sub, as})"),
    "tpdo": (PDO, "cia402: TPDO1 mapping (names or {index, sub, as})"),
    "transmission_type": (Num(integer=True, ge=1, le=240), "cia402: PDO transmission type "
                                                            "(1: every SYNC)"),
    "rated_current_object": (Sub(Object), "cia402: the rated-current object (6075h)"),
    "rated_torque_object": (Sub(TorqueObject), "cia402: the rated-torque object (6076h) and "
                                               "unit"),
    "mit_ranges": (Sub(MitRanges), "mit: the firmware's ranges"),
    "home": (Num(), "mit: the joint's angle at the motor's zero (rad)"),
}


# the built-in protocols' own keys, family → (bus-level keys, drive-level keys), each in the
# family's order (its Protocol.bus_keys, drive_keys): what the shipped JSON Schema and the docs
# list, without importing the families
_CIA402_KEYS = ("eds", "vendor_id", "product_code", "rpdo", "tpdo", "transmission_type",
                "rated_current_object", "rated_torque_object")
PROTOCOL_OWN_KEYS = {
    "cia402": (_CIA402_KEYS, _CIA402_KEYS),
    "mit": (("mit_ranges",), ("home",)),
    "rmdx": (("comm_timeout_ms", "status_poll"), ("joint_at_zero",)),
}


def protocol_keys(level: str) -> dict[str, tuple]:
    """The built-in protocols' own keys at ``level`` ('bus' or 'drive') → (type,
    description, protocols): what the shipped JSON Schema and docs list (a plug-in's keys
    are checked by the loader, which asks the registry)."""
    from exo_rt.schema.core import Raw

    out: dict[str, tuple] = {}
    for name, (bus_keys, drive_keys) in PROTOCOL_OWN_KEYS.items():
        for k in bus_keys if level == "bus" else drive_keys:
            t, doc = (PROTOCOL_KEYS.get(k)
                      or (Raw(words="see docs/bus.md"), f"{name}: its own key (docs/bus.md)"))
            prev = out.get(k)
            out[k] = (t, doc, (prev[2] if prev else ()) + (name,))
    return out


Bus.extra_keys = staticmethod(lambda: protocol_keys("bus"))
Drive.extra_keys = staticmethod(lambda: protocol_keys("drive"))
SCHEMA = BusesFile
