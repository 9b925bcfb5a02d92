#!/usr/bin/env python3
"""Host-side cost of one bench cycle (the bench's computed-torque position loop, torque →
current, drives cycle, safety check) on the lockstep simulated bus, the physics subtracted:
``python tools/bench_hil.py``. On a real bus this is what must fit into the 1 ms period.

Reports µs per cycle (median, p99) for the whole cycle, the physics alone, and the host side
(their difference), against the 1 ms period as a ratio.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hil_fixtures import sim_bench  # noqa: E402

from exo_rt.hil.bench import Gains, track  # noqa: E402


def main(cycles: int = 5000) -> None:
    bench = sim_bench()
    bench.start()
    pose = bench.home()
    t = np.arange(cycles) * bench.dt
    ref = pose + 0.05 * np.sin(2 * np.pi * 1.0 * t)[:, None]
    gains = Gains.for_bandwidth(bench.n, 3.0, 0.7)
    track(bench, ref[:200], gains)  # warm: numba kernels compiled and cached
    physics: list[float] = []
    total: list[float] = []
    step = bench.world.plant.step

    def timed_step(cmd=None):
        t0 = time.perf_counter()
        step(cmd)
        physics.append(time.perf_counter() - t0)

    bench.world.plant.step = timed_step
    cycle = bench.cycle

    def timed_cycle(currents, **kw):
        t0 = time.perf_counter()
        cycle(currents, **kw)
        total.append(time.perf_counter() - t0)

    bench.cycle = timed_cycle
    t0 = time.perf_counter()
    track(bench, ref, gains)
    wall = time.perf_counter() - t0
    tot, phy = np.array(total) * 1e6, np.array(physics) * 1e6
    loop = wall / cycles * 1e6  # the whole loop: law, conversion, cycle, logging
    host = loop - np.median(phy)
    print(f"bench cycle on the simulated bus, {cycles} cycles, 2 joints")
    print(f"  whole loop     {loop:7.1f} µs/cycle (median of bus cycle {np.median(tot):.1f}, "
          f"p99 {np.percentile(tot, 99):.1f})")
    print(f"  physics        {np.median(phy):7.1f} µs median (p99 {np.percentile(phy, 99):.1f})")
    print(f"  host side      {host:7.1f} µs/cycle = {host / 1000:.3f} of the 1 ms period")


if __name__ == "__main__":
    main()
