"""Every PNG exo-rt writes is checked before it is saved (:mod:`exo_rt.plotting`): each axes
that shows data has both axes labelled with a unit, and no legend entry is an internal name.
Collected through :data:`exo_rt.plotting.HOOKS` from every writer — a run's report (with a
fault, and timing.png as a real-time run's), each bench procedure's plot, the sweep's heat map
and curves, the batch replay's summary, docs/img's activity graph and assistance figures —
fed small synthetic inputs where a full run is slow, and shown to catch the defects the issue
listed."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from exo_rt import plotting

ROOT = Path(__file__).resolve().parents[1]
# the fault's run is made once a session, in the background while the other figures are drawn
# (conftest.py: fault_run)
pytestmark = pytest.mark.usefixtures("shared_runs")


@pytest.fixture
def collected():
    figs: list = []

    def hook(fig, target):  # (file name — a file object's may be its descriptor —, what
        # the check found, the x labels: which figure it is)
        figs.append((str(getattr(target, "name", target)), plotting.problems(fig),
                     [a.get_xlabel() for a in fig.axes]))

    plotting.HOOKS.append(hook)
    try:
        yield figs
    finally:
        plotting.HOOKS.remove(hook)


def test_the_check_catches_what_the_issue_saw():
    """An unlabelled axis, a label without unit and `v[V_LEVEL]` in a legend are problems; a
    figure with units everywhere and plain legend entries has none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="level applied (v[V_LEVEL])")
    ax.set_ylabel("assistance level")
    ax.legend()
    found = plotting.problems(fig)
    assert any("x axis" in p for p in found) and any("y axis" in p for p in found)
    assert any("internal name" in p for p in found)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("assistance level (0–1)")
    ax.legend([ax.lines[0]], ["level applied by the cycle"])
    assert plotting.problems(fig) == []
    plt.close(fig)
    # rows named on an axis (a timeline's, a table's) and a diagram drawn with its axes off
    # need no unit; a numbered axis beside named rows still does
    fig, (rows, diagram) = plt.subplots(1, 2)
    rows.barh([0, 1], [1.0, 2.0])
    rows.set_yticks([0, 1], ["session a", "session b"])
    diagram.plot([0, 1], [0, 1])
    diagram.axis("off")
    assert plotting.problems(fig) == ["axes 0: the x axis label '' has no unit"]
    rows.set_xlabel("RMS error (deg)")
    assert plotting.problems(fig) == []
    plt.close(fig)


@pytest.mark.slow
def test_report_pngs_of_a_run_with_a_fault(tmp_path, collected, fault_run):
    """exo-rt report of a lockstep run sent SAFE by an injected fault (exo-rt run --duration 2
    --inject drop:knee@0.5+0.05, once a session: conftest.py's fault_run): tracking, tracking
    error and currents (no timing.png: lockstep), every figure clean; the fault's line is
    labelled with its cause; report.txt prints no real-time figure."""
    from exo_rt.record.report import report

    res, made = fault_run
    assert res.returncode == 1, res.stderr[-1500:]  # SAFE
    out = tmp_path / "run"  # a copy: the report is written into it
    shutil.copytree(made, out)
    files = report(out)
    names = {Path(p).name for p in files}
    assert {"tracking.png", "tracking_error.png", "currents.png"} <= names
    assert "timing.png" not in names
    assert len(collected) == 3 and all(p == [] for _, p, _ in collected), collected
    text = (out / "report.txt").read_text()
    assert "no real-time figures" in text and "p99" not in text and "FAULT" in text
    # the same records as a real-time run's (its header's bus not the lockstep one):
    # timing.png too, and clean
    from exo_rt.record.recorder import read_header, update_header

    rt = tmp_path / "realtime"
    shutil.copytree(out, rt, ignore=shutil.ignore_patterns("*.png", "report.*"))
    columns, meta = read_header(rt / "cycles.exolog")
    assert update_header(rt / "cycles.exolog", columns, dict(meta, bus="socketcan"))
    collected.clear()
    assert "timing.png" in {Path(p).name for p in report(rt)}
    assert len(collected) == 4 and all(p == [] for _, p, _ in collected), collected
    assert ["cycle compute time (µs)"] in [x for _, _, x in collected]


