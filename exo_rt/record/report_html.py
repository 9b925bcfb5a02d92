"""``report.html``: a session's report for the clinic, one self-contained file (docs/report.md).

No network, no CDN, no script: the styles are in the page, the plots are inline SVG drawn by
matplotlib (text as paths: no font to fetch). Every number the page shows is in
summary.json's ``clinic`` (:mod:`exo_rt.record.clinic`), each in an element
``<… data-key="path.to.it" data-decimals="n">`` so that a test reads them back. The progress
page (:func:`progress`) sums a wearer's sessions by date.
"""

from __future__ import annotations

import datetime
import html
import io
import json
import math
from pathlib import Path

import numpy as np

from exo_rt.record import clinic

STYLE = """
body{font-family:system-ui,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:1px solid #ccc;
padding-bottom:.2em;margin-top:1.6em}.sub{color:#555}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px solid #ccc;border-radius:6px;
padding:.5em .9em;min-width:9em}.card .v{font-size:1.5em;font-weight:600}.card .k{color:#555}
figure.plot{margin:.8em 0}figure.plot svg{max-width:100%;height:auto}
.warn{background:#fff3cd;border:1px solid #e0c36b;padding:.5em .8em;border-radius:4px}
.refused{color:#a40000}.accepted{color:#155724}
"""

LEG_COLORS = {"left": "#1f77b4", "right": "#d62728", "leg": "#1f77b4", "": "#1f77b4"}


def _num(value, decimals: int, key: str, unit: str = "") -> str:
    """A number the page shows, rounded to ``decimals``, tagged with its summary.json key."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return f'<span data-key="{key}" data-decimals="{decimals}">–</span>'
    text = f"{value:.{decimals}f}" if decimals else f"{int(round(value))}"
    tail = f"&nbsp;{html.escape(unit)}" if unit else ""
    return f'<span data-key="{key}" data-decimals="{decimals}">{text}</span>{tail}'


def _svg(fig) -> str:
    """The figure as an inline SVG element (no XML prologue, no external reference)."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(ident: str, caption: str, fig) -> str:
    return (f'<figure class="plot" id="{ident}">{_svg(fig)}'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "path"
    return plt


# ----------------------------------------------------------------------------- plots
def timeline_plot(items: list[dict], changes: list[dict]):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 2.6))
    rows = {"posture": 2, "motion": 1, "request": 0}
    colors = {"sitting": "#8c564b", "standing": "#2ca02c", "walk": "#1f77b4"}
    for i in items:
        y = rows[i["kind"]]
        if i["kind"] in ("posture", "motion"):
            c = colors.get(i["what"], "#9467bd")
            ax.barh(y, i["end"] - i["t"], left=i["t"], height=0.6, color=c, alpha=0.8)
            ax.text(i["t"] + 0.5 * (i["end"] - i["t"]), y, i["what"], ha="center",
                    va="center", fontsize=8, color="white", clip_on=True)
        else:
            ok = i["answer"] == "accepted"
            ax.plot(i["t"], y, "o" if ok else "x", color="#2ca02c" if ok else "#d62728",
                    ms=6)
    for c in changes[1:] if changes else ():
        ax.axvline(c["t"], color="#ff7f0e", lw=0.8, ls=":")
    ax.set_yticks([0, 1, 2], ["requests (o accepted, x refused)", "motions", "postures"])
    ax.set_xlabel("session time (s)")
    ax.set_ylim(-0.6, 2.6)
    fig.tight_layout()
    return fig


def level_plot(records, meta):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 2.6))
    names = list(meta["joint_names"])
    level = clinic._field(records, "level")
    t = records["t"]
    for leg, idx in clinic.legs(names).items():
        lv = level[:, idx].mean(axis=1)
        ax.step(t, lv, where="post", color=LEG_COLORS.get(leg, None),
                label=f"{leg or 'the'} leg")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("session time (s)")
    ax.set_ylabel("assistance level (0–1)")
    ax.legend(loc="lower left", bbox_to_anchor=(1.0, 0.0), frameon=False)
    fig.tight_layout()
    return fig


