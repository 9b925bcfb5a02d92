#!/usr/bin/env python3
"""Host-side cycle of the drives object (encode, send, receive, decode) on the lockstep
simulated bus, for 2 drives on one bus and 4 drives on two (CiA 402), and the leg on each other
registered family's bus file (MIT mode, RMD-X): ``python tools/bench_bus.py [--cycles N]``.

Reports µs per cycle (median, p99) for the whole cycle (including the simulated physics
step), the physics alone, and the simulated bus's real-time factor.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import can
import numpy as np

from exo_rt.bus import protocols
from exo_rt.bus.config import load_buses
from exo_rt.model import load_mechanism
from exo_rt.sim.simbus import SimWorld

ROOT = Path(__file__).resolve().parents[1]


def run(robot_name: str, bus_name: str, cycles: int = 3000) -> None:
    robot = load_mechanism(ROOT / "configs" / "robots" / f"{robot_name}.yaml")
    buses = load_buses(ROOT / "configs" / "buses" / f"{bus_name}.yaml", robot)
    world = SimWorld.open(f"bench-{robot_name}", robot, buses)
    world.reset([0.0, 0.0] * (robot.nq // 2) if bus_name.endswith("_mit")  # homed at 0
                else [0.0, math.pi / 4] * (robot.nq // 2))
    drives = [protocols.get(b.protocol).host_class()(
        can.Bus(interface="exo_sim", channel=b.channel, world=f"bench-{robot_name}"), b, robot)
        for b in buses]
    for d in drives:
        d.configure()
    for d in drives:
        d.enable()
    cmd = np.zeros(2)
    total, physics = [], []
    step = world.plant.step
    t_phys = [0.0]

    def timed_step(c=None):
        t0 = time.perf_counter()
        step(c)
        t_phys[0] += time.perf_counter() - t0

    world.plant.step = timed_step
    for _ in range(cycles):
        t_phys[0] = 0.0
        t0 = time.perf_counter()
        for d in drives:
            d.send_rpdos(cmd[: d.n])
        for d in drives:
            d.send_sync()
        for d in drives:
            d.collect()
        total.append((time.perf_counter() - t0) * 1e6)
        physics.append(t_phys[0] * 1e6)
    for d in drives:
        d.bus.shutdown()
    total, physics = np.array(total), np.array(physics)
    host = total - physics
    n = sum(d.n for d in drives)
    print(f"  {bus_name}: {n} drives on {len(drives)} bus(es): "
          f"cycle {np.median(total):6.1f} µs median, "
          f"p99 {np.percentile(total, 99):6.1f}; host side (frames) {np.median(host):6.1f} µs "
          f"median, p99 {np.percentile(host, 99):6.1f}; physics {np.median(physics):5.1f} µs; "
          f"{1e3 / np.median(total):.1f}× real time")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=3000, help="cycles per bus file (3000)")
    args = ap.parse_args(argv)
    print("lockstep simulated bus, 1 kHz cycles:")
    run("exo_leg", "exo_leg", args.cycles)
    run("exo_2leg", "exo_2leg", args.cycles)
    run("exo_leg", "exo_leg_mit", args.cycles)
    run("exo_leg", "exo_leg_rmdx", args.cycles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
