"""The controller as a typed shell (issue 46): the helpers around the run receive a small run
context — a frozen record of exactly what they use, or explicit arguments — not the
controller; and nothing in the run, its session or the bench probes a run object for an
attribute it may lack (``getattr``/``hasattr``): the records declare what is there.

Read from the signatures (the annotations as written: ``from __future__ import
annotations``) and, for the probes, from the source with :mod:`ast`."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from exo_rt.runtime import derating
from exo_rt.runtime.run_record import RecordingStart, RunRecord
from exo_rt.session import session as sessions
from exo_rt.session import web
from exo_rt.session.figures import FinishedSession, session_figures
from exo_rt.sim import crutch

ROOT = Path(__file__).resolve().parents[1]
# where no run object is probed: the run around the cycle, its session, the bench, and the
# emulated wearer's session sources
UNPROBED = ("exo_rt/runtime", "exo_rt/session", "exo_rt/hil", "exo_rt/sim/crutch.py")
CONTROLLER_NAMES = {"ctl", "controller"}

# helper → the run context it takes first (None: explicit arguments)
HELPERS = [
    (sessions.for_run, sessions.SessionRun),
    (crutch.WearerGait, crutch.WearerRun),
    (sessions.ConsoleSink, sessions.ConsoleRun),
    (web.WebConsole, web.WebRun),
    (RunRecord.start, RecordingStart),
    (derating.Watch, None),
    (session_figures, FinishedSession),
]


def controller_parameters(fn) -> list[str]:
    """The parameters of ``fn`` (a class: its ``__init__``) that look like the controller: one
    so named, or annotated with it."""
    sig = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
    return [p.name for p in sig.parameters.values()
            if p.name in CONTROLLER_NAMES or "Controller" in str(p.annotation)]


def first_annotation(fn) -> str:
    params = [p for p in inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
              .parameters.values() if p.name != "self"]
    return str(params[0].annotation)


@pytest.mark.parametrize(("helper", "context"), HELPERS,
                         ids=[h.__qualname__ for h, _ in HELPERS])
def test_a_helper_takes_its_run_context_not_the_controller(helper, context):
    assert controller_parameters(helper) == []
    if context is None:
        return
    assert first_annotation(helper) == context.__name__
    assert dataclasses.is_dataclass(context) and context.__dataclass_params__.frozen
    fields = dataclasses.fields(context)
    assert not [f.name for f in fields
                if f.name in CONTROLLER_NAMES or "Controller" in str(f.type)]


def test_the_signature_check_can_fail():
    def takes_it(ctl, out_dir=None):
        pass

    class Shell:
        def __init__(self, owner: Controller) -> None:  # noqa: F821 (a string annotation)
            pass

    assert controller_parameters(takes_it) == ["ctl"]
    assert controller_parameters(Shell) == ["owner"]


def probes(path: Path) -> list[str]:
    """``getattr``/``hasattr`` calls in ``path`` on anything but an imported module (where a
    name may be missing on some platforms: ``getattr(os, "SCHED_RESET_ON_FORK", 0)``)."""
    tree = ast.parse(path.read_text(), str(path))
    modules = {a.asname or a.name.partition(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.Import) for a in node.names}
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in modules)):
            out.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:"
                       f"{node.lineno} {ast.unparse(node)}")
    return out


def test_no_run_object_is_probed_for_an_attribute():
    paths = [path for d in UNPROBED for path in ((ROOT / d,) if d.endswith(".py")
                                                  else sorted((ROOT / d).rglob("*.py")))]
    found = [p for path in paths for p in probes(path)]
    assert not found, ("declare the attribute on the run's record instead of probing for "
                       "it:\n  " + "\n  ".join(found))


def test_the_probe_check_can_fail(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n"
                   "def f(ctl):\n"
                   "    a = getattr(os, 'SCHED_RESET_ON_FORK', 0)\n"
                   "    return getattr(ctl.rig, 'board_emulated', False), hasattr(ctl, 'x')\n")
    found = probes(src)
    assert len(found) == 2 and ":4 getattr(ctl.rig" in found[0]
