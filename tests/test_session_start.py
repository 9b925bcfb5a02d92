"""Session scripts declare where they start (``start: POSTURE``, docs/config-session.md):
the simulated leg is put there, a ``--start-pose`` that is elsewhere and a measured leg that
is elsewhere are refused in one line naming each joint; ``exo-rt check`` checks a script
against the activities file it will run with and names it; the crutch's demo runs as shipped,
from sitting, to SHUTDOWN."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from exo_rt import cli
from exo_rt.cli.run import _session_start
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.session.activities import default_path as activities_path
from exo_rt.session.activities import load_activities
from exo_rt.session.script import (
    ScriptSource,
    check_run_start,
    check_start,
    default_path,
    load_session,
    start_pose,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "sessions" / "buttons_demo.yaml"
DEMO_START_LINE = 10  # buttons_demo.yaml's 'start: sitting'


@pytest.fixture(scope="module")
def activities():
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    return load_activities(activities_path("exo_leg"), robot)


@pytest.fixture(scope="module")
def demo(activities):
    return load_session(DEMO, activities)


def test_a_script_names_its_start_posture_and_the_leg_is_put_there(activities, demo):
    assert demo.start == "sitting" and demo.start_where.line == DEMO_START_LINE
    assert start_pose(demo, activities) == [0.9, 1.3]  # rad: hip, knee (the posture's)
    default = load_session(default_path(), activities)
    assert default.start is None and start_pose(default, activities) is None
    # the simulated bus: the script's posture unless --start-pose; real drives: as given
    assert _session_start(demo, activities, None, "sim") == [0.9, 1.3]
    assert _session_start(demo, activities, [0.85, 1.38], "sim") == [0.85, 1.38]
    assert _session_start(demo, activities, None, "socketcan:can0") is None
    assert _session_start(default, activities, [0.3, 0.4], "sim") == [0.3, 0.4]


@pytest.mark.hazard("H-SESSION-START")
def test_a_leg_elsewhere_is_refused_in_one_line_naming_each_joint(activities, demo):
    check_start(demo, activities, [0.81, 1.39])  # within 0.1 rad of sitting: begins
    with pytest.raises(ConfigError) as err:
        check_start(demo, activities, [0.02, 1.3])
    assert str(err.value) == (
        f"{DEMO}:{DEMO_START_LINE}: start: the session starts sitting, but the leg is not "
        "there: hip 0.02 rad (not 0.9 ± 0.1) — put the leg in sitting (each joint within "
        "0.1 rad), or home it first: a session without 'start' that asks 'start home' (to "
        "standing, after CONFIRM), as `exo-rt run` without --session does")
    with pytest.raises(ConfigError, match=r"start: the session starts sitting, but --start-"
                                          r"pose 0 0\.05 is not there: hip 0 rad \(not 0\.9 "
                                          r"± 0\.1\), knee 0\.05 rad \(not 1\.3 ± 0\.1\) — "
                                          r"leave --start-pose out: the simulated leg is put "
                                          r"in sitting$"):
        _session_start(demo, activities, [0.0, 0.05], "sim")


@pytest.mark.hazard("H-SESSION-START")
def test_the_controllers_check_on_real_drives_reads_the_runs_script(activities, demo):
    """What the controller calls once real drives are enabled at zero current (the measured
    leg): the run's script's start posture, nothing for a script without one or no script."""
    def run(session):
        script = SimpleNamespace(source=ScriptSource(session, duration=10.0, dt=0.001))
        return SimpleNamespace(script=script, machine=SimpleNamespace(activities=activities))

    check_run_start(run(demo), [0.9, 1.3])
    with pytest.raises(ConfigError, match=r"starts sitting, but the leg is not there: hip "
                                          r"0 rad \(not 0\.9 ± 0\.1\), knee 0\.05 rad"):
        check_run_start(run(demo), [0.0, 0.05])
    check_run_start(run(load_session(default_path(), activities)), [0.0, 0.05])
    check_run_start(SimpleNamespace(script=None, machine=None), [0.0, 0.05])  # console alone


def _check(capsys, *argv):
    code = cli.main(["check", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("text", "line", "what"), [
    ("steps:\n  - {request: start, motion: standup, at: 0.5}\n", 2,
     "steps[0].motion: unknown motion 'standup' — did you mean 'stand_up'?"),
    ("start: sittting\nsteps:\n  - {request: go, at: 0.5}\n", 1,
     "start: unknown posture 'sittting' to start in — did you mean 'sitting'?"),
    ("steps:\n  - {request: level, value: 0.5, legs: [left], at: 0.5}\n", 2,
     "steps[0].legs: unknown leg 'left' — the robot's legs: "),
])
def test_check_refuses_what_the_activities_it_runs_with_lack(tmp_path, capsys, text, line,
                                                             what):
    """`exo-rt check` passed a misspelt motion that `run` then refused: it checks the script
    against the activities file `exo-rt run --session` loads (the default config's)."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    code, out, err = _check(capsys, path)
    assert code == 2 and out == ""
    assert err == f"exo-rt: error: {path}:{line}: {what}\n"


def test_check_names_the_activities_and_where_the_script_starts(tmp_path, capsys):
    code, out, err = _check(capsys, DEMO.relative_to(ROOT))
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert lines[1].startswith("  checked against configs/activities/exo_leg.yaml ") or \
        lines[1].startswith(f"  checked against {ROOT / 'configs/activities/exo_leg.yaml'} ")
    assert lines[2] == ("  starts sitting (hip 0.9, knee 1.3 rad): the simulated leg is put "
                        "there; on real drives the session begins only with every joint "
                        "within 0.1 rad of it")
    assert lines[-2:] == ["  the run's --duration unless given: 45 s", "ok: 12 steps"]
    # another activities file: what it lacks is refused, naming it
    other = tmp_path / "acts.yaml"
    text = (ROOT / "configs" / "activities" / "exo_leg.yaml").read_text()
    other.write_text(text.replace("sitting", "sitting_low"))
    code, out, err = _check(capsys, DEMO, "--activities", other)
    assert code == 2 and err == (f"exo-rt: error: {DEMO}:{DEMO_START_LINE}: start: unknown "
                                 f"posture 'sitting' to start in — did you mean 'sitting_low'?\n")
    code, out, err = _check(capsys, other, "--activities", other, "--robot",
                            ROOT / "configs" / "exo_leg.yaml")
    assert code == 2 and "--activities is for a session script" in err


@pytest.mark.slow
@pytest.mark.hazard("H-SESSION-START")
def test_the_buttons_demo_runs_as_shipped_from_sitting_to_shutdown(tmp_path):
    """`exo-rt run --config configs/exo_leg.yaml --session configs/sessions/buttons_demo.yaml`,
    no other flag: the leg starts sitting, every step of the script is made and accepted, the
    session ends with the script's END (42.4 s), SHUTDOWN, exit 0."""
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--session", str(DEMO),
                          "--config", "configs/exo_leg.yaml", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["final_state"] == "SHUTDOWN" and s["faults"] == []
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    first = next(e for e in events if e.get("event") == "activity")
    assert first["posture"] == "sitting" and first["possible"] == ["stand_up"]
    asked = [(e["request"], e["source"], e["answer"]) for e in events
             if e.get("event") == "request"]
    assert [a[0] for a in asked] == ["start", "go", "go_release", "start", "speed", "speed",
                                     "speed", "stop", "start", "go", "go_release", "end"]
    assert {(a[1], a[2]) for a in asked} == {("script", "accepted")}
    done = [e["motion"] for e in events if e["event"] == "finished"]
    assert done == ["stand_up", "walk", "sit_down"]
    end = next(e for e in events if e.get("request") == "end")
    assert 42.3 <= end["t"] <= 42.5  # s: the session's 42.4 s, from the first RUN cycle
    assert "final state SHUTDOWN" in res.stdout and "session script stalled" not in res.stderr
