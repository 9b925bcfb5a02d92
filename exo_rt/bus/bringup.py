"""Bring-up of one bus of CiA 402 drives through the canopen library — never in the cycle.

On the very python-can bus the cycle uses, a ``canopen.Network`` with one ``RemoteNode`` per
drive (object dictionary from the drive's EDS) and, for the time of bring-up only, a
``can.Notifier`` thread feeding it (SDO responses, heartbeats and EMCYs to canopen's
consumers; heartbeats, EMCYs and CAN error frames to :meth:`Drives._frame` too). Per drive:

1. 1000h device type (a CiA 402 drive?), 1018h identity (vendor id and product code checked
   against the bus file's ``vendor_id``/``product_code``), 1008h device name (segmented);
2. the drive's own units: motor rated torque (6076h, mN·m — or the object and unit the bus
   file names) and, where the mapping reports current in ‰ of it, rated current (6075h, mA);
   the limits of target torque 6071h from the EDS;
3. target torque 6071h = 0, then RPDO1 and TPDO1 written by the standard sequence (COB-ID
   invalid, transmission type, sub0 = 0, the entries, sub0 = n, COB-ID 0x200/0x180 + node
   valid) from the bus file's mapping; PDOs 2–4 switched off (COB-ID bit 31);
4. heartbeat producer time 1017h, interpolation period 60C2h (where the drive has it), mode
   of operation 6060h = 10 (cyclic synchronous torque), read back from 6061h;
5. the drive's own protection when the controller goes silent (the bus file's ``master`` and
   ``drive_watchdog``): consumer heartbeat time 1016h/1 (the controller's node id << 16 | ms),
   error behaviour 1029h/1, abort connection option code 6007h, communication cycle period
   1006h (the control period in µs with ``sync_watchdog``, else 0). An EDS without one of
   them is one line in ``Drives.bringup_warnings`` (a BusError with ``required: true``);

and, before anything is written, how the drive was found: its state (6041h), error code
(603Fh) and last error (1003h/1) — ``Drives.found``, which :meth:`Drives.enable` refuses to
go past without the operator's ``reset_faults`` when the drive stopped itself;

then NMT start to all. Every failure ends bring-up with one :class:`~exo_rt.errors.BusError`
line naming the drive, the object and what to do. Afterwards the notifier is stopped and the
nodes detached: nothing of canopen stays in the receive path, and the cycle reads the bus
with ``recv(0)`` and the preallocated codec built from the same mapping.
"""

from __future__ import annotations

import logging
import time

import can

from exo_rt.bus import cia402 as c
from exo_rt.bus import pdo
from exo_rt.bus.eds import load_od, variable
from exo_rt.errors import BusError

PDO_INVALID = 0x80000000
# the CiA 402 states of a drive that stopped itself (a fault, or the quick stop of its abort
# connection option): only the operator takes it out (Drives.enable's reset_faults)
STOPPED = (c.FAULT, c.FAULT_REACTION_ACTIVE, c.QUICK_STOP_ACTIVE)
ABORT_FIX = {
    0x06020000: "the drive has no such object: is this node the drive of the EDS the bus "
                "file names (check the node id and the 'eds' key)?",
    0x06090011: "the drive has no such sub-index: is this node the drive of the EDS the bus "
                "file names (check the node id and the 'eds' key)?",
    0x06010002: "the drive does not let it be written: check its EDS (is it this drive's?)",
    0x06070010: "the drive expects another size: check its EDS (is it this drive's?)",
    0x06040041: "the drive cannot map this object: change the bus file's rpdo/tpdo "
                "(docs/bus.md)",
    0x06040042: "the mapping is too long for this drive: map fewer objects (docs/bus.md)",
}
RANGE_FIX = ("the value is outside what the drive accepts: check the bus file "
             "(heartbeat_ms, transmission_type, rpdo/tpdo; docs/bus.md) against its EDS")


