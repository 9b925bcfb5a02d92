"""A world run's recording, heel strikes and replay (docs/world.md, "What a world run
records"): the simulation's own truth — pelvis pose, each foot's ground reaction and centre
of pressure, the seat — in run.mcap beside the controller's records; the board's heel strikes
from the world's foot contacts; plant and controller replay of a world run.

Measured (lockstep, this machine): standing on the shipped ``exo_2leg`` with the default
wearer, the feet's summed vertical reaction is the whole weight (95.70 kg × 9.81) to 7e-6
over the last second; every heel strike the estimate took in a 4 s world walk is the cycle
the first leg's foot loaded; plant replay of that walk
reproduces the joints to 2e-15° RMS, controller replay bit for bit (0 A).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from exo_rt import cli
from exo_rt.record.recorder import read_cycle_log, read_header, row_width
from exo_rt.record.rings import RecordRing
from exo_rt.record.world_log import WorldLog
from exo_rt.sim import world_truth

ROOT = Path(__file__).resolve().parents[1]
G = 9.81
WEIGHT_KG = 95.70  # exo_2leg's robot file (50.49 kg) and the upper body on the pelvis
HOME_STAND_END = """description: home, stand 1 s, end
steps:
  - {request: start, motion: home, at: 0.0}
  - {request: confirm, after: rejected}
  - {request: end, after: finished, wait: 1.0}
