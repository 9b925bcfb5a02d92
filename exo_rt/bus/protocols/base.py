"""What every drive protocol's host side and emulated drive offer: the seam of the registry.

**Host side** (one bus of one family's drives; the controller, the bench and replay use only
this): ``configure()`` (bring-up: identity, units, the drive-side communication timeout, the
absolute angle), ``enable(max_cycles, reset_faults)`` (→ cycles it took), ``disable()``,
``fault_reset()`` (the operator's explicit action), ``request_disable()`` (the next cycle's
frames disable the drives — no I/O now, safe inside the cycle), ``send_rpdos(current_A)``
(the cycle's commands, each current clamped to the drive's peak — NaN → 0 — in the encoder,
the last line), ``send_sync()``, ``collect(deadline)`` (every frame that arrived, into the
preallocated ``position`` (joint angle, rad), ``current`` (motor current, A) and ``flags``
arrays — the controller may replace these three by views of its own arrays),
``cycle``/``paced_cycle``, ``warm_up()``. Attributes: ``bus``, ``port``, ``config``, ``n``,
``nodes``, ``joint_index``, ``listeners`` (arbitration id → callback for other devices' frames,
e.g. the rig's fixture), ``bus_errors``, ``bringup_warnings``, ``identity``, ``found``.
:class:`exo_rt.bus.drives.Drives` (CiA 402) is one; :class:`ReplyDrives` is the base of the
families whose drives answer each command frame at once (MIT mode, RMD-X).

**Emulated drive** (the simulated bus, :mod:`exo_rt.sim.simbus`): see :class:`EmulatedDevice`.
"""

from __future__ import annotations

import abc
import math
import time
from collections import deque
from collections.abc import Callable

import can
import numpy as np

from exo_rt.bus.drives import arrivals
from exo_rt.bus.errframe import decode_error_frame
from exo_rt.bus.flags import (
    F_BUS_ERROR,
    F_FAULT,
    F_GLITCH,
    F_LATE,
    F_MALFORMED,
    F_MISSING,
    F_NOT_ENABLED,
    F_SATURATED,
)
from exo_rt.bus.port import open_port
from exo_rt.errors import BusError

SYNC_ID = 0x080  # the lockstep tick a reply-per-command bus still carries (nothing answers it)