def test_bench_friction_plot(tmp_path, collected):
    """The friction procedure's plot from a synthetic report: breakaways at rest, both fit
    lines labelled, the title at the wave generator and at the joint."""
    from exo_rt.hil.plots import plot
    from exo_rt.model import load_mechanism

    robot = load_mechanism(ROOT / "configs/robots/exo_leg.yaml")
    rng = np.random.default_rng(1)
    v = np.r_[np.zeros(6), np.geomspace(0.01, 2.0, 40)]
    load = rng.uniform(0, 30, len(v))
    fit = {"coulomb": 0.04, "static": 0.09, "viscous": 2e-4, "load_friction": 0.6,
           "stribeck_velocity": 0.5}
    h = 100 * 0.04 + 0.6 * load + (v == 0) * 5.0
    rep = {"joints": {j: {"joint": j, "data": {"speed": v.tolist(), "friction_Nm": h.tolist(),
                                               "load_Nm": load.tolist()}, "fit": fit}
                      for j in robot.joint_names}}
    path = plot("friction", rep, robot, tmp_path)
    assert path is not None and path.is_file()
    ((_, problems, _),) = collected
    assert problems == []


def _names(collected) -> list[str]:
    return [Path(n).name for n, _, _ in collected]


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_bench_plots_of_every_procedure(tmp_path, collected):
    """step, chirp, stiffness, inertia and controller (friction: above) from synthetic
    reports on exo_leg: one PNG each, every figure clean."""
    from exo_rt.hil.plots import plot
    from exo_rt.model import load_mechanism

    path = ROOT / "configs/robots/exo_leg.yaml"
    robot = load_mechanism(path)
    t = np.linspace(0.0, 1.0, 200)
    q = 0.05 * (1 - np.exp(-t / 0.05))
    trace = {"t_s": t.tolist(), "q_rad": q.tolist(), "q_ref_rad": np.full_like(t, 0.05).tolist()}
    step = {"final_rad": 0.05, "rise_time_s": 0.11, "overshoot": 0.02, "settling_time_s": 0.2,
            "steady_state_error_rad": 1e-4, "steady_state_error": 0.002}
    f = np.geomspace(0.2, 20.0, 20)
    bode = {"f_hz": f.tolist(), "magnitude_db": (-20 * np.log10(1 + f / 5)).tolist(),
            "phase_deg": (-np.degrees(np.arctan(f / 5))).tolist()}
    tau = np.linspace(-20.0, 20.0, 100)
    joints = {}
    for j in robot.joint_names:
        joints[j] = {"joint": j, "trace": trace, "step": step, "amplitude_rad": 0.05,
                     "bode": bode, "chirp": {"bandwidth_hz": 5.0},
                     "expected": {"natural_hz": 6.0, "damping": 0.7, "bandwidth_hz": 6.0},
                     "data": {"q": (tau / 5e3 + 0.1).tolist(), "torque_Nm": tau.tolist()},
                     "fit": {"locked_at": 0.1, "k1": 5e3, "k2": 8e3, "k3": 1e4,
                             "hysteresis": 0.4},
                     "rms_error_deg": 0.2, "max_error_deg": 0.5, "max_abs_current_A": 3.0}
    poses = [[0.1 * k, 0.2 * k] for k in range(6)]
    inertia = {"robot_path": str(path), "segments": {},
               "data": {"gravity_pose": poses, "gravity_joint": [k % 2 for k in range(6)],
                        "gravity_Nm": [1.0 + k for k in range(6)]},
               "fit": {"gravity_rms_before_Nm": 1.2, "gravity_rms_Nm": 0.3}}
    for name in ("step", "chirp", "stiffness", "controller"):
        assert plot(name, {"joints": joints}, robot, tmp_path).is_file()
    assert plot("inertia", inertia, robot, tmp_path).is_file()
    assert _names(collected) == [f"bench-{n}.png" for n in ("step", "chirp", "stiffness",
                                                            "controller", "inertia")]
    assert all(p == [] for _, p, _ in collected), collected


def test_sweep_plots(tmp_path, collected):
    """The sweep's figure of one grid key (curves) and of two (heat maps), clean; its axes
    name the gain with its unit."""
    from exo_rt.batch.sweep import GridKey, plot_heatmap

    kx = GridKey("kp", "kp", None, (0.5, 1.0, 2.0))
    ky = GridKey("hip.kd", "kd", "hip", (40.0, 80.0))
    for keys in ([kx], [kx, ky]):
        points = [{"values": (x, y), "rms_worst_deg": 1.0 + x + y / 100,
                   "peak_current_A": 5.0 + x, "saturation": 0.01 * x}
                  for x in kx.values for y in (ky.values if len(keys) == 2 else (0.0,))]
        sw = types.SimpleNamespace(points=points, keys=keys, best=points[0],
                                   shipped=points[-1], tasks=points,
                                   controller=types.SimpleNamespace(name="computed_torque"))
        assert plot_heatmap(sw, tmp_path / f"sweep-{len(keys)}.png").is_file()
    assert _names(collected) == ["sweep-1.png", "sweep-2.png"]
    assert all(p == [] for _, p, _ in collected), collected


