"""An emulated CiA 402 servo drive, frame for frame (DESIGN §4.2).

It answers what a real drive (EPOS4-like) answers: NMT, heartbeat producer, SDO server for
the configured objects, the power state machine driven by the controlword, cyclic synchronous
torque (mode 10) with the RPDO latched and applied at the next SYNC, the TPDO sent on SYNC,
EMCY on faults. Behind it the plant: the drive turns the latched target torque into a current
command for the plant's current loop and reports the rotor's encoder counts and the actual
current.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from exo_rt.bus import cia402 as c


@dataclass
class DriveScale:
    """Units of one drive: encoder counts per motor turn, rated current (A) and torque (N·m)."""

    counts_per_rev: int = 65536
    rated_current: float = 3.29
    rated_torque: float = 0.133  # N·m at the motor (0x6076 = 133 mN·m)
    torque_constant: float = 0.0404
    peak_current: float = 15.0


@dataclass
class EmulatedDrive:
    """One CiA 402 node. ``handle`` takes a host frame and returns the drive's replies."""

    node: int
    scale: DriveScale
    heartbeat_ms: int = 0
    nmt_state: int = c.HB_PRE_OPERATIONAL
    state: str = c.SWITCH_ON_DISABLED
    target_permille: int = 0  # latched by the RPDO, applied at the next SYNC
    applied_permille: int = 0
    controlword: int = 0
    mode: int = 0
    mapping_ok: bool = True
    objects: dict = field(default_factory=dict)
    saturation: tuple = (0, 0.0)  # (until period, current limit A): injected saturation
    eds: dict | None = None  # extra objects from the drive's EDS, served by SDO

    def __post_init__(self) -> None:
        s = self.scale
        self.objects = {
            c.OBJ_MODE: [0, 1, True],
            c.OBJ_MODE_DISPLAY: [0, 1, False],
            c.OBJ_RATED_CURRENT: [int(round(s.rated_current * 1000)), 4, True],
            c.OBJ_RATED_TORQUE: [int(round(s.rated_torque * 1000)), 4, True],
            c.OBJ_HEARTBEAT_TIME: [self.heartbeat_ms, 2, True],
            c.OBJ_ERROR_REGISTER: [0, 1, False],
            (0x1600, 0): [2, 1, True], (0x1600, 1): [c.RPDO1_MAP[0], 4, True],
            (0x1600, 2): [c.RPDO1_MAP[1], 4, True],
            (0x1A00, 0): [3, 1, True], (0x1A00, 1): [c.TPDO1_MAP[0], 4, True],
            (0x1A00, 2): [c.TPDO1_MAP[1], 4, True], (0x1A00, 3): [c.TPDO1_MAP[2], 4, True],
            (0x1400, 2): [1, 1, True], (0x1800, 2): [1, 1, True],  # transmission type: each SYNC
        }
        for key, entry in (self.eds or {}).items():
            self.objects.setdefault(key, [entry.default, entry.size,
                                          entry.access not in ("ro", "const")])

    # ------------------------------------------------------------------ frames from the host
    def handle(self, arb_id: int, data: bytes) -> list[tuple[int, bytes]]:
        """Replies to one host frame (SDO answers immediately; PDOs are latched)."""
        if arb_id == c.NMT:
            return self._nmt(data)
        if arb_id == c.SDO_RX + self.node:
            return self._sdo(data)
        if arb_id == c.RPDO1 + self.node and self.nmt_state == c.HB_OPERATIONAL:
            decoded = c.decode_rpdo1(data)
            if decoded is not None:
                self._controlword(decoded[0])
                self.target_permille = decoded[1]
        return []

    def _nmt(self, data: bytes) -> list[tuple[int, bytes]]:
        decoded = c.decode_nmt(data)
        if decoded is None or decoded[1] not in (0, self.node):
            return []
        cmd = decoded[0]
        if cmd == c.NMT_START:
            self.nmt_state = c.HB_OPERATIONAL
        elif cmd == c.NMT_STOP:
            self.nmt_state = c.HB_STOPPED
        elif cmd == c.NMT_PRE_OPERATIONAL:
            self.nmt_state = c.HB_PRE_OPERATIONAL
        elif cmd in (c.NMT_RESET_NODE, c.NMT_RESET_COMM):
            self.nmt_state = c.HB_PRE_OPERATIONAL
            self.state = c.SWITCH_ON_DISABLED
            return [c.heartbeat(self.node, c.HB_BOOTUP)]
        return []

    def _sdo(self, data: bytes) -> list[tuple[int, bytes]]:
        decoded = c.decode_sdo(data)
        if decoded is None:
            return []
        cmd, index, sub, payload = decoded
        key = (index, sub)
        if key == c.OBJ_STATUSWORD and cmd == c.SDO_UPLOAD_REQUEST:
            return [c.sdo_upload_response(self.node, index, sub, self.statusword(), 2)]
        entry = self.objects.get(key)
        if entry is None:
            return [c.sdo_abort(self.node, index, sub, c.ABORT_NO_OBJECT)]
        if cmd == c.SDO_UPLOAD_REQUEST:
            return [c.sdo_upload_response(self.node, index, sub, entry[0], entry[1])]
        size = {v: k for k, v in c.SDO_DOWNLOAD.items()}.get(cmd)
        if size is None:
            return [c.sdo_abort(self.node, index, sub, c.ABORT_COMMAND)]
        if not entry[2]:
            return [c.sdo_abort(self.node, index, sub, c.ABORT_READ_ONLY)]
        entry[0] = int.from_bytes(payload[:size], "little")
        if key == c.OBJ_MODE:
            self.mode = entry[0]
            self.objects[c.OBJ_MODE_DISPLAY][0] = entry[0]
        elif key == c.OBJ_HEARTBEAT_TIME:
            self.heartbeat_ms = entry[0]
        self.mapping_ok = (
            tuple(self.objects[(0x1600, i)][0] for i in (1, 2)) == c.RPDO1_MAP
            and tuple(self.objects[(0x1A00, i)][0] for i in (1, 2, 3)) == c.TPDO1_MAP
        )
        return [c.sdo_response_ok(self.node, index, sub)]

    def _controlword(self, cw: int) -> None:
        """The CiA 402 power state machine (reference notes §1.1)."""
        rising_reset = cw & 0x80 and not self.controlword & 0x80
        self.controlword = cw
        s = self.state
        if s == c.FAULT:
            if rising_reset:
                self.state = c.SWITCH_ON_DISABLED
            return
        if cw & 0x02 == 0:  # disable voltage
            self.state = c.SWITCH_ON_DISABLED
        elif cw & 0x06 == 0x02:  # quick stop
            self.state = c.QUICK_STOP_ACTIVE if s == c.OPERATION_ENABLED else c.SWITCH_ON_DISABLED
        elif cw & 0x87 == 0x06:  # shutdown
            if s in (c.SWITCH_ON_DISABLED, c.SWITCHED_ON, c.OPERATION_ENABLED):
                self.state = c.READY_TO_SWITCH_ON
        elif cw & 0x8F == 0x07:  # switch on / disable operation
            if s in (c.READY_TO_SWITCH_ON, c.OPERATION_ENABLED):
                self.state = c.SWITCHED_ON
        elif cw & 0x8F == 0x0F and s in (c.SWITCHED_ON, c.READY_TO_SWITCH_ON):
            self.state = c.OPERATION_ENABLED if self.mode == c.MODE_CST else c.SWITCHED_ON

    # ------------------------------------------------------------------ cyclic behaviour
    def statusword(self) -> int:
        return c.STATUSWORD[self.state]

    @property
    def enabled(self) -> bool:
        return self.state == c.OPERATION_ENABLED and self.nmt_state == c.HB_OPERATIONAL

    def on_sync(self) -> float:
        """Apply the latched target: the current command (A) for the plant."""
        self.applied_permille = self.target_permille if self.enabled else 0
        s = self.scale
        current = self.applied_permille / 1000.0 * s.rated_torque / s.torque_constant
        return max(-s.peak_current, min(s.peak_current, current))

    def tpdo(self, rotor_angle: float, current: float) -> tuple[int, bytes] | None:
        """TPDO1 after the SYNC's physics step (only in NMT operational)."""
        if self.nmt_state != c.HB_OPERATIONAL:
            return None
        counts = int(math.floor(rotor_angle / (2 * math.pi) * self.scale.counts_per_rev + 0.5))
        permille = int(round(current / self.scale.rated_current * 1000.0))
        return c.tpdo1(self.node, self.statusword(), counts, permille)

    def fault(self, code: int, register: int) -> tuple[int, bytes]:
        """Enter FAULT (power stage off) and return the EMCY frame."""
        self.state = c.FAULT
        self.objects[c.OBJ_ERROR_REGISTER][0] = register
        return c.emcy(self.node, code, register)


