#!/usr/bin/env python3
"""What recording costs the control thread, and how big the logs get:
``python tools/bench_record.py [--duration S]`` runs the default controller on the lockstep
simulated bus without and with recording (CAN log + cycle log) and compares the cycle's
compute time (median, p99), then reports the log sizes per minute at 1 kHz."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--format", default=".blf", help="CAN log format: .blf, .asc or .log")
    args = ap.parse_args(argv)
    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    Controller(top, "sim").run(0.5, None)  # warm-up
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, out in (("without recording", None), ("with recording", Path(tmp) / "run")):
            ctl = Controller(top, "sim")
            ctl.can_format = args.format
            s = ctl.run(args.duration, out).summary
            rows[label] = (s["timing"]["compute_us"], s["duration_s"])
        sizes = {p.name: p.stat().st_size for p in (Path(tmp) / "run").iterdir()}
    base, rec = rows["without recording"][0], rows["with recording"][0]
    print(f"cycle compute time (µs), default leg, {args.duration:g} s of RUN:")
    for label, (t, _) in rows.items():
        print(f"  {label:<18} median {t['p50']:6.1f}  p99 {t['p99']:6.1f}")
    print(f"  recording costs the control thread {rec['p50'] - base['p50']:+.1f} µs median, "
          f"{rec['p99'] - base['p99']:+.1f} µs p99 (target ≤ 10 µs)")
    minutes = rows["with recording"][1] / 60
    for name in ("cycles.exolog", f"can{args.format}"):
        print(f"  {name:<14} {sizes[name] / minutes / 1e6:6.2f} MB per minute at 1 kHz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
