"""Run folders never lose data (docs/replay.md, "What a run folder guarantees"): ``--out`` on a
folder of other files is refused with every file untouched; a run that did not finish is kept
(moved aside) by the next run into its folder; ``events.jsonl`` is appended as the events
happen, so that controller replay of a run killed mid-session agrees bit for bit over what was
recorded; a cut or damaged ``events.jsonl`` is named with its line; no command writes through
a symlink planted in a run folder; a deleted snapshot with the run's own configs copy present
is named.

One lockstep session (``--duration 2``, a speed request every 0.1 s of its walk) is recorded
for the module; each test damages or edits copies of it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_run_folder import _descendants, _wait_records

from exo_rt.errors import LogError
from exo_rt.record import events as ev_file
from exo_rt.record import runfolder
from exo_rt.record.recorder import read_cycle_log

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, "-m", "exo_rt", "run", "--config",  # the test stand: a short run
       str(ROOT / "configs" / "exo_leg.yaml")]
HAND_OVER = round(ev_file.HAND_OVER_S * 1000)  # cycles between two marks at 1 kHz


def _exo_rt(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exo_rt", *map(str, args)], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=300)


def _session(path: Path, walk_s: float) -> Path:
    """A session script: home, walk, a speed request every 0.1 s from 2 s for ``walk_s`` s
    (alternately 0.4 and 0.5 m/s), stop, end."""
    steps = [{"request": "start", "motion": "home", "at": 0.0},
             {"request": "confirm", "after": "rejected"},
             {"request": "start", "motion": "walk", "after": "finished"}]
    steps += [{"request": "speed", "value": (0.4, 0.5)[i % 2], "at": round(2.0 + 0.1 * i, 3)}
              for i in range(round(walk_s / 0.1))]
    steps += [{"request": "stop", "at": round(2.0 + walk_s, 3)},
              {"request": "end", "after": "finished"}]
    path.write_text(yaml.safe_dump({"description": "speed requests", "steps": steps}))
    return path


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links as links): relative path → SHA-256 of its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished lockstep session's run folder (its speed requests every 0.1 s)."""
    root = tmp_path_factory.mktemp("safety")
    out = root / "run"
    res = subprocess.run([*RUN, "--duration", "2", "--session", _session(root / "s.yaml", 1.0),
                          "--out", out], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return out


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, symlinks=True)
    return to


# ----------------------------------------------------------------------------- --out
@pytest.mark.hazard("H-OUT-FOLDER")
def test_out_on_a_folder_of_other_files_is_refused_untouched(tmp_path):
    """A fresh clone's root (configs/, README.md, a source file): exit 2, one line, no file
    touched, no lock left."""
    clone = tmp_path / "clone"
    (clone / "configs" / "robots").mkdir(parents=True)
    (clone / "configs" / "robots" / "leg.yaml").write_text("name: leg\n")
    (clone / "configs" / "exo_leg.yaml").write_text("robot: robots/leg.yaml\n")
    (clone / "README.md").write_text("# a project\n")
    (clone / "setup.py").write_text("print('hi')\n")
    before = _tree(clone)
    res = _exo_rt("run", "--duration", "0.5", "--out", clone)
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "not a run folder" in res.stderr and "Traceback" not in res.stderr
    assert _tree(clone) == before
    assert not (clone / "run.lock").exists()


