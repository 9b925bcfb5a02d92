"""Bus configuration (``configs/buses/*.yaml``): interfaces, bit rates, node ids, scales, and
the per-cycle bus load: a configuration over 80 % is refused.

What is the drive protocol's own is read by the protocol (:mod:`exo_rt.bus.protocols`): the
``protocol:`` name is checked against the registry, the family adds its bus and drive keys
(``bus_keys``, ``drive_keys``), reads them (``parse_options`` → ``BusConfig.options``,
``parse_drive`` → ``DriveConfig.eds``/``profile``/``options``), checks the whole bus
(``check``) and gives the frame budget of the bus-load check (``cycle_frames``). This module
keeps the keys every bus has; they are declared (types, units, ranges, defaults) in
:mod:`exo_rt.schema.buses`, and read here through that schema."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exo_rt.bus import pdo
from exo_rt.bus import protocols as registry
from exo_rt.bus.eds import DEFAULT_EDS, check_required, load_od, read_eds, variable
from exo_rt.bus.mit import MitRanges
from exo_rt.bus.scale import DriveScale
from exo_rt.errors import ConfigError, Where
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import did_you_mean
from exo_rt.schema import buses as schema
from exo_rt.schema import core
from exo_rt.schema.buses import ABORT_CONNECTION, ERROR_BEHAVIOUR, FAULT_KINDS  # noqa: F401
from exo_rt.yamlio import Node, choice, number, read_yaml, sequence

MAX_LOAD = 0.8
RPDO_BYTES, TPDO_BYTES, SYNC_BYTES = 4, 8, 0


@dataclass(frozen=True)
class DriveConfig:
    joint: str
    node: int
    scale: DriveScale
    eds: dict | None = None  # (index, sub) → exo_rt.bus.eds.Entry, from the drive's EDS
    profile: pdo.DriveProfile | None = None  # what bring-up writes (mapping, identity, units)
    options: object = None  # the protocol's own per-drive options (its parse_drive)


_WATCHDOG = schema.Watchdog()  # the bus file's defaults
EDS_NAME = schema.PROTOCOL_KEYS["eds"][0]  # a file name
WATCHDOG_OBJECTS = {(0x1016, 1): "consumer heartbeat time", (0x1029, 1): "error behaviour",
                    (0x6007, 0): "abort connection option code",
                    (0x1006, 0): "communication cycle period"}


@dataclass(frozen=True)
class DriveWatchdog:
    """What bring-up writes on each CiA 402 drive so that it stops by itself when the
    controller, its PC or the bus dies (docs/safety.md): 1016h/1 = the controller's node id
    << 16 | ``heartbeat_periods`` × its heartbeat period (ms; 0: consumer off), 1029h/1,
    6007h, and 1006h = the control period (µs) where ``sync_watchdog`` (else 0)."""

    # the controller's heartbeat is lost after this many periods
    heartbeat_periods: int = _WATCHDOG.heartbeat_periods
    abort_connection: int = ABORT_CONNECTION[_WATCHDOG.abort_connection]  # 6007h
    error_behaviour: int = ERROR_BEHAVIOUR[_WATCHDOG.error_behaviour]  # 1029h/1
    sync_watchdog: bool = _WATCHDOG.sync_watchdog  # 1006h: the drive watches the SYNC
    required: bool = _WATCHDOG.required  # an EDS without these objects is refused


@dataclass(frozen=True)
class BusConfig:
    name: str
    interface: str
    channel: str
    bitrate: int
    protocol: str
    drives: tuple[DriveConfig, ...]
    heartbeat_ms: int
    faults: tuple[tuple[str, int, float, float], ...] = ()  # simulated bus: (kind, node, at s, s)
    options: object = None  # the protocol's own bus options (its parse_options)
    master_node: int = 127  # the controller's node id: its heartbeat is 0x700 + this
    master_heartbeat_ms: int = 10  # the controller's heartbeat period (0: none)
    watchdog: DriveWatchdog = DriveWatchdog()  # written on each CiA 402 drive at bring-up
    can_options: tuple[tuple[str, object], ...] = ()  # further python-can keyword arguments
    interface_given: bool = False  # the bus file names the interface (else the default)

    @property
    def mit_ranges(self) -> MitRanges | None:
        """protocol: mit — the motors' ranges (the protocol's options)."""
        return self.options if isinstance(self.options, MitRanges) else None

    @property
    def spec(self) -> str:
        """What the bus opens from its file: ``INTERFACE:CHANNEL@BITRATE``."""
        return f"{self.interface}:{self.channel}@{self.bitrate}"

    @property
    def consumer_ms(self) -> int:
        """The drives' consumer heartbeat time for the controller (1016h, ms; 0: off)."""
        return self.master_heartbeat_ms * self.watchdog.heartbeat_periods

    def load(self, rate_hz: float) -> float:
        """Fraction of the bit rate one control cycle's frames take (worst-case stuffing)."""
        frames = registry.get(self.protocol).cycle_frames(self)
        return sum(frame_bits(n) for n in frames) * rate_hz / self.bitrate


