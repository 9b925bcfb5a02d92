"""An emulated CiA 402 servo drive: a complete CANopen device, frame for frame.

Its object dictionary comes from an EDS — the drive's own (e.g. the shipped maxon EPOS4 or
Elmo Gold files under ``configs/buses/eds/``) or exo-rt's (:data:`exo_rt.bus.eds.DEFAULT_EDS`)
— and starts as the factory leaves it: every object at its ``DefaultValue``, the PDO mapping
the vendor's, and the motor data (rated current and torque) as commissioned from the bus
file. Any CANopen master can configure it:

- SDO server (the canopen library's, on that dictionary): expedited and segmented transfers
  (block transfers are refused with 05040001h, as CiA 301 allows a server without them),
  aborts with the standard codes — read-only 06010002h, write-only 06010001h, wrong length
  06070010h, value above/below the EDS limits 06090031h/06090032h, an invalid value
  06090030h, no object 06020000h, no sub-index 06090011h, an object that cannot be mapped
  06040041h, a mapping longer than 8 bytes 06040042h, a mapping changed while its PDO is
  valid 06010000h;
- PDO communication and mapping parameters honoured (0x1400/0x1600, 0x1800/0x1A00: COB-ID
  and its valid bit, transmission type, mapping): a remapped PDO is sent and parsed in its
  new layout. The layouts are precomputed when those objects are written, so that the
  per-SYNC work is one ``struct`` pack or unpack;
- NMT slave and heartbeat producer (0x1017), EMCY producer (0x1001 error register, 0x603F
  error code), the CiA 402 power state machine driven by the controlword (RPDO or SDO),
  cyclic synchronous torque (mode 10): the target torque is latched and applied at the next
  SYNC, the TPDO is sent after it.

Behind it the plant: the drive turns the latched target torque (‰ of its rated torque) into a
current command for the plant's current loop and reports the rotor's encoder counts and the
actual current in the units its mapping asks for.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

from exo_rt.bus import cia402 as c
from exo_rt.bus import pdo


@dataclass
class DriveScale:
    """Units of one drive: encoder counts per motor turn, rated current (A) and torque (N·m)."""

    counts_per_rev: int = 65536
    rated_current: float = 3.29
    rated_torque: float = 0.133  # N·m at the motor (0x6076 = 133 mN·m)
    torque_constant: float = 0.0404
    peak_current: float = 15.0


# SDO abort codes (CiA 301)
ABORT_UNSUPPORTED = 0x06010000
ABORT_VALUE = 0x06090030
ABORT_TOO_HIGH = 0x06090031
ABORT_TOO_LOW = 0x06090032
ABORT_NOT_MAPPABLE = 0x06040041
ABORT_PDO_LENGTH = 0x06040042
EMCY_PDO_LENGTH = 0x8210  # PDO not processed: length error
EMCY_PDO_TOO_LONG = 0x8220
PDO_INVALID = 0x80000000
COMM_RANGES = ((0x1400, 0x1600), (0x1800, 0x1A00))  # RPDO, TPDO communication parameters


class _Outbox:
    """What the canopen LocalNode takes for its network: it only sends, into a list."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes]] = []

    def send_message(self, can_id: int, data, remote: bool = False) -> None:
        self.frames.append((can_id, bytes(data)))

    def subscribe(self, *args, **kwargs) -> None:
        pass

    def unsubscribe(self, *args, **kwargs) -> None:
        pass


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
    saturation: tuple = (0, 0.0)  # (until period, current limit A): injected saturation
    eds: str | Path | None = None  # the EDS of its object dictionary (default: exo-rt's own)
    profile: pdo.DriveProfile | None = None  # vendor objects' meaning and the motor data
    error_register: int = 0
    error_code: int = 0
    sync_period: float = 1e-3  # s between SYNCs (for the velocity actual value)
    local: object = field(default=None, repr=False)  # the canopen LocalNode

    def __post_init__(self) -> None:
        import canopen

        from exo_rt.bus.eds import DEFAULT_EDS, load_od

        p = self.profile
        self.eds = str(p.eds if p is not None else (self.eds or DEFAULT_EDS))
        self.od = load_od(self.eds, self.node)
        self._kinds = p.kinds() if p is not None else {o: k for k, o in pdo.STANDARD.items()}
        self._motor = ((p.rated_current_object, 1e-3, self.scale.rated_current),
                       (p.rated_torque_object, p.torque_unit, self.scale.rated_torque)) \
            if p is not None else (((0x6075, 0), 1e-3, self.scale.rated_current),
                                   ((0x6076, 0), 1e-3, self.scale.rated_torque))
        self._outbox = _Outbox()
        self.local = canopen.LocalNode(self.node, self.od)
        self.local.associate_network(self._outbox)
        # exo-rt's world produces the heartbeats; the LocalNode's own timer thread stays off
        self.local._write_callbacks.remove(self.local.nmt.on_write)
        self.local.add_write_callback(self._on_write)
        self.local.add_read_callback(self._on_read)
        server = self.local.sdo

        def no_block_upload(data: bytes) -> None:  # refused, as CiA 301 allows (no block SDO)
            _, server._index, server._subindex = struct.unpack_from("<BHB", data)
            server.abort(0x05040001)

        server.block_upload = no_block_upload
        self._sdo_rx = c.SDO_RX + self.node
        self._counts = self._prev_counts = 0
        self._current = 0.0
        self._syncs = 0
        self._last_tx = b""
        self._factory = self._factory_data()
        self._restore(0x0000, 0xFFFF)

    # ------------------------------------------------------------------ object dictionary
    def _factory_data(self) -> dict[int, dict[int, bytes]]:
        """Every object as the factory leaves it (DefaultValue, else the file's value, else a
        plausible one), and the motor data as commissioned."""
        import canopen

        info = self.od.device_information
        fallback = {(0x1018, 1): info.vendor_number, (0x1018, 2): info.product_number,
                    (0x1018, 3): info.revision_number, (0x1018, 4): self.node,
                    (0x1008, 0): info.product_name or "CiA 402 drive",
                    (0x1009, 0): "emulated", (0x100A, 0): "exo-rt"}
        data: dict[int, dict[int, bytes]] = {}
        for index in self.od:
            obj = self.od[index]
            members = ([obj] if isinstance(obj, canopen.objectdictionary.ODVariable)
                       else [obj.subindices[s] for s in sorted(obj.subindices)])
            for var in members:
                value = var.default if var.default is not None else var.value
                if value is None:
                    value = fallback.get((index, var.subindex))
                if value is None and var.subindex == 0 and _is_map(index):
                    value = 0
                    for s in range(1, 65):
                        entry = obj.subindices.get(s)
                        if entry is None or not (entry.default or entry.value):
                            break
                        value = s
                if value is None and var.data_type not in (0x9, 0xA, 0xB, 0xF):
                    value = 0 if var.min is None or var.min <= 0 else var.min
                if value is None:
                    continue
                try:
                    data.setdefault(index, {})[var.subindex] = var.encode_raw(value)
                except (ValueError, TypeError, struct.error):
                    continue
        for (index, sub), unit, si_value in self._motor:
            var = _var(self.od, index, sub)
            if var is not None:
                data.setdefault(index, {})[sub] = var.encode_raw(int(round(si_value / unit)))
        return data

    def _restore(self, first: int, last: int) -> None:
        """Objects first…last back to their factory values (NMT reset), layouts rebuilt."""
        store = self.local.data_store
        for index, subs in self._factory.items():
            if first <= index <= last:
                store[index] = dict(subs)
        self.heartbeat_ms = self._int(0x1017, 0) or 0
        self._units()
        self._rebuild()

    def _int(self, index: int, sub: int) -> int | None:
        """An integer object's stored value (None if it has none)."""
        var = _var(self.od, index, sub)
        raw = self.local.data_store.get(index, {}).get(sub)
        if var is None or raw is None:
            return None
        try:
            return int(var.decode_raw(raw))
        except (ValueError, TypeError, struct.error, Exception):
            return None

    def _units(self) -> None:
        """The drive's own scales, from its motor data objects (‰ conversions)."""
        (cur_obj, cur_unit, cur_si), (tor_obj, tor_unit, tor_si) = self._motor
        cur = self._int(*cur_obj)
        tor = self._int(*tor_obj)
        self.rated_current_A = cur * cur_unit if cur else cur_si
        self.rated_torque_Nm = tor * tor_unit if tor else tor_si

    def _on_read(self, index: int, subindex: int, od, **_) -> int | None:
        """Live values of the process objects (statusword, positions, currents …)."""
        kind = self._kinds.get((index, subindex))
        if kind is not None:
            return self._live(kind)
        if index == 0x6061 and subindex == 0:
            return self.mode
        if index == 0x1001 and subindex == 0:
            return self.error_register
        return None

    def _live(self, kind: str) -> int:
        if kind == pdo.STATUSWORD:
            return self.statusword()
        if kind == pdo.POSITION:
            return self._counts
        if kind == pdo.CURRENT:
            return _clamp(round(self._current / self.rated_current_A * 1000.0), -32768, 32767)
        if kind == pdo.CURRENT_MA:
            return round(self._current * 1000.0)
        if kind == pdo.TORQUE:
            return _clamp(round(self._current * self.scale.torque_constant
                                / self.rated_torque_Nm * 1000.0), -32768, 32767)
        if kind == pdo.VELOCITY:  # increments/s over the last SYNC period
            return round((self._counts - self._prev_counts) / self.sync_period)
        if kind == pdo.ERROR_CODE:
            return self.error_code
        if kind == pdo.CONTROLWORD:
            return self.controlword
        if kind == pdo.TARGET_TORQUE:
            return self.target_permille
        return 0  # digital inputs: none wired

    def _on_write(self, index: int, subindex: int, od, data: bytes, **_) -> None:
        """Checks (limits, PDO rules) before the LocalNode stores ``data``; side effects."""
        from canopen.objectdictionary.datatypes import INTEGER_TYPES
        from canopen.sdo import SdoAbortedError

        value = None
        if od.data_type in INTEGER_TYPES:
            value = int(od.decode_raw(data))
            if od.max is not None and value > od.max:
                raise SdoAbortedError(ABORT_TOO_HIGH)
            if od.min is not None and value < od.min:
                raise SdoAbortedError(ABORT_TOO_LOW)
        if value is not None and (_is_com(index) or _is_map(index)):
            self._check_pdo(index, subindex, value)
        self.local.data_store.setdefault(index, {})[subindex] = bytes(data)  # then act on it
        if _is_com(index) or _is_map(index):
            self._rebuild()
        elif index == 0x1017:
            self.heartbeat_ms = value
        elif index == 0x6060:
            self.mode = value
        elif index == 0x6040:
            self._controlword(value)
        elif index == 0x6071:
            self.target_permille = value
        if ((index, subindex) == self._motor[0][0] or (index, subindex) == self._motor[1][0]):
            self._units()

    def _check_pdo(self, index: int, sub: int, value: int) -> None:
        from canopen.sdo import SdoAbortedError

        rx = index < 0x1800
        com = index if _is_com(index) else index - 0x200
        cob = self._int(com, 1)
        valid = cob is not None and not cob & PDO_INVALID
        if _is_com(index):
            if sub == 1 and (value & 0x20000000 or valid and not value & PDO_INVALID
                             and (value ^ cob) & 0x7FF):
                raise SdoAbortedError(ABORT_VALUE)  # 29-bit id, or a new id while valid
            if sub == 2 and (241 <= value <= 251 or rx and 252 <= value <= 253):
                raise SdoAbortedError(ABORT_VALUE)  # reserved transmission types
            return
        if valid or sub != 0 and self._int(index, 0):
            raise SdoAbortedError(ABORT_UNSUPPORTED)  # disable the PDO and set sub0 = 0 first
        if sub != 0:
            if value and self._mappable(value, rx) is None:
                raise SdoAbortedError(ABORT_NOT_MAPPABLE)
            return
        bits = 0
        for s in range(1, value + 1):
            word = self._int(index, s) or 0
            entry = self._mappable(word, rx)
            if entry is None:
                raise SdoAbortedError(ABORT_NOT_MAPPABLE)
            bits += entry.bits
        if bits > pdo.MAX_BITS:
            raise SdoAbortedError(ABORT_PDO_LENGTH)

    def _mappable(self, word: int, rx: bool) -> pdo.MapEntry | None:
        """The mapping entry ``word`` if this drive can map it (None if not)."""
        from canopen.objectdictionary.datatypes import SIGNED_TYPES

        index, sub, bits = word >> 16, word >> 8 & 0xFF, word & 0xFF
        var = _var(self.od, index, sub)
        if var is None or not var.pdo_mappable or bits != len(var):
            return None
        if rx and not var.writable or not rx and not var.readable:
            return None
        signed = var.data_type in SIGNED_TYPES
        if pdo.struct_code(bits, signed) is None:
            return None
        return pdo.MapEntry(index, sub, bits, signed, self._kinds.get((index, sub), ""))

    # ------------------------------------------------------------------ PDO layouts
    def _rebuild(self) -> None:
        """The RPDO1/TPDO1 layouts from 0x1400/0x1600 and 0x1800/0x1A00 (after each write)."""
        self._rx_cob, self._rx, self._rx_fields = self._layout(0x1400, True)
        self._tx_cob, self._tx, self._tx_fields = self._layout(0x1800, False)
        # the per-SYNC fast paths: controlword and target torque found once; the default TPDO
        rx_kinds = [f[0] for f in self._rx_fields]
        self._rx_cw = rx_kinds.index(pdo.CONTROLWORD) if pdo.CONTROLWORD in rx_kinds else -1
        self._rx_t = rx_kinds.index(pdo.TARGET_TORQUE) if pdo.TARGET_TORQUE in rx_kinds else -1
        self._rx_t_limits = self._rx_fields[self._rx_t][1:3] if self._rx_t >= 0 else (0, 0)
        self._rx_other = tuple((i, f[3], f[4]) for i, f in enumerate(self._rx_fields)
                               if f[0] not in (pdo.CONTROLWORD, pdo.TARGET_TORQUE))
        self._tx_default = self._tx is not None and self._tx.words() == c.TPDO1_MAP
        self._tx_type = self._int(0x1800, 2)
        self._tx_type = 255 if self._tx_type is None else self._tx_type
        self._syncs = 0
        self._last_tx = b""

    def _layout(self, com: int, rx: bool):
        cob = self._int(com, 1)
        count = self._int(com + 0x200, 0) or 0
        entries = []
        for s in range(1, count + 1):
            entry = self._mappable(self._int(com + 0x200, s) or 0, rx)
            if entry is None:
                return -1, None, ()
            entries.append(entry)
        if cob is None or cob & PDO_INVALID or not entries:
            return -1, None, ()
        layout = pdo.Layout(tuple(entries))
        fields = []
        for e in entries:  # a received value is held to the object's limits in the EDS
            var = _var(self.od, e.index, e.sub)
            lo = max(e.low, var.min) if rx and var.min is not None else e.low
            hi = min(e.high, var.max) if rx and var.max is not None else e.high
            fields.append((e.kind, lo, hi, e.index, e.sub))
        return cob & 0x7FF, layout, tuple(fields)

    # ------------------------------------------------------------------ frames from the host
    def handle(self, arb_id: int, data: bytes) -> list[tuple[int, bytes]]:
        """Replies to one host frame (SDO answers immediately; PDOs are latched)."""
        if arb_id == self._rx_cob:
            return self._rpdo(data) if self.nmt_state == c.HB_OPERATIONAL else []
        if arb_id == c.NMT:
            return self._nmt(data)
        if arb_id == self._sdo_rx:
            if len(data) != 8 or self.nmt_state == c.HB_STOPPED:
                return []
            out = self._outbox.frames
            self.local.sdo.on_request(arb_id, bytes(data), 0.0)
            self._outbox.frames = []
            return out
        return []

    def _rpdo(self, data: bytes) -> list[tuple[int, bytes]]:
        layout = self._rx
        if len(data) < layout.size:
            return [c.emcy(self.node, EMCY_PDO_LENGTH, c.ERRREG_COMMUNICATION)]
        values = layout.struct.unpack_from(data)
        if self._rx_cw >= 0:
            self._controlword(values[self._rx_cw])
        if self._rx_t >= 0:
            v = values[self._rx_t]
            lo, hi = self._rx_t_limits
            self.target_permille = lo if v < lo else hi if v > hi else v
        for i, index, sub in self._rx_other:  # any other mapped object: into the dictionary
            self.local.data_store.setdefault(index, {})[sub] = \
                _var(self.od, index, sub).encode_raw(values[i])
        if len(data) > layout.size:
            return [c.emcy(self.node, EMCY_PDO_TOO_LONG, c.ERRREG_COMMUNICATION)]
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
            # reset communication: the communication objects as the factory left them; reset
            # node: everything (the motor data stay commissioned)
            if cmd == c.NMT_RESET_COMM:
                self._restore(0x1000, 0x1FFF)
            else:
                self._restore(0x0000, 0xFFFF)
                self.mode = self._int(0x6060, 0) or 0
            return [c.heartbeat(self.node, c.HB_BOOTUP)]
        return []

    def _controlword(self, cw: int) -> None:
        """The CiA 402 power state machine (reference notes §1.1)."""
        rising_reset = cw & 0x80 and not self.controlword & 0x80
        self.controlword = cw
        s = self.state
        if s == c.FAULT:
            if rising_reset:
                self.state = c.SWITCH_ON_DISABLED
                self.error_register = self.error_code = 0
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
        current = self.applied_permille / 1000.0 * self.rated_torque_Nm / s.torque_constant
        return max(-s.peak_current, min(s.peak_current, current))

    def tpdo(self, rotor_angle: float, current: float) -> tuple[int, bytes] | None:
        """TPDO1 after the SYNC's physics step (NMT operational, its COB-ID valid), in the
        layout its mapping gives, at the SYNCs its transmission type asks for."""
        counts = int(math.floor(rotor_angle / (2 * math.pi) * self.scale.counts_per_rev + 0.5))
        counts = ((counts + 2**31) % 2**32) - 2**31  # 6064h is an i32: it wraps
        self._prev_counts = self._counts
        self._counts = counts
        self._current = current
        if self.nmt_state != c.HB_OPERATIONAL or self._tx_cob < 0:
            return None
        tt = self._tx_type
        if 1 < tt <= 240:
            self._syncs += 1
            if self._syncs % tt:
                return None
        elif tt > 240:  # 252/253: on request only; 254/255 event-driven: when data change
            if tt < 254:
                return None
        if self._tx_default:  # statusword, position, current ‰ (the common case, kept cheap)
            permille = int(round(current / self.rated_current_A * 1000.0))
            data = self._tx.struct.pack(c.STATUSWORD[self.state], counts, -32768 if permille
                                        < -32768 else 32767 if permille > 32767 else permille)
        else:
            values = []
            for kind, lo, hi, index, sub in self._tx_fields:
                if kind == pdo.STATUSWORD:
                    v = c.STATUSWORD[self.state]
                elif kind == pdo.POSITION:
                    v = ((counts - lo) % (hi - lo + 1)) + lo  # wraps like the encoder counter
                elif kind == pdo.CURRENT:
                    v = int(round(current / self.rated_current_A * 1000.0))
                elif kind:
                    v = self._live(kind)
                else:
                    v = self._int(index, sub) or 0
                values.append(lo if v < lo else hi if v > hi else v)
            data = self._tx.struct.pack(*values)
        if tt == 0 or tt >= 254:
            if data == self._last_tx:
                return None
            self._last_tx = data
        return self._tx_cob, data

    def fault(self, code: int, register: int) -> tuple[int, bytes]:
        """Enter FAULT (power stage off) and return the EMCY frame."""
        self.state = c.FAULT
        self.error_register = register
        self.error_code = code
        return c.emcy(self.node, code, register)

    def heartbeat(self) -> tuple[int, bytes]:
        return c.heartbeat(self.node, self.nmt_state)


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def _is_com(index: int) -> bool:
    return 0x1400 <= index < 0x1600 or 0x1800 <= index < 0x1A00


def _is_map(index: int) -> bool:
    return 0x1600 <= index < 0x1800 or 0x1A00 <= index < 0x1C00


def _var(od, index: int, sub: int):
    from exo_rt.bus.eds import variable

    return variable(od, index, sub)


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