def test_replay_summary_plots(tmp_path, collected):
    """The batch replay's summary: plant (RMS per joint, one failed session labelled) and
    controller (command differences), clean."""
    from exo_rt.batch.replay import Batch, plot_summary

    ok = {"status": "ok", "error": None, "path": "/a/s1"}
    plant = Batch("plant", [
        dict(ok, session="s1", result={"joints": {"hip": {"rms_error_deg": 0.01},
                                                  "knee": {"rms_error_deg": 0.02}}}),
        {"session": "s2", "status": "failed", "path": "/a/s2", "result": None,
         "error": "/a/s2: damaged log: the cycle counter jumps"}])
    ctl = Batch("controller", [dict(ok, session="s1",
                                    result={"max_abs_command_diff_A": 0.5})])
    for b in (plant, ctl):
        assert plot_summary(b, tmp_path / f"replay-summary-{b.mode}.png").is_file()
    assert len(collected) == 2 and all(p == [] for _, p, _ in collected), collected


def test_activity_graph_is_clean(tmp_path, collected):
    """docs/img's activity graph (tools/activity_graph.py), drawn from the shipped
    activities: clean (a diagram: no numbered axis)."""
    from tools import activity_graph

    a = activity_graph.load(ROOT / "configs/activities/exo_leg.yaml",
                            ROOT / "configs/exo_leg.yaml")
    activity_graph.draw(a, tmp_path / "activities.png", "exo_leg")
    assert _names(collected) == ["activities.png"]
    assert all(p == [] for _, p, _ in collected), collected


def _fake_rig():
    """tools/assistance_figures.py's Rig with synthetic walks in place of model-in-the-loop
    runs (what a full run of the tool takes minutes for): the walker's phase from its cadence
    steps at 200 Hz, sines for the joints, the reference 10 % slower, the estimate a hair off
    the true phase, a heel strike each stride (every 8th dropped), the law's torque the
    carried exoskeleton plus a lobe per stride."""
    import math

    from tools import assistance_figures as af

    class FakeRig(af.Rig):
        def walk(self, law, cadence, duration, level=1.0, drop=0.0):
            dt = 0.005
            t = np.arange(0.0, duration, dt)
            rate = np.zeros_like(t)
            for t0, p in cadence:
                rate[t >= t0] = 0.0 if math.isinf(p) else 1.0 / p
            phase = np.concatenate([[0.0], np.cumsum(rate[:-1] * dt)])
            n = self.robot.nq
            q = np.column_stack([0.3 + 0.4 * np.sin(2 * np.pi * phase + j) for j in range(n)])
            qr = np.column_stack([0.3 + 0.4 * np.sin(2 * np.pi * 0.9 * phase + j)
                                  for j in range(n)])
            qd = np.gradient(q, t, axis=0)
            heel = np.r_[0.0, np.diff(np.floor(phase)) > 0].astype(float)
            strikes = t[heel > 0]
            dropped = np.arange(len(strikes)) % 8 == 7
            zero = np.zeros(n)
            carry = np.array([self.exo_dyn.inverse_dynamics(q[k], qd[k], zero)
                              for k in range(len(t))])
            lobe = level * 10.0 * np.sin(2 * np.pi * phase)[:, None] * np.ones(n)
            result = types.SimpleNamespace(safe=None, heel_strike_times=strikes,
                                           heel_dropped=dropped)
            return af.Walk(self.controller(law), result, t, q, qd, qr, carry + lobe,
                           5.0 * np.cos(2 * np.pi * phase)[:, None] * (2.0 - level)
                           * np.ones(n), phase, heel,
                           (phase + 0.002 * np.sin(7 * t)) % 1.0, (rate > 0).astype(float),
                           np.full_like(t, level))

    return af, FakeRig()


@pytest.mark.slow
def test_assistance_figures_are_clean(tmp_path, collected, capsys):
    """docs/img's assistance figures (tools/assistance_figures.py), drawn from synthetic
    walks: every figure clean, one PNG each."""
    af, rig = _fake_rig()
    for name in af.FIGURES:
        getattr(af, name)(rig, tmp_path)
    assert _names(collected) == [f"assistance_{n}.png" for n in af.FIGURES]
    assert all(p == [] for _, p, _ in collected), collected
