"""Reports of a run: PNG plots, a short text summary and the clinic's report.html (with a
wearer's progress page over sessions), and CSV export — each file written
whole (:func:`exo_rt.record.runfolder.replacing`): a symbolic link planted in the run folder
under its name is replaced, its target never written."""

from __future__ import annotations

import csv
import datetime
import json
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
    """PNG plots (tracking, errors, currents, and — in real time — timing; faults marked and
    labelled), report.txt, and the clinic's report.html (:mod:`exo_rt.record.report_html`)
    whose numbers go into summary.json's ``clinic`` (a run that did not finish: report.json).

    The cycle log is checked whole first (:mod:`exo_rt.record.integrity`: LogError when it
    is damaged). A run that did not finish (no summary.json) is reported from its records,
    saying so in report.txt and in ``notes`` (lines for the user). A lockstep run (the
    simulated bus, faster than real time) prints and plots no real-time figures: its compute
    times and overruns are the simulation's, not the controller's."""
    from exo_rt.record import integrity

    run_dir = Path(run_dir)
    recover_on_read(run_dir)  # a crashed run's run.mcap made whole (exo-rt recover)
    records, meta, path = integrity.read_records(run_dir)
    status = integrity.check(records, meta, path, run_dir)
    if notes is not None:
        notes.extend(status.notes)
    summary = status.summary if status.finished else summary_from_records(records, meta)
    lockstep = meta.get("bus") == "sim"  # the lockstep simulated bus: no real-time figure
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
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def mark(ax):
        """Each fault: a red dashed line, labelled with its cause (in the legend and beside
        the line)."""
        for k, f in enumerate(faults):
            ax.axvline(f["t"], color="red", ls="--", lw=1,
                       label="fault" if k == 0 else None)
            ax.annotate(f"fault: {f['cause']}", (f["t"], 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -3), textcoords="offset points", ha="left", va="top",
                        fontsize=8, color="red")

    def legend(ax):
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)

    fig, axes = plt.subplots(len(names), 1, figsize=(10, 3 * len(names)), sharex=True,
                             squeeze=False)
    for j, (ax, n) in enumerate(zip(axes[:, 0], names, strict=True)):
        ax.plot(t, np.degrees(records["q_ref"][:, j]), label="reference", lw=1.2,
                color="0.2", ls="--")
        ax.plot(t, np.degrees(records["q"][:, j]), label="measured", lw=1, color=colors[0])
        ax.set_ylabel(f"{n} angle (deg)")
        mark(ax)
        legend(ax)
    axes[-1, 0].set_xlabel("time (s)")
    files.append(_save(fig, run_dir / "tracking.png", plt))

    fig, ax = plt.subplots(figsize=(10, 3))
    for j, n in enumerate(names):
        ax.plot(t, np.degrees(records["q"][:, j] - records["q_ref"][:, j]), label=n, lw=1,
                color=colors[j % len(colors)])
    ax.set_ylabel("tracking error (deg)")
    ax.set_xlabel("time (s)")
    mark(ax)
    legend(ax)
    files.append(_save(fig, run_dir / "tracking_error.png", plt))

    # currents: a panel per joint, the command (dark, dashed, on top) over the measurement
    # (coloured, solid, beneath): both stay visible where they agree
    fig, axes = plt.subplots(len(names), 1, figsize=(10, 2.6 * len(names)), sharex=True,
                             squeeze=False)
    for j, (ax, n) in enumerate(zip(axes[:, 0], names, strict=True)):
        ax.plot(t, records["current"][:, j], label="measured", lw=1.6,
                color=colors[j % len(colors)], alpha=0.8)
        ax.plot(t, records["command"][:, j], label="command", lw=0.9, color="black",
                ls=(0, (4, 2)))
        ax.set_ylabel(f"{n} current (A)")
        lim = summary["joints"].get(n, {}).get("max_abs_current_A")
        if lim is not None:
            ax.set_title(f"{n}: largest |current| {lim:.2f} A", fontsize=9, loc="left")
        mark(ax)
        legend(ax)
    axes[-1, 0].set_xlabel("time (s)")
    files.append(_save(fig, run_dir / "currents.png", plt))

    if not lockstep:
        fig, ax = plt.subplots(figsize=(6, 3))
        compute = records["compute_us"][records["compute_us"] > 0]
        ax.hist(compute, bins=50)
        ax.set_xlabel("cycle compute time (µs)")
        ax.set_ylabel("cycles (count)")
        ax.set_yscale("log")
        files.append(_save(fig, run_dir / "timing.png", plt))
    else:
        stale = run_dir / "timing.png"  # an earlier report's, from before this rule
        if stale.is_file() and not stale.is_symlink():
            stale.unlink()

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
    if lockstep:
        lines.append("  lockstep simulation: no real-time figures (compute times and overruns "
                     "are the simulation's)")
    else:
        lines.append(f"  compute p50 {cu['p50']:.1f} µs, p99 {cu['p99']:.1f} µs; wake latency "
                     f"p99 {tm['wake_latency_us']['p99']:.1f} µs; overruns {tm['overruns']}")
    for f in faults:
        if "reaction_cycles" not in f:  # from the records: where SAFE began, and why
            lines.append(f"  FAULT {f['cause']} at {f['t']:.3f} s (SAFE from the records)")
            continue
        lines.append(f"  FAULT {f['cause']} on {f['joint']} at {f['t']:.3f} s, reacted in "
                     f"{f['reaction_cycles']} cycles ({f['action']})")
    write_atomic(run_dir / "report.txt", "\n".join(lines) + "\n")
    files.append(run_dir / "report.txt")
    files += clinic_report(run_dir, records, meta, summary, status.finished)
    return files