class _Sdo:
    """One drive's SDO conversation: every request remembered, every failure one line."""

    def __init__(self, drives, node, profile: pdo.DriveProfile) -> None:
        self.node = node
        self.od = node.object_dictionary
        self.profile = profile
        self.name = f"drive {node.id} on bus '{drives.config.name}'"
        self.log = drives.bringup_log
        self.last: tuple[str, int, int, object] = ("reading", 0, 0, None)
        up, down = node.sdo.upload, node.sdo.download

        def upload(index: int, subindex: int):
            self.last = ("reading", index, subindex, None)
            data = up(index, subindex)
            self.log.append((node.id, "read", index, subindex, bytes(data)))
            return data

        def download(index: int, subindex: int, data, force_segment: bool = False):
            self.last = ("writing", index, subindex, bytes(data))
            down(index, subindex, data, force_segment)
            self.log.append((node.id, "write", index, subindex, bytes(data)))

        node.sdo.upload, node.sdo.download = upload, download

    def has(self, index: int, sub: int = 0) -> bool:
        return variable(self.od, index, sub) is not None

    def fail(self, exc: Exception) -> BusError:
        from canopen.sdo import SdoAbortedError, SdoCommunicationError

        verb, index, sub, data = self.last
        var = variable(self.od, index, sub)
        obj = f"{index:04X}h/{sub}" + (f" ({var.name})" if var is not None else "")
        if data is not None and var is not None:
            try:
                obj += f" = {var.decode_raw(data)!r}"
            except Exception:  # noqa: BLE001 - only the wording of the message
                obj += f" = {data.hex()}"
        if isinstance(exc, SdoCommunicationError):
            return BusError(f"{self.name} does not answer SDO ({verb} {obj}: {exc})", None,
                            "check that it is powered, its node id and the bit rate, and the "
                            "bus's termination")
        if isinstance(exc, SdoAbortedError):
            fix = ABORT_FIX.get(exc.code) or (RANGE_FIX if exc.code >> 8 == 0x060900 else
                                              "check the drive's EDS and the bus file "
                                              "(docs/bus.md)")
            return BusError(f"{self.name} refused {verb} {obj} (SDO abort {exc.code:08X}h: "
                            f"{SdoAbortedError.CODES.get(exc.code, 'unknown code')})", None, fix)
        return BusError(f"{self.name}: {verb} {obj} failed ({type(exc).__name__}: {exc})", None,
                        f"check the drive's EDS ({self.profile.eds}) and the bus file")

    def run(self, fn, *args):
        from canopen.objectdictionary import ObjectDictionaryError
        from canopen.sdo.exceptions import SdoError

        try:
            return fn(*args)
        except (SdoError, ObjectDictionaryError, KeyError, ValueError, TypeError) as exc:
            raise self.fail(exc) from None

    def _object(self, index: int, sub: int):
        """canopen's SDO handle of (index, sub); BusError if the drive's EDS lacks it."""
        import canopen

        if not self.has(index, sub):
            raise BusError(f"{self.name}: its EDS ({self.profile.eds}) has no "
                           f"{index:04X}h/{sub}", None, "give the drive's own EDS (docs/bus.md)")
        if isinstance(self.od[index], canopen.objectdictionary.ODVariable):
            return self.node.sdo[index]
        return self.node.sdo[index][sub]

    def read(self, index: int, sub: int = 0):
        obj = self._object(index, sub)
        return self.run(lambda: obj.raw)

    def write(self, index: int, sub: int, value) -> None:
        obj = self._object(index, sub)

        def go():
            obj.raw = value

        self.run(go)


