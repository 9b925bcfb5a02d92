"""Reports of a run: PNG plots and a short text summary, and CSV export — each file written
whole (:func:`exo_rt.record.runfolder.replacing`): a symbolic link planted in the run folder
under its name is replaced, its target never written."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from exo_rt.errors import ConfigError
from exo_rt.record.recorder import read_cycle_log
from exo_rt.record.runfolder import recover_on_read, replacing, write_atomic


def export_csv(run_dir: str | Path) -> Path:
    """``cycles.csv``: one row per cycle, one column per scalar (q_hip, q_knee, …)."""
    run_dir = Path(run_dir)
    recover_on_read(run_dir)  # a crashed run's run.mcap made whole (exo-rt recover)
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
    with replacing(out, "w", newline="") as f:  # a link planted there: replaced, not followed
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(np.column_stack(columns).tolist())
    return out


def summary_from_records(records: np.ndarray, meta: dict) -> dict:
    """The figures of ``summary.json`` that a report shows, computed from the records of a run
    that did not finish (it wrote no summary): per joint the RMS and largest tracking error in
    RUN (deg), the largest |current| (A) and the range of positions (deg); compute and wake
    times (µs); the faults as the records show them (where SAFE began, and its cause)."""
    states = list(meta.get("states") or [])
    causes = list(meta.get("causes") or [])
    state = records["state"].astype(int)
    run = state == states.index("RUN") if "RUN" in states else np.zeros(len(records), bool)
    err = np.degrees(records["q"] - records["q_ref"])
    joints = {}
    for j, n in enumerate(meta["joint_names"]):
        e = err[run, j]
        e = e[np.isfinite(e)]
        q = records["q"][:, j]
        q = np.degrees(q[np.isfinite(q)])
        cur = np.abs(records["current"][:, j])
        cur = cur[np.isfinite(cur)]
        joints[n] = {"rms_error_deg": float(np.sqrt(np.mean(e ** 2))) if len(e) else 0.0,
                     "max_error_deg": float(np.max(np.abs(e))) if len(e) else 0.0,
                     "max_abs_current_A": float(cur.max()) if len(cur) else 0.0,
                     "min_position_deg": float(q.min()) if len(q) else 0.0,
                     "max_position_deg": float(q.max()) if len(q) else 0.0}
    compute = records["compute_us"][records["compute_us"] > 0]
    wake = records["wake_us"]

    def pct(x, p):
        return float(np.percentile(x, p)) if len(x) else 0.0

    safe = state == states.index("SAFE") if "SAFE" in states else np.zeros(len(records), bool)
    starts = np.flatnonzero(safe & ~np.r_[False, safe[:-1]])
    faults = []
    for k in starts:
        c = int(records["cause"][k])
        faults.append({"t": float(records["t"][k]),
                       "cause": causes[c] if 0 <= c < len(causes) else str(c)})
    last = int(state[-1])
    return {"controller": meta.get("law"), "bus": meta.get("bus"), "cycles": len(records),
            "rate_hz": float(meta.get("rate_hz", 0.0)),
            "final_state": states[last] if 0 <= last < len(states) else str(last),
            "joints": joints, "faults": faults,
            "timing": {"compute_us": {"p50": pct(compute, 50), "p99": pct(compute, 99)},
                       "wake_latency_us": {"p99": pct(wake, 99)},
                       "overruns": int(records["overruns"][-1])}}


def report(run_dir: str | Path, notes: list[str] | None = None) -> list[Path]:
    """PNG plots (tracking, errors, currents against limits, timing, faults) + report.txt.

    The cycle log is checked whole first (:mod:`exo_rt.record.integrity`: LogError when it
    is damaged). A run that did not finish (no summary.json) is reported from its records,
    saying so in report.txt and in ``notes`` (lines for the user)."""
    from exo_rt.record import integrity

    run_dir = Path(run_dir)
    recover_on_read(run_dir)  # a crashed run's run.mcap made whole (exo-rt recover)
    records, meta, path = integrity.read_records(run_dir)
    status = integrity.check(records, meta, path, run_dir)
    if notes is not None:
        notes.extend(status.notes)
    summary = status.summary if status.finished else summary_from_records(records, meta)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("plots need matplotlib", None,
                          "pip install 'exo-rt[plot]' (or pip install matplotlib)") from None
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

    lines = [f"run {run_dir}"]
    if not status.finished:
        lines.append(f"THE RUN DID NOT FINISH (no summary.json): the figures below are from "
                     f"its {path.name}'s {len(records)} records")
    lines.append(f"controller {summary.get('controller')} on {summary.get('bus')}, "
                 f"{summary['cycles']} cycles at {summary['rate_hz']:g} Hz, "
                 + ("last state " if not status.finished else "final state ")
                 + f"{summary['final_state']}")
    for n, j in summary["joints"].items():
        lines.append(f"  {n:<12} RMS {j['rms_error_deg']:.3f}°  max {j['max_error_deg']:.3f}°  "
                     f"|I| ≤ {j['max_abs_current_A']:.2f} A  range [{_deg(j['min_position_deg'])}, "
                     f"{_deg(j['max_position_deg'])}]°")
    tm = summary["timing"]
    cu = tm["compute_us"]
    lines.append(f"  compute p50 {cu['p50']:.1f} µs, p99 {cu['p99']:.1f} µs; wake latency p99 "
                 f"{tm['wake_latency_us']['p99']:.1f} µs; overruns {tm['overruns']}")
    for f in faults:
        if "reaction_cycles" not in f:  # from the records: where SAFE began, and why
            lines.append(f"  FAULT {f['cause']} at {f['t']:.3f} s (SAFE from the records)")
            continue
        lines.append(f"  FAULT {f['cause']} on {f['joint']} at {f['t']:.3f} s, reacted in "
                     f"{f['reaction_cycles']} cycles ({f['action']})")
    write_atomic(run_dir / "report.txt", "\n".join(lines) + "\n")
    files.append(run_dir / "report.txt")
    return files


def _deg(x: float) -> str:
    """An angle (deg) to 0.1°, never "-0.0" (a joint a hair below zero reads 0.0)."""
    return f"{round(float(x), 1) + 0.0:.1f}"


def _save(fig, path: Path, plt) -> Path:
    """The figure as ``path`` (PNG), written whole: a link planted there is replaced."""
    fig.tight_layout()
    with replacing(path, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)
    return path
