"""The test rig's fixture on the CAN bus: the clamp that locks joint outputs and the load cells
that measure their reaction torque, as one CANopen-style node (docs/bench.md).

Frames (standard ids, ``node`` default :data:`FIXTURE_NODE`):

- command, RPDO1 ``0x200 + node``, 1 byte: bit k clamps the output of the bus's k-th drive's
  joint (bus-file order), 0 releases it;
- measurement, TPDO1 ``0x180 + node``, after each SYNC while anything is clamped: one int16
  (little-endian, 0.01 N·m, ±327.67 N·m) per drive of the bus, the reaction torque on that
  output — positive where the motor pushes the joint's angle up; 0 when not clamped.
"""

from __future__ import annotations

import struct

FIXTURE_NODE = 0x70  # 112: above the drives' usual ids
COMMAND = 0x200  # + node
MEASUREMENT = 0x180  # + node
TORQUE_UNIT = 0.01  # N·m per count
MAX_JOINTS = 4  # 8 data bytes


def command(node: int, mask: int) -> tuple[int, bytes]:
    """The clamp command: bit k clamps the k-th drive's output."""
    return COMMAND + node, bytes([mask & 0xFF])


def decode_command(data: bytes) -> int | None:
    """The clamp mask, or None for a malformed frame."""
    return data[0] if len(data) == 1 else None


def measurement(node: int, torques) -> tuple[int, bytes]:
    """The reaction torques (N·m), saturated to the int16 range."""
    counts = [max(-32768, min(32767, round(t / TORQUE_UNIT))) for t in torques[:MAX_JOINTS]]
    return MEASUREMENT + node, struct.pack(f"<{len(counts)}h", *counts)


def decode_measurement(data: bytes, n: int) -> list[float] | None:
    """``n`` reaction torques (N·m), or None for a malformed frame."""
    if len(data) != 2 * n or n > MAX_JOINTS:
        return None
    return [x * TORQUE_UNIT for x in struct.unpack(f"<{n}h", data)]
