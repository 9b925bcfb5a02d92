"""The bench: a robot's drives on their buses, driven one control period at a time with the
safety layer on (docs/safety.md), the joint position loop every motion procedure uses, and the
controller's own cycle run against the drives (:meth:`Bench.run_controller`).

A :class:`Bench` works on any python-can bus (real drives on a rig, the emulated drives over
SLCAN, the in-process simulated bus): it sends the currents, reads the encoders and currents,
and measures through the controller's own cycle (:func:`exo_rt.cycle.step.build`, from the
top config and the controller config it names): positions, currents and flags into the
cycle's data, the velocity by :func:`exo_rt.cycle.step.estimate` over the real gap between
the SYNCs the samples answer, and :func:`exo_rt.cycle.step.check` — the controller's own
check — every cycle: a drive fault, stale feedback, a lost heartbeat, an encoder glitch, a
current, speed or soft joint limit, a tracking error, or the operator's abort key raises
:class:`BenchAbort`, and the caller (:func:`exo_rt.hil.procedures.run_procedure`) disables
the drives. Gains tuned on the bench are thus tuned against the estimator that runs on the
exoskeleton.

What a procedure cannot do itself — clamp a joint's output and measure its reaction torque —
goes through a :class:`~exo_rt.hil.fixture.Fixture`: the rig's fixture node on the CAN bus
(emulated with the simulated drives), or the operator.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import can
import numpy as np

from exo_rt.control import laws
from exo_rt.cycle import safety
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import READY, RUN, SAFE, STATES
from exo_rt.dynamics import Dynamics
from exo_rt.errors import BusError
from exo_rt.hil.fixture import BenchAbort, Fixture, OperatorFixture
from exo_rt.jit import njit
from exo_rt.runtime import summary
from exo_rt.runtime.buses import BusSet
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.rig import Rig


class AbortKey:
    """The abort key: 'q' + Enter (or end of input) on the operator's terminal, read by a
    daemon thread; ctrl-C works everywhere. ``pressed`` is checked every cycle."""

    def __init__(self, stream=None) -> None:
        self.pressed = threading.Event()
        if stream is not None:
            threading.Thread(target=self._watch, args=(stream,), daemon=True).start()

    def _watch(self, stream) -> None:
        for line in stream:
            if line.strip().lower() in ("q", "a", "abort", "stop"):
                break
        else:
            return  # end of input without a key: not an abort (e.g. stdin closed)
        self.pressed.set()


@dataclass
class Log:
    """One motion's samples, preallocated: time (s), joint angles (rad), filtered velocities
    (rad/s), reference (rad), commanded and measured currents (A), commanded torque (N·m);
    and, for :meth:`Bench.run_controller`, the controller's state each cycle
    (:mod:`exo_rt.cycle.states`)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    q_ref: np.ndarray
    i_cmd: np.ndarray
    i_meas: np.ndarray
    tau: np.ndarray
    n: int = 0
    state: np.ndarray | None = None

    @classmethod
    def empty(cls, samples: int, joints: int, states: bool = False) -> Log:
        z = np.zeros
        return cls(z(samples), z((samples, joints)), z((samples, joints)), z((samples, joints)),
                   z((samples, joints)), z((samples, joints)), z((samples, joints)),
                   state=z(samples, np.int64) if states else None)

    def trimmed(self) -> Log:
        k = self.n
        return Log(self.t[:k], self.q[:k], self.qd[:k], self.q_ref[:k], self.i_cmd[:k],
                   self.i_meas[:k], self.tau[:k], k,
                   None if self.state is None else self.state[:k])

    def add(self, t: float, c: cy.Cycle, state: int = 0) -> None:
        """The cycle's sample ``c`` at time ``t`` (s): its measured and estimated joint
        state, reference, commanded current and torque, measured current."""
        i = self.n
        self.t[i] = t
        self.q[i], self.qd[i], self.q_ref[i] = c.q, c.qd, c.qr
        self.i_cmd[i], self.i_meas[i], self.tau[i] = c.cur, c.i_meas, c.tau
        if self.state is not None:
            self.state[i] = state
        self.n = i + 1


