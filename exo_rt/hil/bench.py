"""The bench: a robot's drives on their buses, driven one control period at a time with the
safety layer on (docs/safety.md), and the joint position loop every motion procedure uses.

A :class:`Bench` works on any python-can bus (real drives on a rig, the emulated drives over
SLCAN, the in-process simulated bus): it sends the currents, reads the encoders and currents,
and runs :func:`exo_rt.runtime.safety.check` — the controller's own check — every cycle: a
drive fault, stale feedback, a lost heartbeat, an encoder glitch, a current, speed or soft
joint limit, a tracking error, or the operator's abort key raises :class:`BenchAbort`, and the
caller (:func:`exo_rt.hil.procedures.run_procedure`) disables the drives.

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

from exo_rt.bus.flags import F_NOT_ENABLED
from exo_rt.config import transmission_rows
from exo_rt.control import laws
from exo_rt.control.estimate import filter_gain, velocity_update
from exo_rt.dynamics import Dynamics
from exo_rt.errors import BusError
from exo_rt.hil.fixture import BenchAbort, Fixture, OperatorFixture
from exo_rt.jit import njit
from exo_rt.runtime import safety
from exo_rt.runtime.config import TopConfig


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
    (rad/s), reference (rad), commanded and measured currents (A), commanded torque (N·m)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    q_ref: np.ndarray
    i_cmd: np.ndarray
    i_meas: np.ndarray
    tau: np.ndarray
    n: int = 0

    @classmethod
    def empty(cls, samples: int, joints: int) -> Log:
        z = np.zeros
        return cls(z(samples), z((samples, joints)), z((samples, joints)), z((samples, joints)),
                   z((samples, joints)), z((samples, joints)), z((samples, joints)))

    def trimmed(self) -> Log:
        k = self.n
        return Log(self.t[:k], self.q[:k], self.qd[:k], self.q_ref[:k], self.i_cmd[:k],
                   self.i_meas[:k], self.tau[:k], k)


class Bench:
    """The robot's drives on their buses (opened by the caller), with the safety check on.

    ``reply_timeout`` (s): how long a cycle waits for every drive's reply (None: lockstep, the
    simulated bus has them queued); ``pace``: hold the period on the wall clock (real drives).
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
        n = self.robot.nq
        self.n = n
        cfg = top.controller
        self.transmissions = transmission_rows(self.robot, cfg)
        self.limits = safety.limits_array(self.robot, top.safety.joint_margin,
                                          top.safety.tracking_error, cfg.current_limit)
        s = top.safety  # as the controller's; the bench counts no overruns (streak 0)
        self.sopts = safety.options(s)
        self.alpha = filter_gain(cfg.velocity_cutoff_hz, self.dt)
        self.dyn = Dynamics(self.robot)
        self.q = np.zeros(n)
        self.qd = np.zeros(n)
        self._q_prev = np.zeros(n)
        self.i_meas = np.zeros(n)
        self.i_cmd = np.zeros(n)
        self.flags = np.zeros(n, dtype=np.int64)
        self._streak = np.zeros((safety.STREAKS, n), dtype=np.int64)
        self._out = np.zeros(2, dtype=np.int64)
        self._tau = np.zeros(n)
        self._cur = np.zeros(n)
        self._ref = np.zeros(n)
        self.tracking = False
        self.cycles = 0
        self._deadline = 0.0
        self._warm_up()

    def _warm_up(self) -> None:
        """Run every njit function of the cycle once before any drive is enabled: a cold numba
        cache compiles here (seconds), never between two cycles of an enabled drive."""
        z = np.zeros(self.n)
        self.dyn.inverse_dynamics(z, z, z, out=self._tau)
        laws.torque_to_current(self._tau, z, z, self.transmissions, True, self._cur)
        velocity_update(z.copy(), z.copy(), z.copy(), self.dt, self.alpha)
        loop_acceleration(z, z, z, z, z, z, z, z.copy(), self.dt, self._tau)
        safety.check(self.limits, self.sopts, z, z, z, z, z, np.zeros(self.n, dtype=np.int64),
                     np.zeros((safety.STREAKS, self.n), dtype=np.int64), 0, False, z, self._out)
        self._tau[:] = 0.0

    # ------------------------------------------------------------------ the cycle
    def start(self) -> None:
        """Configure and enable every drive, read the first measurement."""
        for d in self.drives:
            d.configure()
            d.enable()
        self.cycle(np.zeros(self.n), check=False)
        self._q_prev[:] = self.q
        self.qd[:] = 0.0

    def cycle(self, currents: np.ndarray, *, check: bool = True) -> None:
        """One period on every bus (RPDOs, SYNCs, replies), then the safety check."""
        self.i_cmd[:] = currents
        for d in self.drives:
            d.send_rpdos(currents[d.joint_index])
        for d in self.drives:
            d.send_sync()
        deadline = self.reply_deadline()
        for d in self.drives:
            d.collect(deadline)
            self.q[d.joint_index] = d.position
            self.i_meas[d.joint_index] = d.current
            self.flags[d.joint_index] = d.flags
        velocity_update(self.q, self._q_prev, self.qd, self.dt, self.alpha)
        self.cycles += 1
        self.wait_period()
        if check:
            self.check()

    def reply_deadline(self) -> float | None:
        """Until when a cycle waits for the drives' replies (None: lockstep, no wait)."""
        return None if self.reply_timeout is None else time.monotonic() + self.reply_timeout

    def wait_period(self) -> None:
        """Hold the period on the wall clock (absolute deadlines; a late cycle does not make
        the next one early) when pacing real drives."""
        if self.pace:
            self._deadline = max(self._deadline + self.dt, time.monotonic() - self.dt)
            delay = self._deadline - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def check(self) -> None:
        """The controller's safety check on this cycle's measurements; BenchAbort on a cause."""
        if self.abort.pressed.is_set():
            raise BenchAbort("operator abort")
        flags = self.flags & ~F_NOT_ENABLED
        safety.check(self.limits, self.sopts, self.q, self.qd, self.i_meas, self.i_cmd,
                     self._tau, flags, self._streak, 0, self.tracking, self._ref, self._out)
        cause, j = int(self._out[0]), int(self._out[1])
        if cause != safety.OK:
            raise BenchAbort(f"{safety.CAUSES[cause]} on {self.robot.joint_names[j]} "
                             f"(q = {self.q[j]:.4f} rad, current {self.i_meas[j]:.2f} A)")

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
def loop_acceleration(kp, kd, ki, qr, q, qdr, qd, integral, dt, acc):
    """The bench loop's commanded acceleration (rad/s², in place, no allocation):
    a = k_p·e + k_d·(q̇_ref − q̇) + k_i·∫e, e = q_ref − q (∫e advanced by dt)."""
    for j in range(q.shape[0]):
        e = qr[j] - q[j]
        integral[j] += e * dt
        acc[j] = kp[j] * e + kd[j] * (qdr[j] - qd[j]) + ki[j] * integral[j]