def bring_up(drives) -> None:
    """Configure every drive of ``drives`` (a :class:`~exo_rt.bus.drives.Drives`) and start
    them (NMT); BusError with one line on the first thing that fails."""
    import canopen

    logging.getLogger("canopen").setLevel(logging.ERROR)
    cfg = drives.config
    network = canopen.Network(drives.bus)
    nodes = []
    for d in cfg.drives:
        profile = d.profile or pdo.DEFAULT_PROFILE
        node = canopen.RemoteNode(d.node, load_od(profile.eds, d.node))
        node.sdo.RESPONSE_TIMEOUT = drives.sdo_timeout
        network.add_node(node)
        nodes.append(node)

    def forward(msg: can.Message) -> None:  # heartbeats, EMCYs and bus errors keep counting
        base = msg.arbitration_id & 0x780
        if (msg.is_error_frame or base == c.HEARTBEAT
                or base == c.EMCY and msg.arbitration_id != c.SYNC):
            drives._frame(msg)

    notifier = can.Notifier(drives.bus, [*network.listeners, forward], timeout=0.01)
    network.notifier = notifier
    try:
        network.nmt.send_command(c.NMT_PRE_OPERATIONAL)
        for k, (d, node) in enumerate(zip(cfg.drives, nodes, strict=True)):
            _configure(drives, k, node, d.profile or pdo.DEFAULT_PROFILE)
        network.nmt.send_command(c.NMT_START)
    except can.CanError as exc:  # the adapter itself (bus-off, no link, a full TX queue …)
        raise BusError(f"cannot send on bus '{cfg.name}' ({exc})", None,
                       "check the adapter, the link and its state (docs/deploy.md: ip -details "
                       "-statistics link show can0)") from None
    finally:
        notifier.stop(timeout=1.0)
        for node in nodes:  # unsubscribes its SDO, heartbeat and EMCY consumers
            del network[node.id]
        network.notifier = None
        network.bus = None
    drives._codec()


def _configure(drives, k: int, node, p: pdo.DriveProfile) -> None:
    s = _Sdo(drives, node, p)
    name = s.name
    device_type = s.read(0x1000)
    found = drives.found[k] = _found(s)
    if device_type & 0xFFFF != 402:
        raise BusError(f"{name} is not a CiA 402 drive (device type 1000h = "
                       f"{device_type:08X}h)", None,
                       "check the node id: another kind of device answers on it")
    ident = {"device_type": device_type}
    for sub, key in ((1, "vendor_id"), (2, "product_code"), (3, "revision"), (4, "serial")):
        if s.has(0x1018, sub):
            ident[key] = s.read(0x1018, sub)
    if s.has(0x1008):
        ident["name"] = s.read(0x1008)  # a string: segmented upload beyond 4 bytes
    for key in ("vendor_id", "product_code"):
        want = getattr(p, key)
        if want is not None and ident.get(key) != want:
            got = ident.get(key)
            raise BusError(
                f"{name} reports {key.replace('_', ' ')} "
                f"{'none' if got is None else f'{got:#010x}'} (1018h/"
                f"{1 if key == 'vendor_id' else 2}, '{ident.get('name', '?')}'), the bus file "
                f"expects {want:#010x}", None,
                "check the node ids (two drives swapped?), or set vendor_id/product_code to "
                "this drive's (docs/bus.md)")
    # the drive's own units
    torque = s.read(*p.rated_torque_object)
    if not torque or torque <= 0:
        i, sub = p.rated_torque_object
        raise BusError(f"{name} reports a motor rated torque of {torque} ({i:04X}h/{sub})",
                       None, "commission the motor data in the drive (its vendor's tool) "
                             "before running")
    drives.rated_torque[k] = torque * p.torque_unit
    ident["rated_torque_Nm"] = drives.rated_torque[k]
    if any(e.kind == pdo.CURRENT for e in p.tpdo) or s.has(*p.rated_current_object):
        current = s.read(*p.rated_current_object)
        if any(e.kind == pdo.CURRENT for e in p.tpdo) and (not current or current <= 0):
            i, sub = p.rated_current_object
            raise BusError(f"{name} reports a motor rated current of {current} "
                           f"({i:04X}h/{sub})", None,
                           "commission the motor data in the drive (its vendor's tool) "
                           "before running")
        if current and current > 0:
            drives.rated_current[k] = current * 1e-3
            ident["rated_current_A"] = drives.rated_current[k]
    target = next(e for e in p.rpdo if e.kind == pdo.TARGET_TORQUE)
    var = variable(s.od, target.index, target.sub)
    drives.torque_limits[k] = (max(target.low, var.min if var.min is not None else target.low),
                               min(target.high, var.max if var.max is not None else target.high))
    s.write(target.index, target.sub, 0)
    # the mapping: RPDO1 and TPDO1 as the bus file declares, the other PDOs off
    _map(s, node.rpdo[1], p.rpdo, p.transmission_type, c.RPDO1 + node.id)
    _map(s, node.tpdo[1], p.tpdo, p.transmission_type, c.TPDO1 + node.id)
    for n in (2, 3, 4):
        for com in (0x1400 + n - 1, 0x1800 + n - 1):
            var = variable(s.od, com, 1)
            if var is not None and var.writable:
                cob = s.read(com, 1)
                if not cob & PDO_INVALID:
                    s.write(com, 1, cob | PDO_INVALID)
    s.write(0x1017, 0, drives.config.heartbeat_ms)
    period_ms = round(drives.period * 1000)
    v1, v2 = variable(s.od, 0x60C2, 1), variable(s.od, 0x60C2, 2)
    if v1 is not None and v2 is not None and v1.writable and v2.writable and (
            (v1.max is None or period_ms <= v1.max) and (v1.min is None or period_ms >= v1.min)):
        s.write(0x60C2, 1, period_ms)
        s.write(0x60C2, 2, -3)
    _watchdog(drives, s, k, found)
    s.write(0x6060, 0, c.MODE_CST)
    for _ in range(20):  # a drive may take a few ms to switch
        if s.read(0x6061) == c.MODE_CST:
            break
        time.sleep(0.005)
    else:
        raise BusError(f"{name} did not enter cyclic synchronous torque (6061h = "
                       f"{s.read(0x6061)})", None, "check that the drive supports mode 10 (CST)")
    drives.identity[k] = ident


