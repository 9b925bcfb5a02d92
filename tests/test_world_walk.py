"""Walking on the world's floor (docs/world.md, "Walking on the floor"): the default wearer in
the sized two-leg exoskeleton (configs/exo_2leg_world.yaml, half the weight on a harness, the
ankles in orthoses) walks the default session — home, walk, STOP, end — on the flat-foot gait
through the whole runtime, and the world's truth in run.mcap says how
(:mod:`exo_rt.record.walking`).

Measured at 0.4 m/s (``python tools/walking_figures.py``, docs/world.md): 3 steady strides,
SHUTDOWN; tracking RMS 0.37° (hips), 0.40° (knees); stance 59.5 % of the stride; no reaction
in swing; a flat foot moves 2.7 mm; the pelvis 0.429 m/s (the heel and toe rockers add 3 cm a
step to the gait's 0.79 m stride); peaks 1.78 × the carried weight raw (a foot landing flat,
≈ 10 ms), 1.23 × over 25 ms — what the gait's pelvis alone asks with half the weight on the
harness, 1.30 (flat_foot.pelvis_peak_load): it drops 5 cm into double support.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exo_rt import cli
from exo_rt.control import flat_foot
from exo_rt.record.walking import measure

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT / "configs" / "exo_2leg_world.yaml"
WALK = ROOT / "configs" / "sessions" / "default.yaml"  # home, walk, stop: the walk alone


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The default session on the floor, 10 s of walking at the wearer's 0.4 m/s."""
    out = tmp_path_factory.mktemp("walk") / "run"
    mp = pytest.MonkeyPatch()
    mp.setenv("EXO_RT_WARMUP", "0")
    try:
        rc = cli.main(["run", "--config", str(WORLD), "--session", str(WALK), "--duration",
                       "10", "--out", str(out)])
    finally:
        mp.undo()
    return rc, out


@pytest.mark.slow
def test_the_wearer_walks_on_the_floor_to_shutdown(walk):
    rc, out = walk
    s = json.loads((out / "summary.json").read_text())
    assert rc == 0 and s["final_state"] == "SHUTDOWN" and not s["faults"], s
    assert s["session"]["motions_finished"].get("walk") == 1


@pytest.mark.slow
def test_walking_figures(walk):
    """Stance 58–70 % of the stride, no reaction in swing, a flat foot slips < 1 cm a step,
    tracking ≤ 1° RMS; the walking speed within 10 % of the asked 0.4 m/s; the peaks held to
    what they are (the module's docstring: the pelvis's)."""
    _, out = walk
    f = measure(out, stance=flat_foot.STANCE, rocker=flat_foot.ROCKER,
                offsets={"left_": 0.0, "right_": 0.5}, thigh=0.43, shank=0.42)
    assert f.strides >= 3
    assert all(0.58 <= v <= 0.70 for v in f.stance.values()), f.stance
    # each foot lands at the gait's heel strike (measured 0.013 of its stride) and its contact
    # first breaks in double support, 0.06 of a stride before the gait lifts it (measured
    # 0.558, 0.562): no push-off, the leading leg has the weight (docs/world.md)
    assert all(0.0 <= v <= 0.03 for v in f.touch.values()), f.touch
    assert all(abs(v - 0.56) <= 0.015 for v in f.unload.values()), f.unload
    assert all(f.stance[k] > f.unload[k] - f.touch[k] for k in f.stance), (f.stance, f.unload)
    assert all(v < 0.01 * f.carried for v in f.swing_force.values()), f.swing_force
    assert all(v < 0.01 for v in f.slip.values()), f.slip
    assert max(f.tracking_rms.values()) <= 1.0, f.tracking_rms
    assert f.speed == pytest.approx(0.4, rel=0.1)
    assert f.carried == pytest.approx(0.5 * 95.70 * 9.81, rel=0.01)  # half on the harness
    # the peaks over 25 ms are the pelvis's own: within 0.15 of what its motion alone asks of
    # the floor with half the weight on the harness (1.30; measured 1.23)
    pelvis = flat_foot.pelvis_peak_load(0.4, 1.75, 0.43, 0.42, support=0.5)
    assert all(abs(v - pelvis) < 0.15 for v in f.peak_smooth.values()), (f.peak_smooth, pelvis)
    assert all(v < 3.5 for v in f.peak.values()), f.peak


@pytest.mark.slow
def test_the_opening_step_is_a_step_not_a_fight(walk):
    """The opening step (standing → the gait) keeps one foot planted and lifts the other
    (exo_rt/control/flat_foot.py, step_paths): no joint reaches the drives' 30 A in it —
    measured 13.6 / 11.5 A (left hip, knee), 22.3 / 25.8 A (right), where the plain blend of
    the joint angles had both hips at 30 A against each other through the pelvis — and no
    loaded flat foot moves more than 5 mm in it or in the closing step (measured 2.2–4.1 mm).
    The closing step's peaks (27.7–29.1 A) are the right foot's landing it begins with, as
    the strides' (tools/landing_currents.py)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from tools.walking_figures import steps

    _, out = walk
    f = steps(out, 0.43, 0.42)
    assert max(f["opening"]["current"].values()) < 27.0, f["opening"]
    for part in ("opening", "closing"):
        assert all(v < 5e-3 for v in f[part]["travel"].values()), (part, f[part])


def test_a_speed_the_drives_cannot_follow_is_refused(tmp_path, capsys, monkeypatch):
    """The sized robot's wearer walks at most 0.5 m/s (its robot file): a wearer profile that
    asks 0.6 m/s of the flat-foot gait is refused before anything moves — its hip needs 45
    rad/s² of the 35 the config bounds."""
    fast = tmp_path / "fast.yaml"
    fast.write_text("height: 1.75\nmass: 75.0\nsex: male\n"
                    "speed: {min: 0.2, max: 0.6, default: 0.4, presets: [0.4]}\n")
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    rc = cli.main(["run", "--config", str(WORLD), "--wearer", str(fast), "--duration", "1",
                   "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "left_hip needs" in err and "0.6 m/s" in err, err
    assert not (tmp_path / "run" / "run.mcap").exists()


@pytest.mark.slow
def test_the_controllers_table_runs(capsys, monkeypatch):
    """tools/world_controllers.py, one row: the plain PID walks the passive wearer on the floor
    to SHUTDOWN with its world gains (configs/controllers/pid_world.yaml: the sized drives'
    rotors reflect ten times the test stand's inertia; docs/world.md, "Every controller on
    the floor") — pid.yaml's test-stand gains end the walk SAFE on the knee's tracking."""
    import sys

    sys.path.insert(0, str(ROOT))
    from tools import world_controllers

    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    assert world_controllers.main(["--only", "pid", "--sessions", "default",
                                   "--duration", "4"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| pid")]
    assert len(row) == 1 and "pid_world.yaml" in row[0], row
    assert row[0].split("|")[2].strip() == "passive" and row[0].endswith("| SHUTDOWN |"), row