class BenchBuses(BusSet):
    """The bench's buses as a run's bus set (:meth:`Bench.run_controller`): opened and shut
    down by the bench's owner, not by the run; lockstep unless the bench is paced (drives on
    the wall clock); no board, nothing to inject."""

    injectable = False
    board = None
    process = None
    board_process = None
    pending: list = []

    def __init__(self, bench: Bench) -> None:
        self.lockstep = not bench.pace
        self.world = bench.world

    def clock(self) -> float:
        """s: the wall clock's (paced), else the simulated world's time (0 without one)."""
        if not self.lockstep:
            return time.monotonic()
        return self.world.t if self.world is not None else 0.0

    def tick(self) -> None:
        """Nothing to advance: the drives keep their own time (or the SYNCs step them)."""

    def board_path(self) -> str:
        raise BusError("the bench runs without the embedded board", None,
                       "leave --board out: the bench has none")

    def board_command(self, line: str) -> None:
        """No board emulator on the bench: nothing to tell."""

    def close(self) -> None:
        """The bench's owner shuts its buses down (:meth:`Bench.close`)."""


def build_cycle(top: TopConfig, dt: float) -> cy.Cycle:
    """The bench's cycle: the controller's (:func:`exo_rt.cycle.step.build`) of the bench's
    top config and the controller file it names, at the bench's period ``dt`` (s)."""
    return cy.build(top.robot, top.exo, top.controller, top.safety, dt=dt)


