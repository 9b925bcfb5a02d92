"""Config files as declared schemas (exo_rt/schema/): every shipped config validates against
its shipped JSON Schema with an independent validator (jsonschema) and loads to the same
arrays and dataclasses as with the hand-written loaders; the schema files, the docs' key
tables and the configs' $schema lines are up to date; the defects the schemas closed stay
closed (negative periods and times in a bus file, text for a flag)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from exo_rt import schema
from exo_rt.errors import ConfigError, ExoError, ModelError
from exo_rt.schema import core

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = [(kind, p) for kind in schema.KINDS for p in schema.shipped(ROOT, kind)]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "path"), SHIPPED,
                         ids=[str(p.relative_to(ROOT)) for _, p in SHIPPED])
def test_shipped_configs_validate_against_their_json_schema(kind, path):
    js = json.loads(schema.schema_path(ROOT, kind).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(js)
    errors = list(jsonschema.Draft202012Validator(js).iter_errors(
        yaml.safe_load(path.read_text(encoding="utf-8"))))
    assert not errors, [e.message for e in errors]
    assert path.read_text(encoding="utf-8").splitlines()[0] == schema.modeline(ROOT, path, kind)


def test_every_kind_has_shipped_files_and_the_json_schema_refuses_a_stranger():
    assert {k for k, _ in SHIPPED} == set(schema.KINDS)
    js = schema.json_schema("top")
    v = jsonschema.Draft202012Validator(js)
    good = {"robot": "r.yaml", "buses": "b.yaml", "controller": "c.yaml"}
    assert v.is_valid(good)
    assert not v.is_valid({**good, "rate": 1000})  # unknown key
    assert not v.is_valid({**good, "realtime": {"priority": 120}})  # out of range


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_loads_are_identical_to_the_hand_written_loaders():
    from tests.config_snapshot import before, capture

    old = before()
    new = json.loads(json.dumps(capture()))
    for kind, files in old.items():
        for name, snap in files.items():
            if kind == "top":  # (the ALIGN state went with sessions, and its duration)
                snap = {k: v for k, v in snap.items() if k != "align_s"}
            got = _without_assistance(new[kind][name], snap)  # (the assistance laws' gains
            # came after the others', and the phase estimate's section)
            assert _same(got, snap), f"{kind} {name} loads differently"


def _without_assistance(got, snap):
    """``got`` with every controller in it (a controller file's load, a top config's) less
    what the assistance laws added (:func:`_assistance_added`)."""
    if isinstance(got, dict) and isinstance(snap, dict):
        if got.get("__class__") == "ControllerConfig" and "phase_estimate" not in snap:
            return _assistance_added(got, snap)
        return {k: _without_assistance(v, snap[k]) if k in snap else v for k, v in got.items()}
    return got


def _assistance_added(got: dict, snap: dict) -> dict:
    """A controller's load less what the assistance laws added: the gains' new fields (after
    the old ones in each record) and the ``phase_estimate`` section, at its defaults."""
    assert got["phase_estimate"] == json.loads(json.dumps(capture_default_estimate()))
    got = {k: v for k, v in got.items() if k != "phase_estimate"}
    gains, old = dict(got["gains"]), snap["gains"]
    (rows, width), old_width = gains["shape"], old["shape"][1]
    gains["data"] = [x for r in range(rows)
                     for x in gains["data"][r * width: r * width + old_width]]
    gains["shape"] = [rows, old_width]
    return {**got, "gains": gains}


def capture_default_estimate():
    from exo_rt.schema.controller import PhaseEstimate
    from tests.config_snapshot import snapshot
    return snapshot(PhaseEstimate())


def _same(a, b) -> bool:
    """Equal, floats to 1e-13 relative: derived values (a segment's inertia from the
    anthropometric tables, a closed loop's solved reference) are sums and iterations whose
    rounding follows numpy's summation order, which changes between numpy builds (seen:
    0.06749999999999998 / …99, and a four-bar's solved angle 5e-15 apart)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-13 * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_generated_files_are_up_to_date():
    """configs/schemas/*.schema.json, the docs' tables and the $schema lines come from the
    schemas: run `exo-rt schema --write` after changing one."""
    for kind, (_m, _t, _g, doc) in schema.KINDS.items():
        path = schema.schema_path(ROOT, kind)
        assert path.read_text(encoding="utf-8") == schema.json_text(kind), \
            f"{path} is stale: run exo-rt schema --write"
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert text == schema.docs_text(text, kind), f"{doc} is stale: run exo-rt schema --write"


def test_schema_command_prints_a_kind(tmp_path):
    res = subprocess.run([sys.executable, "-m", "exo_rt", "schema", "robot"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and json.loads(res.stdout)["title"] == "exo-rt robot file"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "schema"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2 and "give one of" in res.stderr and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------- closed defects
BUS = """\
buses:
  - name: leg
    heartbeat_ms: 100
    drives:
      - {joint: hip, node: 1}
      - {joint: knee, node: 2}
"""


@pytest.fixture(scope="module")
def robot():
    from exo_rt.model import load_mechanism

    return load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")


@pytest.mark.parametrize(("old", "new", "words"), [
    ("heartbeat_ms: 100", "heartbeat_ms: -100  #<", ["heartbeat_ms -100", "0…65535"]),
    ("heartbeat_ms: 100", "bitrate: -1000000  #<", ["bitrate -1000000", "10000…8000000"]),
    ("heartbeat_ms: 100", "heartbeat_ms: 100\n    faults:\n      - {kind: drop, node: 1, "
                          "at: -1.0}  #<", ["at -1 is negative"]),
    ("heartbeat_ms: 100", "heartbeat_ms: 100\n    faults:\n      - {kind: drop, node: 1, "
                          "at: 1.0, duration: -2}  #<", ["duration -2 is negative"]),
    ("{joint: knee, node: 2}", "{joint: knee, node: 2.5}  #<", ["node id 2.5 is not a whole"]),
    ("heartbeat_ms: 100", "heartbeat_ms: 100\n    drive_watchdog: {sync_watchdog: 'false'}  #<",
     ["sync_watchdog 'false' is not true or false"]),
    ("heartbeat_ms: 100", "heartbet_ms: 100  #<", ["unknown key 'heartbet_ms'",
                                                   "did you mean 'heartbeat_ms'"]),
])
def test_bad_bus_values_are_one_line_with_file_and_line(tmp_path, robot, old, new, words):
    from exo_rt.bus.config import load_buses

    text = BUS.replace(old, new)
    path = tmp_path / "bus.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_buses(path, robot)
    msg = str(err.value)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "#<" in s)
    assert f"{path}:{line}: " in msg and " — " in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize(("kind", "text", "words"), [
    ("controller", "law: model_pid\ninertia_feedforward: 'false'  #<\n",
     ["inertia_feedforward 'false' is not true or false"]),
    ("controller", "law: pid\nfriction_compensation: no  #<\n",
     ["friction_compensation False"]),  # YAML 1.1's no is false: allowed
    ("controller", "law: pid\nvelocity_filtr_hz: 80  #<\n",
     ["did you mean 'velocity_filter_hz'"]),
    ("robot", "transmissions:\n  - joint: knee\n    ratio: 100\n    rotor: {mass: 0.3, "
              "inertia: {ixx: 1e-5}}\n    drive: {cubic: 'false'}  #<\n    motor: "
              "{torque_constant: 0.04, rated_current: 3, peak_current: 10}\n",
     ["cubic 'false' is not true or false"]),
    ("bench", "chirp: {amplitude: 0.02, f1: -10}  #<\n", ["f1 -10 is not above 0"]),
    ("bench", "chirp: {amplitud: 0.02}  #<\n", ["did you mean 'amplitude'"]),
])
def test_text_is_not_a_flag_and_unknown_keys_get_a_suggestion(tmp_path, robot, kind, text,
                                                              words):
    from tests.test_model_errors import GOOD

    path = tmp_path / f"{kind}.yaml"
    path.write_text(GOOD + text if kind == "robot" else text)
    try:
        if kind == "controller":
            from exo_rt.control.config import load_controller

            cfg = load_controller(path, robot)
            assert words == ["friction_compensation False"] and not cfg.friction_compensation
            return
        if kind == "robot":
            from exo_rt.model import load_mechanism

            load_mechanism(path)
        else:
            from exo_rt.hil.procedures import load_options

            load_options(path, "chirp")
    except (ConfigError, ModelError) as err:
        msg = str(err)
        line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if "#<" in s)
        assert f"{path}:{line}: " in msg and " — " in msg, msg
        for w in words:
            assert w in msg, msg
    else:
        pytest.fail("no error")


# ----------------------------------------------------------------------------- one declaration
def test_bench_options_match_the_procedures_and_are_checked():
    from exo_rt.hil import registry
    from exo_rt.hil.procedures import check_options, load_options
    from exo_rt.schema.bench import BenchFile

    for name, proc in registry.registered().items():
        cls = BenchFile.KEYS[name].metadata["schema"].type.cls
        sig = {k: p.default for k, p in inspect.signature(proc.run).parameters.items()
               if p.default is not inspect.Parameter.empty}
        assert sig == core.defaults(cls), name
    assert check_options("friction", {"speeds": (0.12, 0.5)}) == {"speeds": (0.12, 0.5)}
    with pytest.raises(ConfigError, match="unknown key 'sped'.*did you mean 'speeds'"):
        check_options("friction", {"sped": 1})
    opts = load_options(ROOT / "configs" / "bench" / "example.yaml", "chirp")
    assert opts == {"amplitude": 0.02, "f1": 10.0}


def test_python_defaults_agree_with_the_files():
    """Dataclasses that code also builds directly keep the defaults the schemas declare."""
    import dataclasses

    from exo_rt.bus import mit
    from exo_rt.bus.config import DriveWatchdog
    from exo_rt.model.transmission import HarmonicDrive, Motor
    from exo_rt.schema import buses, robot

    def own(cls):
        return {f.name: f.default for f in dataclasses.fields(cls)
                if f.default is not dataclasses.MISSING}

    drive = core.defaults(robot.Drive)
    drive.pop("catalogue")
    assert {k: own(HarmonicDrive)[k] for k in drive} == drive
    assert {k: own(Motor)[k] for k in core.defaults(robot.Motor)} == core.defaults(robot.Motor)
    assert own(mit.MitRanges) == core.defaults(buses.MitRanges)
    w = buses.Watchdog()
    assert DriveWatchdog() == DriveWatchdog(
        w.heartbeat_periods, buses.ABORT_CONNECTION[w.abort_connection],
        buses.ERROR_BEHAVIOUR[w.error_behaviour], w.sync_watchdog, w.required)


def test_python_values_are_read_like_a_file():
    node = core.node_of({"priority": 0}, "<test>", "realtime", ConfigError)
    from exo_rt.schema.top import RealtimeConfig

    with pytest.raises(ExoError, match=r"<test>: realtime.priority: priority 0 is not a whole "
                                       r"number in 1…99 — SCHED_FIFO"):
        core.read(RealtimeConfig, node)
    assert core.read(RealtimeConfig, core.node_of({}, "<test>", "rt")) == RealtimeConfig()
    assert core.doc_table(RealtimeConfig).count("\n") == 5  # header, rule, cpu, priority, latency
