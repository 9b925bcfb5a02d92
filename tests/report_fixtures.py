"""Runs several report and figure tests read (tests/test_report_html.py, tests/test_figures.py),
each made once a test session: the clinic's scripted session on exo_2leg, run and reported
(``exo-rt run --session``, ``exo-rt report``), and a lockstep run sent SAFE by an injected
fault (``exo-rt run --inject``).

They are made in the background, in threads that wait on the CLI's processes, from the first
test of a module that reads one (tests/conftest.py moves the tests that read them to the end of
the session, so the module's other tests are drawn meanwhile); before a test of any other module
runs, they are waited for — no other module's test shares the CPUs with them. A test gets the
run folder itself, to read: one that writes into it works on a copy.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# a scripted session on exo_2leg, what it does known by construction: home, a first walk
# whose left leg's assistance is set to 0.6 after 1 stride, asked to stop 3 strides later
# (+ its closing step: 5 strides), a second walk at 0.5 m/s asked to stop after 2 strides
# (3 strides), a refused request (a speed beyond the profile), the end
SCRIPT = """
description: two walks with a level change, for the clinic's report
duration: 60.0
steps:
  - {request: start, motion: home, at: 0.0}
  - {request: confirm, after: rejected}
  - {request: start, motion: walk, after: finished}
  - {request: level, value: 0.6, legs: [left], after: strides 1}
  - {request: stop, after: strides 3}
  - {request: speed, value: 0.5, after: finished}
  - {request: speed, value: 9.0, after: accepted}
  - {request: start, motion: walk, after: rejected}
  - {request: stop, after: strides 2}
  - {request: end, after: finished}
"""
WALKS = [(0.4, 5), (0.5, 3)]  # (m/s, strides: those asked + the closing step)

FAULT = ["--config", "configs/exo_leg.yaml",  # the test stand, SAFE half a second in
         "--duration", "2", "--inject", "drop:knee@0.5+0.05"]


def _clinic_session(cli, base: Path):
    """SCRIPT run on exo_2leg into ``base/runs/r1``, then reported: (run folder, [the run's
    process, the report's — none if the run failed])."""
    script = base / "two_walks.yaml"
    script.write_text(SCRIPT)
    out = base / "runs" / "r1"
    run = cli(["run", "--config", "configs/exo_2leg.yaml", "--session", str(script),
               "--out", str(out)], 600)
    return out, [run, cli(["report", str(out)], 300) if run.returncode == 0 else None]


def _fault(cli, base: Path):
    """exo_leg's default session, lockstep, the knee's feedback dropped at 0.5 s: (run
    folder, [its process])."""
    out = base / "run"
    return out, [cli(["run", *FAULT, "--out", str(out)], 300)]


JOBS = {"clinic_session_run": _clinic_session, "fault_run": _fault}  # fixture: its maker


def reads(item) -> bool:
    """Whether a test reads one of the runs."""
    return any(name in getattr(item, "fixturenames", ()) for name in JOBS)


class SharedRuns:
    """The runs the session's tests read, made in the background."""

    def __init__(self, base: Path, items, hold=None) -> None:
        """``hold``: a context manager held while a run is made (tests/cpu_share.py: the
        other workers' exclusive tests wait for it), or None."""
        self.base = base
        self._hold = hold if hold is not None else contextlib.nullcontext
        self.wanted = [name for name in JOBS if any(name in getattr(it, "fixturenames", ())
                                                    for it in items)]
        self._threads: dict[str, threading.Thread] = {}
        self._results: dict[str, tuple] = {}
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._closed = False

    def _cli(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        """``python -m exo_rt ARGS`` in the repository, as subprocess.run(capture_output,
        text, timeout) would run it (killed at its timeout)."""
        argv = [sys.executable, "-m", "exo_rt", *args]
        with self._lock:
            if self._closed:
                raise RuntimeError("the test session ended before the run was made")
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            self._procs.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _make(self, name: str) -> None:
        folder = self.base / name
        folder.mkdir()
        try:
            with self._hold():
                self._results[name] = ("ok", JOBS[name](self._cli, folder))
        except BaseException as e:  # raised again in the test that reads it
            self._results[name] = ("error", e)

    def start(self, names=None) -> None:
        """Start making ``names`` (default: every run the session's tests read)."""
        for name in self.wanted if names is None else names:
            if name not in self._threads:
                t = threading.Thread(target=self._make, args=(name,), daemon=True,
                                     name=f"shared-run-{name}")
                self._threads[name] = t
                t.start()

    def get(self, name: str):
        """The run ``name`` (made now if not started): (run folder, its processes)."""
        self.start([name])
        self._threads[name].join()
        kind, value = self._results[name]
        if kind == "error":
            raise value
        return value

    def settle(self) -> None:
        """Wait for every run started."""
        for t in list(self._threads.values()):
            t.join()

    def close(self) -> None:
        """Kill what still runs (an interrupted session) and wait for the threads."""
        with self._lock:
            self._closed = True
            for p in self._procs:
                if p.poll() is None:
                    p.kill()
        self.settle()
