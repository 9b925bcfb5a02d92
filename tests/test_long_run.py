"""A run's memory does not grow with its length (an 8-hour run takes what a 10-minute one does).

The control process keeps its timing statistics as fixed-size histograms
(:class:`exo_rt.runtime.loop.Histogram`) and its in-memory records (``Controller.log``) for the
run's first ``HISTORY_S`` s only; the recording process streams to disk. Measured here on real
``exo-rt run`` processes: the peak resident memory of the control and recording processes for
a 70-s and a 140-s lockstep run (both past the kept minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from exo_rt.runtime.loop import Histogram, Scheduler, TimingStats

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "exo_leg.yaml"
BOUTS = ROOT / "tests" / "data" / "bouts_session.yaml"


# ---------------------------------------------------------------- timing as histograms
@pytest.mark.parametrize("name, values", [
    ("compute, lockstep", np.random.default_rng(1).lognormal(np.log(60.0), 0.3, 50_000)),
    ("period, real time", 1000.0 + np.random.default_rng(2).normal(0.0, 5.0, 50_000)),
    ("stalls", np.r_[np.random.default_rng(3).exponential(30.0, 5_000), 2.5e4, 7e5, 3e6]),
    ("a few", np.array([3.0, 900.0, 17.25])),
])
def test_histogram_percentiles_within_half_a_bucket_of_numpys(name, values):
    """p50/p99/p999 within half a bucket (1/2 × 1/8192 of the value) of numpy.percentile's
    figure on every value, max exact: the summary's figures hold to their 0.1 µs."""
    h = Histogram()
    for v in values.tolist():
        h.add(v)
    for p in (0.0, 50.0, 99.0, 99.9, 100.0):
        exact = float(np.percentile(values, p))
        assert h.percentile(p) == pytest.approx(exact, rel=0.5 / Histogram.SUB, abs=1e-9), p
    s = h.summary()
    assert s["max"] == float(values.max())
    assert abs(s["p99"] - np.percentile(values, 99)) < 0.1


def test_zero_latency_and_no_values_are_exact():
    h = Histogram()
    assert h.summary() == {"p50": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
    for _ in range(1000):
        h.add(0.0)  # a lockstep run's wake latency
    assert h.summary() == {"p50": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}


def test_timing_statistics_and_missed_deadlines_do_not_grow_with_the_run():
    """A million cycles cost the memory one does; the first period is not counted (it has no
    cycle before it); the missed deadlines' indices kept are the first ``capacity``, their
    count whole."""
    stats = TimingStats()
    sizes = sum(h.counts.nbytes for h in (stats.wake, stats.compute, stats.period))
    for k in range(1_000):
        stats.add(0.0, 50.0 + k % 7, 1000.0)
    stats.count()  # the last block's cycles into the histograms (summary() does it too)
    assert stats.n == 1_000 and stats.period.n == 999 and stats.last_compute_us == 55.0
    assert sum(h.counts.nbytes for h in (stats.wake, stats.compute, stats.period)) == sizes
    assert sizes < 3 << 20

    class Clock:  # moves only when the loop sleeps, computes or reads it (so spinning ends)
        t = 0.0

        def __call__(self):
            self.t += 1e-7
            return self.t

    clock = Clock()

    def cycle(_k):  # every cycle overruns: 2.5 periods
        clock.t += 2.5e-3
        return True

    s = Scheduler(1e-3, clock=clock, sleep=lambda dt: setattr(clock, "t", clock.t + dt),
                  capacity=10)
    s.run(cycle, max_cycles=500)
    assert len(s.deadlines_missed) == 10 and s.stats.overruns == 500 * 2


# ---------------------------------------------------------------- whole processes
def _peak_rss(duration: float, out: Path) -> dict[str, float]:
    """Peak resident memory (MiB) of the control process (the kernel's own figure, from
    wait4) and of the recording process (its VmHWM, read every 50 ms until it ends) for an
    ``exo-rt run --duration`` in lockstep, walking in bouts (tests/data/bouts_session.yaml:
    a continuous walk of the simulated leg would derate its hip motor within a minute), its
    steps up to ``duration`` and END then (the file's own, never in a test, would leave the
    run its 30 s of spare after ``--duration``)."""
    script = yaml.safe_load(BOUTS.read_text())
    script["steps"] = [st for st in script["steps"] if st.get("at", 0.0) < duration]
    script["steps"].append({"request": "end", "at": duration})
    session = out.with_name(out.name + "_session.yaml")
    session.write_text(yaml.safe_dump(script))
    proc = subprocess.Popen([sys.executable, "-m", "exo_rt", "run", "--config", str(CONFIG),
                             "--session", str(session), "--duration", str(duration),
                             "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    writer = {"hwm": 0.0}

    def watch():
        while True:
            try:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                return
            for pid in kids:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if b"exo_rt.record.writer" not in f.read():
                            continue
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("VmHWM:"):
                                writer["hwm"] = max(writer["hwm"], int(line.split()[1]) / 1024)
                except OSError:
                    pass
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read()
    proc.stderr.close()
    t.join(5)
    assert proc.returncode == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["session_ended_by"] is None, summary  # its own END, at rest
    return {"control": usage.ru_maxrss / 1024, "recording": writer["hwm"]}


@pytest.mark.slow(reason="two lockstep runs, 62 s and 100 s of RUN")
def test_peak_memory_of_every_process_is_flat_in_the_runs_length(tmp_path):
    """One walking bout and two (62 s and 100 s, each ended at rest by its own END; both past
    the controller's in-memory history, its first minute), the same peak memory: the control
    process within 2 MiB (it grew by ~214 B a cycle — the in-memory history and three timing
    arrays — 8 MiB over the 38 000 cycles between these runs before), the recording process
    within 10 % (it streams to disk; what it holds at once is bounded by the rings it
    drains)."""
    short = _peak_rss(62.0, tmp_path / "short")
    long = _peak_rss(100.0, tmp_path / "long")
    assert long["control"] - short["control"] < 2.0, (short, long)
    assert 0 < long["recording"] < 1.1 * short["recording"], (short, long)


def test_the_writer_takes_bounded_batches_and_catches_up():
    """A writer that fell behind takes at most FRAMES_PER_DRAIN frames a drain (its memory is
    bounded by that, not by how far behind it fell) and drains again until the ring is
    empty: every frame is taken once, in order."""
    from exo_rt.record.rings import FrameRing
    from exo_rt.record.writer import FRAMES_PER_DRAIN

    ring = FrameRing(4 * FRAMES_PER_DRAIN)
    try:
        n = 3 * FRAMES_PER_DRAIN + 5
        for i in range(n):
            ring.put(float(i), i % 0x7FF, bytes([i % 256]), rx=True)
        sizes, seen = [], []
        while batch := ring.take(FRAMES_PER_DRAIN):
            sizes.append(len(batch))
            seen.extend(f[0] for f in batch)
        assert sizes == [FRAMES_PER_DRAIN] * 3 + [5]
        assert seen == [float(i) for i in range(n)]
    finally:
        ring.release()
