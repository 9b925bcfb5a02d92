"""Bus configuration (``configs/buses/*.yaml``): interfaces, bit rates, node ids, scales, and
the per-cycle bus load (DESIGN §4.1: a configuration over 80 % is refused)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exo_rt.bus.eds import check_required, read_eds
from exo_rt.bus.mit import MitRanges
from exo_rt.errors import ConfigError
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import did_you_mean
from exo_rt.sim.drive_emulator import DriveScale
from exo_rt.yamlio import choice, mapping, number, read_yaml, sequence, text

MAX_LOAD = 0.8
RPDO_BYTES, TPDO_BYTES, SYNC_BYTES = 4, 8, 0


@dataclass(frozen=True)
class DriveConfig:
    joint: str
    node: int
    scale: DriveScale
    eds: dict | None = None  # (index, sub) → exo_rt.bus.eds.Entry, from the drive's EDS


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
    mit_ranges: MitRanges | None = None  # protocol: mit

    def load(self, rate_hz: float) -> float:
        """Fraction of the bit rate one control cycle's frames take (worst-case stuffing)."""
        bits = frame_bits(SYNC_BYTES) + sum(frame_bits(RPDO_BYTES) + frame_bits(TPDO_BYTES)
                                            for _ in self.drives)
        return bits * rate_hz / self.bitrate


def frame_bits(n_bytes: int) -> int:
    """Bits of a classic CAN data frame with an 11-bit id: 47 + 8n, plus the worst-case stuff
    bits over the 34 + 8n stuffed bits (one per four after the first)."""
    return 47 + 8 * n_bytes + (34 + 8 * n_bytes - 1) // 4


BUS_KEYS = {"name": True, "interface": False, "channel": False, "bitrate": False,
            "protocol": False, "drives": True, "heartbeat_ms": False, "faults": False,
            "mit_ranges": False}
MIT_KEYS = {"p_max": False, "v_max": False, "t_max": False, "kp_max": False, "kd_max": False}
PROTOCOLS = ("cia402", "mit")
FAULT_KEYS = {"kind": True, "node": False, "at": True, "duration": False}
FAULT_KINDS = ("drop", "corrupt", "duplicate", "delay", "encoder_glitch", "heartbeat_loss",
               "bus_off", "current_saturation", "overcurrent", "fault")
DRIVE_KEYS = {"joint": True, "node": True, "counts_per_rev": False, "rated_current": False,
              "rated_torque": False, "eds": False}


def load_buses(path: str | Path, mech: Mechanism, rate_hz: float = 1000.0) -> tuple[BusConfig, ...]:
    """Read and validate a bus file for the robot ``mech``; refuse a bus loaded over 80 %."""
    root = read_yaml(Path(path), ConfigError)
    top = mapping(root, {"buses": True}, "the bus file")
    by_joint = {tr.joint: tr for tr in mech.transmissions}
    buses = []
    seen_joints: set[str] = set()
    for item in sequence(top["buses"], "buses"):
        m = mapping(item, BUS_KEYS, "a bus")
        drives = []
        nodes: set[int] = set()
        for d in sequence(m["drives"], "drives"):
            dm = mapping(d, DRIVE_KEYS, "a drive")
            joint = text(dm["joint"])
            if joint not in by_joint:
                raise ConfigError(f"no motor drives joint '{joint}'", dm["joint"].where(),
                                  did_you_mean(joint, by_joint) or
                                  f"driven joints: {', '.join(by_joint)}")
            if joint in seen_joints:
                raise ConfigError(f"joint '{joint}' is on two drives", dm["joint"].where(),
                                  "give each joint one drive")
            node = int(number(dm["node"]))
            if not 1 <= node <= 127 or node in nodes:
                raise ConfigError(f"node id {node} is out of 1…127 or used twice on the bus",
                                  dm["node"].where(), "give each drive a unique id 1…127")
            seen_joints.add(joint)
            nodes.add(node)
            motor = by_joint[joint].motor
            rated_i = number(dm["rated_current"]) if "rated_current" in dm else motor.rated_current
            rated_t = (number(dm["rated_torque"]) if "rated_torque" in dm
                       else motor.torque_constant * motor.rated_current)
            cpr = int(number(dm["counts_per_rev"])) if "counts_per_rev" in dm else 65536
            objects = None
            if "eds" in dm:
                eds_path = Path(dm["eds"].file).parent / text(dm["eds"])
                objects = read_eds(eds_path)
                check_required(objects, eds_path)
            drives.append(DriveConfig(joint, node, DriveScale(
                cpr, rated_i, rated_t, motor.torque_constant, motor.peak_current), objects))
        faults = []
        for f in sequence(m["faults"], "faults") if "faults" in m else []:
            fm = mapping(f, FAULT_KEYS, "a fault")
            kind = choice(fm["kind"], FAULT_KINDS, "fault kind")
            node = int(number(fm["node"])) if "node" in fm else 0
            if kind != "bus_off" and node not in nodes:
                raise ConfigError(f"fault on node {node}, which is not on this bus",
                                  f.where(), f"use one of {sorted(nodes)}")
            faults.append((kind, node, number(fm["at"]),
                           number(fm["duration"]) if "duration" in fm else 0.0))
        protocol = choice(m["protocol"], PROTOCOLS, "protocol") if "protocol" in m else "cia402"
        ranges = None
        if protocol == "mit":
            r = mapping(m["mit_ranges"], MIT_KEYS, "mit_ranges") if "mit_ranges" in m else {}
            ranges = MitRanges(**{k: number(v) for k, v in r.items()})
        bus = BusConfig(
            name=text(m["name"]), interface=text(m["interface"]) if "interface" in m else "exo_sim",
            channel=text(m["channel"]) if "channel" in m else text(m["name"]),
            bitrate=int(number(m["bitrate"])) if "bitrate" in m else 1_000_000,
            protocol=protocol,
            drives=tuple(drives),
            heartbeat_ms=int(number(m["heartbeat_ms"])) if "heartbeat_ms" in m else 100,
            faults=tuple(faults),
            mit_ranges=ranges,
        )
        load = bus.load(rate_hz)
        if load > MAX_LOAD:
            raise ConfigError(
                f"bus '{bus.name}' would be {100 * load:.0f} % loaded at {rate_hz:g} Hz "
                f"({len(drives)} drives, {bus.bitrate / 1e6:g} Mbit/s)", item.where(),
                "split the drives over two buses (e.g. one per leg), lower the rate or use CAN FD",
            )
        buses.append(bus)
    return tuple(buses)
