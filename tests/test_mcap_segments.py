"""A long run's MCAP in files of an hour of run time each (``run.mcap``, ``run-2.mcap`` …):
the Foxglove SDK's writer keeps a few hundred bytes for every chunk it closes (a chunk every
0.5 s: ~5 MiB an hour), a file an hour keeps the recording process's memory flat over an
8-hour session. ``EXO_RT_MCAP_SEGMENT_S`` shortens a file so that a 3.5 s run makes several:
each file a standard MCAP reader reads, together every record of the cycle log, and a crash
cuts only the last one, which recovery makes whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from exo_rt.record.mcap_log import read_activity, read_mcap, segments
from exo_rt.record.recorder import read_cycle_log

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("segments") / "run"
    env = dict(os.environ, EXO_RT_MCAP_SEGMENT_S="1.0")
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", "1", "--out",
                          str(out), "--config", "configs/exo_leg.yaml"],  # the test stand
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=env)
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.slow
def test_each_file_holds_its_stretch_and_together_the_whole_run(run):
    files = segments(run)
    records, _ = read_cycle_log(run / "cycles.exolog")
    t_end = float(records["t"][-1])
    assert [f.name for f in files] == ["run.mcap"] + [f"run-{k}.mcap"
                                                      for k in range(2, len(files) + 1)]
    assert len(files) == int(t_end) + 1  # 1 s each: 3.52 s of run → 4 files
    for k, f in enumerate(files):
        with open(f, "rb") as fh:
            reader = make_reader(fh)
            t = [json.loads(m.data)["t"] for _s, _c, m in
                 reader.iter_messages(topics=["/joints"])]
            meta = [r for r in reader.iter_metadata() if r.name == "exo-rt"]
        assert t and k <= min(t) and max(t) < k + 1  # its own second of run time
        assert meta and meta[-1].metadata["segment"] == str(k + 1)
    got, _ = read_mcap(run / "run.mcap")  # every file, in order: the cycle log's records
    assert len(got) == len(records)
    for name in ("t", "cycle", "q", "command", "gait_phase", "heels", "winding", "derate"):
        assert np.array_equal(got[name], records[name], equal_nan=True), name


@pytest.mark.slow
def test_a_crash_cuts_the_last_file_and_recovery_makes_it_whole(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("run.lock"))
    last = segments(copy)[-1]
    data = last.read_bytes()
    last.write_bytes(data[: len(data) * 2 // 3])  # power lost while it was written
    res = subprocess.run([sys.executable, "-m", "exo_rt", "recover", str(copy)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"recovered {last}: "), res.stdout
    for f in segments(copy):
        with open(f, "rb") as fh:
            assert sum(1 for _ in make_reader(fh).iter_messages()) > 0


@pytest.mark.slow
@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_live_run_s_unfinished_file_is_one_clear_error(run, tmp_path, monkeypatch, cut):
    """A reader of a run still being written (its folder held by the live run: no recovery) —
    its cycles or its session's events — meets the file's last record unfinished (the MCAP
    library's McapError) and gets one LogError that names the file and says it is not
    finished, not the library's traceback."""
    from exo_rt.errors import LogError
    from exo_rt.record import runfolder

    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("run.lock"))
    first = segments(copy)[0]
    data = first.read_bytes()
    first.write_bytes(data[: int(len(data) * cut)])
    monkeypatch.setattr(runfolder, "in_use", lambda _path: True)  # (a live run holds it)
    for read in (read_mcap, read_activity):
        with pytest.raises(LogError) as err:
            read(copy / "run.mcap")
        msg = str(err.value)
        assert str(first) in msg and "not finished" in msg and "\n" not in msg, msg
