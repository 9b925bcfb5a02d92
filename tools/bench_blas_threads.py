#!/usr/bin/env python3
"""What numpy's BLAS threads cost a small fit while the other CPUs are busy: a gait's
least-squares Fourier fit (``--rows`` phases by 25 terms, as ``exo_rt.control.flat_foot``
makes it) timed in a fresh process with BLAS at its default thread count and at one thread
(``OPENBLAS_NUM_THREADS=1``: what ``exo_rt.numba_settings`` sets), side by side, first on a
quiet machine, then with a busy loop on every CPU (a loaded machine: the control thread's
CPU, the simulation's, the test suite's workers) — the fit's own process then shares a CPU,
and a BLAS thread that waits for another spins while that one gets no CPU.

    python tools/bench_blas_threads.py [--rows 1000] [--fits 40]

Prints per case the median, 99th percentile and largest time of one fit (ms) and the ratio of
the default's largest to one thread's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

FIT = r"""
import json, sys, time
import numpy as np
rows, fits = int(sys.argv[1]), int(sys.argv[2])
phase = np.arange(rows) / rows
cols = [np.ones_like(phase)]
for n in range(1, 13):
    cols += [np.cos(2 * np.pi * n * phase), np.sin(2 * np.pi * n * phase)]
a, b = np.stack(cols, axis=1), np.sin(2 * np.pi * phase) ** 3
np.linalg.lstsq(a, b, rcond=None)  # (BLAS's threads started)
times = []
for _ in range(fits):
    t = time.perf_counter()
    np.linalg.lstsq(a, b, rcond=None)
    times.append((time.perf_counter() - t) * 1e3)
    time.sleep(0.005)  # (a fit now and then, as a session makes them)
print(json.dumps(times))
"""


def fits(rows: int, n: int, threads: str | None) -> list[float]:
    """Times (ms) of ``n`` fits in a fresh process, BLAS at ``threads`` (None: its default)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = threads
    out = subprocess.run([sys.executable, "-c", FIT, str(rows), str(n)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def line(label: str, t: list[float]) -> float:
    """One case's line; returns its largest time (ms)."""
    import numpy as np

    print(f"  {label:22s} median {np.median(t):7.2f}  p99 {np.percentile(t, 99):7.2f}  "
          f"max {max(t):7.2f} ms")
    return max(t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000, help="phases of the fit (default 1000)")
    ap.add_argument("--fits", type=int, default=40, help="fits timed per case (default 40)")
    args = ap.parse_args(argv)
    cpus = os.cpu_count() or 1
    print(f"a {args.rows} × 25 least-squares fit, {args.fits} times per case; {cpus} CPUs")
    for busy in (False, True):
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(cpus if busy else 0)]
        try:
            print("every CPU busy:" if busy else "a quiet machine:")
            default = line("BLAS's default threads", fits(args.rows, args.fits, None))
            one = line("one thread", fits(args.rows, args.fits, "1"))
            print(f"  largest, default / one thread: {default / one:.1f}×")
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