"""


def _top(tmp: Path, robot: str, simulation: str) -> Path:
    """A top config in ``tmp`` for a shipped robot and bus file (absolute paths)."""
    c = ROOT / "configs"
    path = tmp / "top.yaml"
    path.write_text(
        f"robot: {c / 'robots' / robot}\nbuses: {c / 'buses' / 'exo_2leg.yaml'}\n"
        f"controller: {c / 'controllers' / 'computed_torque.yaml'}\nrate_hz: 1000\n"
        "stop: {duration: 0.5}\n"
        "safety: {joint_margin: 0.02, tracking_error: 0.15, action: zero_current,\n"
        "         reference_acceleration: {hip: 12.0, knee: 50.0}}\n"
        f"simulation: {simulation}\nlogging: {{runs: {tmp / 'runs'}}}\n")
    return path


def _run(tmp: Path, *args: str) -> tuple[int, Path]:
    out = tmp / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXO_RT_WARMUP", "0")
        rc = cli.main(["run", "--config", str(tmp / "top.yaml"), "--out", str(out), *args])
    return rc, out


def _messages(run: Path, topics) -> dict[str, list[dict]]:
    from mcap.reader import make_reader

    out: dict[str, list[dict]] = {t: [] for t in topics}
    with open(run / "run.mcap", "rb") as f:
        for _s, channel, message in make_reader(f).iter_messages(topics=list(topics)):
            out[channel.topic].append(json.loads(message.data))
    return out


@pytest.fixture(scope="module")
def standing(tmp_path_factory):
    """The shipped two-leg exoskeleton with its wearer on the floor: home, stand 1 s, end."""
    tmp = tmp_path_factory.mktemp("standing")
    _top(tmp, "exo_2leg.yaml", "{plant: world, scene: floor}")
    (tmp / "stand.yaml").write_text(HOME_STAND_END)
    rc, out = _run(tmp, "--session", str(tmp / "stand.yaml"))
    assert rc == 0, json.loads((out / "summary.json").read_text())
    return out


@pytest.mark.slow
def test_a_world_run_records_the_pelvis_and_the_ground_reactions(standing):
    """run.mcap's /world holds every cycle's truth; standing, the feet's vertical reactions
    add up to the whole weight (1 %) — not the exoskeleton's alone: the check tells them
    apart; the 3D scene's /tf puts the pelvis where /world says, /scene draws the seat."""
    records, meta = read_cycle_log(standing / "cycles.exolog")
    m = _messages(standing, ("/world", "/tf", "/scene"))
    world = m["/world"]
    assert len(world) == len(records) and [w["cycle"] for w in world] == \
        records["cycle"].tolist()
    assert set(world[0]["force"]) == {"left_foot", "right_foot"}  # the scene's feet
    fz = np.array([[w["force"][f]["z"] for f in w["force"]] for w in world])
    last = fz[-1000:].sum(axis=1)  # the last second, standing
    weight = WEIGHT_KG * G
    assert np.all(np.abs(last / weight - 1.0) < 0.01), (last.min(), last.max())
    assert abs(last.mean() / (50.49 * G) - 1.0) > 0.5  # the exoskeleton alone: far off
    # each loaded foot's centre of pressure between its heel and toe, on the floor
    for w in world[-1000::100]:
        for f, p in w["point"].items():
            assert p["z"] == 0.0 and -0.10 < p["x"] - w["base"]["x"] < 0.25, (f, p)
    pelvis = [t["transforms"][0] for t in m["/tf"]]
    assert pelvis[-1]["child_frame_id"] == "pelvis"
    assert pelvis[-1]["translation"]["z"] == pytest.approx(world[-1]["base"]["z"], abs=1e-12)
    assert 0.85 < world[-1]["base"]["z"] < 0.95  # m: the hip axis over straight legs
    seat = [e for s in m["/scene"] for e in s["entities"] if e["id"] == "seat"]
    assert seat and seat[0]["cubes"][0]["pose"]["position"]["z"] == pytest.approx(0.225)
    # each foot's ground-reaction arrow is its recorded force at the docs' scale (1000 N per
    # m: docs/telemetry.md): shaft + head = |F| / 1000 of one cycle's /world force, to 1e-9
    from exo_rt.record.scene import ARROW_N_PER_M

    arrows = [(e["id"].split("/", 1)[1], a["shaft_length"] + a["head_length"])
              for sc in m["/scene"] for e in sc["entities"] if e["id"].startswith("contact/")
              for a in e["arrows"]]
    assert len(arrows) >= 4
    norms = {f: np.array([np.linalg.norm([w["force"][f][k] for k in "xyz"]) for w in world])
             for f in world[0]["force"]}
    for foot, length in arrows:
        assert np.min(np.abs(norms[foot] / ARROW_N_PER_M - length)) < 1e-9, (foot, length)
    assert ARROW_N_PER_M == 1000.0
    # the controller's log holds none of it: its records are what it measured
    columns, header = read_header(standing / "cycles.exolog")
    assert "base" not in columns and header["world"]["feet"] == ["left_shank", "right_shank"]
    report = json.loads((standing / "recording.json").read_text())
    assert report["mcap_messages"]["/world"] == len(records) and not report["errors"]


@pytest.mark.slow
def test_the_test_stand_records_no_world(tmp_path):
    """The world plant on the test stand (and every other plant, and real buses) has no
    truth to record: no /world, no world in the header, the pelvis at rest in /tf."""
    _top(tmp_path, "exo_2leg.yaml", "{plant: world}")
    rc, out = _run(tmp_path, "--duration", "0.3")
    m = _messages(out, ("/world", "/tf"))
    assert not m["/world"] and m["/tf"]
    _, header = read_header(out / "cycles.exolog")
    assert "world" not in header
    assert len({t["transforms"][0]["translation"]["z"] for t in m["/tf"]}) == 1


