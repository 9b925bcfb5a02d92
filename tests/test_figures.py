"""Every PNG exo-rt writes is checked before it is saved (:mod:`exo_rt.plotting`): each axes
that shows data has both axes labelled with a unit, and no legend entry is an internal name.
Collected through :data:`exo_rt.plotting.HOOKS` from a report of a run with a fault, the
bench's friction plot, and shown to catch the defects the issue listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt import plotting

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def collected():
    figs: list = []

    def hook(fig, target):
        figs.append((str(getattr(target, "name", target)), plotting.problems(fig)))

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


@pytest.mark.slow
def test_report_pngs_of_a_run_with_a_fault(tmp_path, collected):
    """exo-rt report of a lockstep run sent SAFE by an injected fault: tracking, tracking
    error and currents (no timing.png: lockstep), every figure clean; the fault's line is
    labelled with its cause; report.txt prints no real-time figure."""
    from exo_rt.record.report import report

    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", "2",
                          "--inject", "drop:knee@0.5+0.05", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr[-1500:]  # SAFE
    files = report(out)
    names = {Path(p).name for p in files}
    assert {"tracking.png", "tracking_error.png", "currents.png"} <= names
    assert "timing.png" not in names
    assert [n for n, _ in collected] and all(p == [] for _, p in collected), collected
    text = (out / "report.txt").read_text()
    assert "no real-time figures" in text and "p99" not in text and "FAULT" in text


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
    ((_, problems),) = collected
    assert problems == []