@pytest.mark.hazard("H-OUT-FOLDER")
def test_an_empty_folder_and_a_finished_runs_folder_are_taken(tmp_path):
    """What --out still takes: an empty folder, and a finished run's (its files replaced when
    the new run starts, as documented; a file of the user's there is kept)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    runfolder.claim(empty).release()
    done = tmp_path / "done"
    done.mkdir()
    for name in ("summary.json", "cycles.exolog", "events.jsonl", "notes.txt"):
        (done / name).write_text("earlier")
    held = runfolder.claim(done)
    held.take_over()
    held.release()
    assert sorted(p.name for p in done.iterdir()) == ["notes.txt", "run.lock"]


# ----------------------------------------------------------------------------- crashed runs
def _crashed(path: Path) -> Path:
    """A run folder as a kill leaves it: cycle log, run.mcap, events, snapshot, lock; no
    summary."""
    (path / "configs").mkdir(parents=True)
    (path / "configs" / "leg.yaml").write_text("name: leg\n")
    for name in ("cycles.exolog", "run.mcap", "can.blf"):
        (path / name).write_bytes(os.urandom(4096))
    (path / "events.jsonl").write_text('{"cycle": 0, "event": "state"}\n{"cyc')
    (path / "config-snapshot.json").write_text("{}")
    (path / "run.lock").write_text(json.dumps({"pid": 1, "host": "h",
                                               "started": 1_800_000_000.0}))
    return path


@pytest.mark.hazard("H-CRASHED-RUN")
def test_a_crashed_runs_folder_is_moved_aside_whole(tmp_path, capsys):
    run = _crashed(tmp_path / "r")
    before = _tree(run)
    held = runfolder.claim(run)
    held.release()
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("r" + runfolder.CRASHED)]
    assert len(moved) == 1 and _tree(moved[0]) == before
    assert sorted(p.name for p in run.iterdir()) == ["run.lock"]  # the new run's, fresh
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not finish" in err[0] and str(moved[0]) in err[0]


@pytest.mark.hazard("H-CRASHED-RUN")
def test_a_crashed_run_that_cannot_be_moved_is_refused(tmp_path, monkeypatch):
    """The current folder cannot be moved aside: refused, one sentence, the run kept."""
    run = _crashed(tmp_path / "r")
    before = _tree(run)
    monkeypatch.chdir(run)
    with pytest.raises(runfolder.CrashedRun, match="did not finish.*cannot be moved aside"):
        runfolder.claim(Path("."))
    assert _tree(run) == before


# ----------------------------------------------------------------------------- events.jsonl
def _replay(run: Path, mode: str = "controller") -> subprocess.CompletedProcess:
    return _exo_rt("replay", run, "--mode", mode)


@pytest.mark.slow
@pytest.mark.hazard("H-EVENTS-LOST")
def test_a_finished_runs_events_are_whole_and_counted(finished):
    events = _lines(finished / "events.jsonl")
    summary = json.loads((finished / "summary.json").read_text())
    assert summary["recording"]["events"] == len(events)
    assert not any(e["event"] == ev_file.MARK for e in events)  # rewritten whole at the end
    assert sum(e["event"] == "request" and e["request"] == "speed" for e in events) == 10


@pytest.mark.slow
@pytest.mark.hazard("H-EVENTS-LOST")
def test_a_cut_or_damaged_events_file_is_named_with_its_line(finished, tmp_path):
    run = _copy(finished, tmp_path / "cut")
    raw = (run / "events.jsonl").read_bytes()
    lines = raw.split(b"\n")
    # cut in the middle of line 9
    (run / "events.jsonl").write_bytes(b"\n".join(lines[:8]) + b"\n" + lines[8][:20])
    res = _replay(run)
    assert res.returncode == 2 and "inf" not in res.stdout + res.stderr
    assert f"{run / 'events.jsonl'}:9: damaged events: line 9 is cut short" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    # cut at a line's end: fewer lines than the summary says
    (run / "events.jsonl").write_bytes(b"\n".join(lines[:8]) + b"\n")
    res = _replay(run)
    assert res.returncode == 2 and "holds 8 lines, the run's summary says" in res.stderr
    # a line damaged in the middle: not UTF-8
    bad = list(lines)
    bad[5] = bad[5][:10] + b"\xff\xfe" + bad[5][12:]
    (run / "events.jsonl").write_bytes(b"\n".join(bad))
    res = _replay(run)
    assert res.returncode == 2 and "events.jsonl:6: damaged events: line 6 is not UTF-8" \
        in res.stderr


def _events_file(tmp_path: Path, data: bytes) -> Path:
    run = tmp_path / "ev"
    run.mkdir(exist_ok=True)
    (run / "events.jsonl").write_bytes(data)
    return run


@pytest.mark.hazard("H-EVENTS-LOST")
@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(
        st.dictionaries(st.sampled_from(["event", "request", "cycle", "motion", "value", "legs",
                                         "t", "source"]),
                        st.recursive(st.none() | st.booleans() | st.integers()
                                     | st.floats() | st.text(max_size=8),
                                     lambda c: st.lists(c, max_size=3)
                                     | st.dictionaries(st.text(max_size=3), c, max_size=3),
                                     max_leaves=6), max_size=6),
        st.fixed_dictionaries({"event": st.just("request"),
                               "request": st.sampled_from(["start", "speed", "go", "xx"]),
                               "cycle": st.integers(-2, 10**6) | st.floats()}),
    ), max_size=6).map(lambda evs: "".join(json.dumps(e) + "\n" for e in evs).encode())),
    done=st.booleans(), cut=st.integers(0, 50))
@pytest.mark.slow
def test_damaged_events_give_one_error_never_a_raw_exception(tmp_path, data, done, cut):
    """Fuzzed events.jsonl (bytes, or JSON lines of the wrong kinds, cut anywhere): the loader
    returns the requests or raises LogError naming the file — never TypeError, KeyError,
    UnicodeDecodeError …"""
    data = data[: max(0, len(data) - cut)]
    run = _events_file(tmp_path, data)
    try:
        got = ev_file.load(run, done)
    except LogError as err:
        assert str(run / "events.jsonl") in str(err) and "\n" not in str(err)
        return
    for r in got.requests:
        assert isinstance(r["cycle"], int) and r["cycle"] >= 0


@pytest.mark.hazard("H-EVENTS-LOST")
def test_a_cut_last_line_of_an_unfinished_run_is_left_out_and_said(tmp_path):
    run = _events_file(tmp_path, b'{"cycle": 30, "event": "request", "request": "stop"}\n'
                                 b'{"cycle": 250, "t": 0.25, "event": "events_complete"}\n'
                                 b'{"cycle": 260, "event": "requ')
    got = ev_file.load(run, False)
    assert got.complete_through == 250 and [r["cycle"] for r in got.requests] == [30]
    assert got.notes == [f"{run / 'events.jsonl'}:3: the last line was cut by the crash "
                         "(29 bytes), left out"]
    with pytest.raises(LogError, match=r"events.jsonl:3: damaged events: line 3 is cut short"):
        ev_file.load(run, True)


@pytest.mark.slow
@pytest.mark.hazard("H-EVENTS-LOST")
@pytest.mark.hazard("H-CRASHED-RUN")
def test_a_power_loss_keeps_the_events_and_replays_bit_for_bit(finished, tmp_path):
    """Every process of a session killed at once (SIGKILL), three times at different
    instants, a speed request every 0.1 s: events.jsonl holds every request of the cycles up
    to its last mark, which is at most HAND_OVER cycles before the last recorded cycle (so
    every request made 0.5 s before it); controller replay of the cut run agrees bit for bit
    over the cycles it can compare (exit 0). The next run into the first folder moves the cut
    run aside, byte for byte."""
    script = _session(tmp_path / "s.yaml", 5.0)
    reference = None
    for i, records in enumerate((2600, 3900, 5300)):
        out = tmp_path / f"r{i}"
        proc = subprocess.Popen([*RUN, "--duration", "8", "--session", script, "--out", out],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        _wait_records(out, records, proc)
        for pid in reversed(_descendants(proc.pid)):
            os.kill(pid, signal.SIGKILL)
        proc.wait()
        assert not (out / "summary.json").exists()
        recs, _ = read_cycle_log(out / "cycles.exolog")
        last = int(recs["cycle"][-1])
        got = ev_file.load(out, False)
        through = got.complete_through
        assert 0 <= last - through <= HAND_OVER, (last, through)
        if reference is None:  # the same session, uninterrupted (lockstep: deterministic)
            ref = tmp_path / "whole"
            res = subprocess.run([*RUN, "--duration", "8", "--session", script, "--out", ref],
                                 cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, res.stderr
            reference = [e for e in _lines(ref / "events.jsonl") if e["event"] == "request"]
        kept = [e for e in reference if e["cycle"] <= through]
        assert got.requests[: len(kept)] == kept  # every request up to the mark, as made
        assert [e for e in reference if e["cycle"] <= last - 500] == \
            [e for e in got.requests if e["cycle"] <= last - 500]  # 0.5 s before the last
        print(f"kill {i + 1}: {len(recs)} records (t = {recs['t'][-1]:.3f} s), last mark at "
              f"cycle {through} ({last - through} cycles before), {len(got.requests)} of the "
              f"{sum(e['cycle'] <= last for e in reference)} requests made up to the last "
              "record")
        if i == 0:  # the next run into this folder keeps the cut one
            before = _tree(out)
            res = subprocess.run([*RUN, "--duration", "0.2", "--out", out], cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, res.stderr
            moved = [p for p in tmp_path.iterdir() if p.name.startswith("r0.crashed-")]
            assert len(moved) == 1 and _tree(moved[0]) == before
            assert sum("did not finish" in ln for ln in res.stderr.splitlines()) == 1
            assert (out / "summary.json").exists()
            out = moved[0]
        res = _replay(out)
        assert res.returncode == 0, res.stderr
        result = json.loads((out / "replay-controller.json").read_text())
        assert result["cycles"] == min(len(recs), through + 2)
        assert result["max_abs_command_diff_A"] == 0.0 and result["first_diff_cycle"] is None
        assert "largest command difference 0 A" in res.stdout
        assert f"compared over its first {result['cycles']} of {len(recs)}" in res.stderr \
            or result["cycles"] == len(recs)


@pytest.mark.slow
@pytest.mark.hazard("H-EVENTS-LOST")
def test_a_cut_run_without_marks_is_an_error_not_inf(finished, tmp_path):
    """A run that did not finish and whose events.jsonl holds no mark (killed before the first
    hand-over, or recorded before marks): no comparison can be made — exit 2, never inf."""
    run = _copy(finished, tmp_path / "nomark")
    (run / "summary.json").unlink()
    events = [e for e in _lines(run / "events.jsonl") if e["event"] != ev_file.MARK]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    res = _replay(run)
    assert res.returncode == 2 and "inf" not in res.stdout
    assert "holds no mark of the events it had" in res.stderr and "--mode plant" in res.stderr


# ----------------------------------------------------------------------------- symlinks
@pytest.mark.slow
@pytest.mark.hazard("H-SYMLINK-WRITE")
def test_no_command_writes_through_a_symlink_in_a_run_folder(finished, tmp_path):
    """cycles.csv, report.txt, a plot and replay-plant.json planted as links to files outside
    the folder: export --csv, report and replay replace the links; the targets keep their
    bytes."""
    run = _copy(finished, tmp_path / "linked")
    outside = tmp_path / "outside"
    outside.mkdir()
    names = ("cycles.csv", "report.txt", "tracking.png", "replay-plant.json")
    for name in names:
        (outside / name).write_text("precious\n")
        (run / name).symlink_to(outside / name)
    for args in (("export", run, "--csv"), ("report", run), ("replay", run, "--mode", "plant")):
        res = _exo_rt(*args)
        assert res.returncode == 0, res.stderr
    for name in names:
        assert (outside / name).read_text() == "precious\n"
        assert not (run / name).is_symlink() and (run / name).stat().st_size > 0
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


# ----------------------------------------------------------------------------- the snapshot
@pytest.mark.slow
def test_a_deleted_snapshot_with_the_configs_copy_there_is_named(finished, tmp_path):
    run = _copy(finished, tmp_path / "nosnap")
    (run / "config-snapshot.json").unlink()
    res = _replay(run, "plant")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "config-snapshot.json is missing, but the run's own copy" in res.stderr
    assert f"--config {run / 'config.yaml'} --allow-config-change" in res.stderr
    res = _exo_rt("replay", run, "--mode", "plant", "--config", run / "config.yaml",
                  "--allow-config-change")
    assert res.returncode == 0, res.stderr