class Bench:
    """The robot's drives on their buses (opened by the caller), measured through the
    controller's own cycle, with its safety check on.

    ``control`` is that cycle (:func:`exo_rt.cycle.step.build` from ``top`` and the
    controller config it names: its law, gains, velocity filter, limits and safe action);
    ``q``, ``qd``, ``i_meas``, ``i_cmd`` and ``flags`` are views of its data (measured angle,
    estimated velocity, measured and commanded current, the drives' flags).
    ``reply_timeout`` (s): how long a cycle waits for every drive's reply (None: the simulated
    bus has them queued). ``pace``: drives on the wall clock (a rig's): the bench holds the
    period on it, and a sample's time is when its SYNC left (monotonic clock); unpaced, the
    drives are in lockstep (the simulated bus, the emulated drives of ``exo-rt drives``:
    their physics advances one period at each SYNC, however long the host takes), so the
    SYNCs are k·dt apart on the drives' own time.
    """

    def __init__(self, top: TopConfig, drives: list, *, fixture: Fixture | None = None,
                 dt: float | None = None, reply_timeout: float | None = None,
                 pace: bool = False, abort: AbortKey | None = None, world=None) -> None:
        self.top = top
        self.robot = top.robot
        self.drives = drives
        self.fixture = fixture or OperatorFixture()
        self.dt = dt if dt is not None else 1.0 / top.rate_hz
        self.reply_timeout = reply_timeout
        self.pace = pace
        self.abort = abort or AbortKey()
        self.world = world  # the SimWorld in simulation (tests look at the plant through it)
        self.sources: list = []  # more session sources for run_controller: callables
        # (controller) → source, as RunOptions.sources (a test's injected fault, a rehearsal)
        self.n = self.robot.nq
        self.control = c = build_cycle(top, self.dt)
        self._built = (c.s_array.copy(), c.seg_array.copy(), c.v.copy())  # start()'s
        self.q, self.qd, self.i_meas, self.i_cmd, self.flags = c.q, c.qd, c.i_meas, c.cur, \
            c.flags
        self.transmissions, self.limits = c.transmissions, c.limits
        self.dyn = Dynamics(self.robot)
        self.tracking = False  # the safety check watches the tracking error against c.qr
        self.cycles = 0
        self._deadline = 0.0
        self._warm_up()

    def _warm_up(self) -> None:
        """Run every njit function of the cycle once before any drive is enabled: a cold numba
        cache compiles here (seconds), never between two cycles of an enabled drive. The
        controller's cycle in every state, on throw-away data of the same model."""
        z = np.zeros(self.n)
        tau, cur = np.zeros(self.n), np.zeros(self.n)
        self.dyn.inverse_dynamics(z, z, z, out=tau)
        laws.torque_to_current(tau, z, z, self.transmissions, True, cur)
        loop_acceleration((z, z, z), z, z, z, z, z.copy(), self.dt, tau)
        cy.warm(self.control)  # the step's parts (estimate, check) and clock among them

    # ------------------------------------------------------------------ the cycle
    def start(self) -> None:
        """Configure and enable every drive, read the first measurement: the cycle's data
        back to as built (nothing estimated, no streak, the law's state zero), the velocity
        estimate anchored on this sample."""
        for d in self.drives:
            d.configure()
            d.enable()
        self._reset()
        c = self.control
        self.cycle(np.zeros(self.n), check=False)
        c.q_prev[:] = c.q
        c.t_prev[:] = c.s["sample_t"]
        c.qd[:] = 0.0

    def _reset(self) -> None:
        """The cycle's data back to as built: nothing estimated, no streak, the law's state
        zero."""
        c = self.control
        c.s_array[:], c.seg_array[:], c.v[:] = self._built
        c.flags[:] = 0
        c.streaks[:] = 0
        c.law_state[:] = 0
        c.scratch[:] = 0.0

    def exchange(self, currents: np.ndarray) -> None:
        """One period on every bus: the currents (A) and the SYNC, then the drives' answers to
        that SYNC into the cycle's data (angles, currents, flags) and the SYNC's time into
        its ``sample_t`` — the drives sample at the SYNC, as in the controller's cycle: when
        it left on the monotonic clock (paced: drives on the wall clock), k·dt in lockstep."""
        c = self.control
        c.cur[:] = currents
        for d in self.drives:
            d.send_rpdos(currents[d.joint_index])
        for d in self.drives:
            d.send_sync()
        c.s["sample_t"] = time.monotonic() if self.pace else self.cycles * self.dt
        deadline = self.reply_deadline()
        for d in self.drives:
            d.collect(deadline)
            c.q[d.joint_index] = d.position
            c.i_meas[d.joint_index] = d.current
            c.flags[d.joint_index] = d.flags
        self.cycles += 1

    def cycle(self, currents: np.ndarray, *, check: bool = True) -> None:
        """One period (:meth:`exchange`), the controller's velocity estimate
        (:func:`exo_rt.cycle.step.estimate`), then the safety check."""
        self.exchange(currents)
        cy.estimate(self.control.model, self.control.data)
        self.wait_period()
        if check:
            self.check()

    def reply_deadline(self) -> float | None:
        """Until when a cycle waits for the drives' replies (None: no wait, the simulated bus
        has them queued)."""
        return None if self.reply_timeout is None else time.monotonic() + self.reply_timeout

    def wait_period(self) -> bool:
        """Hold the period on the wall clock (absolute deadlines; a late cycle does not make
        the next one early) when pacing real drives; True: this cycle ran past its period."""
        if not self.pace:
            return False
        self._deadline = max(self._deadline + self.dt, time.monotonic() - self.dt)
        delay = self._deadline - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return delay < 0

    def check(self) -> None:
        """The controller's safety check (:func:`exo_rt.cycle.step.check`) on this cycle's
        measurements, the tracking error against the cycle's reference ``control.qr`` while
        :attr:`tracking`; BenchAbort on a cause. The bench counts no overruns."""
        if self.abort.pressed.is_set():
            raise BenchAbort("operator abort")
        c = self.control
        c.s["state"] = RUN if self.tracking else READY
        cy.check(c.model, c.data)
        if c.s["state"] == SAFE:
            raise BenchAbort(self._cause())

    def _cause(self) -> str:
        """The safety check's cause, where and what was measured there, in words."""
        s = self.control.s
        cause, j = safety.CAUSES[int(s["cause"])], int(s["joint"])
        if j < 0:
            return cause
        return (f"{cause} on {self.robot.joint_names[j]} (q = {self.q[j]:.4f} rad, "
                f"current {self.i_meas[j]:.2f} A)")

    # ------------------------------------------------------------------ the controller's run
    def run_controller(self, seconds: float) -> tuple[Log, dict]:
        """The controller's own run against the drives: the shell of ``exo-rt run``
        (:class:`~exo_rt.runtime.controller.Controller`, on a rig of the bench's drives and
        on the bench's cycle) — its bring-up, its loop and timing (lockstep, or on the wall
        clock when the bench is paced), the compiled cycle with its estimate, reference by
        state, the wearer's torque, law, current, safety check and, in SAFE, the ramped safe
        action, and its lifecycle (:func:`exo_rt.runtime.script.lifecycle`): READY
        (``READY_CYCLES`` at zero current), RUN (the default session: homing to standing,
        walking ``seconds``, the closing step, and :attr:`sources`' requests), STOPPING
        (``stop`` duration), then the drives disabled. A safety cause goes SAFE as in a run:
        the safe action ramps out, the drives are disabled, and the summary's ``fault`` says
        why and when. The phase comes from time (the bench has no board's heel strikes). The
        abort key stops the run at once (zero current, the drives disabled) and raises
        BenchAbort.

        Returns every cycle's :class:`Log` (with the state) and the summary: per joint the RMS
        and largest tracking error over RUN (deg), the largest |current| (A) and the position
        range, as the controller's run summary (:func:`exo_rt.runtime.summary.joints`); the
        cycles, the final state, the fault."""
        from exo_rt.runtime.controller import Controller

        self._reset()
        ctl = Controller(self.top, "bench", rig=Rig(BenchBuses(self), self.drives),
                         cycle=self.control, history=True, board=None, rt_setup=False,
                         sources=tuple(self.sources), abort=self.abort.pressed.is_set)
        try:
            ctl.run(seconds)
        finally:
            self.disable_all()
        if self.abort.pressed.is_set():
            raise BenchAbort("operator abort")
        h = ctl.log
        log = Log(h["t"].copy(), h["q"].copy(), h["qd"].copy(), h["q_ref"].copy(),
                  h["command"].copy(), h["current"].copy(), h["torque"].copy(), ctl.cycles,
                  h["state"].astype(np.int64))
        fault = self._fault(ctl, log) if ctl.faults else None
        return log, {"law": self.top.controller.law, "run_s": seconds, "cycles": log.n,
                     "run_cycles": int(self.control.s["run_cycles"]),
                     "final_state": "SAFE" if fault else "SHUTDOWN", "fault": fault,
                     "joints": summary.joints(self.control, self.robot.joint_names)}

    def _fault(self, ctl, log: Log) -> dict:
        """The safety cause the run went SAFE on: when (s, cycle), in which state, where and
        what was measured there (the cycle's record), the safe action."""
        f = ctl.faults[0]
        k = f.cycle
        was = max((k0, st) for st, k0 in ctl.k0.items() if st != SAFE and k0 <= k)[1]
        detail = f.cause
        if f.joint is not None:
            j = self.robot.joint_names.index(f.joint)
            detail = (f"{f.cause} on {f.joint} (q = {log.q[k, j]:.4f} rad, "
                      f"current {log.i_meas[k, j]:.2f} A)")
        return {"cause": f.cause, "t": k * self.dt, "cycle": k, "state": STATES[was],
                "joint": f.joint, "detail": detail, "action": self.top.safety.action}

    def disable_all(self) -> None:
        """Disable every drive (zero current, then disable voltage), whatever happens."""
        for d in self.drives:
            try:
                d.disable()
            except (BusError, can.CanError, OSError):
                pass

    def close(self) -> None:
        """Shut the buses down (after :meth:`disable_all`)."""
        for d in self.drives:
            d.bus.shutdown()

    # ------------------------------------------------------------------ torque ↔ current
    def joint_torque(self, currents: np.ndarray) -> np.ndarray:
        """Joint torques (N·m) the motor currents (A) give through rigid, frictionless gears:
        τ = k·s·k_M·i (k the multiplier, s the motor sign)."""
        t = self.transmissions
        return t["multiplier"] * t["motor_sign"] * t["kt"] * currents

    def motor_torque_limit(self) -> np.ndarray:
        """Each motor's torque at its configured current limit referred to its joint (N·m,
        k·k_M·I, no efficiency): the scale of the torques the procedures command through
        :meth:`joint_torque`. What the joint itself gets at that current is less
        (:func:`exo_rt.hil.limits.joint_torque`, the figure the checklist prints)."""
        return np.abs(self.joint_torque(self.transmissions["current_limit"]))

    def currents_for(self, tau: np.ndarray, acc: np.ndarray, out: np.ndarray,
                     friction: bool = True) -> None:
        """Motor currents (A) for joint torques τ meant to give accelerations ``acc`` (rad/s²):
        the controller's own conversion (with the configured wave-generator friction
        compensated), clamped to the current limits."""
        laws.torque_to_current(tau, self.qd, acc, self.transmissions, friction, out)

    def soft_range(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) soft joint limits (rad): the robot's, ``joint_margin`` inside."""
        return self.limits["lower"], self.limits["upper"]

    def at_fraction(self, fraction: float) -> np.ndarray:
        """Every joint at ``fraction`` (0…1) of its soft range (rad)."""
        lo, hi = self.soft_range()
        return lo + fraction * (hi - lo)

    def home(self) -> np.ndarray:
        """The procedures' default pose: every joint at 30 % of its soft range (for the leg:
        hip and knee flexed, the drives loaded by the leg's weight)."""
        return self.at_fraction(0.3)

    def centred(self, q, half_range) -> np.ndarray:
        """q (rad) moved just far enough inside the soft limits that every joint can swing
        ±``half_range`` (rad, per joint or one for all) about it with 0.05 rad to spare."""
        lo, hi = self.soft_range()
        lo, hi = lo + half_range + 0.05, hi - half_range - 0.05
        return np.clip(np.asarray(q, float), lo, np.maximum(lo, hi))

    def inertia(self, q: np.ndarray) -> np.ndarray:
        """Each joint's own inertia M_jj (kg·m², rotors included) at q."""
        return np.diag(self.dyn.mass_matrix(np.asarray(q, float))).copy()


