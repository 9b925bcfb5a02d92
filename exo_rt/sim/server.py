"""Emulated drives and the plant served in real time to a controller in another process.

The simulation's process stands where the drives and the leg stand on the exoskeleton: the
controller reaches it through a standard python-can interface, exactly like real drives, so
the controller process under test is the one that runs on the exoskeleton.

One thread does everything, so nothing here shares a GIL with anything: it waits on the buses'
sockets until a frame arrives or the next physics deadline comes; frames go to the emulated
drives at once (a SYNC applies their latched commands and answers with TPDOs from the current
plant state, as a drive samples its encoder on SYNC), the physics having first advanced to the
SYNC's arrival — most of the period's physics computed ahead, once the SYNCs before were
answered (:meth:`RealtimeServer._sync_arrived`); heartbeats go out on the wall clock. The
exoskeleton's embedded board, emulated, runs in the same loop: its motor power relay feeds the
simulated drives (power off: no current, whatever a drive was told). Command lines on an
optional descriptor (the starting process's pipe) inject faults as the lockstep bus does:
``fault KIND CHANNEL NODE CYCLES``; ``cut SECONDS`` cuts the bus between the controller and the
drives (nothing passes either way); ``truth RING`` hands the world's truth to the recording's
ring of that name (:mod:`exo_rt.sim.world_truth`); ``lead`` makes the prepared leading wearer
the world's (their own torques from the next physics period on, towards the cycle's reference
rows the controller's side shares: :mod:`exo_rt.sim.lead`); and the board's ``estop 1``,
``stall SECONDS``, ``walk`` (:func:`firmware_bridge.emulator.apply_command`). A
:class:`~exo_rt.sim.trace.PlantTrace`, if given, records the leg after every period. When the
controller that started it is gone, it goes on for ``linger`` seconds (the drives' and the
board's own reactions to a silent master stay observable) and then ends."""

from __future__ import annotations

import math
import os
import select
import sys
import time

import numpy as np

from exo_rt.bus.port import FramePort
from exo_rt.record.rings import RecordRing, prepare_attach
from exo_rt.sim.simbus import SimWorld
from exo_rt.unraisable import Swallowed

POLL_S = 1e-4  # s between looks at the sockets: a frame waits at most this long
FREE_RUN = 1.5  # periods without a SYNC after which the physics runs on by itself
STRETCH = 1.25  # the longest physics step, in periods (the plant divides it in sub-steps)
SETTLE = 0.15  # periods after a SYNC: the physics is computed ahead then (every bus's SYNC in)
GUARD = 0.1  # periods: the physics computed ahead stops this far before the next SYNC is due
JITTER = 0.05  # periods: a SYNC this close to the physics' instant is answered from it
LATE_CYCLES = 8  # the next SYNC is expected as late as the least late of this many before it
EARLY = 0.1  # periods: a SYNC up to this much before the one due moves the grid earlier
ANSWER_FIRST = FREE_RUN  # periods: a SYNC at most this long after the physics' instant is
# answered at once — the encoders read along each rotor's speed — and the physics up to its
# arrival is computed after the answers left (RealtimeServer._answer); FREE_RUN, so that the
# first SYNC after the physics ran on by itself (FREE_RUN − 1 to FREE_RUN behind) is so too
MAX_CATCH_UP = 0.05  # s of physics made up at once after this process was held up; beyond it
# the simulated time falls behind instead (counted as overruns, in periods)
SYNC = 0x080
TPDO_IDS = range(0x180, 0x500)  # CiA 301's TPDO1…4 COB-IDs (0x180 + node … 0x480 + node)


