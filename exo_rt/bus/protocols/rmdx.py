"""MyActuator RMD-X actuators (motor-motion protocol V3, CAN 2.0, 1 Mbit/s) as a registered
drive protocol: the codec, the host side, the emulated actuator and the bus-file keys.

Frames (MyActuator, "RMD-X motor motion control command protocol", V3 series, 2022–2023):
every command is 8 bytes on 0x140 + id (id 1…32), byte 0 the command, little-endian fields;
the actuator answers on 0x240 + id with the same command byte.

- A1h torque closed loop: iq i16 at bytes 4–5 (0.01 A); reply: temperature i8 (°C), iq i16
  (0.01 A), speed i16 (1 °/s), angle i16 (1°, output shaft);
- 9Ch motor status 2: reply as A1h's;
- 9Ah motor status 1 and error flags: reply temperature i8, brake u8 (byte 3), voltage u16
  (0.1 V, bytes 4–5), error flags u16 (bytes 6–7);
- 92h multi-turn angle: reply i32 at bytes 4–7 (0.01°, from the zero stored in ROM);
- 80h motor shutdown (output off): echoed; 76h system reset: no reply (it restarts);
- B3h communication interruption protection time: u32 at bytes 4–7 (ms; 0: off), echoed.

Error flags (9Ah): 0002h stall, 0004h low voltage, 0008h over-voltage, 0010h over-current,
0040h power overrun, 0100h speeding, 1000h over-temperature, 2000h encoder calibration.

Absolute angle: from the actuator's output encoder, as the protocol gives it — the
multi-turn angle from the zero commissioned in the actuator's ROM (MyActuator's tool, or
command 64h with the leg in its zero posture). Bring-up reads it (92h, 0.01°); the cycle's
replies carry it in whole degrees (A1h), which the host unwraps from the 92h reading and
refines between the degree's steps with the reply's speed (1 °/s) integrated since the last
reply, held within ±0.5° of the reported degree (at 100:1 a whole degree at the output shaft
is 0.01° at the joint, but its steps alone would make a velocity estimate jump by 0.17 rad/s
per step at 1 kHz). The joint angle is ``joint_at_zero + angle / multiplier``
(``joint_at_zero``: the joint's angle where the actuator's zero is, rad; default 0).

Drive-side timeout: B3h, written at bring-up (``comm_timeout_ms``, default 20 ms): an
actuator that hears no command for that long cuts its output (and closes its brake where it
has one) — the protocol's own answer to a silent controller (docs/safety.md).

Faults: the A1h reply has no error field; the host polls 9Ah for one actuator per cycle
(``status_poll``, default on), so that an actuator that stopped itself is a drive fault
within n cycles for n actuators on the bus; the load check counts that poll.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from exo_rt.bus.drives import ENABLE_CYCLES
from exo_rt.bus.protocols import Protocol
from exo_rt.bus.protocols.base import EmulatedDevice, ReplyDrives
from exo_rt.errors import ConfigError

REQUEST, REPLY = 0x140, 0x240
TORQUE, STATUS1, STATUS2, MULTI_TURN = 0xA1, 0x9A, 0x9C, 0x92
SHUTDOWN, STOP, TIMEOUT, RESET = 0x80, 0x81, 0xB3, 0x76
FEEDBACK = (TORQUE, STATUS2, 0xA2, 0xA4)  # replies in the A1h layout
MAX_ID = 32
ERRORS = {0x0002: "stall", 0x0004: "low voltage", 0x0008: "over-voltage",
          0x0010: "over-current", 0x0040: "power overrun", 0x0100: "speeding",
          0x1000: "over-temperature", 0x2000: "encoder calibration"}
_FB = struct.Struct("<BbhhH")  # command, temperature, iq, speed, angle (as u16, signed below)
_ST = struct.Struct("<BbBBHH")  # command, temperature, -, brake, voltage, error


# ---------------------------------------------------------------------- codec (never raises)
def request(cmd: int, value: int = 0, fmt: str = "") -> bytes:
    """An 8-byte request: the command byte, then ``value`` at bytes 4–7 (``fmt`` 'h' i16 at
    4–5, 'i'/'I' 32 bits at 4–7) or zeros."""
    if fmt == "h":
        return struct.pack("<B3xh2x", cmd, value)
    if fmt in ("i", "I"):
        return struct.pack(f"<B3x{fmt}", cmd, value)
    return bytes((cmd, 0, 0, 0, 0, 0, 0, 0))


def torque_command(current_A: float) -> bytes:
    """A1h with iq in 0.01 A, clamped to the i16 range (NaN → 0)."""
    if current_A != current_A:
        current_A = 0.0
    iq = int(round(max(-327.67, min(327.67, current_A)) * 100.0))
    return request(TORQUE, iq, "h")


def timeout_command(ms: int) -> bytes:
    return request(TIMEOUT, max(0, min(0xFFFFFFFF, int(ms))), "I")


def decode_feedback(data: bytes) -> tuple[int, int, float, float, int] | None:
    """(command, temperature °C, iq A, speed °/s, angle ° as u16) of an A1h/9Ch reply."""
    if len(data) != 8 or data[0] not in FEEDBACK:
        return None
    cmd, temp, iq, speed, angle = _FB.unpack(data)
    return cmd, temp, iq / 100.0, float(speed), angle


def decode_status1(data: bytes) -> tuple[int, int, float, int] | None:
    """(temperature °C, brake released, voltage V, error flags) of a 9Ah reply."""
    if len(data) != 8 or data[0] != STATUS1:
        return None
    _, temp, _, brake, volts, error = _ST.unpack(data)
    return temp, brake, volts / 10.0, error


def decode_multi_turn(data: bytes) -> float | None:
    """The multi-turn angle (°) of a 92h reply."""
    if len(data) != 8 or data[0] != MULTI_TURN:
        return None
    return struct.unpack_from("<i", data, 4)[0] / 100.0


def feedback(cmd: int, temperature: int, current_A: float, speed_dps: float,
             angle_deg: float) -> bytes:
    """An A1h/9Ch reply (the actuator's side): the angle in whole degrees, wrapping as an
    i16; current and speed clamped to their fields."""
    iq = int(round(max(-327.68, min(327.67, current_A)) * 100.0))
    speed = int(round(max(-32768.0, min(32767.0, speed_dps))))
    angle = int(math.floor(angle_deg + 0.5)) & 0xFFFF
    return _FB.pack(cmd, max(-128, min(127, temperature)), iq, speed, angle)


def status1(temperature: int, voltage_V: float, error: int) -> bytes:
    return _ST.pack(STATUS1, max(-128, min(127, temperature)), 0, 1,
                    max(0, min(0xFFFF, int(round(voltage_V * 10)))), error & 0xFFFF)


def multi_turn(angle_deg: float) -> bytes:
    v = max(-2**31, min(2**31 - 1, int(round(angle_deg * 100.0))))
    return struct.pack("<B3xi", MULTI_TURN, v)


# ---------------------------------------------------------------------- registry entry
class RmdOptions:
    """Bus options: the actuators' communication timeout (ms, B3h; 0: off) and whether the
    host polls 9Ah (one actuator per cycle)."""

    def __init__(self, comm_timeout_ms: int = 20, status_poll: bool = True) -> None:
        self.comm_timeout_ms = comm_timeout_ms
        self.status_poll = status_poll

    def __repr__(self) -> str:
        return f"RmdOptions(comm_timeout_ms={self.comm_timeout_ms}, status_poll={self.status_poll})"


class RmdX(Protocol):
    name = "rmdx"
    host = "exo_rt.bus.protocols.rmdx:RmdDrives"
    emulator = "exo_rt.bus.protocols.rmdx:EmulatedRmd"
    bus_keys = {"comm_timeout_ms": False, "status_poll": False}
    drive_keys = {"joint_at_zero": False}
    drive_timeout = "B3h communication interruption protection (comm_timeout_ms)"

    def parse_options(self, bus, item):
        opts = RmdOptions()
        node = bus.get("comm_timeout_ms")
        if node is not None:
            v = node.value
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 60000:
                raise ConfigError(f"comm_timeout_ms {v!r} is not a whole number of ms in "
                                  "0…60000", node.where(),
                                  "e.g. comm_timeout_ms: 20 (0 switches the actuators' "
                                  "timeout off — docs/safety.md)")
            opts.comm_timeout_ms = v
        node = bus.get("status_poll")
        if node is not None:
            if not isinstance(node.value, bool):
                raise ConfigError(f"status_poll {node.value!r} is not true or false",
                                  node.where(), "write true or false")
            opts.status_poll = node.value
        return opts

    def parse_drive(self, bus, drive, node):
        if node > MAX_ID:
            raise ConfigError(f"RMD-X id {node} is out of 1…{MAX_ID}", drive["node"].where(),
                              "set the actuator's id 1…32 (MyActuator's tool)")
        z = drive.get("joint_at_zero")
        if z is None:
            return None, None, 0.0
        if isinstance(z.value, bool) or not isinstance(z.value, (int, float)) \
                or not math.isfinite(z.value) or abs(z.value) > 2 * math.pi:
            raise ConfigError(f"joint_at_zero {z.value!r} is not a joint angle in rad",
                              z.where(), "the joint's angle at the actuator's zero, e.g. 0.0")
        return None, None, float(z.value)

    def cycle_frames(self, config) -> list[int]:
        """The lockstep tick, per actuator its A1h command and reply, and the 9Ah poll."""
        poll = [8, 8] if config.options is None or config.options.status_poll else []
        return [0] + [8, 8] * len(config.drives) + poll

    def log_decoder(self, config, mech):
        return RmdLogDecoder(config, mech)


class RmdLogDecoder:
    """A1h requests as the commands; the replies' angle, unwrapped from bring-up's 92h
    reading, as the measurements; output on from an A1h until 80h."""

    def __init__(self, config, mech) -> None:
        tr = {t.joint: t for t in mech.transmissions}
        self.drives = {d.node: (mech.joint_names.index(d.joint),
                                math.pi / 180.0 / tr[d.joint].multiplier,
                                d.options if isinstance(d.options, float) else 0.0)
                       for d in config.drives}
        self.base = dict.fromkeys(self.drives, 0)
        self.last: dict[int, int | None] = dict.fromkeys(self.drives)

    def frame(self, arb: int, data: bytes, cmd, meas, on) -> None:
        if len(data) != 8:
            return
        if REQUEST < arb <= REQUEST + MAX_ID and arb - REQUEST in self.drives:
            j = self.drives[arb - REQUEST][0]
            if data[0] == TORQUE:
                cmd[j] = struct.unpack_from("<h", data, 4)[0] / 100.0
                on[j] = True
            elif data[0] == SHUTDOWN:
                on[j] = False
        elif REPLY < arb <= REPLY + MAX_ID and arb - REPLY in self.drives:
            node = arb - REPLY
            j, rad, zero = self.drives[node]
            if data[0] == MULTI_TURN:
                whole = int(math.floor(decode_multi_turn(data) + 0.5))
                self.base[node], self.last[node] = whole - (whole & 0xFFFF), whole & 0xFFFF
            elif data[0] in FEEDBACK:
                angle = decode_feedback(data)[4]
                last = self.last[node]
                if last is not None and abs(angle - last) > 32768:
                    self.base[node] += 65536 if angle < last else -65536
                self.last[node] = angle
                meas[j] = zero + (self.base[node] + angle) * rad


# ---------------------------------------------------------------------- host side
class RmdDrives(ReplyDrives):
    """One bus of RMD-X actuators in torque (A1h). Bring-up: output off (80h), the
    communication timeout written (B3h) and its echo checked, the absolute angle (92h) and
    the error flags (9Ah) read. Enabled by the first torque command; disabled by 80h, after
    which 9Ch keeps the state coming."""

    def __init__(self, bus, config, mech, sdo_timeout: float = 0.5, period: float = 1e-3):
        super().__init__(bus, config, mech, sdo_timeout, period)
        self.options = config.options if isinstance(config.options, RmdOptions) \
            else RmdOptions()
        self.joint_at_zero = np.array([d.options if isinstance(d.options, float) else 0.0
                                       for d in config.drives])
        self._ids = [int(x) for x in self.nodes]
        self._req = [REQUEST + i for i in self._ids]
        self._rad = [math.pi / 180.0 / float(m) for m in self.multiplier]
        self._zero = [float(x) for x in self.joint_at_zero]
        self._base = [0] * self.n  # angle = base + the u16 field (°): unwrapping the field
        self._last = [None] * self.n  # the last angle field (u16)
        self._fine = [math.nan] * self.n  # the last angle (°) between whole degrees
        self.acked = np.zeros(self.n, dtype=np.int64)  # the last echoed command byte
        self.absolute_deg = np.full(self.n, np.nan)  # 92h at bring-up
        self._shut = [False] * self.n
        self._poll = 0
        self._stat = request(STATUS2)
        self._status_req = request(STATUS1)

    def command_frame(self, k: int, current: float) -> tuple[int, bytes]:
        return self._req[k], torque_command(current)

    def idle_frame(self, k: int) -> tuple[int, bytes]:
        if not self._shut[k]:  # once: output off; the state then comes from 9Ch
            self._shut[k] = True
            self.port.send(self._req[k], request(SHUTDOWN))
        return self._req[k], self._stat

    def extra_frames(self) -> None:
        if self.options.status_poll and self.n:
            k = self._poll % self.n
            self._poll += 1
            self.port.send(self._req[k], self._status_req)

    def decode(self, msg) -> int:
        arb = msg.arbitration_id
        if msg.is_extended_id or not REPLY < arb <= REPLY + MAX_ID:
            return -1
        k = self._slot.get(arb - REPLY, -2)
        if k < 0:
            return -1
        data = bytes(msg.data)
        if len(data) != 8:
            self.malformed(k)
            return k
        cmd = data[0]
        if cmd in FEEDBACK:
            _, temp, iq, speed, angle = decode_feedback(data)
            last = self._last[k]
            if last is not None and abs(angle - last) > 32768:  # the i16 field wrapped
                self._base[k] += 65536 if angle < last else -65536
            self._last[k] = angle
            self.temperature[k] = temp
            deg = float(self._base[k] + angle)  # whole degrees of the output shaft
            t, prev = msg.timestamp, self.rx_time[k]
            if prev > 0.0 and self._fine[k] == self._fine[k]:
                # within the whole degree the encoder reports, the speed (1 °/s) integrated
                # since the last reply: the angle between the degree's steps
                pred = self._fine[k] + speed * min(t - prev, 2.0 * self.period)
                deg = deg - 0.5 if pred < deg - 0.5 else deg + 0.5 if pred > deg + 0.5 else pred
            self._fine[k] = deg
            self.store(k, self._zero[k] + deg * self._rad[k], iq, t)
        elif cmd == STATUS1:
            temp, _brake, _volts, error = decode_status1(data)
            self.temperature[k] = temp
            self.status[k] = error
            if error and not self.error_code[k]:
                self.emcy_codes.append((self._ids[k], error))
            if error:
                self.error_code[k] = error
            self.acked[k] = cmd
        elif cmd == MULTI_TURN:
            self.absolute_deg[k] = decode_multi_turn(data)
            self.acked[k] = cmd
        else:
            self.acked[k] = cmd  # 80h, 81h, B3h … echoes
            if cmd == TIMEOUT:
                self.identity[k]["comm_timeout_ms"] = struct.unpack_from("<I", data, 4)[0]
        return k

    def error_name(self, code: int) -> str:
        return ", ".join(v for b, v in ERRORS.items() if code & b) or "unknown error"

    def protection(self) -> dict:
        """The communication timeout each actuator echoed at bring-up (B3h, ms)."""
        return {str(i): {"B3h_comm_timeout_ms": self.identity[k].get("comm_timeout_ms")}
                for k, i in enumerate(self._ids)}

    def _ask(self, cmd: int, payload: bytes, what: str) -> None:
        self.acked[:] = -1
        self.exchange([(r, payload) for r in self._req], what, lambda: self.acked == cmd)

    def configure(self) -> None:
        """Output off, the communication timeout written and checked, the absolute angle and
        the error flags read (a stopped actuator is named at enable)."""
        self._ask(SHUTDOWN, request(SHUTDOWN), "80h (motor shutdown)")
        ms = self.options.comm_timeout_ms
        self._ask(TIMEOUT, timeout_command(ms), "B3h (communication timeout)")
        for k in range(self.n):
            got = self.identity[k].get("comm_timeout_ms")
            self.identity[k].update(protocol="rmdx", id=self._ids[k])
            if got != ms:
                self.bringup_warnings.append(
                    f"actuator {self._ids[k]} echoed a communication timeout of {got} ms, "
                    f"not {ms} ms (B3h): check its firmware (V3 protocol)")
        self._ask(MULTI_TURN, request(MULTI_TURN), "92h (multi-turn angle)")
        self._ask(STATUS1, self._status_req, "9Ah (status 1)")
        for k in range(self.n):
            deg = float(self.absolute_deg[k])
            whole = int(math.floor(deg + 0.5))
            # the cycle's i16 angle field, unwrapped from the absolute reading
            self._base[k] = whole - (whole & 0xFFFF)
            self._last[k] = whole & 0xFFFF
            self.position[k] = self._zero[k] + deg * self._rad[k]
            self.found[k] = {"error_code": int(self.error_code[k]),
                             "stopped": bool(self.error_code[k]), "angle_deg": deg}
        self.rx_time[:] = 0.0
        self._fine = [math.nan] * self.n

    def enable(self, max_cycles: int = ENABLE_CYCLES, reset_faults: bool = False) -> int:
        """The first zero-torque command runs each actuator (a stopped one needs the
        operator's ``reset_faults``)."""
        stopped = [k for k in range(self.n) if self.error_code[k]]
        if stopped and not reset_faults:
            raise self._stopped_error(stopped)
        if reset_faults:
            self.fault_reset()
            stuck = [k for k in range(self.n) if self.error_code[k]]
            if stuck:
                raise self._stopped_error(stuck, after_reset=True)
        self.exchange([(r, torque_command(0.0)) for r in self._req], "A1h (torque command)")
        self.enabled[:] = True
        self._disable = False
        self._shut = [False] * self.n
        return 1

    def fault_reset(self) -> None:
        """The operator's explicit reset: 80h (output off, which clears a latched error that
        has gone), then the error flags read again (9Ah)."""
        self._ask(SHUTDOWN, request(SHUTDOWN), "80h (motor shutdown)")
        self.error_code[:] = 0
        self._ask(STATUS1, self._status_req, "9Ah (status 1)")
        self.enabled[:] = False
        self._disable = False


# ---------------------------------------------------------------------- emulated actuator
class EmulatedRmd(EmulatedDevice):
    """An RMD-X actuator, frame for frame: A1h latches the current (applied at the next
    tick) and is answered after the period's physics, as are 9Ch and 9Ah; 80h, B3h and 92h are
    answered at once. Its own clock: no command for the B3h time cuts the output (the next
    A1h runs it again). An injected fault sets over-current (0010h) and cuts the output until
    80h or 76h."""

    def __init__(self, node: int, scale, period: float = 1e-3) -> None:
        self.node = node
        self.scale = scale
        self.period = period
        self.running = False
        self.error = 0
        self.iq = 0.0
        self.zero = 0.0  # the rotor angle (rad) of the zero stored in ROM
        self.timeout_ms = 0
        self.timed_out = False
        self.clock = 0.0
        self._last_cmd = 0.0
        self._heard = False
        self._pending: list[int] = []
        self._rx = REQUEST + node
        self._tx = REPLY + node

    @classmethod
    def from_config(cls, drive, bus, period: float) -> EmulatedRmd:
        return cls(drive.node, drive.scale, period)

    @property
    def power_on(self) -> bool:
        return self.running and not self.error

    enabled = power_on

    def _deg(self, rotor: float) -> float:
        return math.degrees(rotor - self.zero)

    def handle(self, arb_id: int, data: bytes) -> list[tuple[int, bytes]]:
        if arb_id != self._rx or len(data) != 8:
            return []
        cmd = data[0]
        self._heard = True  # communication in this period (its clock stamps it at the tick)
        if cmd == TORQUE:
            if not self.error:
                self.running = True
                self.timed_out = False
                iq = struct.unpack_from("<h", data, 4)[0] / 100.0
                self.iq = max(-self.scale.peak_current, min(self.scale.peak_current, iq))
            self._pending.append(TORQUE)
        elif cmd in (STATUS1, STATUS2):
            self._pending.append(cmd)
        elif cmd in (SHUTDOWN, STOP):
            self.running = False
            self.iq = 0.0
            if cmd == SHUTDOWN:
                self.error = 0
            return [(self._tx, bytes((cmd, 0, 0, 0, 0, 0, 0, 0)))]
        elif cmd == TIMEOUT:
            self.timeout_ms = struct.unpack_from("<I", data, 4)[0]
            return [(self._tx, bytes(data))]
        elif cmd == MULTI_TURN:
            return [(self._tx, multi_turn(self._deg(self.plant()[0])))]
        elif cmd == RESET:
            self.running, self.iq, self.error = False, 0.0, 0
        return []

    def cyclic(self, arb_id: int, data: bytes) -> bool:
        return arb_id == self._rx and data[:1] in (b"\xa1", b"\x9a", b"\x9c")

    def current_command(self) -> float:
        return self.iq if self.power_on else 0.0

    def sync_frames(self, rotor: float, current: float) -> list[tuple[int, bytes]]:
        if not self._pending:
            return []
        out = []
        for cmd in self._pending:
            if cmd == STATUS1:
                out.append((self._tx, status1(35, 48.0, self.error)))
            else:
                speed = math.degrees(self.plant()[1])
                out.append((self._tx, feedback(cmd, 35, current, speed, self._deg(rotor))))
        self._pending.clear()
        return out

    def tick(self, t: float) -> list[tuple[int, bytes]]:
        """Its own clock: the communication interruption protection (B3h)."""
        self.clock = t
        if self._heard:
            self._heard = False
            self._last_cmd = t
        if (self.timeout_ms and self.running
                and t - self._last_cmd >= self.timeout_ms * 1e-3 - 1e-9):
            self.running = False
            self.iq = 0.0
            self.timed_out = True
        return []

    def inject_fault(self) -> list[tuple[int, bytes]]:
        self.error = 0x0010
        return []
