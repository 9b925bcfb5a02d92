"""`exo-rt size RUN --ratio N…` (exo_rt/record/regear.py, docs/sizing.md): the ratio study.

- Through the robot's own ratio it gives back the recorded currents exactly (the drive's law
  read backwards, then forwards).
- On a drive without friction it is the closed form τ_m′ = τ_link/k′ + k′·I_rotor′·q̈ of a
  motion whose acceleration is known, not differentiated — with the fitted rotor and with a
  lighter one (``--rotor``: another motor, whose currents are not known).
- Against the world itself: the default world session recorded through the sized CSG-25-100,
  studied at ratio 120, predicts what the same session draws when the robot file's gear is a
  120:1 — each joint's RMS current within 5 % and its peak within 15 % (measured with a 2 s
  walk: RMS −3.4…+2.4 %, peaks −10.6…+0.3 %: a peak is a landing, where the other gear's
  closed loop differs most).
- `--window T0 T1` sizes the cycles in it alone; a ratio below 1, a window backwards or
  outside the run is one line and exit 2.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from exo_rt.cli import main as cli
from exo_rt.model import load_mechanism
from exo_rt.record import regear
from tests.test_sizing import SIZED, make_run

ROOT = Path(__file__).resolve().parents[1]
DT = 1e-3
T = np.arange(0.0, 2.0, DT)
W = 2 * math.pi * 1.5  # rad/s: a 1.5 Hz swing
QD = np.stack([0.8 * W * np.cos(W * T), 1.2 * W * np.cos(W * T + 0.4)], axis=1)
QDD = np.stack([-0.8 * W * W * np.sin(W * T), -1.2 * W * W * np.sin(W * T + 0.4)], axis=1)
CURRENT = np.stack([4.0 + 6.0 * np.sin(W * T + 1.0), -2.0 + 9.0 * np.sin(2 * W * T)], axis=1)


def _run(folder: Path, robot: Path = SIZED) -> Path:
    zeros = np.zeros_like(QD)
    return make_run(folder, zeros, CURRENT, QD, zeros + 30.0, robot)


def test_through_its_own_ratio_the_study_gives_back_the_recorded_currents(tmp_path):
    rows, own = regear.study([_run(tmp_path / "run")], ratios=[50.0, 160.0])
    assert own == {"hip": 100.0, "knee": 100.0}
    assert [(g.joint, g.ratio) for g in rows] == [
        (j, n) for j in ("hip", "knee") for n in (50.0, 100.0, 160.0)]
    for j, name in enumerate(("hip", "knee")):
        g = next(g for g in rows if g.joint == name and g.ratio == 100.0)
        assert g.rms_current == pytest.approx(np.sqrt(np.mean(CURRENT[:, j] ** 2)), rel=1e-12)
        assert g.rotor == pytest.approx(3.473e-4, rel=1e-9)
        assert g.peak_current == pytest.approx(np.max(np.abs(CURRENT[:, j])), rel=1e-12)
        assert g.reflected == pytest.approx(100.0 ** 2 * 3.473e-4, rel=1e-9)
        assert g.peak_motor_speed == pytest.approx(100.0 * np.max(np.abs(QD[:, j])), rel=1e-12)


def test_on_a_drive_without_friction_it_is_the_closed_form(tmp_path):
    robots = tmp_path / "robots"
    shutil.copytree(ROOT / "configs" / "robots", robots)
    module = robots / "modules" / "exo_leg_sized_module.yaml"
    text = module.read_text()
    for key in ("hysteresis", "coulomb", "static", "viscous", "load_friction"):
        text, n = re.subn(rf"\b{key}: [0-9.e-]+", f"{key}: 0.0", text)
        assert n == 1, key
    module.write_text(text)
    robot = robots / "exo_leg_sized.yaml"
    mech = load_mechanism(robot)
    rows, _ = regear.study([_run(tmp_path / "run", robot)], ratios=[60.0], rotors=[1.0e-4])
    for j, tr in enumerate(mech.transmissions):
        k, kt = tr.multiplier, tr.motor.torque_constant * tr.motor_sign
        fitted = 3.473e-4
        tau_link = k * kt * CURRENT[:, j] - k * k * fitted * QDD[:, j]
        k2 = math.copysign(60.0, k)
        for rotor in (fitted, 1.0e-4):  # the fitted motor's rotor, and a lighter one
            torque = np.abs(tau_link / k2 + k2 * rotor * QDD[:, j])  # N·m at the motor
            g = next(g for g in rows if (g.joint, g.ratio, g.rotor) == (tr.joint, 60.0, rotor))
            # the study's q̈ is the central difference over ±5 ms: (5 ms·ω)²/6 = 0.04 % of q̈
            rms = np.sqrt(np.mean(torque ** 2))
            assert g.motor_rms_torque == pytest.approx(rms, rel=1e-3)
            assert g.motor_peak_torque == pytest.approx(np.max(torque), rel=1e-3)
            assert g.reflected == pytest.approx(3600.0 * rotor, rel=1e-12)
            if rotor == fitted:  # the fitted motor's currents and verdict …
                assert g.rms_current == pytest.approx(rms / abs(kt), rel=1e-3)
                assert g.verdict in ("ok", "over rated", "over peak")
            else:  # … another rotor is another motor: its electrical data are unknown
                assert g.rms_current is None and g.peak_voltage is None and g.verdict == "—"


@pytest.mark.slow
def test_the_study_predicts_the_world_through_another_gear(tmp_path, monkeypatch, capsys):
    """The default world session (stand up, walk 2 s, sit down) through the sized CSG-25-100,
    and again with the robot file's gear a 120:1 (the same motor): the study of the first run
    at ratio 120 against the second run's `exo-rt size`. Measured (study / run, A): RMS
    5.36/5.23, 5.85/5.99, 4.58/4.59, 6.28/6.50; peaks 21.0/23.5, 28.1/29.3, 22.8/23.8,
    29.5/29.4 (left hip, left knee, right hip, right knee)."""
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    from exo_rt.record.sizing import size_runs

    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    module = configs / "robots" / "modules" / "exo_leg_sized_module.yaml"
    text = module.read_text()
    assert text.count("ratio: 100") == 2
    module.write_text(text.replace("ratio: 100", "ratio: 120"))
    runs = {}
    for n, top in ((100, ROOT / "configs"), (120, configs)):
        runs[n] = tmp_path / f"run{n}"
        assert cli(["run", "--config", str(top / "exo_2leg_world.yaml"), "--duration", "2",
                    "--out", str(runs[n])]) == 0
    capsys.readouterr()
    rows, own = regear.study([runs[100]], ratios=[120.0])
    measured, _ = size_runs([runs[120]])
    assert set(own.values()) == {100.0}
    for joint, js in measured.items():
        g = next(g for g in rows if g.joint == joint and g.ratio == 120.0)
        assert g.rms_current == pytest.approx(js.figures.rms_current, rel=0.05), joint
        assert g.peak_current == pytest.approx(js.figures.peak_current, rel=0.15), joint
    cli(["size", str(runs[100]), "--ratio", "120"])
    out = capsys.readouterr().out
    assert "through other ratios" in out and "left_knee   120 " in out
    assert re.search(r"left_knee: least RMS current at ratio 1[02]0: \d+\.\d\d A", out), out


def test_a_window_sizes_its_cycles_alone(tmp_path, capsys):
    """``--window T0 T1``: both tables over the cycles in [T0, T1] s of the run's clock — the
    steady walk alone, say, whose RMS is what a long walk heats the motors with."""
    from exo_rt.record.sizing import size_runs

    run = _run(tmp_path / "run")
    inside = slice(500, 1001)  # t = 0.5 … 1.0 s
    by_joint, _ = size_runs([run], window=(0.5, 1.0))
    assert by_joint["hip"].figures.samples == 501
    assert by_joint["hip"].figures.rms_current == pytest.approx(
        np.sqrt(np.mean(CURRENT[inside, 0] ** 2)), rel=1e-12)
    rows, _ = regear.study([run], ratios=[], window=(0.5, 1.0))
    assert rows[0].peak_current == pytest.approx(np.max(np.abs(CURRENT[inside, 0])), rel=1e-12)
    assert cli(["size", str(run), "--window", "0.5", "1.0", "--ratio", "80",
                "--rotor", "1e-4"]) in (0, 1)
    out = capsys.readouterr().out
    assert "501 cycles" in out and re.search(r"^hip +80 +3473 ", out, re.M), out
    assert re.search(r"^hip +80 +1000 .* — +—$", out, re.M), out
    assert re.search(r"^hip: with a rotor of 1000 g·cm², least at ratio \d+: a motor giving "
                     r"[\d.]+ N·m continuous$", out, re.M), out


@pytest.mark.parametrize("argv, message", [
    (["--ratio", "0.5"], "argument --ratio: '0.5' is not a gear ratio (a number ≥ 1, e.g. 80)"),
    (["--ratio", "eighty"], "argument --ratio: 'eighty' is not a gear ratio (a number ≥ 1, "
                            "e.g. 80)"),
    (["--rotor", "0"], "argument --rotor: '0' is not a rotor inertia (kg·m² > 0 at the motor, "
                       "e.g. 1.7e-4)"),
    (["--window", "1.0", "0.5"], "--window 1 0.5: T0 must come before T1, T0 a number "
                                 "(seconds of the run's clock; T1 inf: to the run's end)"),
    (["--window", "nan", "1"], "--window nan 1: T0 must come before T1, T0 a number "
                               "(seconds of the run's clock; T1 inf: to the run's end)"),
    (["--window", "5", "6"], "no cycle of the run lies in 5–6 s (it runs 0.000–1.999 s) — give "
                             "a window within the run: --window T0 T1"),
])
def test_a_bad_ratio_or_window_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    run = _run(tmp_path / "run")
    try:
        rc = cli(["size", str(run), *argv])
    except SystemExit as exc:  # argparse's own refusal
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()  # (argparse's usage lines before it)
    assert err[-1].endswith(message) and "Traceback" not in "\n".join(err), err


def test_a_reader_that_goes_away_ends_it_quietly(tmp_path):
    """`exo-rt size RUN --ratio … | head -1`: the reader closes the pipe long before the
    table's end; the command stops with 141 (128 + SIGPIPE), as a shell tool does, and no
    traceback."""
    import subprocess
    import sys

    run = _run(tmp_path / "run")
    ratios = [str(n) for n in range(1, 401)]  # 800 rows: past any pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "exo_rt", "size", str(run), "--ratio",
                             *ratios], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert first.startswith(b"drives of ") and "Traceback" not in err and not err.strip(), err
