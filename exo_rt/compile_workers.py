"""How the warm-up's entries run (:mod:`exo_rt.warmup`): in this process and in worker
processes at once — fresh interpreters compiling numba kernels into the shared on-disk cache —
each taking the next entry when it is free (a plain pool); which kernels each entry compiled
(numba's compile events); and the marker of what ran into a cache.

While a run waits for a compile — its imports before the warm-up, the warm-up's entries, a
kernel compiled outside them — the :class:`Heartbeat` prints a line whenever nothing was
printed for :data:`HEARTBEAT_S` (what is awaited, and for how long), so that a first start
on a loaded machine never looks hung.

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
HEARTBEAT_S = 1.0  # s: the longest silence while a compile is awaited (the promise: 2 s)
STARTING_S = 60.0  # s after the process started: the start's heartbeat ends, warm-up or not
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


class Heartbeat:
    """The lines of a wait: :meth:`line` prints one; while :meth:`wait` says what is awaited, a
    thread prints ``  … what  [elapsed s]`` whenever no line came for :data:`HEARTBEAT_S`.
    Idle (nothing awaited, as during a run), the thread sleeps on a condition: no wake-ups."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.last = time.monotonic()
        self.what: Callable[[], str] | None = None
        self.since = self.until = 0.0
        self.out = sys.stderr
        self.thread: threading.Thread | None = None

    def line(self, text: str, out=None) -> None:
        """Print ``text`` on ``out`` (the stream of the wait) and restart the silence. A
        stream closed meanwhile loses the line, never the caller's work (a compile report
        raising would fail the compile it reports)."""
        with self.cond:
            try:
                (out or self.out).write(text + "\n")
                (out or self.out).flush()
            except (OSError, ValueError):  # the stream closed: nobody reads it
                pass
            self.last = time.monotonic()

    def wait(self, what: Callable[[], str] | None, since: float, out=None,
             until: float = float("inf")) -> None:
        """From now on ``what()`` is awaited (None: nothing), since ``since`` (monotonic s),
        at most until ``until``; its heartbeat goes to ``out`` (stderr)."""
        with self.cond:
            self.what, self.since, self.until = what, since, until
            self.out = out or sys.stderr
            if what is not None and self.thread is None:
                self.thread = threading.Thread(target=self._beat, name="exo-rt heartbeat",
                                               daemon=True)
                self.thread.start()
            self.cond.notify()

    def state(self) -> tuple:
        """What is awaited now (for :meth:`wait` to restore)."""
        return self.what, self.since, self.until

    def _beat(self) -> None:
        with self.cond:
            while True:
                now = time.monotonic()
                if self.what is not None and now > self.until:
                    self.what = None
                if self.what is None:
                    self.cond.wait()
                    continue
                if now < self.last + HEARTBEAT_S:
                    self.cond.wait(self.last + HEARTBEAT_S - now)
                    continue
                try:
                    self.out.write(f"  … {self.what()}  [{now - self.since:5.1f} s]\n")
                    self.out.flush()
                except (OSError, ValueError):  # the stream closed: nobody is waiting
                    self.what = None
                self.last = now


HEARTBEAT = Heartbeat()


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
    """``n`` workers: those :func:`prestart` started first, then new ones (the start's
    heartbeat ends: the warm-up that takes them has its own)."""
    HEARTBEAT.wait(None, 0.0)
    out = [_SPARE.pop() for _ in range(min(n, len(_SPARE)))]
    return out + [Worker() for _ in range(n - len(out))]


def prestart() -> int:
    """On a cold cache, start the warm-up's workers now (one per CPU but this process's);
    :func:`workers` hands them out. Returns how many were started."""
    if _SPARE or not cold():
        return 0
    from exo_rt import STARTED

    HEARTBEAT.last = STARTED  # the first line a second after the process started
    HEARTBEAT.wait(lambda: "starting: imports and configuration, then compiling", STARTED,
                   until=STARTED + STARTING_S)
    _SPARE.extend(Worker() for _ in range(default_jobs() - 1))
    return len(_SPARE)