def frame_bits(n_bytes: int) -> int:
    """Bits of a classic CAN data frame with an 11-bit id: 47 + 8n, plus the worst-case stuff
    bits over the 34 + 8n stuffed bits (one per four after the first)."""
    return 47 + 8 * n_bytes + (34 + 8 * n_bytes - 1) // 4


TORQUE_UNITS = {"mNm": 1e-3, "uNm": 1e-6}


def _object(node: Node, cls) -> dict:
    m = core.mapping(cls, node, what=node.key or "an object")
    index = int(number(m["index"]))
    sub = int(number(m["sub"])) if "sub" in m else 0
    if not (0 < index <= 0xFFFF and 0 <= sub <= 0xFF):
        raise ConfigError(f"object {index:#x}/{sub} is out of 1…FFFFh / 0…255", node.where(),
                          "write the index like 0x3001 and the sub-index like 1")
    return {"index": index, "sub": sub, **{k: v for k, v in m.items() if k not in ("index", "sub")}}


def _entries(node: Node | None, defaults: tuple[str, ...], kinds: tuple[str, ...], od,
             eds_path: str, what: str) -> tuple[pdo.MapEntry, ...]:
    """A PDO's mapping from the bus file (names or {index, sub, as}), typed by the EDS."""
    items = sequence(node, what) if node is not None else []
    specs = []
    for item in items:
        if isinstance(item.value, str):
            name = choice(item, [k for k in kinds if k in pdo.STANDARD], f"{what} entry")
            specs.append((*pdo.STANDARD[name], name, item))
        else:
            o = _object(item, schema.Entry)
            specs.append((o["index"], o["sub"], choice(o["as"], kinds, "quantity"), item))
    if node is None:
        specs = [(*pdo.STANDARD[k], k, None) for k in defaults]
    out = []
    where = (node or Node(None, eds_path, 0, what)).where()
    for index, sub, kind, item in specs:
        at = item.where() if item is not None else where
        var = variable(od, index, sub)
        if var is None:
            raise ConfigError(f"the drive's EDS has no {index:04X}h/{sub} for the {what} "
                              f"entry {kind} ({eds_path})", at,
                              "map another object (docs/bus.md) or give the drive's own EDS")
        from canopen.objectdictionary.datatypes import SIGNED_TYPES

        bits = len(var)
        signed = var.data_type in SIGNED_TYPES
        if pdo.struct_code(bits, signed) is None or var.data_type in (0x1, 0x8, 0x11):
            raise ConfigError(f"{index:04X}h/{sub} ({var.name}) is not an integer a PDO can "
                              f"carry (data type {var.data_type:#x})", at,
                              "map an 8-, 16- or 32-bit integer object")
        if not var.pdo_mappable:
            raise ConfigError(f"the drive's EDS does not allow mapping {index:04X}h/{sub} "
                              f"({var.name}) into a PDO (PDOMapping=0)", at,
                              "map another object (docs/bus.md)")
        if what == "rpdo" and not var.writable or what == "tpdo" and not var.readable:
            raise ConfigError(f"{index:04X}h/{sub} ({var.name}) is '{var.access_type}' in the "
                              f"drive's EDS: it cannot go into the {what.upper()}", at,
                              "map another object (docs/bus.md)")
        out.append(pdo.MapEntry(index, sub, bits, signed, kind))
    got = [e.kind for e in out]
    need = (pdo.RPDO_KINDS if what == "rpdo" else (pdo.STATUSWORD, pdo.POSITION))
    currents = [k for k in got if k in pdo.CURRENT_KINDS]
    if (any(got.count(k) != 1 for k in need) or len(set(got)) != len(got)
            or what == "tpdo" and len(currents) != 1):
        extra = " and one of current_actual, current_actual_mA, torque_actual" * (what == "tpdo")
        raise ConfigError(f"the {what} mapping {', '.join(got)} does not carry "
                          f"{', '.join(need)}{extra}, each once", where,
                          f"the default is {', '.join(defaults)} (docs/bus.md)")
    if sum(e.bits for e in out) > pdo.MAX_BITS:
        raise ConfigError(f"the {what} mapping takes {sum(e.bits for e in out) // 8} bytes; a "
                          "CAN frame carries 8", where, "map fewer or smaller objects")
    return tuple(out)


