"""CAN error frames as Linux socketcan reports them (``linux/can/error.h``), decoded to a cause.

With ``ip link set can0 type can … restart-ms 100`` the kernel delivers error frames to every
raw socket that asks for them (python-can's socketcan interface does): ``is_error_frame`` set,
the error class in the bits of the CAN id, the detail in the 8 data bytes. A bus-off is the
one a controller must treat as a fault (nothing it sends reaches the drives until the
controller restarts, ``restart-ms`` later, and reports CAN_ERR_RESTARTED); the others are
warnings worth a line in the log. The decoder never raises, whatever the frame.
"""

from __future__ import annotations

# error classes (bits of the CAN id)
CAN_ERR_TX_TIMEOUT = 0x001
CAN_ERR_LOSTARB = 0x002
CAN_ERR_CRTL = 0x004
CAN_ERR_PROT = 0x008
CAN_ERR_TRX = 0x010
CAN_ERR_ACK = 0x020
CAN_ERR_BUSOFF = 0x040
CAN_ERR_BUSERROR = 0x080
CAN_ERR_RESTARTED = 0x100
CAN_ERR_CNT = 0x200

# data[1]: controller status (with CAN_ERR_CRTL)
CRTL = ((0x01, "RX overflow"), (0x02, "TX overflow"), (0x04, "RX warning"),
        (0x08, "TX warning"), (0x10, "RX passive"), (0x20, "TX passive"),
        (0x40, "back to error active"))
# data[2]: protocol violation type (with CAN_ERR_PROT)
PROT = ((0x01, "bit"), (0x02, "form"), (0x04, "stuff"), (0x08, "dominant bit"),
        (0x10, "recessive bit"), (0x20, "overload"), (0x40, "active error announcement"),
        (0x80, "on transmission"))

CLASSES = ((CAN_ERR_BUSOFF, "bus-off"), (CAN_ERR_RESTARTED, "controller restarted"),
           (CAN_ERR_CRTL, "controller"), (CAN_ERR_PROT, "protocol violation"),
           (CAN_ERR_ACK, "no ACK (no other node on the bus?)"),
           (CAN_ERR_TX_TIMEOUT, "TX timeout"), (CAN_ERR_LOSTARB, "lost arbitration"),
           (CAN_ERR_TRX, "transceiver"), (CAN_ERR_BUSERROR, "bus error"))


def _bits(value: int, table) -> str:
    return ", ".join(name for bit, name in table if value & bit)


def decode_error_frame(can_id: int, data) -> tuple[bool, str]:
    """(is it a fault — bus-off —, the cause in words) of a socketcan error frame."""
    try:
        cls = int(can_id) & 0x1FFFFFFF
        raw = bytes(data)[:8].ljust(8, b"\0")
    except (TypeError, ValueError, OverflowError):
        return False, "unreadable error frame"
    parts = []
    for bit, name in CLASSES:
        if not cls & bit:
            continue
        if bit == CAN_ERR_CRTL and raw[1]:
            name = f"controller: {_bits(raw[1], CRTL)}"
        elif bit == CAN_ERR_PROT and raw[2]:
            name = f"protocol violation: {_bits(raw[2], PROT)} at location {raw[3]:#04x}"
        elif bit == CAN_ERR_LOSTARB and raw[0]:
            name = f"lost arbitration at bit {raw[0]}"
        parts.append(name)
    if cls & CAN_ERR_CNT or raw[6] or raw[7]:
        parts.append(f"error counters TX {raw[6]} RX {raw[7]}")
    if not parts:
        parts.append(f"unspecified error (class {cls:#x})")
    return bool(cls & CAN_ERR_BUSOFF), "; ".join(parts)
