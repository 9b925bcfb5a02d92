#!/usr/bin/env python3
"""SAFE under load, end to end, for each world config: ``exo-rt run --config CONFIG --session
configs/sessions/sit_walk_sit.yaml`` (stand up from the chair, walk, sit down) once as it is,
to find two instants — half-way up from the chair (the middle of
the stand-up, from its GO to its end in ``events.jsonl``) and mid-stance (the middle of the
walk's longest stretch on one foot alone, from the world's foot reactions in the cycle log)
— then twice with the E-stop pressed there (``--inject estop@T``), and the table of what SAFE
did to the wearer in the 2 s from the press (the run's ``after_safe``: the pelvis's drop and
the knees' flexion; docs/world.md, "SAFE under load, end to end").

``python tools/safe_under_load.py [--configs NAME …] [--out DIR]``
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORLD_CONFIGS = ("exo_2leg_world", "exo_2leg_world_heavy", "exo_2leg_world_tq",
                 "exo_2leg_world_tq32", "exo_2leg_world_tq_heavy", "exo_leg_world")
SESSION = "configs/sessions/sit_walk_sit.yaml"  # stand up from the chair, walk, sit down
MIN_ALONE_S = 0.1  # s: the shortest stretch on one foot taken for mid-stance


def run(config: str, out: Path, *extra: str) -> dict:
    """``exo-rt run --config configs/CONFIG.yaml --session SESSION`` into ``out``: its
    summary."""
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--config",
                          f"configs/{config}.yaml", "--session", SESSION, "--out", str(out),
                          *extra], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    path = out / "summary.json"
    if not path.exists():
        raise SystemExit(f"{config}: the run wrote no summary:\n{res.stdout}{res.stderr}")
    return json.loads(path.read_text())


def instants(folder: Path) -> tuple[float, float]:
    """(half-way up, mid-stance): s from the start of RUN, of the run in ``folder``."""
    from exo_rt.record.integrity import read_records

    events = [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]
    t_run = next(e["t"] for e in events if e.get("state") == "RUN")
    go = next(e["t"] for e in events if e.get("request") == "go"
              and e.get("motion") == "stand_up" and e.get("answer") == "accepted")
    up = next(e["t"] for e in events if e.get("event") == "finished"
              and e.get("motion") == "stand_up")
    walk = next(e["t"] for e in events if e.get("request") == "start"
                and e.get("motion") == "walk" and e.get("answer") == "accepted")
    walked = next(e["t"] for e in events if e.get("event") == "finished"
                  and e.get("motion") == "walk")
    recs = read_records(folder)[0]
    t, soles = recs["t"], recs["soles"]
    loaded = soles > 1.0  # N (the recorded feet: those the floor ever carried)
    feet = np.flatnonzero(loaded.any(axis=0))
    walking = (t >= walk) & (t <= walked)
    best, where = 0.0, None
    for foot in feet:
        alone = loaded[:, foot] & ~loaded[:, feet[feet != foot]].any(axis=1) & walking
        edges = np.flatnonzero(np.diff(np.concatenate([[0], alone.astype(int), [0]])))
        for a, b in zip(edges[::2], edges[1::2], strict=True):
            if t[b - 1] - t[a] > best:
                best, where = t[b - 1] - t[a], 0.5 * (t[a] + t[b - 1])
    if where is None or best < MIN_ALONE_S:
        raise SystemExit(f"{folder}: no stretch of {MIN_ALONE_S} s on one foot in the walk")
    return 0.5 * (go + up) - t_run, where - t_run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=list(WORLD_CONFIGS),
                    help="world configs (names in configs/) [every shipped one]")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the runs go [a temporary folder]")
    args = ap.parse_args(argv)
    base = args.out or Path(tempfile.mkdtemp(prefix="exo-rt-safe-under-load-"))
    print("| config | E-stop at RUN + | pelvis drop in 2 s | knee flexion in 2 s |")
    print("|---|---|---|---|")
    for config in args.configs:
        plain = base / config / "plain"
        run(config, plain)
        for what, at in zip(("half-way up", "mid-stance"), instants(plain), strict=True):
            s = run(config, base / config / what.replace(" ", "-"), "--inject", f"estop@{at:.3f}")
            a = s.get("after_safe")
            if not a:
                print(f"| {config} | {at:.3f} s, {what} | (no after_safe: {s['final_state']}) | |")
                continue
            knees = ", ".join(f"{n} {math.degrees(j['flexion_rad']):.2f}°"
                              for n, j in a["joints"].items() if "knee" in n)
            print(f"| {config} | {at:.3f} s, {what} | {1e3 * a['pelvis_drop_m']:.1f} mm | "
                  f"{knees} |", flush=True)
    print(f"runs in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
