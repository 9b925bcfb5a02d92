"""The first run's wait says it is alive: while a compile is awaited a line comes at least
every 2 s (exo_rt/compile_workers.py's heartbeat), naming what is compiled and for how long,
and nothing more once nothing is awaited."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exo_rt import compile_workers

# alone on the CPUs (tests/cpu_share.py): a cold run's silences on the wall clock
pytestmark = pytest.mark.exclusive

ROOT = Path(__file__).resolve().parents[1]
PROMISE_S = 2.0  # s: the longest silence while the first run waits


class Lines:
    """A text stream that keeps each line with the monotonic time it was written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> None:
        self.lines += [(time.monotonic(), x) for x in text.splitlines()]

    def flush(self) -> None:
        pass


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


@pytest.mark.slow
def test_a_slow_entry_gets_a_heartbeat_and_an_idle_pool_none(monkeypatch):
    """Two entries of 2.5 s in one process: heartbeat lines name the entry and its elapsed
    seconds, no gap reaches 2 s; after the summary, silence."""
    def slow(name: str) -> dict:
        time.sleep(2.5)
        return {"name": name, "s": 2.5, "compiled": ["k"], "error": None}

    out = Lines()
    t0 = time.monotonic()
    compile_workers.pool(["first", "second"], slow, {}, 1, out)
    time.sleep(1.5 * compile_workers.HEARTBEAT_S)
    times, text = [t0] + [t for t, _ in out.lines], [x for _, x in out.lines]
    assert max(_gaps(times)) < PROMISE_S, out.lines
    beats = [x for x in text if x.startswith("  … ")]
    assert len(beats) >= 2 * int(2.5 / compile_workers.HEARTBEAT_S) - 2, text
    assert re.fullmatch(r"  … compiling first  \[ +\d+\.\d s\]", beats[0]), beats
    assert any(x.startswith("  … compiling second") for x in beats), beats
    assert text[-1].startswith("numba: warm-up done in "), text  # nothing after it


# ``exo-rt run`` with every line stamped when the process writes it (not when a reader on a
# loaded machine gets to it), and when it started (exo_rt.STARTED: READY's origin)
STAMPED_RUN = """
import sys, threading, time

class Stamped:
    def __init__(self, stream):
        self.stream, self.buf, self.lock = stream, "", threading.Lock()

    def write(self, text):
        with self.lock:
            self.buf += text
            while "\\n" in self.buf:
                line, self.buf = self.buf.split("\\n", 1)
                self.stream.write(f"{time.monotonic():.3f} {line}\\n")
                self.stream.flush()
        return len(text)

    def flush(self):
        pass

    def __getattr__(self, name):
        return getattr(self.stream, name)

sys.stdout = sys.stderr = Stamped(sys.__stdout__)
import exo_rt
sys.__stdout__.write(f"{exo_rt.STARTED} STARTED\\n")
from exo_rt.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_cold_first_run_is_never_silent_for_2_s(tmp_path):
    """``exo-rt run`` on an empty numba cache: from its first line to READY no two lines are
    2 s apart, and the compile's heartbeat says what it compiles."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), EXO_RT_WARMUP="1")
    res = subprocess.run([sys.executable, "-c", STAMPED_RUN, "run", "--duration", "0.1",
                          "--out", str(tmp_path / "run"), "--no-rt-setup"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    lines = [(float(t), x) for t, x in (y.split(" ", 1) for y in res.stdout.splitlines())]
    started = next(t for t, x in lines if x == "STARTED")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    ready = started + summary["startup_s"]["process_to_ready"]  # (the recording says READY)
    wait = [(t, x) for t, x in lines if x != "STARTED" and t <= ready] + [(ready, "READY")]
    gaps = _gaps([t for t, _ in wait])
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[worst] < PROMISE_S, f"{gaps[worst]:.2f} s of silence after {wait[worst][1]!r}"
    assert any(x.startswith("  … compiling cycle") for _, x in wait), [x for _, x in wait]
