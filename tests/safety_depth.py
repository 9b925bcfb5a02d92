"""The layers below the controller, measured from outside: the simulated exoskeleton served in
its own process (``exo-rt drives --bus udp_multicast --trace``, real time, standing in for the
drives and the board), a controller started by hand against it (``exo-rt run --bus
udp_multicast:…``: the process that runs on the exoskeleton), and what the leg did after the
controller was killed, stopped or cut off — from the simulation's own trace.

Used by tests/test_safety_depth.py; ``python tests/safety_depth.py`` prints the figures that
docs/safety.md quotes.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VM_CONFIG = ROOT / "tests" / "data" / "exo_leg_vm.yaml"
ROBOT = ROOT / "configs" / "robots" / "exo_leg.yaml"
BUSES = ROOT / "configs" / "buses" / "exo_leg.yaml"
HARDWARE_FIFO = 70  # the stand-in hardware runs real time, below the control thread (80)
# when the event comes: the leg at rest, held under gravity at the gait's start posture (hip
# flexed 34°) where the simulated drives start it, by a session that holds it there
# (tests/data/hold_session.yaml); a joint killed in motion would coast until its friction (or
# its brake) stops it — the knee, which has none, ~11° at gait speed (docs/safety.md)
EVENT_S = 1.9
POSE = ("0.594", "0.021")  # rad: the normal gait's start (hip, knee)
HOLD = ROOT / "tests" / "data" / "hold_session.yaml"
_groups = itertools.count(1)


class MachineStall(RuntimeError):
    """The run ended before its event: the machine held the controller up past the drives'
    watchdog (a virtual CPU is now and then held tens of ms: ``python tools/bench_machine.py``),
    and the drives stopped it — rightly, but before the event the scenario stages."""


def once_more_on_a_stall(test, tries: int = 3):
    """Run a scenario again, in a fresh folder, when :class:`MachineStall` spoiled it — up to
    ``tries`` runs in all: a stall held a shared VM's vCPUs for several periods, and one such
    stall can outlast a single rerun (seen in CI: both runs of a scenario SAFE on the drives'
    SYNC watchdog within a minute). Any other failure fails the test at once; a stall in every
    run fails it too."""
    @functools.wraps(test)
    def run(tmp_path, *args, **kwargs):
        for k in range(tries):
            folder = tmp_path / f"run{k}"
            folder.mkdir()
            try:
                return test(folder, *args, **kwargs)
            except MachineStall as stall:
                if k == tries - 1:
                    raise
                warnings.warn(f"{stall}; the scenario runs once more", stacklevel=2)
    return run


def _group() -> str:
    """A multicast group of its own for each simulation (runs side by side never cross)."""
    pid = os.getpid()
    return f"239.93.{pid & 0xFF}.{(next(_groups) * 7 + (pid >> 8)) & 0xFF}"


class Hardware:
    """The simulated drives, leg and (optionally) board in their own real-time process."""

    def __init__(self, tmp: Path, *, board: bool = True, buses: Path = BUSES) -> None:
        self.trace_path = tmp / "trace.npz"
        args = [sys.executable, "-m", "exo_rt", "drives", "--config", str(ROBOT), "--buses",
                str(buses), "--bus", f"udp_multicast:{_group()}", "--trace",
                str(self.trace_path), "--pose", *POSE] + (["--board"] if board else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:  # like the drives' own hardware: never held up by the rest of the machine
            os.sched_setscheduler(self.proc.pid, os.SCHED_FIFO, os.sched_param(HARDWARE_FIFO))
        except (PermissionError, OSError):
            pass
        line = self.proc.stdout.readline()
        while line.startswith("set-up:"):  # the drives' own scheduling, said first
            line = self.proc.stdout.readline()
        if not line.startswith("serving"):
            self.proc.kill()
            raise RuntimeError(f"the simulation did not start: {line}{self.proc.stderr.read()}")
        self.served = dict(item.split("=", 1) for item in line.split()[1:])
        self.report = ""

    def command(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> dict:
        """End the simulation; its trace (exo_rt.sim.trace.load_trace)."""
        from exo_rt.sim.trace import load_trace

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, self.report = self.proc.communicate(timeout=30)
        return load_trace(self.trace_path)


@dataclass
class Controller:
    """``exo-rt run`` started by hand against :class:`Hardware`."""

    hw: Hardware
    out: Path
    config: Path = VM_CONFIG
    extra: tuple = ()
    duration: float = 10.0
    proc: subprocess.Popen = field(init=False)

    def __post_init__(self) -> None:
        board = self.hw.served.get("board", "none")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exo_rt", "run", "--config", str(self.config), "--bus",
             self.hw.served["leg"], "--board", board, "--duration", str(self.duration),
             "--out", str(self.out), "--session", str(HOLD), *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)

    def wait_for_cycles(self, timeout: float = 60.0) -> float:
        """Wait until the loop runs (its first records are in the cycle log); when (monotonic)."""
        log = self.out / "cycles.exolog"
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if log.exists() and log.stat().st_size > 8192 + 64:
                return time.monotonic()
            if self.proc.poll() is not None:
                raise RuntimeError(f"the controller ended early: {self.proc.communicate()}")
            time.sleep(0.005)
        raise TimeoutError("the controller did not start its loop")

    def after(self, seconds: float, timeout: float = 10.0) -> float:
        """Wait until the loop has run ``seconds`` (from the start its cycle log records,
        ``wall_start``); now (monotonic s): the event's time."""
        from exo_rt.record.recorder import read_header

        self.wait_for_cycles()
        end = time.monotonic() + timeout
        while True:
            start = read_header(self.out / "cycles.exolog")[1].get("wall_start")
            if start is not None or time.monotonic() > end:
                break
            time.sleep(0.005)
        if start is None:
            raise TimeoutError("the cycle log never said when the loop started")
        time.sleep(max(0.0, start + seconds - time.time()))
        self._check_not_ended()
        return time.monotonic()  # after the check (it reads the whole cycle log: ms on a
        # loaded machine): the caller's event follows this stamp at once

    def _check_not_ended(self) -> None:
        """:class:`MachineStall` if the run went SAFE before its event (what a stalled machine
        does to it); its cycle log says so."""
        from exo_rt.cycle.states import SAFE
        from exo_rt.record.recorder import read_cycle_log

        records, meta = read_cycle_log(self.out / "cycles.exolog")
        safe = np.flatnonzero(records["state"] == SAFE)
        if len(safe):
            k = safe[0]
            cause = meta["causes"][int(records["cause"][k])]
            raise MachineStall(f"the run went SAFE ({cause}) at {records['t'][k]:.3f} s, "
                               "before its event")

    def finish(self, timeout: float = 60.0) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def summary(self) -> dict:
        return json.loads((self.out / "summary.json").read_text())


