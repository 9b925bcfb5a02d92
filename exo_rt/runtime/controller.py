"""The controller: one run, from bring-up to SHUTDOWN (or SAFE), in the control process.

A lifecycle shell around the one cycle (as ros2_control's controllers): **configure**
(the kernels warm, the run folder and recording, the drives brought up, the cycle built and
compiled) → **activate** (real-time set-up, the board's motor power, the drives enabled) →
the **update** loop (the scheduler calls :meth:`Controller._cycle` each period: the compiled
cycle of :mod:`exo_rt.cycle.cycle_call` on the cycle's model and data, Python between its
calls only for what it owns, then the state machine) → **deactivate** (power off, buses
closed, the recording drained) → **report** (the summary, the run folder). What it drives
is a :class:`~exo_rt.runtime.rig.Rig` — buses, drives, board — opened here, or handed in
(replay hands one made of a recording).

Around it, every other job runs in its own process: the recording (:mod:`exo_rt.record.
recording`), the simulated exoskeleton in real time (:mod:`exo_rt.sim.launch`), the board
emulator. With ``--realtime`` the control thread runs SCHED_FIFO on its own CPU
(``realtime: {cpu, priority}`` in the top config, default the last CPU) and every helper
process SCHED_OTHER on the others — each placement reported.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np

from exo_rt import STARTED, processes
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import BOOT, CONFIGURE, READY, RUN, SAFE, SHUTDOWN, STATES, STOPPING
from exo_rt.errors import ConfigError
from exo_rt.processes import other_cpus
from exo_rt.record.events import HAND_OVER_S
from exo_rt.record.recorder import columns_dtype, cycle_columns, row_width
from exo_rt.runtime import derating, script, snapshot, summary
from exo_rt.runtime.buses import check_specs
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.cycle_io import CycleIO, CycleParts
from exo_rt.runtime.injections import Injection, InjectionPlan
from exo_rt.runtime.loop import Scheduler, TimingStats, last_cpu, realtime_setup, realtime_teardown
from exo_rt.runtime.options import RunOptions
from exo_rt.runtime.rig import Rig, open_rig
from exo_rt.runtime.run_record import RecordingStart, RunRecord
from exo_rt.runtime.script import HeelStrikes
from exo_rt.runtime.summary import Fault, Outcome, RunResult
from exo_rt.session import session as sessions
from exo_rt.sim.crutch import WearerGait, WearerRun  # (imported here, not in the loop: 2 ms)

__all__ = ["Controller", "Injection", "RunResult", "Fault"]

HISTORY_S = 60.0  # s: Controller.log keeps the run's first minute by default (lockstep)


class Aborted(KeyboardInterrupt):
    """The operator's abort (``RunOptions.abort``): the run stops at once, as on ctrl-C."""


