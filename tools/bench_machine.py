#!/usr/bin/env python3
"""What the machine itself gives a real-time thread: a bare SCHED_FIFO loop, nothing else.

    python tools/bench_machine.py [--seconds 60] [--cpu N] [--priority 80] [--cpu-latency-us 0]

It sleeps to absolute 1 ms deadlines (like the controller's scheduler, without any work) on
one CPU and counts how late it wakes. Whatever it sees, the controller sees too: run it first
on a new PC (and on a virtual machine, where the host may hold a virtual CPU for ms).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from exo_rt.runtime.loop import last_cpu, realtime_setup, realtime_teardown


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--cpu", type=int, default=None, help="default: the last CPU")
    ap.add_argument("--priority", type=int, default=80)
    ap.add_argument("--cpu-latency-us", type=int, default=None, metavar="US",
                    help="hold every CPU's wake-up latency to US µs, as `exo-rt run` does "
                         "(realtime.cpu_latency_us); default: the machine's own setting")
    args = ap.parse_args(argv)
    cpu = last_cpu() if args.cpu is None else args.cpu
    setup = realtime_setup(args.priority, cpu, cpu_latency_us=args.cpu_latency_us)
    n = int(args.seconds * 1000)
    late = np.zeros(n)
    t = time.monotonic() + 1e-3
    try:
        for k in range(n):
            rest = t - time.monotonic()
            if rest > 2e-4:
                time.sleep(rest - 2e-4)
            while time.monotonic() < t:
                pass
            late[k] = time.monotonic() - t
            t += 1e-3
            if time.monotonic() > t:  # skip, never burst
                t += (int((time.monotonic() - t) / 1e-3) + 1) * 1e-3
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