def discard_spares() -> None:
    """Close workers that were started ahead but not used (the cache was warm after all)."""
    HEARTBEAT.wait(None, 0.0)
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
    todo, results, lock, running = deque(names), [], threading.Lock(), []
    jobs, width, t0 = max(1, min(jobs, len(names))), max(map(len, names)), time.perf_counter()
    t_wait = time.monotonic()
    HEARTBEAT.line(header or f"numba: warming {len(names)} components up in {jobs} "
                   f"process{'es' * (jobs > 1)} …", out)

    def take() -> str | None:
        with lock:
            if todo:
                running.append(todo[0])
            return todo.popleft() if todo else None

    def finish(r: dict) -> None:
        k = len(r["compiled"])
        what = f"FAILED: {r['error']}" if r["error"] else \
            f"{r['s']:6.2f} s  " + (f"{k} kernel{'s' * (k > 1)} compiled" if k else "loaded")
        with lock:
            results.append(r)
            running.remove(r["name"])
            HEARTBEAT.line(f"  {r['name']:<{width}}  {what}  [{time.perf_counter() - t0:5.1f} s, "
                           f"worker {r['worker']}]", out)

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
    HEARTBEAT.wait(lambda: "compiling " + (", ".join(list(running)) or "…"), t_wait, out)
    threads = [threading.Thread(target=remote, args=(w, worker), daemon=True)
               for w, worker in enumerate(started, 1)]
    for t in threads:
        t.start()
    while (n := take()) is not None:
        finish(dict(run(n), worker=0))
    for t in threads:
        t.join()
    HEARTBEAT.wait(None, 0.0)
    failed = sum(1 for r in results if r["error"])
    HEARTBEAT.line(f"numba: warm-up done in {time.perf_counter() - t0:.1f} s, "
                   f"{sum(len(r['compiled']) for r in results)} kernels compiled"
                   + (f", {failed} entries FAILED" if failed else "")
                   + f" (cache {os.environ.get('NUMBA_CACHE_DIR', 'numba default')})", out)
    return results


# ---------------------------------------------------------------- compile events
class Compiles:
    """numba's compile events, per thread: the kernels a call of :meth:`run` compiled, and
    those compiled outside any (given to :attr:`report`: no warm-up entry ran them)."""

    def __init__(self) -> None:
        from numba.core import event

        self.local = threading.local()
        self.report: Callable[[str], None] | None = None
        self.stream = sys.stderr  # where report and the heartbeat go
        outer = self

        class Listener(event.Listener):
            def on_start(self, ev) -> None:
                outer._start(ev)

            def on_end(self, ev) -> None:
                outer._end(ev)

        event.register("numba:compile", Listener())

    def _stack(self) -> list:
        if not hasattr(self.local, "stack"):
            self.local.stack, self.local.names = [], None
        return self.local.stack

    @staticmethod
    def _name(ev) -> str:
        d = ev.data["dispatcher"]
        return f"{d.py_func.__module__}.{d.py_func.__qualname__}"

    def _start(self, ev) -> None:
        stack = self._stack()
        if not stack and self.local.names is None and self.report is not None:
            name = self._name(ev)  # a kernel no entry compiled: awaited, with a heartbeat
            self.local.awaited = HEARTBEAT.state()
            HEARTBEAT.wait(lambda: f"compiling {name}", time.monotonic(), self.stream)
        stack.append(time.perf_counter())

    def _end(self, ev) -> None:
        stack = self._stack()
        t0 = stack.pop() if stack else time.perf_counter()
        name = self._name(ev)
        if self.local.names is not None:
            self.local.names.append(name)
        elif not stack and self.report is not None:
            what, since, until = getattr(self.local, "awaited", (None, 0.0, 0.0))
            HEARTBEAT.wait(what, since, self.stream, until)  # what was awaited before
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
    c = compiles()
    c.stream = out = stream or sys.stderr
    c.report = lambda line: HEARTBEAT.line(line + note, out)


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
