"""The 3D scene's cost in the recording process: the same lockstep walk recorded with the scene
and without it (``EXO_RT_SCENE=0``), side by side (the two runs at once, so that both see the
same machine), and the recording process's CPU time (``recording.json``'s ``cpu_s``) of each.

    python tools/bench_scene.py                  # an 8-minute walk (480 s, 0.3 m/s), exo_leg
    python tools/bench_scene.py --duration 60 --config configs/exo_2leg.yaml

Prints, per run: cycles, the recording process's CPU (s, and µs per cycle), the rest of the
run's CPU (control process and simulated drives: every process but the recording one), the
MCAP file's size and messages per topic; then the ratios with/without. docs/telemetry.md,
"The 3D scene", keeps the figures (the issue's bound: ≤ 1.5× the recording process's CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


SESSION = """description: home, walk at {speed} m/s for --duration, stop, end (bench_scene)
steps:
  - {{request: start, motion: home, at: 0.0}}
  - {{request: confirm, after: rejected}}
  - {{request: speed, value: {speed}, after: accepted}}
  - {{request: start, motion: walk, after: finished}}
  - {{request: stop, after: accepted, wait: duration}}
  - {{request: end, after: finished}}
"""


def _start(out: Path, duration: float, config: str, scene: bool, session: Path
           ) -> subprocess.Popen:
    env = dict(os.environ, EXO_RT_SCENE="1" if scene else "0")
    return subprocess.Popen([sys.executable, "-m", "exo_rt", "run", "--config", config,
                             "--duration", str(duration), "--out", str(out),
                             "--session", str(session)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _wait(proc: subprocess.Popen) -> float:
    """Wait for ``proc``; its CPU time and its descendants' (s), from wait4's rusage."""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def _walked(events: Path) -> float:
    """s from the walk's accepted start to its finish (or the last event)."""
    start = end = None
    for line in events.read_text().splitlines():
        e = json.loads(line)
        if e.get("request") == "start" and e.get("motion") == "walk" and \
                e.get("answer") == "accepted":
            start = e["t"]
        elif start is not None and end is None and (
                e.get("event") == "finished" or e.get("state") in ("SAFE", "STOPPING")):
            end = e["t"]
    return (end or 0.0) - (start or 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=480.0, help="s of walking (480)")
    ap.add_argument("--config", default="configs/exo_leg.yaml")
    ap.add_argument("--speed", type=float, default=0.3,
                    help="walking speed (m/s; 0.3: the hip's winding stays below its "
                         "derating over 8 minutes)")
    args = ap.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-scene-") as tmp:
        outs = {s: Path(tmp) / ("with" if s else "without") for s in (True, False)}
        session = Path(tmp) / "walk.yaml"
        session.write_text(SESSION.format(speed=args.speed))
        t0 = time.monotonic()
        procs = {s: _start(outs[s], args.duration, args.config, s, session)
                 for s in (True, False)}
        cpu = {s: _wait(procs[s]) for s in (True, False)}
        wall = time.monotonic() - t0
        for s in (True, False):
            if not (outs[s] / "recording.json").is_file():
                print(f"the run {'with' if s else 'without'} the scene failed "
                      f"(exit {procs[s].returncode})", file=sys.stderr)
                return 1
            rec = json.loads((outs[s] / "recording.json").read_text())
            summary = json.loads((outs[s] / "summary.json").read_text())
            size = sum(f.stat().st_size for f in outs[s].glob("run*.mcap"))
            rows[s] = {"cycles": summary["cycles"], "recording_cpu_s": rec["cpu_s"],
                       "final": summary["final_state"],
                       "walk_s": _walked(outs[s] / "events.jsonl"),
                       "rest_cpu_s": cpu[s] - rec["cpu_s"], "mcap_MB": size / 1e6,
                       "messages": rec.get("mcap_messages", {})}
    print(f"{args.config}, lockstep, a walk at {args.speed:g} m/s, --duration "
          f"{args.duration:g} s (both runs at once, "
          f"{wall:.0f} s of wall time)")
    for s in (True, False):
        r = rows[s]
        print(f"  {'with' if s else 'without'} the scene: {r['cycles']} cycles, "
              f"{r['walk_s']:.1f} s walking, final state {r['final']}; recording "
              f"process {r['recording_cpu_s']:.2f} s CPU "
              f"({1e6 * r['recording_cpu_s'] / r['cycles']:.1f} µs a cycle); the rest "
              f"{r['rest_cpu_s']:.2f} s; run.mcap {r['mcap_MB']:.1f} MB; "
              + ", ".join(f"{k} {v}" for k, v in r["messages"].items()))
    a, b = rows[True], rows[False]
    ratio = a["recording_cpu_s"] / b["recording_cpu_s"]
    print(f"  ratio with/without: recording process {ratio:.2f}×, the rest "
          f"{a['rest_cpu_s'] / b['rest_cpu_s']:.2f}×, run.mcap "
          f"{a['mcap_MB'] / b['mcap_MB']:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