@dataclass
class Reaction:
    """What the leg and the drives did after an event at ``t_event`` (monotonic s)."""

    stage_off_s: np.ndarray  # per drive: s until its power stage was off
    current_zero_s: np.ndarray  # per drive: s until its motor carried no current
    relay_off_s: float  # s until the board's relay opened (inf: it stayed closed)
    motion_deg: np.ndarray  # per joint: range of motion over the 2 s after the event
    settled_deg: np.ndarray  # per joint: range over the second of those 2 s
    q_event_deg: np.ndarray  # per joint: the angle at the event
    stayed_off: bool  # every power stage off from its stop to the end of the trace
    held_s: float  # the longest the simulation was held up within REACTION_S of the event


# the window in which a reaction is timed, and the hold-up of the simulation's process within
# it that spoils the timing: the trace stamps a period when the process computed it, so a
# process the machine held up for 10 ms stamps a watchdog that fired on time 10 ms late
REACTION_S = 0.1
HELD_S = 0.004  # a free-running simulation computes a period at least every 1.5 ms


class SimulationHeld(MachineStall):
    """The machine held the simulation's process up while the reaction was being timed: its
    trace stamps what the stand-in hardware did late by as much (a real drive's watchdog is its
    own hardware timer), so the timing says nothing of the layers under test."""