class ReplyDrives(abc.ABC):
    """One bus of drives that answer each command frame at once with their state.

    Subclasses give the frames (:meth:`command_frame`, :meth:`idle_frame`, :meth:`decode`)
    and the bring-up (:meth:`configure`, :meth:`enable`, :meth:`disable`,
    :meth:`fault_reset`); the cycle, the flags and their arrays are here. ``status`` holds
    the family's own state word per drive, ``error_code`` the drive's latest error code
    (nonzero: F_FAULT, latched until :meth:`fault_reset`)."""

    def __init__(self, bus: can.BusABC, config, mech, sdo_timeout: float = 0.5,
                 period: float = 1e-3) -> None:
        self.bus = bus
        self.port = open_port(bus)
        self.config = config
        self.period = period
        self.reply_timeout = sdo_timeout  # s: how long bring-up waits for an answer
        self.n = n = len(config.drives)
        self.nodes = np.array([d.node for d in config.drives])
        self.joint_index = np.array([mech.joint_names.index(d.joint) for d in config.drives])
        tr = {t.joint: t for t in mech.transmissions}
        self.multiplier = np.array([tr[d.joint].multiplier for d in config.drives])
        self.torque_constant = np.array([d.scale.torque_constant for d in config.drives])
        self.peak_current = np.array([d.scale.peak_current for d in config.drives])
        self.position = np.zeros(n)  # joint angle (rad)
        self.current = np.zeros(n)  # motor current (A)
        self.flags = np.zeros(n, dtype=np.int64)
        # the foreign-master watch every host side has (exo_rt.bus.pdo_cycle's layout: own
        # node, frames seen, first COB-ID): a reply protocol has no SYNC or NMT master to
        # watch for, so it stays at none seen
        self.foreign = np.array([0, 0, -1], np.int64)
        self.seen = np.zeros(n, dtype=np.int64)
        self.rx_time = np.zeros(n)
        self._sampled = np.zeros(n)  # the command the last reply answered (its send, s)
        self.missing_count = np.zeros(n, dtype=np.int64)
        self.malformed_count = np.zeros(n, dtype=np.int64)
        self.status = np.zeros(n, dtype=np.int64)  # the family's state word
        self.error_code = np.zeros(n, dtype=np.int64)  # latched until fault_reset
        self.temperature = np.full(n, np.nan)  # °C, where the replies carry it (NaN: none)
        self.enabled = np.zeros(n, dtype=bool)  # the host's view: commands are applied
        self.commanded = np.zeros(n)  # last cycle's current commands (A), after clamping
        self.now = 0.0
        self.max_step = np.array([mech.velocity_limit[j] for j in self.joint_index]) * 2e-3
        self._max_step = [float(x) for x in self.max_step]
        self._speed_limit = [x / 2e-3 for x in self._max_step]
        self._peak = [float(x) for x in self.peak_current]
        self._slot = {int(node): k for k, node in enumerate(self.nodes)}
        self._disable = False  # request_disable(): the next commands disable instead
        self._sent = None  # when this cycle's first command left (wall clock; None: simulated)
        self._expect = math.nan  # simulated clock: when this cycle's replies are stamped
        self.listeners: dict[int, Callable[[can.Message], None]] = {}
        self.bus_errors: deque[tuple[float, bool, str]] = deque(maxlen=64)
        self.emcy_codes: list[tuple[int, int]] = []  # (node, error code) as they came
        self.identity: list[dict] = [{} for _ in range(n)]
        self.found: list[dict] = [{} for _ in range(n)]
        self.bringup_log: list[tuple] = []
        self.bringup_warnings: list[str] = []

    # ------------------------------------------------------------------ family's frames
    @abc.abstractmethod
    def command_frame(self, k: int, current: float) -> tuple[int, bytes]:
        """Drive k's command for ``current`` (A, already clamped and finite)."""

    def idle_frame(self, k: int) -> tuple[int, bytes] | None:
        """What drive k gets each cycle while disabled (answered with its state), or None."""
        return None

    def extra_frames(self) -> None:
        """Frames the family adds after the commands each cycle (e.g. a status poll)."""
        return None  # none by default

    @abc.abstractmethod
    def decode(self, msg) -> int:
        """Decode one frame into the arrays; returns its drive's slot, -1 for a frame not of
        this family (then the listeners get it), -2 for a malformed reply (slot unknown).
        Never raises."""

    # ------------------------------------------------------------------ bring-up helpers
    def _send(self, arb: int, data: bytes) -> None:
        self.port.send(arb, data)

    def exchange(self, frames: list[tuple[int, bytes]], what: str,
                 answered: Callable[[], np.ndarray] | None = None) -> None:
        """Send ``frames`` (one per drive) and wait until every drive answered (each period
        without the answers the tick goes too, at the control rate, so that a simulated bus
        in lockstep moves on); a silent drive is one BusError line."""
        self.seen[:] = 0
        self._sent, self._expect = None, math.nan  # bring-up: no cycle to be late for
        for arb, data in frames:
            self._send(arb, data)
            self.bringup_log.append((arb, "send", data.hex()))
        now = time.monotonic()
        deadline, tick = now + self.reply_timeout, now + self.period
        while True:
            self._collect_into()
            done = self.seen if answered is None else answered()
            if done.all():
                return
            now = time.monotonic()
            if now > deadline:
                silent = [int(self.nodes[k]) for k in range(self.n) if not done[k]]
                raise BusError(
                    f"drive {', '.join(map(str, silent))} on bus '{self.config.name}' "
                    f"({self.config.protocol}) does not answer {what}", None,
                    "check that it is powered, its id and the bit rate, and the bus's "
                    "termination (docs/bus.md)")
            if now >= tick:  # a period without the answers: the tick, at the control rate
                self._send(SYNC_ID, b"")
                tick = now + self.period
            time.sleep(1e-4)

    # ------------------------------------------------------------------ state changes
    def states(self) -> list[str]:
        """Each drive's state as the host knows it: its error, else enabled or disabled."""
        return [f"error {int(self.error_code[k]):#06x} ({self.error_name(int(self.error_code[k]))})"
                if self.error_code[k] else "enabled" if self.enabled[k] and not self._disable
                else "disabled" for k in range(self.n)]

    def protection(self) -> dict:
        """What each drive does by itself when the controller goes silent (node → what
        bring-up set; the family's own keys)."""
        return {str(int(node)): {} for node in self.nodes}

    def disable(self) -> None:
        """Zero current, then the family's disabled frame (its ``idle_frame``: MIT's EXIT,
        RMD-X's 80h) for one paced cycle."""
        self.request_disable()
        self.paced_cycle(np.zeros(self.n))
        self.enabled[:] = False

    def request_disable(self) -> None:
        """From the next cycle on, every drive gets the family's disable frame instead of its
        command (the SAFE ramp's end, STOPPING's end, ctrl-C)."""
        self._disable = True

    def compiled_cycle(self, current_A: np.ndarray) -> None:
        """None: a reply protocol's frames are read and written in Python (HostDrives)."""
        return None

    def handed_back(self, pending: int) -> None:
        """Never called: no compiled cycle hands this bus's frames back (HostDrives)."""
        return None

    def count_send_errors(self) -> None:
        """Nothing to count: its sends are Python's, and counted as they fail (HostDrives)."""
        return None

    def warm_up(self) -> None:
        """Nothing compiled here (the cycle's per-frame work is plain Python)."""
        return None

    # ------------------------------------------------------------------ the cycle
    def send_commands(self, current_A: np.ndarray) -> None:
        self.send_rpdos(current_A)
        self.send_sync()

    def send_rpdos(self, current_A: np.ndarray) -> None:
        """Each drive's command, the current clamped to the drive's peak (NaN/Inf → 0) — or,
        disabled, its idle frame; then the family's extra frames."""
        send = self.port.send
        self._sent = None
        if self._disable or not self.enabled.all():
            for k in range(self.n):
                self.commanded[k] = 0.0
                frame = self.idle_frame(k)
                if frame is not None:
                    send(frame[0], frame[1])
                    self._sent = self._sent or self.port.sent_at
        else:
            currents = current_A.tolist()
            for k in range(self.n):
                peak = self._peak[k]
                i = currents[k]
                i = 0.0 if i != i or i in (math.inf, -math.inf) else min(max(i, -peak), peak)
                self.commanded[k] = i
                arb, data = self.command_frame(k, i)
                send(arb, data)
                self._sent = self._sent or self.port.sent_at
        self.extra_frames()

    def send_sync(self) -> None:
        """The lockstep tick (0x080): no drive of these families listens to it; a simulated
        bus advances its physics on it, as for CiA 402."""
        self.port.send(SYNC_ID, b"")

    def _collect_into(self, deadline: float | None = None) -> None:
        for msg in arrivals(self.port, self.seen, deadline):
            if msg.is_error_frame:
                bus_off, cause = decode_error_frame(msg.arbitration_id, msg.data)
                self.bus_errors.append((msg.timestamp, bus_off, cause))
                self.flags |= F_BUS_ERROR
                continue
            self.now = max(self.now, msg.timestamp)
            k = self.decode(msg)
            if k == -1:
                listener = self.listeners.get(msg.arbitration_id)
                if listener is not None:
                    listener(msg)

    def collect(self, deadline: float | None = None) -> None:
        """Every frame that has arrived (until ``deadline`` on a real bus) into the arrays,
        then the flags: missing, fault (latched error code), not enabled."""
        self.seen[:] = 0
        self.flags[:] = 0
        self._collect_into(deadline)
        newest = -1.0
        for k in range(self.n):
            if self.seen[k]:
                newest = max(newest, self.rx_time[k])
            if not self.seen[k]:
                self.flags[k] |= F_MISSING
                self.missing_count[k] += 1
            if self.error_code[k]:
                self.flags[k] |= F_FAULT
            if not self.enabled[k] or self._disable:
                self.flags[k] |= F_NOT_ENABLED
        # the next cycle's replies are due a period after this one's (after a cycle with none,
        # a period after that cycle's due time: a reply held back a period is then late)
        self._expect = newest + self.period if newest >= 0.0 else self._expect + self.period

    def store(self, k: int, q: float, current: float, t: float) -> None:
        """A reply's joint angle (rad) and current (A) stamped ``t``: glitch, saturation and
        late flags (a reply older than this cycle's first command — or, on a bus with its own
        clock, stamped over half a period before this cycle's — answers an earlier cycle).

        The glitch bound runs over the time between the commands two replies answer (the
        drive samples its encoder when the command arrives), not between the replies'
        arrivals: after the controller was held up, the reply to the command before the
        hold-up arrives late, the next one soon after it, the hold-up's motion between them."""
        sent = self._sent
        sample = self._expect - 0.5 * self.period if sent is None else sent
        if t < sample:
            self.flags[k] |= F_LATE
            return
        since = self._sampled[k]
        if self.rx_time[k] > 0 and since == since and abs(q - self.position[k]) > max(
                self._max_step[k], self._speed_limit[k] * (sample - since + self.period)):
            self.flags[k] |= F_GLITCH  # (NaN: no command's time known yet)
        self.position[k] = q
        self.current[k] = current
        if (self.enabled[k] and not self._disable
                and abs(self.commanded[k] - current) > 0.2 * self._peak[k]):
            self.flags[k] |= F_SATURATED
        self.rx_time[k] = t
        self._sampled[k] = sample
        self.seen[k] = 1

    def malformed(self, k: int) -> None:
        self.flags[k] |= F_MALFORMED
        self.malformed_count[k] += 1

    def cycle(self, current_A: np.ndarray, deadline: float | None = None) -> None:
        self.send_commands(current_A)
        self.collect(deadline)

    def paced_cycle(self, current_A: np.ndarray) -> None:
        """A bring-up cycle at the control period (the answers waited for, then the rest of
        the period passes)."""
        start = time.monotonic()
        self.cycle(current_A, deadline=start + 0.7 * self.period)
        rest = start + self.period - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    def found_stopped(self) -> str | None:
        """What bring-up found stopped on this bus (one line, as enabling would refuse it), or
        None: for a report made before anything is enabled."""
        slots = [k for k in range(self.n) if self.found[k].get("stopped")]
        return self._stopped_error(slots).what if slots else None

    def _stopped_error(self, slots: list[int], after_reset: bool = False) -> BusError:
        parts = [f"drive {int(self.nodes[k])} reports error {int(self.error_code[k]):#06x} "
                 f"({self.error_name(int(self.error_code[k]))})" for k in slots]
        name = self.config.name
        if after_reset:
            return BusError(f"on bus '{name}' " + ", ".join(parts) + " after the fault reset",
                            None, "the cause is still there: check the motor (supply, "
                                  "temperature, its error in the vendor's manual)")
        return BusError(f"on bus '{name}' " + ", ".join(parts) + ": it stays stopped until "
                        "cleared", None, "check the motor and what stopped it, then start "
                        "again with --reset-faults (exo-rt run --reset-faults)")

    def error_name(self, code: int) -> str:
        return "error"