def read_events(run_dir: Path) -> list[dict]:
    """events.jsonl's events (the marks left out; a line that is not an event skipped: the
    report shows what it can)."""
    out = []
    try:
        raw = (Path(run_dir) / "events.jsonl").read_bytes()
    except OSError:
        return out
    for chunk in raw.split(b"\n"):
        try:
            ev = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(ev, dict) and isinstance(ev.get("event"), str) and \
                ev["event"] != "events_complete":
            out.append(ev)
    return out


def clinic_report(run_dir: Path, records, meta: dict, summary: dict, finished: bool
                  ) -> list[Path]:
    """report.html, and its numbers in summary.json's ``clinic`` (rewritten whole; a run that
    did not finish has no summary.json: report.json then)."""
    from exo_rt.record import clinic, report_html

    events = read_events(run_dir)
    fig = clinic.figures(records, meta, events, summary)
    wearer = report_html.wearer_name(run_dir)
    fig["wearer"] = wearer
    start = meta.get("wall_start") or meta.get("wall_boot")
    fig["date"] = (datetime.datetime.fromtimestamp(float(start)).isoformat(timespec="seconds")
                   if start else None)
    text = report_html.page(run_dir, records, meta, events, summary, fig, finished, wearer)
    write_atomic(run_dir / "report.html", text)
    if finished:
        doc = json.loads((run_dir / "summary.json").read_text())
        doc["clinic"] = fig
        write_atomic(run_dir / "summary.json", json.dumps(doc, indent=2) + "\n")
        numbers = run_dir / "summary.json"
    else:
        numbers = run_dir / "report.json"
        write_atomic(numbers, json.dumps({"clinic": fig}, indent=2) + "\n")
    return [run_dir / "report.html", numbers]


def progress_report(archive: str | Path, wearer: str) -> list[Path]:
    """``progress-<wearer>.html`` and ``.json`` in ``archive``: every run folder below it
    (any depth) recorded with that wearer (:func:`exo_rt.record.report_html.wearer_name`), by
    date — steps, walking time, distance, walking speed, assistance used, session length.
    A run without the clinic's numbers yet (never reported) is computed here; one that
    cannot be read is skipped with a note on stderr."""
    import sys

    from exo_rt.errors import ExoError
    from exo_rt.record import integrity, report_html

    archive = Path(archive)
    sessions = []
    for summary_path in sorted(archive.rglob("summary.json")):
        run_dir = summary_path.parent
        if report_html.wearer_name(run_dir) != wearer:
            continue
        try:
            doc = json.loads(summary_path.read_text())
            fig = doc.get("clinic")
            if fig is None:
                records, meta, path = integrity.read_records(run_dir)
                status = integrity.check(records, meta, path, run_dir)
                clinic_report(run_dir, records, meta, status.summary or doc, True)
                fig = json.loads(summary_path.read_text())["clinic"]
        except (ExoError, OSError, ValueError, KeyError) as exc:
            print(f"exo-rt: warning: {run_dir}: skipped ({exc})", file=sys.stderr)
            continue
        levels = [a["mean"] for a in fig.get("assistance", {}).values()]
        sessions.append({"run": str(run_dir.relative_to(archive)), "date": fig.get("date") or "",
                         "session_s": fig["session_s"], "steps": fig["steps"],
                         "walking_s": fig["walking_s"], "distance_m": fig["distance_m"],
                         "speed_m_s": fig["speed_m_s"],
                         "assistance": float(np.mean(levels)) if levels else None})
    if not sessions:
        raise ConfigError(f"no run of wearer '{wearer}' under {archive}", None,
                          "name the wearer by their profile's file name (configs/wearers/"
                          "NAME.yaml, as exo-rt run --wearer took it)")
    sessions.sort(key=lambda s: s["date"])
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in wearer)
    page = archive / f"progress-{safe}.html"
    write_atomic(page, report_html.progress(sessions, wearer))
    numbers = archive / f"progress-{safe}.json"
    write_atomic(numbers, json.dumps({"wearer": wearer, "sessions": sessions}, indent=2)
                 + "\n")
    return [page, numbers]


def _deg(x: float) -> str:
    """An angle (deg) to 0.1°, never "-0.0" (a joint a hair below zero reads 0.0)."""
    return f"{round(float(x), 1) + 0.0:.1f}"


def _save(fig, path: Path, plt) -> Path:
    """The figure as ``path`` (PNG), written whole: a link planted there is replaced."""
    from exo_rt.plotting import save_png

    fig.tight_layout()
    with replacing(path, "wb") as f:
        save_png(fig, f, dpi=100)
    plt.close(fig)
    return path
