"""MIT-mode actuators (mini-cheetah firmware; CubeMars/T-motor AK in MIT mode) as a
registered drive protocol: the host side, the emulated motor and the bus-file keys.

Frames (:mod:`exo_rt.bus.mit`): an 8-byte command on the motor's id — p (16 bits), v, kp, kd,
t_ff (12 bits each), big-endian bit packing, each mapped linearly onto the firmware's ranges
(``mit_ranges``) — answered at once on the master's id (0x000) with [id, p, v, τ,
temperature, error]; ``FF…FC`` enters motor mode, ``FF…FD`` exits it, ``FF…FE`` makes the
present position the zero. The firmware answers every frame, in either mode. exo-rt drives
the motors in torque: kp = kd = 0, t_ff = k_M·i.

Absolute angle: the reported position is the motor's output angle from its last zero,
wrapping at ±p_max. Bring-up is therefore the homing step: with the leg in its home posture
(each drive's ``home``, the joint angle in rad; default 0, the leg hanging straight) it exits
motor mode and zeroes each motor; from then on the host unwraps the position and the joint
angle is ``home + p / multiplier``.

Drive-side timeout: the protocol has none (no command sets one; a motor keeps its last
torque when the controller goes silent) — the board's watchdog and motor-power relay are
the only stop (docs/safety.md). Error byte (AK firmware): 1 over-temperature, 2 over-current,
3 over-voltage, 4 under-voltage, 5 encoder, 6 phase-current imbalance.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.bus import mit
from exo_rt.bus.drives import ENABLE_CYCLES
from exo_rt.bus.protocols import Protocol
from exo_rt.bus.protocols.base import EmulatedDevice, ReplyDrives
from exo_rt.errors import ConfigError

REPLY_ID = 0x000  # the firmware's master id: where the replies go
ERRORS = {1: "over-temperature", 2: "over-current", 3: "over-voltage", 4: "under-voltage",
          5: "encoder fault", 6: "phase-current imbalance"}


class Mit(Protocol):
    name = "mit"
    host = "exo_rt.bus.protocols.mit:MitDrives"
    emulator = "exo_rt.bus.protocols.mit:EmulatedMitMotor"
    bus_keys = {"mit_ranges": False}
    drive_keys = {"home": False}
    drive_timeout = "none in the protocol (docs/safety.md)"

    def parse_options(self, bus, item):
        from exo_rt.bus.config import mit_ranges

        return mit_ranges(bus)

    def parse_drive(self, bus, drive, node):
        home = drive.get("home")
        if home is None:
            return None, None, 0.0
        if not isinstance(home.value, (int, float)) or isinstance(home.value, bool) \
                or not math.isfinite(home.value) or abs(home.value) > 2 * math.pi:
            raise ConfigError(f"home {home.value!r} is not a joint angle in rad", home.where(),
                              "the joint's angle in the home posture, e.g. home: 0.0")
        return None, None, float(home.value)

    def cycle_frames(self, config) -> list[int]:
        """The lockstep tick, then per motor an 8-byte command and its 8-byte reply."""
        return [0] + [8, 8] * len(config.drives)

    def log_decoder(self, config, mech):
        return MitLogDecoder(config, mech)


class MitLogDecoder:
    """Commands' t_ff as the current, replies' unwrapped position from the last zero frame
    (FF…FE) as the joint angle, ENTER/EXIT as the power stage."""

    def __init__(self, config, mech) -> None:
        tr = {t.joint: t for t in mech.transmissions}
        self.ranges = config.mit_ranges or mit.MitRanges()
        self.drives = {d.node: (mech.joint_names.index(d.joint), d.scale.torque_constant,
                                tr[d.joint].multiplier,
                                d.options if isinstance(d.options, float) else 0.0)
                       for d in config.drives}
        self.raw = {n: math.nan for n in self.drives}
        self.turns = dict.fromkeys(self.drives, 0.0)

    def frame(self, arb: int, data: bytes, cmd, meas, on) -> None:
        if arb in self.drives:
            j, kt, _, _ = self.drives[arb]
            if data == mit.ENTER:
                on[j] = True
            elif data == mit.EXIT:
                on[j] = False
            elif data == mit.ZERO:
                self.raw[arb], self.turns[arb] = math.nan, 0.0
            else:
                c = mit.unpack_command(data, self.ranges)
                if c is not None:
                    cmd[j] = c[4] / kt
        elif arb == REPLY_ID:
            r = mit.unpack_reply(data, self.ranges)
            if r is None or r[0] not in self.drives:
                return
            j, _, mult, home = self.drives[r[0]]
            span, raw = 2.0 * self.ranges.p_max, self.raw[r[0]]
            if raw == raw and abs(r[1] - raw) > 0.5 * span:
                self.turns[r[0]] -= math.copysign(span, r[1] - raw)
            self.raw[r[0]] = r[1]
            meas[j] = home + (r[1] + self.turns[r[0]]) / mult


class MitDrives(ReplyDrives):
    """One bus of MIT-mode motors in torque (kp = kd = 0, t_ff = k_M·i): homing at bring-up,
    ENTER to enable, EXIT to disable (and as the frame a disabled motor gets each cycle, so
    its state keeps coming), the position unwrapped into a continuous joint angle."""

    def __init__(self, bus, config, mech, sdo_timeout: float = 0.5, period: float = 1e-3):
        super().__init__(bus, config, mech, sdo_timeout, period)
        self.ranges = config.mit_ranges or mit.MitRanges()
        self.home = np.array([d.options if isinstance(d.options, float) else 0.0
                              for d in config.drives])
        self._span = 2.0 * self.ranges.p_max
        self._raw = [math.nan] * self.n
        self._turns = [0.0] * self.n
        self._kt = [float(x) for x in self.torque_constant]
        self._mult = [float(x) for x in self.multiplier]
        self._home = [float(x) for x in self.home]
        self._ids = [int(x) for x in self.nodes]

    def command_frame(self, k: int, current: float) -> tuple[int, bytes]:
        return self._ids[k], mit.pack_command(0.0, 0.0, 0.0, 0.0, current * self._kt[k],
                                              self.ranges)

    def idle_frame(self, k: int) -> tuple[int, bytes]:
        return self._ids[k], mit.EXIT

    def decode(self, msg) -> int:
        if msg.arbitration_id != REPLY_ID or msg.is_extended_id:
            return -1
        data = bytes(msg.data)
        k = self._slot.get(data[0], -2) if data else -2
        reply = mit.unpack_reply(data, self.ranges)
        if reply is None:
            if k >= 0:
                self.malformed(k)
            return -2
        if k < 0:
            return -2
        _, p, _v, torque, err = reply
        raw = self._raw[k]
        if raw == raw and abs(p - raw) > 0.5 * self._span:  # wrapped at ±p_max
            self._turns[k] -= math.copysign(self._span, p - raw)
        self._raw[k] = p
        if err:
            if not self.error_code[k]:
                self.emcy_codes.append((self._ids[k], err))
            self.error_code[k] = err
        self.status[k] = err
        if len(data) == 8:
            self.temperature[k] = data[6]
        self.store(k, self._home[k] + (p + self._turns[k]) / self._mult[k],
                   torque / self._kt[k], msg.timestamp)
        return k

    def error_name(self, code: int) -> str:
        return ERRORS.get(code, "unknown error")

    def protection(self) -> dict:
        """None: the MIT protocol has no drive-side communication timeout."""
        return {str(i): {"communication_timeout": None} for i in self._ids}

    def configure(self) -> None:
        """The homing step: every motor out of motor mode (its error read), then zeroed where
        the leg stands (its home posture); the unwrapping starts from there."""
        self.exchange([(i, mit.EXIT) for i in self._ids], "the exit-motor-mode frame (FF…FD)")
        for k in range(self.n):
            self.found[k] = {"error_code": int(self.error_code[k]),
                             "stopped": bool(self.error_code[k])}
            self.identity[k] = {"protocol": "mit", "id": self._ids[k]}
        self._raw = [math.nan] * self.n
        self._turns = [0.0] * self.n
        self.rx_time[:] = 0.0
        self.exchange([(i, mit.ZERO) for i in self._ids], "the zero-position frame (FF…FE)")

    def enable(self, max_cycles: int = ENABLE_CYCLES, reset_faults: bool = False) -> int:
        """ENTER motor mode on every motor at zero torque (a motor that reported an error
        needs the operator's ``reset_faults``)."""
        stopped = [k for k in range(self.n) if self.error_code[k]]
        if stopped and not reset_faults:
            raise self._stopped_error(stopped)
        if reset_faults:
            self.fault_reset()
        self.exchange([(i, mit.ENTER) for i in self._ids], "the enter-motor-mode frame (FF…FC)")
        stuck = [k for k in range(self.n) if self.error_code[k]]
        if stuck:
            raise self._stopped_error(stuck, after_reset=reset_faults)
        self.enabled[:] = True
        self._disable = False
        return 1

    def fault_reset(self) -> None:
        """The operator's explicit reset: out of motor mode (which clears the firmware's
        error); the motors are enabled again by :meth:`enable`."""
        self.exchange([(i, mit.EXIT) for i in self._ids], "the exit-motor-mode frame (FF…FD)")
        self.error_code[:] = 0
        self.enabled[:] = False
        self._disable = False


class EmulatedMitMotor(EmulatedDevice):
    """An MIT-mode actuator, frame for frame. A command latches (p_des, v_des, kp, kd,
    t_ff); the firmware's law τ = kp(p_des − p) + kd(v_des − v) + t_ff is evaluated each
    physics period and turned into a current for the plant. Every frame is answered with the
    state after the period's physics (what the host reads next cycle, as from any family; a
    real motor answers at once). An injected fault sets the error byte (2, over-current) and
    cuts the output until EXIT."""

    def __init__(self, node: int, scale, ranges: mit.MitRanges) -> None:
        self.node = node
        self.scale = scale
        self.ranges = ranges
        self.enabled = False
        self.error = 0
        self.zero = 0.0
        self.command = (0.0, 0.0, 0.0, 0.0, 0.0)
        self._reply = False

    @classmethod
    def from_config(cls, drive, bus, period: float) -> EmulatedMitMotor:
        return cls(drive.node, drive.scale, bus.mit_ranges or mit.MitRanges())

    @property
    def power_on(self) -> bool:
        return self.enabled and not self.error

    def handle(self, arb_id: int, data: bytes) -> list[tuple[int, bytes]]:
        if arb_id != self.node or len(data) != 8:
            return []
        if data == mit.ENTER:
            self.enabled = True
        elif data == mit.EXIT:
            self.enabled = False
            self.error = 0
            self.command = (0.0, 0.0, 0.0, 0.0, 0.0)
        elif data == mit.ZERO:
            self.zero = self.plant()[0]
        else:
            cmd = mit.unpack_command(data, self.ranges)
            if cmd is None:
                return []
            if self.enabled:
                self.command = cmd
        self._reply = True  # answered with the state after the period's physics
        return []

    def cyclic(self, arb_id: int, data: bytes) -> bool:
        return arb_id == self.node and data not in (mit.ENTER, mit.EXIT, mit.ZERO)

    def current_command(self) -> float:
        """The firmware's law at the plant's state → current command (A)."""
        if not self.power_on:
            return 0.0
        rotor, omega, _ = self.plant()
        p_des, v_des, kp, kd, t_ff = self.command
        tau = kp * (p_des - (rotor - self.zero)) + kd * (v_des - omega) + t_ff
        i = tau / self.scale.torque_constant
        return max(-self.scale.peak_current, min(self.scale.peak_current, i))

    def sync_frames(self, rotor: float, current: float) -> list[tuple[int, bytes]]:
        if not self._reply:
            return []
        self._reply = False
        span = 2.0 * self.ranges.p_max
        p = (rotor - self.zero + self.ranges.p_max) % span - self.ranges.p_max
        omega = self.plant()[1]
        return [(REPLY_ID, mit.pack_reply(self.node, p, omega,
                                          current * self.scale.torque_constant, self.ranges,
                                          error=self.error))]

    def inject_fault(self) -> list[tuple[int, bytes]]:
        self.error = 2  # over-current
        return []
