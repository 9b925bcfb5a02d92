"""The controller: one run, from bring-up to SHUTDOWN (or SAFE), in the control process.

Each cycle: the drives' frames in → :func:`exo_rt.runtime.cycle.control_step` (estimate,
reference, law, torque → current, safety, record — one njit call) → the drives' frames out →
state changes. The numbers live in preallocated arrays (:class:`~exo_rt.runtime.cycle.
CycleArrays`); Python here does bus I/O, state changes and events only.

Around it, every other job runs in its own process: the recording (:mod:`exo_rt.record.
recording`), the simulated exoskeleton in real time (:mod:`exo_rt.sim.launch`), the board
emulator. With ``--realtime`` the control thread runs SCHED_FIFO on its own CPU
(``realtime: {cpu, priority}`` in the top config, default the last CPU) and every helper
process SCHED_OTHER on the others — each placement reported.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt import STARTED, __version__
from exo_rt.bus import protocols
from exo_rt.control import trajectory
from exo_rt.errors import BusError, ConfigError
from exo_rt.model.mechanism import Mechanism
from exo_rt.record.recorder import columns_dtype, cycle_columns
from exo_rt.runtime import cycle as cy
from exo_rt.runtime import cycle_call, processes, safety, snapshot
from exo_rt.runtime.buses import check_specs, open_buses
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.injections import INJECT_KINDS, SIM_KIND, Injection, InjectionPlan
from exo_rt.runtime.loop import Scheduler, TimingStats, last_cpu, realtime_setup, realtime_teardown
from exo_rt.runtime.processes import other_cpus
from exo_rt.runtime.states import (
    ALIGN,
    BOOT,
    CONFIGURE,
    READY,
    READY_CYCLES,
    RUN,
    SAFE,
    SHUTDOWN,
    STATES,
    STOPPING,
)

__all__ = ["Controller", "Injection", "RunResult", "Fault", "INJECT_KINDS", "SIM_KIND", "STATES",
           "BOOT", "CONFIGURE", "READY", "ALIGN", "RUN", "STOPPING", "SAFE", "SHUTDOWN"]

HISTORY_S = 60.0  # s: Controller.log keeps the run's first minute by default (lockstep)


@dataclass
class Fault:
    t: float
    cause: str
    joint: str | None
    reaction_cycles: int
    action: str
    cycle: int = 0
    detail: str | None = None  # what else names the cause (foreign_master: the COB-ID, the bus)


@dataclass
class RunResult:
    summary: dict
    run_dir: Path | None
    exit_code: int
    setup: list[str] = field(default_factory=list)


class Controller:
    """One run of the exoskeleton controller on a robot's buses (real or simulated)."""

    def __init__(self, top: TopConfig, bus_spec: str | dict[str, str] = "sim", *,
                 realtime: bool = False,
                 injections: tuple[Injection, ...] = (), start_pose=None, seed: int = 0,
                 status=None, rt_setup: bool = True, board: str | None = "emulator",
                 plant: Mechanism | None = None, history: bool | None = None,
                 live: str | None = None, live_remote: bool = False, live_wait: float = 0.0,
                 reset_faults: bool = False) -> None:
        self.top = top
        self.reset_faults = reset_faults  # the operator's --reset-faults (Drives.enable)
        self.live, self.live_remote = live, live_remote  # telemetry: the recording serves it
        self.live_wait = live_wait  # s to wait for a live client before the drives enable
        self.robot = top.robot
        self.cfg = top.controller
        self.dt = 1.0 / top.rate_hz
        self.n = self.robot.nq
        self.bus_spec = bus_spec
        self.injections = injections
        self.status = bool(status)
        self.rt_setup = rt_setup
        self.can_format = ".blf"
        self.start_pose = None if start_pose is None else [float(x) for x in start_pose]
        self.state = BOOT
        self.events: list[dict] = []
        self.faults: list[Fault] = []
        self.setup_lines: list[str] = []
        self.recording = None
        self.recording_error: str | None = None  # why this run is not recorded (from start)
        self._stop_requested = False
        self.cycles = 0
        wall = realtime or bus_spec not in ("sim", "replay")
        self.rt_cpu = (top.realtime.cpu if top.realtime.cpu is not None else last_cpu()) \
            if wall and rt_setup else None
        self.helper_cpus = other_cpus(self.rt_cpu)
        check_specs(top, bus_spec)  # a misspelt interface: said now, not after a cold compile
        from exo_rt import warmup  # a cold numba cache: compile in parallel now, with progress
        t0 = time.monotonic()
        warmup.ensure(top, warmup.REAL_BUS_GROUPS if ":" in str(bus_spec)
                      else warmup.RUN_GROUPS + (("io",) if realtime else ()))  # (its own process)
        self.compile_s = time.monotonic() - t0  # s: compiling (or loading) the kernels
        processes.start_requested()  # helpers asked for ahead (exo-rt run: the recording's)
        self._open(start_pose, seed, plant, realtime)
        self.realtime = not self.bus_set.lockstep
        if injections and not hasattr(self.bus_set, "inject"):
            self.close_buses()
            raise ConfigError("--inject works on the simulated bus only", None,
                              "drop --inject, or run with --bus sim")
        self._open_board(board)
        self._allocate(False if history is None and self.realtime else history)

    # ------------------------------------------------------------------ set-up
    def _open(self, start_pose, seed: int, plant: Mechanism | None, realtime: bool) -> None:
        """Open the buses; simulated, the plant is ``plant`` (default: the robot's own model —
        a different one stands for a leg the model does not match, e.g. on the bench)."""
        self.bus_set = open_buses(self.top, self.bus_spec, realtime=realtime,
                                  start_pose=start_pose, seed=seed, plant=plant,
                                  cpus=self.helper_cpus, rt_setup=self.rt_setup)
        self.world = self.bus_set.world
        if self.bus_set.process is not None:
            self.setup_lines.append(f"simulation process {self.bus_set.process.pid}: "
                                    f"{self.bus_set.process.placement}")
        # each bus's host side from its protocol's registry entry (exo_rt.bus.protocols)
        self.drives = [protocols.get(b.protocol).host_class()(bus, b, self.robot, period=self.dt)
                       for bus, b in zip(self.bus_set.buses, self.top.buses, strict=True)]

    def close_buses(self) -> None:
        self.bus_set.close()

    def _check_board_watchdog(self) -> None:
        """Restart is explicit: a board whose watchdog cut motor power (its last controller
        went silent) is re-armed only when the operator asks (``--reset-faults``) — asking for
        power re-arms it, so it is not asked for silently."""
        b = self.board
        if not b.wait_for_status(1.0, tick=self.bus_set.tick):
            return  # no status: wait_for_power reports the lost link
        if b.status.watchdog_tripped and not self.reset_faults:
            drives = [r for r in (d.found_stopped() for d in self.drives) if r]
            raise BusError("the embedded board's watchdog has cut motor power: its last "
                           "controller went silent" + "".join(f"; {r}" for r in drives), None,
                           "check what stopped the last controller, then start again with "
                           "--reset-faults (exo-rt run --reset-faults) to re-arm it explicitly")

    def _open_board(self, url: str | None) -> None:
        """The embedded board's link: ``emulator`` (with the simulated exoskeleton, or in its
        own process beside real buses), a pyserial URL, or None (no board — bench use only)."""
        self.board = None
        self.board_emulated = url == "emulator"
        if url is None or url == "none":
            return
        from firmware_bridge.link import BoardLink

        bs = self.bus_set
        if self.board_emulated:
            path = bs.board_path()
            proc = getattr(bs, "board_process", None)
            if proc is not None:
                self.setup_lines.append(f"board emulator process {proc.pid}: {proc.placement}")
            self.board = BoardLink(path, clock=bs.clock, heartbeat_hz=250.0,
                                   link_timeout=self.top.safety.board_timeout)
        else:
            self.board = BoardLink(url, link_timeout=self.top.safety.board_timeout,
                                   heartbeat_hz=250.0)

    def _allocate(self, history: bool | None) -> None:
        """The cycle's model and data (:func:`exo_rt.runtime.cycle.build`), and its arrays
        by name."""
        n = self.n
        self.columns = cycle_columns(n)
        self.width = max(b for _, b in self.columns.values())
        self._history = history
        self.cycle = c = cy.build(self.robot, self.top.exo, self.cfg, self.top.safety,
                                  dt=self.dt, align_s=self.top.align_s, width=self.width)
        self.s = c.s  # the cycle's scalars, by name
        self.q, self.q_prev, self.qd, self.i_meas = c.q, c.q_prev, c.qd, c.i_meas
        self.qr, self.qdr, self.qddr = c.qr, c.qdr, c.qddr
        self.q_align0, self.q_start = c.q_align0, c.q_start
        self.tau, self.cur, self.assist = c.tau, c.cur, c.assist
        self.flags, self.law_state = c.flags, c.law_state
        self.phase_state = np.array([0.0, self.cfg.reference.period, 0.0])
        self._t_run = 0.0
        self.s["state"] = BOOT
        self._io = np.zeros(cycle_call.IO_WIDTH)  # what Python and the compiled cycle share
        self._call = None  # cycle_call.run's arguments, made before the drives are enabled
        self._buses: list = []  # the compiled buses, in the cycle's order
        self._wire_buses()

    def _wire_buses(self) -> None:
        """Each bus's drives fill the cycle's arrays in place where their joints are
        contiguous (the others are gathered); the order in which their commands go out."""
        self._gathers, self._commands = [], []
        for d in self.drives:
            idx = d.joint_index
            if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
                lo, hi = int(idx[0]), int(idx[0]) + len(idx)
                d.position, d.current, d.flags = self.q[lo:hi], self.i_meas[lo:hi], \
                    self.flags[lo:hi]
                self._commands.append((d, self.cur[lo:hi]))
            else:
                self._gathers.append(d)
                self._commands.append((d, None))
        # _write's order: every other bus's RPDOs, the last bus's RPDOs and SYNC together,
        # then the other buses' SYNCs (split once: no list made per cycle)
        self._commands_first = self._commands[:-1]
        self._commands_last = self._commands[-1] if self._commands else None

    def _warm_up(self) -> None:
        """Compile and run the cycle once in every state on throw-away data (before READY:
        a cold numba cache never stalls a cycle, and the first real cycles are warm)."""
        w = self.cycle.fresh(1)
        w.s_array[:] = self.cycle.s_array
        w.q[:] = self.q_start
        w.set_rows(np.zeros((1, self.width)))
        for state in (READY, ALIGN, RUN, STOPPING, SAFE):
            w.s["state"] = state
            w.s["slot"] = 0.0
            w.s["hist"] = 0.0
            cy.step(w.model, w.data)
        TimingStats().warm_up()  # the scheduler's histograms, counted every 128 cycles
        trajectory.phase_on_heel_strike(self.phase_state.copy(), 1.0, 0.5, 2.0, 0.5)
        trajectory.phase_from_events(self.phase_state.copy(), 0.0)
        for d in self.drives:
            d.warm_up()

    def _log_capacity(self, duration: float) -> int:
        """The most cycles a run of ``duration`` s (RUN) takes: BOOT to SHUTDOWN, 2 s spare."""
        return int((duration + self.top.align_s + self.top.stop_s + 2.0) * self.top.rate_hz)

    def _history_rows(self, cap: int) -> int:
        """Rows of :attr:`log` for a run of at most ``cap`` cycles: the first ``HISTORY_S`` s
        by default (lockstep), every cycle with ``history=True`` (memory then grows with the
        run: 190 B a cycle), none with ``history=False`` (real time's default)."""
        if self._history is True:
            return cap
        if self._history is None:
            return min(cap, int(HISTORY_S * self.top.rate_hz))
        return 0

    # ------------------------------------------------------------------ the run
    def run(self, duration: float, out_dir: Path | None = None) -> RunResult:
        """BOOT … SHUTDOWN (or SAFE): returns the summary, the run folder and the exit code."""
        t_boot = time.monotonic()
        self.duration = duration
        cap = self._log_capacity(duration)
        rows = self._history_rows(cap)
        if rows:
            self.cycle.set_hist(np.zeros((rows, self.width)))
        self.events = [{"cycle": 0, "t": 0.0, "event": "state", "state": "BOOT"}]
        setup = None
        try:
            t0 = time.monotonic()
            self._warm_up()
            self._compile_in_run = time.monotonic() - t0
            self.compile_s += self._compile_in_run
            self._start_recording(out_dir)
            snapshot.write_at_start(self.top, out_dir, self.events)  # every config file, copied
            self._write_guide(out_dir)
            self._go(CONFIGURE, 0)
            for d in self.drives:
                d.configure()
                self.setup_lines.extend(f"bring-up on bus '{d.config.name}': {w}"
                                        for w in getattr(d, "bringup_warnings", ()))
            # the cycle (its tables are bring-up's): compiled now, before any drive is enabled
            cycle = self._prepare_cycle()
            if self.recording is not None:  # started before the bring-up: up by now, mostly
                self.recording.ready()
                self._wait_for_viewer()
            # allocated before mlockall (which faults every later allocation in at once)
            self.sched = Scheduler(self.dt, lockstep=not self.realtime)
            # watched live, a simulated run goes at the wall clock's pace (still lockstep:
            # the same cycles, only slowed to real time) — else it is over before a viewer is
            self.sched.paced = self.live is not None and not self.realtime
            if self.realtime and self.rt_setup:  # before motor power: mlockall takes its time
                rt = self.top.realtime
                setup = realtime_setup(rt.priority, self.rt_cpu, cpu_latency_us=rt.cpu_latency_us)
                self.setup_lines[:0] = setup.lines()
            if self.board is not None:
                self._check_board_watchdog()
                if not self.board.wait_for_power(2.0, tick=self.bus_set.tick):
                    raise BusError("the embedded board did not switch motor power on"
                                   + (" (e-stop pressed)" if self.board.estop else ""), None,
                                   "release the e-stop, check the board link and its supply")
            self._go(READY, 0)
            for d in self.drives:
                if self.board is not None:  # the board's watchdog sees us while drives enable
                    self.board.send_heartbeat(READY, force=True)
                d.enable(reset_faults=self.reset_faults)
            if self.board is not None:  # the board's watchdog counts from here
                self.board.send_heartbeat(READY, force=True)
            self._gather()
            self.q_prev[:] = self.q
            self.q_align0[:] = self.q
            self.startup_s = time.monotonic() - t_boot
            self.to_ready_s = time.monotonic() - STARTED
            self.to_run_s = float("nan")
            self.k0 = {READY: 0}
            self.plan = InjectionPlan(self.injections, self.dt, self.top.safety.overrun_streak,
                                      self.robot.joint_names, self.run_cycle())
            self._schedule_sim_injections()
            self._next_check = 0
            if self.recording is not None:  # where the loop starts from, and when
                # lockstep: the loop's start on the CAN log's clock (frames stamped epoch +
                # simulated time), so that the recording's cycles and frames line up
                start = time.time() if self.realtime else self._frame_epoch + \
                    self.bus_set.clock()
                self.recording.update_meta(q_initial=self.q.tolist(), wall_start=start)
            self._write()  # a first SYNC at zero current: cycle 0 reads fresh frames
            self.cycle.t_prev[:] = self._t_sync - self.dt
            self._io[cycle_call.IO_T_SYNC] = self._t_sync
            self.sched.run(cycle, max_cycles=cap)
        except KeyboardInterrupt:
            self.events.append({"cycle": self.cycles, "event": "operator",
                                "action": "ctrl-C: safe stop"})
            self._stop_now()
        finally:
            if setup is not None:
                realtime_teardown()
            self._close()
        summary = self._summary()
        run_dir = self._write_run(summary, out_dir)
        code = 0 if summary["final_state"] == "SHUTDOWN" and not self.faults else 1
        return RunResult(summary, run_dir, code, list(self.setup_lines))

    def _write_guide(self, out_dir: Path | None) -> None:
        """The run folder's README.md (each file, what it holds, how to open it)."""
        if out_dir is None:
            return
        from exo_rt.record import guide

        try:
            guide.write(out_dir)
        except OSError as exc:  # a full disk: the run goes on (the recording says so too)
            self.events.append({"event": "guide_error", "error": str(exc)})

    def _wait_for_viewer(self) -> None:
        """``--live-wait S``: before any drive is enabled, wait up to S s for a Foxglove
        client to subscribe (the recording process serves it and says when one does)."""
        rec = self.recording
        if not self.live_wait or rec is None or not rec.live_url:
            return
        from exo_rt.record.rings import CLIENTS

        print(f"live: waiting up to {self.live_wait:g} s for a Foxglove client on "
              f"{rec.live_url} (Open connection → Foxglove WebSocket; --live-wait 0: start "
              "at once)", file=sys.stderr, flush=True)
        end = time.monotonic() + self.live_wait
        while time.monotonic() < end and not rec.records.header[CLIENTS]:
            time.sleep(0.02)  # (nothing enabled yet, no motor power: nothing to watch)
        watched = bool(rec.records.header[CLIENTS])
        self.events.append({"cycle": 0, "event": "live", "client": watched})
        print("live: client connected, starting" if watched else
              f"live: no client after {self.live_wait:g} s, starting anyway",
              file=sys.stderr, flush=True)

    def _start_recording(self, out_dir: Path | None) -> None:
        if out_dir is None:
            return
        from exo_rt.record import runfolder
        from exo_rt.record.recording import Recording

        # the folder is this run's alone (a live run's: refused here, before any bring-up)
        self.run_folder = folder = runfolder.claim(out_dir)
        folder.take_over()  # an earlier run's files there: removed, this run replaces them
        if folder.error is not None:  # a full disk, a read-only folder: the run goes on
            self._not_recording(folder.error)
            return
        meta = {"joint_names": list(self.robot.joint_names), "rate_hz": self.top.rate_hz,
                "config": str(self.top.path), "config_sha256": self.top.sha256,
                "controller": str(self.cfg.source), "law": self.cfg.law, "bus": self.bus_spec,
                "duration_s": self.duration, "start_pose": self.start_pose,
                "injections": [[i.kind, i.joint, i.t, i.duration] for i in self.injections],
                "injections_from": "RUN",  # their t: s from the start of RUN
                "states": list(STATES), "causes": list(safety.CAUSES), "wall_boot": time.time()}
        # lockstep: every CAN frame stamped on one clock, the simulated time from this epoch
        self._frame_epoch = meta["wall_boot"] - (0.0 if self.realtime else self.bus_set.clock())
        try:
            self.recording = rec = Recording(
                out_dir, self.n, meta, can_format=self.can_format,
                channels=[b.channel for b in self.top.buses], lockstep=not self.realtime,
                status=self.status, cpus=self.helper_cpus, live=self.live,
                live_remote=self.live_remote)
        except OSError as exc:  # e.g. a full disk: the run goes on, unrecorded
            self._not_recording(runfolder.describe(exc, exc.filename or out_dir))
            return
        self.setup_lines.append(f"recording process {rec.process.pid}: {rec.process.placement}")
        if rec.live_url:
            self.setup_lines.append(f"live telemetry on {rec.live_url}")
        for i, d in enumerate(self.drives):
            rec.tap(d.bus, i, *(() if self.realtime else (self.bus_set.clock,
                                                            self._frame_epoch)))
            d.port.tap = rec.frames
            d.port.channel_index = i

    def _not_recording(self, why: str) -> None:
        """The run folder cannot be written at the start: one line now, an event, and the
        run goes on unrecorded (the wearer's safety does not depend on the disk)."""
        self.recording_error = why
        self.events.append({"cycle": 0, "t": 0.0, "event": "recording_stopped", "error": why})
        print(f"exo-rt: not recording this run: {why} — the run goes on unrecorded",
              file=sys.stderr, flush=True)

    def _close(self) -> None:
        for d in self.drives:
            d.port.tap = None
        if self.board is not None:
            self.board.set_power(False)
            self.bus_set.tick()
            self.board.close()
        if self._call is not None:  # the one-call cycle's sends the OS refused, counted
            for d in self._buses:
                d.count_send_errors()
        self.close_buses()
        self._call = None  # (it holds views of the recording's shared memory)
        self.cycle.set_rows(self.cycle.no_rows)
        if self.recording is not None:
            self.recording.close()
            self.events.extend(self.recording.events)

    # ------------------------------------------------------------------ one cycle
    def _prepare_cycle(self, compiled_io: bool = True):
        """The cycle (:func:`exo_rt.runtime.cycle_call.run`), its arguments made once and
        compiled — or loaded from numba's cache — now, before any drive is enabled. In real
        time, CiA 402 buses on compiled ports filling the cycle's arrays in place are read
        and written inside it, and a board on a descriptor polled there; everything else is
        handed to Python mid-cycle (the buses of a simulated or python-can bus, a board on
        the simulated clock, injected faults; everything with ``compiled_io`` False, to
        compare the two)."""
        io, c = self._io, self.cycle
        buses: tuple = ()
        if (compiled_io and self.realtime and self.drives and not self._gathers
                and not self.injections):
            buses = tuple(getattr(d, "compiled_cycle", lambda _c: None)(view)
                          for d, view in self._commands)
            if any(bus is None for bus in buses):
                buses = ()
        board = self.board.compiled_poll() if (self.board is not None and self.realtime
                                                and compiled_io) else None
        io[cycle_call.IO_PY_BUSES] = not buses
        io[cycle_call.IO_BOARD] = self.board is not None
        io[cycle_call.IO_PY_BOARD] = self.board is not None and board is None
        io[cycle_call.IO_EVENTS] = self.cfg.reference.phase == "events" and self.board is not None
        if self.board is not None:
            io[cycle_call.IO_LINK_TIMEOUT] = self.board.link_timeout
        poll_args, status_time = board if board is not None else (cycle_call.no_board(),
                                                                  np.zeros(1))
        rec = self.recording
        if rec is None:
            header, capacity, rows = cycle_call.NO_RECORDS, 0, c.no_rows
        else:
            header, capacity, rows = rec.records.header, rec.records.capacity, rec.records.rows
        c.set_rows(rows)
        self._call = cycle_call.prepare((poll_args, status_time,
                                         buses or cycle_call.idle_buses(), c.model, c.data,
                                         header, capacity, io, np.zeros(2, np.int64),
                                         self.phase_state))
        self._buses = [d for d, _view in self._commands] if buses else []
        if buses:
            self.setup_lines.append("cycle: one compiled call (board, frames in, control, "
                                    "frames out)")
        return self._cycle

    def _cycle(self, k: int) -> bool:
        """One cycle: the compiled cycle, and Python between its calls only for what it owns
        (the board's news, frames for Python, a bus of Python's read or written)."""
        s, io, sched, plan = self.s, self._io, self.sched, self.plan
        st = sched.stats
        # a late cycle is a hazard only in real time (in lockstep the simulated bus waits)
        late = (sched.late and self.realtime) or (plan.any_overrun and plan.overrunning(k - 1))
        s["overrun_streak"] = s["overrun_streak"] + 1.0 if late else 0.0
        s["wake_us"] = sched.wake_us
        s["compute_us"] = st.last_compute_us
        s["overruns"] = st.overruns
        io[cycle_call.IO_K] = k
        call = self._call
        back = cycle_call.run(call)
        while back:  # what Python owns, mid-cycle; then the cycle goes on where it stopped
            if back == cycle_call.BACK_FRAMES:
                self._buses[int(io[cycle_call.IO_BUS])].handed_back(
                    int(io[cycle_call.IO_PENDING]))
            elif back == cycle_call.BACK_COLLECT:
                self._frames_in(k)
            elif back == cycle_call.BACK_POLL:
                s["board"] = self.board.poll()  # 1: e-stop, 2: link lost, 4: motor power off
                self._heel_strikes()
            elif back == cycle_call.BACK_BOARD:
                self.board.take_news(int(io[cycle_call.IO_NEWS]), io[cycle_call.IO_NOW])
                self._heel_strikes()
            else:  # BACK_SEND: the cycle's last step
                self.cycles = k + 1
                self._frames_out()
                break
            back = cycle_call.run(call)
        self.cycles = k + 1
        if s["new_fault"]:
            self._fault(k, int(s["cause"]), int(s["joint"]))
        return self._after_write(k)

    def _frames_in(self, k: int) -> None:
        """The drives' frames, read by their protocols in Python; injected NaN positions."""
        deadline = None if not self.realtime else time.monotonic() + 0.7 * self.dt
        for d in self.drives:
            d.collect(deadline)
        if self._gathers:
            self._gather()
        plan = self.plan
        if plan.any_nan:
            for k0, k1, j in plan.nan:
                if k0 <= k < k1:
                    self.q[j] = float("nan")

    def _frames_out(self) -> None:
        """The commands sent by the protocols in Python (the drives disabled once SAFE has
        ramped out); the drives sample at their SYNC."""
        if self.s["state"] == SAFE and self.s["disable"]:
            for d in self.drives:
                d.request_disable()
        self._write()
        self._io[cycle_call.IO_T_SYNC] = self._t_sync

    def _gather(self) -> None:
        """Measurements of drives whose joints are not contiguous (the others fill in place)."""
        for d in self._gathers:
            self.q[d.joint_index] = d.position
            self.i_meas[d.joint_index] = d.current
            self.flags[d.joint_index] = d.flags

    def _after_write(self, k: int) -> bool:
        """The cycle's end, its commands sent: the board's heartbeat, state changes, operator
        stops, injections, the recording's check; False: the run is over."""
        s, plan, rec = self.s, self.plan, self.recording
        b = self.board
        if b is not None:
            b.send_heartbeat(self.state)
            self.bus_set.tick()
        self._advance(k)
        if self._stop_requested and self.state in (READY, ALIGN, RUN):
            self._go(STOPPING, k + 1)  # holds the posture, then disables the drives
        if plan.board:
            self._board_faults(k)
        if self.bus_set.pending:
            self.bus_set.due(k)
        if plan.any_overrun and plan.overrunning(k):
            end = time.perf_counter() + 1.5 * self.dt  # an injected overrun: 1.5 periods
            while time.perf_counter() < end:
                pass
        if k >= self._next_check:
            self._next_check = k + int(self.top.rate_hz)
            if rec is not None:
                rec.check(k * self.dt)
        return self.state != SHUTDOWN and not (self.state == SAFE and s["safe_done"])

    def _heel_strikes(self) -> None:
        """The wearer's heel strikes the board reported, into the phase estimate (RUN, with
        ``reference.phase: events``)."""
        ref = self.cfg.reference
        if self.state != RUN or ref.phase != "events" or self.board is None:
            return
        while self.board.heel_strikes:
            trajectory.phase_on_heel_strike(self.phase_state,
                                            self.board.heel_strikes.popleft() - self._t_run,
                                            0.5 * ref.period, 2.0 * ref.period, 0.5)

    def _advance(self, k: int) -> None:
        if self.state == READY and k >= READY_CYCLES:
            self.q_align0[:] = self.q
            self._go(ALIGN, k + 1)
        elif self.state == ALIGN and (k + 1 - self.k0[ALIGN]) * self.dt >= self.top.align_s:
            self.law_state[:] = 0
            self._go(RUN, k + 1)
            self._t_run = self.board.clock() + self.dt if self.board is not None else 0.0
            self._heel_strikes()  # those of ALIGN's last cycles
            if self.board_emulated:  # the emulated wearer starts walking
                self.bus_set.board_command(f"walk {self._t_run!r}")
        elif self.state == RUN and (k + 1 - self.k0[RUN]) * self.dt >= self.duration:
            self._go(STOPPING, k + 1)  # holds the last reference
        elif self.state == STOPPING and (k + 1 - self.k0[STOPPING]) * self.dt >= self.top.stop_s:
            for d in self.drives:
                d.request_disable()
            self.cur[:] = 0.0
            self._write()
            self._go(SHUTDOWN, k + 1)

    def run_cycle(self) -> int:
        """The control cycle RUN starts in (as :meth:`_advance` steps READY → ALIGN → RUN):
        where ``--inject``'s T counts from."""
        align = 1
        while align * self.dt < self.top.align_s:
            align += 1
        return READY_CYCLES + 1 + align

    def _go(self, state: int, k: int) -> None:
        self.state = state
        self.s["state"] = state
        if hasattr(self, "k0"):
            self.k0[state] = k
        if state == ALIGN or state == RUN:  # (the one-call cycle's time in ALIGN, its phase)
            self._io[cycle_call.IO_K0_ALIGN if state == ALIGN else cycle_call.IO_K0_RUN] = k
        self.events.append({"cycle": k, "t": round(k * self.dt, 6), "event": "state",
                            "state": STATES[state]})
        if state == RUN:
            self.to_run_s = time.monotonic() - STARTED

    def request_stop(self, why: str = "operator stop") -> None:
        """A safe stop from outside the loop (ctrl-C, SIGTERM): the next cycle goes STOPPING."""
        if not self._stop_requested:
            self._stop_requested = True
            self.events.append({"cycle": self.cycles, "event": "operator", "action": why})

    def _stop_now(self) -> None:
        """ctrl-C: the safe stop (zero current, the drives hold by friction, then disabled)."""
        if self.state not in (SAFE, SHUTDOWN):
            for d in self.drives:
                d.request_disable()
                d.send_rpdos(np.zeros(d.n))
                d.send_sync()
            self.state = SHUTDOWN

    # ------------------------------------------------------------------ faults
    def _schedule_sim_injections(self) -> None:
        for k, kind, joint, cycles in self.plan.sim:
            for d in self.drives:
                for cfg in d.config.drives:
                    if joint in (None, cfg.joint):
                        self.bus_set.inject(k, kind, d.config.channel, cfg.node, cycles)
                        if joint is None:
                            break
        for _k, kind, _n in self.plan.board:
            if not self.board_emulated:
                raise ConfigError(f"--inject {kind} needs the board emulator", None,
                                  "run with --board emulator (the default)")

    def _board_faults(self, k: int) -> None:
        for k0, kind, cycles in self.plan.board:
            if k == k0 and kind == "estop":
                self.bus_set.board_command("estop 1")
            elif k == k0:
                self.bus_set.board_command(f"stall {cycles * self.dt!r}")

    def _fault(self, k: int, cause: int, joint: int) -> None:
        """The cycle kernel went SAFE in cycle k: note the fault, its cause and reaction."""
        name = self.robot.joint_names[joint] if joint >= 0 else None
        onset = self.plan.onset(k, name)
        self.faults.append(Fault(t=onset * self.dt, cause=safety.CAUSES[cause], joint=name,
                                 reaction_cycles=k - onset + 1, action=self.top.safety.action,
                                 cycle=k, detail=self._fault_detail(cause)))
        f = self.faults[-1]
        self.events.append({"cycle": k, "t": round(k * self.dt, 6), "event": "fault",
                            "cause": f.cause, "joint": f.joint, "action": f.action}
                           | ({"detail": f.detail} if f.detail else {}))
        self._go(SAFE, k)

    def _fault_detail(self, cause: int) -> str | None:
        """foreign_master: the first frame of another master, by COB-ID and bus."""
        if cause != safety.FOREIGN_MASTER:
            return None
        for d in self.drives:
            seen, first = int(d.foreign[1]), int(d.foreign[2])
            if seen:
                return (f"COB-ID 0x{first:03X} from another node on bus '{d.config.name}' "
                        f"({seen} such frames)")
        return None

    def reset(self) -> None:
        """The explicit operator action that leaves SAFE (drives fault-reset, then READY)."""
        for d in self.drives:
            d.fault_reset()
        self._go(READY, self.cycles)

    # ------------------------------------------------------------------ write
    def _write(self) -> None:
        """Every bus's commands (current clamped in the encoder), then every bus's SYNC: the
        last bus's commands and SYNC go together (one system call where its port allows)."""
        first = self._commands_first
        for d, view in first:
            d.send_rpdos(self.cur[d.joint_index] if view is None else view)
        if self._commands_last is not None:
            d, view = self._commands_last
            d.send_commands(self.cur[d.joint_index] if view is None else view)
        for d, _view in first:
            d.send_sync()
        self._t_sync = self.sched.instant(self.cycles - 1)  # the drives sample now

    # ------------------------------------------------------------------ summary
    @property
    def log(self) -> np.ndarray:
        """The run's records in memory (a structured view: ``log["q"]``, ``log["state"]`` …),
        from cycle 0: the first ``HISTORY_S`` s by default, so memory does not grow with the
        run (``history=True``: every cycle; ``history=False``, real time's default: none). The
        whole run is in the run folder's cycle log
        (:func:`exo_rt.record.recorder.read_cycle_log`)."""
        hist = self.cycle.hist[: self.cycles]
        return hist.view(columns_dtype(self.columns))[:, 0]

    def _summary(self) -> dict:
        s, v = self.cycle.s, self.cycle.v
        joints = {}
        runs = max(s["run_cycles"], 1.0)
        for j, name in enumerate(self.robot.joint_names):
            lo, hi = v[cy.V_Q_MIN, j], v[cy.V_Q_MAX, j]
            joints[name] = {
                "rms_error_deg": float(np.sqrt(v[cy.V_SSE, j] / runs)),
                "max_error_deg": float(v[cy.V_MAX_ERROR, j]),
                "max_abs_current_A": float(v[cy.V_MAX_CURRENT, j]),
                "min_position_deg": float(np.degrees(lo)) if np.isfinite(lo) else 0.0,
                "max_position_deg": float(np.degrees(hi)) if np.isfinite(hi) else 0.0,
            }
        summary = {
            "exo_rt_version": __version__,
            "config": str(self.top.path),
            "config_sha256": self.top.sha256,
            "controller": self.cfg.law,
            "bus": self.bus_spec,
            "rate_hz": self.top.rate_hz,
            "duration_s": float(self.cycles * self.dt),
            "cycles": int(self.cycles),
            "startup_s": {"boot_to_ready": round(getattr(self, "startup_s", float("nan")), 3),
                          "process_to_ready": round(getattr(self, "to_ready_s", float("nan")), 3),
                          "process_to_run": round(getattr(self, "to_run_s", float("nan")), 3),
                          # process_to_ready in parts: the kernels compiled (or loaded from
                          # the cache); the bring-up (recording, drives configured and
                          # enabled, the board's power); the rest (imports, buses opened)
                          "compile": round(self.compile_s, 3),
                          "bring_up": round(getattr(self, "startup_s", float("nan"))
                                            - getattr(self, "_compile_in_run", 0.0), 3),
                          "imports_and_open": round(
                              getattr(self, "to_ready_s", float("nan"))
                              - getattr(self, "startup_s", float("nan")) - self.compile_s
                              + getattr(self, "_compile_in_run", 0.0), 3)},
            "phases_s": self._phases(),
            "timing": self.sched.stats.summary() if hasattr(self, "sched") else {},
            "joints": joints,
            "faults": [{"t": round(f.t, 6), "cause": f.cause, "joint": f.joint,
                        "reaction_cycles": f.reaction_cycles, "action": f.action,
                        "t_run": (round(f.t - self.k0[RUN] * self.dt, 6)
                                  if RUN in getattr(self, "k0", {}) else None)}
                       | ({"detail": f.detail} if f.detail else {}) for f in self.faults],
            "final_state": STATES[self.state],
            "setup": list(self.setup_lines),
        }
        if self.recording is not None:
            rec = self.recording
            summary["recording"] = {
                "records": rec.report.get("records", 0), "frames": rec.report.get("frames", 0),
                "records_lost": rec.report.get("records_lost", 0),
                "stopped_at_s": rec.stopped_at}
        return summary

    def _phases(self) -> dict[str, float]:
        """Each state's time in the loop (s, cycles × period), in the order entered; a state
        entered twice is summed."""
        marks = [(e["cycle"], e["state"]) for e in self.events if e.get("event") == "state"
                 and e["state"] not in ("BOOT", "CONFIGURE")]
        out: dict[str, float] = {}
        for i, (k, state) in enumerate(marks):
            end = marks[i + 1][0] if i + 1 < len(marks) else self.cycles
            out[state] = round(out.get(state, 0.0) + max(0, end - k) * self.dt, 6)
        return out

    def _write_run(self, summary: dict, out_dir: Path | None) -> Path | None:
        """The run's events, then its summary (with what failed: the recording, a file),
        each written whole or not at all; then the folder is let go. Nothing here raises: a
        file the disk does not take is said on stderr, with the events it would have held."""
        if out_dir is None:
            return None
        from exo_rt.record import runfolder

        rec = summary.setdefault("recording", {})
        why = self.recording_error
        if why is not None:
            rec.update(recorded=False, error=why)
        stop = next((e for e in self.events if e.get("event") == "recording_stopped"), None)
        if stop is not None and why is None:
            rec["stopped"] = {"t": stop.get("t"), "error": stop.get("error")}
        errors = [e["error"] for e in self.events if e.get("event") == "recording_error"]
        if errors:
            rec["errors"] = errors
        not_written: list[str] = []
        for name in ("events.jsonl", "summary.json"):
            if name == "events.jsonl":
                text = "".join(json.dumps(e) + "\n" for e in self.events)
            else:
                if not_written:
                    summary["files_not_written"] = list(not_written)
                text = json.dumps(summary, indent=2) + "\n"
            try:
                runfolder.write_atomic(out_dir / name, text)
            except OSError as exc:
                not_written.append(runfolder.describe(exc, out_dir / name))
        folder = getattr(self, "run_folder", None)
        if folder is not None:
            folder.release()
        if not_written:
            import sys

            summary["files_not_written"] = not_written
            events_lost = not_written[0].startswith(f"cannot write {out_dir / 'events.jsonl'}")
            shown = [e for e in self.events if e.get("event") != "state"][:10]
            print(f"exo-rt: {'; '.join(not_written)}" + (
                " — the run's events:" if events_lost and shown
                else " (the events are in events.jsonl)"), file=sys.stderr)
            for e in shown if events_lost else ():
                print(f"  {json.dumps(e)}", file=sys.stderr)
        return out_dir