def stride_plot(curves: dict[str, np.ndarray], names, ylabel: str, normative: bool):
    """One panel per joint kind (hip, knee …): each leg's mean ± SD over the stride, and the
    normative band where there is one."""
    plt = _plt()
    kinds = []
    for n in names:
        if clinic.kind_of(n) not in kinds:
            kinds.append(clinic.kind_of(n))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.2), squeeze=False)
    pct = np.linspace(0, 100, clinic.NORMAL_POINTS)
    for ax, kind in zip(axes[0], kinds, strict=True):
        if normative:
            band = clinic.normative_band(kind)
            if band is not None:
                p, mean, sd = band
                ax.fill_between(p, mean - sd, mean + sd, color="0.8",
                                label="normal gait, mean ± SD")
                ax.plot(p, mean, color="0.45", lw=1)
        for n in names:
            if clinic.kind_of(n) != kind:
                continue
            c = curves[n]
            leg = clinic.leg_of(n) or "leg"
            if not len(c):
                continue
            m, s = c.mean(axis=0), c.std(axis=0)
            color = LEG_COLORS.get(leg)
            ax.fill_between(pct, m - s, m + s, color=color, alpha=0.25)
            ax.plot(pct, m, color=color, lw=1.6,
                    label=f"{leg if leg != 'leg' else 'the leg'}, mean ± SD ({len(c)} strides)")
        ax.set_title(kind)
        ax.set_xlabel("stride (%)")
        ax.set_ylabel(f"{kind} {ylabel}")
        ax.set_xlim(0, 100)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def thermal_plot(records, meta):
    plt = _plt()
    names = list(meta["joint_names"])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 4.2), sharex=True)
    t = records["t"]
    w, d = clinic._field(records, "winding"), clinic._field(records, "derate")
    for j, n in enumerate(names):
        if w is not None:
            a1.plot(t, w[:, j], label=n)
        if d is not None:
            a2.plot(t, d[:, j], label=n)
    a1.set_ylabel("winding (°C)")
    a2.set_ylabel("current-limit factor (0–1)")
    a2.set_ylim(-0.05, 1.05)
    a2.set_xlabel("session time (s)")
    a1.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- the page
def _meta_line(run_dir: Path, meta: dict, summary: dict, wearer: str | None) -> str:
    start = meta.get("wall_start") or meta.get("wall_boot")
    when = (datetime.datetime.fromtimestamp(float(start)).strftime("%Y-%m-%d %H:%M")
            if start else "unknown date")
    robot = Path(str(meta.get("config", ""))).stem or "?"
    return (f"{html.escape(when)} · wearer {html.escape(wearer or 'unnamed')} · "
            f"{html.escape(robot)} · controller {html.escape(str(summary.get('controller')))}"
            f" · run {html.escape(run_dir.name)}")


