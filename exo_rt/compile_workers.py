"""How the warm-up's entries run (:mod:`exo_rt.warmup`): in this process and in worker
processes at once — fresh interpreters compiling numba kernels into the shared on-disk cache —
each taking the next entry when it is free (a plain pool); which kernels each entry compiled
(numba's compile events); and the marker of what ran into a cache.

Light on purpose (the standard library only at import): ``exo-rt run`` calls :func:`prestart`
first thing on a cold cache, before its own imports, so that a worker's interpreter start and
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
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
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


def serve(start: Callable[[dict], Callable[[str], dict]]) -> None:
    """A worker's main: numba's registries loaded while the parent is still starting, then
    ``run = start(context)`` from the first stdin line, then an entry name a line on stdin,
    ``run(name)``'s result a JSON line on stdout (what entries print goes to stderr)."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    from numba.core.registry import cpu_target

    cpu_target.typing_context.refresh()  # numba's registries: ~0.1 s of the first compile
    cpu_target.target_context.refresh()
    line = sys.stdin.readline()
    if not line:
        return
    run = start(json.loads(line))
    for name in (x.strip() for x in sys.stdin):
        if name:
            out.write(json.dumps(run(name)) + "\n")


def pool(names: list[str], run: Callable[[str], dict], spec: dict, jobs: int, out,
         header: str | None = None) -> list[dict]:
    """Run the entries ``names`` by ``run`` in this process and by ``jobs − 1`` workers (their
    context ``spec``) at once, each taking the next name in order when it is free; ``header``,
    a line per entry and a summary on ``out``. Returns one result per entry (``name``, ``s``,
    ``compiled``: kernel names, ``error``, ``worker``: 0 for this process)."""
    todo, results, lock = deque(names), [], threading.Lock()
    jobs, width, t0 = max(1, min(jobs, len(names))), max(map(len, names)), time.perf_counter()
    print(header or f"numba: warming {len(names)} components up in {jobs} "
          f"process{'es' * (jobs > 1)} …", file=out, flush=True)

    def take() -> str | None:
        with lock:
            return todo.popleft() if todo else None

    def finish(r: dict) -> None:
        k = len(r["compiled"])
        what = f"FAILED: {r['error']}" if r["error"] else \
            f"{r['s']:6.2f} s  " + (f"{k} kernel{'s' * (k > 1)} compiled" if k else "loaded")
        with lock:
            results.append(r)
            out.write(f"  {r['name']:<{width}}  {what}  [{time.perf_counter() - t0:5.1f} s, "
                      f"worker {r['worker']}]\n")
            out.flush()

    def remote(w: int, worker: Worker) -> None:
        try:
            while (n := take()) is not None:
                try:
                    finish(dict(worker.run(n, spec), worker=w))
                except (RuntimeError, ValueError) as exc:  # it died: the others go on
                    finish({"name": n, "s": 0.0, "compiled": [], "error": str(exc),
                            "worker": w})
                    return
        finally:
            worker.close()

    started = workers(jobs - 1)
    discard_spares()  # started ahead for more entries than there are
    threads = [threading.Thread(target=remote, args=(w, worker), daemon=True)
               for w, worker in enumerate(started, 1)]
    for t in threads:
        t.start()
    while (n := take()) is not None:
        finish(dict(run(n), worker=0))
    for t in threads:
        t.join()
    failed = sum(1 for r in results if r["error"])
    print(f"numba: warm-up done in {time.perf_counter() - t0:.1f} s, "
          f"{sum(len(r['compiled']) for r in results)} kernels compiled"
          + (f", {failed} entries FAILED" if failed else "")
          + f" (cache {os.environ.get('NUMBA_CACHE_DIR', 'numba default')})", file=out,
          flush=True)
    return results


