"""The 3D scene in run.mcap (docs/telemetry.md, "The 3D scene"): read back with the `mcap`
library alone (not exo-rt's reader), the transforms on /tf compose to exo-rt's forward
kinematics, the URDF on /robot_description parses with Pinocchio and agrees with it, and the
ground-reaction arrows are the recorded forces at the scale the docs state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
# the ankle of configs/robots/modules/exo_leg_module.yaml: the foot link 0.42 m below the knee
# (its frame is the shank's, moved down): written here, not taken from exo-rt's scene
ANKLE = np.array([0.0, 0.0, -0.42])


def _messages(path: Path, topics) -> dict[str, list[tuple[int, dict]]]:
    from mcap.reader import make_reader

    out: dict[str, list] = {t: [] for t in topics}
    with open(path, "rb") as f:
        for _s, channel, message in make_reader(f).iter_messages(topics=list(topics)):
            out[channel.topic].append((message.log_time, json.loads(message.data)))
    return out


@pytest.fixture(scope="module")
def two_leg_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scene") / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                          "configs/exo_2leg.yaml", "--duration", "1", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return out


def _quat_matrix(r: dict) -> np.ndarray:
    x, y, z, w = r["x"], r["y"], r["z"], r["w"]
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _compose(transforms: list[dict], root: str, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """``frame``'s pose in ``root`` from a FrameTransforms message's parent → child links."""
    by_child = {t["child_frame_id"]: t for t in transforms}
    rot, pos = np.eye(3), np.zeros(3)
    while frame != root:
        t = by_child[frame]
        tr = np.array([t["translation"][k] for k in "xyz"])
        r = _quat_matrix(t["rotation"])
        rot, pos = r @ rot, r @ pos + tr
        frame = t["parent_frame_id"]
    return pos, rot


@pytest.mark.slow
def test_tf_composes_to_forward_kinematics(two_leg_run):
    """At 100 recorded cycles, each foot's frame composed from /tf (pelvis → thigh → shank →
    foot) equals exo-rt's forward kinematics of the recorded q to 1e-9 m; /tf has one message
    per cycle, at the cycle's log time; world → pelvis is the test stand's rest height."""
    from exo_rt.dynamics import Dynamics
    from exo_rt.model import load_mechanism

    msgs = _messages(two_leg_run / "run.mcap", ["/tf", "/joints"])
    tf, joints = msgs["/tf"], msgs["/joints"]
    assert len(tf) == len(joints) > 1000
    mech = load_mechanism(ROOT / "configs/robots/exo_2leg.yaml")
    dyn = Dynamics(mech)
    joint_at = {ns: m for ns, m in joints}
    names = mech.joint_names
    worst = 0.0
    heights = set()
    for k in np.linspace(0, len(tf) - 1, 100).astype(int):
        ns, m = tf[k]
        q = np.array([joint_at[ns]["q"][n] for n in names])
        pos, rot = dyn.frame_positions(q), dyn.frame_rotations(q)
        for side in ("left", "right"):
            body = mech.body_names.index(f"{side}_shank")
            expect = pos[body] + rot[body] @ ANKLE
            got, _ = _compose(m["transforms"], "pelvis", f"{side}_foot")
            worst = max(worst, float(np.abs(got - expect).max()))
            world, _ = _compose(m["transforms"], "world", f"{side}_foot")
            heights.add(round(float(world[2] - got[2]), 12))
    assert worst <= 1e-9, worst
    assert len(heights) == 1 and 0.8 < heights.pop() < 1.0  # the pelvis above the floor


@pytest.mark.slow
def test_urdf_parses_with_pinocchio_and_agrees(two_leg_run):
    """The URDF on /robot_description parses with Pinocchio; its frames' placements at random
    q equal exo-rt's kinematics (every drawn body) to 1e-9."""
    import pinocchio as pin

    from exo_rt.dynamics import Dynamics
    from exo_rt.model import load_mechanism

    descr = _messages(two_leg_run / "run.mcap", ["/robot_description"])["/robot_description"]
    assert descr, "no /robot_description"
    urdf = descr[0][1]["data"]
    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    mech = load_mechanism(ROOT / "configs/robots/exo_2leg.yaml")
    dyn = Dynamics(mech)
    assert set(mech.joint_names) <= {model.names[i] for i in range(model.njoints)}
    rng = np.random.default_rng(45)
    worst = 0.0
    for _ in range(20):
        q = rng.uniform(-1.0, 1.5, mech.nq)
        qp = pin.neutral(model)
        for k, n in enumerate(mech.joint_names):
            qp[model.joints[model.getJointId(n)].idx_q] = q[k]
        pin.forwardKinematics(model, data, qp)
        pin.updateFramePlacements(model, data)
        pos, rot = dyn.frame_positions(q), dyn.frame_rotations(q)
        for b in ("pelvis", "left_thigh", "left_shank", "right_thigh", "right_shank"):
            i = mech.body_names.index(b)
            placement = data.oMf[model.getFrameId(b)]
            worst = max(worst, float(np.abs(placement.translation - pos[i]).max()),
                        float(np.abs(placement.rotation - rot[i]).max()))
        for side in ("left", "right"):
            i = mech.body_names.index(f"{side}_shank")
            foot = data.oMf[model.getFrameId(f"{side}_foot")].translation
            worst = max(worst, float(np.abs(foot - (pos[i] + rot[i] @ ANKLE)).max()))
    assert worst <= 1e-9, worst