def track(bench: Bench, q_ref: np.ndarray, gains: Gains, *, qd_ref: np.ndarray | None = None,
          friction: bool = True) -> Log:
    """Follow ``q_ref`` (samples × joints, rad) one sample per period and log every cycle.

    The bench's loop is computed torque on the model: a = k_p·e + k_d·(q̇_ref − q̇) + k_i·∫e,
    τ = M(q)·a + h(q, q̇) (inverse dynamics, gravity included), then the controller's torque →
    current conversion with the configured friction compensated. On a plant the model matches,
    each joint is then the decoupled ω_n²/(s² + 2ζω_n s + ω_n²) (with ``qd_ref`` = 0). The
    safety check watches the tracking error throughout.
    """
    k_n, n = q_ref.shape
    log = Log.empty(k_n, n)
    if qd_ref is None:
        qd_ref = np.gradient(q_ref, bench.dt, axis=0) if k_n > 1 else np.zeros_like(q_ref)
    integral = np.zeros(n)
    acc = np.zeros(n)
    tau = np.zeros(n)
    cur = np.zeros(n)
    bench.tracking = True
    try:
        for k in range(k_n):
            loop_acceleration(gains.kp, gains.kd, gains.ki, q_ref[k], bench.q, qd_ref[k],
                              bench.qd, integral, bench.dt, acc)
            bench.dyn.inverse_dynamics(bench.q, bench.qd, acc, out=tau)
            bench._ref[:] = q_ref[k]
            bench.currents_for(tau, acc, cur, friction)
            bench.cycle(cur)
            i = log.n
            log.t[i] = bench.cycles * bench.dt
            log.q[i], log.qd[i], log.q_ref[i] = bench.q, bench.qd, q_ref[k]
            log.i_cmd[i], log.i_meas[i], log.tau[i] = cur, bench.i_meas, tau
            log.n += 1
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