def _try_read(s: _Sdo, index: int, sub: int = 0):
    """An object the drive may not hold a value in (an empty error history …): None then."""
    from canopen.sdo import SdoAbortedError

    if not s.has(index, sub) or not variable(s.od, index, sub).readable:
        return None
    obj = s._object(index, sub)
    try:
        return obj.raw
    except SdoAbortedError:
        return None
    except Exception as exc:  # noqa: BLE001 - no answer etc.: one line, as every SDO
        raise s.fail(exc) from None


def _found(s: _Sdo) -> dict:
    """How the drive was found, before bring-up changes anything: its power state, error
    code and last error; ``stopped`` when it is in FAULT, FAULT REACTION ACTIVE or QUICK
    STOP ACTIVE, or holds an error code (it stopped itself: only the operator clears it) —
    or when it is still in OPERATION ENABLED (``left_running``: a controller that is gone left
    it powered, and nothing stopped it; bring-up zeroes its target, the operator decides)."""
    sw = _try_read(s, 0x6041)
    state = c.state_of(int(sw)) if sw is not None else None
    code = _try_read(s, 0x603F) or 0
    last = None
    if state in STOPPED or code:
        if _try_read(s, 0x1003, 0):
            last = _try_read(s, 0x1003, 1)
    left = state == c.OPERATION_ENABLED
    return {"state": state, "statusword": sw, "error_code": int(code), "last_error": last,
            "stopped": bool(state in STOPPED or code or left), "left_running": left}


