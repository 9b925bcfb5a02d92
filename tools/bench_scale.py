#!/usr/bin/env python3
"""Batch replay at scale: sessions per minute with 1 and 2 workers on the local and Ray
engines, and each engine's per-task overhead (``python tools/bench_scale.py [--sessions N]
[--run-s S] [--mode MODE] [--workers 1,2] [--engines local,ray]``; docs/scale.md,
docs/performance.md).

It records an archive of N short runs of the default leg (lockstep simulated bus), replays it
in MODE on each engine with each worker count (the cache left out: ``force``), and times, for
every engine, a batch of do-nothing tasks: start-up (the first task's result) and the cost per
further task. Figures depend on the machine's load: note ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def noop(x):
    """A task that does nothing: what is left is the engine's own cost."""
    return x


def per_task(engine: str, jobs: int, n: int) -> tuple[float, float]:
    """(start-up s, overhead per task s) of ``n`` do-nothing tasks on ``jobs`` workers: the
    start-up is the time for one task per worker, the overhead what each further task adds."""
    from exo_rt.batch.engine import run_tasks

    t0 = time.perf_counter()
    list(run_tasks(noop, list(range(jobs)), engine=engine, jobs=jobs))
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    list(run_tasks(noop, list(range(n)), engine=engine, jobs=jobs))
    return startup, max(0.0, (time.perf_counter() - t0 - startup) / (n - jobs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=24)
    ap.add_argument("--run-s", type=float, default=2.0, help="seconds in RUN per session")
    ap.add_argument("--mode", default="closed-loop",
                    choices=("plant", "controller", "closed-loop"))
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--tasks", type=int, default=200, help="do-nothing tasks for the overhead")
    args = ap.parse_args(argv)
    from exo_rt.batch.archive import make_archive
    from exo_rt.batch.engine import no_usage_stats, ray_module
    from exo_rt.batch.replay import run_batch

    engines = args.engines.split(",")
    if "ray" in engines and ray_module() is None:
        print("ray is not installed (pip install -e '.[cluster]'): local engine only")
        engines = [e for e in engines if e != "ray"]
    workers = [int(w) for w in args.workers.split(",")]
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}, "
          f"{os.cpu_count()} CPUs")
    no_usage_stats()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        make_archive(Path(tmp), args.sessions, broken=False, run_s=args.run_s)
        archive = Path(tmp) / "archive"
        print(f"recorded {args.sessions} sessions ({args.run_s:g} s in RUN, ≈"
              f"{args.run_s + 0.7:.1f} s each) in {time.perf_counter() - t0:.1f} s")
        run_batch([archive], args.mode, out=Path(tmp) / "warm", status=False)  # numba cache
        print(f"{args.mode} replay of the archive (wall time from the command's start, "
              "workers' start-up included):")
        for engine in engines:
            for w in workers:
                t0 = time.perf_counter()
                b = run_batch([archive], args.mode, engine=engine, jobs=w,
                              out=Path(tmp) / f"{engine}{w}", force=True, status=False)
                wall = time.perf_counter() - t0
                task = sum(r["wall_s"] for r in b.results) / len(b.results)
                print(f"  {engine:<6} {w} worker(s): {wall:6.2f} s  "
                      f"{60.0 * len(b.results) / wall:7.1f} sessions/min  "
                      f"(a session's replay itself: {task * 1e3:.0f} ms)")
        if "ray" in engines:  # a Ray already up, its workers warm: the steady rate
            ray = ray_module()
            for w in workers:
                ray.init(num_cpus=w, include_dashboard=False, log_to_driver=False)
                for _ in range(2):
                    t0 = time.perf_counter()
                    b = run_batch([archive], args.mode, engine="ray", jobs=w,
                                  out=Path(tmp) / f"rayup{w}", force=True, status=False)
                    wall = time.perf_counter() - t0
                ray.shutdown()
                print(f"  ray up {w} worker(s): {wall:6.2f} s  "
                      f"{60.0 * len(b.results) / wall:7.1f} sessions/min  (Ray started and its "
                      "workers warm before: the second batch)")
    print(f"per-task overhead ({args.tasks} do-nothing tasks, 2 workers):")
    for engine in engines:
        if engine == "ray":
            ray = ray_module()
            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            print(f"  ray.init (local, 2 CPUs): {time.perf_counter() - t0:.2f} s")
        startup, each = per_task(engine, 2, args.tasks)
        print(f"  {engine:<6} start-up {startup:6.3f} s   {each * 1e3:7.3f} ms per task")
        if engine == "ray":
            ray_module().shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
