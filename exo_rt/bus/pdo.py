"""PDO mappings as data: what a drive's RPDO1/TPDO1 carry, and the codec built from that.

A mapping is a list of entries (object index, sub-index, bits, signedness from the drive's
EDS, and the quantity the controller reads from or writes to it). The bus file declares it
(docs/bus.md: ``rpdo``/``tpdo``; defaults for cyclic synchronous torque below), bring-up writes
it into the drive (0x1600/0x1A00), and the cycle packs and unpacks frames through field tables
made from its :class:`Layout` (:mod:`exo_rt.bus.pdo_fields`) — the canopen library stays out
of the cycle.

Default mapping (cyclic synchronous torque):
  RPDO1 (0x200 + node) = controlword u16 (6040h) + target torque i16 (6071h, ‰ of rated torque)
  TPDO1 (0x180 + node) = statusword u16 (6041h) + position actual i32 (6064h, increments)
                         + current actual i16 (6078h, ‰ of rated current)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# quantities a PDO entry can carry (the ``as`` of a vendor object in the bus file)
CONTROLWORD = "controlword"
TARGET_TORQUE = "target_torque"  # ‰ of the rated torque
STATUSWORD = "statusword"
POSITION = "position_actual"  # increments
CURRENT = "current_actual"  # ‰ of the rated current
CURRENT_MA = "current_actual_mA"  # mA (vendor objects, e.g. EPOS4 30D1h)
TORQUE = "torque_actual"  # ‰ of the rated torque
VELOCITY = "velocity_actual"  # the drive's velocity unit (kept raw)
DIGITAL_INPUTS = "digital_inputs"
ERROR_CODE = "error_code"

RPDO_KINDS = (CONTROLWORD, TARGET_TORQUE)
TPDO_KINDS = (STATUSWORD, POSITION, CURRENT, CURRENT_MA, TORQUE, VELOCITY, DIGITAL_INPUTS,
              ERROR_CODE)
CURRENT_KINDS = (CURRENT, CURRENT_MA, TORQUE)  # a TPDO carries exactly one of these
EXTRA_KINDS = (VELOCITY, DIGITAL_INPUTS, ERROR_CODE)  # optional, kept raw

# the standard CiA 402 object of each quantity (a name in the bus file stands for it)
STANDARD = {
    CONTROLWORD: (0x6040, 0), TARGET_TORQUE: (0x6071, 0), STATUSWORD: (0x6041, 0),
    POSITION: (0x6064, 0), CURRENT: (0x6078, 0), TORQUE: (0x6077, 0),
    VELOCITY: (0x606C, 0), DIGITAL_INPUTS: (0x60FD, 0), ERROR_CODE: (0x603F, 0),
}
DEFAULT_RPDO = (CONTROLWORD, TARGET_TORQUE)
DEFAULT_TPDO = (STATUSWORD, POSITION, CURRENT)

# struct codes by (bits, signed)
_CODES = {(8, False): "B", (8, True): "b", (16, False): "H", (16, True): "h",
          (32, False): "I", (32, True): "i", (64, False): "Q", (64, True): "q"}
MAX_BITS = 64  # a classic CAN frame


@dataclass(frozen=True)
class MapEntry:
    """One mapped object: where it is, its size and signedness, what it means."""

    index: int
    sub: int
    bits: int
    signed: bool
    kind: str

    @property
    def word(self) -> int:
        """The mapping entry as written into 0x1600/0x1A00: index << 16 | sub << 8 | bits."""
        return self.index << 16 | self.sub << 8 | self.bits

    @property
    def low(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def high(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    def __str__(self) -> str:
        return f"{self.index:04X}h/{self.sub}"


def struct_code(bits: int, signed: bool) -> str | None:
    """The struct format letter of an integer of ``bits`` (None: not packable in a PDO)."""
    return _CODES.get((bits, signed))


class Layout:
    """One PDO's bytes: its entries in order, its size, and a ``struct.Struct`` of them — the
    emulated drive's codec, one frame at a time in Python (the controller reads and writes
    PDOs through field tables made from the same entries: :mod:`exo_rt.bus.pdo_fields`)."""

    __slots__ = ("entries", "struct", "size", "current_kind")

    def __init__(self, entries: tuple[MapEntry, ...]) -> None:
        self.entries = tuple(entries)
        self.struct = struct.Struct("<" + "".join(_CODES[(e.bits, e.signed)]
                                                  for e in self.entries))
        self.size = self.struct.size
        kinds = {e.kind for e in self.entries}
        self.current_kind = next((k for k in CURRENT_KINDS if k in kinds), "")

    def words(self) -> tuple[int, ...]:
        return tuple(e.word for e in self.entries)


@dataclass(frozen=True)
class DriveProfile:
    """What bring-up configures on one drive, from the bus file and the drive's EDS."""

    eds: str  # the EDS (or DCF) file the drive's object dictionary is read from
    rpdo: tuple[MapEntry, ...]
    tpdo: tuple[MapEntry, ...]
    transmission_type: int = 1  # 0x1400/2 and 0x1800/2: synchronous, every n-th SYNC
    vendor_id: int | None = None  # 0x1018/1 the drive must report (None: not checked)
    product_code: int | None = None  # 0x1018/2
    rated_current_object: tuple[int, int] = (0x6075, 0)  # motor rated current, mA
    rated_torque_object: tuple[int, int] = (0x6076, 0)  # motor rated torque
    torque_unit: float = 1e-3  # N·m per unit of the rated torque object (mN·m; µN·m: 1e-6)

    @property
    def rpdo_bytes(self) -> int:
        return sum(e.bits for e in self.rpdo) // 8

    @property
    def tpdo_bytes(self) -> int:
        return sum(e.bits for e in self.tpdo) // 8

    def kinds(self) -> dict[tuple[int, int], str]:
        """(index, sub) → quantity, for the standard objects and this drive's vendor ones."""
        out = {obj: kind for kind, obj in STANDARD.items()}
        out.update({(e.index, e.sub): e.kind for e in self.rpdo + self.tpdo})
        return out


def _default_profile() -> DriveProfile:
    from exo_rt.bus.eds import DEFAULT_EDS

    u16, i16, i32 = (16, False), (16, True), (32, True)
    rx = (MapEntry(0x6040, 0, *u16, CONTROLWORD), MapEntry(0x6071, 0, *i16, TARGET_TORQUE))
    tx = (MapEntry(0x6041, 0, *u16, STATUSWORD), MapEntry(0x6064, 0, *i32, POSITION),
          MapEntry(0x6078, 0, *i16, CURRENT))
    return DriveProfile(str(DEFAULT_EDS), rx, tx)


DEFAULT_PROFILE = _default_profile()  # exo-rt's emulated drive with the default mapping
