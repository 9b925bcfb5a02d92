#!/usr/bin/env python3
"""Host-side cost of one bench cycle on the lockstep simulated bus, the physics subtracted:
``python tools/bench_hil.py [--cycles N] [--repeat R]``. On a real bus this is what must fit
into the 1 ms period.

Two loops, each timed over ``--cycles`` periods (best of ``--repeat`` runs, as the machine's
load allows):

- ``track``: the bench's computed-torque position loop (:func:`exo_rt.hil.bench.track`: its
  law, torque → current, the drives' cycle, the controller's velocity estimate and safety
  check through the cycle's data);
- ``controller``: the controller's own cycle on the bench (:meth:`exo_rt.hil.bench.Bench.
  run_controller`: :func:`exo_rt.cycle.step.step` period by period, READY → RUN (the default
  session) → STOPPING; ``--cycles`` of the gait in RUN).

Reports µs per cycle for the whole loop, the physics alone (median, p99), and the host side
(their difference), against the 1 ms period as a ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hil_fixtures import sim_bench  # noqa: E402

from exo_rt.hil.bench import Gains, track  # noqa: E402


def _timed_physics(bench) -> list[float]:
    """The plant's step timed on every call (s each, appended to the returned list)."""
    physics: list[float] = []
    step = bench.world.plant.step

    def timed_step(cmd=None):
        t0 = time.perf_counter()
        step(cmd)
        physics.append(time.perf_counter() - t0)

    bench.world.plant.step = timed_step
    return physics


def _track(bench, cycles: int) -> tuple[float, list[float], int]:
    """(wall s, physics s per step, cycles) of ``cycles`` periods of the bench's loop."""
    pose = bench.home()
    t = np.arange(cycles) * bench.dt
    ref = pose + 0.05 * np.sin(2 * np.pi * 1.0 * t)[:, None]
    gains = Gains.for_bandwidth(bench.n, 3.0, 0.7)
    track(bench, ref[:200], gains)  # warm: numba kernels compiled and cached
    physics = _timed_physics(bench)
    t0 = time.perf_counter()
    track(bench, ref, gains)
    return time.perf_counter() - t0, physics, cycles


def _controller(bench, cycles: int) -> tuple[float, list[float], int]:
    """(wall s, physics s per step, cycles) of the controller's run with ``cycles`` in RUN,
    from its first cycle on (the drives' bring-up before it left out)."""
    exchange, first = bench.exchange, []

    def timed_exchange(currents):
        if not first:
            first.append(time.perf_counter())
            physics.clear()
        exchange(currents)

    bench.exchange = timed_exchange
    physics = _timed_physics(bench)
    log, _summary = bench.run_controller(cycles * bench.dt)
    return time.perf_counter() - first[0], physics, log.n + 1


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=5000, help="periods timed (default 5000)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each loop, the best kept "
                                                          "(default 1)")
    p.add_argument("--loop", choices=("track", "controller", "both"), default="both",
                   help="which loop (default both)")
    args = p.parse_args(argv)
    loops = {"track": _track, "controller": _controller}
    names = list(loops) if args.loop == "both" else [args.loop]
    print(f"bench cycle on the simulated bus, {args.cycles} cycles, 2 joints, "
          f"best of {args.repeat}")
    for name in names:
        best = None
        for _ in range(args.repeat):
            bench = sim_bench()
            if name == "track":
                bench.start()
            wall, physics, cycles = loops[name](bench, args.cycles)
            bench.disable_all()
            bench.close()
            phy = np.array(physics) * 1e6
            loop = wall / cycles * 1e6  # the whole loop: law, conversion, cycle, logging
            if best is None or loop < best[0]:
                best = (loop, phy)
        loop, phy = best
        host = loop - np.median(phy)
        print(f"{name}:")
        print(f"  whole loop     {loop:7.1f} µs/cycle")
        print(f"  physics        {np.median(phy):7.1f} µs median (p99 "
              f"{np.percentile(phy, 99):.1f})")
        print(f"  host side      {host:7.1f} µs/cycle = {host / 1000:.3f} of the 1 ms period")


if __name__ == "__main__":
    main()
