"""Helper processes of a run (recording, real-time simulation, board emulator) and where they
are scheduled.

The control thread runs SCHED_FIFO on one CPU (:func:`exo_rt.runtime.loop.realtime_setup`);
every helper process runs SCHED_OTHER on the other CPUs. A process inherits its parent's
policy and affinity, so each helper is placed explicitly right after it starts — never left to
inheritance — and the placement is reported ("SCHED_OTHER on CPUs 0-14" or why not).

A helper can be started ahead (:func:`request`, then :func:`start_requested`): its interpreter
and imports (~0.2 s) then overlap the controller's own start, and :class:`Helper` adopts it,
handing it its arguments on its first stdin line (``--args-on-stdin``).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import time

from exo_rt.errors import BusError


def cpu_list(cpus: set[int]) -> str:
    """``{0, 1, 2, 5}`` → ``"0-2,5"``."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
        else:
            if run:
                out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def other_cpus(rt_cpu: int | None) -> set[int]:
    """The CPUs this process may use, less the control thread's (all of them if it is the only
    one)."""
    try:
        cpus = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set()
    rest = cpus - {rt_cpu} if rt_cpu is not None else set(cpus)
    return rest or set(cpus)


def place(pid: int, cpus: set[int], nice: int = 0, fifo: int | None = None) -> str:
    """Make ``pid`` (a process or a thread id) SCHED_OTHER on ``cpus`` with ``nice`` — or,
    with ``fifo``, SCHED_FIFO at that priority; say what took effect.

    Only what stands in for hardware gets more than plain SCHED_OTHER: the simulated drives
    and leg (SCHED_FIFO below the control thread, on the helper CPUs, when the control thread
    itself is real-time; real drives share no CPU with anything) and the board emulator
    (nice −10)."""
    what = []
    try:
        if fifo is not None:
            try:
                os.sched_setscheduler(pid, os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0),
                                      os.sched_param(fifo))
            except OSError:
                os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        else:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        policy = os.sched_getscheduler(pid) & 0xFF
        what.append({os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: f"SCHED_FIFO {fifo}"}.get(
            policy, f"policy {policy}"))
    except (OSError, AttributeError) as exc:
        what.append(f"policy not set ({exc.__class__.__name__})")
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
            what.append(f"nice {os.getpriority(os.PRIO_PROCESS, pid)}")
        except (OSError, AttributeError) as exc:
            what.append(f"nice not set ({exc.__class__.__name__})")
    if cpus:
        try:
            os.sched_setaffinity(pid, cpus)
            what.append(f"on CPUs {cpu_list(os.sched_getaffinity(pid))}")
        except (OSError, AttributeError) as exc:
            what.append(f"affinity not set ({exc.__class__.__name__})")
    return " ".join(what)


def policy_of(pid: int) -> str:
    """``SCHED_OTHER`` / ``SCHED_FIFO`` / … of a process or thread id."""
    names = {getattr(os, n): n for n in ("SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH",
                                         "SCHED_IDLE") if hasattr(os, n)}
    try:
        return names.get(os.sched_getscheduler(pid) & 0xFF, "unknown")
    except OSError:
        return "gone"


def _exit_watch(pid: int) -> tuple[int | None, object]:
    """A pidfd of process ``pid`` and a ``select.poll`` on it (readable once the process has
    ended), or (None, None) where the platform has none."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None, None
    watch = select.poll()
    watch.register(fd, select.POLLIN)
    return fd, watch


ARGS_ON_STDIN = "--args-on-stdin"  # a helper started ahead: its arguments come on stdin
_requested: set[str] = set()  # modules whose helper is to be started ahead
_spares: dict[str, subprocess.Popen] = {}  # started ahead, not adopted yet


def _spawn(module: str, args: list[str]) -> subprocess.Popen:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # ctrl-C goes to the controller


def request(module: str) -> None:
    """Ask for ``module``'s helper to be started ahead, at :func:`start_requested`."""
    _requested.add(module)