def reaction(trace: dict, t_event: float, window: float = 2.0) -> Reaction:
    t = trace["t"]
    k0 = int(np.searchsorted(t, t_event))
    k1 = int(np.searchsorted(t, t_event + window))
    k_half = int(np.searchsorted(t, t_event + window / 2))
    if k1 >= len(t):
        raise ValueError(f"the trace ends {t[-1] - t_event:.2f} s after the event, "
                         f"not {window} s")

    def first(mask: np.ndarray) -> float:
        hit = np.flatnonzero(mask)
        return float(t[k0 + hit[0]] - t_event) if len(hit) else float("inf")

    stage = trace["power_stage"][k0:]
    current = trace["current"][k0:]
    stage_off = np.array([first(stage[:, j] == 0) for j in range(stage.shape[1])])
    zero = np.array([first(np.abs(current[:, j]) < 1e-9) for j in range(current.shape[1])])
    stayed = all(not np.any(stage[np.flatnonzero(stage[:, j] == 0)[0]:, j])
                 for j in range(stage.shape[1]) if np.any(stage[:, j] == 0))
    q = np.degrees(trace["q"])
    k_react = int(np.searchsorted(t, t_event + REACTION_S))
    held = float(np.max(np.diff(t[max(k0 - 1, 0):k_react + 1]), initial=0.0))
    return Reaction(stage_off, zero, first(trace["motor_power"][k0:] == 0),
                    np.ptp(q[k0:k1], axis=0), np.ptp(q[k_half:k1], axis=0), q[k0],
                    stayed and np.all(np.isfinite(stage_off)), held)


def check_timing(r: Reaction, label: str) -> None:
    """:class:`SimulationHeld` when the machine held the simulation up while the reaction was
    timed (the test's decorator :func:`once_more_on_a_stall` then runs the scenario again)."""
    if r.held_s > HELD_S:
        raise SimulationHeld(f"{label}: the machine held the simulation's process up "
                             f"{1e3 * r.held_s:.1f} ms within {1e3 * REACTION_S:.0f} ms of "
                             f"the event (stage off {np.round(1e3 * r.stage_off_s, 1)} ms, "
                             f"relay off {1e3 * r.relay_off_s:.1f} ms)")


def gravity_and_hold(q_deg) -> tuple[np.ndarray, np.ndarray]:
    """Per joint: the gravity torque at the pose (N·m, at rest) and the largest output torque
    held with the power stage off, N·(T_s + T_brake)/(1 − μ) (the loaded back-drive threshold
    of the plant's friction model, with the motor's power-off brake where it has one)."""
    from exo_rt.dynamics import Dynamics
    from exo_rt.model import load_mechanism

    mech = load_mechanism(ROBOT)
    n = mech.nq
    tau = Dynamics(mech).inverse_dynamics(np.radians(q_deg), np.zeros(n), np.zeros(n))
    hold = np.array([tr.drive.ratio * (tr.drive.static + tr.motor.brake_torque)
                     / (1.0 - tr.drive.load_friction)
                     for tr in mech.transmissions])
    return np.abs(tau), hold


def _print(name: str, r: Reaction) -> None:
    tau, hold = gravity_and_hold(r.q_event_deg)
    print(f"{name}: stage off {np.round(1e3 * r.stage_off_s, 1)} ms, current zero "
          f"{np.round(1e3 * r.current_zero_s, 1)} ms, relay off {1e3 * r.relay_off_s:.1f} ms; "
          f"at {np.round(r.q_event_deg, 1)}° (gravity {np.round(tau, 1)} N·m, held ≤ "
          f"{np.round(hold, 1)}) moved {np.round(r.motion_deg, 3)}° in 2 s, "
          f"{np.round(r.settled_deg, 3)}° in its 2nd s")


if __name__ == "__main__":  # the figures of docs/safety.md
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, board in (("kill -9, both layers", True), ("kill -9, drives alone", False)):
            hw = Hardware(tmp, board=board)
            ctl = Controller(hw, tmp / name.replace(" ", "_"))
            t_kill = ctl.after(EVENT_S)
            os.kill(ctl.proc.pid, signal.SIGKILL)
            ctl.finish()
            time.sleep(2.5)
            _print(name, reaction(hw.stop(), t_kill))