def _fine_timer_slack() -> None:
    """Sleep no longer than asked: Linux lets a SCHED_OTHER sleep run 50 µs late by default."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, 1 µs
    except (OSError, AttributeError):
        pass


class RealtimeServer:
    """Serve ``world``'s buses (channel → port) at wall-clock rate."""

    def __init__(self, world: SimWorld, ports: dict[str, FramePort], board=None,
                 commands: int | None = None, trace=None, leader=None) -> None:
        self.world = world
        self.leader = leader  # a prepared exo_rt.sim.walker.Leader (``lead``), or None
        self.trace = trace  # an exo_rt.sim.trace.PlantTrace, or None
        self.cut_until = -1.0  # monotonic s: until then the bus is cut (nothing passes)
        self.frames_cut = 0
        self.ports = ports
        self.board = board  # a firmware_bridge.emulator.BoardEmulator, or None
        if board is not None and world.truth is not None:  # in the world: the feet's
            board.soles = world.truth.soles  # contacts press its sole sensors, not a timer
        if world.truth is not None:  # the recording's ``truth`` ring comes while it serves:
            prepare_attach()  # its attach then imports nothing and starts no resource tracker
            # (≈ 0.5 ms less of the serving loop), and the process's mlockall locks its pages
            # as they are touched, not all at once (exo_rt.cli.drives; docs/world.md)
        self.truth_attach_s = None  # s: what attaching the truth ring took (the report)
        self.commands = commands  # a readable descriptor of command lines, or None
        self._pending = b""
        self.period = world.dt
        world.realtime = True  # a SYNC applies and answers; the physics keeps its own time
        world.defer_apply = True  # … its commands committed once the physics reached it
        world.trail = None  # (what SAFE did to the wearer is the lockstep world's to run on)
        self._settle: list[tuple[float, str]] = []  # (arrival, bus) of SYNCs answered first
        world.wall_heartbeats = True
        self.overruns = 0
        self.frames_in = 0
        self.frames_out = 0
        self.superseded = 0  # TPDOs not sent: a newer SYNC came in the same turn (see _answer)
        self.answer_us = np.zeros(1 << 16)  # time to answer what a wake-up brought (ring)
        self.physics_us = np.zeros(1 << 16)  # time of a physics period (ring)
        self.n_answer = 0
        self.n_physics = 0
        self.worst_gap = 0.0  # s: the longest one turn of the serving loop took
        self._t_phys = time.monotonic()  # the instant the physics has reached
        self._grid = None  # monotonic s: a deadline of the master's grid (see _sync_arrived)
        self._slot = 0.0  # monotonic s: the arrival of the last cycle's first SYNC
        self._due = 0.0  # monotonic s: when the next cycle's SYNC is due, at the earliest
        self._late = np.zeros(LATE_CYCLES)  # s: the last cycles' SYNCs after their deadlines
        self._n_late = 0
        self._ahead_at = None  # monotonic s: when to compute the next period ahead, or None
        self.ahead = 0  # SYNCs that found the physics already past their arrival (see below)
        # each bus's frames read as a table, one system call and one compiled decoding for
        # what a turn finds (exo_rt.bus.fastio; a port without them reads frame by frame):
        # a bus's SYNC and two RPDOs in 35–54 µs against 65–97 frame by frame
        # (tools/bench_ports.py). The answers still go frame by frame: sent as a table they
        # cost the same (53 against 56 µs for six), the loopback's delivery being most of it
        self._rows_in = {channel: port.batch() for channel, port in ports.items()}
        for port in ports.values():
            port.warm_up()  # (loaded now, not at the first frame)
        self._fds = []
        for port in ports.values():
            sock = getattr(port, "sock", None)
            self._fds.append(sock.fileno() if sock is not None else None)
        self._next_beat: dict[tuple[str, float], float] = {}

    def _answer(self) -> int:
        """Hand what has arrived to the drives and send their answers; the frames handled.

        **Answer first.** A drive answers its SYNC within µs, from its encoder as it reads it
        then. A SYNC that comes up to ANSWER_FIRST periods after the instant the physics has
        reached (the rest of the period not computed ahead: a SYNC later than the last ones)
        is answered at once, the encoders read along each rotor's speed to its arrival
        (``SimWorld.sample_offset``), and the physics up to its arrival — under the commands
        of the SYNC before, which are the drives' until this one — is computed after the
        answers left (:meth:`settle`); then the commands it latched become the plant's
        (``SimWorld.commit``). So the answer no longer waits for that physics (measured on the
        floor: 0.12–0.15 ms of the answer's 0.35 at p50, docs/world.md). A SYNC later than
        that (this process held up) waits for its physics, as every SYNC did before.

        Up to 1.5 periods, not half of one: the first SYNC after the physics ran on by itself
        (the controller's first cycles, its first after a pause) finds it 0.5–1.5 periods
        behind, and its answer waited for that physics (0.3–0.8 ms on the floor) — the
        controller's cycle 0 went without one in 4 of 6 runs; so did a SYNC a little later
        than those before it. Read along the speed over 1.5 periods, an encoder misses at most
        ½·α·(1.5 T)² of its rotor's acceleration α (docs/world.md: 0.006° at a joint).

        A turn that finds several SYNCs waiting (this process was held up past a period: a
        virtual machine's host, a busy CPU) applies each in order — the physics to each one's
        arrival, the commands latched before it — but sends the TPDOs of the newest only: a
        drive answers a SYNC within its own µs and is never held, so the answers to the older
        SYNCs would have been on the wire periods ago; sent now they would reach the
        controller together, two answers to one cycle's SYNC as it reads them (its safety
        check's ``duplicate_answer``). Their cycles see no answer instead — what they would
        have seen of a frame lost on the wire. Counted (``superseded``)."""
        world = self.world
        handled = 0
        period = self.period
        for channel, port in self.ports.items():
            rx = world.endpoints[channel].rx
            answers: list = []  # the TPDOs of this turn's last SYNC, not sent yet
            rows = self._rows_in[channel]
            for frame in self._arrived(port, rows):
                self.frames_in += 1
                handled += 1
                if time.monotonic() < self.cut_until:  # the wire is cut: never arrived
                    self.frames_cut += 1
                    continue
                if frame.arbitration_id == SYNC:  # the drives sample the leg at this instant
                    # (when it arrived, as the kernel stamped it — not when this loop got to it)
                    age = max(0.0, min(time.time() - frame.timestamp, MAX_CATCH_UP))
                    t = time.monotonic() - age
                    first = t - self._t_phys <= ANSWER_FIRST * period
                    if not first or any(c == channel for _, c in self._settle):
                        self.settle()  # (an older SYNC of this turn: its physics and commands
                        # first; another bus's wait for this one's physics only when it must)
                        first = t - self._t_phys <= ANSWER_FIRST * period
                    if first:
                        world.sample_offset = t - self._t_phys
                    else:
                        self._sync_arrived(t)
                    for msg in answers:  # an older SYNC's answers: superseded by this one
                        rx.remove(msg)
                    self.superseded += len(answers)
                    before = len(rx)
                    world.receive(channel, frame)
                    answers = [msg for i, msg in enumerate(rx)
                               if i >= before and msg.arbitration_id in TPDO_IDS]
                    if first:
                        self._settle.append((t, channel))
                    else:
                        world.commit(channel)
                    continue
                world.receive(channel, frame)
            while rx:
                msg = rx.popleft()
                if time.monotonic() < self.cut_until:
                    self.frames_cut += 1
                    continue
                port.send(msg.arbitration_id, bytes(msg.data))
                self.frames_out += 1
        return handled

    @staticmethod
    def _arrived(port: FramePort, rows):
        """Every frame that has arrived on ``port``, in order, each in the port's reusable
        frame (decoded before the next is asked for): read a table at a time."""
        while True:
            n = port.recv_batch(rows)
            if not n:
                return
            for i in range(n):
                yield port.frame.set(*rows.frame(i))

    def settle(self) -> None:
        """The SYNCs answered first: the physics to each one's arrival, in order, and then the
        commands it latched (:meth:`_answer`)."""
        if not self._settle:
            return
        pending, self._settle = sorted(self._settle), []
        for t, channel in pending:
            self._sync_arrived(t)
            self.world.commit(channel)

    def _read_commands(self) -> bool | None:
        try:
            chunk = os.read(self.commands, 4096)
        except BlockingIOError:
            return None
        if not chunk:
            return False
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for raw in lines:
            self.command(raw.decode(errors="replace"))
        return True

    def command(self, line: str) -> None:
        """Apply one command line (see the module's docstring); malformed ones are ignored."""
        words = line.split()
        if not words:
            return
        if words[0] == "fault" and len(words) == 5:
            try:
                self.world.inject(words[1], words[2], int(words[3]), int(words[4]))
            except (ValueError, KeyError, StopIteration):
                pass
        elif words[0] == "truth" and len(words) == 2:  # the recording's world-truth ring
            if self.world.truth is not None:
                t0 = time.perf_counter()
                try:
                    self.world.truth.record(RecordRing(name=words[1]))
                except (OSError, ValueError):
                    pass  # (gone already: the run records no truth)
                self.truth_attach_s = time.perf_counter() - t0
        elif words[0] == "lead" and len(words) == 1:  # the session began: they lead
            if self.leader is not None:
                self.world.wearer = self.leader
        elif words[0] == "cut" and len(words) == 2:
            try:
                self.cut_until = time.monotonic() + max(0.0, float(words[1]))
            except ValueError:
                pass
        elif self.board is not None:
            from firmware_bridge.emulator import apply_command

            apply_command(self.board, line)

    def _heartbeats(self, now: float) -> None:
        for channel, port in self.ports.items():
            periods = {d.heartbeat_ms for d, _ in self.world.endpoints[channel].drives}
            for period in periods:
                if not period:
                    continue
                due = self._next_beat.setdefault((channel, period), now)
                if now >= due:
                    for msg in self.world.heartbeats(channel, period):
                        if now < self.cut_until:
                            self.frames_cut += 1
                            continue
                        port.send(msg.arbitration_id, bytes(msg.data))
                    self._next_beat[(channel, period)] = max(due + period * 1e-3, now)

    def _sync_arrived(self, t: float) -> None:
        """A SYNC arrived at ``t`` (monotonic s): the physics to that instant (the rest of
        what was computed ahead), and the next period's computation ahead planned.

        Between two SYNCs the drives' currents are those latched at the first (CiA 301's
        synchronous PDOs), so the physics of the coming period is known once the SYNCs are
        answered: it is computed then (:meth:`_compute_ahead`), up to GUARD before the next
        SYNC is expected, and a SYNC only waits for the few sub-steps left — the drives'
        answer is not held up by a period of physics. One that comes within JITTER periods of the
        physics' instant (another bus's SYNC of the same cycle) is answered from it, its
        drives' encoders read at the SYNC's arrival along each rotor's speed
        (``SimWorld.sample_offset``).

        When the next SYNC is due: the master's deadlines are absolute (k·T) and its SYNC
        leaves at or after its own — at the end of its control cycle, up to a period late
        when that cycle waited for late answers, and a cycle that ran past the next deadline
        skips it. So the next SYNC comes at or after the first deadline after this one, and
        it is expected as late after it as the least late of the LATE_CYCLES cycles' SYNCs
        before it: a controller whose cycles wait for late answers sends its SYNCs late for a
        while, and computing only up to the deadline would leave that lateness to be computed
        while the SYNC waits — the answers would stay late. The grid is the first SYNC's
        arrival, moved earlier by a SYNC up to EARLY periods before the one due; one that
        comes well before it, SETTLE periods or more after the last (not another bus's SYNC of
        the same cycle), starts a new grid. A SYNC that finds the physics computed past its
        arrival by more than JITTER periods (one less late than those before it, or a master
        that began a new grid) is counted (``ahead``) and answered so too: its drives' new
        currents act from the physics' instant on, not from the SYNC's."""
        period = self.period
        if t < self._t_phys - JITTER * period:
            self.ahead += 1
        if t > self._t_phys + JITTER * period:
            self._advance_to(t)
        # (closer, or past: the encoders read along each rotor's speed, not a sub-step's work)
        self.world.sample_offset = t - self._t_phys
        if self._grid is None:
            self._grid = self._slot = t
        elif t >= self._due - EARLY * period:  # the next cycle's SYNC (or a later one's)
            self._grid -= max(0.0, self._due - t)  # (a little early: the grid was late)
            self._slot = t
            self._late[self._n_late % LATE_CYCLES] = (t - self._grid) % period
            self._n_late += 1
        elif t - self._slot >= SETTLE * period:  # well before it: a new grid
            self._grid = self._slot = t
            self._late[:] = 0.0
        # (else another bus's SYNC of the cycle)
        self._due = self._grid + (math.floor((t - self._grid) / period) + 1.0) * period
        self._ahead_at = t + SETTLE * period

    def _compute_ahead(self) -> None:
        """The coming period's physics, up to GUARD before the next SYNC is expected."""
        self._ahead_at = None
        self._advance_to(self._due + self._late.min() - GUARD * self.period)

    def _advance_to(self, t: float) -> None:
        """The physics up to the instant ``t`` (monotonic s), so the drives sample the leg
        when each SYNC arrived, jitter and late SYNCs included (the controller's estimator
        divides by the time between its SYNCs). At most MAX_CATCH_UP s at once: a simulation
        held up longer falls behind, the rest counted."""
        behind = t - self._t_phys
        if behind > MAX_CATCH_UP:
            self.overruns += int((behind - MAX_CATCH_UP) / self.period + 0.5)
            self._t_phys = t - MAX_CATCH_UP
            behind = MAX_CATCH_UP
        if behind <= 1e-6:
            return
        # in steps of equal length up to STRETCH periods: a SYNC's jitter rides in its
        # period's step (a step of the few µs past a period costs a whole one)
        n = math.ceil(behind / (STRETCH * self.period))
        for _ in range(n):
            step = behind / n
            t0 = time.monotonic()
            self.world.stamp = time.time() + self._t_phys + step - t0  # (its truth row's)
            self.world.advance(step)
            t1 = time.monotonic()
            self.physics_us[self.n_physics & 0xFFFF] = (t1 - t0) * 1e6
            self.n_physics += 1
            self._t_phys += step
            if self.trace is not None:
                self.trace.record(self._t_phys)

    def serve(self, parent: int | None = None, linger: float = 5.0,
              stop=lambda: False, poll_s: float | None = POLL_S) -> None:
        """Until ``stop()``; or ``linger`` s after the process ``parent`` is gone.

        Time: a drive samples its encoder when the SYNC arrives, so the physics advances to
        each SYNC's arrival (whatever the jitter of this process: the kernel stamps the
        arrival), the coming period computed ahead in a turn that finds no frame waiting
        (:meth:`_sync_arrived`); with no SYNC for 1.5 periods (a master that stopped or died)
        it runs on by itself, half a period to 1.5 periods behind the clock.

        With ``poll_s`` the loop looks for frames every ``poll_s`` seconds instead of sleeping
        on the sockets: a process asleep on a socket must be woken by the sender's system
        call (an inter-processor interrupt, tens of µs of the *controller's* time in a virtual
        machine); polling leaves the controller's sends a plain enqueue, as a CAN adapter's
        are. None: sleep on the sockets (select). The simulation's compiled code raising
        (which numba can only report: :mod:`exo_rt.unraisable`) ends it: one line on stderr,
        the drives silent."""
        fds = [fd for fd in self._fds if fd is not None]
        poll_only = len(fds) < len(self._fds) or poll_s is not None
        poll_s = poll_s or 1e-4
        _fine_timer_slack()
        if self.board is not None:
            fds.append(self.board.master)
        if self.commands is not None:
            os.set_blocking(self.commands, False)
            fds.append(self.commands)
        self._t_phys = time.monotonic()
        with Swallowed() as swallowed:  # the plant's compiled code raised: numba reports it
            self._serve(fds, poll_only, poll_s, parent, linger, stop, swallowed)

    def _serve(self, fds, poll_only, poll_s, parent, linger, stop, swallowed) -> None:
        """:meth:`serve`'s loop."""
        period = self.period
        orphan_since = None
        next_check = self._t_phys + 0.1
        prev = time.monotonic()
        while not stop():
            if swallowed.count:  # the physics is broken: the drives fall silent (the
                # controller's stale_feedback), rather than answer from a broken state
                print(f"exo-rt drives: the simulation's compiled code raised "
                      f"{swallowed.first!r}: the emulated drives stop answering",
                      file=sys.stderr)
                return
            now = time.monotonic()
            if now - prev > self.worst_gap:  # the longest this loop was away (a stall)
                self.worst_gap = now - prev
            prev = now
            wait = self._t_phys + FREE_RUN * period - now
            if self._ahead_at is not None:
                wait = min(wait, self._ahead_at - now)
            if wait > 0:
                if poll_only:
                    time.sleep(min(wait, poll_s))
                else:
                    select.select(fds, [], [], wait)
            t0 = time.monotonic()
            if self.board is not None:
                self.board.tick(t0)
                self.world.motor_power = self.board.motor_power
            if self.commands is not None and self._read_commands() is False:
                fds.remove(self.commands)  # the starting process is gone
                self.commands = None
            handled = self._answer()
            if handled:
                now = time.monotonic()
                self.answer_us[self.n_answer & 0xFFFF] = (now - t0) * 1e6
                self.n_answer += 1
                if self._settle:  # the answers are out: the physics to their SYNCs
                    self.settle()
                    now = time.monotonic()
            else:
                now = t0
            if now - self._t_phys >= FREE_RUN * period:  # no SYNC lately: run on
                self._advance_to(now - (FREE_RUN - 1.0) * period)
            elif not handled and self._ahead_at is not None and now >= self._ahead_at:
                self._compute_ahead()  # (in a turn that found no frame waiting: a SYNC that
                # came meanwhile is answered first, from the physics at its arrival)
            self._heartbeats(now)
            if now >= next_check:
                next_check = now + 0.1
                if parent is not None:
                    if orphan_since is None and os.getppid() != parent:
                        orphan_since = now
                    if orphan_since is not None and now - orphan_since > linger:
                        return

    def report(self) -> str:
        """One line: frames, physics periods and overruns, answer and physics times."""
        def p(x, n):
            x = x[: min(n, len(x))]
            if not len(x):
                return "-"
            return f"p50 {np.percentile(x, 50):.0f} p99 {np.percentile(x, 99):.0f} µs"
        return (f"simulation: {self.frames_in} frames in, {self.frames_out} out, "
                f"{self.n_physics} physics periods, {self.overruns} overruns, {self.frames_cut} "
                f"frames cut, {self.superseded} TPDOs superseded, {self.ahead} SYNCs after "
                f"the physics; answer "
                f"{p(self.answer_us, self.n_answer)}, physics {p(self.physics_us, self.n_physics)}"
                f", longest turn {1e3 * self.worst_gap:.1f} ms"
                + ("" if self.truth_attach_s is None else
                   f", truth ring attached in {1e3 * self.truth_attach_s:.2f} ms"))