def page(run_dir: Path, records, meta: dict, events: list[dict], summary: dict, fig: dict,
         finished: bool = True, wearer: str | None = None) -> str:
    """The report's HTML (``fig``: :func:`exo_rt.record.clinic.figures`)."""
    names = list(meta["joint_names"])
    walk_bouts = clinic.bouts(records, meta, events)
    items = clinic.timeline(events, fig["session_end_s"])
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>Session report</title>", f"<style>{STYLE}</style></head><body>",
           "<h1>Session report</h1>",
           f'<p class="sub">{_meta_line(run_dir, meta, summary, wearer)}</p>']
    if not finished:
        out.append('<p class="warn">The run did not finish (no summary.json): these figures '
                   "are from the records it left.</p>")
    cards = [("session", _num(fig["session_s"] / 60, 1, "clinic.session_s/60", "min")),
             ("steps", _num(fig["steps"], 0, "clinic.steps")),
             ("walking time", _num(fig["walking_s"] / 60, 1, "clinic.walking_s/60", "min")),
             ("up time", _num(fig["up_s"] / 60, 1, "clinic.up_s/60", "min")),
             ("distance", _num(fig["distance_m"], 1, "clinic.distance_m", "m")),
             ("walking speed", _num(fig["speed_m_s"], 2, "clinic.speed_m_s", "m/s"))]
    out.append('<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{v}</div><div class="k">{k}</div></div>'
        for k, v in cards) + "</div>")
    out.append(f"<p>{_num(fig['strides'], 0, 'clinic.strides')} strides in "
               f"{len(walk_bouts)} walking bout(s); distance "
               + ("walked by the pelvis in the world" if fig["distance_from"] == "world"
                  else "as the gait walks it (each stride: its duration × the speed asked)")
               + ".</p>")

    out.append("<h2>Timeline</h2>")
    out.append(_figure("plot-timeline", "postures, motions and requests over the session",
                       timeline_plot(items, fig["level_changes"])))
    req = fig["requests"]
    out.append(f"<p>Requests: {_num(req['made'], 0, 'clinic.requests.made')} made, "
               f"{_num(req['accepted'], 0, 'clinic.requests.accepted')} accepted, "
               f"{_num(req['refused'], 0, 'clinic.requests.refused')} refused.</p>")
    out.append('<table><tr><th>time (s)</th><th class="l">what</th><th class="l">kind</th>'
               '<th class="l">asked by</th><th class="l">answer</th></tr>')
    for i in items:
        if i["kind"] == "request":
            answer = html.escape(str(i["answer"])) + (f" ({html.escape(str(i['reason']))})"
                                                      if i.get("reason") else "")
            cls = "accepted" if i["answer"] == "accepted" else "refused"
            out.append(f'<tr><td>{i["t"]:.1f}</td><td class="l">{html.escape(i["what"])}</td>'
                       f'<td class="l">request</td><td class="l">'
                       f'{html.escape(str(i["source"]))}</td>'
                       f'<td class="l {cls}">{answer}</td></tr>')
        else:
            span = f"until {i['end']:.1f} s"
            out.append(f'<tr><td>{i["t"]:.1f}</td><td class="l">{html.escape(i["what"])} '
                       f'({span})</td><td class="l">{i["kind"]}</td><td class="l"></td>'
                       '<td class="l"></td></tr>')
    out.append("</table>")

    out.append("<h2>Walking bouts</h2>")
    if fig["bouts"]:
        out.append("<table><tr><th>bout</th><th>start (s)</th><th>duration (s)</th>"
                   "<th>strides</th><th>steps</th><th>cadence (steps/min)</th>"
                   "<th>stride length (m)</th><th>speed (m/s)</th><th>distance (m)</th></tr>")
        for k, b in enumerate(fig["bouts"]):
            key = f"clinic.bouts.{k}"
            out.append(f"<tr><td>{k + 1}</td><td>{_num(b['start_s'], 1, key + '.start_s')}</td>"
                       f"<td>{_num(b['duration_s'], 1, key + '.duration_s')}</td>"
                       f"<td>{_num(b['strides'], 0, key + '.strides')}</td>"
                       f"<td>{_num(b['steps'], 0, key + '.steps')}</td>"
                       f"<td>{_num(b['cadence_steps_min'], 1, key + '.cadence_steps_min')}</td>"
                       f"<td>{_num(b['stride_length_m'], 2, key + '.stride_length_m')}</td>"
                       f"<td>{_num(b['speed_m_s'], 2, key + '.speed_m_s')}</td>"
                       f"<td>{_num(b['distance_m'], 1, key + '.distance_m')}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No walk in this session.</p>")

    out.append("<h2>Symmetry between the legs</h2>")
    if fig["symmetry_index_pct"]:
        out.append("<p>Symmetry index of each joint's range of motion per stride, "
                   "(R − L) / (½ (R + L)) · 100: 0 % is symmetric.</p><table><tr>"
                   '<th class="l">joint</th><th>symmetry index (%)</th></tr>')
        for kind, si in fig["symmetry_index_pct"].items():
            out.append(f'<tr><td class="l">{html.escape(kind)}</td><td>'
                       f"{_num(si, 1, 'clinic.symmetry_index_pct.' + kind)}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>One leg, or no whole stride: no symmetry index.</p>")

    out.append("<h2>Assistance level per leg</h2>")
    if clinic._field(records, "level") is not None:
        out.append(_figure("plot-assistance", "assistance level per leg over the session",
                           level_plot(records, meta)))
        out.append('<table><tr><th class="l">leg</th><th>mean</th><th>least</th><th>most</th>'
                   "</tr>")
        for leg, a in fig["assistance"].items():
            key = f"clinic.assistance.{leg}"
            out.append(f'<tr><td class="l">{html.escape(leg)}</td>'
                       f"<td>{_num(a['mean'], 2, key + '.mean')}</td>"
                       f"<td>{_num(a['min'], 2, key + '.min')}</td>"
                       f"<td>{_num(a['max'], 2, key + '.max')}</td></tr>")
        out.append("</table>")

    curves = clinic.normalised(records, meta, walk_bouts, "q", 180.0 / math.pi)
    if any(len(c) for c in curves.values()):
        out.append("<h2>Joint angles over the stride</h2>")
        out.append(_figure("plot-angles", "joint flexion over the stride, mean ± SD per leg, "
                           "against normal gait (gaitutils 0.13.9 normal.gcd, docs/"
                           "references.md)",
                           stride_plot(curves, names, "flexion (°)", True)))
        torque = clinic.normalised(records, meta, walk_bouts, "torque")
        current = clinic.normalised(records, meta, walk_bouts, "current")
        out.append("<h2>Joint torque and motor current over the stride</h2>")
        out.append(_figure("plot-torque", "joint torque over the stride, mean ± SD per leg",
                           stride_plot(torque, names, "torque (N·m)", False)))
        out.append(_figure("plot-current", "motor current over the stride, mean ± SD per leg",
                           stride_plot(current, names, "motor current (A)", False)))

    out.append("<h2>Motor windings and derating</h2>")
    if clinic._field(records, "winding") is not None:
        out.append(_figure("plot-thermal", "modelled winding temperature and the current "
                           "limit's derating factor", thermal_plot(records, meta)))
    out.append('<table><tr><th class="l">joint</th><th>hottest winding (°C)</th>'
               "<th>least current-limit factor</th><th>derated (s)</th></tr>")
    for n, th in fig["thermal"].items():
        key = f"clinic.thermal.{n}"
        out.append(f'<tr><td class="l">{html.escape(n)}</td>'
                   f"<td>{_num(th.get('max_winding_C'), 1, key + '.max_winding_C')}</td>"
                   f"<td>{_num(th.get('min_derate'), 2, key + '.min_derate')}</td>"
                   f"<td>{_num(th.get('derated_s'), 1, key + '.derated_s')}</td></tr>")
    out.append("</table>")

    out.append("<h2>Faults</h2>")
    if fig["faults"]:
        out.append('<table><tr><th>time (s)</th><th class="l">cause</th><th class="l">joint'
                   '</th><th class="l">reaction</th><th class="l">detail</th></tr>')
        for k, f in enumerate(fig["faults"]):
            out.append(f"<tr><td>{_num(f.get('t'), 3, f'clinic.faults.{k}.t')}</td>"
                       f'<td class="l">{html.escape(str(f.get("cause", "")))}</td>'
                       f'<td class="l">{html.escape(str(f.get("joint", "")))}</td>'
                       f'<td class="l">{html.escape(str(f.get("action", "")))}</td>'
                       f'<td class="l">{html.escape(str(f.get("detail", "")))}</td></tr>')
        out.append("</table>")
    else:
        out.append("<p>No fault.</p>")
    out.append('<p class="sub">exo-rt report: the definitions of every figure are in '
               "docs/report.md.</p></body></html>\n")
    return "\n".join(out)