@dataclass
class Gains:
    """Per-joint gains of the bench's position loop, on acceleration: k_p (1/s²), k_d (1/s),
    k_i (1/s³) — the model's M(q) turns them into torques, so every joint behaves alike."""

    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray

    @classmethod
    def for_bandwidth(cls, n: int, hz: float, zeta: float = 0.7, integral: float = 0.0
                      ) -> Gains:
        """Each joint a second-order system ω_n = 2π·hz with damping ζ: k_p = ω_n²,
        k_d = 2ζω_n (k_i = integral·ω_n³/10; 0: no integral)."""
        w = 2 * math.pi * hz
        ones = np.ones(n)
        return cls(ones * w * w, ones * 2 * zeta * w, ones * integral * w**3 / 10.0)


def second_order_bandwidth(wn: float, zeta: float) -> float:
    """The −3 dB frequency (rad/s) of ω_n²/(s² + 2ζω_n s + ω_n²)."""
    z2 = zeta * zeta
    return wn * math.sqrt(1 - 2 * z2 + math.sqrt(4 * z2 * z2 - 4 * z2 + 2))


@njit(cache=True)
def loop_acceleration(gains, qr, q, qdr, qd, integral, dt, acc):
    """The bench loop's commanded acceleration (rad/s², in place, no allocation):
    a = k_p·e + k_d·(q̇_ref − q̇) + k_i·∫e, e = q_ref − q (∫e advanced by dt); ``gains`` the
    per-joint (k_p, k_d, k_i)."""
    kp, kd, ki = gains
    for j in range(q.shape[0]):
        e = qr[j] - q[j]
        integral[j] += e * dt
        acc[j] = kp[j] * e + kd[j] * (qdr[j] - qd[j]) + ki[j] * integral[j]


