"""The drives' current peaks in the world config's own session (docs/world.md, "Stand up,
walk, sit down" and "Walking on the floor"): configs/exo_2leg_world.yaml run without
--session (configs/sessions/sit_walk_sit.yaml, ``--duration 6``) — the default wearer stands
up from the chair, walks, stops and sits down, half their weight on a harness.

What issue 44 asks before that session can be ``exo-rt run``'s default: every joint's current
below the sized drives' 30 A peak with a margin, the windings below their warning. Measured
(``python tools/landing_currents.py RUN``): every part of the walk reaches it — the opening
step (30 A at both hips), the strides (hips 30 A at each landing, knees 28–29 A), the
closing step (30 A) — while standing up and sitting down stay within 14 A; the windings at
most 48 °C. At the landings' peaks the computed torque's feedback, M(q)(K_p e + K_d ė), asks
for most of it (hips 21.6–23.4 A of 30 A; its feedforward along the reference 4.1–7.3 A): the
stance leg's load on the floor is model error to the controller's hanging-leg model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from exo_rt import cli

ROOT = Path(__file__).resolve().parents[1]
MARGIN = 0.9  # of the drive's peak current: what a default run may reach


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The world config's own session, run once: (run folder, summary)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("EXO_RT_WARMUP", "0")
    out = tmp_path_factory.mktemp("peaks") / "run"
    try:
        rc = cli.main(["run", "--config", str(ROOT / "configs" / "exo_2leg_world.yaml"),
                       "--duration", "6", "--out", str(out)])
    finally:
        mp.undo()
    s = json.loads((out / "summary.json").read_text())
    assert rc == 0 and s["final_state"] == "SHUTDOWN" and not s["faults"], s
    return out, s


def _sizing(out: Path):
    from exo_rt.record.sizing import size_runs

    return size_runs([out])[0]


@pytest.mark.slow
def test_the_landings_peaks_are_the_feedback_s(session):
    """Where the session's currents peak and which term asks for them
    (tools/landing_currents.py): standing up and sitting down stay within 14 A; the walk's
    parts reach ≥ 27 A; at each hip's peak over the strides the feedback term is the largest
    (measured 21.6–23.4 A of 30 A, the feedforward 4.1–7.3 A)."""
    sys.path.insert(0, str(ROOT))
    from tools import landing_currents

    out, _ = session
    text = landing_currents.measure(out)
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]]
            for line in text.splitlines()[2:7]}
    assert set(rows) == {"before", "opening", "steady", "closing", "after"}, text
    assert max(rows["before"]) < 13.0 and max(rows["after"]) < 16.0, text
    for part in ("opening", "steady", "closing"):
        assert max(rows[part]) >= 27.0, text
    for line in text.splitlines():
        if "_hip" in line and " = " in line:
            total, terms = line.split(" A = ")
            ff, fb, _rest = (float(x) for x in terms.split(" + "))
            assert abs(fb) > 2.0 * abs(ff) and abs(fb) > 15.0, line


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue 44: the walk's landings and its opening and "
                   "closing steps reach the drives' 30 A peak (docs/world.md, Not done yet)")
def test_the_session_stays_below_the_drives_peak_current(session):
    """The target: every joint's peak current within MARGIN of its drive's peak, every
    winding below its limit — then the session can be `exo-rt run`'s default. Strict: when
    it passes, this marker has to go."""
    out, _ = session
    sizing = _sizing(out)
    over = {j: round(s.figures.peak_current, 2) for j, s in sizing.items()
            if s.figures.peak_current > MARGIN * s.rating.peak_current}
    assert not over, over
    assert all(s.figures.peak_winding < s.rating.max_winding for s in sizing.values())
