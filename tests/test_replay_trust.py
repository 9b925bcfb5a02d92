"""Records you can trust (docs/replay.md): a run keeps its own copy of every config file and
replay uses it; a config given to replay that differs is refused or its difference stated;
damaged logs are named, never replayed as good; a run that did not finish is reported as
such; numeric options and oversized config files are refused in one line.

One short lockstep run (``exo-rt run --duration 1``) is recorded for the module from a copy
of the shipped configs; each test damages or edits copies of it."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from exo_rt.cli import main
from exo_rt.errors import ConfigError
from exo_rt.record.recorder import read_cycle_log

ROOT = Path(__file__).resolve().parents[1]
MODULE = Path("robots") / "modules" / "exo_leg_module.yaml"


def _exo_rt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exo_rt", *map(str, args)], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(run folder, its configs folder): a 1 s run of the default leg from a copy of the
    shipped configs, and its summary."""
    root = tmp_path_factory.mktemp("trust")
    configs = root / "configs"
    shutil.copytree(ROOT / "configs", configs)
    run = root / "run"
    res = _exo_rt("run", "--config", configs / "exo_leg.yaml", "--duration", "1", "--out", run)
    assert res.returncode == 0, res.stderr
    return run, configs


def _copy(run: Path, dst: Path) -> Path:
    """A copy of the run folder as recorded (without what replay and report wrote)."""
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns("replay-*.json", "replay-*.mcap",
                                                            "report.txt", "*.png"))
    return dst


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- the snapshot
@pytest.mark.slow
def test_a_run_keeps_its_configs_and_runs_again_from_them(recorded, tmp_path):
    run, configs = recorded
    doc = json.loads((run / "config-snapshot.json").read_text())
    kinds = sorted(f["kind"] for f in doc["files"])
    assert kinds == ["activities", "buses", "controller", "eds", "module", "robot", "session",
                     "top", "wearer"]
    for f in doc["files"]:  # each a copy inside the run folder, byte for byte
        copy = run / f["copy"]
        assert copy.resolve().is_relative_to(run.resolve())
        if f["kind"] == "wearer":  # the robot file's wearer: its profile written out
            assert "(its wearer, default profile)" in f["original"]
        elif f["kind"] != "top":
            assert copy.read_bytes() == Path(f["original"]).read_bytes()
    assert "robot: \"configs/robots/exo_leg.yaml\"" in (run / "config.yaml").read_text()
    # the snapshot alone reproduces the run: its configs folder is gone meanwhile
    moved = tmp_path / "moved"
    _copy(run, moved)
    again = tmp_path / "again"
    res = _exo_rt("run", "--config", moved / "config.yaml", "--duration", "1", "--out", again,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    a = json.loads((run / "summary.json").read_text())
    b = json.loads((again / "summary.json").read_text())
    assert (a["cycles"], a["final_state"]) == (b["cycles"], b["final_state"])
    for name, ja in a["joints"].items():
        for key, value in ja.items():
            assert abs(value - b["joints"][name][key]) <= 1e-9, (name, key)


PATH_FIELDS = {"path", "robot_path", "buses_path", "source", "sha256", "eds", "file"}


def _loaded(obj):
    """What a loaded config is, as plain data, without where its files are."""
    if isinstance(obj, dict):
        return {k: _loaded(v) for k, v in obj.items() if k not in PATH_FIELDS}
    if isinstance(obj, list):
        return [_loaded(v) for v in obj]
    return "<path>" if isinstance(obj, str) and "/" in obj else obj


@pytest.mark.parametrize("name", ["exo_leg", "exo_2leg", "exo_leg_mit", "exo_leg_rmdx"])
def test_every_shipped_config_loads_the_same_from_its_copy(tmp_path, name):
    from exo_rt.runtime import snapshot
    from exo_rt.runtime.config import load_top
    from tests.config_snapshot import snapshot as plain

    top = load_top(ROOT / "configs" / f"{name}.yaml")
    snapshot.write(top, tmp_path)
    again = load_top(tmp_path / "config.yaml")
    assert _loaded(plain(again)) == _loaded(plain(top))
    copies = [p for p in (tmp_path / "configs").rglob("*") if p.is_file()]
    assert all(p.resolve().is_relative_to(tmp_path.resolve()) for p in copies)
    assert len(copies) == len(snapshot.manifest(tmp_path)["files"]) - 1  # all but config.yaml
    given = snapshot.given_files(ROOT / "configs" / f"{name}.yaml")
    recorded = snapshot.recorded_files(tmp_path, snapshot.manifest(tmp_path))
    assert snapshot.differences(recorded, given) == []


@pytest.mark.slow
def test_replay_uses_the_recorded_configs_not_the_edited_ones(recorded, capsys):
    run, configs = recorded
    module = configs / MODULE
    text = module.read_text()
    assert text.count("ratio: 100") == 2
    module.write_text(text.replace("ratio: 100", "ratio: 120", 1))  # the hip's, after the run
    try:
        # the run's own copy: the replay reproduces the measurements, as before the edit
        code, out, err = _cli(capsys, "replay", run, "--mode", "plant")
        assert code == 0 and not err, err
        assert json.loads((run / "replay-plant.json").read_text())["joints"]["hip"][
            "max_error_deg"] < 0.01
        # the edited config given: refused, the difference named
        code, out, err = _cli(capsys, "replay", run, "--mode", "plant", "--config",
                              configs / "exo_leg.yaml")
        line = _error_line(err)
        assert code == 2 and "differs from the config the run recorded" in line
        assert "modules/exo_leg_module.yaml" in line and "ratio 100 → 120" in line
        assert not out
        # … unless allowed: replayed with it, each difference stated
        code, out, err = _cli(capsys, "replay", run, "--mode", "plant", "--config",
                              configs / "exo_leg.yaml", "--allow-config-change")
        line = _error_line(err)
        assert code == 0 and "warning" in line and "transmissions[0].ratio 100 → 120" in line
        changed = json.loads((run / "replay-plant.json").read_text())
        assert changed["joints"]["hip"]["max_error_deg"] > 1.0
    finally:
        module.write_text(text)
    # the same config as recorded (another copy of it) is no difference
    code, out, err = _cli(capsys, "replay", run, "--mode", "plant", "--config",
                          configs / "exo_leg.yaml")
    assert code == 0 and not err, err


def test_a_run_recorded_without_a_snapshot_replays_with_a_warning(recorded, tmp_path, capsys):
    run, configs = recorded
    old = _copy(run, tmp_path / "old")
    (old / "config-snapshot.json").unlink()
    shutil.rmtree(old / "configs")
    (old / "config.yaml").write_text((configs / "exo_leg.yaml").read_text())  # as it was
    code, out, err = _cli(capsys, "replay", old, "--mode", "controller")
    assert code == 0 and "largest command difference 0 A" in out
    line = _error_line(err)
    assert "no config snapshot" in line and str(configs / "exo_leg.yaml") in line


def test_an_edited_snapshot_is_refused(recorded, tmp_path, capsys):
    run, _ = recorded
    bad = _copy(run, tmp_path / "bad")
    copy = bad / "configs" / MODULE
    copy.write_text(copy.read_text().replace("ratio: 100", "ratio: 120", 1))
    code, _, err = _cli(capsys, "replay", bad, "--mode", "plant")
    assert code == 2 and "changed after the run" in _error_line(err)


# ----------------------------------------------------------------------------- damaged logs
def _layout(run: Path) -> tuple[bytes, int, int]:
    raw = (run / "cycles.exolog").read_bytes()
    (hlen,) = struct.unpack("<Q", raw[8:16])
    records, _ = read_cycle_log(run / "cycles.exolog")
    return raw, 16 + hlen, records.dtype.itemsize


def _halved(raw, start, size):
    n = (len(raw) - start) // size
    return raw[: start + size * (n // 2)]


def _gapped(raw, start, size):
    return raw[: start + size * 100] + raw[start + size * 101 :]


def _empty(raw, start, size):
    return raw[:start]


def _put(raw, start, size, record, column, value):
    b = bytearray(raw)
    at = start + size * record + 8 * column
    b[at : at + 8] = struct.pack("<d", value)
    return bytes(b)


def _nan(raw, start, size):
    return _put(raw, start, size, 1234, 4, float("nan"))  # q[hip] of record 1234, in RUN


def _bit_flipped(raw, start, size):  # the exponent's top bit of q[knee]: ≈ 1e306 rad
    b = bytearray(raw)
    at = start + size * 1234 + 8 * 5
    (bits,) = struct.unpack("<Q", b[at : at + 8])
    b[at : at + 8] = struct.pack("<Q", bits ^ (1 << 62))
    return bytes(b)


DAMAGE = {
    "truncated": (_halved, r"holds \d{4} records where summary.json says \d{4}: it ends after "
                           r"record \d{4} \(cycle \d{4}\)"),
    "gapped": (_gapped, r"the cycle counter jumps from 99 to 101 at record 100"),
    "empty": (_empty, r"it holds no records where summary.json says"),
    "non-finite": (_nan, r"q\[hip\] is nan at record 1234 \(cycle 1234\)"),
    "bit-flipped": (_bit_flipped, r"q\[knee\] is [\d.]+e\+30\d at record 1234 \(cycle 1234\)"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_log_is_named_by_replay_and_report(recorded, tmp_path, capsys, kind):
    import re

    run, _ = recorded
    damage, pattern = DAMAGE[kind]
    bad = _copy(run, tmp_path / kind)
    (bad / "cycles.exolog").write_bytes(damage(*_layout(run)))
    for command in (("replay", bad, "--mode", "plant"), ("replay", bad, "--mode", "controller"),
                    ("report", bad)):
        code, out, err = _cli(capsys, *command)
        line = _error_line(err)
        assert code == 2, (command, out, err)
        assert "cycles.exolog: damaged log: " in line and re.search(pattern, line), line
    assert not (bad / "replay-plant.json").exists() and not (bad / "report.txt").exists()


def test_a_non_finite_difference_is_never_zero():
    from exo_rt.runtime.replay import _command_diff, _errors

    rec = np.zeros((5, 2))
    sim = np.zeros((5, 2))
    sim[3, 1] = np.nan  # the replay diverged there
    joints, first = _errors(sim, rec, ["hip", "knee"])
    assert joints["knee"]["max_error_deg"] == np.inf and first == 3
    assert joints["hip"]["max_error_deg"] == 0.0
    rec[2, 0] = np.nan  # a recorded sensor NaN (the controller faulted on it): not compared
    joints, _ = _errors(np.zeros((5, 2)), rec, ["hip", "knee"])
    assert joints["hip"]["max_error_deg"] == 0.0
    diff = _command_diff(np.array([[1.0, np.nan]]), np.array([[1.0, 2.0]]))
    assert diff.tolist() == [[0.0, np.inf]]


# ----------------------------------------------------------------------------- unfinished runs
@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_a_run_that_did_not_finish_is_reported_and_replayed(recorded, tmp_path, capsys):
    run, _ = recorded
    cut = _copy(run, tmp_path / "cut")
    (cut / "summary.json").unlink()  # power lost: no summary, a record half written
    raw, start, size = _layout(run)
    (cut / "cycles.exolog").write_bytes(raw[: start + size * 2000 + size // 2])
    code, out, err = _cli(capsys, "replay", cut, "--mode", "plant")
    assert code == 0, err
    line = _error_line(err)
    assert "the run did not finish (no summary.json): 2000 records" in line
    assert "replay of 1998 cycles" in out
    assert json.loads((cut / "replay-plant.json").read_text())["did_not_finish"] is True
    code, out, err = _cli(capsys, "report", cut)
    assert code == 0 and "did not finish" in _error_line(err)
    text = (cut / "report.txt").read_text()
    assert "THE RUN DID NOT FINISH" in text and "2000 cycles" in text


# ----------------------------------------------------------------------------- options, sizes
BAD_OPTIONS = [
    ("run", "--duration", "nan"),
    ("run", "--duration", "inf"),
    ("run", "--duration", "1e9"),
    ("run", "--duration", "-1"),
    ("run", "--duration", "0"),
    ("run", "--start-pose", "nan", "nan"),
    ("check", "configs/robots/exo_leg.yaml", "--rate", "nan"),
    ("replay", "runs", "--mode", "plant", "--jobs", "0"),
    ("sweep", "computed_torque", "--grid", "kp=1:1:1", "--max-saturation", "2"),
    ("sweep", "computed_torque", "--grid", "kp=1:1:1", "--cycles", "inf"),
    ("warmup", "--jobs", "-3"),
    ("drives", "--config", "r.yaml", "--buses", "b.yaml", "--linger", "-1"),
    ("drives", "--config", "r.yaml", "--buses", "b.yaml", "--parent", "0"),
    ("drives", "--config", "r.yaml", "--buses", "b.yaml", "--pose", "inf", "0"),
    ("bench-test", "step", "--reply-timeout", "nan"),
]


@pytest.mark.parametrize("argv", BAD_OPTIONS, ids=lambda a: " ".join(a[:1] + a[-2:]))
def test_a_bad_number_is_one_line_and_exit_2(capsys, argv):
    code, out, err = _cli(capsys, *argv)
    line = _error_line(err)
    assert code == 2 and line.startswith("exo-rt: error: --") and not out, err


def test_a_start_pose_outside_the_joint_limits_is_refused():
    res = _exo_rt("run", "--config", ROOT / "configs" / "exo_leg.yaml", "--start-pose", "5", "0",
                  "--duration", "1")
    line = _error_line(res.stderr)
    assert res.returncode == 2 and "hip 5 rad is outside its joint limits" in line


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_oversized_config_files_are_refused_before_parsing(tmp_path):
    from exo_rt.bus.eds import read_eds
    from exo_rt.runtime.config import load_top

    top = tmp_path / "huge.yaml"
    with open(top, "wb") as f:  # 50 MB (sparse): what once took 88 s and 7.5 GB
        f.write(b"robot: [")
        f.truncate(50_000_000)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"huge.yaml: the file is 47.7 MiB, more than the "
                                          r"YAML limit of 1 MiB"):
        load_top(top)
    assert time.perf_counter() - t0 < 1.0
    eds = tmp_path / "huge.eds"
    with open(eds, "wb") as f:
        f.truncate(17 << 20)
    with pytest.raises(ConfigError, match="more than the EDS limit of 16 MiB"):
        read_eds(eds)
    res = _exo_rt("check", top)
    assert res.returncode == 2 and "YAML limit of 1 MiB" in _error_line(res.stderr)