def test_the_join_takes_the_row_of_the_sync_a_cycle_answers():
    """Each record takes the truth row stamped at or before wall_start + t + lead_s; a record
    before any row gets NaN (no /world message), and rows no record needs any more go."""
    cols = world_truth.columns(1, 2)
    width = row_width(cols)
    ring = RecordRing(64, width)
    try:
        meta = {"world": {"columns": cols, "feet": ["shank"], "joints": ["hip", "knee"],
                          "lead_s": 1.25e-3}, "wall_start": 100.0}
        log = WorldLog(RecordRing(name=ring.name), meta)
        for k in range(1, 6):  # the world's rows at its SYNCs: 1 … 5 ms after the start
            row = np.full(width, float(k))
            row[0] = 100.0 + k * 1e-3
            ring.put(row)
        records = np.zeros((5, 3))
        records[:, 0] = [-0.002, 0.0, 0.001, 0.002, 0.010]  # t (s)
        wide = log.join(records)
        base = wide[:, 3]
        assert np.isnan(base[0])  # before the first row
        np.testing.assert_array_equal(base[1:], [1.0, 2.0, 3.0, 5.0])  # the last: the newest
        assert wide[2, -1] == pytest.approx(0.002)  # sim_t: the row's own run time
        sent = []
        assert log.rows(wide, np.arange(5), lambda *a: sent.append(a)) == 4
        assert json.loads(sent[0][1])["base"] == {"x": 1.0, "z": 1.0, "pitch": 1.0}
        assert len(log.held) == 1  # only the newest row is kept
        log.ring.release()
    finally:
        ring.release()


def test_the_board_reads_the_world_feet():
    """In the world the emulated board's foot-sole pressures are the feet's vertical
    reactions (N), not its gait timer's."""
    from firmware_bridge.emulator import BoardEmulator

    board = BoardEmulator(clock=lambda: 0.0, transport="socket", stride_s=1.0)
    try:
        assert board.pressures(0.2) == (board.heel_pressure(0.2), 0) == (358, 0)  # the
        board.soles = lambda: (0, 612)  # timer's heel, 20 % into its stride: loaded
        assert board.pressures(0.2) == (0, 612)
    finally:
        board.close()


