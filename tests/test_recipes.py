"""docs/architecture.md's recipes, followed: a request kind, a control law, a drive protocol, a
plant model and a bench procedure, each added in a fixture that touches only the registries
of the files its recipe names (at run time: the entries put in place and taken out again),
and each shown accepted where it is declared and refused where it is not. The recipes name
at most three files for a request kind and at most two for the others."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest
from hil_fixtures import sim_bench
from test_plant_registry import RigidGearPlant
from test_protocols import Clone

from exo_rt.bus import protocols
from exo_rt.bus.config import load_buses
from exo_rt.control import registry as laws
from exo_rt.control.config import load_controller
from exo_rt.cycle import step as cy
from exo_rt.errors import ConfigError
from exo_rt.hil import procedures
from exo_rt.hil import registry as bench_procedures
from exo_rt.model import load_mechanism
from exo_rt.runtime.config import load_top
from exo_rt.session import machine as activity_machine
from exo_rt.session import session as sessions
from exo_rt.sim import plants
from firmware_bridge import requests as rq
from firmware_bridge.requests import Request

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
ROBOT = CONFIGS / "robots" / "exo_leg.yaml"
LIMITS = {"A request kind": 3, "A control law": 2, "A drive protocol": 2,
          "A plant model": 2, "A bench procedure": 2}


def recipe_files(title: str) -> list[str]:
    """The files docs/architecture.md's recipe ``title`` names (its ``Files:`` sentence)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Recipes", 1)[1].split("\n## ", 1)[0]
    found = re.search(rf"\*\*{title}\.\*\* Files: (.*?)\.\s", section, re.S)
    assert found, f"no recipe '{title}' with its Files: in docs/architecture.md"
    return re.findall(r"`([\w./-]+\.\w+)`", found.group(1))


def defined_in(obj) -> str:
    """The repository path of the file that defines ``obj`` (a function, a class, a module)."""
    return Path(inspect.getsourcefile(obj)).resolve().relative_to(ROOT).as_posix()


@pytest.mark.parametrize("title", sorted(LIMITS))
def test_every_recipe_names_its_files_within_the_limit(title):
    files = recipe_files(title)
    assert files, f"docs/architecture.md's recipe '{title}' names no file"
    assert len(files) <= LIMITS[title], files
    for f in files:  # NAME: the new entry's own module; every other file exists
        assert "NAME" in f or (ROOT / f).is_file(), f


# ----------------------------------------------------------------------------- a request kind
PAUSE = max(rq.KINDS) + 1  # appended after the last code (never renumbered)


def _pause(m: activity_machine.ActivityMachine, req: Request) -> rq.Answer:
    """The new kind's handler: accepted in a posture (nothing changes), refused ``busy``
    while a motion runs."""
    if m.motion is not None:
        return m._no(req, rq.R_BUSY)
    return m._yes(req)


@pytest.fixture
def pause_declared(monkeypatch):
    """The recipe's requests.py step: the code and its name (``KINDS``, ``BY_NAME``)."""
    monkeypatch.setitem(rq.KINDS, PAUSE, "pause")
    monkeypatch.setitem(rq.BY_NAME, "pause", PAUSE)
    return PAUSE


@pytest.fixture
def pause_handled(pause_declared, monkeypatch):
    """The recipe's machine.py step: its handler in ``HANDLERS``."""
    monkeypatch.setitem(activity_machine.HANDLERS, PAUSE, _pause)
    return PAUSE


def _session():
    """A session on a fresh cycle of the default robot, begun (the leg in no posture)."""
    top = load_top(CONFIGS / "exo_leg.yaml")
    cycle = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1.0 / top.rate_hz)
    events: list[dict] = []
    sess = sessions.build(cycle, top, events, cycle.p["dt"], 10.0)
    sess.begin(0)
    return sess, events