def start_requested() -> None:
    """Start the helpers :func:`request` asked for (the controller calls it once numba's
    warm-up is done, so that a cold compile does not share its CPUs with them). After a
    compile (a first start) the wait's heartbeat goes on until they are ready."""
    from exo_rt import compile_workers

    beat = compile_workers.HEARTBEAT
    if _requested and beat.thread is not None:
        names = ", ".join(m.rsplit(".", 1)[-1] for m in sorted(_requested))
        beat.wait(lambda: f"starting: the buses, the bring-up and the helpers ({names})",
                  time.monotonic(), until=time.monotonic() + compile_workers.STARTING_S)
    for module in sorted(_requested - set(_spares)):
        try:
            _spares[module] = _spawn(module, [ARGS_ON_STDIN])
        except OSError:
            pass  # Helper will start it the usual way and say why it cannot
    _requested.clear()


@atexit.register
def _end_spares() -> None:
    while _spares:
        proc = _spares.popitem()[1]
        try:
            proc.stdin.close()  # its first line never comes: it ends
            proc.wait(5.0)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()


def _adopt(module: str, args: list[str]) -> subprocess.Popen | None:
    proc = _spares.pop(module, None)
    if proc is None or proc.poll() is not None:
        return None
    try:
        proc.stdin.write(json.dumps(args) + "\n")
        proc.stdin.flush()
    except OSError:
        proc.kill()
        return None
    return proc


class Helper:
    """A helper process: ``python -m MODULE ARGS``, started, waited for until it prints its
    ready line (``ready`` or any line starting with ``serving``), placed, and stopped.

    ``wait=False``: not waited for here; :meth:`wait_ready` does, later (its interpreter's
    start, ~0.2 s, then overlaps the caller's own work)."""

    def __init__(self, name: str, module: str, args: list[str], *, ready_timeout: float = 60.0,
                 cpus: set[int] | None = None, nice: int = 0, fifo: int | None = None,
                 wait: bool = True) -> None:
        self.name = name
        self.ahead = module in _spares  # started ahead (by start_requested)
        try:
            self.proc = _adopt(module, args) or _spawn(module, args)
        except OSError as exc:
            raise BusError(f"cannot start the {name} process ({exc})", None,
                           "check the Python installation") from None
        self.pid = self.proc.pid
        self._pidfd, self._exited = _exit_watch(self.pid)
        self.placement = place(self.pid, cpus if cpus is not None else set(), nice, fifo)
        self.ready_timeout = ready_timeout
        self.ready_line: str | None = None
        if wait:
            self.wait_ready()

    def wait_ready(self) -> str:
        """Its ready line, waited for the first time (BusError if it does not start)."""
        if self.ready_line is None:
            self.ready_line = self._wait_ready(self.ready_timeout)
            if self.ahead:  # the last of the start's waits: its heartbeat ends
                from exo_rt import compile_workers

                compile_workers.HEARTBEAT.wait(None, 0.0)
        return self.ready_line

    def _wait_ready(self, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            line = self.proc.stdout.readline()
            if not line:
                break
            line = line.strip()
            if line == "ready" or line.startswith("serving"):
                return line
        code = self.proc.poll()
        self.stop()
        raise BusError(f"the {self.name} process did not start (exit code {code})", None,
                       "run it by hand to see why (exo-rt drives --help)")

    def alive(self) -> bool:
        """Whether it still runs: one ``poll`` on a pidfd (~2 µs; the control thread asks
        once a second) where Linux has them, else subprocess's own poll (~30 µs: a lock, a
        ``waitpid``); once it ended, reaped (its ``returncode`` set)."""
        if self._exited is not None and not self._exited.poll(0):
            return True
        return self.proc.poll() is None

    def send(self, line: str) -> None:
        """One command line on its standard input (lost if it has ended)."""
        if self.proc.stdin is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write(line + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass

    def stop(self, timeout: float = 10.0) -> int | None:
        """Ask it to end (SIGTERM) and wait; kill it after ``timeout``."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = self._exited = None
        return self.proc.returncode

    def wait(self, timeout: float) -> int | None:
        """Wait for it to end by itself; kill it after ``timeout``."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.stop(0.5)