class Controller:
    """One run of the exoskeleton controller on a robot's buses (real, simulated or, handed
    in as ``rig``, a recording's)."""

    def __init__(self, top: TopConfig, bus_spec: str | dict[str, str] = "sim", *,
                 rig: Rig | None = None, cycle: cy.Cycle | None = None, **options) -> None:
        """``options``: :class:`~exo_rt.runtime.options.RunOptions`' fields by name;
        ``cycle``: one built for this robot by another user of the cycle (default: built
        here from the top config)."""
        self.options = o = RunOptions(**options)
        self.top, self.robot, self.cfg = top, top.robot, top.controller
        self.dt = 1.0 / top.rate_hz
        self.n = self.robot.nq
        self.bus_spec, self.injections, self._abort = bus_spec, o.injections, o.abort
        self.can_format = ".blf"
        self.start_pose = None if o.start_pose is None else [float(x) for x in o.start_pose]
        self.cycles, self._stop_requested = 0, False
        self.session: sessions.Session | None = None
        self.events: list[dict] = []
        self.faults: list[Fault] = []
        self.after_safe: dict = {}  # a SAFE end in a simulated world: what it did to the wearer
        self.setup_lines: list[str] = []
        self.recording = None
        self.record = RunRecord(None, self.events)
        self.sched: Scheduler | None = None
        self.k0: dict[int, int] = {}
        self.times: dict[str, float] = {"compile": 0.0}  # s: where the start-up went
        wall = o.realtime or bus_spec not in ("sim", "replay")
        self.rt_cpu = (top.realtime.cpu if top.realtime.cpu is not None else last_cpu()) \
            if wall and o.rt_setup else None
        self.helper_cpus = other_cpus(self.rt_cpu)
        if rig is None:
            check_specs(top, bus_spec)  # a misspelt interface: said now, not after a compile
            t0 = time.monotonic()
            if o.compile_ahead is not None:  # a cold numba cache: compiled now, with progress
                o.compile_ahead()
            self.times["compile"] = time.monotonic() - t0  # compiling (or loading) kernels
            processes.start_requested()  # helpers asked for ahead (the recording's)
            rig = open_rig(top, bus_spec, o, cpus=self.helper_cpus)
        self.rig, self.bus_set, self.drives, self.board = rig, rig.bus_set, rig.drives, rig.board
        self.setup_lines.extend(rig.setup_lines)
        self.realtime = rig.realtime
        if o.injections and not self.bus_set.injectable:
            rig.close()
            raise ConfigError("--inject works on the simulated bus only", None,
                              "drop --inject, or run with --bus sim")
        self._allocate(False if o.history is None and self.realtime else o.history, cycle)

    def _allocate(self, history: bool | None, cycle: cy.Cycle | None) -> None:
        """The cycle's model and data (:func:`exo_rt.cycle.step.build`), its arrays by
        name, and the Python side of the compiled cycle (:class:`~exo_rt.runtime.cycle_io.
        CycleIO`)."""
        self.columns = cycle_columns(self.n)
        self.width = row_width(self.columns)
        self._history = history
        self.cycle = c = cycle or cy.build(self.robot, self.top.exo, self.cfg, self.top.safety,
                                           dt=self.dt)
        c.bind_board(self.board.decoder_state)  # the foot-sole sensors (stance_load)
        self.s = c.s  # the cycle's scalars, by name
        self.q, self.q_prev, self.i_meas = c.q, c.q_prev, c.i_meas
        self.q_start, self.cur, self.flags, self.law_state = c.q_start, c.cur, c.flags, \
            c.law_state
        self.phase_state = np.array([0.0, self.cfg.reference.period, 0.0])
        self.s["state"] = BOOT
        self.heels = HeelStrikes(self.board, self.cfg.reference, self.s, self.phase_state)
        self.gait: WearerGait | None = None  # the emulated wearer's feet (:meth:`_activate`)
        self.plan = InjectionPlan(self.injections, self.dt, self.top.safety.overrun_streak,
                                  self.robot.joint_names, self.run_cycle())
        self.io = CycleIO(CycleParts(c, self.drives, self.board, self.realtime, self.dt),
                          self.plan, self.heels, self.rig.sync_instant)
        self.derating = derating.Watch(c, self.robot.joint_names, self.dt, self.events,
                                       self.k0)  # a winding past its warning: announced

    def close_buses(self) -> None:
        self.rig.close()  # (a controller that never ran)

    def _log_capacity(self, duration: float) -> int:
        """The most cycles a run of ``duration`` s takes, the session's guard's spare too."""
        return int((duration + 2 * sessions.SESSION_SPARE_S + self.top.stop_s + 2.0) *
                   self.top.rate_hz)

    def _history_rows(self, cap: int) -> int:
        """Rows of :attr:`log` for a run of at most ``cap`` cycles: the first ``HISTORY_S`` s
        by default (lockstep), every cycle with ``history=True`` (memory then grows with the
        run: 190 B a cycle), none with ``history=False`` (real time's default)."""
        if self._history is True:
            return cap
        if self._history is None:
            return min(cap, int(HISTORY_S * self.top.rate_hz))
        return 0

    # ------------------------------------------------------------------ the lifecycle
    def run(self, duration: float, out_dir: Path | None = None) -> RunResult:
        """BOOT … SHUTDOWN (or SAFE): returns the summary, the run folder and the exit code."""
        t_boot = time.monotonic()
        self.duration = duration
        cap = self._log_capacity(duration)
        rows = self._history_rows(cap)
        if rows:
            self.cycle.set_hist(np.zeros((rows, self.width)))
        self.events[:] = [{"cycle": 0, "t": 0.0, "event": "state", "state": "BOOT"}]  # (the
        # run's one list: its helpers hold it)
        self.record = RunRecord(out_dir, self.events)
        setup = None
        try:
            self._configure()
            setup = self._activate(t_boot)
            self.sched.run(self._cycle, max_cycles=cap)
        except KeyboardInterrupt as stop:
            self.events.append({"cycle": self.cycles, "event": "operator",
                                "action": str(stop) if isinstance(stop, Aborted)
                                else "ctrl-C: safe stop"})
            self._stop_now()
        finally:
            if setup is not None:
                realtime_teardown()
            self._deactivate()
        return self._report()

    def _configure(self) -> None:
        """The kernels warm, the run recorded (its configs copied), the drives brought up,
        the cycle compiled — before any drive is enabled."""
        t0 = time.monotonic()
        self._warm_up()
        o = self.options
        self.session = sessions.for_run(sessions.SessionRun(  # its files read, its sources
            self.cycle, self.top, self.events, self.dt, self.duration, self.k0,  # open
            lambda: self.state, self.board, self.rig.buttons, self.helper_cpus,
            self.setup_lines, session=o.session, activities=o.activities, wearer=o.wearer,
            requests=o.requests, console=o.console, web=o.web,
            sources=tuple(partial(make, self) for make in o.sources),
            realtime=self.realtime), self.record.out_dir)
        self.times["compile_in_run"] = time.monotonic() - t0
        self.times["compile"] += self.times["compile_in_run"]
        self._start_recording()
        snapshot.write_at_start(self.top, self.record.out_dir, self.events,
                                self.session.files())  # every file the run read, copied
        self.record.write_guide()
        self._go(CONFIGURE, 0)
        for d in self.drives:
            d.configure()
            self.setup_lines.extend(f"bring-up on bus '{d.config.name}': {w}"
                                    for w in d.bringup_warnings)
        # allocated before mlockall (which faults every later allocation in at once)
        self.sched = Scheduler(self.dt, lockstep=not self.realtime)
        # (its tables are bring-up's): compiled now
        self.setup_lines += self.io.prepare(self.recording, self.sched.instant)
        if self.recording is not None:  # started before the bring-up: up by now, mostly
            self.recording.ready()
            self.record.wait_for_viewer(self.options.live_wait)
        # watched live or driven from the console, a simulated run goes at the wall clock's
        # pace (still lockstep: the same cycles, only slowed to real time) — else it is over
        # before a viewer is, and a key acts seconds of simulated time after it was pressed
        o = self.options
        self.sched.paced = (o.live is not None or o.console or o.web is not None) and \
            not self.realtime

    def _warm_up(self) -> None:
        """Every compiled part of the cycle run once on throw-away data (:func:`exo_rt.cycle.
        step.warm`, the drives', the scheduler's statistics, the gait phase's)."""
        cy.warm(self.cycle)
        TimingStats().warm_up()  # the scheduler's histograms, counted every 128 cycles
        cy.trajectory.warm_up()  # the gait phase's from heel strikes
        for d in self.drives:
            d.warm_up()

    def _start_recording(self) -> None:
        self.recording = self.record.start(RecordingStart(
            self.top, self.options, self.bus_spec, self.duration, self.start_pose,
            self.injections, self.bus_set, self.realtime, self.can_format, self.helper_cpus,
            self.setup_lines), self.session)
        self.record.tap(self.drives, not self.realtime, self.bus_set.clock)

    def _activate(self, t_boot: float):
        """Real-time set-up, the board's motor power, the drives enabled (READY); the first
        SYNC at zero current. Returns the real-time set-up (None: none taken)."""
        setup = None
        if self.realtime and self.options.rt_setup:  # before motor power: mlockall's time
            rt = self.top.realtime
            setup = realtime_setup(rt.priority, self.rt_cpu, cpu_latency_us=rt.cpu_latency_us)
            self.setup_lines[:0] = setup.lines()
        reset = self.options.reset_faults  # the operator's --reset-faults (explicit)
        self.rig.check_board_watchdog(reset)
        self.rig.power_on()
        self._go(READY, 0)
        for d in self.drives:
            self.board.send_heartbeat(READY, force=True)  # its watchdog sees us meanwhile
            d.enable(reset_faults=reset)
        self.board.send_heartbeat(READY, force=True)  # the board's watchdog counts from here
        self.io.gather()
        self.q_prev[:] = self.q
        from exo_rt.session.script import check_run_start  # (the leg where the session's
        check_run_start(self.session, self.q)  # script starts, else one line: nothing moves)
        # the emulated wearer's feet (and a leading wearer's torques), made before the loop
        self.gait = WearerGait(WearerRun(
            self.cycle, self.robot, self.top.exo, self.wearer.role, self.cfg.reference.phase,
            self.board.clock, self.bus_set.board_command, self.bus_set.world)) \
            if self.rig.board_emulated else None
        self.times.update(boot_to_ready=time.monotonic() - t_boot,
                          process_to_ready=time.monotonic() - STARTED)
        self.k0.clear()  # (the run's one dict: its helpers hold it)
        self.k0[READY] = 0
        self.plan.schedule(self.rig)
        self._next_check = 0
        if self.recording is not None:  # where the loop starts from, and when (lockstep:
            # on the CAN log's clock — frames stamped epoch + simulated time)
            start = time.time() if self.realtime else self.record.frame_epoch + \
                self.bus_set.clock()
            self.recording.update_meta(q_initial=self.q.tolist(), wall_start=start,
                                       **self.bus_set.replay_start())
        self.io.write(-1)  # a first SYNC at zero current: cycle 0 reads fresh frames
        self.cycle.t_prev[:] = self.io.t_sync - self.dt
        return setup

    def _deactivate(self) -> None:
        if self.session is not None:
            self.session.close()
        self.io.close()
        if self.state == SAFE and self.faults:  # what SAFE did to a simulated wearer: their
            # world run on from the first fault's onset (nothing where nothing is simulated)
            since = self.cycles * self.dt - self.faults[0].t
            self.after_safe = self.bus_set.after_safe(since)
        self.rig.close()
        self.cycle.set_rows(self.cycle.no_rows)  # (the recording's shared memory goes)
        self.record.close(self.drives)

    def _report(self) -> RunResult:
        sess = self.session
        out = summary.summary(self.top, self.bus_spec, self.cycle, Outcome(
            self.cycles, self.state, self.events, self.faults, self.k0, self.times,
            self.sched.stats.summary() if self.sched is not None else {},
            self.derating.summary(), sess.ended_by() if sess is not None else None,
            self.setup_lines))
        if self.after_safe:
            out["after_safe"] = self.after_safe
        if self.record.out_dir is not None:
            out["recording"] = self.record.summary_part()
        run_dir = self.record.write(out)
        code = 0 if out["final_state"] == "SHUTDOWN" and not self.faults and \
            out["session_ended_by"] in (None, "run_time_up") else 1  # (a failed session: 1)
        return RunResult(out, run_dir, code, list(self.setup_lines))

    # ------------------------------------------------------------------ the update loop
    def _cycle(self, k: int) -> bool:
        """One cycle: the compiled cycle (:meth:`~exo_rt.runtime.cycle_io.CycleIO.run`), a
        fault it found, then the cycle's end (:meth:`_after_write`); False: the run is over."""
        s, sched, plan = self.s, self.sched, self.plan
        # a late cycle is a hazard only in real time (in lockstep the simulated bus waits)
        late = (sched.late and self.realtime) or (plan.any_overrun and plan.overrunning(k - 1))
        s["overrun_streak"] = s["overrun_streak"] + 1.0 if late else 0.0
        s["wake_us"] = sched.wake_us
        s["compute_us"] = sched.stats.last_compute_us
        s["overruns"] = sched.stats.overruns
        self.io.run(k)
        self.derating.poll(k)  # (one comparison a cycle)
        self.cycles = k + 1
        if s["new_fault"]:
            self._fault(k, int(s["cause"]), int(s["joint"]))
        return self._after_write(k)

    def _after_write(self, k: int) -> bool:
        """The cycle's end, its commands sent: the board's heartbeat, state changes, operator
        stops, injections, the recording's check; False: the run is over."""
        s, plan, rec = self.s, self.plan, self.recording
        state = int(s["state"])  # (read twice a cycle: a record's field costs ~0.5 µs)
        self.board.send_heartbeat(state)
        self.bus_set.tick()  # (no board: the buses simulate none, nothing to advance)
        self._advance(k, state)
        if self._stop_requested and self.state in (READY, RUN):
            self._go(STOPPING, k + 1)  # holds the posture, then disables the drives
        if plan.board:
            plan.act_on_board(k, self.bus_set, self.dt)
        if self.bus_set.pending:
            self.bus_set.due(k)
        if plan.any_overrun and plan.overrunning(k):
            end = time.perf_counter() + 1.5 * self.dt  # an injected overrun: 1.5 periods
            while time.perf_counter() < end:
                pass
        if self._abort is not None and self._abort():
            raise Aborted("abort: safe stop")
        if rec is not None and rec.pending():  # (a share of the events a cycle: never all
            rec.hand_over()  # of a flood in one)
        if k >= self._next_check:
            self._next_check = k + max(1, int(self.top.rate_hz * HAND_OVER_S))
            if rec is not None:
                rec.check(k * self.dt)
        state = int(s["state"])  # as the cycle leaves it: changed above or not
        return state != SHUTDOWN and not (state == SAFE and s["safe_done"])

    def _advance(self, k: int, state: int) -> None:
        """The state change at the end of cycle ``k`` in ``state``, if one is due
        (:func:`~exo_rt.runtime.script.lifecycle`): SHUTDOWN disables the drives, RUN begins
        the session (STOPPING holds the last reference)."""
        new = script.lifecycle(state, k, self.k0, self.dt, self.session, self.duration,
                               self.top.stop_s)
        if new is None:
            return
        if new == SHUTDOWN:
            script.shut_down(self.drives, self.cur, self.io, k)
        self._go(new, k + 1)
        if new == RUN:
            script.begin_run(self.law_state, self.session, self.heels, self.dt, k)
            if self.gait is not None:  # the emulated wearer's heel strikes follow it
                self.session.add(self.gait.begin(self.heels.t_run), listens=True)

    def run_cycle(self) -> int:  # the cycle RUN starts in: where --inject's T counts from
        return script.run_cycle()

    @property
    def state(self) -> int:
        """The run's state (:mod:`exo_rt.cycle.states`): the cycle's own ``s["state"]``,
        which the compiled cycle sets SAFE and :meth:`_go` sets between cycles."""
        return int(self.s["state"])

    @property
    def activities(self):
        """The session's activities (:class:`~exo_rt.session.activities.Activities`)."""
        return self.session.machine.activities

    @property
    def wearer(self):
        """The session's wearer profile (:class:`~exo_rt.session.wearer.Wearer`)."""
        return self.session.machine.wearer

    def _go(self, state: int, k: int) -> None:
        self.s["state"] = state
        self.k0[state] = k
        self.events.append({"cycle": k, "t": round(k * self.dt, 6), "event": "state",
                            "state": STATES[state]})
        if state == RUN:
            self.times["process_to_run"] = time.monotonic() - STARTED

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
            self.s["state"] = SHUTDOWN

    def _fault(self, k: int, cause: int, joint: int) -> None:
        """The cycle went SAFE in cycle k: the fault noted (its cause, reaction, an event)."""
        self.faults.append(summary.fault(self.top, self.plan, self.drives, self.events, k,
                                         cause, joint, self.io.swallowed.describe()))
        self._go(SAFE, k)

    def reset(self) -> None:
        """The explicit operator action that leaves SAFE (drives fault-reset, then READY)."""
        for d in self.drives:
            d.fault_reset()
        self._go(READY, self.cycles)

    @property
    def log(self) -> np.ndarray:
        """The run's records in memory (a structured view: ``log["q"]``, ``log["state"]`` …),
        from cycle 0: the first ``HISTORY_S`` s by default, so memory does not grow with the
        run (``history=True``: every cycle; ``history=False``, real time's default: none). The
        whole run is in the run folder's cycle log
        (:func:`exo_rt.record.recorder.read_cycle_log`)."""
        hist = self.cycle.hist[: self.cycles]
        return hist.view(columns_dtype(self.columns))[:, 0]
