"""The host side of one CAN bus of CiA 402 drives.

:class:`Drives` brings the drives up (:mod:`exo_rt.bus.bringup`, through the canopen
library: identity checked, the PDO mapping, heartbeat, mode and the drives' own watchdogs
written, NMT start; then the power state machine to *operation enabled* — never past a drive
that stopped itself unless the operator asks, :meth:`Drives.enable`) and then, every cycle,
sends each drive's RPDO and a SYNC (and, every few cycles, the controller's own heartbeat,
which the drives watch) and collects the TPDOs into preallocated arrays: joint position
(rad), motor current (A), statusword, receive time, and per-joint flags. The PDO codec is
built from each drive's mapping in the bus file (:class:`exo_rt.bus.pdo.Layout`). Missing,
duplicate or malformed frames, and CAN error frames (bus-off …), are counted and flagged —
never raised inside the cycle. SDO is used only during bring-up, never in the cycle.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import can
import numpy as np

from exo_rt.bus import cia402 as c
from exo_rt.bus import fastio, pdo, pdo_cycle
from exo_rt.bus.config import BusConfig
from exo_rt.bus.errframe import decode_error_frame
from exo_rt.bus.flags import F_BUS_ERROR, F_FAULT
from exo_rt.bus.port import FramePort, open_port
from exo_rt.errors import BusError
from exo_rt.model.mechanism import Mechanism

# the power states a drive that stopped itself (or was stopped) stays in until a reset
STOPPED = (c.FAULT, c.FAULT_REACTION_ACTIVE, c.QUICK_STOP_ACTIVE)


def arrivals(port: FramePort, seen: np.ndarray, deadline: float | None):
    """The frames that have arrived (one reused frame object: decode it before the next);
    polling on until every drive is ``seen`` or ``deadline`` (monotonic s) passes — or, without
    a deadline (lockstep), until the queue is empty. (It always empties the queue: a reader
    that stopped at the first complete set could stay a whole set behind for ever.)"""
    while True:
        msg = port.recv()
        if msg is None:
            if deadline is None or seen.all() or time.monotonic() >= deadline:
                return
            continue
        yield msg


# cycles bring-up waits for every drive to report operation enabled (0.5 s at 1 kHz): a drive
# answers its first SYNC within a period or two, but its host may hold the bus's turn for tens
# of ms (a loaded onboard PC, a simulation's first physics steps); waiting at zero current
# costs nothing, giving up too early refuses a sound exoskeleton
ENABLE_CYCLES = 500

class Drives:
    """One bus: its drives, their scales and the arrays the cycle fills."""

    def __init__(self, bus: can.BusABC, config: BusConfig, mech: Mechanism,
                 sdo_timeout: float = 0.5, period: float = 1e-3) -> None:
        self.bus = bus
        self.port = open_port(bus)  # the cycle's frame I/O (fast path where the interface has one)
        self.config = config
        self.n = len(config.drives)
        self.nodes = np.array([d.node for d in config.drives])
        self.joint_index = np.array([mech.joint_names.index(d.joint) for d in config.drives])
        tr = {t.joint: t for t in mech.transmissions}
        self.multiplier = np.array([tr[d.joint].multiplier for d in config.drives])
        self.counts_per_rev = np.array([d.scale.counts_per_rev for d in config.drives], float)
        self.rated_current = np.array([d.scale.rated_current for d in config.drives])
        self.rated_torque = np.array([d.scale.rated_torque for d in config.drives])
        self.torque_constant = np.array([d.scale.torque_constant for d in config.drives])
        self.peak_current = np.array([d.scale.peak_current for d in config.drives])
        self.sdo_timeout = sdo_timeout
        self.period = period
        # the furthest a joint can move in two 1 ms cycles at its speed limit
        self.max_step = np.array([mech.velocity_limit[j] for j in self.joint_index]) * 2e-3
        self._node_slot = {int(node): k for k, node in enumerate(self.nodes)}
        # frames of other devices on the bus (e.g. the rig's fixture): arbitration id → callback
        self.listeners: dict[int, Callable[[can.Message], None]] = {}
        self.emcy_codes: list[tuple[int, int]] = []  # (node, code), read by safety
        self.bus_errors: deque[tuple[float, bool, str]] = deque(maxlen=64)  # (t, bus-off, cause)
        self.identity: list[dict] = [{} for _ in range(self.n)]  # what bring-up read
        self.bringup_log: list[tuple] = []  # every SDO of bring-up: (node, op, index, sub, data)
        self.bringup_warnings: list[str] = []  # one line each: what bring-up could not set
        # each drive as bring-up found it: {"state", "statusword", "error_code", "last_error",
        # "stopped"}
        self.found: list[dict] = [{} for _ in range(self.n)]
        # the cycle's frame tables: received, sent (the RPDOs, then the SYNC and the
        # controller's heartbeat, sent with them in one call where the port's batches are
        # compiled), the SYNC and heartbeat on their own (several buses: after them all), a
        # frame read on its own (bring-up)
        self._hb_cob = c.HEARTBEAT + config.master_node
        self._hb_data = bytes((c.HB_OPERATIONAL,))
        self._rx_batch = self.port.batch(max(32, 4 * self.n))
        self._tx_batch = self._sync_rows_at(self.port.batch(self.n + 2, send=True), self.n)
        self._sync_batch = self._sync_rows_at(self.port.batch(2, send=True), 0)
        self._one = fastio.FrameBatch(1)
        self._tx_errors = 0  # send errors the tx table had counted when last looked at
        # what the cycle reads and writes (pdo_cycle.BusData); the controller's heartbeat
        # (CiA 301 producer): one frame every hb[0] SYNCs, hb[2] holds it back while
        # enable() runs (it starts with the cycle); the foreign-master watch: frames of
        # another master on this bus, the first one's COB-ID — the safety check's
        # foreign_master names it
        hb_ms = config.master_heartbeat_ms
        self.data = pdo_cycle.bus_data(
            self.n, self._rx_batch.capacity, config.master_node,
            max(1, round(hb_ms * 1e-3 / period)) if hb_ms else 0, c.CW_SHUTDOWN)
        bd = self.data  # its arrays by their public names (the same arrays; position,
        # current and flags: the properties below)
        self.statusword, self.rx_time, self.seen = bd.statusword, bd.rx_time, bd.seen
        self.missing_count, self.malformed_count = bd.missing_count, bd.malformed_count
        self.controlword = bd.controlword
        self.heartbeat_time = bd.heartbeat_time  # timestamp of the last heartbeat (NaN: none)
        self.commanded = bd.commanded  # last cycle's current commands (A), after clamping
        self.foreign = bd.foreign  # pdo_cycle.FOREIGN_OWN_NODE, FOREIGN_COUNT, FOREIGN_FIRST
        self.temperature = np.full(self.n, np.nan)  # (the PDOs carry no temperature)
        # optional mapped quantities, kept raw (the drive's units)
        self.velocity_raw, self.digital_inputs, self.error_code = (
            bd.extras[:, 0], bd.extras[:, 1], bd.extras[:, 2])
        # the target torque's range (‰): its integer type's, narrowed by bring-up to the
        # drive's own object limits
        self.torque_limits = [next((e.low, e.high) for e in (d.profile or pdo.DEFAULT_PROFILE).rpdo
                                   if e.kind == pdo.TARGET_TORQUE) for d in config.drives]
        self._codec()

    position = property(lambda self: self.data.position,
                        lambda self, a: self._fill(position=a),
                        doc="joint angle (rad) from the motor encoder")
    current = property(lambda self: self.data.current, lambda self, a: self._fill(current=a),
                       doc="actual motor current (A)")
    flags = property(lambda self: self.data.flags, lambda self, a: self._fill(flags=a),
                     doc="each drive's feedback flags this cycle (exo_rt.bus.flags)")

    def _fill(self, **arrays: np.ndarray) -> None:
        """The cycle fills these arrays from now on, in place (the controller's own, e.g.
        ``drives.position = q[lo:hi]``): the bus's data made again around them."""
        data = self.data
        if all(getattr(data, name) is a for name, a in arrays.items()):
            return  # (``drives.flags |= F`` writes in place, then sets the same array)
        for name, a in arrays.items():
            old = getattr(data, name)
            if not isinstance(a, np.ndarray) or a.shape != old.shape or a.dtype != old.dtype:
                raise ValueError(f"bus '{self.config.name}': {name} must be a {old.dtype} "
                                 f"array of shape {old.shape} (got "
                                 f"{getattr(a, 'dtype', type(a).__name__)} "
                                 f"{getattr(a, 'shape', '')})")
        self.data = pdo_cycle.BusData(**{**{n: getattr(data, n) for n in data.FIELDS},
                                         **arrays})

    # ------------------------------------------------------------------ bring-up (not cyclic)
    def _send(self, frame: tuple[int, bytes]) -> None:
        self.port.send(frame[0], frame[1])

    def _sdo(self, node: int, request: tuple[int, bytes]) -> tuple[int, int, int, bytes]:
        self._send(request)
        deadline = time.monotonic() + self.sdo_timeout
        while time.monotonic() < deadline:
            msg = self.port.recv()
            if msg is None:
                time.sleep(0)
                continue
            if msg.arbitration_id == c.SDO_TX + node:
                reply = c.decode_sdo(bytes(msg.data))
                if reply is not None:
                    return reply
            else:  # heartbeats and emergencies go on counting during bring-up
                self._frame(msg)
        raise BusError(f"drive {node} on bus '{self.config.name}' does not answer SDO", None,
                       "check that it is powered, its node id and the bit rate, and the bus's "
                       "termination")

    def sdo_write(self, node: int, obj: tuple[int, int], value: int, size: int) -> None:
        cmd, idx, sub, payload = self._sdo(node, c.sdo_download(node, obj[0], obj[1], value, size))
        if cmd != c.SDO_DOWNLOAD_OK:
            code = int.from_bytes(payload, "little")
            raise BusError(f"drive {node} refused writing {obj[0]:04X}h/{obj[1]} "
                           f"(SDO abort {code:08X}h)", None,
                           "check the drive's object dictionary (EDS) and its mode")

    def sdo_read(self, node: int, obj: tuple[int, int]) -> int:
        cmd, idx, sub, payload = self._sdo(node, c.sdo_upload_request(node, obj[0], obj[1]))
        value = c.sdo_value(cmd, payload)
        if value is None:
            raise BusError(f"drive {node} did not give {obj[0]:04X}h/{obj[1]} "
                           f"(answer {cmd:02X}h)", None, "check the object exists on the drive")
        return value

    def configure(self) -> None:
        """CONFIGURE through the canopen library (:func:`exo_rt.bus.bringup.bring_up`):
        pre-operational, identity checked, units read, the bus file's PDO mapping, heartbeat
        and mode 10 written, NMT start; the cycle's codec rebuilt from the drives' units."""
        from exo_rt.bus.bringup import bring_up

        bring_up(self)

    def warm_up(self) -> None:
        """Compile the cycle's njit helpers (before any drive is enabled; on a bus made for
        it, of this one's types)."""
        pdo_cycle.warm_up()
        self.port.warm_up()
        if self.port.compiled:  # the cycle's I/O in one call each way
            pdo_cycle.warm_up_io(self.n)

    def _codec(self) -> None:
        """The cycle's model of the bus (:class:`exo_rt.bus.pdo_cycle.BusModel`): each drive's
        PDO field tables and units, from its mapping and the drives' units (again after
        bring-up has read them)."""
        profiles = [d.profile or pdo.DEFAULT_PROFILE for d in self.config.drives]
        # the mapped current-like quantity × this / 1000 = A
        per_mille = np.array([
            {pdo.CURRENT: self.rated_current[k], pdo.CURRENT_MA: 1.0,
             pdo.TORQUE: self.rated_torque[k] / self.torque_constant[k]}[
                pdo.Layout(p.tpdo).current_kind] for k, p in enumerate(profiles)])
        scale = np.stack([2 * np.pi / self.counts_per_rev / self.multiplier,
                          per_mille / 1000.0, self.max_step, self.max_step / 2e-3,
                          self.peak_current], axis=1)
        self.model = pdo_cycle.bus_model(
            self.nodes, profiles, self.torque_limits, scale,
            1000.0 * self.torque_constant / self.rated_torque,  # ‰ per A
            period=self.period, heartbeat_timeout=3e-3 * self.config.heartbeat_ms,
            own_node=self.config.master_node)

    def _sync_rows_at(self, b: fastio.FrameBatch, row: int) -> fastio.FrameBatch:
        """The SYNC in ``row`` of a frame table and the controller's heartbeat after it."""
        b.arbitration_id[row: row + 2] = (c.SYNC, self._hb_cob)
        b.length[row: row + 2] = (0, len(self._hb_data))
        b.data[row + 1, : len(self._hb_data)] = np.frombuffer(self._hb_data, np.uint8)
        return b

    def enable(self, max_cycles: int = ENABLE_CYCLES, reset_faults: bool = False) -> int:
        """READY → OPERATION ENABLED through the state machine at zero torque; returns cycles.

        Restart is explicit: a drive that bring-up found stopped — in FAULT, FAULT REACTION
        ACTIVE or QUICK STOP ACTIVE, or with an error code in 603Fh (it stopped itself, e.g.
        when the last controller went silent) — or that reports one of those states here,
        is one BusError naming it and why, unless ``reset_faults`` (the operator's explicit
        ``--reset-faults``): then the rising edge of controlword bit 7 goes to every drive
        first, and the drives are enabled from SWITCH ON DISABLED as usual. The controller's
        heartbeat starts with the first cycle after this (the drives watch it from then)."""
        zero = np.zeros(self.n)
        stopped = [k for k in range(self.n) if self.found[k].get("stopped")]
        if stopped and not reset_faults:
            raise self._stopped_error(stopped)
        self.data.hb[2] = 1
        try:
            if reset_faults:
                self.fault_reset()
            self.controlword[:] = c.CW_SHUTDOWN
            for cycle in range(max_cycles):
                # A drive whose TPDO missed this cycle keeps its last controlword: acting on
                # its stale statusword could send SHUTDOWN to a drive that is already enabled.
                for k in range(self.n):
                    if not self.seen[k]:
                        continue
                    state = c.state_of(int(self.statusword[k]))
                    if state == c.SWITCH_ON_DISABLED:
                        self.controlword[k] = c.CW_SHUTDOWN
                    elif state in (c.READY_TO_SWITCH_ON, c.SWITCHED_ON, c.OPERATION_ENABLED):
                        self.controlword[k] = c.CW_ENABLE_OPERATION
                    elif state in STOPPED and not reset_faults:
                        raise self._stopped_error([k])
                self.paced_cycle(zero)
                if self.seen.all() and all(c.state_of(int(sw)) == c.OPERATION_ENABLED
                                           for sw in self.statusword):
                    self.controlword[:] = c.CW_ENABLE_OPERATION
                    # a drive whose first heartbeat is still to come is watched from now on
                    self.heartbeat_time[np.isnan(self.heartbeat_time)] = self.data.now[0]
                    return cycle + 1
        finally:
            self.data.hb[2] = 0
        stuck = [k for k in range(self.n)
                 if self.seen[k] and c.state_of(int(self.statusword[k])) in STOPPED]
        if stuck:
            raise self._stopped_error(stuck, after_reset=reset_faults)
        states = ", ".join(c.state_of(int(s)) for s in self.statusword)
        raise BusError(f"the drives on bus '{self.config.name}' did not reach operation "
                       f"enabled (states: {states})", None,
                       "check the drives' faults and power stage (and the e-stop)")

    def found_stopped(self) -> str | None:
        """What bring-up found stopped on this bus (one line, as enabling would refuse it), or
        None: for a report made before anything is enabled."""
        slots = [k for k in range(self.n) if self.found[k].get("stopped")]
        return self._stopped_error(slots).what if slots else None

    def _stopped_error(self, slots: list[int], after_reset: bool = False) -> BusError:
        """One line: which drives are stopped, in what state, and why (603Fh, last EMCY)."""
        parts = []
        for k in slots:
            node = int(self.nodes[k])
            f = self.found[k]
            state = (c.state_of(int(self.statusword[k])) if self.seen[k] or not f
                     else f["state"])
            why = []
            if f.get("left_running"):
                why.append("left running by a controller that is gone: nothing stopped it")
            code = f.get("error_code") or int(self.error_code[k])
            if code:
                why.append(f"error code 603Fh = {code:04X}h, {c.emcy_name(code)}")
            emcy = next((e for n, e in reversed(self.emcy_codes) if n == node), None)
            last = emcy if emcy is not None else f.get("last_error")
            if last:
                src = "last EMCY" if emcy is not None else "last error 1003h/1"
                why.append(f"{src} {last & 0xFFFF:04X}h, {c.emcy_name(last & 0xFFFF)}")
            parts.append(f"drive {node} is in {state}" + (f" ({'; '.join(why)})" if why else ""))
        name = self.config.name
        if after_reset:
            return BusError(f"on bus '{name}' " + ", ".join(parts) + " after the fault reset",
                            None, "the cause is still there: check the drive (power stage, "
                                  "e-stop, its error code in the vendor's manual)")
        return BusError(f"on bus '{name}' " + ", ".join(parts) + ": it stopped and stays "
                        "stopped until cleared", None,
                        "check the drive and what stopped it, then start again with "
                        "--reset-faults (exo-rt run --reset-faults) to clear it explicitly")

    def states(self) -> list[str]:
        """Each drive's power state (CiA 402), from its last statusword."""
        return [c.state_of(int(sw)) for sw in self.statusword]

    def protection(self) -> dict:
        """What each drive does by itself when the controller goes silent: its protection
        objects read back by SDO (:func:`exo_rt.bus.bringup.read_back`)."""
        from exo_rt.bus.bringup import read_back

        return read_back(self)

    def request_disable(self) -> None:
        """From the next cycle on, every RPDO carries controlword *disable voltage* (no I/O
        now: safe inside the cycle)."""
        self.controlword[:] = c.CW_DISABLE_VOLTAGE

    def disable(self) -> None:
        """Zero torque and disable voltage (a latched fault needs an explicit reset)."""
        self.controlword[:] = c.CW_DISABLE_VOLTAGE
        self.paced_cycle(np.zeros(self.n))

    def fault_reset(self) -> None:
        """An explicit operator action: the rising edge of controlword bit 7 (after a cycle
        with it low, so that there is an edge whatever the drive saw last)."""
        self.controlword[:] = c.CW_DISABLE_VOLTAGE
        self.paced_cycle(np.zeros(self.n))
        self.controlword[:] = c.CW_FAULT_RESET
        self.paced_cycle(np.zeros(self.n))
        self.controlword[:] = c.CW_SHUTDOWN

    # ------------------------------------------------------------------ the cycle
    def send_commands(self, current_A: np.ndarray) -> None:
        """RPDOs then SYNC (and the controller's heartbeat when due) — on a port with compiled
        batches in one compiled call and one system call (:func:`exo_rt.bus.pdo_cycle.command`).
        With several buses, send every other bus's RPDOs first and their SYNCs after (the
        controller does: every RPDO before any SYNC)."""
        if self._compiled_io():
            self._command(current_A)
            return
        self.send_rpdos(current_A)
        self.send_sync()

    def _compiled_io(self) -> bool:
        """The cycle's frames go in and out in one compiled call each way (a port with
        compiled batches, and no recording that must wait for room: lockstep's)."""
        tap = self.port.tap
        return self.port.compiled and (tap is None or not tap.block_when_full)

    def _command(self, current_A: np.ndarray) -> None:
        """The RPDOs, the SYNC and the heartbeat when due in one compiled call."""
        self.port.sent_at = pdo_cycle.command(self._tx_batch, self.port.tap_record(),
                                              self.model, self.data,
                                              np.ascontiguousarray(current_A, np.float64))
        self.count_send_errors()

    def count_send_errors(self) -> None:
        """The frames the compiled sends could not hand to the OS, into the port's count."""
        errors = int(self._tx_batch.counts[1])
        if errors != self._tx_errors:
            self.port.send_errors += errors - self._tx_errors
            self._tx_errors = errors

    def send_sync(self) -> None:
        """The SYNC, then the controller's heartbeat when it is due (every few cycles; the
        drives' consumer, 1016h, stops them when it stays away)."""
        self.port.send_batch(self._sync_batch, pdo_cycle.sync_rows(self.data.hb))
        # its answers arrive after this: a TPDO that arrived before it answers an older SYNC
        t = self.port.sent_at
        self.data.sync_time[0] = np.nan if t is None else t

    def send_rpdos(self, current_A: np.ndarray) -> None:
        """RPDOs: controlword + torque ‰, the current clamped to the drive's peak (the last
        line of the current limit; NaN/Inf → 0) — :func:`exo_rt.bus.pdo_cycle.put_rpdos`, the
        one encoder, whatever the port — sent by the port (its errors counted there)."""
        b = self._tx_batch
        n = pdo_cycle.put_rpdos(self.model, self.data,
                                np.ascontiguousarray(current_A, np.float64), b)
        self.port.send_batch(b, n)
        self._tx_errors = int(b.counts[1])

    @property
    def now(self) -> float:
        """The newest frame time seen (s, the frames' clock)."""
        return float(self.data.now[0])

    def collect(self, deadline: float | None = None) -> None:
        """Read every frame that has arrived into the arrays — polling on until every drive
        has answered or ``deadline`` (monotonic s) passes, or, without a deadline (lockstep),
        until the queue is empty. (It always empties the queue: a reader that stopped at the
        first complete set could stay a whole set behind for ever.) Every port's frames go
        through the same compiled decoder (:func:`exo_rt.bus.pdo_cycle.take_frames`): on a
        port with compiled batches the whole of it is one compiled call
        (:func:`exo_rt.bus.pdo_cycle.gather`), elsewhere the port fills the frame table from
        python-can's messages."""
        port, b, model, data = self.port, self._rx_batch, self.model, self.data
        pdo_cycle.begin(data, -1.0 if deadline is None else deadline)
        tap = port.tap_record() if self._compiled_io() else None
        while True:
            if tap is not None:
                pending = pdo_cycle.gather(b, tap, model, data)
            else:
                pending = pdo_cycle.take_frames(b, port.recv_batch(b), model, data)
            if pending:
                self._python_frames(b, pending)
            if data.done[0]:
                return

    def compiled_cycle(self, current_A: np.ndarray) -> pdo_cycle.CycleBus | None:
        """What :func:`exo_rt.cycle.cycle_call.run` needs of this bus — the receiving and
        sending frame tables, the recording's tap, the bus's model and data, and the commands
        (read in place from ``current_A``): :func:`~exo_rt.bus.pdo_cycle.gather`'s and
        :func:`~exo_rt.bus.pdo_cycle.command`'s arguments — or None where its cycle cannot be
        compiled (a port without compiled batches; a recording that waits for room; commands
        that are not float64 in place)."""
        if not self._compiled_io() or np.ascontiguousarray(current_A, np.float64) is not \
                current_A:
            return None
        return pdo_cycle.CycleBus(rx=self._rx_batch, tx=self._tx_batch,
                                  tap=self.port.tap_record(), model=self.model,
                                  data=self.data, current=current_A)

    def handed_back(self, pending: int) -> None:
        """The ``pending`` frames the compiled cycle handed back (EMCY, error frames, other
        devices' frames), taken here."""
        self._python_frames(self._rx_batch, pending)

    def _frame(self, msg: can.Message) -> None:
        """One frame read on its own (during bring-up): through the cycle's decoder, judged
        against the last cycle's SYNC."""
        one = self._one
        one.put(0, msg)
        self._python_frames(one, pdo_cycle.take_tpdos(one, 1, self.model, self.data))

    def _python_frames(self, b: fastio.FrameBatch, pending: int) -> None:
        """The rows of a frame table the compiled path handed back (``data.python_rows``)."""
        for i in range(pending):
            arb, data, t, ext, err, _rtr = b.frame(int(self.data.python_rows[i]))
            if err:
                self._bus_error(self.port.frame.set(arb, data, t, ext, err))
                continue
            k = self._node_slot.get(arb & 0x7F)
            if k is None:
                listener = self.listeners.get(arb)
                if listener is not None:
                    listener(self.port.frame.set(arb, data, t, ext))
                continue
            decoded = c.decode_emcy(data)  # (the only other kind handed back)
            if decoded is not None and decoded[0] != c.EMCY_NO_ERROR:
                self.flags[k] |= F_FAULT
                self.emcy_codes.append((arb & 0x7F, decoded[0]))

    def _bus_error(self, msg) -> None:
        """A CAN error frame (socketcan): every drive of the bus flagged, the cause kept."""
        bus_off, cause = decode_error_frame(msg.arbitration_id, msg.data)
        self.bus_errors.append((msg.timestamp, bus_off, cause))
        self.flags |= F_BUS_ERROR

    def cycle(self, current_A: np.ndarray, deadline: float | None = None) -> None:
        """One control cycle: commands and SYNC out, measurements in."""
        self.send_commands(current_A)
        self.collect(deadline)

    def paced_cycle(self, current_A: np.ndarray) -> None:
        """A bring-up cycle at the control period: the answers are waited for (a drive in
        another process or on a real bus answers within the period), then the rest of the
        period passes — real drives see SYNCs at the rate they are configured for."""
        start = time.monotonic()
        self.cycle(current_A, deadline=start + 0.7 * self.period)
        rest = start + self.period - time.monotonic()
        if rest > 0:
            time.sleep(rest)


def warm_up_records(top) -> None:
    """Compile (or load) the records every CiA 402 bus of ``top`` makes when its drives are
    built (their constructors, the port's batch): a bus's host side built on a python-can
    ``virtual`` bus, as a run builds it on its own."""
    from exo_rt.bus import protocols

    for b in top.buses:
        if protocols.get(b.protocol).host_class() is Drives:
            bus = can.Bus(interface="virtual", channel=f"warm-{id(b)}")
            try:
                Drives(bus, b, top.robot, period=1.0 / top.rate_hz)
            finally:
                bus.shutdown()