def test_a_request_kind_touches_the_files_its_recipe_names(pause_handled):
    files = recipe_files("A request kind")
    assert defined_in(rq) in files and defined_in(activity_machine) in files
    header = (ROOT / "firmware_bridge" / "c" / "exo_bridge.h").read_text(encoding="utf-8")
    assert "EB_K_END 12u" in header and "firmware_bridge/c/exo_bridge.h" in files


def test_a_new_request_kind_is_handled_as_its_handler_says(pause_handled):
    """Accepted in a posture, refused ``busy`` while the HOME it confirmed runs; recorded in
    the events by its name, and asked again from them as replay asks (the same answers)."""
    sess, events = _session()
    k = 1
    answers = []
    for req in (Request(PAUSE, rq.CONSOLE), Request(rq.START, rq.CONSOLE, motion="home"),
                Request(rq.CONFIRM, rq.CONSOLE), Request(PAUSE, rq.CONSOLE)):
        answers.append(sess.ask(req, k))
        k += 1
    assert [(a.answer, a.reason) for a in answers] == [
        (rq.ACCEPTED, rq.R_NONE), (rq.REJECTED, rq.R_NEEDS_CONFIRM), (rq.ACCEPTED, rq.R_NONE),
        (rq.REJECTED, rq.R_BUSY)]
    asked = [e for e in events if e["event"] == "request" and e["request"] == "pause"]
    assert [(e["answer"], e.get("reason")) for e in asked] == [("accepted", None),
                                                             ("rejected", "busy")]
    again, _ = _session()  # replay: the recorded requests, by name, at their cycles
    recorded = sessions.Recorded(events)
    replayed = [again.ask(req, c) for c in range(1, k) for req in recorded.poll(c)]
    assert [(a.answer, a.reason) for a in replayed] == [(a.answer, a.reason) for a in answers]


def test_a_request_kind_without_its_handler_is_refused(pause_declared):
    sess, events = _session()
    ans = sess.ask(Request(PAUSE, rq.SCRIPT), 1)
    assert (ans.answer, ans.reason) == (rq.REJECTED, rq.R_UNKNOWN_MOTION)
    assert events[-1]["request"] == "pause" and events[-1]["answer"] == "rejected"


# ----------------------------------------------------------------------------- a control law
LAW = "zero_torque_recipe"


def zero_torque(m, d):
    """No torque at all: the law that adds nothing."""
    for j in range(d.q.shape[0]):
        d.tau[j] = 0.0


@pytest.fixture
def law():
    """The recipe's registry.py step: the law registered (its module is this file)."""
    laws.law(LAW, doc="no torque, defined by a recipe's test")(zero_torque)
    yield LAW
    laws.unregister(LAW)


def _controller(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "controller.yaml"
    path.write_text(f"law: {name}\njoints:\n  hip: {{kp: 0, kd: 0}}\n  knee: {{kp: 0, kd: 0}}\n"
                    "current_limit: 20.0\nvelocity_filter_hz: 300\n"
                    "reference: {type: gait, period: 2.0}\n")
    return path


def test_a_law_touches_the_files_its_recipe_names(law, tmp_path):
    files = recipe_files("A control law")
    assert defined_in(laws.law) in files
    robot = load_mechanism(ROBOT)
    cfg = load_controller(_controller(tmp_path, law), robot)  # a controller file names it
    assert cfg.law == law and laws.code(law) == len(list(laws.NAMES)) - 1  # numbered last
    assert laws.get(law).torque is zero_torque


def test_a_law_not_registered_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=f"unknown law '{LAW}'"):
        load_controller(_controller(tmp_path, LAW), load_mechanism(ROBOT))


# ----------------------------------------------------------------------------- a drive protocol
PROTOCOL = "clone_recipe"


@pytest.fixture
def protocol():
    """The recipe's protocols/__init__.py step: the family registered (its module: here)."""
    family = Clone()
    family.name = PROTOCOL
    protocols.register(family)
    yield PROTOCOL
    protocols.unregister(PROTOCOL)


