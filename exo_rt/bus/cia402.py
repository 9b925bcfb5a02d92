"""CANopen (CiA 301) and CiA 402 frames as pure functions: numbers ↔ (COB-ID, bytes).

Layouts from CiA 301 and CiA 402-2 (as the canopen 2.4.1 source implements them): little-endian;
NMT [cs, node] on 0x000; SYNC on 0x080; EMCY "<HB5s" on 0x080+node; heartbeat [state] on
0x700+node; SDO [cmd, index (LE), sub, data(4)] on 0x600+node / 0x580+node; PDOs packed in
mapping order. Decoders never raise: a malformed frame gives ``None`` (or a flagged result),
which the cycle counts per joint.

Default cyclic synchronous torque mapping (as in the EPOS4 CST set-up):
  RPDO1 (0x200+node) = controlword u16 + target torque i16 (per mille of rated torque 0x6076)
  TPDO1 (0x180+node) = statusword u16 + position actual i32 (encoder counts) + current actual
                       i16 (per mille of rated current 0x6075)
"""

from __future__ import annotations

import struct

# --- services (COB-ID bases)
NMT = 0x000
SYNC = 0x080
EMCY = 0x080
TPDO1 = 0x180
RPDO1 = 0x200
SDO_TX = 0x580  # drive → host
SDO_RX = 0x600  # host → drive
HEARTBEAT = 0x700

# --- NMT commands and heartbeat states
NMT_START, NMT_STOP, NMT_PRE_OPERATIONAL = 0x01, 0x02, 0x80
NMT_RESET_NODE, NMT_RESET_COMM = 0x81, 0x82
HB_BOOTUP, HB_STOPPED, HB_OPERATIONAL, HB_PRE_OPERATIONAL = 0x00, 0x04, 0x05, 0x7F

# --- controlword commands (0x6040)
CW_SHUTDOWN = 0x0006
CW_SWITCH_ON = 0x0007
CW_ENABLE_OPERATION = 0x000F
CW_DISABLE_VOLTAGE = 0x0000
CW_QUICK_STOP = 0x0002
CW_FAULT_RESET = 0x0080

# --- power states decoded from the statusword (0x6041): (mask, value)
NOT_READY = "NOT READY TO SWITCH ON"
SWITCH_ON_DISABLED = "SWITCH ON DISABLED"
READY_TO_SWITCH_ON = "READY TO SWITCH ON"
SWITCHED_ON = "SWITCHED ON"
OPERATION_ENABLED = "OPERATION ENABLED"
QUICK_STOP_ACTIVE = "QUICK STOP ACTIVE"
FAULT_REACTION_ACTIVE = "FAULT REACTION ACTIVE"
FAULT = "FAULT"
STATES = (
    (0x4F, 0x00, NOT_READY),
    (0x4F, 0x40, SWITCH_ON_DISABLED),
    (0x6F, 0x21, READY_TO_SWITCH_ON),
    (0x6F, 0x23, SWITCHED_ON),
    (0x6F, 0x27, OPERATION_ENABLED),
    (0x6F, 0x07, QUICK_STOP_ACTIVE),
    (0x4F, 0x0F, FAULT_REACTION_ACTIVE),
    (0x4F, 0x08, FAULT),
)
# a statusword for each state, as a healthy drive reports it (voltage enabled where it is on)
STATUSWORD = {
    NOT_READY: 0x0000, SWITCH_ON_DISABLED: 0x0240, READY_TO_SWITCH_ON: 0x0231,
    SWITCHED_ON: 0x0233, OPERATION_ENABLED: 0x0237, QUICK_STOP_ACTIVE: 0x0217,
    FAULT_REACTION_ACTIVE: 0x021F, FAULT: 0x0218,
}

# --- objects
OBJ_CONTROLWORD = (0x6040, 0)
OBJ_STATUSWORD = (0x6041, 0)
OBJ_MODE = (0x6060, 0)
OBJ_MODE_DISPLAY = (0x6061, 0)
OBJ_POSITION_ACTUAL = (0x6064, 0)
OBJ_TARGET_TORQUE = (0x6071, 0)
OBJ_CURRENT_ACTUAL = (0x6078, 0)
OBJ_RATED_CURRENT = (0x6075, 0)  # mA
OBJ_RATED_TORQUE = (0x6076, 0)  # mN·m
OBJ_HEARTBEAT_TIME = (0x1017, 0)  # ms
OBJ_ERROR_REGISTER = (0x1001, 0)
MODE_CST = 10

