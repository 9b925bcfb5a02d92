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
  error code, 0x1003 error history), the CiA 402 power state machine driven by the
  controlword (RPDO or SDO), cyclic synchronous torque (mode 10): the target torque is
  latched and applied at the next SYNC, the TPDO is sent after it;
- its own protection when its master goes silent, on its own clock (:meth:`tick`, every
  physics period, SYNCs or not): a heartbeat consumer (0x1016: a watched node's heartbeat
  missing for its consumer time → EMCY 8130h), loss of SYNC while OPERATION ENABLED (none
  for 3 × 0x1006 → EMCY 8100h, as CANopenNode reports its SYNC timeout), each a
  communication error: the error behaviour of 0x1029/1 (pre-operational, no change or
  stopped) and, in OPERATION ENABLED, the abort connection option 0x6007 (1 fault: FAULT,
  power stage off; 2 disable voltage: SWITCH ON DISABLED, power stage off; 3 quick stop:
  QUICK STOP ACTIVE, the torque ramped to zero in 2 ms, then as 0x605A says). The power
  stage follows the CiA 402 state alone: a drive that leaves NMT operational keeps its last
  target, as real ones do — 0x6007 is what stops it. A drive that stopped itself keeps the
  cause in 0x603F until the rising edge of controlword bit 7.

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
from exo_rt.bus.scale import DriveScale, permille_current

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
QUICK_STOP_RAMP_S = 2e-3  # the emulated drive's quick stop: the torque to zero in 2 ms
SYNC_LOSS_PERIODS = 3  # no SYNC for 3 × 1006h while OPERATION ENABLED: SYNC lost
EPS = 1e-9  # s: the world's clock is a sum of periods
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
    clock: float = 0.0  # the drive's own time (s): the world's, given at each tick()

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
        self._synced = False  # a SYNC came since the last tick
        self._sync_last: float | None = None  # when the last SYNC came (None: none yet)
        self._sync_lost = False
        self._qs_from = 0  # quick stop: the torque (‰) it ramps down from, and since when
        self._qs_t0 = 0.0
        self.history: list[int] = []  # 1003h: the errors, newest first
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
        self._watchdogs()

    def _watchdogs(self) -> None:
        """The protection objects as stored: 1016h's watched nodes (heartbeat COB-ID →
        [consumer time s, last heartbeat or None, lost]), 1006h, 1029h/1, 6007h, 605Ah."""
        watched = {}
        for sub in range(1, 128):
            if _var(self.od, 0x1016, sub) is None:
                break
            word = self._int(0x1016, sub) or 0
            node, ms = word >> 16 & 0x7F, word & 0xFFFF
            if node and ms:
                old = getattr(self, "_hb_watch", {}).get(c.HEARTBEAT + node)
                watched[c.HEARTBEAT + node] = [ms * 1e-3, old[1] if old else None,
                                               old[2] if old else False]
        self._hb_watch = watched
        period = self._int(0x1006, 0) or 0  # µs
        self._sync_timeout = SYNC_LOSS_PERIODS * period * 1e-6
        self._error_behaviour = self._int(0x1029, 1)
        self._abort_option = self._int(0x6007, 0)
        self._quick_stop_option = self._int(0x605A, 0)

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
        if index == 0x603F and subindex == 0:
            return self.error_code
        if index == 0x1003:  # the error history, newest first
            if subindex == 0:
                return len(self.history)
            return self.history[subindex - 1] if subindex <= len(self.history) else 0
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
            if index == 0x1016 and subindex > 0:  # node id << 16 | ms: CiA 301's layout (a
                if value >> 23:  # vendor EDS may give the 16-bit limit of the time alone)
                    raise SdoAbortedError(ABORT_VALUE)
                node = value >> 16 & 0x7F
                if node and any((self._int(0x1016, s) or 0) >> 16 & 0x7F == node
                                for s in self._hb_subs() if s != subindex):
                    raise SdoAbortedError(0x06040043)  # a node watched twice
            elif od.max is not None and value > od.max:
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
        elif index in (0x1016, 0x1006, 0x1029, 0x6007, 0x605A):
            self._watchdogs()
        elif index == 0x1003 and subindex == 0:  # writing 0 clears the history
            self.history.clear()
        if ((index, subindex) == self._motor[0][0] or (index, subindex) == self._motor[1][0]):
            self._units()

    def _hb_subs(self) -> list[int]:
        subs = []
        for sub in range(1, 128):
            if _var(self.od, 0x1016, sub) is None:
                break
            subs.append(sub)
        return subs

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
        watched = self._hb_watch.get(arb_id)
        if watched is not None:  # a watched node's heartbeat: on the drive's own clock
            if len(data) == 1:
                watched[1] = self.clock
                if watched[2]:  # back again: the error is gone (an error reset EMCY)
                    watched[2] = False
                    return self._recovered()
            return []
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
        elif cmd == c.NMT_STOP:  # entering NMT stopped aborts the connection (CiA 402)
            self.nmt_state = c.HB_STOPPED
            if self.state == c.OPERATION_ENABLED:
                self._abort_connection()
        elif cmd == c.NMT_PRE_OPERATIONAL:
            self.nmt_state = c.HB_PRE_OPERATIONAL
        elif cmd in (c.NMT_RESET_NODE, c.NMT_RESET_COMM):
            self.nmt_state = c.HB_PRE_OPERATIONAL
            self.state = c.SWITCH_ON_DISABLED
            # reset communication: the communication objects as the factory left them; reset
            # node: everything (the motor data stay commissioned)
            self._sync_last, self._sync_lost = None, False
            self._hb_watch = {}
            if cmd == c.NMT_RESET_COMM:
                self._restore(0x1000, 0x1FFF)
            else:
                self._restore(0x0000, 0xFFFF)
                self.mode = self._int(0x6060, 0) or 0
                self.error_register = self.error_code = 0
                self.history.clear()
            return [c.heartbeat(self.node, c.HB_BOOTUP)]
        return []

    def _controlword(self, cw: int) -> None:
        """The CiA 402 power state machine (CiA 402-2, the drive state machine)."""
        rising_reset = cw & 0x80 and not self.controlword & 0x80
        self.controlword = cw
        s = self.state
        if rising_reset:  # the operator's reset: what stopped the drive is forgotten
            self.error_register = self.error_code = 0
        if s == c.FAULT:
            if rising_reset:
                self.state = c.SWITCH_ON_DISABLED
            return
        if cw & 0x02 == 0:  # disable voltage
            self.state = c.SWITCH_ON_DISABLED
        elif cw & 0x06 == 0x02:  # quick stop
            if s == c.OPERATION_ENABLED:
                self._quick_stop()
            elif s != c.QUICK_STOP_ACTIVE:
                self.state = c.SWITCH_ON_DISABLED
        elif cw & 0x87 == 0x06:  # shutdown
            if s in (c.SWITCH_ON_DISABLED, c.SWITCHED_ON, c.OPERATION_ENABLED):
                self.state = c.READY_TO_SWITCH_ON
        elif cw & 0x8F == 0x07:  # switch on / disable operation
            if s in (c.READY_TO_SWITCH_ON, c.OPERATION_ENABLED):
                self.state = c.SWITCHED_ON
        elif cw & 0x8F == 0x0F and (
                s in (c.SWITCHED_ON, c.READY_TO_SWITCH_ON)
                or s == c.QUICK_STOP_ACTIVE and 5 <= (self._quick_stop_option or 0) <= 8):
            self.state = c.OPERATION_ENABLED if self.mode == c.MODE_CST else c.SWITCHED_ON
            if self.state == c.OPERATION_ENABLED:  # the SYNC watchdog starts afresh
                self._sync_last = self.clock if self._sync_last is not None else None
                self._sync_lost = False

    # ------------------------------------------------------------------ its own protection
    def _quick_stop(self) -> None:
        """OPERATION ENABLED → QUICK STOP ACTIVE: the torque ramps to zero from where it is
        (605Ah = 0: the drive function is disabled at once)."""
        if self._quick_stop_option == 0:
            self.state = c.SWITCH_ON_DISABLED
            return
        self.state = c.QUICK_STOP_ACTIVE
        self._qs_from = self.applied_permille
        self._qs_t0 = self.clock

    def _abort_connection(self) -> None:
        """6007h: what the drive does, in OPERATION ENABLED, when its master is gone."""
        option = self._abort_option
        if option == 1:  # fault signal: FAULT, the power stage off
            self.state = c.FAULT
        elif option == 2:  # disable voltage: SWITCH ON DISABLED, the power stage off
            self.state = c.SWITCH_ON_DISABLED
        elif option == 3:  # quick stop
            self._quick_stop()
        # 0 (no action) and manufacturer-specific codes: the drive goes on

    def _comm_error(self, code: int) -> list[tuple[int, bytes]]:
        """A communication error (heartbeat or SYNC lost): EMCY, history, 6007h in
        OPERATION ENABLED, then the NMT state 1029h/1 asks for."""
        self.error_register |= c.ERRREG_GENERIC | c.ERRREG_COMMUNICATION
        self.history.insert(0, code)
        del self.history[8:]
        out = [c.emcy(self.node, code, self.error_register)] \
            if self.nmt_state != c.HB_STOPPED else []
        if self.state == c.OPERATION_ENABLED:
            self.error_code = code  # why it stopped, until the operator's reset
            self._abort_connection()
        if self.nmt_state == c.HB_OPERATIONAL:
            if not self._error_behaviour:  # 0, or no 1029h: pre-operational (CiA 301)
                self.nmt_state = c.HB_PRE_OPERATIONAL
            elif self._error_behaviour == 2:
                self.nmt_state = c.HB_STOPPED
        return out

    def _recovered(self) -> list[tuple[int, bytes]]:
        """The communication error is gone: its bit cleared, an error reset EMCY (0000h)."""
        if self._sync_lost or any(w[2] for w in self._hb_watch.values()):
            return []
        self.error_register &= ~c.ERRREG_COMMUNICATION & 0xFF
        if self.error_register == c.ERRREG_GENERIC and self.state != c.FAULT \
                and not self.error_code:
            self.error_register = 0
        if self.nmt_state == c.HB_STOPPED:
            return []
        return [c.emcy(self.node, c.EMCY_NO_ERROR, self.error_register)]

    def tick(self, t: float) -> list[tuple[int, bytes]]:
        """The drive's own clock, every period whether SYNCs come or not: the heartbeat
        consumer, the SYNC watchdog and the quick stop ramp. Returns the frames it sends."""
        self.clock = t
        out = ()
        if self._synced:
            self._synced = False
            self._sync_last = t
            if self._sync_lost:
                self._sync_lost = False
                out = self._recovered()
        for watched in self._hb_watch.values():
            last = watched[1]
            if last is not None and not watched[2] and t - last >= watched[0] - EPS:
                watched[2] = True
                out = [*out, *self._comm_error(c.EMCY_HEARTBEAT)]
        if (self._sync_timeout and self.state == c.OPERATION_ENABLED and not self._sync_lost
                and self._sync_last is not None
                and t - self._sync_last >= self._sync_timeout - EPS):
            self._sync_lost = True
            out = [*out, *self._comm_error(c.EMCY_COMMUNICATION)]
        if self.state == c.QUICK_STOP_ACTIVE and t - self._qs_t0 >= QUICK_STOP_RAMP_S - EPS:
            self._qs_from = 0  # the ramp is over: zero torque
            option = self._quick_stop_option
            if option is None or not 5 <= option <= 8:  # 1…4 (and vendors'): then disabled
                self.state = c.SWITCH_ON_DISABLED
        return out

    # ------------------------------------------------------------------ cyclic behaviour
    def statusword(self) -> int:
        return c.STATUSWORD[self.state]

    @property
    def enabled(self) -> bool:
        """OPERATION ENABLED: the latched target torque is applied."""
        return self.state == c.OPERATION_ENABLED

    @property
    def power_on(self) -> bool:
        """The power stage is on (OPERATION ENABLED, or QUICK STOP ACTIVE ramping or
        holding zero torque); off, the motor current is zero at once."""
        return self.state == c.OPERATION_ENABLED or self.state == c.QUICK_STOP_ACTIVE

    def on_sync(self) -> float:
        """Apply the latched target: the current command (A) for the plant."""
        self._synced = True
        if self.state == c.OPERATION_ENABLED:
            self.applied_permille = self.target_permille
        elif self.state != c.QUICK_STOP_ACTIVE:
            self.applied_permille = 0
        return self.current_command()

    def current_command(self) -> float:
        """The current (A) the drive commands now: the applied target in OPERATION ENABLED,
        the quick stop ramp in QUICK STOP ACTIVE, else zero."""
        if self.state == c.OPERATION_ENABLED:
            permille = self.applied_permille
        elif self.state == c.QUICK_STOP_ACTIVE:
            left = 1.0 - (self.clock - self._qs_t0) / QUICK_STOP_RAMP_S
            permille = self._qs_from * left if left > 0.0 else 0.0
        else:
            return 0.0
        s = self.scale
        current = permille_current(permille, self.rated_torque_Nm, s.torque_constant)
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

    # ------------------------------------------------------------------ the simulated bus's
    # interface for every family's emulated drive (exo_rt.bus.protocols.base.EmulatedDevice)
    plant = staticmethod(lambda: (0.0, 0.0, 0.0))  # the world's (rotor, speed, current)

    @classmethod
    def from_config(cls, drive, bus, period: float) -> EmulatedDrive:
        """The drive of the bus file's ``drive`` on ``bus``, SYNCs ``period`` s apart."""
        return cls(drive.node, drive.scale, profile=drive.profile, sync_period=period)

    def cyclic(self, arb_id: int, data: bytes) -> bool:
        """Whether a host frame is the cycle's traffic to it (its RPDO1)."""
        return arb_id == c.RPDO1 + self.node

    def sync_frames(self, rotor: float, current: float) -> list[tuple[int, bytes]]:
        """Its TPDO after the SYNC's physics step (none where its mapping says so)."""
        frame = self.tpdo(rotor, current)
        return [] if frame is None else [frame]

    def inject_fault(self) -> list[tuple[int, bytes]]:
        """An injected over-current: FAULT, and its EMCY."""
        return [self.fault(c.EMCY_OVERCURRENT, c.ERRREG_CURRENT)]

    def fault(self, code: int, register: int) -> tuple[int, bytes]:
        """Enter FAULT (power stage off) and return the EMCY frame."""
        self.state = c.FAULT
        self.error_register = register
        self.error_code = code
        self.history.insert(0, code)
        del self.history[8:]
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