def _profile(bus: dict[str, Node], drive: dict[str, Node], node: int) -> pdo.DriveProfile:
    """What bring-up writes on one drive: the per-drive keys, else the bus's, else defaults."""

    def pick(key: str) -> Node | None:
        return drive.get(key) or bus.get(key)

    eds_node = pick("eds")
    eds_path = (str(Path(eds_node.file).parent / EDS_NAME.read(eds_node, "eds", ""))
                if eds_node else str(DEFAULT_EDS))
    objects = read_eds(eds_path)
    od = load_od(eds_path, node)
    rpdo = _entries(pick("rpdo"), pdo.DEFAULT_RPDO, pdo.RPDO_KINDS, od, eds_path, "rpdo")
    tpdo = _entries(pick("tpdo"), pdo.DEFAULT_TPDO, pdo.TPDO_KINDS, od, eds_path, "tpdo")
    ident = {}
    for key in ("vendor_id", "product_code"):
        n = pick(key)
        if n is not None:
            value = number(n)
            if not (0 <= value <= 0xFFFFFFFF and value == int(value)):
                raise ConfigError(f"{key} {n.value!r} is not a 32-bit number", n.where(),
                                  "write it as in the drive's EDS, e.g. 0x000000FB")
            ident[key] = int(value)
    tt = pick("transmission_type")
    trans = int(number(tt)) if tt is not None else 1
    if tt is not None and not 1 <= trans <= 240:
        raise ConfigError(f"transmission type {tt.value!r} is not synchronous (1…240)",
                          tt.where(), "1: the drive answers every SYNC (one per cycle)")
    rc = pick("rated_current_object")
    cur = _object(rc, schema.Object) if rc is not None else {"index": 0x6075, "sub": 0}
    rt = pick("rated_torque_object")
    tor = _object(rt, schema.TorqueObject) if rt is not None else {"index": 0x6076, "sub": 0}
    unit = choice(tor["unit"], tuple(TORQUE_UNITS), "torque unit") if "unit" in tor else "mNm"
    profile = pdo.DriveProfile(eds_path, rpdo, tpdo, trans, ident.get("vendor_id"),
                               ident.get("product_code"), (cur["index"], cur["sub"]),
                               (tor["index"], tor["sub"]), TORQUE_UNITS[unit])
    check_required(objects, eds_path, required_objects(profile))
    for index, sub in written_objects(profile):
        var = variable(od, index, sub)
        if var is not None and not var.writable:
            raise ConfigError(f"the drive's EDS says {index:04X}h/{sub} ({var.name}) is "
                              f"'{var.access_type}', but bring-up writes it", Where(eds_path),
                              "check the EDS (is it the drive's own?)")
    return profile


