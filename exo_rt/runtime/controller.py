"""The controller: the cycle and its state machine (DESIGN §6).

Each cycle: drives read → estimate → reference → law → safety → drives write → record, on
preallocated arrays (the numeric work in njit). States: BOOT → CONFIGURE (NMT, SDO, mapping
check) → READY (drives enabled at zero current) → ALIGN (minimum jerk to the start posture) →
RUN → STOPPING → SHUTDOWN, or SAFE on any fault: the configured reaction, ramped, then the
drives disabled; SAFE latches — nothing re-enables the drives but an explicit reset.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import can
import numpy as np

from exo_rt import STARTED, __version__
from exo_rt.bus import cia402 as c
from exo_rt.bus.drives import Drives
from exo_rt.config import transmission_rows
from exo_rt.control import estimate, laws, trajectory
from exo_rt.dynamics import Dynamics
from exo_rt.errors import BusError, ConfigError
from exo_rt.model.mechanism import Mechanism
from exo_rt.runtime import safety
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.loop import Scheduler, realtime_setup, realtime_teardown

BOOT, CONFIGURE, READY, ALIGN, RUN, STOPPING, SAFE, SHUTDOWN = range(8)
STATES = ("BOOT", "CONFIGURE", "READY", "ALIGN", "RUN", "STOPPING", "SAFE", "SHUTDOWN")
READY_CYCLES = 20  # zero current after enabling, before moving

INJECT_KINDS = ("drop", "delay", "corrupt", "heartbeat_loss", "emcy", "bus_off",
                "encoder_glitch", "overcurrent", "overrun", "nan", "estop", "board_link_loss")
SIM_KIND = {"drop": "drop", "delay": "delay", "corrupt": "corrupt",
            "heartbeat_loss": "heartbeat_loss", "emcy": "fault", "bus_off": "bus_off",
            "encoder_glitch": "encoder_glitch", "overcurrent": "overcurrent"}


@dataclass(frozen=True)
class Injection:
    """``--inject KIND[:JOINT]@T[+DURATION]`` (simulated bus only)."""

    kind: str
    joint: str | None
    t: float
    duration: float

    @staticmethod
    def parse(spec: str, joints: tuple[str, ...]) -> Injection:
        how = "write KIND[:JOINT]@T[+DURATION], e.g. drop:knee@2.0+0.05"
        try:
            head, _, when = spec.partition("@")
            kind, _, joint = head.partition(":")
            t, _, dur = when.partition("+")
            t_s, dur_s = float(t), float(dur) if dur else 0.0
        except ValueError:
            raise ConfigError(f"cannot read --inject '{spec}'", None, how) from None
        if kind not in INJECT_KINDS:
            raise ConfigError(f"unknown fault kind '{kind}' in --inject", None,
                              f"use one of {', '.join(INJECT_KINDS)}")
        if not when or t_s < 0 or dur_s < 0:
            raise ConfigError(f"--inject '{spec}' has no time", None, how)
        if joint and joint not in joints:
            raise ConfigError(f"--inject names unknown joint '{joint}'", None,
                              f"use one of {', '.join(joints)}")
        return Injection(kind, joint or None, t_s, dur_s)


@dataclass
class Fault:
    t: float
    cause: str
    joint: str | None
    reaction_cycles: int
    action: str
    cycle: int = 0


@dataclass
class RunResult:
    summary: dict
    run_dir: Path | None
    exit_code: int
    setup: list[str] = field(default_factory=list)


class Controller:
    """One run of the exoskeleton controller on a robot's buses (real or simulated)."""

    def __init__(self, top: TopConfig, bus_spec: str = "sim", *, realtime: bool = False,
                 injections: tuple[Injection, ...] = (), start_pose=None, seed: int = 0,
                 status=None, rt_setup: bool = True, board: str | None = "emulator",
                 plant: Mechanism | None = None) -> None:
        self.top = top
        self.robot = top.robot
        self.cfg = top.controller
        self.dt = 1.0 / top.rate_hz
        self.n = self.robot.nq
        self.bus_spec = bus_spec
        self.simulated = bus_spec.startswith("sim")
        self.realtime = realtime or bus_spec == "sim-realtime" or not self.simulated
        self.injections = injections
        self.status = status
        self.rt_setup = rt_setup
        if injections and not self.simulated:
            raise ConfigError("--inject works on the simulated bus only", None,
                              "drop --inject, or run with --bus sim")
        self.world = None
        self.state = BOOT
        self.can_format = ".blf"
        self.start_pose = None if start_pose is None else [float(x) for x in start_pose]
        self.cycle_log = self.can_log = None
        self.events: list[dict] = []
        self._stop_requested = False
        self.faults: list[Fault] = []
        self._open(start_pose, seed, plant)
        self._open_board(board)
        self._allocate()

    # ------------------------------------------------------------------ set-up
    def _open(self, start_pose, seed: int, plant: Mechanism | None) -> None:
        """Open the buses; simulated, the plant is ``plant`` (default: the robot's own model —
        a different one stands for a leg the model does not match, e.g. on the bench)."""
        buses = self.top.buses
        if self.simulated:
            from exo_rt.sim.simbus import SimWorld

            name = f"run-{id(self)}"
            self.world = SimWorld.open(name, plant or self.robot, buses, dt=self.dt, seed=seed)
            self.world.reset(np.zeros(self.n) if start_pose is None else np.asarray(start_pose))
            opened = [can.Bus(interface="exo_sim", channel=b.channel, world=name) for b in buses]
        else:
            opened = [self._open_real(b) for b in buses]
        self.drives = [Drives(bus, b, self.robot) for bus, b in zip(opened, buses, strict=True)]

    def _open_board(self, url: str | None) -> None:
        """The embedded board's link: ``emulator`` (on a pty, lockstepped with the sim),
        a pyserial URL, or None (no board — bench use only)."""
        self.board = self.board_emulator = None
        if url is None or url == "none":
            return
        from firmware_bridge.link import BoardLink

        if url == "emulator":
            from firmware_bridge.emulator import BoardEmulator, BoardEmulatorProcess

            if self.realtime:  # on the wall clock, in its own process like the real board
                self.board_emulator = BoardEmulatorProcess()
                clock = time.monotonic
            else:  # lockstep: ticked by the cycle on the simulated clock
                clock = self._sim_clock
                self.board_emulator = BoardEmulator(clock=clock, transport="socket")
            self.board = BoardLink(self.board_emulator.path, clock=clock, link_timeout=0.02,
                                   heartbeat_hz=250.0)
        else:
            self.board = BoardLink(url, link_timeout=0.02, heartbeat_hz=250.0)

    def _sim_clock(self) -> float:
        return self.world.t if self.world is not None else 0.0

    def _board_tick(self) -> None:
        if self.board_emulator is not None and not self.realtime:
            self.board_emulator.tick(self._sim_clock())

    def _open_real(self, bus_cfg):
        spec = self.bus_spec
        interface, _, rest = spec.partition(":")
        channel, _, bitrate = rest.partition("@")
        if not interface or not channel:
            raise ConfigError(f"cannot read the bus spec '{spec}'", None,
                              "write INTERFACE:CHANNEL[@BITRATE], e.g. socketcan:can0")
        try:
            kw = {"bitrate": int(bitrate)} if bitrate else {}
            if interface == "slcan":
                kw["sleep_after_open"] = 0
            return can.Bus(interface=interface, channel=channel, **kw)
        except (can.CanError, OSError, ValueError, ImportError) as exc:
            raise BusError(f"cannot open bus '{spec}' ({exc})", None,
                           "check the interface name, the channel and that the adapter is "
                           "connected (see docs/deploy.md)") from None

    def _allocate(self) -> None:
        n = self.n
        self.dyn = Dynamics(self.robot)
        self.dyn_exo = Dynamics(self.top.exo)
        self.gains = self.cfg.gains
        self.opts = self.cfg.options()
        self.tc = transmission_rows(self.robot, self.cfg)
        self.ls = laws.law_state(n)
        self.sc = laws.law_scratch(n)
        self.q = np.zeros(n)
        self.q_prev = np.zeros(n)
        self.qd = np.zeros(n)
        self.i_meas = np.zeros(n)
        self.flags = np.zeros(n, dtype=np.int64)
        self.qr, self.qdr, self.qddr = np.zeros(n), np.zeros(n), np.zeros(n)
        self.q_align0 = np.zeros(n)
        self.q_start = np.zeros(n)
        self.tau = np.zeros(n)
        self.cur = np.zeros(n)
        self.assist = np.zeros(n)
        self.q_hold = np.zeros(n)
        self.phase_state = np.array([0.0, self.cfg.reference.period, 0.0])
        self._t_run = 0.0
        self.check_out = np.zeros(2, dtype=np.int64)
        self.missing_streak = np.zeros(n, dtype=np.int64)
        self.alpha = estimate.filter_gain(self.cfg.velocity_cutoff_hz, self.dt)
        ref = self.cfg.reference
        kinds = [ref.gait_joints.get(nm, "hip" if nm.endswith("hip") else "knee")
                 for nm in self.robot.joint_names]
        self.coeffs = trajectory.gait_coefficients(list(self.robot.joint_names), kinds,
                                                   ref.amplitude)
        trajectory.gait(0.0, ref.period, self.coeffs, self.q_start, self.qdr, self.qddr)
        s = self.top.safety
        self.limits = safety.limits_array(self.robot, s.joint_margin, s.tracking_error,
                                          self.cfg.current_limit)
        self.sopts = np.array([s.stop_time, s.stale_cycles, s.overrun_streak], dtype=float)
        self.action = safety.ACTIONS[s.action]

    def _log_capacity(self, duration: float) -> int:
        return int((duration + self.top.align_s + self.top.stop_s + 2.0) * self.top.rate_hz)

    # ------------------------------------------------------------------ the run
    def run(self, duration: float, out_dir: Path | None = None) -> RunResult:
        """BOOT … SHUTDOWN (or SAFE): returns the summary, the run folder and the exit code."""
        t_boot = time.monotonic()
        self._warm_up()
        self._attach_can_log(out_dir)
        self.state = CONFIGURE
        for d in self.drives:
            d.configure()
        if self.board is not None:
            if not self.board.wait_for_power(2.0, tick=self._board_tick):
                raise BusError("the embedded board did not switch motor power on"
                               + (" (e-stop pressed)" if self.board.estop else ""), None,
                               "release the e-stop, check the board link and its supply")
        self.state = READY
        for d in self.drives:
            d.enable()
        for d in self.drives:  # the last enabling cycle's measurements
            self.q[d.joint_index] = d.position
        self.q_prev[:] = self.q
        self.q_align0[:] = self.q
        self.startup_s = time.monotonic() - t_boot
        self.to_ready_s = time.monotonic() - STARTED
        self.to_run_s = float("nan")
        self.duration = duration
        cap = self._log_capacity(duration)
        self.log = np.zeros((cap, 2 + 5 * self.n))  # t, state, q, q_ref, cur, tau, flags
        self._open_recording(out_dir, duration)
        self.k0 = {READY: 0}
        self.sched = Scheduler(self.dt, lockstep=not self.realtime)
        setup = realtime_setup() if self.realtime and self.rt_setup else None
        self._prev_compute = 0.0
        self._overrun_streak = 0
        self._schedule_injections()
        self._wall0 = time.monotonic()
        self._next_status = self._wall0 + 1.0
        self._write_commands()  # a first SYNC at zero current: cycle 0 reads fresh frames
        try:
            self.sched.run(self._cycle, max_cycles=cap)
        except KeyboardInterrupt:
            self._interrupted = True
            self.events.append({"cycle": getattr(self, "cycles", 0), "event": "operator",
                                "action": "ctrl-C: safe stop"})
            self._stop_now()
        finally:
            if setup is not None:
                realtime_teardown()
            for d in self.drives:
                d.bus.shutdown()
            if self.board is not None:
                self.board.set_power(False)
                self.board.close()
            if self.board_emulator is not None:
                self.board_emulator.close()
            self._close_recording()
        summary = self._summary()
        run_dir = self._write(summary, out_dir)
        code = 0 if summary["final_state"] == "SHUTDOWN" and not self.faults else 1
        return RunResult(summary, run_dir, code, setup.lines() if setup else [])

    def _attach_can_log(self, out_dir: Path | None) -> None:
        self.events = [{"cycle": 0, "t": 0.0, "event": "state", "state": "BOOT"}]
        self.can_log = self.cycle_log = None
        if out_dir is None:
            return
        from exo_rt.record.recorder import CanRecorder

        out_dir.mkdir(parents=True, exist_ok=True)
        self.can_log = CanRecorder(out_dir / f"can{self.can_format}")
        for d in self.drives:
            self.can_log.attach(d.bus)

    def _open_recording(self, out_dir: Path | None, duration: float) -> None:
        if out_dir is None:
            return
        from exo_rt.record.recorder import CycleLog

        meta = {"joint_names": list(self.robot.joint_names), "rate_hz": self.top.rate_hz,
                "config": str(self.top.path), "config_sha256": self.top.sha256,
                "controller": str(self.cfg.source), "law": self.cfg.law, "bus": self.bus_spec,
                "duration_s": duration, "start_pose": self.start_pose,
                "q_initial": self.q.tolist(),
                "injections": [[i.kind, i.joint, i.t, i.duration] for i in self.injections],
                "states": list(STATES), "wall_start": time.time()}
        self.cycle_log = log = CycleLog(out_dir / "cycles.exolog", self.n, meta)
        # the cycle's working arrays live in the record: recording them costs one row copy
        for name, attr in (("q", "q"), ("qd", "qd"), ("q_ref", "qr"), ("current", "i_meas"),
                           ("command", "cur"), ("torque", "tau")):
            view = log.view(name)
            view[:] = getattr(self, attr)
            setattr(self, attr, view)
        self._cols = (*log.columns["flags"], log.columns["overrun_streak"][0])

    def _close_recording(self) -> None:
        if self.cycle_log is not None:
            self.cycle_log.close()
            self.events.extend(self.cycle_log.events)
        if self.can_log is not None:
            self.can_log.close()

    def _warm_up(self) -> None:
        """Compile and run every njit function of the cycle once, before READY."""
        q = self.q_start.copy()
        laws.law_torque(self.opts, self.dyn.packed, self.dyn.workspace, self.dyn_exo.packed,
                        self.dyn_exo.workspace, self.gains, laws.law_state(self.n), q, q * 0,
                        q, q * 0, q * 0, q * 0, self.dt, self.tau, laws.law_scratch(self.n))
        laws.torque_to_current(self.tau, q * 0, q * 0, self.tc, True, self.cur)
        safety.check(self.limits, self.sopts, q, q * 0, q * 0, q * 0, q * 0,
                     np.zeros(self.n, dtype=np.int64), np.zeros(self.n, dtype=np.int64), 0,
                     False, q, self.check_out)
        safety.safe_action(0, q, q, q, 1.0, 1.0, 1.0, self.tau)
        estimate.velocity_update(q, q.copy(), q * 0, self.dt, self.alpha)
        trajectory.minimum_jerk(0.0, 1.0, q, q, self.qr, self.qdr, self.qddr)
        self.tau[:] = 0.0
        self.cur[:] = 0.0

    def _schedule_injections(self) -> None:
        self._nan_window = []
        self._overrun_window = []
        self._board_events = []
        self._injected = []  # (cycle, kind, joint)
        for inj in self.injections:
            k = int(round(inj.t / self.dt))
            cycles = max(1, int(round(inj.duration / self.dt)))
            self._injected.append((k, inj.kind, inj.joint))
            if inj.kind == "nan":
                self._nan_window.append((k, k + cycles, inj.joint))
            elif inj.kind == "overrun":
                self._overrun_window.append((k, k + max(cycles, self.top.safety.overrun_streak)))
            elif inj.kind in ("estop", "board_link_loss"):
                if self.board_emulator is None:
                    raise ConfigError(f"--inject {inj.kind} needs the board emulator", None,
                                      "run with --board emulator (the default)")
                self._board_events.append((k, inj.kind, cycles))
            else:
                for d in self.drives:
                    for cfg in d.config.drives:
                        if inj.joint in (None, cfg.joint):
                            self.world.schedule(self.world.cycle + k, SIM_KIND[inj.kind],
                                                d.config.channel, cfg.node, cycles)
                            if inj.joint is None:
                                break

    # ------------------------------------------------------------------ one cycle
    def _read(self) -> None:
        if self.board is not None:
            self.board.poll()
        deadline = None if not self.realtime else time.monotonic() + 0.7 * self.dt
        for d in self.drives:
            d.collect(deadline)
            self.q[d.joint_index] = d.position
            self.i_meas[d.joint_index] = d.current
            self.flags[d.joint_index] = d.flags

    def _cycle(self, k: int) -> bool:
        t = k * self.dt
        self._read()
        for k0, k1, joint in self._nan_window:
            if k0 <= k < k1:
                j = self.robot.joint_names.index(joint) if joint else 0
                self.q[j] = math.nan
        estimate.velocity_update(self.q, self.q_prev, self.qd, self.dt, self.alpha)
        self._reference(k)
        tracking = self.state in (ALIGN, RUN)
        if self.state in (ALIGN, RUN, STOPPING):
            laws.law_torque(self.opts, self.dyn.packed, self.dyn.workspace, self.dyn_exo.packed,
                            self.dyn_exo.workspace, self.gains, self.ls, self.q, self.qd,
                            self.qr, self.qdr, self.qddr, self.assist, self.dt, self.tau,
                            self.sc)
            laws.torque_to_current(self.tau, self.qd, self.qddr, self.tc,
                                   self.opts[laws.O_FRICTION_COMP] > 0.5, self.cur)
        elif self.state != SAFE:
            self.tau[:] = 0.0
            self.cur[:] = 0.0
        if self.state != SAFE:
            safety.check(self.limits, self.sopts, self.q, self.qd, self.i_meas, self.cur,
                         self.tau, self.flags, self.missing_streak, self._overrun_streak,
                         tracking, self.qr, self.check_out)
            if self.check_out[0] == safety.OK and self.board is not None:
                if self.board.estop:
                    self.check_out[0], self.check_out[1] = safety.ESTOP, -1
                elif self.board.link_lost:
                    self.check_out[0], self.check_out[1] = safety.BOARD_LINK_LOSS, -1
            if self.check_out[0] != safety.OK:
                self._enter_safe(k, int(self.check_out[0]), int(self.check_out[1]))
        if self.state == SAFE:
            self._safe_command(k)
        self._write_commands()
        if self.board is not None:
            self.board.send_heartbeat(self.state)
            self._board_tick()
        self._record(k, t)
        self._advance(k)
        if self._stop_requested and self.state in (READY, ALIGN, RUN):
            self._go(STOPPING, k + 1)  # holds the posture, then disables the drives
        self._board_faults(k)
        self._inject_overrun(k)
        self._status(k)
        return self.state != SHUTDOWN and not (self.state == SAFE and self._safe_done)

    def _reference(self, k: int) -> None:
        if self.state == READY:
            self.qr[:] = self.q
            self.qdr[:] = 0.0
            self.qddr[:] = 0.0
        elif self.state == ALIGN:
            trajectory.minimum_jerk((k - self.k0[ALIGN]) * self.dt, self.top.align_s,
                                    self.q_align0, self.q_start, self.qr, self.qdr, self.qddr)
        elif self.state == RUN:
            ref = self.cfg.reference
            t = (k - self.k0[RUN]) * self.dt
            phase = t / ref.period
            if ref.phase == "events" and self.board is not None:
                while self.board.heel_strikes:  # the wearer's heel strikes set the phase
                    trajectory.phase_on_heel_strike(self.phase_state,
                                                    self.board.heel_strikes.popleft() - self._t_run,
                                                    0.5 * ref.period, 2.0 * ref.period, 0.5)
                if self.phase_state[trajectory.PH_COUNT] > 0:
                    phase = trajectory.phase_from_events(self.phase_state, t)
            trajectory.gait(phase, self.phase_state[trajectory.PH_PERIOD], self.coeffs, self.qr,
                            self.qdr, self.qddr)
        elif self.state == STOPPING:
            self.qdr[:] = 0.0
            self.qddr[:] = 0.0

    def _advance(self, k: int) -> None:
        if self.state == READY and k >= READY_CYCLES:
            self.q_align0[:] = self.q
            self._go(ALIGN, k + 1)
        elif self.state == ALIGN and (k + 1 - self.k0[ALIGN]) * self.dt >= self.top.align_s:
            self.ls[:] = 0.0
            self._go(RUN, k + 1)
            self._t_run = self.board.clock() + self.dt if self.board is not None else 0.0
            if isinstance(getattr(self.board_emulator, "_t0", None), float):
                self.board_emulator._t0 = self._t_run  # the emulated wearer starts walking
        elif self.state == RUN and (k + 1 - self.k0[RUN]) * self.dt >= self.duration:
            self._go(STOPPING, k + 1)  # holds the last reference
        elif self.state == STOPPING and (k + 1 - self.k0[STOPPING]) * self.dt >= self.top.stop_s:
            for d in self.drives:
                d.controlword[:] = c.CW_DISABLE_VOLTAGE
            self.cur[:] = 0.0
            self._write_commands()
            self._go(SHUTDOWN, k + 1)

    def _go(self, state: int, k: int) -> None:
        self.state = state
        self.k0[state] = k
        self.events.append({"cycle": k, "t": round(k * self.dt, 6), "event": "state",
                            "state": STATES[state]})
        if state == RUN:
            self.to_run_s = time.monotonic() - STARTED

    def request_stop(self, why: str = "operator stop") -> None:
        """A safe stop from outside the loop (ctrl-C, SIGTERM): the next cycle goes STOPPING."""
        if not self._stop_requested:
            self._stop_requested = True
            self.events.append({"cycle": getattr(self, "cycles", 0), "event": "operator",
                                "action": why})

    def _stop_now(self) -> None:
        """ctrl-C: the safe stop (zero current, the drives hold by friction, then disabled)."""
        if self.state not in (SAFE, SHUTDOWN):
            for d in self.drives:
                d.controlword[:] = c.CW_DISABLE_VOLTAGE
                d.send_rpdos(np.zeros(d.n))
                d.send_sync()
            self.state = SHUTDOWN

    # ------------------------------------------------------------------ safety
    def _enter_safe(self, k: int, cause: int, joint: int) -> None:
        onset = k
        for ik, kind, jname in self._injected:  # an injected cause: count from its onset
            anywhere = jname is None or joint < 0 or kind in ("bus_off", "overrun")
            if ik <= k and (anywhere or self.robot.joint_names[joint] == jname):
                # a heartbeat loss is only detectable once the consumer timeout has passed
                onset = ik if kind != "heartbeat_loss" else k
        self.faults.append(Fault(
            t=onset * self.dt, cause=safety.CAUSES[cause],
            joint=self.robot.joint_names[joint] if joint >= 0 else None,
            reaction_cycles=k - onset + 1, action=self.top.safety.action, cycle=k))
        self.q_hold[:] = np.where(np.isfinite(self.q), self.q, self.q_hold)
        self._safe_k0 = k
        self._safe_done = False
        f = self.faults[-1]
        self.events.append({"cycle": k, "t": round(k * self.dt, 6), "event": "fault",
                            "cause": f.cause, "joint": f.joint, "action": f.action})
        self._go(SAFE, k)

    def _safe_command(self, k: int) -> None:
        s = self.top.safety
        ramp = max(1, s.ramp_cycles)
        fraction = max(0.0, 1.0 - (k - self._safe_k0) / ramp)
        q = np.where(np.isfinite(self.q), self.q, self.q_hold)
        qd = np.where(np.isfinite(self.qd), self.qd, 0.0)
        safety.safe_action(self.action, q, qd, self.q_hold, s.damping, s.stiffness, fraction,
                           self.tau)
        laws.torque_to_current(self.tau, qd, self.qddr, self.tc, False, self.cur)
        if fraction <= 0.0:
            for d in self.drives:
                d.controlword[:] = c.CW_DISABLE_VOLTAGE
            self.cur[:] = 0.0
            self._safe_done = k - self._safe_k0 > ramp + 2

    def reset(self) -> None:
        """The explicit operator action that leaves SAFE (drives fault-reset, then READY)."""
        for d in self.drives:
            d.fault_reset()
        self.state = READY

    # ------------------------------------------------------------------ write, record
    def _write_commands(self) -> None:
        for d in self.drives:
            d.send_rpdos(self.cur[d.joint_index])
        for d in self.drives:
            d.send_sync()

    def _record(self, k: int, t: float) -> None:
        if self.cycle_log is not None:  # q, qd, q_ref, current, command, torque are views
            r, c_ = self.cycle_log.record, self._cols
            r[0] = t
            r[1] = k
            r[2] = self.state
            r[3] = self.check_out[0] if self.state == SAFE else 0
            r[c_[0] : c_[1]] = self.flags
            r[c_[2]] = self._overrun_streak
            b = self.board
            r[c_[2] + 1] = 0 if b is None else (1 if b.estop else 0) | (2 if b.link_lost else 0)
            st = self.sched.stats
            if st.n:
                r[c_[2] + 2] = st.wake_us[st.n - 1]
                r[c_[2] + 3] = st.compute_us[st.n - 1]
            self.cycle_log.commit()
        if k < len(self.log):
            row = self.log[k]
            n = self.n
            row[0] = t
            row[1] = self.state
            row[2 : 2 + n] = self.q
            row[2 + n : 2 + 2 * n] = self.qr
            row[2 + 2 * n : 2 + 3 * n] = self.cur
            row[2 + 3 * n : 2 + 4 * n] = self.tau
            row[2 + 4 * n : 2 + 5 * n] = self.flags
            self.cycles = k + 1

    def _board_faults(self, k: int) -> None:
        for k0, kind, cycles in self._board_events:
            if k == k0 and kind == "estop":
                self.board_emulator.press_estop(True)
            elif k == k0:
                self.board_emulator.stall(cycles * self.dt)

    def _inject_overrun(self, k: int) -> None:
        """An injected overrun: this cycle computes for 1.5 periods."""
        busy = any(k0 <= k < k1 for k0, k1 in self._overrun_window)
        if busy:
            end = time.perf_counter() + 1.5 * self.dt
            while time.perf_counter() < end:
                pass
        last = self.sched.stats.compute_us[self.sched.stats.n - 1] if self.sched.stats.n else 0
        # a slow cycle is a hazard only in real time; in lockstep the simulated bus waits
        over = busy or (self.realtime and last > self.dt * 1e6)
        self._overrun_streak = self._overrun_streak + 1 if over else 0

    def _status(self, k: int) -> None:
        if self.status is None or not self.realtime and k % 250:
            return
        now = time.monotonic()
        if now < self._next_status:
            return
        self._next_status = now + 1.0
        err = np.degrees(np.abs(self.qr - self.q)) if self.state == RUN else np.zeros(self.n)
        st = self.sched.stats
        p99 = np.percentile(st.compute_us[: st.n], 99) if st.n else 0.0
        self.status(f"{STATES[self.state]:<9} cycle {k:7d}  t {k * self.dt:7.2f} s  "
                    f"compute p99 {p99:6.1f} µs  overruns {st.overruns}  worst error "
                    f"{err.max():5.2f}°  faults {len(self.faults)}")

    # ------------------------------------------------------------------ summary
    def _summary(self) -> dict:
        n = self.n
        log = self.log[: getattr(self, "cycles", 0)]
        run = log[log[:, 1] == RUN]
        joints = {}
        for j, name in enumerate(self.robot.joint_names):
            q = log[:, 2 + j]
            err = np.degrees(run[:, 2 + j] - run[:, 2 + n + j]) if len(run) else np.zeros(1)
            finite = q[np.isfinite(q)]
            joints[name] = {
                "rms_error_deg": float(np.sqrt(np.mean(err**2))),
                "max_error_deg": float(np.max(np.abs(err))),
                "max_abs_current_A": float(np.max(np.abs(log[:, 2 + 2 * n + j])))
                if len(log) else 0.0,
                "min_position_deg": float(np.degrees(finite.min())) if len(finite) else 0.0,
                "max_position_deg": float(np.degrees(finite.max())) if len(finite) else 0.0,
            }
        return {
            "exo_rt_version": __version__,
            "config": str(self.top.path),
            "config_sha256": self.top.sha256,
            "controller": self.cfg.law,
            "bus": self.bus_spec,
            "rate_hz": self.top.rate_hz,
            "duration_s": float(len(log) * self.dt),
            "cycles": int(len(log)),
            "startup_s": {"boot_to_ready": round(self.startup_s, 3),
                          "process_to_ready": round(self.to_ready_s, 3),
                          "process_to_run": round(self.to_run_s, 3)},
            "timing": self.sched.stats.summary(),
            "joints": joints,
            "faults": [{"t": round(f.t, 6), "cause": f.cause, "joint": f.joint,
                        "reaction_cycles": f.reaction_cycles, "action": f.action}
                       for f in self.faults],
            "final_state": STATES[self.state],
        }

    def _write(self, summary: dict, out_dir: Path | None) -> Path | None:
        if out_dir is None:
            return None
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out_dir / "config.yaml").write_text(self.top.path.read_text())
        with open(out_dir / "events.jsonl", "w") as f:
            for e in self.events:
                f.write(json.dumps(e) + "\n")
        return out_dir


def status_printer(line: str) -> None:
    """The live status line (stderr; rewritten in place on a terminal)."""
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line)
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
