"""`exo-rt size` (exo_rt/record/sizing.py, docs/sizing.md): the table of a constructed run
with known torques, currents, speeds and windings reproduces them exactly, each verdict
follows the ratings (and flips when a figure crosses one), and bad input is one line and
exit 2. The robot file's ratings and SAFE reaction keys load, and a reaction without its part
is refused where it is written."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from exo_rt.cli import main as cli
from exo_rt.errors import ModelError
from exo_rt.model import load_mechanism
from exo_rt.record import sizing
from exo_rt.record.recorder import cycle_columns, row_width, write_header

ROOT = Path(__file__).resolve().parents[1]
SIZED = ROOT / "configs" / "robots" / "exo_leg_sized.yaml"
SHIPPED = ROOT / "configs" / "robots" / "exo_leg.yaml"


def make_run(folder: Path, torque, current, speed, winding, robot: Path = SIZED) -> Path:
    """A run folder whose cycle log holds these per-cycle values ([cycle][joint]) for the
    joints (hip, knee) and whose config.yaml names ``robot``."""
    folder.mkdir(parents=True, exist_ok=True)
    cols = cycle_columns(2)
    width = row_width(cols)
    n = len(torque)
    rec = np.zeros((n, width))
    rec[:, cols["cycle"][0]] = np.arange(n)
    rec[:, cols["t"][0]] = np.arange(n) * 1e-3  # s: the run's clock at 1 kHz
    for name, values in (("torque", torque), ("current", current), ("qd", speed),
                         ("winding", winding)):
        a, b = cols[name]
        rec[:, a:b] = np.asarray(values, float)
    write_header(folder / "cycles.exolog", cols, {"joint_names": ["hip", "knee"],
                                                  "rate_hz": 1000.0})
    with open(folder / "cycles.exolog", "ab") as f:
        f.write(rec.astype("<f8").tobytes())
    (folder / "config.yaml").write_text(f"robot: {robot}\n")
    return folder


TORQUE = [[30.0, 5.0], [-40.0, -5.0], [10.0, 5.0], [20.0, -5.0]]
CURRENT = [[1.0, 0.5], [-2.0, -0.5], [3.0, 0.5], [-4.0, -0.5]]
SPEED = [[0.5, 0.1], [-1.5, 0.2], [0.0, -0.3], [1.0, 0.0]]
WINDING = [[40.0, 30.0], [41.0, 31.0], [42.0, 32.0], [43.5, 33.0]]


def test_the_table_reproduces_a_run_with_known_figures(tmp_path, capsys):
    run = make_run(tmp_path / "run", TORQUE, CURRENT, SPEED, WINDING)
    by_joint, robot = sizing.size_runs([run])
    assert robot.resolve() == SIZED.resolve()
    hip, knee = by_joint["hip"].figures, by_joint["knee"].figures
    assert hip.peak_torque == 40.0 and hip.rms_torque == math.sqrt(750.0)
    assert hip.peak_current == 4.0 and hip.rms_current == math.sqrt(7.5)
    assert hip.peak_speed == 1.5 and hip.peak_winding == 43.5 and hip.samples == 4
    assert knee.peak_torque == 5.0 and knee.rms_torque == 5.0 and knee.peak_speed == 0.3
    # the sized robot's ratings: 0.0705 × 5.39 × 100 × 0.7 = 26.6 N·m continuous (below the
    # CSG-25-100's 87), 148 N·m peak (below its 204), 369 N·m momentary, 277.5/100 rad/s
    r = by_joint["hip"].rating
    assert r.torque_continuous == pytest.approx(0.0705 * 5.39 * 100 * 0.7, rel=1e-12)
    assert r.torque_peak == pytest.approx(148.05, rel=1e-12)
    assert r.torque_momentary == 369.0 and r.speed_rated == pytest.approx(2.775)
    # RMS 27.39 N·m > 26.6: the hip is over its continuous rating, the knee is not
    assert by_joint["hip"].verdict == "over rated"
    assert by_joint["knee"].verdict == "ok" and not by_joint["knee"].reasons
    assert cli(["size", str(run)]) == 1  # a joint over a rating: exit 1
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("hip "))
    assert row.split()[1:3] == ["40.0", "27.4"]
    assert "26.6/148.0/369.0" in row and row.endswith("over rated")
    assert "hip: RMS torque 27.4 N·m > 26.6 (over rated)" in out
    # the check can pass: a tenth of the torque is within every rating
    calm = make_run(tmp_path / "calm", np.array(TORQUE) / 10, CURRENT, SPEED, WINDING)
    assert cli(["size", str(calm)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "verdict"


def test_peaks_momentary_and_the_drives_limit(tmp_path):
    torque = [[150.0, 210.0], [0.0, 0.0]]
    hot = make_run(tmp_path / "a", torque, [[1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0]] * 2,
                   [[40.0, 40.0]] * 2)
    by = sizing.size_runs([hot])[0]
    assert by["hip"].verdict == "over peak"  # 150 > 148 (the motor at 30 A)
    assert by["knee"].verdict == "over peak"  # 210 > 204 too (the gear's repeated peak)
    huge = make_run(tmp_path / "b", [[400.0, 0.0], [0.0, 0.0]], [[30.0, 0.0], [0, 0]],
                    [[0.0, 0.0]] * 2, [[130.0, 40.0]] * 2)
    by = sizing.size_runs([huge])[0]
    assert by["hip"].verdict == "over momentary"
    reasons = " / ".join(by["hip"].reasons)
    assert "current at the drive's limit 30 A" in reasons and "winding 130 °C > 125" in reasons
    # two runs together: peaks over both, RMS over all their cycles
    both = sizing.size_runs([hot, huge])[0]["hip"].figures
    assert both.peak_torque == 400.0
    assert both.rms_torque == pytest.approx(math.sqrt((150 ** 2 + 400 ** 2) / 4), rel=1e-15)
    # against the shipped drives (--robot): 56.6 N·m peak, no catalogue ratings given
    shipped = sizing.size_runs([hot], robot=SHIPPED)[0]["hip"]
    assert shipped.rating.torque_peak == pytest.approx(0.0404 * 20 * 100 * 0.7)
    assert shipped.rating.torque_momentary is None and shipped.verdict == "over peak"


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    cases = []
    cases.append(["size", str(tmp_path / "nowhere")])
    (tmp_path / "empty").mkdir()
    cases.append(["size", str(tmp_path / "empty")])
    norobot = make_run(tmp_path / "norobot", TORQUE, CURRENT, SPEED, WINDING)
    (norobot / "config.yaml").unlink()
    cases.append(["size", str(norobot)])
    run = make_run(tmp_path / "run", TORQUE, CURRENT, SPEED, WINDING)
    cases.append(["size", str(run), "--robot", str(ROOT / "configs/robots/arm2_planar.yaml")])
    cases.append(["size", str(run), "--robot", str(tmp_path / "missing.yaml")])
    for argv in cases:
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("exo-rt: error: "), (argv, err)
        assert "Traceback" not in err[0]
    assert "not a run folder" in _err(capsys, ["size", str(tmp_path / "nowhere")])
    assert "no transmission on joint(s) hip, knee" in _err(
        capsys, ["size", str(run), "--robot", str(ROOT / "configs/robots/arm2_planar.yaml")])


def _err(capsys, argv) -> str:
    cli(argv)
    return capsys.readouterr().err


def test_ratings_and_safe_reactions_load_and_a_reaction_needs_its_part(tmp_path):
    mech = load_mechanism(SIZED)
    hip, knee = mech.transmissions
    assert (hip.safe_reaction, knee.safe_reaction) == ("brake", "brake")
    assert hip.drive.rated_torque == 87.0 and hip.drive.peak_torque == 204.0
    assert hip.drive.catalogue == "CSG-25-100" and hip.motor.rated_speed == 277.5
    shipped = load_mechanism(SHIPPED).transmissions[0]
    assert shipped.safe_reaction == "none" and shipped.drive.rated_torque is None
    # the knee declared `brake` but its motor has none: refused at its line
    folder = tmp_path / "robots"
    shutil.copytree(ROOT / "configs" / "robots", folder)
    module = folder / "modules" / "exo_leg_sized_module.yaml"
    text = module.read_text()
    knee = text.index("  - joint: knee")  # the knee's motor loses its brake
    text = text[:knee] + text[knee:].replace(" brake_torque: 1.2,", "", 1)
    module.write_text(text)
    with pytest.raises(ModelError) as err:
        load_mechanism(folder / "exo_leg_sized.yaml")
    lines = text.splitlines()
    line = len(lines) - 1 - lines[::-1].index("    safe_reaction: brake")  # the knee's
    assert "safe_reaction 'brake' on joint 'knee' needs motor.brake_torque > 0" in str(err.value)
    assert f"exo_leg_sized_module.yaml:{line + 1}" in str(err.value)
    module.write_text(text.replace("    safe_reaction: brake", "    safe_reaction: glue", 1))
    with pytest.raises(ModelError, match="safe reaction"):
        load_mechanism(folder / "exo_leg_sized.yaml")