def required_objects(p: pdo.DriveProfile) -> list[tuple[int, int]]:
    """The objects bring-up reads or writes on a drive with profile ``p``."""
    out = [(0x1000, 0), (0x1017, 0), (0x6040, 0), (0x6041, 0), (0x6060, 0), (0x6061, 0),
           p.rated_torque_object]
    if any(e.kind == pdo.CURRENT for e in p.tpdo):
        out.append(p.rated_current_object)
    if p.vendor_id is not None or p.product_code is not None:
        out += [(0x1018, 1), (0x1018, 2)]
    for com, mp, entries in ((0x1400, 0x1600, p.rpdo), (0x1800, 0x1A00, p.tpdo)):
        out += [(com, 1), (com, 2), (mp, 0)] + [(mp, i + 1) for i in range(len(entries))]
        out += [(e.index, e.sub) for e in entries]
    return out


def written_objects(p: pdo.DriveProfile) -> list[tuple[int, int]]:
    """The objects bring-up writes (each must be writable in the drive's EDS)."""
    out = [(0x1017, 0), (0x6060, 0)]
    for com, mp, entries in ((0x1400, 0x1600, p.rpdo), (0x1800, 0x1A00, p.tpdo)):
        out += [(com, 1), (com, 2), (mp, 0)] + [(mp, i + 1) for i in range(len(entries))]
    return out


def _master(b: schema.Bus, m: dict[str, Node], nodes: set[int],
            item: Node) -> DriveWatchdog:
    """What the drives do when the controller's heartbeat (``master``) stops
    (``drive_watchdog``), checked against the bus's drives."""
    if b.master.node in nodes:
        raise ConfigError(f"master node id {b.master.node} is a drive's too",
                          m["master"].value["node"].where(),
                          "give the controller a node id no drive on this bus has (e.g. 127)")
    w = b.drive_watchdog
    consumer = b.master.heartbeat_ms * w.heartbeat_periods
    if consumer > 65535:
        at = m["drive_watchdog"].value.get("heartbeat_periods") if "drive_watchdog" in m else None
        raise ConfigError(f"a consumer heartbeat time of {consumer} ms does not fit 1016h "
                          "(16 bits)", (at or item).where(),
                          "lower master.heartbeat_ms or drive_watchdog.heartbeat_periods")
    return DriveWatchdog(heartbeat_periods=w.heartbeat_periods,
                         abort_connection=ABORT_CONNECTION[w.abort_connection],
                         error_behaviour=ERROR_BEHAVIOUR[w.error_behaviour],
                         sync_watchdog=w.sync_watchdog, required=w.required)


def watchdog_objects(watchdog: DriveWatchdog) -> list[tuple[int, int]]:
    """The objects bring-up writes for ``watchdog`` on a CiA 402 drive."""
    return [(0x1016, 1), (0x1029, 1), (0x6007, 0)] + [(0x1006, 0)] * watchdog.sync_watchdog


def _protocol(item: Node) -> registry.Protocol:
    """The bus's drive protocol (the registry's names; default cia402)."""
    raw = item.value.get("protocol") if isinstance(item.value, dict) else None
    if raw is None:
        return registry.get(registry.DEFAULT)
    return registry.get(choice(raw, registry.names(), "protocol"))


