"""The warm-up's worker processes: fresh interpreters that compile numba kernels into the
shared on-disk cache while this process compiles others (:mod:`exo_rt.warmup`).

Light on purpose (the standard library only): ``exo-rt run`` calls :func:`prestart` first
thing on a cold cache, before its own imports, so that a worker's interpreter start and
imports (numpy, numba, the kernel modules: ~0.3–0.5 s of CPU) overlap the main process's
instead of following them — on a 2-CPU machine the second CPU is otherwise idle then.

A worker is told its context (config, controller) on its first stdin line, then entry names
one per line; it answers one JSON result per line. Closing its stdin ends it: the parent does
not wait for the interpreter's teardown (numba's and LLVM's, ~0.3 s), the child is reaped
later. Forked workers are not used: numba's and LLVM's state shared across a fork was seen
to corrupt the parent's heap at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER_ENV = "EXO_RT_WARMUP_WORKER"  # set in worker processes: no warm-up of their own
_SPARE: list[Worker] = []  # started by prestart(), not yet given a context
_ENDED: list[subprocess.Popen] = []  # closed workers, reaped once they have exited


def default_jobs() -> int:
    """Processes a warm-up uses: EXO_RT_WARMUP_JOBS, else this process's CPUs."""
    env = os.environ.get("EXO_RT_WARMUP_JOBS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class Worker:
    """One worker process (a new interpreter running :func:`exo_rt.warmup.serve_worker`)."""

    def __init__(self) -> None:
        env = dict(os.environ, **{WORKER_ENV: "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from exo_rt.warmup import serve_worker; serve_worker()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            text=True, bufsize=1)
        self.has_context = False

    def run(self, name: str, spec: dict) -> dict:
        """Run entry ``name`` in the worker (its context from ``spec`` on first use)."""
        try:
            if not self.has_context:
                self.proc.stdin.write(json.dumps(spec) + "\n")
                self.has_context = True
            self.proc.stdin.write(name + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            raise RuntimeError("the worker process died")
        return json.loads(line)

    def close(self) -> None:
        """End the worker: its stdin closed, its exit not waited for (see the module)."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        _ENDED.append(self.proc)
        _reap()


def _reap() -> None:
    for proc in list(_ENDED):
        if proc.poll() is not None:
            _ENDED.remove(proc)


def workers(n: int) -> list[Worker]:
    """``n`` workers: those :func:`prestart` started first, then new ones."""
    out = [_SPARE.pop() for _ in range(min(n, len(_SPARE)))]
    return out + [Worker() for _ in range(n - len(out))]


def marker() -> Path | None:
    """The warm-up's marker in numba's cache folder: the entries compiled into it, named
    after the hash of the kernel sources (so a user-chosen NUMBA_CACHE_DIR is safe too)."""
    cache = os.environ.get("NUMBA_CACHE_DIR")
    if not cache:
        return None
    from exo_rt import code_key

    return Path(cache) / f"exo-rt-warm-{code_key()}.json"


def cold() -> bool:
    """Whether numba's cache has never been warmed for this code (no marker at all: a fresh
    install, or a kernel module edited). Cheap: a hash of file stats, one stat."""
    if os.environ.get(WORKER_ENV) or os.environ.get("EXO_RT_WARMUP") == "0":
        return False
    path = marker()
    return path is not None and not path.exists()


def prestart() -> int:
    """On a cold cache, start the warm-up's workers now (one per CPU but this process's);
    :func:`workers` hands them out. Returns how many were started."""
    if _SPARE or not cold():
        return 0
    _SPARE.extend(Worker() for _ in range(default_jobs() - 1))
    return len(_SPARE)


def discard_spares() -> None:
    """Close workers that were started ahead but not used (the cache was warm after all)."""
    while _SPARE:
        _SPARE.pop().close()