def _bus_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "bus.yaml"
    path.write_text((CONFIGS / "buses" / "exo_leg_mit.yaml").read_text(encoding="utf-8")
                    .replace("protocol: mit", f"protocol: {name}"), encoding="utf-8")
    return path


def test_a_protocol_touches_the_files_its_recipe_names(protocol, tmp_path):
    files = recipe_files("A drive protocol")
    assert defined_in(protocols.register) in files
    (bus,) = load_buses(_bus_file(tmp_path, protocol), load_mechanism(ROBOT))
    assert bus.protocol == protocol  # a bus file names it; its host is the family's
    assert protocols.get(protocol).host_class().__name__ == "MitDrives"


def test_a_protocol_not_registered_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=f"unknown protocol '{PROTOCOL}'"):
        load_buses(_bus_file(tmp_path, PROTOCOL), load_mechanism(ROBOT))


# ----------------------------------------------------------------------------- a plant model
PLANT = "rigid_gear_recipe"


@pytest.fixture
def plant():
    """The recipe's plants.py step: the model registered (its module: the plant test's)."""
    plants.model(PLANT, doc="rigid transmission, for a recipe's test")(RigidGearPlant)
    yield PLANT
    plants.unregister(PLANT)


def _top(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "top.yaml"
    path.write_text(f"robot: {ROBOT}\nbuses: {CONFIGS / 'buses' / 'exo_leg.yaml'}\n"
                    f"controller: {CONFIGS / 'controllers' / 'computed_torque.yaml'}\n"
                    f"rate_hz: 1000\nsimulation: {{plant: {name}}}\n", encoding="utf-8")
    return path


def test_a_plant_touches_the_files_its_recipe_names(plant, tmp_path):
    files = recipe_files("A plant model")
    assert defined_in(plants.model) in files
    top = load_top(_top(tmp_path, plant))  # a top config names it
    assert top.simulation.plant == plant
    made = plants.create(plant, top.robot)
    assert isinstance(made, RigidGearPlant)
    made.reset(np.array([0.3, 0.6]))  # its state as the interface lays it out
    assert made.joint_positions == pytest.approx([0.3, 0.6])


def test_a_plant_not_registered_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=PLANT):
        load_top(_top(tmp_path, PLANT))


# ----------------------------------------------------------------------------- a bench procedure
PROCEDURE = "hold_recipe"


def hold(bench, *, seconds: float = 0.05) -> dict:
    """Every joint held where it is, at zero current, for ``seconds``: the cycles it ran and
    how far the joints moved (rad)."""
    bench.start()
    q0 = bench.q.copy()
    cycles = int(round(seconds / bench.dt))
    for _ in range(cycles):
        bench.cycle(np.zeros(bench.n))
    bench.disable_all()
    return {"cycles": cycles, "moved_rad": float(np.max(np.abs(bench.q - q0)))}


@pytest.fixture
def procedure():
    """The recipe's hil/registry.py step: the procedure registered (its module: here)."""
    bench_procedures.procedure(PROCEDURE, per_joint=False,
                               moves="nothing: every joint at zero current for 0.05 s")(hold)
    yield PROCEDURE
    bench_procedures.unregister(PROCEDURE)


def test_a_procedure_touches_the_files_its_recipe_names(procedure, tmp_path):
    files = recipe_files("A bench procedure")
    assert defined_in(bench_procedures.procedure) in files
    assert PROCEDURE in bench_procedures.names()
    top = load_top(CONFIGS / "exo_leg.yaml")
    assert any("nothing: every joint" in line
               for line in procedures.checklist(PROCEDURE, top, None))
    out = procedures.run_procedure(PROCEDURE, sim_bench(), tmp_path / "report")
    assert out["cycles"] == 50 and out["moved_rad"] < 0.05  # the leg sags little in 50 ms


def test_a_procedure_not_registered_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=f"unknown bench procedure '{PROCEDURE}'"):
        procedures.run_procedure(PROCEDURE, None, tmp_path)
