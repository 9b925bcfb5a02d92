"""A replay's MCAP carries the run's 3D scene (docs/replay.md, "The replay's MCAP"): read with
the `mcap` library alone, the replay's /tf composes to the forward kinematics of the joints it
replayed, and where the replay reproduces the run its scene is the run's — the plant replay's
feet within what its reported angle error allows, the controller replay's /tf and /scene
byte for byte; `exo-rt export --mcap` writes the same scene as the run did."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_scene import ANKLE, _compose, _messages

ROOT = Path(__file__).resolve().parents[1]
REACH = 1.0  # m: more than a leg's pelvis → foot (thigh 0.42 m, shank to the ankle 0.42 m)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> Path:
    """A lockstep exo_2leg run, replayed in plant mode by the command with --no-mcap (no file),
    then in plant and controller mode by exo_rt.runtime.replay.replay (its MCAP)."""
    from exo_rt.runtime.replay import replay

    out = tmp_path_factory.mktemp("replay-scene") / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                          "configs/exo_2leg.yaml", "--duration", "1", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    res = subprocess.run([sys.executable, "-m", "exo_rt", "replay", str(out), "--mode",
                          "plant", "--no-mcap"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert not (out / "replay-plant.mcap").exists() and "wrote" not in res.stdout
    assert "mcap" not in json.loads((out / "replay-plant.json").read_text())
    for mode in ("plant", "controller"):
        assert replay(out, mode)["mcap"] == f"replay-{mode}.mcap"
    return out


def _feet(tf: list[tuple[int, dict]]) -> dict[int, np.ndarray]:
    """Each /tf message's feet in the world (log time → (2, 3), m), composed from /tf."""
    return {ns: np.array([_compose(m["transforms"], "world", f"{side}_foot")[0]
                          for side in ("left", "right")]) for ns, m in tf}


@pytest.mark.slow
def test_replay_tf_composes_to_the_replayed_joints(replayed):
    """replay-plant.mcap: one /tf per replayed cycle at its /joints' log time; at 100 of them
    each foot composed from /tf equals exo-rt's forward kinematics of the replay's own q to
    1e-9 m; its q is the plant's prediction (its largest difference from the recorded q is the
    replay's max_error_deg); the URDF is the run's."""
    from exo_rt.dynamics import Dynamics
    from exo_rt.model import load_mechanism

    path = replayed / "replay-plant.mcap"
    msgs = _messages(path, ["/tf", "/joints", "/robot_description"])
    run = _messages(replayed / "run.mcap", ["/joints", "/robot_description"])
    result = json.loads((replayed / "replay-plant.json").read_text())
    tf, joints = msgs["/tf"], msgs["/joints"]
    assert len(tf) == len(joints) == result["cycles"] == len(run["/joints"]) - 2
    assert [ns for ns, _ in tf] == [ns for ns, _ in joints]
    assert msgs["/robot_description"][0][1] == run["/robot_description"][0][1]
    mech = load_mechanism(ROOT / "configs/robots/exo_2leg.yaml")
    dyn = Dynamics(mech)
    names = mech.joint_names
    q_of = {ns: np.array([m["q"][n] for n in names]) for ns, m in joints}
    worst = 0.0
    for k in np.linspace(0, len(tf) - 1, 100).astype(int):
        ns, m = tf[k]
        q = q_of[ns]
        pos, rot = dyn.frame_positions(q), dyn.frame_rotations(q)
        for side in ("left", "right"):
            body = mech.body_names.index(f"{side}_shank")
            got, _ = _compose(m["transforms"], "pelvis", f"{side}_foot")
            worst = max(worst, float(np.abs(got - (pos[body] + rot[body] @ ANKLE)).max()))
    assert worst <= 1e-9, worst
    recorded = {ns: np.array([m["q"][n] for n in names]) for ns, m in run["/joints"]}
    diff = np.degrees(np.max([np.abs(q_of[ns] - recorded[ns]) for ns in q_of], axis=0))
    for n, d in zip(names, diff, strict=True):
        assert d == pytest.approx(result["joints"][n]["max_error_deg"], abs=1e-9)


def test_plant_replay_scene_agrees_with_the_run(replayed):
    """At every replayed cycle the plant replay's feet (world, from /tf) are the run's within
    REACH × the sum of the replay's largest angle errors (rad) — which docs/replay.md gives as
    0.0000° for a default lockstep run, asserted ≤ 0.01° here (tests/test_plant_replay_pose.py's
    tolerance); the same feet one cycle later are further off than that bound (the check
    sees a cycle's motion)."""
    result = json.loads((replayed / "replay-plant.json").read_text())
    errors = np.radians([j["max_error_deg"] for j in result["joints"].values()])
    assert errors.max() <= np.radians(0.01)
    bound = 1e-9 + REACH * errors.sum()
    replay = _feet(_messages(replayed / "replay-plant.mcap", ["/tf"])["/tf"])
    run = _feet(_messages(replayed / "run.mcap", ["/tf"])["/tf"])
    times = sorted(replay)
    worst = max(float(np.abs(replay[ns] - run[ns]).max()) for ns in times)
    assert worst <= bound, (worst, bound)
    shifted = max(float(np.abs(replay[a] - run[b]).max())
                  for a, b in zip(times, times[1:], strict=False))
    assert shifted > 10 * bound, (shifted, bound)


def test_controller_replay_scene_is_the_runs(replayed):
    """The controller replay reproduces the run bit for bit (its commands), so its /tf and
    /scene are the run's, message for message and byte for byte, at the same log times; its
    metadata says what its q is."""
    from mcap.reader import make_reader

    topics = ["/tf", "/scene", "/robot_description"]
    res = json.loads((replayed / "replay-controller.json").read_text())
    assert res["max_abs_command_diff_A"] == 0.0
    for topic in topics:
        a = _raw(replayed / "replay-controller.mcap", topic)
        b = _raw(replayed / "run.mcap", topic)
        assert len(a) > 100 or topic != "/tf"
        assert a == b, topic
    with open(replayed / "replay-controller.mcap", "rb") as f:
        (meta,) = [json.loads(m.metadata["meta"]) for m in make_reader(f).iter_metadata()
                   if m.name == "exo-rt"][-1:]
    assert meta["replay"]["mode"] == "controller" and "recorded" in meta["replay"]["q"]


def _raw(path: Path, topic: str) -> list[tuple[int, bytes]]:
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        return [(m.log_time, bytes(m.data))
                for _s, _c, m in make_reader(f).iter_messages(topics=[topic])]


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_export_mcap_writes_the_runs_scene(replayed, tmp_path):
    """exo-rt export --mcap of the run without its run.mcap writes /robot_description, /tf and
    /scene equal to what the recording process wrote, byte for byte."""
    from exo_rt.record.mcap_log import export_mcap

    copy = tmp_path / "run"
    shutil.copytree(replayed, copy)
    (copy / "run.mcap").unlink()
    export_mcap(copy)
    for topic in ("/robot_description", "/tf", "/scene"):
        got = _raw(copy / "run.mcap", topic)
        assert got and got == _raw(replayed / "run.mcap", topic), topic
