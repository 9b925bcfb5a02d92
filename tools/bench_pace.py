"""What a walking speed asked mid-walk costs the control cycle: a new pace made beside the
cycle (a worker thread, as a real-time run does: exo_rt/session/prepare.py) against the same
made inside the cycle (docs/sessions.md, "What a request costs the cycle").

Each round runs the same session twice, the two ways taking turns: walk, then speeds outside
the wearer's list (0.45 m/s, then 0.35 m/s) mid-walk, STOP, END. For each request it gives
the longest cycle from its cycle to 0.6 s after (the cycle log's compute time), the delay from
the request to its answer, and how the run ended; then the median of the longest cycles each
way and their ratio. Real time by default (``--lockstep`` for a quick check of the tool: its
cycle times are the simulation's, not the controller's).

``python tools/bench_pace.py [--config FILE] [--rounds N] [--lockstep]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
SPEEDS = ((0.45, 4.0), (0.35, 8.0))  # (m/s, s into the session): outside the default list
WINDOW_S = 0.6  # s after a request in which its longest cycle is looked for
WAYS = ("beside", "in the cycle")


def session(path: Path) -> Path:
    """The session script the runs share (written to ``path``)."""
    steps = [{"request": "start", "motion": "walk", "at": 0.5}]
    steps += [{"request": "speed", "value": v, "at": t} for v, t in SPEEDS]
    steps += [{"request": "stop", "at": 11.0}, {"request": "end", "after": "finished"}]
    path.write_text(yaml.safe_dump({"description": "speeds outside the list, mid-walk",
                                    "steps": steps}))
    return path


def run(config: Path, script: Path, out: Path, way: str, realtime: bool) -> int:
    """One run, its pace made ``way``: the session's preparer threaded or not, whatever the
    run's clock (exo_rt.session.session.build's choice replaced for this run)."""
    from exo_rt import cli
    from exo_rt.session import prepare
    from exo_rt.session import session as sessions

    beside = way == "beside"
    sessions.Preparer = lambda threaded=False: prepare.Preparer(threaded=beside)
    try:
        argv = ["run", "--config", str(config), "--session", str(script), "--duration", "16",
                "--out", str(out)]
        return cli.main(argv + (["--realtime"] if realtime else []))
    finally:
        sessions.Preparer = prepare.Preparer


def measure(out: Path) -> dict:
    """The run's final state and, per speed asked: the cycle it was asked in, the cycles to
    its answer (None: never answered) and the longest cycle (µs) in the window after it."""
    from exo_rt.record import integrity

    records, _meta, _ = integrity.read_records(out)
    compute = records["compute_us"]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    dt = 1.0 / float(summary["rate_hz"])
    asked, answered = {}, {}
    for e in events:
        if e.get("request") != "speed":
            continue
        value = round(float(e["value"]), 2)
        if e["event"] == "request_preparing":
            asked.setdefault(value, e["cycle"])
        elif e["event"] == "request":
            asked.setdefault(value, e["cycle"])
            answered[value] = e["cycle"]
    speeds = {}
    for value, k in asked.items():
        window = compute[k:k + int(WINDOW_S / dt)]
        speeds[value] = {"asked": k, "after": (answered[value] - k) if value in answered
                         else None, "longest_us": float(window.max()) if len(window) else 0.0}
    final = summary["final_state"]
    faults = summary.get("faults") or []
    if faults:  # (what ended it, and when: before a request or after it)
        f = faults[0]
        final += f" ({f.get('cause')} at {float(f.get('t_run', f.get('t', 0.0))):.2f} s)"
    return {"final": final, "speeds": speeds, "dt": dt}


def table(results: list[tuple[str, int, dict]]) -> str:
    """The runs' figures, and the longest cycles' medians each way with their ratio."""
    lines = ["| way | round | end | speed m/s | longest cycle ms | answered after ms |",
             "|---|---|---|---|---|---|"]
    longest = {w: [] for w in WAYS}
    for way, i, r in results:
        if not r["speeds"]:  # (ended before the first speed was asked)
            lines.append(f"| {way} | {i} | {r['final']} | — | — | — |")
        for value, s in sorted(r["speeds"].items()):
            after = "—" if s["after"] is None else f"{s['after'] * r['dt'] * 1e3:.0f}"
            lines.append(f"| {way} | {i} | {r['final']} | {value:g} | "
                         f"{s['longest_us'] / 1e3:.2f} | {after} |")
            longest[way].append(s["longest_us"])
    med = {w: float(np.median(v)) if v else float("nan") for w, v in longest.items()}
    lines.append(f"median longest cycle: beside {med['beside'] / 1e3:.2f} ms, in the cycle "
                 f"{med['in the cycle'] / 1e3:.2f} ms (in the cycle / beside: "
                 f"{med['in the cycle'] / med['beside']:.1f}×)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "exo_leg.yaml",
                   help="top config (default: configs/exo_leg.yaml, the test stand)")
    p.add_argument("--rounds", type=int, default=3, help="runs each way (default 3)")
    p.add_argument("--lockstep", action="store_true",
                   help="lockstep runs (a check of the tool, not a measurement)")
    args = p.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-pace-") as tmp:
        script = session(Path(tmp) / "speeds.yaml")
        for i in range(1, args.rounds + 1):
            for way in WAYS:
                out = Path(tmp) / f"{way.replace(' ', '-')}-{i}"
                run(args.config, script, out, way, not args.lockstep)
                results.append((way, i, measure(out)))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
