#!/usr/bin/env python3
"""What the machine itself gives a real-time thread: a bare SCHED_FIFO loop, nothing else.

    python tools/bench_machine.py [--seconds 60] [--cpu N] [--priority 80] [--cpu-latency-us 0]
                                  [--work-us 35]

It sleeps to absolute 1 ms deadlines (like the controller's scheduler) on one CPU and counts
how late it wakes. With ``--work-us`` it then does a fixed job of about that many µs (a
Python loop, the same every cycle) and measures how long it took: how much the machine itself
stretches a job of the cycle's size now and then (a virtual CPU held by its host, caches
emptied by the rest of the machine) — the floor under the controller's compute p99.9. The
deadlines it misses are counted as the controller counts its overruns (a cycle that ends past
the next deadline skips every deadline it passed): the floor under the overrun figure.
Whatever it sees, the controller sees too: run it first on a new PC (and on a virtual
machine, where the host may hold a virtual CPU for ms).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from exo_rt.runtime.loop import last_cpu, realtime_setup, realtime_teardown


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--cpu", type=int, default=None, help="default: the last CPU")
    ap.add_argument("--priority", type=int, default=80)
    ap.add_argument("--cpu-latency-us", type=int, default=None, metavar="US",
                    help="hold every CPU's wake-up latency to US µs, as `exo-rt run` does "
                         "(realtime.cpu_latency_us); default: the machine's own setting")
    ap.add_argument("--work-us", type=float, default=None, metavar="US",
                    help="after each wake a fixed job of about US µs, timed")
    args = ap.parse_args(argv)
    loops = _calibrate(args.work_us) if args.work_us else 0
    cpu = last_cpu() if args.cpu is None else args.cpu
    setup = realtime_setup(args.priority, cpu, cpu_latency_us=args.cpu_latency_us)
    n = int(args.seconds * 1000)
    late = np.zeros(n)
    work = np.zeros(n)
    t = time.monotonic() + 1e-3
    missed = 0  # deadlines skipped, counted as the controller counts its overruns
    try:
        for k in range(n):
            rest = t - time.monotonic()
            if rest > 2e-4:
                time.sleep(rest - 2e-4)
            while time.monotonic() < t:
                pass
            late[k] = time.monotonic() - t
            if loops:
                t0 = time.perf_counter()
                _job(loops)
                work[k] = time.perf_counter() - t0
            t += 1e-3
            now = time.monotonic()
            if now > t:  # skip, never burst
                skip = int((now - t) / 1e-3) + 1
                missed += skip
                t += skip * 1e-3
    finally:
        realtime_teardown()
    us = late * 1e6
    print(f"bare SCHED_FIFO loop, 1 ms deadlines, {args.seconds:g} s on CPU {cpu} "
          f"({os.cpu_count()} CPUs): " + "; ".join(
              line for line in setup.lines() if line.startswith(("SCHED", "CPU"))))
    print(f"  wake latency p50 {np.percentile(us, 50):.1f}  p99 {np.percentile(us, 99):.1f}  "
          f"p99.9 {np.percentile(us, 99.9):.1f}  max {us.max():.0f} µs")
    for limit in (100, 1000, 5000):
        k = int((us > limit).sum())
        print(f"  wakes later than {limit:>5} µs: {k} ({60.0 * k / args.seconds:.1f} per minute)")
    print(f"  deadlines missed: {missed} ({100.0 * missed / n:.4f} % of the cycles; "
          f"the count `exo-rt run` reports as overruns)")
    if loops:
        p50, p99, p999 = np.percentile(work * 1e6, [50, 99, 99.9])
        print(f"  a fixed job ({loops} loop turns): p50 {p50:.1f}  p99 {p99:.1f}  "
              f"p99.9 {p999:.1f}  max {1e6 * work.max():.0f} µs; p99.9 / p50 {p999 / p50:.1f}")
    return 0


def _job(loops: int) -> int:
    """The fixed job: the same arithmetic every time."""
    x = 0
    for i in range(loops):
        x += i * i
    return x


def _calibrate(us: float) -> int:
    """Loop turns for a job of about ``us`` µs, back to back (warm)."""
    loops = 100
    while True:
        t0 = time.perf_counter()
        for _ in range(50):
            _job(loops)
        took = (time.perf_counter() - t0) / 50 * 1e6
        if took >= us:
            return loops
        loops = int(loops * max(1.05, min(2.0, us / took)))


if __name__ == "__main__":
    sys.exit(main())