def _watchdog(drives, s: _Sdo, k: int, found: dict) -> None:
    """1016h/1, 1029h/1, 6007h and 1006h from the bus file: what the drive does by itself
    when the controller, its PC or the bus dies. A missing or read-only object: one line in
    ``drives.bringup_warnings`` — or a BusError when the bus file requires them."""
    from exo_rt.bus.config import WATCHDOG_OBJECTS

    cfg = drives.config
    w = cfg.watchdog
    consumer = cfg.consumer_ms
    values = {(0x1016, 1): (cfg.master_node << 16 | consumer) if consumer else 0,
              (0x1029, 1): w.error_behaviour, (0x6007, 0): w.abort_connection,
              (0x1006, 0): round(drives.period * 1e6) if w.sync_watchdog else 0}
    what = {(0x1016, 1): "the drive will not notice a silent controller",
            (0x1029, 1): "its NMT state after a communication error is its own default",
            (0x6007, 0): "what it does when the controller is gone is its own default",
            (0x1006, 0): "it cannot watch the SYNC"}
    for (index, sub), value in values.items():
        var = variable(s.od, index, sub)
        if var is not None and var.writable:
            s.write(index, sub, value)
            continue
        if (index, sub) == (0x1006, 0) and not w.sync_watchdog:
            continue  # not asked for
        lack = "has no" if var is None else "cannot write"
        line = (f"{s.name}: its EDS ({s.profile.eds}) {lack} {index:04X}h/{sub} "
                f"({WATCHDOG_OBJECTS[(index, sub)]}): {what[(index, sub)]}")
        fix = ("set the drive's own watchdog with the vendor's tool (docs/safety.md), or "
               "give the drive's own EDS")
        if w.required:
            raise BusError(line, None, fix)
        drives.bringup_warnings.append(f"{line} — {fix}")
    if found.get("state") == c.OPERATION_ENABLED:
        drives.bringup_warnings.append(
            f"{s.name} was found in OPERATION ENABLED: its last controller left it running "
            "(target torque now 0) — check that its watchdog objects (1016h, 6007h) hold")


PROTECTION = ((0x1016, 1), (0x1029, 1), (0x6007, 0), (0x605A, 0), (0x605E, 0), (0x1006, 0),
              (0x603F, 0))


def read_back(drives) -> dict[str, dict[str, int | None]]:
    """The protection objects each drive holds now (1016h/1, 1029h/1, 6007h, 605Ah, 605Eh,
    1006h, 603Fh; those its EDS has), by expedited SDO — after bring-up, before the cycle:
    ``exo-rt bench-test bringup`` reports them (docs/safety.md). None: the drive refused."""
    from canopen.objectdictionary.datatypes import SIGNED_TYPES

    out = {}
    for d in drives.config.drives:
        od = load_od((d.profile or pdo.DEFAULT_PROFILE).eds, d.node)
        values: dict[str, int | None] = {}
        for index, sub in PROTECTION:
            var = variable(od, index, sub)
            if var is None or not var.readable:
                continue
            key = f"{index:04X}h/{sub}"
            try:
                raw = drives.sdo_read(d.node, (index, sub))
            except BusError:
                values[key] = None
                continue
            bits = len(var)  # (canopen gives a variable's size in bits)
            if var.data_type in SIGNED_TYPES and raw >= 1 << (bits - 1):
                raw -= 1 << bits
            values[key] = raw
        out[str(d.node)] = values
    return out


def _map(s: _Sdo, pdo_map, entries: tuple[pdo.MapEntry, ...], trans: int, cob: int) -> None:
    """One PDO by the standard sequence (canopen's ``PdoMap.save``), after reading what the
    drive has (its COB-ID flags and timers are kept)."""
    s.run(pdo_map.read)
    pdo_map.clear()
    for e in entries:
        if s.run(pdo_map.add_variable, e.index, e.sub, e.bits) is None:
            raise BusError(f"{s.name}: its EDS ({s.profile.eds}) has no {e} to map", None,
                           "give the drive's own EDS (docs/bus.md)")
    pdo_map.trans_type = trans
    pdo_map.cob_id = cob
    pdo_map.enabled = True
    s.run(pdo_map.save)