# default PDO mapping entries (index << 16 | sub << 8 | bits)
RPDO1_MAP = (0x60400010, 0x60710010)
TPDO1_MAP = (0x60410010, 0x60640020, 0x60780010)

# EMCY codes (CiA 301/402)
EMCY_NO_ERROR = 0x0000
EMCY_OVERCURRENT = 0x2310
EMCY_UNDERVOLTAGE = 0x3220
EMCY_HEARTBEAT = 0x8130  # life guard or heartbeat error (the consumer's, 1016h)
EMCY_COMMUNICATION = 0x8100  # communication, generic: the emulated drive's SYNC loss (as
#                              CANopenNode's SYNC timeout; CiA 301 has no code of its own)
EMCY_POSITION_SENSOR = 0x7320
ERRREG_GENERIC, ERRREG_CURRENT, ERRREG_COMMUNICATION = 0x01, 0x02, 0x10
EMCY_NAMES = {0x0000: "no error", 0x2310: "continuous over-current", 0x3220: "DC link "
              "under-voltage", 0x7320: "position sensor", 0x8100: "communication",
              0x8110: "CAN overrun", 0x8120: "CAN error passive", 0x8130: "heartbeat or "
              "life guard error", 0x8140: "recovered from bus-off", 0x8210: "PDO length",
              0x8220: "PDO too long", 0x8240: "unexpected SYNC length", 0x8250: "RPDO timeout"}
EMCY_CLASSES = {0x1: "generic", 0x2: "current", 0x3: "voltage", 0x4: "temperature",
                0x5: "device hardware", 0x6: "device software", 0x7: "additional modules",
                0x8: "monitoring", 0x9: "external error", 0xF: "device specific"}


def emcy_name(code: int) -> str:
    """What an EMCY / 603Fh error code means (CiA 301/402), or its class."""
    return EMCY_NAMES.get(code) or EMCY_CLASSES.get(code >> 12, "unknown") + " error"

_RPDO = struct.Struct("<Hh")
_TPDO = struct.Struct("<Hih")
_EMCY = struct.Struct("<HB5s")
_SDO = struct.Struct("<BHB4s")


def state_of(statusword: int) -> str:
    """The CiA 402 power state a statusword reports (the statusword mask table of CiA 402-2)."""
    for mask, value, name in STATES:
        if statusword & mask == value:
            return name
    return NOT_READY


# ----------------------------------------------------------------------------- NMT, SYNC, HB
def nmt(command: int, node: int = 0) -> tuple[int, bytes]:
    """NMT command to ``node`` (0 = all)."""
    return NMT, bytes((command & 0xFF, node & 0x7F))


def decode_nmt(data: bytes) -> tuple[int, int] | None:
    if len(data) != 2:
        return None
    return data[0], data[1]


def sync(counter: int | None = None) -> tuple[int, bytes]:
    """SYNC with no data or a 1-byte counter (1…240)."""
    return SYNC, b"" if counter is None else bytes((counter & 0xFF,))


def heartbeat(node: int, state: int) -> tuple[int, bytes]:
    return HEARTBEAT + node, bytes((state & 0x7F,))


def decode_heartbeat(data: bytes) -> int | None:
    if len(data) != 1 or data[0] & 0x80:
        return None
    return data[0]


# ----------------------------------------------------------------------------- EMCY
def emcy(node: int, code: int, register: int, vendor: bytes = b"") -> tuple[int, bytes]:
    return EMCY + node, _EMCY.pack(code & 0xFFFF, register & 0xFF, vendor[:5].ljust(5, b"\0"))


def decode_emcy(data: bytes) -> tuple[int, int, bytes] | None:
    """(error code, error register, vendor bytes), or None for a malformed frame."""
    if len(data) != 8:
        return None
    return _EMCY.unpack(bytes(data))


# ----------------------------------------------------------------------------- PDOs
def rpdo1(node: int, controlword: int, torque_permille: int) -> tuple[int, bytes]:
    """RPDO1: controlword + target torque (per mille, saturated to i16)."""
    t = max(-32768, min(32767, int(torque_permille)))
    return RPDO1 + node, _RPDO.pack(controlword & 0xFFFF, t)