# ---------------------------------------------------------------- compile events
class Compiles:
    """numba's compile events, per thread: the kernels a call of :meth:`run` compiled, and
    those compiled outside any (given to :attr:`report`: no warm-up entry ran them)."""

    def __init__(self) -> None:
        from numba.core import event

        self.local = threading.local()
        self.report: Callable[[str], None] | None = None
        outer = self

        class Listener(event.Listener):
            def on_start(self, ev) -> None:
                outer._stack().append(time.perf_counter())

            def on_end(self, ev) -> None:
                outer._end(ev)

        event.register("numba:compile", Listener())

    def _stack(self) -> list:
        if not hasattr(self.local, "stack"):
            self.local.stack, self.local.names = [], None
        return self.local.stack

    def _end(self, ev) -> None:
        stack = self._stack()
        t0 = stack.pop() if stack else time.perf_counter()
        d = ev.data["dispatcher"]
        name = f"{d.py_func.__module__}.{d.py_func.__qualname__}"
        if self.local.names is not None:
            self.local.names.append(name)
        elif not stack and self.report is not None:
            sig = ", ".join(str(a) for a in ev.data["args"])
            sig = sig if len(sig) <= 80 else sig[:77] + "..."
            self.report(f"numba: compiled {name}({sig}) in {time.perf_counter() - t0:.2f} s")

    def run(self, name: str, fn: Callable[[], object]) -> dict:
        """``fn()`` in this thread: its seconds, the kernels it compiled, its error (one line:
        a broken entry must not stop the others)."""
        self._stack()
        self.local.names = names = []
        t0, error = time.perf_counter(), None
        try:
            fn()
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            msg = str(exc).strip().splitlines()
            error = (f"{type(exc).__name__}: {msg[0] if msg else ''} "
                     f"({Path(last.filename).name}:{last.lineno})")[:300]
        finally:
            self.local.names = None
        return {"name": name, "s": time.perf_counter() - t0, "compiled": names, "error": error}


_COMPILES: Compiles | None = None


def compiles() -> Compiles:
    """This process's :class:`Compiles` (listening from the first call on)."""
    global _COMPILES
    if _COMPILES is None:
        _COMPILES = Compiles()
    return _COMPILES


def report_compiles(stream=None, note: str = "") -> None:
    """From now on, print every kernel compiled outside a warm-up entry (with its time and
    ``note``) to ``stream`` (stderr): on a warm cache nothing compiles, nothing is printed."""
    out = stream or sys.stderr
    compiles().report = lambda line: print(line + note, file=out, flush=True)


# ---------------------------------------------------------------- the warm marker
def marker() -> Path | None:
    """The warm-up's marker in numba's cache folder: the entries run into it (their tags),
    named after the hash of the kernel sources (so a user-chosen NUMBA_CACHE_DIR is safe too)
    and of where the package is installed: numba keys its cached kernels by their source
    files' paths, so the same sources installed twice (an editable tree and a wheel) share
    the folder but not the kernels — each install is warm only once it was warmed."""
    import hashlib

    from exo_rt import numba_settings

    numba_settings.apply()  # here too: the workers this process starts inherit them
    cache = os.environ.get("NUMBA_CACHE_DIR")
    if not cache:
        return None
    where = hashlib.sha256(str(Path(__file__).resolve().parent).encode()).hexdigest()[:8]
    return Path(cache) / f"exo-rt-warm-{numba_settings.code_key()}-{where}.json"


def warm_set() -> set[str]:
    """The tags the marker holds (none: no marker)."""
    path = marker()
    try:
        return set(json.loads(path.read_text())) if path else set()
    except (OSError, ValueError):
        return set()


def mark(tags) -> None:
    """Add ``tags`` to the marker (atomically: workers of other runs may write it too)."""
    path = marker()
    if path is None:
        return
    try:
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps(sorted(warm_set() | set(tags))))
        tmp.replace(path)
    except OSError:
        pass


def cold() -> bool:
    """Whether numba's cache has never been warmed for this code (no marker at all: a fresh
    install, or a kernel module edited). Cheap: a hash of file stats, one stat."""
    if os.environ.get(WORKER_ENV) or os.environ.get("EXO_RT_WARMUP") == "0":
        return False
    path = marker()
    return path is not None and not path.exists()
