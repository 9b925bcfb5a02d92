#!/usr/bin/env python3
"""Whole controller cycle (drives read → estimate → law → safety → drives write → record) on
the lockstep simulated bus, for exo_leg (one bus) and exo_2leg (two buses), and the start-up
time: ``python tools/bench_cycle.py [--duration S]``. (The simulated physics is inside the
cycle here: on hardware that time is the drives'.)"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0)
    args = ap.parse_args(argv)
    print("whole cycle on the lockstep simulated bus (µs; target ≤ 150 µs median):")
    for name in ("exo_leg", "exo_2leg"):
        top = load_top(ROOT / "configs" / f"{name}.yaml")
        result = Controller(top, "sim").run(args.duration, None)
        t = result.summary["timing"]["compute_us"]
        print(f"  {name:<9} median {t['p50']:6.1f}  p99 {t['p99']:6.1f}  p99.9 {t['p999']:6.1f}  "
              f"max {t['max']:7.1f}  ({result.summary['final_state']})")
    res = subprocess.run([sys.executable, "-c", "import json,sys,time\n"
                          "from exo_rt.runtime.config import load_top\n"
                          "from exo_rt.runtime.controller import Controller\n"
                          f"top=load_top({str(ROOT / 'configs' / 'exo_leg.yaml')!r})\n"
                          "r=Controller(top,'sim').run(0.1,None)\n"
                          "print(json.dumps(r.summary['startup_s']))"],
                         capture_output=True, text=True, check=True)
    print(f"  start-up with a warm numba cache (process start → READY / RUN, s): "
          f"{res.stdout.strip()}  (target ≤ 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