class EmulatedDevice:
    """The interface the simulated bus (:class:`exo_rt.sim.simbus.SimWorld`) uses for every
    family's emulated drive; defaults for a drive without heartbeat or own clock.

    - ``from_config(drive, bus, period)``: build it from the bus file's drive and bus;
    - ``plant``: set by the world, a callable → (rotor angle rad, rotor speed rad/s, motor
      current A) of the drive's motor now;
    - ``handle(arb, data)`` → frames it answers at once (bring-up, commands it answers
      before the next tick); ``cyclic(arb, data)``: whether a host frame is the cycle's
      traffic to it (it shares the period's bits);
    - ``on_sync()`` → the current (A) the plant gets for the next period (the latched
      command applied);
    - ``current_command()`` → the current it commands now (between ticks);
    - ``sync_frames(rotor, current)`` → the frames it sends after the period's physics
      (replies to this period's commands; a CiA 402 drive's TPDO);
    - ``tick(t)`` → frames from its own clock (timeouts, heartbeat consumers);
    - ``inject_fault()`` → frames it sends on entering its fault state;
    - ``node``, ``scale``, ``heartbeat_ms`` (0: none), ``nmt_state``, ``power_on``,
      ``enabled``, ``saturation`` ((until period, A): the world's injected current limit).
    """

    heartbeat_ms = 0
    nmt_state = 0
    saturation = (0, 0.0)
    plant: Callable[[], tuple[float, float, float]] = staticmethod(lambda: (0.0, 0.0, 0.0))

    def handle(self, arb_id: int, data: bytes) -> list[tuple[int, bytes]]:
        return []

    def cyclic(self, arb_id: int, data: bytes) -> bool:
        """Whether a host frame is the cycle's traffic to this drive (it shares the period's
        bits on the simulated bus; bring-up's frames do not)."""
        return False

    def on_sync(self) -> float:
        return self.current_command()

    def current_command(self) -> float:
        return 0.0

    def sync_frames(self, rotor: float, current: float) -> list[tuple[int, bytes]]:
        return []

    def tick(self, t: float) -> list[tuple[int, bytes]]:
        return []

    def inject_fault(self) -> list[tuple[int, bytes]]:
        return []
