"""A session in the run's record (docs/sessions.md, "What a run records"): run.mcap's
/activity channel and the reference on /joints and /state, the Foxglove layout, the summary's
``session`` part, the session's files in the run folder's snapshot; and ``exo-rt check`` of a
session script, a wearer profile and an activities file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from exo_rt import cli
from exo_rt.cli.check import config_kind
from exo_rt.record.mcap_log import ACTIVITY_EVENTS, read_activity, read_mcap
from exo_rt.record.recorder import read_cycle_log
from exo_rt.runtime import snapshot
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.session.session import SessionFiles

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "exo_leg.yaml"
SCRIPT = """\
# a short session that asks for what is refused too
description: refused speed, walk, busy, stop after a stride, end
steps:
  - {request: speed, value: 9.0, at: 0.0}
  - {request: start, motion: walk}
  - {request: start, motion: sit_down, after: accepted}
  - {request: stop, after: strides 1}
  - {request: end, after: finished}
"""


@pytest.fixture(scope="module")
def session_run(tmp_path_factory):
    """A recorded run of SCRIPT on the one-leg exoskeleton: (run folder, controller)."""
    tmp = tmp_path_factory.mktemp("session")
    script = tmp / "short.yaml"
    script.write_text(SCRIPT)
    ctl = Controller(load_top(CONFIG), "sim", session=str(script))
    result = ctl.run(2.0, tmp / "run")
    assert result.summary["final_state"] == "SHUTDOWN", result.summary
    return tmp / "run", ctl


def _events(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------- run.mcap
@pytest.mark.slow
def test_run_mcap_holds_every_session_event_at_its_cycles_time(session_run):
    from mcap.reader import make_reader

    run, _ = session_run
    expected = [e for e in _events(run) if e.get("event") in ACTIVITY_EVENTS]
    kinds = {e["event"] for e in expected}
    assert {"request", "finished", "activity"} <= kinds
    assert read_activity(run / "run.mcap") == expected  # every field, in order
    report = json.loads((run / "recording.json").read_text())
    assert report["mcap_messages"]["/activity"] == len(expected)
    assert report["messages_lost"] == 0
    # on the cycles' own time line: the log time of the /state message of the same cycle
    state_ns, activity = {}, []
    with open(run / "run.mcap", "rb") as f:
        for _s, ch, msg in make_reader(f).iter_messages(topics=["/state", "/activity"]):
            if ch.topic == "/state":
                state_ns[json.loads(msg.data)["cycle"]] = msg.log_time
            else:
                activity.append((json.loads(msg.data)["cycle"], msg.log_time))
    assert activity and all(ns == state_ns[k] for k, ns in activity)


def test_the_message_ring_carries_short_messages_and_counts_what_it_loses():
    from exo_rt.record.rings import LOST, MESSAGE_HEAD, MESSAGE_SLOT, MessageRing

    ring = MessageRing(4)
    reader = MessageRing(name=ring.name)
    try:
        longest = b"x" * (MESSAGE_SLOT - MESSAGE_HEAD.size)
        assert ring.put(0.5, b'{"event":"stride"}') and ring.put(1.25, longest)
        assert not ring.put(2.0, longest + b"x")  # too long for a slot: refused, not cut
        assert reader.take() == [(0.5, b'{"event":"stride"}'), (1.25, longest)]
        for i in range(6):  # 4 fit; a full ring (nobody draining, not lockstep) loses 2
            ring.put(float(i), str(i).encode())
        assert [t for t, _ in reader.take()] == [0.0, 1.0, 2.0, 3.0]
        assert int(ring.header[LOST]) == 2 and reader.take() == []
    finally:
        reader.release()
        ring.release()


def test_run_mcap_carries_the_reference_velocity_phase_and_strides(session_run):
    run, _ = session_run
    records, _ = read_cycle_log(run / "cycles.exolog")
    again, _ = read_mcap(run / "run.mcap")
    for f in ("qd_ref", "phase", "stride"):
        assert np.array_equal(again[f], records[f], equal_nan=True), f
    assert np.nanmax(records["stride"]) >= 1.0 and np.nanmax(np.abs(records["qd_ref"])) > 0.1


def test_the_layout_shows_the_session():
    from exo_rt.record.telemetry import layout
    from exo_rt.resources import layout as shipped

    text = layout(["hip", "knee"])
    assert shipped("exo_leg").read_text() == text  # regenerated with the layout
    found = set(re.findall(r'"(?:value|topicPath)": "((?:[^"\\]|\\.)*)"', text))
    found = {json.loads(f'"{x}"') for x in found}
    assert {"/activity", "/state.phase", "/state.stride",
            '/activity{event=="activity"}.posture'} <= found


# ----------------------------------------------------------------------------- summary
def test_the_summary_counts_the_session(session_run):
    run, _ = session_run
    summary = json.loads((run / "summary.json").read_text())
    s = summary["session"]
    requests = [e for e in _events(run) if e.get("event") == "request"]
    strides = [e["steps"] for e in _events(run) if e.get("event") == "activity"]
    assert s["steps"] == strides[-1] >= 1
    assert s["requests"] == {"made": 5, "accepted": 3, "rejected": 2,
                             "by_source": {"script": 5},
                             "by_kind": {"speed": 1, "start": 2, "stop": 1, "end": 1}}
    assert len(requests) == 5
    assert s["rejected_by_reason"] == {"speed_range": 1, "busy": 1}
    assert s["motions_finished"] == {"walk": 1}
    assert (s["final_posture"], s["motion_at_end"], s["ended"]) == ("standing", None, True)


# ----------------------------------------------------------------------------- snapshot
def _ctl(session=None, wearer=None):
    """What the snapshot reads of a controller, for the files given (defaults: None)."""
    from exo_rt.session.session import load_files

    top = load_top(CONFIG)
    _, activities, w = load_files(top, session, None, wearer)
    return SimpleNamespace(top=top, options=SimpleNamespace(session=session),
                           activities=activities, wearer=w)


@pytest.mark.parametrize("wearer", [None, ROOT / "configs" / "wearers" / "default.yaml"],
                         ids=["robot-file-wearer", "wearer-file"])
def test_the_snapshot_keeps_the_session_files_for_replay(tmp_path, wearer):
    from exo_rt.session.activities import load_activities
    from exo_rt.session.script import default_path, load_session
    from exo_rt.session.wearer import load_wearer

    ctl = _ctl(wearer=str(wearer) if wearer else None)
    files = SessionFiles(ctl.options.session, ctl.activities, ctl.wearer)
    snapshot.write(ctl.top, tmp_path, snapshot.session_files(ctl.top, files))
    session, activities, wearer_copy = snapshot.recorded_session(tmp_path)
    assert session == tmp_path / "configs" / "sessions" / "default.yaml"
    assert activities == tmp_path / "configs" / "activities" / "exo_leg.yaml"
    assert wearer_copy.parent == tmp_path / "configs" / "wearers"
    assert session.read_bytes() == default_path().read_bytes()
    assert activities.read_bytes() == Path(ctl.activities.source).read_bytes()
    doc = snapshot.manifest(tmp_path)
    entries = {f["kind"]: f for f in doc["files"]}
    assert entries["wearer"]["sha256"] == ctl.wearer.sha256  # the profile as it was loaded
    snapshot.verify(tmp_path, doc)
    # read back, they are the run's: the same profile, the same steps, the same postures
    robot = ctl.top.robot
    assert load_wearer(wearer_copy, robot).sha256 == ctl.wearer.sha256
    assert load_wearer(wearer_copy, robot).speed == ctl.wearer.speed
    assert [s.describe() for s in load_session(session).steps] == \
        [s.describe() for s in load_session(default_path()).steps]
    again = load_activities(activities, robot)
    assert again.names == ctl.activities.names
    # a top config given to replay is compared with the top config's files only
    assert snapshot.differences(snapshot.recorded_files(tmp_path, doc),
                                snapshot.given_files(CONFIG)) == []
    # a copy changed after the run is refused like any other
    wearer_copy.write_text(wearer_copy.read_text() + "# edited\n")
    with pytest.raises(Exception, match="wearer file was changed"):
        snapshot.verify(tmp_path, doc)


def test_a_run_before_sessions_has_no_session_files(tmp_path):
    snapshot.write(load_top(CONFIG), tmp_path)
    assert snapshot.recorded_session(tmp_path) == (None, None, None)
    assert snapshot.recorded_session(tmp_path / "nothing") == (None, None, None)


def test_a_run_folder_keeps_its_session_files(session_run):
    run, ctl = session_run
    session, activities, wearer = snapshot.recorded_session(run)
    assert session.read_text() == SCRIPT
    assert activities.read_bytes() == Path(ctl.activities.source).read_bytes()
    assert wearer.read_text() == ctl.wearer.text


# ----------------------------------------------------------------------------- exo-rt check
def _check(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main(["check", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("path,kind", [
    *[(p, "activities") for p in sorted((ROOT / "configs" / "activities").glob("*.yaml"))],
    *[(p, "session") for p in sorted((ROOT / "configs" / "sessions").glob("*.yaml"))],
    *[(p, "wearer") for p in sorted((ROOT / "configs" / "wearers").glob("*.yaml"))],
], ids=lambda x: x if isinstance(x, str) else x.name)
def test_check_knows_each_kind_with_or_without_its_schema_line(tmp_path, path, kind):
    assert config_kind(path) == kind
    bare = tmp_path / path.name  # the same keys, no $schema line: told by its keys
    bare.write_text("".join(x for x in path.read_text().splitlines(keepends=True)
                            if "$schema" not in x))
    assert config_kind(bare) == kind


def test_check_prints_a_session_scripts_steps(capsys):
    from exo_rt.session.script import load_session

    path = ROOT / "configs" / "sessions" / "buttons_demo.yaml"
    rc, out, err = _check(capsys, path)
    assert rc == 0, err
    steps = load_session(path).steps
    lines = [x for x in out.splitlines() if re.match(r"\s+\d+\. ", x)]
    assert len(lines) == len(steps) and f"ok: {len(steps)} steps" in out
    for line, step in zip(lines, steps, strict=True):
        assert step.describe() in line
    assert "start stand_up" in lines[0] and "at 0.5 s" in lines[0]
    assert "after 4 strides" in out


def test_check_prints_a_wearer_profile_and_its_walking_table_on_a_robot(capsys):
    from exo_rt.model import load_mechanism
    from exo_rt.session.wearer import load_wearer, table

    path = ROOT / "configs" / "wearers" / "example.yaml"
    rc, out, err = _check(capsys, path)
    assert rc == 0, err
    assert "height 1.62 m, mass 58 kg, female" in out and "give --robot FILE" in out
    robot = ROOT / "configs" / "robots" / "exo_2leg.yaml"
    rc, out, err = _check(capsys, path, "--robot", robot)
    assert rc == 0, err
    rows = [[float(v) for v in x.split("|")] for x in out.splitlines()
            if re.match(r"\s+\d+\.\d+ \|", x)]
    mech = load_mechanism(robot)
    w = load_wearer(path, mech)
    speeds = sorted({w.speed.min, *w.speed.presets, w.speed.default, w.speed.max})
    want = table(speeds, mech, w)
    assert len(rows) == len(want) >= 3
    printed = (0.005, 0.05, 0.0005, 0.0005, 0.0005, 0.0005)  # half the last digit printed
    for got, row in zip(rows, want, strict=True):
        for x, y, tol in zip(got, row, printed, strict=True):
            assert x == pytest.approx(y, abs=tol * 1.001)
    # the same through the top config that names the robot
    rc, out2, err = _check(capsys, path, "--robot", ROOT / "configs" / "exo_2leg.yaml")
    assert rc == 0 and out2.replace("configs/exo_2leg.yaml", "R") == \
        out.replace("configs/robots/exo_2leg.yaml", "R")


def test_check_prints_the_activities_graph_in_words(capsys):
    from exo_rt.session.activities import load_activities

    path = ROOT / "configs" / "activities" / "exo_leg.yaml"
    rc, out, err = _check(capsys, path, "--robot", CONFIG)
    assert rc == 0, err
    top = load_top(CONFIG)
    a = load_activities(path, top.robot, top.safety.joint_margin)
    up = a.motion("stand_up")
    lines = [f"{name}: hip {q[0]:.3f}, knee {q[1]:.3f} rad" for name, q in a.postures.items()]
    lines += [f"stand_up: move sitting → standing, {up.duration:.3g} s, ≤ 0.5 rad/s (GO held)",
              "walk: walk standing → standing, opening 0.5, closing 0.5 stride (stoppable)",
              "home: home anywhere → standing, ≥ 1 s, ≤ 0.2 rad/s (stoppable, needs CONFIRM)",
              "standing: walk, sit_down", "sitting: stand_up", "in no named posture: home"]
    for line in lines:
        assert line in out, line


def test_check_of_an_activities_file_needs_the_robot(capsys):
    rc, out, err = _check(capsys, ROOT / "configs" / "activities" / "exo_leg.yaml")
    assert rc == 2 and "give --robot FILE" in err and out == ""
    rc, _, err = _check(capsys, CONFIG, "--robot", CONFIG)
    assert rc == 2 and "--robot is for an activities file, a wearer profile or a session" in err


BAD = {  # kind: (file text, the line of the mistake, what the error says)
    "session": ("steps:\n  - {request: start, motion: walk, at: 0.0}\n"
                "  - {request: jump, at: 1.0}\n", 3, "unknown request 'jump'"),
    "wearer": ("height: 1.75\nmass: 75\nsex: male\nspeed: {min: 0.5, max: 0.3}\n", 4,
               "above speed.max"),
    "activities": ("postures:\n  standing: {hip: 0.0, knee: 0.05}\nmotions:\n"
                   "  walk: {kind: walk, from: standing, to: standin}\n", 4,
                   "unknown posture 'standin'"),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_check_names_a_mistake_by_file_and_line(tmp_path, capsys, kind):
    text, line, what = BAD[kind]
    path = tmp_path / f"bad_{kind}.yaml"
    path.write_text(text)
    assert config_kind(path) == kind
    rc, out, err = _check(capsys, path, *(("--robot", CONFIG) if kind == "activities" else ()))
    assert rc == 2 and f"{path}:{line}:" in err and what in err, err
    assert "Traceback" not in err
