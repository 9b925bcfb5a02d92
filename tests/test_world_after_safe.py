"""What SAFE does to the wearer, end to end (docs/world.md, "SAFE under load"): ``exo-rt run``
of the default exoskeleton's own session in the world, an E-stop pressed (``--inject estop``,
the embedded board's relay) half-way up from the chair and in mid-stance of the walk; the world
runs on by itself 2 s from the press, the drives as SAFE left them (their declared reactions:
hip and knee brakes), and the run reports the pelvis's drop and each joint's motion — within
issue 44's 5 cm and 10° of knee flexion. And the trail they are measured from, on known rows."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt.sim.after_safe import TRAIL, Trail

ROOT = Path(__file__).resolve().parents[1]


class _Plant:
    """A plant stand-in: the pelvis (x, z, pitch) and two joints, set by hand."""

    n_joints = 2

    def __init__(self) -> None:
        self.base = np.array([0.0, 0.9, 0.0])
        self.joint_positions = np.array([0.1, 0.2])


def test_the_trail_measures_from_the_fault_s_onset():
    """The reference is the last period at or before the onset; the drop is the pelvis's
    lowest below it (a rise is no drop), each joint's flexion its largest increase, its
    extension its largest decrease — after the onset only; {} once the ring has overwritten
    the onset."""
    plant = _Plant()
    trail = Trail(plant)
    for k in range(1, 101):  # 0.1 s: the pelvis sinks 1 mm a period after 0.05 s
        t = k * 1e-3
        plant.base[1] = 0.9 - 1e-3 * max(0, k - 50)
        plant.joint_positions[:] = (0.1 + 0.01 * max(0, k - 50), 0.2 - 0.02 * max(0, k - 50))
        if k < 50:  # before the onset: a deep dip, which is not the SAFE's
            plant.base[1] = 0.5
        trail.put(t, k)
    out = trail.figures(0.05, 0.1, ["hip", "knee"])
    assert out["window_s"] == pytest.approx(0.05)
    assert out["pelvis_drop_m"] == pytest.approx(0.05)
    assert out["joints"]["hip"] == pytest.approx({"flexion_rad": 0.5, "extension_rad": 0.0})
    assert out["joints"]["knee"] == pytest.approx({"flexion_rad": 0.0, "extension_rad": 1.0})
    rising = Trail(plant)
    for k in range(10):
        plant.base[1] = 0.9 + 1e-3 * k
        rising.put(k * 1e-3, k)
    assert rising.figures(0.0, 0.01, ["hip", "knee"])["pelvis_drop_m"] == 0.0
    for k in range(101, 101 + TRAIL):  # the onset overwritten
        trail.put(k * 1e-3, k)
    assert trail.figures(0.05, 0.1, ["hip", "knee"]) == {}


@pytest.mark.slow
@pytest.mark.parametrize(("where", "at"), [("half-way up from the chair", 2.894),
                                           ("mid-stance, the left foot alone", 6.966)])
def test_an_estop_leaves_the_wearer_where_they_were(tmp_path, where, at):
    """The default session (stand up 0.5–5.3 s, walk from 6.3 s), at the instants
    tools/safe_under_load.py finds: RUN + 2.894 s, the middle of the stand-up; RUN + 6.966 s,
    the middle of the walk's longest stretch on one foot (the left, as the right takes the
    opening step). In the 2 s from the E-stop the pelvis drops ≤ 5 cm and no knee flexes by
    more than 10° (measured: half-way up no drop — the harness's half of the weight and the
    brakes hold them — the knees extend 0.38°; in mid-stance 6.3 mm, the stance knee 1.94°)."""
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--inject", f"estop@{at}",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr  # (a fault: exit 1)
    s = json.loads((out / "summary.json").read_text())
    assert s["final_state"] == "SAFE" and [f["cause"] for f in s["faults"]] == ["estop"]
    a = s["after_safe"]
    assert a["seconds"] == 2.0 and a["window_s"] == pytest.approx(2.0, abs=1e-6)
    # run on: the 2 s less the loop's own cycles after the press (its end minus the onset)
    after_press = s["cycles"] * 1e-3 - s["faults"][0]["t"]
    assert 0.0 < after_press < 0.1, s["faults"]
    assert a["run_on_s"] == pytest.approx(2.0 - after_press, abs=1.5e-3)
    assert 0.0 <= a["pelvis_drop_m"] <= 0.05, (where, a)
    knees = {n: j for n, j in a["joints"].items() if "knee" in n}
    assert len(knees) == 2
    assert all(j["flexion_rad"] <= math.radians(10.0) for j in knees.values()), (where, a)
    assert "  after SAFE: in 2.0 s from the fault" in res.stdout, res.stdout


@pytest.mark.slow
def test_the_tool_finds_the_instants_the_test_presses_at(exo_rt_runs):
    """tools/safe_under_load.py's two instants, found in the default exoskeleton's run that
    docs/sizing.md's w75 table reads too (made once a session: tests/run_cache.py): the
    stand-up's middle and the middle of the walk's longest stretch on one foot — those the
    E-stop test above presses at."""
    from tools.safe_under_load import instants

    out, res = exo_rt_runs.run("--config", "configs/exo_2leg_world.yaml", "--duration", "6")
    assert res.returncode == 0, res.stderr[-2000:]
    up, stance = instants(out)
    assert up == pytest.approx(2.894, abs=2e-3)
    assert stance == pytest.approx(6.966, abs=2e-3)


@pytest.mark.slow
def test_a_knee_held_by_its_shorted_phases_alone_folds(tmp_path):
    """The figure can fail: the same E-stop in mid-stance with the knees declared
    ``short_circuit`` (their brakes removed: the drive's shorted phases, 137 N·m·s/rad at the
    joint, only slow a load that back-drives the gear) — the stance knee flexes past 10° and
    the pelvis drops (measured: 14.5°, 33.1 mm; the plant-level stand-in of
    tests/test_world_floor.py: 13.1°, 22 mm)."""
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    module = configs / "robots" / "modules" / "exo_leg_sized_module.yaml"
    text = module.read_text()
    knee = text.index("# SAFE: a holding brake as the hip's")  # (the knee's transmission)
    head, tail = text[:knee], text[knee:]
    assert tail.count("brake_torque: 1.2,") == 1 and tail.count("safe_reaction: brake") == 1
    tail = tail.replace("brake_torque: 1.2,", "").replace("safe_reaction: brake",
                                                          "safe_reaction: short_circuit")
    module.write_text(head + tail)
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                          str(configs / "exo_2leg_world.yaml"), "--inject", "estop@6.966",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    a = json.loads((out / "summary.json").read_text())["after_safe"]
    assert math.degrees(a["joints"]["left_knee"]["flexion_rad"]) > 10.0, a
    assert a["pelvis_drop_m"] > 0.01, a


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_the_test_stand_has_no_world_to_run_on(tmp_path):
    """SAFE on the test stand (the leg hanging from a fixed pelvis: no floor, no wearer to
    drop): no figures, no line."""
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                          "configs/exo_leg.yaml", "--inject", "estop@0.3", "--duration", "1",
                          "--out", str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["final_state"] == "SAFE" and "after_safe" not in s
    assert "after SAFE" not in res.stdout
