"""Gain sweeps in model-in-the-loop simulation (``exo-rt sweep``, docs/scale.md): the best
point of a small grid against the shipped gains, its snippet as a controller file, wearers,
the command line's table, heat map and errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from numpy.lib.recfunctions import structured_to_unstructured

from exo_rt.batch.sweep import run_sweep, snippet, verdict
from exo_rt.cli import main
from exo_rt.control.config import load_controller
from exo_rt.model import load_mechanism
from exo_rt.sim.mil import run_mil

ROOT = Path(__file__).resolve().parents[1]
CONTROLLER = ROOT / "configs" / "controllers" / "computed_torque.yaml"
ROBOT = ROOT / "configs" / "robots" / "exo_leg.yaml"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    return run_sweep(CONTROLLER, "kp=0.5/1/2,kd=0.5/1/2", model_errors=(0.8, 1.2), cycles=0.5,
                     out=out, status=False), out


@pytest.mark.slow
def test_the_best_point_beats_or_equals_the_shipped_gains(sweep):
    s, out = sweep
    assert len(s.points) == 9 and len(s.tasks) == 18  # the shipped gains are the grid's 1×1
    assert s.shipped["label"] == "kp=1,kd=1" and all(t["status"] == "ok" for t in s.tasks)
    assert s.best is not None and s.best["saturation"] <= 0.01
    assert s.best["rms_worst_deg"] <= s.shipped["rms_worst_deg"]
    assert all(s.best["rms_worst_deg"] <= p["rms_worst_deg"] for p in s.points
               if p["saturation"] <= 0.01)
    # the shipped computed torque tracks within half a degree with its model off by ±20 %
    assert 0.005 < s.shipped["rms_worst_deg"] < 0.5
    line = verdict(s)
    assert ("shipped gains are best" in line) == (s.best is s.shipped)
    for name in ("sweep-summary.csv", "sweep-summary.json", "best-gains.yaml",
                 "sweep-heatmap.png"):
        assert (out / name).stat().st_size > 100
    rows = (out / "sweep-summary.csv").read_text().splitlines()
    assert rows[0].startswith("point,kp,kd,rms_worst_deg") and len(rows) == 10


def test_the_snippet_is_the_best_point_as_a_controller_file(sweep, tmp_path):
    s, _ = sweep
    doc = yaml.safe_load(CONTROLLER.read_text())
    for joint, gains in yaml.safe_load(snippet(s, s.best))["joints"].items():
        doc["joints"][joint].update(gains)
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(doc))
    robot = load_mechanism(ROBOT)
    cfg = load_controller(path, robot)
    np.testing.assert_allclose(structured_to_unstructured(cfg.gains),
                               structured_to_unstructured(s.best["gains"]), rtol=1e-5)
    model = dataclasses.replace(robot, mass=robot.mass * 1.2, inertia=robot.inertia * 1.2)
    r = run_mil(robot, cfg, cycles=0.5, model=model, exo_model=dataclasses.replace(
        load_mechanism(ROBOT, wearer=False), mass=load_mechanism(ROBOT, wearer=False).mass * 1.2,
        inertia=load_mechanism(ROBOT, wearer=False).inertia * 1.2))
    task = next(t for t in s.tasks if t["point"] == s.points.index(s.best)
                and t["model_error"] == 1.2)
    assert float(np.sqrt(np.mean(r.rms_error_deg ** 2))) == pytest.approx(task["rms_deg"],
                                                                          rel=1e-4)


@pytest.mark.slow
def test_sweep_command_with_wearers(tmp_path):
    wearers = tmp_path / "wearers.yaml"
    wearers.write_text("wearers:\n  - {name: light, mass: 55}\n"
                       "  - {name: heavy, mass: 95, stiffness: 10, damping: 1}\n")
    res = subprocess.run([sys.executable, "-m", "exo_rt", "sweep", str(CONTROLLER), "--grid",
                          "hip.kp=400/800", "--model-error", "1.0", "--wearers", str(wearers),
                          "--cycles", "0.5", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "2 points × 1 model errors × 2 wearers = 4 tasks" in res.stdout
    assert "joints:\n  hip: {kp: " in res.stdout
    import json

    doc = json.loads((tmp_path / "out" / "sweep-summary.json").read_text())
    by = {(t["point"], t["wearer"]): t["rms_deg"] for t in doc["tasks"]}
    assert by[(0, "light")] != by[(0, "heavy")]  # the wearer's mass reaches the plant
    assert all(0.0 < v < 1.0 for v in by.values())


@pytest.mark.parametrize("argv, words", [
    (["--grid", "kq=1/2"], "unknown gain 'kq'"),
    (["--grid", "ankle.kp=1/2"], "unknown joint 'ankle'"),
    (["--grid", "kp=1:x:3"], "cannot read the values"),
    (["--grid", "kp=1/2", "--model-error", "0,1"], "positive"),
])
def test_sweep_errors_are_one_clear_line(argv, words, capsys, tmp_path):
    assert main(["sweep", str(CONTROLLER), "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