# ----------------------------------------------------------------------------- progress
def wearer_name(run_dir: Path) -> str | None:
    """The wearer a run was recorded with: the stem of the wearer profile it used
    (``--wearer configs/wearers/NAME.yaml``: NAME), else of the copy the run keeps (a profile
    built from the robot file's ``wearer:``: ``<robot>-wearer``); None without a snapshot."""
    try:
        doc = json.loads((Path(run_dir) / "config-snapshot.json").read_text())
    except (OSError, ValueError):
        return None
    for f in doc.get("files", ()):
        if f.get("kind") == "wearer":
            original = str(f.get("original", ""))
            if original.endswith((".yaml", ".yml")) and "(" not in original:
                return Path(original).stem
            return Path(str(f.get("copy", ""))).stem or None
    return None


def progress(sessions: list[dict], wearer: str) -> str:
    """The progress page: one row per session (date, session length, steps, walking time,
    walking speed, assistance used) and their plots over the dates."""
    plt = _plt()
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>Progress: {html.escape(wearer)}</title>", f"<style>{STYLE}</style>",
           "</head><body>", f"<h1>Progress of {html.escape(wearer)}</h1>",
           f'<p class="sub">{len(sessions)} session(s), by date.</p>']
    if sessions:
        dates = [datetime.datetime.fromisoformat(s["date"]) for s in sessions]
        fig, axes = plt.subplots(2, 2, figsize=(10, 5.5), sharex=True)
        panels = [("steps", "steps (count)", 1.0), ("speed_m_s", "walking speed (m/s)", 1.0),
                  ("assistance", "assistance used (0–1)", 1.0),
                  ("session_s", "session length (min)", 1 / 60)]
        for ax, (key, label, f) in zip(axes.flat, panels, strict=True):
            ax.plot(dates, [(s[key] if s[key] is not None else np.nan) * f for s in sessions],
                    "o-")
            ax.set_ylabel(label)
            ax.set_xlabel("date (day)")
        fig.autofmt_xdate()
        fig.tight_layout()
        out.append(_figure("plot-progress", "steps, walking speed, assistance used and "
                           "session length by date", fig))
    out.append('<table><tr><th class="l">date</th><th class="l">run</th><th>session (min)</th>'
               "<th>steps</th><th>walking time (min)</th><th>distance (m)</th>"
               "<th>walking speed (m/s)</th><th>assistance used (0–1)</th></tr>")
    for k, s in enumerate(sessions):
        key = f"sessions.{k}"
        out.append(f'<tr><td class="l">{html.escape(s["date"][:16].replace("T", " "))}</td>'
                   f'<td class="l">{html.escape(s["run"])}</td>'
                   f"<td>{_num(s['session_s'] / 60, 1, key + '.session_s/60')}</td>"
                   f"<td>{_num(s['steps'], 0, key + '.steps')}</td>"
                   f"<td>{_num(s['walking_s'] / 60, 1, key + '.walking_s/60')}</td>"
                   f"<td>{_num(s['distance_m'], 1, key + '.distance_m')}</td>"
                   f"<td>{_num(s['speed_m_s'], 2, key + '.speed_m_s')}</td>"
                   f"<td>{_num(s['assistance'], 2, key + '.assistance')}</td></tr>")
    out.append("</table></body></html>\n")
    return "\n".join(out)
