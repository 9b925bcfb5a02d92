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
        # when this cycle's TPDOs are stamped, from the last cycle (compiled code keeps it)
        self._expect = np.full(1, np.nan)
        # when the last SYNC left, on the frames' (wall) clock (NaN: none yet; compiled code
        # keeps it)
        self._sync_at = np.full(1, np.nan)
        # cycle arrays
        self.position = np.zeros(self.n)  # joint angle (rad) from the motor encoder
        self.current = np.zeros(self.n)  # actual motor current (A)
        self.statusword = np.zeros(self.n, dtype=np.int64)
        self.rx_time = np.zeros(self.n)
        self.flags = np.zeros(self.n, dtype=np.int64)
        self.seen = np.zeros(self.n, dtype=np.int64)
        self.missing_count = np.zeros(self.n, dtype=np.int64)
        self._sampled = np.zeros(self.n)  # the SYNC the last answer answered (its send, s)
        self._trusted = np.zeros(self.n)  # the last answer's SYNC before a gap (s) …
        self._settle = np.zeros(self.n, dtype=np.int64)  # … trusted for this many more cycles
        self.malformed_count = np.zeros(self.n, dtype=np.int64)
        self.emcy_codes: list[tuple[int, int]] = []  # (node, code), read by safety
        self.controlword = np.full(self.n, c.CW_SHUTDOWN, dtype=np.int64)
        self.heartbeat_time = np.full(self.n, np.nan)  # timestamp of the last heartbeat
        self._now = np.zeros(1)  # the newest frame timestamp seen (compiled code keeps it)
        self.commanded = np.zeros(self.n)  # last cycle's current commands (A), after clamping
        # the furthest a joint can move in two 1 ms cycles at its speed limit
        self.max_step = np.array([mech.velocity_limit[j] for j in self.joint_index]) * 2e-3
        self._node_slot = {int(node): k for k, node in enumerate(self.nodes)}
        # frames of other devices on the bus (e.g. the rig's fixture): arbitration id → callback
        self.listeners: dict[int, Callable[[can.Message], None]] = {}
        # optional mapped quantities, kept raw (the drive's units)
        self._extras_raw = np.zeros((self.n, 3), dtype=np.int64)  # the three below, by column
        self.velocity_raw = self._extras_raw[:, 0]
        self.digital_inputs = self._extras_raw[:, 1]
        self.error_code = self._extras_raw[:, 2]
        self.bus_errors: deque[tuple[float, bool, str]] = deque(maxlen=64)  # (t, bus-off, cause)
        self.identity: list[dict] = [{} for _ in range(self.n)]  # what bring-up read
        self.bringup_log: list[tuple] = []  # every SDO of bring-up: (node, op, index, sub, data)
        self.bringup_warnings: list[str] = []  # one line each: what bring-up could not set
        # each drive as bring-up found it: {"state", "statusword", "error_code", "last_error",
        # "stopped"}
        self.found: list[dict] = [{} for _ in range(self.n)]
        # the controller's heartbeat (CiA 301 producer): one frame every _hb[0] SYNCs; _hb[1]
        # counts down to it, _hb[2] holds it back while enable() runs (it starts with the
        # cycle) — an array that compiled code counts (pdo_cycle.sync_rows)
        hb_ms = config.master_heartbeat_ms
        self._hb = np.array([max(1, round(hb_ms * 1e-3 / period)) if hb_ms else 0, 0, 0],
                            np.int64)
        self._hb_cob = c.HEARTBEAT + config.master_node
        # frames of another master on this bus (pdo_cycle.take_tpdos): the controller's node
        # id, how many were seen, the first one's COB-ID (−1: none) — the safety check's
        # foreign_master names it
        self.foreign = np.array([config.master_node, 0, -1], np.int64)
        self._hb_data = bytes((c.HB_OPERATIONAL,))
        # the target torque's range (‰): its integer type's, narrowed by bring-up to the
        # drive's own object limits
        self.torque_limits = [next((e.low, e.high) for e in (d.profile or pdo.DEFAULT_PROFILE).rpdo
                                   if e.kind == pdo.TARGET_TORQUE) for d in config.drives]
        self._codec()

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
        """Compile the cycle's njit helpers (before any drive is enabled)."""
        pdo_cycle.collect_flags(self.seen.copy(), self.statusword.copy(), self.rx_time.copy(),
                                self.heartbeat_time.copy(), 0.0, 0.3, self.period, 0.0,
                                self.flags.copy(), self.missing_count.copy(),
                                self._sampled.copy(), self._trusted.copy(), self._settle.copy())
        b = self._rx_batch  # a table of no rows: nothing is written
        pdo_cycle.take_tpdos(0, b.arbitration_id, b.flags, b.length, b.data, b.time,
                             self._slot_of_node, self._tx_fields, self._tx_size, self._scale,
                             self.period, 0.0, self.commanded, self.seen, self.flags,
                             self.statusword, self.position, self.current, self.rx_time,
                             self._sampled, self._trusted, self._settle, self.malformed_count,
                             self._extras_raw, self.heartbeat_time, self._now,
                             self._python_rows, self.foreign.copy())
        t = self._tx_batch
        pdo_cycle.put_rpdos(np.zeros(self.n), self.controlword, self._rx_cobs, self._rx_fields,
                            self._rx_size, self._peaks, self._permille, self.commanded.copy(),
                            t.arbitration_id, t.flags.copy(), t.length.copy(), t.data.copy())
        self.port.warm_up()
        if self.port.compiled:  # the cycle's I/O in one call each way: on throw-away tables
            pdo_cycle.warm_up_io(self.n)

    def _codec(self) -> None:
        """The in-loop PDO codec of each drive, precomputed from its mapping and units."""
        profiles = [d.profile or pdo.DEFAULT_PROFILE for d in self.config.drives]
        tpdos = [pdo.Layout(p.tpdo) for p in profiles]
        rpdos = [pdo.Layout(p.rpdo) for p in profiles]
        # where each quantity sits in each drive's PDOs (exo_rt.bus.pdo_cycle)
        self._tx_fields = np.stack([pdo_cycle.fields(t, pdo_cycle.TPDO_NAMES) for t in tpdos])
        self._rx_fields = np.stack([pdo_cycle.fields(r, pdo_cycle.RPDO_NAMES) for r in rpdos])
        target = self._rx_fields[:, pdo_cycle.RPDO_TARGET]
        target["low"], target["high"] = np.array(self.torque_limits, np.int64).T
        self._tx_size = np.array([t.size for t in tpdos], np.int64)
        self._rx_size = np.array([r.size for r in rpdos], np.int64)
        self._rx_cobs = np.array([c.RPDO1 + int(node) for node in self.nodes], np.int64)
        # the mapped current-like quantity × this / 1000 = A
        per_mille = np.array([
            {pdo.CURRENT: self.rated_current[k], pdo.CURRENT_MA: 1.0,
             pdo.TORQUE: self.rated_torque[k] / self.torque_constant[k]}[tx.current_kind]
            for k, tx in enumerate(tpdos)])
        # per drive: rad per increment, A per unit, the largest step between two samples (rad),
        # the speed limit (rad/s), the peak current (A)
        self._scale = np.stack([2 * np.pi / self.counts_per_rev / self.multiplier,
                                per_mille / 1000.0, self.max_step, self.max_step / 2e-3,
                                self.peak_current], axis=1).astype(np.float64)
        self._permille = 1000.0 * self.torque_constant / self.rated_torque  # ‰ per A
        self._peaks = self._scale[:, 4].copy()
        self._rx_batch = self.port.batch(max(32, 4 * self.n))  # one frame table each way
        # the RPDOs, then the SYNC and the controller's heartbeat (sent with them in one call
        # where the port's batches are compiled)
        self._tx_batch = self._sync_rows_at(self.port.batch(self.n + 2), self.n)
        self._done = np.zeros(1, np.int64)  # pdo_cycle.gather: the cycle's frames are in
        self._when = np.zeros(3)  # pdo_cycle.gather: late before, deadline, first call
        self._extra = np.zeros(1, np.int64)  # pdo_cycle.command: rows after the RPDOs
        # the compiled calls' arguments, built once (again when a recording is attached)
        self._gather_args = self._command_args = None
        self._gather_tap = self._command_tap = self._command_current = None
        self._hb_timeout = 3e-3 * self.config.heartbeat_ms  # s without one: F_HEARTBEAT
        self._tx_errors = 0  # send errors the tx table had counted when last looked at
        self._rx_fd, self._tx_fd = self.port.fds if self.port.compiled else (-1, -1)
        self._slot_of_node = np.full(128, -1, np.int64)
        for node, k in self._node_slot.items():
            self._slot_of_node[node & 0x7F] = k
        self._python_rows = np.zeros(self._rx_batch.capacity, np.int64)
        # the SYNC and the controller's heartbeat on their own (several buses: after them all)
        self._sync_batch = self._sync_rows_at(self.port.batch(2), 0)
        self._one = fastio.FrameBatch(1)  # a frame read on its own (bring-up)

    def _sync_rows_at(self, b: fastio.FrameBatch, row: int) -> fastio.FrameBatch:
        """The SYNC in ``row`` of a frame table and the controller's heartbeat after it."""
        b.arbitration_id[row: row + 2] = (c.SYNC, self._hb_cob)
        b.length[row: row + 2] = (0, len(self._hb_data))
        b.data[row + 1, : len(self._hb_data)] = np.frombuffer(self._hb_data, np.uint8)
        return b

    def enable(self, max_cycles: int = 50, reset_faults: bool = False) -> int:
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
        self._hb[2] = 1
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
                    self.heartbeat_time[np.isnan(self.heartbeat_time)] = self._now[0]
                    return cycle + 1
        finally:
            self._hb[2] = 0
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
        if not self._compiled_out():
            self.send_rpdos(current_A)
            self.send_sync()
            return
        self._sync_at[0] = self._command(current_A, self._sync_rows())

    def _compiled_out(self) -> bool:
        """The commands can go out in one compiled call (a port with compiled batches, and
        no recording that must wait for room: lockstep's)."""
        tap = self.port.tap
        return self.port.compiled and (tap is None or not tap.block_when_full)

    def _command(self, current_A: np.ndarray, extra: int) -> float:
        """The RPDOs and the ``extra`` rows after them (0, the SYNC, the SYNC and heartbeat)
        in one compiled call; returns the send time."""
        port = self.port
        tap = port.tap
        if current_A is not self._command_current or tap is not self._command_tap:
            self._command_current, self._command_tap = current_A, tap
            self._command_args = self._command_arguments(current_A, port, tap)
        self._extra[0] = extra
        t = pdo_cycle.command(*self._command_args)
        self.count_send_errors()
        port.sent_at = t
        return t

    def count_send_errors(self) -> None:
        """The frames the compiled sends could not hand to the OS, into the port's count."""
        errors = int(self._tx_batch.counts[1])
        if errors != self._tx_errors:
            self.port.send_errors += errors - self._tx_errors
            self._tx_errors = errors

    def _command_arguments(self, current_A: np.ndarray, port: FramePort, tap) -> tuple:
        """:func:`exo_rt.bus.pdo_cycle.command`'s arguments for commands in ``current_A`` (the
        controller passes the same array every cycle)."""
        b = self._tx_batch
        header, slots, capacity = ((pdo_cycle.NO_RING_HEADER, pdo_cycle.NO_RING_SLOTS, 0)
                                   if tap is None else (tap.header, tap.slots, tap.capacity))
        current = current_A
        if current.dtype != np.float64 or not current.flags.c_contiguous:
            current = np.ascontiguousarray(current_A, np.float64)  # (a copy: not cached)
            self._command_current = None
        return (self._tx_fd, b.wire, b.headers, b.iov, b.buffers, b.arbitration_id, b.flags,
                b.length, b.data, b.time, b.counts, b.clock, b.bits, header, slots, capacity,
                port.channel_index, current, self.controlword, self._rx_cobs, self._rx_fields,
                self._rx_size, self._peaks, self._permille, self.commanded, self._extra)

    def _sync_rows(self) -> int:
        """The frames after the RPDOs this cycle: the SYNC, and the controller's heartbeat
        when due (every few cycles; the drives' consumer, 1016h, stops them when it stays
        away)."""
        return pdo_cycle.sync_rows(self._hb)

    def send_sync(self) -> None:
        """The SYNC, then the controller's heartbeat when it is due."""
        self.port.send_batch(self._sync_batch, self._sync_rows())
        # its answers arrive after this: a TPDO that arrived before it answers an older SYNC
        t = self.port.sent_at
        self._sync_at[0] = np.nan if t is None else t

    def send_rpdos(self, current_A: np.ndarray) -> None:
        """RPDOs: controlword + torque ‰, the current clamped to the drive's peak (the last
        line of the current limit; NaN/Inf → 0)."""
        if self._compiled_out():
            self._command(current_A, 0)
            return
        b = self._tx_batch
        n = pdo_cycle.put_rpdos(np.ascontiguousarray(current_A, np.float64), self.controlword,
                                self._rx_cobs, self._rx_fields, self._rx_size, self._peaks,
                                self._permille, self.commanded, b.arbitration_id, b.flags,
                                b.length, b.data)
        self.port.send_batch(b, n)

    @property
    def now(self) -> float:
        """The newest frame time seen (s, the frames' clock)."""
        return float(self._now[0])

    def collect(self, deadline: float | None = None) -> None:
        """Read every frame that has arrived into the arrays — polling on until every drive
        has answered or ``deadline`` (monotonic s) passes, or, without a deadline (lockstep),
        until the queue is empty. (It always empties the queue: a reader that stopped at the
        first complete set could stay a whole set behind for ever.) On a port with compiled
        batches the whole of it is one compiled call (:func:`exo_rt.bus.pdo_cycle.gather`)."""
        port = self.port
        tap = port.tap
        if port.compiled and (tap is None or not tap.block_when_full):
            self._gather(port, tap, -1.0 if deadline is None else deadline)
            return
        self.seen[:] = 0
        self.flags[:] = 0
        b = self._rx_batch
        late_before = self._late_before()
        while True:
            n = port.recv_batch(b)
            if n:
                self._take(b, n, late_before)
            if n == b.capacity:
                continue  # more may be waiting
            if deadline is None or self.seen.all() or time.monotonic() >= deadline:
                break
        self._expect[0] = pdo_cycle.collect_flags(
            self.seen, self.statusword, self.rx_time, self.heartbeat_time, self._now[0],
            self._hb_timeout, self.period, self._expect[0], self.flags, self.missing_count,
            self._sampled, self._trusted, self._settle)

    def _gather(self, port: FramePort, tap, deadline: float) -> None:
        if tap is not self._gather_tap or self._gather_args is None:
            self._gather_tap = tap
            self._gather_args = self._gather_arguments(port, tap)
        args, done, when = self._gather_args, self._done, self._when
        when[0] = self._late_before()
        when[1] = deadline
        when[2] = 1.0  # the cycle's first call
        while True:
            pending = pdo_cycle.gather(*args)
            if pending:
                self._python_frames(self._rx_batch, pending)
            if done[0]:
                break

    def _gather_arguments(self, port: FramePort, tap) -> tuple:
        """:func:`exo_rt.bus.pdo_cycle.gather`'s arguments: arrays fixed for the run (built
        again only when a recording is attached or removed)."""
        b = self._rx_batch
        header, slots, capacity = ((pdo_cycle.NO_RING_HEADER, pdo_cycle.NO_RING_SLOTS, 0)
                                   if tap is None else (tap.header, tap.slots, tap.capacity))
        return (self._rx_fd, b.wire, b.headers, b.buffers, b.control, b.arbitration_id,
                b.flags, b.length, b.data, b.time, b.counts, b.scratch, b.clock, header, slots,
                capacity, port.channel_index, b.bits, self._slot_of_node, self._tx_fields,
                self._tx_size, self._scale, self.period, self.commanded, self.seen, self.flags,
                self.statusword, self.position, self.current, self.rx_time, self._sampled,
                self._trusted, self._settle, self.malformed_count, self._extras_raw,
                self.heartbeat_time, self._now, self._python_rows, self._when, self._done,
                self._hb_timeout, self.missing_count, self._expect, self.foreign)

    def compiled_cycle(self, current_A: np.ndarray) -> tuple | None:
        """What :func:`exo_rt.runtime.cycle_call.run` needs of this bus — the arguments of
        :func:`~exo_rt.bus.pdo_cycle.gather` and of :func:`~exo_rt.bus.pdo_cycle.command` (the
        commands read from ``current_A``), the heartbeat counter, gather's ``when`` and
        ``done``, the controlwords and the last SYNC's time — or None where its cycle cannot
        be compiled (a port without compiled batches; a recording that waits for room)."""
        if not self._compiled_out() or np.ascontiguousarray(current_A, np.float64) is not \
                current_A:  # (commands that are not read in place)
            return None
        port, tap = self.port, self.port.tap
        return (self._gather_arguments(port, tap), self._command_arguments(current_A, port, tap),
                self._hb, self._when, self._done, self.controlword, self._sync_at)

    def handed_back(self, pending: int) -> None:
        """The ``pending`` frames the compiled cycle handed back (EMCY, error frames, other
        devices' frames), taken here."""
        self._python_frames(self._rx_batch, pending)

    def _frame(self, msg: can.Message) -> None:
        """One frame read on its own (during bring-up): through the cycle's compiled path."""
        one = self._one
        size = min(len(msg.data), fastio.MAX_DATA)
        one.arbitration_id[0] = msg.arbitration_id
        one.flags[0] = ((fastio.FB_EXTENDED if msg.is_extended_id else 0)
                        | (fastio.FB_ERROR if msg.is_error_frame else 0))
        one.length[0] = size
        one.data[0, :size] = np.frombuffer(bytes(msg.data), np.uint8, size)
        one.time[0] = msg.timestamp
        self._take(one, 1)

    def _late_before(self) -> float:
        """A TPDO stamped before this answers an earlier SYNC: the last SYNC's send time, or,
        where the bus's clock is not the wall clock, half a period before the expected one."""
        sync = self._sync_at[0]
        return self._expect[0] - 0.5 * self.period if sync != sync else sync

    def _take(self, b: fastio.FrameBatch, n: int, late_before: float | None = None) -> None:
        """Rows 0 … n−1 of a frame table into the arrays (:func:`exo_rt.bus.pdo_cycle.take_tpdos`);
        the few it hands back (EMCY, error frames, other devices' frames) here."""
        pending = pdo_cycle.take_tpdos(
            n, b.arbitration_id, b.flags, b.length, b.data, b.time, self._slot_of_node,
            self._tx_fields, self._tx_size, self._scale, self.period,
            self._late_before() if late_before is None else late_before, self.commanded,
            self.seen, self.flags, self.statusword, self.position, self.current, self.rx_time,
            self._sampled, self._trusted, self._settle, self.malformed_count, self._extras_raw,
            self.heartbeat_time, self._now, self._python_rows, self.foreign)
        self._python_frames(b, pending)

    def _python_frames(self, b: fastio.FrameBatch, pending: int) -> None:
        """The rows of a frame table the compiled path handed back (``_python_rows``)."""
        for i in range(pending):
            arb, data, t, ext, err, _rtr = b.frame(int(self._python_rows[i]))
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