def decode_rpdo1(data: bytes) -> tuple[int, int] | None:
    """(controlword, target torque ‰) of the default mapping, or None for a malformed frame:
    the cycle's decoder on the default RPDO's field table (:mod:`exo_rt.bus.pdo_fields`)."""
    from exo_rt.bus import pdo_fields as pf

    v = pf.decode(data, pf.default_rpdo(), 4)
    return None if v is None else (int(v[pf.RPDO_CONTROLWORD]), int(v[pf.RPDO_TARGET]))


def tpdo1(node: int, statusword: int, position_counts: int,
          current_permille: int) -> tuple[int, bytes]:
    """TPDO1: statusword + position actual (i32, wraps) + current actual (per mille, i16)."""
    pos = ((int(position_counts) + 2**31) % 2**32) - 2**31
    cur = max(-32768, min(32767, int(current_permille)))
    return TPDO1 + node, _TPDO.pack(statusword & 0xFFFF, pos, cur)


def decode_tpdo1(data: bytes) -> tuple[int, int, int] | None:
    """(statusword, position counts, current per mille) of the default mapping, or None for a
    malformed frame: the cycle's decoder on the default TPDO's field table
    (:mod:`exo_rt.bus.pdo_fields`)."""
    from exo_rt.bus import pdo_fields as pf

    v = pf.decode(data, pf.default_tpdo(), 8)
    return None if v is None else (int(v[pf.TPDO_STATUSWORD]), int(v[pf.TPDO_POSITION]),
                                   int(v[pf.TPDO_CURRENT]))


# ----------------------------------------------------------------------------- SDO (expedited)
SDO_DOWNLOAD = {1: 0x2F, 2: 0x2B, 3: 0x27, 4: 0x23}
SDO_DOWNLOAD_OK = 0x60
SDO_UPLOAD_REQUEST = 0x40
SDO_UPLOAD = {0x4F: 1, 0x4B: 2, 0x47: 3, 0x43: 4}
SDO_ABORT = 0x80
ABORT_NO_OBJECT = 0x06020000
ABORT_READ_ONLY = 0x06010002
ABORT_COMMAND = 0x05040001


def sdo_download(node: int, index: int, sub: int, value: int, size: int) -> tuple[int, bytes]:
    """Expedited write of ``size`` bytes (1, 2 or 4) to (index, sub)."""
    data = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little").ljust(4, b"\0")
    return SDO_RX + node, _SDO.pack(SDO_DOWNLOAD[size], index, sub, data)


def sdo_upload_request(node: int, index: int, sub: int) -> tuple[int, bytes]:
    return SDO_RX + node, _SDO.pack(SDO_UPLOAD_REQUEST, index, sub, b"\0\0\0\0")


def sdo_response_ok(node: int, index: int, sub: int) -> tuple[int, bytes]:
    return SDO_TX + node, _SDO.pack(SDO_DOWNLOAD_OK, index, sub, b"\0\0\0\0")


def sdo_upload_response(node: int, index: int, sub: int, value: int,
                        size: int) -> tuple[int, bytes]:
    cmd = {v: k for k, v in SDO_UPLOAD.items()}[size]
    data = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little").ljust(4, b"\0")
    return SDO_TX + node, _SDO.pack(cmd, index, sub, data)


def sdo_abort(node: int, index: int, sub: int, code: int, *, to_drive: bool = False):
    base = SDO_RX if to_drive else SDO_TX
    return base + node, _SDO.pack(SDO_ABORT, index, sub, code.to_bytes(4, "little"))


def decode_sdo(data: bytes) -> tuple[int, int, int, bytes] | None:
    """(command byte, index, sub, 4 data bytes), or None for a malformed frame."""
    if len(data) != 8:
        return None
    return _SDO.unpack(bytes(data))


def sdo_value(cmd: int, payload: bytes, signed: bool = False) -> int | None:
    """The value of an expedited upload response (None if the command is not one)."""
    size = SDO_UPLOAD.get(cmd)
    if size is None:
        return None
    return int.from_bytes(payload[:size], "little", signed=signed)