@dataclass
class EmulatedMitMotor:
    """An MIT-mode actuator (mini-cheetah / CubeMars AK firmware), frame for frame.

    ``FF…FC`` enters motor mode, ``FF…FD`` exits, ``FF…FE`` zeroes the position. A command
    latches (p_des, v_des, kp, kd, t_ff); the firmware's law τ = kp(p_des − p) + kd(v_des − v)
    + t_ff is evaluated at each physics period (the real firmware runs it at tens of kHz) and
    turned into a current for the plant. Every command is answered at once with the state
    [id, p, v, τ] (8 bytes, AK style, error byte 0).
    """

    node: int
    scale: DriveScale
    ranges: object  # exo_rt.bus.mit.MitRanges
    enabled: bool = False
    zero: float = 0.0
    command: tuple = (0.0, 0.0, 0.0, 0.0, 0.0)
    heartbeat_ms: int = 0
    nmt_state: int = 0
    state: str = "MIT"

    def handle(self, arb_id: int, data: bytes, rotor: float = 0.0, omega: float = 0.0,
               current: float = 0.0) -> list[tuple[int, bytes]]:
        from exo_rt.bus import mit

        if arb_id != self.node:
            return []
        if data == mit.ENTER:
            self.enabled = True
        elif data == mit.EXIT:
            self.enabled = False
            self.command = (0.0, 0.0, 0.0, 0.0, 0.0)
        elif data == mit.ZERO:
            self.zero = rotor
        else:
            cmd = mit.unpack_command(data, self.ranges)
            if cmd is None:
                return []
            self.command = cmd
        torque = current * self.scale.torque_constant
        span = 2.0 * self.ranges.p_max  # the firmware's position wraps at ±p_max
        p = (rotor - self.zero + self.ranges.p_max) % span - self.ranges.p_max
        return [(0x000, mit.pack_reply(self.node, p, omega, torque, self.ranges))]

    def current_for(self, rotor: float, omega: float) -> float:
        """The firmware's law at the plant's state → current command (A)."""
        if not self.enabled:
            return 0.0
        p_des, v_des, kp, kd, t_ff = self.command
        tau = kp * (p_des - (rotor - self.zero)) + kd * (v_des - omega) + t_ff
        i = tau / self.scale.torque_constant
        return max(-self.scale.peak_current, min(self.scale.peak_current, i))
