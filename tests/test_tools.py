"""The measuring tools the docs show for real time, run as a user runs them (short): what the
machine gives a real-time thread with a fixed job (tools/bench_machine.py --work-us), and
where the cycle's time goes (tools/bench_rt_parts.py, the one-call cycle's clock stamps)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(*args: str, timeout: float = 120.0) -> str:
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    return out.stdout


def test_bench_machine_times_a_fixed_job_of_the_size_asked():
    """--work-us 30: a job calibrated to ~30 µs back to back, timed after each wake; its p50
    is near that size (a loaded machine may stretch it, never shrink it much)."""
    text = _tool("tools/bench_machine.py", "--seconds", "0.5", "--work-us", "30")
    assert "wake latency p50" in text
    m = re.search(r"a fixed job \((\d+) loop turns\): p50 ([\d.]+)  p99 ([\d.]+)  "
                  r"p99.9 ([\d.]+)  max (\d+) µs; p99.9 / p50 ([\d.]+)", text)
    assert m, text
    p50, p99, p999 = (float(m[i]) for i in (2, 3, 4))
    assert 15.0 <= p50 <= 300.0 and p50 <= p99 <= p999 and int(m[1]) > 100
    # the deadlines it skipped, as the controller counts its overruns: a share of 500 cycles
    m = re.search(r"deadlines missed: (\d+) \(([\d.]+) % of the cycles", text)
    assert m, text
    assert float(m[2]) == pytest.approx(100.0 * int(m[1]) / 500, abs=1e-4)


@pytest.mark.slow
def test_bench_rt_parts_reads_the_one_call_cycles_clock_stamps():
    """A short real-time run through the one-call cycle: every part timed, each p50 positive
    and the parts' p50 together within the whole's."""
    text = _tool("tools/bench_rt_parts.py", "--duration", "1.5", timeout=300.0)
    assert "exit 0" in text
    p50 = {m[1].strip(): float(m[2]) for m in re.finditer(
        r"^  ([a-z ]+?)\s+p50\s+([\d.]+)\s+p99\s+([\d.]+)", text, re.M)}
    parts = ("board poll", "frames in", "cycle kernel", "commands out")
    assert set(parts) | {"board heartbeat", "whole", "rest"} <= set(p50), text
    assert all(p50[p] > 0.0 for p in parts), p50
    assert sum(p50[p] for p in parts) < p50["whole"], p50
