#!/usr/bin/env python3
"""Where the controller's real-time cycle goes: ``exo-rt run --realtime`` in this process,
each part of the cycle timed.

    python tools/bench_rt_parts.py [--config tests/data/exo_leg_vm.yaml] [--duration S]

Parts (µs per cycle, p50 and p99 over the RUN cycles, and their share of the
slowest 1 % of cycles): the board's poll, the drives' frames in (receive + decode + flags),
the cycle kernel, the drives' commands out (RPDOs, SYNC and heartbeat) — the clock stamps the
compiled cycle (exo_rt.cycle.cycle_call) leaves in its ``io`` —, the board's heartbeat (a
timer around its Python call, ~0.5 µs) and the whole cycle; "rest" is the whole less the
parts (Python: state handling).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("board poll", "frames in", "cycle kernel", "commands out", "board heartbeat")


def instrument(capacity: int) -> dict[str, np.ndarray]:
    """Per-cycle arrays of each part's µs, filled while the run goes (preallocated)."""
    from exo_rt.cycle import cycle_call as cc
    from exo_rt.runtime import controller as ctl
    from firmware_bridge.link import BoardLink

    times = {name: np.zeros(capacity) for name in (*PARTS, "whole")}
    k = [0]
    clock = time.monotonic  # (the compiled cycle's clock)

    def timed(name, fn):
        acc = times[name]

        def wrapper(*args, **kwargs):
            t0 = clock()
            out = fn(*args, **kwargs)
            i = k[0]
            if i < capacity:
                acc[i] += (clock() - t0) * 1e6
            return out
        return wrapper

    BoardLink.send_heartbeat = timed("board heartbeat", BoardLink.send_heartbeat)
    whole = ctl.Controller._cycle
    # the compiled cycle's clock stamps in io
    stamps = ((cc.IO_T_START, cc.IO_T_BOARD, "board poll"), (cc.IO_T_BOARD, cc.IO_T_IN,
              "frames in"), (cc.IO_T_IN, cc.IO_T_KERNEL, "cycle kernel"),
              (cc.IO_T_KERNEL, cc.IO_T_SYNC, "commands out"))

    def cycle(self, i):
        k[0] = i
        t0 = clock()
        go = whole(self, i)
        if i < capacity:
            times["whole"][i] = (clock() - t0) * 1e6
            io = self.io.values
            for a, b, name in stamps:
                times[name][i] = (io[b] - io[a]) * 1e6
        return go

    ctl.Controller._cycle = cycle
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "tests" / "data" / "exo_leg_vm.yaml"))
    ap.add_argument("--duration", type=float, default=10.0)
    args = ap.parse_args(argv)
    from exo_rt.cli import main as cli

    capacity = int((args.duration + 10) * 1000)
    times = instrument(capacity)
    with tempfile.TemporaryDirectory() as out:
        rc = cli(["run", "--realtime", "--config", args.config, "--duration",
                  str(args.duration), "--out", out])
    n = int(np.count_nonzero(times["whole"]))
    skip = 500  # bring-up and READY
    rows = {name: a[skip:n] for name, a in times.items()}
    rows["rest"] = rows["whole"] - sum(rows[p] for p in PARTS)
    print(f"exo-rt run --realtime --config {args.config}: exit {rc}, {n} cycles timed")
    slow = rows["whole"] >= np.percentile(rows["whole"], 99)  # the slowest 1 %
    for name, a in rows.items():
        print(f"  {name:16s} p50 {np.percentile(a, 50):7.1f}  p99 {np.percentile(a, 99):7.1f}  "
              f"in the slowest 1 %: mean {a[slow].mean():7.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
