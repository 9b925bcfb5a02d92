"""The drives' current peaks in the world config's own session (docs/world.md, "Stand up,
walk, sit down" and "Walking on the floor"): configs/exo_2leg_world.yaml run without
--session (configs/sessions/sit_walk_sit.yaml, ``--duration 6``) — the default wearer stands
up from the chair, walks, stops and sits down, half their weight on a harness.

What issue 44 asks before that session can be ``exo-rt run``'s default: every joint's current
below the sized drives' 30 A peak with a margin, the windings below their warning. The world
controller feeds the stance leg's load forward (``stance_load``: −J_aᵀ f from the board's
sole sensors); the session here runs with the cycle bound to the board link's decoder state
(:meth:`exo_rt.cycle.step.Cycle.bind_board`, which the controller does not call yet: see the
fixture). Measured (``python tools/landing_currents.py RUN``): every part of the walk still
reaches the peak — the opening step (30 A at both hips), the strides (30 A at each joint),
the closing step (30 A) — while standing up and sitting down stay within 13 A; the windings
at most 47.8 °C. At the hips' peaks over the strides the feedback M(q)(K_p e + K_d ė) asks
15.9–17.3 A (21.6–23.4 A without the load fed forward) and the rest — the stance load's
−J_aᵀ f with the friction compensation — 14.3–26.2 A: the load is no longer the feedback's
model error, and it alone asks for most of what the drive has at a heel strike. The tracking
RMS falls from 0.23–0.32° to 0.16–0.22°.
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
    _bind_board(mp)
    out = tmp_path_factory.mktemp("peaks") / "run"
    try:
        rc = cli.main(["run", "--config", str(ROOT / "configs" / "exo_2leg_world.yaml"),
                       "--duration", "6", "--out", str(out)])
    finally:
        mp.undo()
    s = json.loads((out / "summary.json").read_text())
    assert rc == 0 and s["final_state"] == "SHUTDOWN" and not s["faults"], s
    return out, s


def _bind_board(mp) -> None:
    """The cycle reads the foot-sole sensors from the board link's decoder state: bound here
    after the controller builds its cycle, until exo_rt/runtime/controller.py does it itself
    (``c.bind_board(self.board)``, and ``BoardLink.decoder_state``; issue 44)."""
    from exo_rt.runtime import controller as ctl

    allocate = ctl.Controller._allocate

    def bound(self, history, cycle):
        allocate(self, history, cycle)
        board = self.board
        self.cycle.bind_board(getattr(board, "decoder_state", getattr(board, "_st", None)))

    mp.setattr(ctl.Controller, "_allocate", bound)


def _sizing(out: Path):
    from exo_rt.record.sizing import size_runs

    return size_runs([out])[0]


@pytest.mark.slow
def test_the_stance_load_takes_the_feedback_s_share_not_the_peaks(session):
    """Where the session's currents peak and which term asks for them
    (tools/landing_currents.py): standing up and sitting down stay within 13 A; the strides
    reach ≥ 27 A; at each hip's peak over the strides the feedback asks less than 20 A
    (measured 15.9–17.3 A; 21.6–23.4 A without the stance load fed forward) and the rest, the
    stance load's term with the friction compensation, more than 10 A (14.3–26.2 A); every
    joint tracks to within 0.25° RMS (0.16–0.22°; 0.23–0.32° without it)."""
    sys.path.insert(0, str(ROOT))
    from tools import landing_currents

    out, summary = session
    rms = {j: v["rms_error_deg"] for j, v in summary["joints"].items()}
    assert max(rms.values()) < 0.25, rms
    text = landing_currents.measure(out)
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]]
            for line in text.splitlines()[2:7]}
    assert set(rows) == {"before", "opening", "steady", "closing", "after"}, text
    assert max(rows["before"]) < 13.0 and max(rows["after"]) < 16.0, text
    assert max(rows["steady"]) >= 27.0, text  # (the landings; the opening and closing steps
    # are the plan's, exo_rt/control/flat_foot.py: their figures are docs/world.md's)
    for line in text.splitlines():
        if "_hip" in line and " = " in line:
            total, terms = line.split(" A = ")
            _ff, fb, rest = (float(x) for x in terms.split(" + "))
            assert abs(fb) < 20.0 and abs(rest) > 10.0, line


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue 44: the walk's landings and its opening and "
                   "closing steps reach the drives' 30 A peak, the stance load fed forward "
                   "or not (docs/world.md, Not done yet)")
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
