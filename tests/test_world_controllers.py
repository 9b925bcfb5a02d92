"""Every shipped controller in the world (docs/world.md, "Every controller on the floor";
tools/world_controllers.py): the rows the world needed fixing end SHUTDOWN — the plain PID
and the event-phased computed torque with their world gains and a passive wearer, the laws
that follow the wearer with a leading one — and the leading wearer's figures (docs/
assistance.md's, measured again in the world): the gait-phase estimate's error and the
wearer's effort at assistance level 1 against level 0. The leading wearer's torque itself
(:class:`exo_rt.sim.walker.Leader`) is checked against its formula.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt.cycle.layout import V_QDDR, V_QDR, V_QR, V_WIDTH
from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism
from exo_rt.session.wearer import load_wearer
from exo_rt.sim import walker as wk
from exo_rt.sim.plants import ST_EXT, ST_Q, ST_V

ROOT = Path(__file__).resolve().parents[1]
ROBOT = ROOT / "configs" / "robots" / "exo_2leg_sized.yaml"
WEARERS = ROOT / "configs" / "wearers"


def _tool():
    sys.path.insert(0, str(ROOT))
    from tools import world_controllers

    return world_controllers


def test_the_wearer_profile_declares_who_leads():
    robot = load_mechanism(ROBOT)
    assert load_wearer(WEARERS / "default.yaml", robot).role == "passive"
    assert load_wearer(WEARERS / "leading.yaml", robot).role == "leading"


def test_the_table_gives_the_wearer_by_the_law():
    """The laws registered to follow the wearer run with the leading wearer, the others with
    the passive one; the world variants are no rows of their own."""
    t = _tool()
    names = t.rows()
    assert "pid_world" not in names and "computed_torque_events_world" not in names
    lead = {n for n in names if t.wearer_for(t.CONTROLLERS / f"{n}.yaml") == "leading"}
    assert lead == {"assist_as_needed", "impedance", "phase_profile", "transparent"}


def test_the_leading_wearers_torque_is_their_limbs_and_their_impedance():
    """τ_w = ID_wearer(q_p, q̇_p, q̈_p) + K (q_p − q) + D (q̇_p − q̇), with the stance values
    on the joints whose foot carries more than the threshold and the swing's on the others."""
    robot, exo = load_mechanism(ROBOT), load_mechanism(ROBOT, wearer=False)
    n = robot.nq
    rng = np.random.default_rng(7)
    v = np.zeros((V_WIDTH, n))
    v[V_QR], v[V_QDR], v[V_QDDR] = rng.normal(0, 0.3, n), rng.normal(0, 1, n), rng.normal(0, 5, n)
    state = np.zeros((ST_EXT + 1, n + 8))
    state[ST_Q, :n], state[ST_V, :n] = rng.normal(0, 0.3, n), rng.normal(0, 1, n)
    lead = wk.Leader(robot, exo, v, ["left_shank", "right_shank"])
    force = np.array([[0.0, 0.0, 400.0], [0.0, 0.0, 20.0]])  # left in stance, right in swing
    lead.apply(state, force, 1.5)
    ff = (Dynamics(robot).inverse_dynamics(v[V_QR], v[V_QDR], v[V_QDDR])
          - Dynamics(exo).inverse_dynamics(v[V_QR], v[V_QDR], v[V_QDDR]))
    for j, name in enumerate(robot.joint_names):
        k, d = ((wk.STANCE_STIFFNESS["*"], wk.STANCE_DAMPING["*"]) if name.startswith("left")
                else (wk.FIRM_STIFFNESS["*"], wk.FIRM_DAMPING["*"]))
        want = ff[j] + k * (v[V_QR, j] - state[ST_Q, j]) + d * (v[V_QDR, j] - state[ST_V, j])
        assert state[ST_EXT, j] == pytest.approx(want, rel=1e-9, abs=1e-9)
    log = lead.torques()
    assert log.shape == (1, 1 + n) and log[0, 0] == 1.5
    np.testing.assert_array_equal(log[0, 1:], state[ST_EXT, :n])


@pytest.mark.slow
def test_the_fixed_rows_end_shutdown(capsys, monkeypatch):
    """The rows the world needed fixing, through the default session's walk (4 s): the
    event-phased computed torque (its world variant, passive wearer) does not end SAFE. (The
    plain PID's row: tests/test_world_walk.py's ``test_the_controllers_table_runs``; the four
    laws that follow the wearer run the same session's 8 s walk with the leading wearer to
    SHUTDOWN below: ``test_the_leading_wearers_figures`` and
    ``test_the_phase_estimate_follows_the_floors_walk``.)"""
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    only = ["computed_torque_events"]
    assert _tool().main(["--only", *only, "--sessions", "default", "--duration", "4"]) == 0
    table = [ln for ln in capsys.readouterr().out.splitlines()
             if ln.startswith("| ") and not ln.startswith("| controller")]
    assert len(table) == len(only), table
    for line in table:
        assert line.endswith("| SHUTDOWN |"), line


