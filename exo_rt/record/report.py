"""Reports of a run: PNG plots and a short text summary, and CSV export."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from exo_rt.errors import ConfigError
from exo_rt.record.recorder import read_cycle_log


def export_csv(run_dir: str | Path) -> Path:
    """``cycles.csv``: one row per cycle, one column per scalar (q_hip, q_knee, …)."""
    run_dir = Path(run_dir)
    records, meta = read_cycle_log(run_dir / "cycles.exolog")
    names = meta["joint_names"]
    header, columns = [], []
    for field in records.dtype.names:
        data = records[field]
        if data.ndim == 1:
            header.append(field)
            columns.append(data)
        else:
            for j, n in enumerate(names):
                header.append(f"{field}_{n}")
                columns.append(data[:, j])
    out = run_dir / "cycles.csv"
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(np.column_stack(columns).tolist())
    return out


def report(run_dir: str | Path) -> list[Path]:
    """PNG plots (tracking, errors, currents against limits, timing, faults) + report.txt."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("plots need matplotlib", None,
                          "pip install 'exo-rt[plot]' (or pip install matplotlib)") from None
    run_dir = Path(run_dir)
    records, meta = read_cycle_log(run_dir / "cycles.exolog")
    summary = json.loads((run_dir / "summary.json").read_text())
    names = meta["joint_names"]
    t = records["t"]
    faults = summary.get("faults", [])
    files = []

    def mark(ax):
        for f in faults:
            ax.axvline(f["t"], color="red", ls="--", lw=1)

    fig, axes = plt.subplots(len(names), 1, figsize=(10, 3 * len(names)), sharex=True)
    for j, (ax, n) in enumerate(zip(np.atleast_1d(axes), names, strict=True)):
        ax.plot(t, np.degrees(records["q_ref"][:, j]), label="reference", lw=1)
        ax.plot(t, np.degrees(records["q"][:, j]), label="measured", lw=1)
        ax.set_ylabel(f"{n} (deg)")
        mark(ax)
        ax.legend(loc="upper right")
    np.atleast_1d(axes)[-1].set_xlabel("time (s)")
    files.append(_save(fig, run_dir / "tracking.png", plt))

    fig, ax = plt.subplots(figsize=(10, 3))
    for j, n in enumerate(names):
        ax.plot(t, np.degrees(records["q"][:, j] - records["q_ref"][:, j]), label=n, lw=1)
    ax.set_ylabel("tracking error (deg)")
    ax.set_xlabel("time (s)")
    mark(ax)
    ax.legend()
    files.append(_save(fig, run_dir / "tracking_error.png", plt))

    fig, ax = plt.subplots(figsize=(10, 3))
    for j, n in enumerate(names):
        ax.plot(t, records["command"][:, j], label=f"{n} command", lw=1)
        ax.plot(t, records["current"][:, j], label=f"{n} measured", lw=0.8, alpha=0.7)
    limit = max(j["max_abs_current_A"] for j in summary["joints"].values())
    ax.set_ylabel("motor current (A)")
    ax.set_xlabel("time (s)")
    ax.set_title(f"largest |current| {limit:.2f} A")
    mark(ax)
    ax.legend(loc="upper right", fontsize=7)
    files.append(_save(fig, run_dir / "currents.png", plt))

    fig, ax = plt.subplots(figsize=(6, 3))
    compute = records["compute_us"][records["compute_us"] > 0]
    ax.hist(compute, bins=50)
    ax.set_xlabel("cycle compute time (µs)")
    ax.set_ylabel("cycles")
    ax.set_yscale("log")
    files.append(_save(fig, run_dir / "timing.png", plt))

    lines = [f"run {run_dir}", f"controller {summary.get('controller')} on {summary.get('bus')}, "
             f"{summary['cycles']} cycles at {summary['rate_hz']:g} Hz, final state "
             f"{summary['final_state']}"]
    for n, j in summary["joints"].items():
        lines.append(f"  {n:<12} RMS {j['rms_error_deg']:.3f}°  max {j['max_error_deg']:.3f}°  "
                     f"|I| ≤ {j['max_abs_current_A']:.2f} A  range [{j['min_position_deg']:.1f}, "
                     f"{j['max_position_deg']:.1f}]°")
    tm = summary["timing"]
    cu = tm["compute_us"]
    lines.append(f"  compute p50 {cu['p50']:.1f} µs, p99 {cu['p99']:.1f} µs; wake latency p99 "
                 f"{tm['wake_latency_us']['p99']:.1f} µs; overruns {tm['overruns']}")
    for f in faults:
        lines.append(f"  FAULT {f['cause']} on {f['joint']} at {f['t']:.3f} s, reacted in "
                     f"{f['reaction_cycles']} cycles ({f['action']})")
    (run_dir / "report.txt").write_text("\n".join(lines) + "\n")
    files.append(run_dir / "report.txt")
    return files


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