def _synthetic(tmp_path: Path, with_world: bool):
    """run.mcap of 300 synthetic cycles of exo_2leg with the world's scene columns: the pelvis
    walking forward, each foot's force a known vector (zero in the left foot's swing)."""
    from exo_rt.record.mcap_log import McapLog
    from exo_rt.record.recorder import cycle_columns, row_width
    from exo_rt.record.scene import scene_for_robot

    scene = scene_for_robot(ROOT / "configs/robots/exo_2leg.yaml",
                            seat={"center": [-0.3, 0.0, 0.22], "size": [0.4, 0.45, 0.44]})
    cols = cycle_columns(4)
    width = row_width(cols)
    extra = {"base": 3, "foot_force": 6, "foot_point": 6} if with_world else {}
    for name, w in extra.items():
        cols[name] = (width, width + w)
        width += w
    n = 300
    rows = np.zeros((n, width))
    t = np.arange(n) / 1000.0
    rows[:, cols["t"][0]] = t
    rows[:, cols["cycle"][0]] = np.arange(n)
    rows[:, cols["q"][0]:cols["q"][1]] = 0.3 * np.sin(np.outer(t * 6, [1, 2, 3, 4]))
    force = np.zeros((n, 2, 3))
    force[:, 0] = np.column_stack([40 * np.sin(9 * t), np.zeros(n), 500 + 300 * np.cos(7 * t)])
    force[:, 0][t > 0.15] = 0.0  # the left foot's swing
    force[:, 1] = np.column_stack([-60 + 0 * t, 5 + 0 * t, 900 - 200 * t])
    point = np.zeros((n, 2, 3))
    point[:, :, 0] = 0.1 + t[:, None]
    point[:, 1, 1] = -0.1
    meta = {"joint_names": list(scene.mech.joint_names), "rate_hz": 1000.0, "wall_start": 1.0,
            "states": ["RUN"], "causes": ["ok"]}
    if with_world:
        rows[:, cols["base"][0]:cols["base"][1]] = np.column_stack([0.5 * t, 0.93 + 0 * t,
                                                                    0.05 * t])
        rows[:, cols["foot_force"][0]:cols["foot_force"][1]] = force.reshape(n, 6)
        rows[:, cols["foot_point"][0]:cols["foot_point"][1]] = point.reshape(n, 6)
        meta["feet"] = ["left_foot", "right_foot"]
    path = tmp_path / "run.mcap"
    log = McapLog(path, cols, meta, scene=scene)
    log.set_origin(meta)
    log.rows(rows)
    log.close(meta)
    return path, rows, cols, force, point, scene


