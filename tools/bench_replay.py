#!/usr/bin/env python3
"""Replay speed per mode (simulated seconds per wall second) for a recorded 10 s run of the
default controller: ``python tools/bench_replay.py``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.runtime.replay import replay, replay_can_log

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    config = ROOT / "configs" / "exo_leg.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        s = Controller(load_top(config), "sim").run(10.0, run).summary
        seconds = s["duration_s"]
        replay(run, "plant")  # warm-up
        print(f"replay of a {seconds:.1f} s recorded run:")
        for mode in ("plant", "controller", "closed-loop"):
            t0 = time.perf_counter()
            replay(run, mode)
            wall = time.perf_counter() - t0
            print(f"  {mode:<12} {wall:6.2f} s wall  {seconds / wall:6.1f} simulated s per wall s")
        t0 = time.perf_counter()
        replay_can_log(run / "can.blf", config)
        wall = time.perf_counter() - t0
        print(f"  {'bare CAN log':<12} {wall:6.2f} s wall  {seconds / wall:6.1f} simulated s per "
              "wall s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
