"""MIT-mode actuator frames (mini-cheetah / CubeMars AK), as pure functions.

After Ben Katz's mini-cheetah firmware and neurobionics TMotorCANControl: a command is 8 bytes,
big-endian bit packing of p (16 bits), v (12), kp (12), kd (12), t_ff (12); a reply is
[id, p (16), v (12), i (12)] plus, on AK motors, temperature and error bytes. Values map
linearly onto the per-motor ranges (which differ between firmware builds: keep them in YAML):
u = int((x − x_min)(2^bits − 1)/(x_max − x_min)), clamped; x = u (x_max − x_min)/(2^bits − 1)
+ x_min. Decoders never raise.
"""

from __future__ import annotations

from dataclasses import dataclass

ENTER = bytes([0xFF] * 7 + [0xFC])
EXIT = bytes([0xFF] * 7 + [0xFD])
ZERO = bytes([0xFF] * 7 + [0xFE])


@dataclass(frozen=True)
class MitRanges:
    """Per-motor ranges (SI at the motor output): position rad, velocity rad/s, torque N·m."""

    p_max: float = 12.5
    v_max: float = 50.0
    t_max: float = 18.0
    kp_max: float = 500.0
    kd_max: float = 5.0


def to_uint(x: float, lo: float, hi: float, bits: int) -> int:
    span = hi - lo
    u = int((x - lo) * ((1 << bits) - 1) / span)
    return max(0, min((1 << bits) - 1, u))


def from_uint(u: int, lo: float, hi: float, bits: int) -> float:
    return u * (hi - lo) / ((1 << bits) - 1) + lo


def pack_command(p: float, v: float, kp: float, kd: float, t: float, r: MitRanges) -> bytes:
    """The 8-byte command; τ = kp(p_des − p) + kd(v_des − v) + t_ff is the motor's own law."""
    pu = to_uint(p, -r.p_max, r.p_max, 16)
    vu = to_uint(v, -r.v_max, r.v_max, 12)
    kpu = to_uint(kp, 0.0, r.kp_max, 12)
    kdu = to_uint(kd, 0.0, r.kd_max, 12)
    tu = to_uint(t, -r.t_max, r.t_max, 12)
    return bytes((pu >> 8, pu & 0xFF, vu >> 4, ((vu & 0xF) << 4) | (kpu >> 8), kpu & 0xFF,
                  kdu >> 4, ((kdu & 0xF) << 4) | (tu >> 8), tu & 0xFF))


def unpack_command(data: bytes, r: MitRanges) -> tuple[float, float, float, float, float] | None:
    if len(data) != 8 or data in (ENTER, EXIT, ZERO):
        return None
    pu = data[0] << 8 | data[1]
    vu = data[2] << 4 | data[3] >> 4
    kpu = (data[3] & 0xF) << 8 | data[4]
    kdu = data[5] << 4 | data[6] >> 4
    tu = (data[6] & 0xF) << 8 | data[7]
    return (from_uint(pu, -r.p_max, r.p_max, 16), from_uint(vu, -r.v_max, r.v_max, 12),
            from_uint(kpu, 0.0, r.kp_max, 12), from_uint(kdu, 0.0, r.kd_max, 12),
            from_uint(tu, -r.t_max, r.t_max, 12))


def pack_reply(motor_id: int, p: float, v: float, torque: float, r: MitRanges,
               temperature: int = 25, error: int = 0) -> bytes:
    pu = to_uint(p, -r.p_max, r.p_max, 16)
    vu = to_uint(v, -r.v_max, r.v_max, 12)
    iu = to_uint(torque, -r.t_max, r.t_max, 12)
    return bytes((motor_id & 0xFF, pu >> 8, pu & 0xFF, vu >> 4, ((vu & 0xF) << 4) | (iu >> 8),
                  iu & 0xFF, temperature & 0xFF, error & 0xFF))


def unpack_reply(data: bytes, r: MitRanges) -> tuple[int, float, float, float, int] | None:
    """(motor id, position, velocity, torque, error code), or None for a malformed frame.

    The original firmware sends 6 bytes (no temperature/error); AK motors send 8.
    """
    if len(data) not in (6, 8):
        return None
    pu = data[1] << 8 | data[2]
    vu = data[3] << 4 | data[4] >> 4
    iu = (data[4] & 0xF) << 8 | data[5]
    err = data[7] if len(data) == 8 else 0
    return (data[0], from_uint(pu, -r.p_max, r.p_max, 16), from_uint(vu, -r.v_max, r.v_max, 12),
            from_uint(iu, -r.t_max, r.t_max, 12), err)
