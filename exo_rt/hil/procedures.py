"""The bench procedures. Each takes a :class:`Bench` (the buses and drives of a robot) and
returns a report dict; :func:`run_procedure` wraps one with the checklist, the abort path and
the run folder."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import can
import numpy as np

from exo_rt.bus import cia402 as c
from exo_rt.bus.config import frame_bits
from exo_rt.bus.drives import Drives
from exo_rt.errors import BusError, ConfigError
from exo_rt.runtime.config import TopConfig

PROCEDURES = ("bringup", "latency")


@dataclass
class Bench:
    """The robot's drives on their buses (opened by the caller: real, SLCAN or simulated)."""

    top: TopConfig
    drives: list[Drives]
    world: object = None  # the SimWorld when simulated (for the bench fixture: locked outputs)
    dt: float = 1e-3

    def cycle(self, currents: np.ndarray) -> None:
        """One 1 ms cycle on every bus: RPDOs, SYNCs, then the replies."""
        for d in self.drives:
            d.send_rpdos(currents[d.joint_index])
        for d in self.drives:
            d.send_sync()
        deadline = None if self.world is not None else time.monotonic() + 0.7 * self.dt
        for d in self.drives:
            d.collect(deadline)
        if self.world is None:
            time.sleep(self.dt)

    def position(self) -> np.ndarray:
        q = np.zeros(self.top.robot.nq)
        for d in self.drives:
            q[d.joint_index] = d.position
        return q

    def current(self) -> np.ndarray:
        i = np.zeros(self.top.robot.nq)
        for d in self.drives:
            i[d.joint_index] = d.current
        return i

    def disable_all(self) -> None:
        for d in self.drives:
            try:
                d.disable()
            except (BusError, can.CanError, OSError):
                pass


def bringup(bench: Bench, seconds: float = 0.5) -> dict:
    """Every node answers, mapping verified, state machine to operation enabled and back,
    heartbeat periods and bus load measured."""
    report: dict = {"buses": {}}
    for d in bench.drives:
        d.configure()  # SDO: mode, heartbeat, mapping read back (BusError if wrong)
        cycles = d.enable()
        hb: dict[int, list[float]] = {int(n): [] for n in d.nodes}
        bits = 0
        n = int(seconds / bench.dt)
        original = d._frame

        def count(msg, original=original, hb=hb):
            nonlocal bits
            bits += frame_bits(len(msg.data))
            node = msg.arbitration_id & 0x7F
            if msg.arbitration_id & 0x780 == c.HEARTBEAT and node in hb:
                hb[node].append(msg.timestamp)
            original(msg)

        d._frame = count
        t0 = None
        for _ in range(n):
            d.cycle(np.zeros(d.n))
            bits += frame_bits(0) + d.n * frame_bits(4)  # SYNC and RPDOs sent
            t0 = t0 if t0 is not None else d.now
        d._frame = original
        elapsed = max(d.now - (t0 or 0.0), bench.dt)
        periods = {node: float(np.median(np.diff(ts)) * 1e3) if len(ts) > 1 else None
                   for node, ts in hb.items()}
        states = [c.state_of(int(sw)) for sw in d.statusword]
        d.disable()
        report["buses"][d.config.name] = {
            "nodes": [int(x) for x in d.nodes],
            "enabled_after_cycles": cycles,
            "states_enabled": states,
            "heartbeat_ms": periods,
            "configured_heartbeat_ms": d.config.heartbeat_ms,
            "bus_load": round(bits / elapsed / d.config.bitrate, 3),
            "missing_frames": int(d.missing_count.sum()),
        }
    return report


def latency(bench: Bench, joint: str | None = None, step_A: float = 6.0) -> dict:
    """Cycles from a current command to the drive reporting it (and to the joint moving)."""
    robot = bench.top.robot
    out = {}
    for d in bench.drives:
        d.configure()
        d.enable()
    try:
        for j, name in enumerate(robot.joint_names):
            if joint not in (None, name):
                continue
            cmd = np.zeros(robot.nq)
            for _ in range(20):
                bench.cycle(cmd)
            q0 = bench.position()[j]
            cmd[j] = step_A
            seen_current = seen_motion = None
            for k in range(1, 60):
                bench.cycle(cmd)
                if seen_current is None and abs(bench.current()[j]) >= 0.5 * step_A:
                    seen_current = k
                if seen_motion is None and abs(bench.position()[j] - q0) > 1e-5:
                    seen_motion = k
            cmd[j] = 0.0
            for _ in range(20):
                bench.cycle(cmd)
            out[name] = {"current_cycles": seen_current, "motion_cycles": seen_motion,
                         "current_ms": None if seen_current is None else seen_current * 1e3 *
                         bench.dt}
    finally:
        bench.disable_all()
    return {"joints": out, "step_A": step_A}


def checklist(name: str, top: TopConfig, joint: str | None) -> list[str]:
    robot = top.robot
    joints = [joint] if joint else list(robot.joint_names)
    moves = {"bringup": "no joint moves (zero current)",
             "latency": "each joint gets a 6 A step for 60 ms (it moves a few degrees)"}[name]
    lines = [f"bench-test {name} on {', '.join(joints)}: {moves}."]
    for tr in robot.transmissions:
        if tr.joint in joints:
            lines.append(f"  {tr.joint}: current limit {tr.motor.peak_current:g} A "
                         f"(≈ {tr.ratio * tr.motor.torque_constant * tr.motor.peak_current:.0f} "
                         "N·m); drives disabled at the end, on ctrl-C and on any error.")
    lines.append("  Check: e-stop within reach, bus terminated, nobody in the exoskeleton.")
    return lines


def run_procedure(name: str, bench: Bench, out_dir: Path, joint: str | None = None) -> dict:
    """Run one procedure with the abort path and write its report (and YAML snippet)."""
    if name not in PROCEDURES:
        raise ConfigError(f"unknown bench procedure '{name}'", None,
                          f"use one of {', '.join(PROCEDURES)}")
    try:
        report = bringup(bench) if name == "bringup" else latency(bench, joint)
    except KeyboardInterrupt:
        report = {"aborted": True}
    finally:
        bench.disable_all()
    report["procedure"] = name
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"bench-{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    return report