def test_ground_reaction_arrows_are_the_recorded_forces(tmp_path):
    """Synthetic forces (a world run's columns): each loaded foot's arrow starts at its
    recorded contact point, points along its force and is |F| / ARROW_N_PER_M long; a foot
    without load has none; the seat and the floor are there; /tf's world → pelvis is the
    recorded base pose."""
    from exo_rt.record.scene import ARROW_N_PER_M, SCENE_EVERY_S

    path, rows, cols, force, point, _ = _synthetic(tmp_path, with_world=True)
    msgs = _messages(path, ["/scene", "/tf"])
    ids = {e["id"] for _, m in msgs["/scene"] for e in m["entities"]}
    assert {"floor", "seat", "com", "contact/left_foot", "contact/right_foot"} <= ids
    t0 = 1_000_000_000
    checked = unloaded = 0
    every = round(SCENE_EVERY_S * 1000)
    for ns, m in msgs["/scene"]:
        for e in m["entities"]:
            if not e["id"].startswith("contact/"):
                continue
            k = (ns - t0) // 1_000_000
            assert k % every == 0
            f = 0 if e["id"].endswith("left_foot") else 1
            if np.linalg.norm(force[k, f]) == 0.0:
                assert e["arrows"] == [] and e["spheres"] == []
                unloaded += 1
                continue
            (a,) = e["arrows"]
            length = a["shaft_length"] + a["head_length"]
            assert abs(length - np.linalg.norm(force[k, f]) / ARROW_N_PER_M) < 1e-12
            p = a["pose"]["position"]
            assert np.allclose([p["x"], p["y"], p["z"]], point[k, f], atol=1e-12)
            direction = _quat_matrix(a["pose"]["orientation"]) @ [1.0, 0.0, 0.0]
            assert np.allclose(direction, force[k, f] / np.linalg.norm(force[k, f]),
                               atol=1e-9)
            checked += 1
    assert checked > 40 and unloaded > 10
    base = rows[:, cols["base"][0]:cols["base"][1]]
    for ns, m in msgs["/tf"][::37]:
        k = (ns - t0) // 1_000_000
        pos, rot = _compose(m["transforms"], "world", "pelvis")
        assert np.allclose(pos, [base[k, 0], 0.0, base[k, 1]], atol=1e-12)
        assert abs(np.arctan2(rot[0, 2], rot[0, 0]) - base[k, 2]) < 1e-12


def test_centre_of_mass_and_no_forces_without_the_world(tmp_path):
    """A test-stand run (no world columns): no contact entity; the centre of mass drawn is
    the Mechanism's (exo-rt's kinematics, the bodies' masses), at the rest height."""
    from exo_rt.dynamics import Dynamics

    path, rows, cols, _f, _p, scene = _synthetic(tmp_path, with_world=False)
    msgs = _messages(path, ["/scene"])["/scene"]
    mech = scene.mech
    dyn = Dynamics(mech)
    t0 = 1_000_000_000
    n = 0
    for ns, m in msgs:
        for e in m["entities"]:
            assert not e["id"].startswith("contact/")
            if e["id"] != "com":
                continue
            k = (ns - t0) // 1_000_000
            q = rows[k, cols["q"][0]:cols["q"][1]]
            pos, rot = dyn.frame_positions(q), dyn.frame_rotations(q)
            com = sum(mech.mass[i] * (pos[i] + rot[i] @ mech.com[i])
                      for i in range(mech.n_bodies)) / mech.mass.sum()
            p = e["spheres"][0]["pose"]["position"]
            assert np.allclose([p["x"], p["y"], p["z"] - scene.base_height], com, atol=1e-9)
            n += 1
    assert n == 30


def test_layout_has_a_3d_panel():
    """The shipped layout and a run's have a 3D panel whose URDF layer reads
    /robot_description."""
    from exo_rt.record.telemetry import layout

    text = layout(["hip", "knee"])
    assert text == (ROOT / "exo_rt/layouts/exo_leg.json").read_text()
    panels = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("panelType") == "ThreeDee":
                panels.append(node["config"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(text))
    assert len(panels) == 1
    (cfg,) = panels
    urdf = [v for v in cfg["layers"].values() if v.get("layerId") == "foxglove.Urdf"]
    assert urdf and urdf[0]["topic"] == "/robot_description"