# --- a walk in the world: heel strikes and replay ----------------------------------------
@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The sized two-leg exoskeleton walking 4 s on the floor: configs/exo_2leg_world.yaml
    with the shipped default session (home, walk, stop, end: the walk alone, not the
    config's own from the chair), the flat-foot gait (docs/world.md, "Walking on the
    floor")."""
    out = tmp_path_factory.mktemp("walk") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXO_RT_WARMUP", "0")
        rc = cli.main(["run", "--config", str(ROOT / "configs" / "exo_2leg_world.yaml"),
                       "--session", str(ROOT / "configs" / "sessions" / "default.yaml"),
                       "--duration", "4", "--out", str(out)])
    assert rc == 0, json.loads((out / "summary.json").read_text())
    return out


def _loadings(fz: np.ndarray, on: float = 200.0, off: float = 100.0) -> np.ndarray:
    """The cycles a foot's vertical reaction rises through ``on`` N from unloaded (below
    ``off`` since its last loading): the board link's heel-strike detector's thresholds."""
    loaded, out = False, []
    for k, z in enumerate(fz):
        if loaded:
            loaded = z >= off
        elif z >= on:
            loaded = True
            out.append(k)
    return np.array(out)


@pytest.mark.slow
def test_heel_strikes_come_from_the_world_feet(walk):
    """Every heel strike the gait-phase estimate took is a loading of the first leg's foot in
    the world, within 2 periods (those reported before RUN are taken in its first cycle: a
    loading in READY); against the other foot's loadings most are not — the check can
    fail."""
    records, _ = read_cycle_log(walk / "cycles.exolog")
    world = _messages(walk, ("/world",))["/world"]
    fz = np.array([[w["force"][f]["z"] for f in ("left_foot", "right_foot")] for w in world])
    strikes = np.flatnonzero(np.diff(records["heels"]) > 0) + 1
    first_run = int(np.flatnonzero(records["state"] == records["state"][strikes[0]])[0])
    later = strikes[strikes > first_run]
    assert len(later) >= 3
    left, right = _loadings(fz[:, 0]), _loadings(fz[:, 1])
    gap = np.abs(later[:, None] - left[None, :]).min(axis=1)
    assert gap.max() <= 2, gap
    if strikes[0] == first_run:
        assert left[0] <= first_run  # a loading before RUN, taken in its first cycle
    assert np.mean(np.abs(later[:, None] - right[None, :]).min(axis=1) > 2) > 0.5


@pytest.mark.slow
def test_replay_of_a_world_run(walk, tmp_path):
    """Plant replay of the world walk reproduces its joints to ≤ 0.01° RMS (the world placed
    from the run's start pose with the run's room); controller replay is bit-identical. On
    the test stand instead (the room's scene changed) the joints are far off."""
    from exo_rt.runtime import replay

    plant = replay.replay_plant(walk)
    rms = [j["rms_error_deg"] for j in plant["joints"].values()]
    assert plant["cycles"] > 4000 and max(rms) <= 0.01, plant
    ctl = replay.replay_controller(walk)
    assert ctl["max_abs_command_diff_A"] == 0.0 and ctl["first_diff_cycle"] is None, ctl
    config = walk / "config.yaml"
    other = tmp_path / "config.yaml"
    other.write_text(config.read_text().replace("scene: floor", "scene: test_stand"))
    (tmp_path / "configs").symlink_to(walk / "configs")  # the run's copies beside it
    moved = replay.replay_plant(replay.open_run(walk, other, allow_config_change=True))
    assert max(j["rms_error_deg"] for j in moved["joints"].values()) > 0.1


def _read(path: Path, topics) -> dict[str, list[dict]]:
    from mcap.reader import make_reader

    out: dict[str, list[dict]] = {t: [] for t in topics}
    with open(path, "rb") as f:
        for _s, channel, message in make_reader(f).iter_messages(topics=list(topics)):
            out[channel.topic].append(json.loads(message.data))
    return out


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_the_plant_replay_draws_the_replayed_world(walk):
    """A world run's plant replay MCAP carries the replayed world's truth (issue 45: a run and
    its replay watched side by side): its /tf puts the pelvis where the run's does (the plant
    replay reproduces the run: to 1e-8 m over the last 500 cycles, 1.0e-9 m measured 2 m on),
    and its /scene draws the feet's ground-reaction arrows and the seat."""
    from exo_rt.runtime import replay

    out = replay.replay(walk, "plant")
    assert out["mcap"] == "replay-plant.mcap"
    run = _messages(walk, ("/tf",))["/tf"]
    rep = _read(walk / "replay-plant.mcap", ("/tf", "/scene"))
    pelvis = [[[t for t in m["transforms"] if t["child_frame_id"] == "pelvis"][0]["translation"]
               for m in msgs] for msgs in (run, rep["/tf"])]
    assert len(pelvis[1]) and len(pelvis[0]) - len(pelvis[1]) == 2  # from cycle 2
    for a, b in zip(pelvis[0][-500:], pelvis[1][-500:], strict=True):
        assert abs(a["x"] - b["x"]) < 1e-8 and abs(a["z"] - b["z"]) < 1e-8, (a, b)
    assert max(abs(p["x"]) for p in pelvis[1]) > 0.0  # the pelvis moves: not its rest pose
    ids = {e["id"] for m in rep["/scene"] for e in m["entities"] if e["arrows"] or e["cubes"]}
    assert "seat" in ids and any(i.startswith("contact/") for i in ids), ids


@pytest.mark.exclusive  # timed on the wall clock (tests/cpu_share.py)
def test_the_realtime_simulation_hands_its_truth_over():
    """With ``--realtime`` the simulation's process serves the world: the board it emulates
    reads the world's feet, and the command line ``truth RING`` (sent by the control process
    when its recording starts) puts a row per physics period into that ring (the advance that
    ends one), stamped with the wall clock; a name that is no ring is ignored."""
    import time

    from exo_rt.bus.config import load_buses
    from exo_rt.model import load_mechanism
    from exo_rt.sim.server import RealtimeServer
    from exo_rt.sim.simbus import SimWorld
    from firmware_bridge.emulator import BoardEmulator

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml")
    world = SimWorld(robot, load_buses(ROOT / "configs" / "buses" / "exo_2leg.yaml", robot),
                     plant_model="world", plant_room={"scene": "floor"})
    world.reset([0.0, 0.05, 0.0, 0.05])
    board = BoardEmulator(transport="socket")
    try:
        server = RealtimeServer(world, {}, board=board)
        assert board.soles == world.truth.soles
        cols = world.truth.cols
        ring = RecordRing(16, row_width(cols))
        try:
            server.command("truth no-such-ring")
            server.command(f"truth {ring.name}")
            before = time.time()
            world.advance()
            world.advance(5e-4)
            world.advance(5e-4)
            rows = ring.take()
            assert len(rows) == 2 and np.all(rows[:, 0] >= before)
            fz = rows[-1, cols["foot_force"][0] + 2: cols["foot_force"][1]: 3]
            assert np.all(fz > 100.0)  # N: both feet on the floor (just put there: settling)
            assert board.soles() == tuple(int(z) for z in fz)
        finally:
            world.truth.ring.release()
            ring.release()
    finally:
        board.close()


def _reference_reactions(truth) -> tuple[np.ndarray, np.ndarray]:
    """Each foot's force and Σ f_z·(x, y) by MuJoCo's own ``mj_contactForce``, contact by
    contact in Python (how the truth row took them before its compiled kernel)."""
    import mujoco

    m, d = truth.model, truth.plant.mj_data
    force, moment, f6 = np.zeros_like(truth.force), np.zeros_like(truth.moment), np.zeros(6)
    for i in range(d.ncon):
        g1, g2 = d.contact.geom[i]
        pushed = truth.pushers[g1] != 0
        foot = truth.foot_of[g2 if pushed else g1]
        if foot < 0:
            continue
        mujoco.mj_contactForce(m, d, i, f6)
        f = d.contact.frame[i].reshape(3, 3).T @ f6[:3]
        f = f if pushed else -f
        force[foot] += f
        moment[foot] += f[2] * d.contact.pos[i, :2]
    return force, moment


def test_the_feet_s_reactions_are_mujoco_s_contact_forces():
    """The truth row's feet (:func:`world_truth.foot_reactions`, compiled) against MuJoCo's
    ``mj_contactForce`` (the independent reference), seated on the chair, standing, and along
    a stride of the flat-foot gait (feet sliding, swinging, landing: tangential forces),
    every physics period: equal to 1e-9 relative (both sum the same pyramid edges)."""
    from exo_rt.model import load_mechanism
    from exo_rt.sim.world.standing import drives_pd
    from exo_rt.sim.world_plant import Room, WorldPlant

    plant = WorldPlant(load_mechanism(ROOT / "configs" / "robots" / "exo_2leg.yaml"),
                       room=Room(scene="floor", wearer_damping=1.0, seat_height=0.45))
    truth = world_truth.WorldTruth(plant)
    clock = type("Clock", (), {"realtime": False, "t": 0.0})
    seen = {"contacts": 0, "tangential": 0.0}
    for pose in ([1.55, 1.55, 1.55, 1.55], [0.0, 0.05, 0.0, 0.05]):
        q = np.array(pose)
        plant.reset(q)
        for k in range(300):
            target = q + (0.25 * np.sin(2 * np.pi * k / 300.0) * np.array([1, 1, -1, 1])
                          if pose[0] == 0.0 else 0.0)
            plant.step(drives_pd(plant, target))
            truth.update(clock)
            force, moment = _reference_reactions(truth)
            scale = max(1.0, float(np.abs(force).max()))
            assert np.abs(truth.force - force).max() <= 1e-9 * scale, (k, truth.force, force)
            assert np.abs(truth.moment - moment).max() <= 1e-9 * scale
            seen["contacts"] = max(seen["contacts"], int(plant.mj_data.ncon))
            seen["tangential"] = max(seen["tangential"], float(np.abs(force[:, 0]).max()))
    assert seen["contacts"] >= 4 and seen["tangential"] > 1.0, seen
