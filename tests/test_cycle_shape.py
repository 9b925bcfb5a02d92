"""The shape of the cycle's code: every function on the cycle's path takes at most 8
parameters (arguments travel as the cycle's and the buses' model and data, read by field
name); the cycle's steps are written once — the controller, model-in-the-loop, the bench and
replay run the one step (:func:`exo_rt.cycle.step.step`) and its one velocity estimate.
How long a module is, is left to review and to the layering test (tests/test_layers.py)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "exo_rt"

ONE_CALL = PKG / "cycle" / "cycle_call.py"
REPLAY = PKG / "runtime" / "replay.py"
# the cycle's path: the cycle and the run around it, the buses, the laws, and the three other
# users of the cycle
PATH = [*sorted((PKG / "cycle").glob("*.py")), *sorted((PKG / "runtime").glob("*.py")),
        *sorted((PKG / "bus").rglob("*.py")), *sorted((PKG / "control").glob("*.py")),
        PKG / "sim" / "mil.py", PKG / "hil" / "bench.py", REPLAY]
MAX_PARAMS = 8


def parameters(node: ast.FunctionDef) -> int:
    """A function's parameters, ``self``/``cls`` not counted; ``*args``/``**kw`` count one."""
    a = node.args
    n = (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None)
         + (a.kwarg is not None))
    first = (a.posonlyargs + a.args)[:1]
    return n - (1 if first and first[0].arg in ("self", "cls") else 0)


def too_many(paths) -> list[str]:
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = parameters(node)
                if n > MAX_PARAMS:
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    out.append(f"{where}:{node.lineno} {node.name}: {n}")
    return out


def test_no_function_on_the_cycles_path_takes_more_than_eight_parameters():
    found = too_many(PATH)
    assert not found, ("take the cycle's or a bus's model and data (exo_rt/structs.py) "
                       "instead of positional arrays:\n  " + "\n  ".join(found))


def test_the_count_can_fail(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f(a, b, c, d, e, f, g, h, i):\n    pass\n"
                   "class C:\n    def m(self, a, b, c, d, e, f, g, h):\n        pass\n"
                   "def k(*args, **kw):\n    pass\n")
    assert len(too_many([src])) == 1 and " f: 9" in too_many([src])[0]


def _calls(path: Path) -> set[str]:
    """Dotted names called in a module (``cy.step``, ``cycle.estimate`` …)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f, parts = node.func, []
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                out.add(".".join([f.id, *reversed(parts)]))
    return out


def test_every_user_runs_the_one_step():
    """The controller (its compiled cycle), model-in-the-loop and the bench call the cycle's
    step and estimate; replay runs the controller itself; nothing else estimates velocity."""
    assert ONE_CALL.exists() and REPLAY.exists()
    one_call = ONE_CALL  # (it calls cy.step through its address)
    assert "a.step" in _calls(one_call) and "cy.STEP_VALUE" in one_call.read_text()
    assert "cy.step" in _calls(PKG / "sim" / "mil.py")
    bench = {c.rsplit(".", 1)[-1] for c in _calls(PKG / "hil" / "bench.py")}
    assert bench & {"step", "estimate"}, "the bench measures through the cycle"
    assert "Controller" in _calls(REPLAY)
    users = [p for p in PKG.rglob("*.py") if "velocity_update" in p.read_text()]
    assert not users, f"a second velocity estimate: {users}"



def test_the_segment_is_a_record_of_its_own_declared_once(exo_leg, exo_leg_alone):
    """The session's reference segment is the cycle data's ``seg`` (one SEGMENT record,
    declared with the data's fields), apart from the scalars: the segment's code reads and
    writes its fields there, never in the scalars, and Python's ``cycle.seg`` is the same
    memory as the compiled code's."""
    import re

    import numpy as np

    from exo_rt import structs
    from exo_rt.control.config import load_controller
    from exo_rt.cycle import layout
    from exo_rt.cycle import step as cy
    from exo_rt.sim.mil import MIL_SAFETY

    assert "seg" in cy.CycleData.FIELDS
    assert dict(cy.CYCLE_DATA.field_dict)["seg"] == structs.records(layout.SEGMENT)
    assert not set(layout.SEGMENT.names) & set(layout.SCALARS.names)
    fields = "|".join(layout.SEGMENT.names)
    for module in ("segment.py", "step.py", "cycle_call.py"):
        text = (PKG / "cycle" / module).read_text()
        assert not re.search(rf"\bs\.({fields})\b", text), module  # (never the scalars')
    cfg = load_controller(ROOT / "configs" / "controllers" / "pid.yaml", exo_leg)
    c = cy.build(exo_leg, exo_leg_alone, cfg, MIL_SAFETY, dt=1e-3)
    assert c.data.seg is c.seg_array and np.shares_memory(c.seg, c.seg_array)
    assert c.seg["seg_kind"] == 2.0 and c.seg["a_period"] == c.period  # (walk_from_start)



def hand_widths(paths) -> list[tuple[Path, int]]:
    """(file, line) wherever a row's width is computed by hand from its columns
    (``max(b for _, b in ….values())``) rather than by :func:`exo_rt.record.recorder.
    row_width`."""
    import re

    pattern = re.compile(r"max\(\s*\w+\s+for\s+_,\s*\w+\s+in\s+[\w.()]+\.values\(\)\s*\)")
    return [(p, i) for p in paths
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]


def test_the_row_width_is_computed_in_one_place(tmp_path):
    """Only recorder.row_width adds a row's columns up; every writer, reader and test asks
    it (the check finds a width computed by hand, planted)."""
    from exo_rt.record import recorder

    paths = [p for d in ("exo_rt", "tools", "tests") for p in sorted((ROOT / d).rglob("*.py"))
             if p != Path(__file__).resolve()]
    found = [p.relative_to(ROOT).as_posix() for p, _ in hand_widths(paths)]
    assert found == ["exo_rt/record/recorder.py"]  # (row_width itself)
    cols = recorder.cycle_columns(3)
    assert recorder.row_width(cols) == sum(b - a for a, b in cols.values())
    planted = tmp_path / "m.py"
    planted.write_text("w = max(b for _, b in self.cols.values())\n", encoding="utf-8")
    assert hand_widths([planted]) == [(planted, 1)]
