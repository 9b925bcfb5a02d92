#!/usr/bin/env python3
"""What the reference governor adds to a RUN cycle, side by side: the session's walk
reference (``segment.reference``) alone and followed by ``governor.govern``, compiled, on
the cycle of ``exo_leg`` and ``exo_2leg`` — ``python tools/bench_governor.py [--cycles N]``.
Prints ns a cycle and the ratio (the governor passes a reference within its bounds: the
figure is its cost when it does nothing but check)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from exo_rt.cycle import governor, segment
from exo_rt.cycle import step as cy
from exo_rt.cycle.layout import V_OFFSET
from exo_rt.jit import njit
from exo_rt.runtime.config import load_top

ROOT = Path(__file__).resolve().parents[1]


@njit(cache=True)
def _run(s_arr, seg_arr, v, gaits, dt, cycles, govern):
    s, seg = s_arr[0], seg_arr[0]
    for _ in range(cycles):
        segment.reference(s, seg, v, gaits, v[V_OFFSET], dt)
        if govern:
            governor.govern(s, v, dt)
    return s.governed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    print("RUN's reference per cycle (ns; best of repeats), without and with the governor:")
    for name in ("exo_leg", "exo_2leg"):
        top = load_top(ROOT / "configs" / f"{name}.yaml")
        cycle = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1e-3)
        best = {}
        for govern in (False, True, False, True):
            times = []
            for _ in range(args.repeats):
                s, seg = cycle.s_array.copy(), cycle.seg_array.copy()
                v = cycle.v.copy()
                segment.walk_from_start(s[0], seg[0], cycle.period)
                _run(s, seg, v, cycle.gaits, 1e-3, 1, False)  # (on the gait: the governor follows
                governor.follow(v)  # from where it is, at its speed)
                t0 = time.perf_counter()
                governed = _run(s, seg, v, cycle.gaits, 1e-3, args.cycles, govern)
                times.append((time.perf_counter() - t0) / args.cycles * 1e9)
                assert governed == 0.0, "the default gait is within its bounds"
            best[govern] = min(best.get(govern, np.inf), min(times))
        print(f"  {name:<9} alone {best[False]:6.1f}  governed {best[True]:6.1f}  "
              f"ratio {best[True] / best[False]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
