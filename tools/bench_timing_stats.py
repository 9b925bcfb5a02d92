"""What the loop's timing statistics cost the control thread a cycle (µs): each figure counted
into its histogram as it comes (``Histogram.add``, three a cycle) against the block that
``TimingStats.add`` fills and counts every ``TimingStats.BLOCK`` cycles in compiled calls —
the mean, and the slowest call (the one that counts a block).

    python tools/bench_timing_stats.py [--cycles N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from exo_rt.runtime.loop import Histogram, TimingStats


def per_call(add, n: int) -> np.ndarray:
    """Each call's wall time (µs), the clock's own cost taken off."""
    clock = time.perf_counter
    t = np.empty(n)
    for k in range(n):
        a = clock()
        add(k)
        t[k] = clock() - a
    reads = np.empty(1000)
    for k in range(1000):
        a = clock()
        reads[k] = clock() - a
    return (t - np.median(reads)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=200_000)
    n = ap.parse_args().cycles
    hists = (Histogram(), Histogram(), Histogram())

    def one_by_one(k: int) -> None:
        hists[0].add(12.3 + k % 7)
        hists[1].add(45.6 + k % 5)
        hists[2].add(1000.2 - k % 3)

    stats = TimingStats()
    stats.add(1.0, 2.0, 3.0)
    stats.count()  # compiled (a run compiles it at its warm-up, before READY)

    def block(k: int) -> None:
        stats.add(12.3 + k % 7, 45.6 + k % 5, 1000.2 - k % 3)

    for name, add in (("Histogram.add ×3 (each as it comes)", one_by_one),
                      (f"TimingStats.add (block of {TimingStats.BLOCK})", block)):
        t = per_call(add, n)
        print(f"{name:<40} mean {t.mean():5.2f} µs  p50 {np.median(t):5.2f} µs  "
              f"p99.9 {np.percentile(t, 99.9):5.1f} µs  max {t.max():6.1f} µs")


if __name__ == "__main__":
    main()