def load_buses(path: str | Path, mech: Mechanism, rate_hz: float = 1000.0) -> tuple[BusConfig, ...]:
    """Read and validate a bus file (schema :class:`exo_rt.schema.buses.BusesFile`) for the
    robot ``mech``; refuse a bus loaded over 80 %."""
    root = read_yaml(Path(path), ConfigError)
    top = core.mapping(schema.BusesFile, root)
    by_joint = {tr.joint: tr for tr in mech.transmissions}
    buses = []
    seen_joints: set[str] = set()
    for item in sequence(top["buses"], "buses"):
        proto = _protocol(item)
        b = core.read(schema.Bus, item, proto.bus_keys, f"a bus ({proto.name})", drives=())
        m = item.value
        drives = []
        nodes: set[int] = set()
        for d in sequence(m["drives"], "drives"):
            dv = core.read(schema.Drive, d, proto.drive_keys, f"a drive ({proto.name})")
            dm = d.value
            if dv.joint not in by_joint:
                raise ConfigError(f"no motor drives joint '{dv.joint}'", dm["joint"].where(),
                                  did_you_mean(dv.joint, by_joint) or
                                  f"driven joints: {', '.join(by_joint)}")
            if dv.joint in seen_joints:
                raise ConfigError(f"joint '{dv.joint}' is on two drives", dm["joint"].where(),
                                  "give each joint one drive")
            if dv.node in nodes:
                raise ConfigError(f"node id {dv.node} is used twice on the bus",
                                  dm["node"].where(), "give each drive a unique id 1…127")
            seen_joints.add(dv.joint)
            nodes.add(dv.node)
            motor = by_joint[dv.joint].motor
            rated_i = motor.rated_current if dv.rated_current is None else dv.rated_current
            rated_t = (motor.torque_constant * motor.rated_current if dv.rated_torque is None
                       else dv.rated_torque)
            # as a CiA 402 drive holds them (6075h in mA, 6076h in mN·m, integers): the value
            # the drive scales its ‰ by is the one everything else must use
            rated_i, rated_t = round(rated_i * 1000.0) / 1000.0, round(rated_t * 1000.0) / 1000.0
            objects, profile, options = proto.parse_drive(m, dm, dv.node)
            drives.append(DriveConfig(dv.joint, dv.node, DriveScale(
                dv.counts_per_rev, rated_i, rated_t, motor.torque_constant,
                motor.peak_current), objects, profile, options))
        for f, fnode in zip(b.faults, m["faults"].value if "faults" in m else (), strict=True):
            if f.kind != "bus_off" and f.node not in nodes:
                raise ConfigError(f"fault on node {f.node}, which is not on this bus",
                                  fnode.where(), f"use one of {sorted(nodes)}")
        bus = BusConfig(
            name=b.name, interface=b.interface,
            channel=b.name if b.channel is None else str(b.channel),
            bitrate=b.bitrate,
            protocol=proto.name,
            drives=tuple(drives),
            heartbeat_ms=b.heartbeat_ms,
            faults=tuple((f.kind, f.node, f.at, f.duration) for f in b.faults),
            options=proto.parse_options(m, item),
            master_node=b.master.node,
            master_heartbeat_ms=b.master.heartbeat_ms,
            watchdog=_master(b, m, nodes, item),
            can_options=tuple(b.can_options.items()),
            interface_given="interface" in m,
        )
        proto.check(bus, m, item)
        load = bus.load(rate_hz)
        if load > MAX_LOAD:
            raise ConfigError(
                f"bus '{bus.name}' would be {100 * load:.0f} % loaded at {rate_hz:g} Hz "
                f"({len(drives)} drives, {bus.bitrate / 1e6:g} Mbit/s)", item.where(),
                "split the drives over two buses (e.g. one per leg), lower the rate or use CAN FD",
            )
        buses.append(bus)
    return tuple(buses)


def watchdog_required(bus: BusConfig, m: dict[str, Node]) -> None:
    """``drive_watchdog.required`` on CiA 402 drives: each drive's EDS has every object."""
    if not bus.watchdog.required:
        return
    for d in bus.drives:
        objects = read_eds(d.profile.eds)
        missing = [f"{i:04X}h/{s} ({WATCHDOG_OBJECTS[(i, s)]})"
                   for i, s in watchdog_objects(bus.watchdog) if (i, s) not in objects]
        if missing:
            raise ConfigError(
                f"drive {d.node}'s EDS ({d.profile.eds}) has no {', '.join(missing)}, "
                "which drive_watchdog.required asks for",
                m["drive_watchdog"].value["required"].where(),
                "give the drive's own EDS, or configure its watchdog with the "
                "vendor's tool and set required: false (docs/safety.md)")


def cia402_drive(bus: dict[str, Node], drive: dict[str, Node], node: int):
    """A CiA 402 drive's (EDS objects or None, profile) from its and its bus's keys."""
    profile = _profile(bus, drive, node)
    objects = read_eds(profile.eds) if ("eds" in drive or "eds" in bus) else None
    return objects, profile


def mit_ranges(bus: dict[str, Node]) -> MitRanges:
    """``mit_ranges`` of an MIT-mode bus (schema :class:`exo_rt.schema.buses.MitRanges`)."""
    r = (core.read(schema.MitRanges, bus["mit_ranges"]) if "mit_ranges" in bus
         else schema.MitRanges())
    return MitRanges(**{k: getattr(r, k) for k in schema.MitRanges.KEYS})