@pytest.mark.slow
def test_the_leading_wearers_figures(tmp_path, monkeypatch):
    """docs/assistance.md's figures in the world (docs/world.md, "The leading wearer"),
    ``assist_as_needed`` through the default session's 8 s walk at level 1 and at level 0,
    as ``python tools/world_controllers.py --figures`` measured them: SHUTDOWN both; the
    left hip's effort 88.8 N·m RMS at level 0, 25 % less at level 1; the knees' 7–10 % less;
    the estimate's phase error 2.7 % of the stride RMS (the heel strikes' clock; 24.7 % when
    the oscillator's phase led between strikes)."""
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    f = _tool().figures("assist_as_needed", 8.0, tmp_path)
    assert f["final"] == {1.0: "SHUTDOWN", 0.0: "SHUTDOWN"}
    e0, e1 = f["effort"][0.0], f["effort"][1.0]
    assert e0["left_hip"] == pytest.approx(88.8, rel=0.05)
    assert e1["left_hip"] / e0["left_hip"] == pytest.approx(0.75, abs=0.05)
    for knee in ("left_knee", "right_knee"):
        assert 0.80 < e1[knee] / e0[knee] < 0.97, (knee, e0[knee], e1[knee])
    assert f["phase_rms"] == pytest.approx(2.7, abs=1.5)


@pytest.mark.slow
@pytest.mark.parametrize("law", ["impedance", "phase_profile", "transparent"])
def test_the_phase_estimate_follows_the_floors_walk(law, tmp_path, monkeypatch):
    """The default session's 8 s walk at level 1 with the leading wearer: the gait-phase
    estimate within 5 % of the stride RMS over the steady strides against the leg's true
    phase, linear between its foot's landings in the world (impedance 1.6 %, phase_profile
    2.3 %, transparent 2.6 %), a little behind it (the board's strike comes when the sole
    passes 200 N, after the landing); against the walk the session plans, the laws that
    time their assistance by it also within 5 % (1.9 %, 4.5 %: `transparent`'s wearer lands
    0.03 of a stride before the plan, 5.7 %); the walk ends SHUTDOWN."""
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    f = _tool().figures(law, 8.0, tmp_path, levels=(1.0,))
    assert f["final"] == {1.0: "SHUTDOWN"}
    assert f["true_phase_rms"] <= 5.0
    assert -3.0 <= f["true_phase_mean"] <= 0.5  # the strikes come after the landings
    if law != "transparent":
        assert f["phase_rms"] <= 5.0
        assert abs(f["phase_mean"]) <= 4.0  # the strikes come 0.01–0.03 of a stride late


def test_the_true_phase_is_linear_between_the_worlds_landings(tmp_path, monkeypatch):
    """tools/world_controllers.py's truth: a landing is the foot's force rising through 10 N
    after at least 0.2 s below it (a bounce after a landing is none); the phase is k + the
    fraction of the k-th interval between landings, NaN outside them."""
    tool = _tool()
    dt = 0.01
    t = np.arange(0.0, 4.0, dt)
    # loaded from 0.5 s for 0.6 s, a bounce (unloaded 0.05 s) at 0.7 s; then at 1.6 and 2.9 s
    load = np.zeros_like(t)
    for a, b in ((0.5, 1.1), (1.6, 2.2), (2.9, 3.5)):
        load[(t >= a - 1e-9) & (t < b - 1e-9)] = 400.0
    load[(t >= 0.7 - 1e-9) & (t < 0.75 - 1e-9)] = 0.0
    rows = [{"t": float(x), "force": {"left_foot": {"x": 0.0, "y": 0.0, "z": float(f)},
                                      "right_foot": {"x": 0.0, "y": 0.0, "z": 0.0}}}
            for x, f in zip(t, load, strict=True)]
    assert tool.landings(rows, "left_foot") == pytest.approx([0.5, 1.6, 2.9])
    monkeypatch.setattr("exo_rt.record.walking.world_rows", lambda run: rows)
    phase = tool.true_phase(tmp_path, np.array([0.4, 0.5, 1.05, 1.6, 2.25, 2.9, 3.0]))
    assert np.isnan(phase[[0, 5, 6]]).all()
    np.testing.assert_allclose(phase[1:5], [0.0, 0.5, 1.0, 1.5], atol=1e-12)


def test_the_walker_takes_its_stance_values_in_stance():
    """Model-in-the-loop's walker (:class:`exo_rt.sim.walker.Walker`): over its ``stance``
    fraction of the stride its torque is that of a walker whose stiffness and damping are
    the stance values; after it, the swing values'."""
    from exo_rt.control.config import load_controller
    from exo_rt.sim import mil

    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    exo = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml", wearer=False)
    cfg = load_controller(ROOT / "configs" / "controllers" / "transparent.yaml", robot)
    cycle = mil.build_cycle(robot, cfg, mil.MilOptions(exo_model=exo))
    n = robot.nq
    swing, stance = ({"*": 100.0}, {"*": 1.0}), ({"*": 1000.0}, {"*": 10.0})

    def torque(t, walker):
        w = wk.compile_walker(walker, robot, exo, cycle, 2.0)
        state = np.zeros((ST_EXT + 1, 2 * n))
        state[ST_Q, :n], state[ST_V, :n] = 0.1, -0.2
        wk.walker_step(w, t, state)
        return state[ST_EXT, :n].copy()

    both = wk.Walker(cadence=((0.0, 1.0),), stiffness=swing[0], damping=swing[1],
                     stance_stiffness=stance[0], stance_damping=stance[1], stance=0.6)
    for t, (k, d) in ((0.3, stance), (0.8, swing)):
        one = wk.Walker(cadence=((0.0, 1.0),), stiffness=k, damping=d)
        np.testing.assert_allclose(torque(t, both), torque(t, one), rtol=1e-12)
    assert not np.allclose(torque(0.3, both), torque(0.8, both))
