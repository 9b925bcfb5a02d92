"""Replay of a lab's archive as one batch (docs/scale.md): a generated archive of 10 short
runs and 3 broken ones, on local processes and on Ray; broken sessions reported and not fatal;
a batch killed halfway resumes and replays only the sessions it had not finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from exo_rt.batch.archive import BROKEN, make_archive, rms_of
from exo_rt.batch.engine import no_usage_stats, ray_module
from exo_rt.batch.replay import CACHE, run_batch

N_GOOD = 10  # enough for two processes, a kill halfway and a resume
N_ALL = N_GOOD + len(BROKEN)
CAUSES = {"w2/day1/run_truncated": "header", "w2/day1/run_bad_header": "bad magic",
          "w2/day2/run_missing": "no cycle log"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    make_archive(root, N_GOOD)
    return root / "archive"


@pytest.fixture(scope="module")
def local_table(archive, tmp_path_factory):
    """The archive replayed in plant mode by the command line, 2 local processes."""
    out = tmp_path_factory.mktemp("local")
    res = subprocess.run([sys.executable, "-m", "exo_rt", "replay", str(archive), "--mode",
                          "plant", "--jobs", "2", "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    return out, res


@pytest.fixture(scope="module")
def ray_session():
    ray = ray_module()
    if ray is None:
        pytest.skip("ray is not installed: pip install -e '.[cluster]' (CI installs it)")
    no_usage_stats()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _json(out: Path) -> dict:
    return json.loads((out / "replay-summary.json").read_text())


@pytest.mark.slow
def test_broken_sessions_are_reported_and_the_others_replayed(local_table):
    out, res = local_table
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    for name, cause in CAUSES.items():  # each broken run named with its cause, on stderr
        line = next(x for x in res.stderr.splitlines() if f"session {name}:" in x)
        assert cause in line
    doc = _json(out)
    assert doc["counts"] == {"sessions": N_ALL, "ok": N_GOOD, "failed": len(BROKEN)}
    failed = {s["session"]: s["error"] for s in doc["sessions"] if s["status"] == "failed"}
    assert set(failed) == set(BROKEN)
    # the plant replay of a run recorded on the lockstep simulated bus reproduces it
    rms = rms_of(doc)
    assert len(rms) == 2 * N_GOOD and np.all(rms < 1e-6)
    lines = (out / "replay-summary.csv").read_text().splitlines()
    assert lines[0].startswith("session,status,joint,rms_error_deg,max_error_deg")
    assert len(lines) == 1 + 2 * N_GOOD + len(BROKEN)
    cycles = [s["result"]["cycles"] for s in doc["sessions"] if s["status"] == "ok"]
    # 0.3–0.5 s walks in sessions: homing (≥ 1 s), the closing step (from the next half-
    # stride boundary, half a stride), the stop
    assert min(cycles) >= 3000 and max(cycles) <= 4000
    png = (out / "replay-summary.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert f"{N_ALL} sessions ({N_ALL} replayed, 0 from the cache)" in res.stdout


@pytest.mark.slow
def test_ray_engine_gives_the_identical_table(archive, local_table, ray_session, tmp_path):
    out_local, _ = local_table
    b = run_batch([archive], "plant", engine="ray", out=tmp_path, status=False)
    assert len(b.computed) == N_ALL and len(b.failed) == len(BROKEN)
    assert ((tmp_path / "replay-summary.csv").read_text()
            == (out_local / "replay-summary.csv").read_text())
    assert _json(tmp_path)["sessions"] == _json(out_local)["sessions"]


@pytest.mark.slow
def test_a_sweep_on_ray_equals_the_local_one(ray_session):
    from exo_rt.batch.sweep import run_sweep

    grid = "kp=1/1.5"
    local = run_sweep("computed_torque", grid, model_errors=(1.0,), cycles=0.25, status=False)
    ray = run_sweep("computed_torque", grid, model_errors=(1.0,), cycles=0.25, engine="ray",
                    status=False)
    assert [p["rms_worst_deg"] for p in ray.points] == [p["rms_worst_deg"] for p in local.points]
    assert all(0.0 < p["rms_worst_deg"] < 1.0 for p in local.points)


@pytest.mark.slow
def test_a_killed_batch_resumes_with_only_the_missing_sessions(archive, local_table, tmp_path):
    out_local, _ = local_table
    out = tmp_path / "out"
    cache = out / CACHE
    proc = subprocess.Popen([sys.executable, "-m", "exo_rt", "replay", str(archive), "--mode",
                             "plant", "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if cache.exists() and len(list(cache.glob("*.json"))) >= N_ALL // 2:
                break
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # halfway: a real kill, no clean-up
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the batch ended before it was killed"
    done = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in cache.glob("*.json")}
    assert N_ALL // 2 <= len(done) < N_ALL and not (out / "replay-summary.csv").exists()
    b = run_batch([archive], "plant", out=out, status=False)
    assert len(b.cached) == len(done) and len(b.computed) == N_ALL - len(done)
    assert not set(b.cached) & set(b.computed)
    for p, (mtime, raw) in done.items():  # the finished sessions' results untouched
        assert p.stat().st_mtime_ns == mtime and p.read_bytes() == raw
    assert len(list(cache.glob("*.json"))) == N_ALL
    assert ((out / "replay-summary.csv").read_text()
            == (out_local / "replay-summary.csv").read_text())
    again = run_batch([archive], "plant", out=out, status=False)  # nothing left to do
    assert len(again.cached) == N_ALL and again.computed == []


@pytest.mark.slow
def test_a_changed_controller_is_replayed_again(archive, tmp_path):
    """The cache key holds the controller: a --controller replay is not the plain one's."""
    runs = [archive / "w0/day0/run00", archive / "w1/day1/run01"]
    a = run_batch(runs, "controller", out=tmp_path, status=False)
    pid = str(Path(__file__).resolve().parents[1] / "configs" / "controllers" / "pid.yaml")
    b = run_batch(runs, "controller", controller=pid, out=tmp_path, status=False)
    assert len(a.computed) == 2 and len(b.computed) == 2 and b.cached == []
    assert all(r["result"]["max_abs_command_diff_A"] == 0.0 for r in a.results)
    assert all(r["result"]["max_abs_command_diff_A"] > 0.1 for r in b.results), b.failed


@pytest.mark.slow
def test_engine_ray_without_ray_is_one_clear_error(archive):
    code = ("import sys; sys.modules['ray'] = None; from exo_rt.cli import main; "
            f"sys.exit(main(['replay', {str(archive)!r}, '--mode', 'plant', '--engine', 'ray']))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "needs the ray package" in res.stderr and "pip install 'exo-rt[cluster]'" in res.stderr