def track(bench: Bench, q_ref: np.ndarray, gains: Gains, *, qd_ref: np.ndarray | None = None,
          friction: bool = True) -> Log:
    """Follow ``q_ref`` (samples × joints, rad) one sample per period and log every cycle.

    The bench's loop is computed torque on the model: a = k_p·e + k_d·(q̇_ref − q̇) + k_i·∫e,
    τ = M(q)·a + h(q, q̇) (inverse dynamics, gravity included), then the controller's torque →
    current conversion with the configured friction compensated along the measured speed. On
    a plant the model matches, each joint is then the decoupled ω_n²/(s² + 2ζω_n s + ω_n²)
    (with ``qd_ref`` = 0). It measures through the controller's cycle — the velocity is its
    estimate, the torque, current and reference go into its data — and the safety check (the
    cycle's) watches the tracking error throughout.

    It is not the controller's ``computed_torque`` law run by :func:`exo_rt.cycle.step.
    step` (:meth:`Bench.run_controller` runs that): the cycle takes its reference from its state
    (the session's segment in RUN, a held posture with q̇_r = q̈_r = 0 in STOPPING), while
    the procedures need their own (steps, chirps, constant-speed sweeps, multi-sines); the
    law adds q̈_r and compensates friction along q̇_r, while the bench's loop has no
    feed-forward — a step or chirp measures the feedback loop alone — and
    compensates friction along the measured speed (along q̇_r = 0 a step or chirp would get
    none); and its gains change per move (:data:`HOLD`, the procedures' bandwidths) where the
    law's are the controller config's.
    """
    k_n, n = q_ref.shape
    log = Log.empty(k_n, n)
    if qd_ref is None:
        qd_ref = np.gradient(q_ref, bench.dt, axis=0) if k_n > 1 else np.zeros_like(q_ref)
    integral = np.zeros(n)
    acc = np.zeros(n)
    c = bench.control
    bench.tracking = True
    try:
        for k in range(k_n):
            loop_acceleration((gains.kp, gains.kd, gains.ki), q_ref[k], bench.q, qd_ref[k],
                              bench.qd, integral, bench.dt, acc)
            bench.dyn.inverse_dynamics(bench.q, bench.qd, acc, out=c.tau)
            c.qr[:] = q_ref[k]
            bench.currents_for(c.tau, acc, c.cur, friction)
            bench.cycle(c.cur)
            log.add(bench.cycles * bench.dt, c)
    finally:
        bench.tracking = False
    return log


HOLD = (3.0, 1.0, 1.0)  # Hz, ζ, integral: the loop that moves between and holds poses


def move_to(bench: Bench, target: np.ndarray, seconds: float | None = None) -> Log:
    """A minimum-jerk move from where the joints are to ``target`` (rad) — over ``seconds``,
    default 4 s per rad of the largest move (at least 0.5 s) — then a 0.3 s hold."""
    target = np.asarray(target, float)
    q0 = bench.q.copy()
    if seconds is None:
        seconds = max(0.5, 4.0 * float(np.max(np.abs(target - q0))))
    k = int(seconds / bench.dt)
    s = np.linspace(0.0, 1.0, k)[:, None]
    blend = 10 * s**3 - 15 * s**4 + 6 * s**5
    path = q0 + (target - q0) * blend
    hold = np.repeat(path[-1:], int(0.3 / bench.dt), axis=0)
    return track(bench, np.vstack([path, hold]), Gains.for_bandwidth(bench.n, *HOLD))
