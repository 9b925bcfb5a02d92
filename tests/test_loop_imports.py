"""Nothing is imported while the control loop runs: a module's first import takes ms (the
emulated wearer's ``exo_rt.sim.crutch``, imported at the session's first cycle, took 2 ms and
with its ``WearerRun`` made there a 4.5–5.3 ms cycle of a real-time run — the cycle the
simulation's answers then came late to; a leading wearer's kernels, loaded at its first
period, imported 70 of numba's modules there).

A run in a fresh interpreter with an audit hook (``sys.addaudithook``: the ``import`` event
fires for each module not yet in ``sys.modules``) records every import from the end of the
loop's first cycle until the loop ends (the controller's ``_after_write``: False once the run
is over), in every thread. The run is lockstep — the controller's loop is the same code in
real time, where the emulated wearer's feet are made in the same place
(:meth:`exo_rt.runtime.controller.Controller._activate`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys, threading
from exo_rt.runtime import controller
seen, loop = [], [False]
after_write = controller.Controller._after_write
def probed(self, k):
    loop[0] = k >= 1
    going = after_write(self, k)
    loop[0] = loop[0] and going
    return going
controller.Controller._after_write = probed
def hook(event, args):
    if event == "import" and loop[0]:
        seen.append([args[0], threading.current_thread().name])
sys.addaudithook(hook)
from exo_rt.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
loop[0] = False
print("IMPORTED " + json.dumps(seen))
sys.exit(code or 0)
"""


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
@pytest.mark.parametrize("wearer", [None, "configs/wearers/leading.yaml"],
                         ids=["passive", "leading"])
def test_the_control_loop_imports_nothing(tmp_path, wearer):
    args = ["run", "--duration", "0.6", "--out", str(tmp_path / "run")]
    if wearer is not None:
        args += ["--wearer", str(ROOT / wearer)]
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("IMPORTED "))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cycles"] > 500  # the loop ran into RUN (READY is 20 cycles)
    assert json.loads(line[len("IMPORTED "):]) == []
