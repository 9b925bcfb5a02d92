#!/usr/bin/env python3
"""Model-in-the-loop gain design: ``python tools/mil.py [--controller NAME|FILE]
[--robot FILE] [--cycles N] [--model-error F] [--plant NAME]`` prints each joint's RMS and
largest tracking error, the largest current and the simulation speed.

The law runs on the controller's rigid model; the plant (a registered plant model, by default
harmonic_drive: compliant harmonic drives, friction, current loops) with encoder
quantisation; all inside njit (exo_rt.sim.mil).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from exo_rt.control.config import load_controller
from exo_rt.errors import ExoError
from exo_rt.model import load_mechanism
from exo_rt.sim import plants
from exo_rt.sim.mil import run_mil

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--controller", default="computed_torque",
                    help="a name in configs/controllers/ or a controller file")
    ap.add_argument("--robot", default=str(ROOT / "configs" / "robots" / "exo_leg.yaml"))
    ap.add_argument("--cycles", type=float, default=10.0)
    ap.add_argument("--model-error", type=float, default=1.0,
                    help="scale the controller model's masses and inertias (e.g. 1.2)")
    ap.add_argument("--plant", default="harmonic_drive",
                    help="the plant model (a registered one: exo_rt.sim.plants)")
    args = ap.parse_args(argv)
    path = Path(args.controller)
    if not path.suffix:
        path = ROOT / "configs" / "controllers" / f"{args.controller}.yaml"
    try:
        robot = load_mechanism(args.robot)
        cfg = load_controller(path, robot)
    except ExoError as err:
        print(f"mil: error: {err}", file=sys.stderr)
        return 2
    if args.plant not in plants.NAMES:
        print(f"mil: error: unknown plant model '{args.plant}' — use one of "
              f"{', '.join(plants.NAMES)}", file=sys.stderr)
        return 2
    model = dataclasses.replace(robot, mass=robot.mass * args.model_error,
                                inertia=robot.inertia * args.model_error)
    run_mil(robot, cfg, cycles=0.01, model=model, plant_model=args.plant)  # compile
    t0 = time.perf_counter()
    r = run_mil(robot, cfg, cycles=args.cycles, model=model, plant_model=args.plant)
    wall = time.perf_counter() - t0
    sim = args.cycles * cfg.reference.period
    print(f"{cfg.law} on {robot.name} ({args.plant}): {args.cycles:g} gait cycles of "
          f"{cfg.reference.period:g} s, controller model ×{args.model_error:g}")
    print(f"  {'joint':<10} {'RMS (deg)':>10} {'max (deg)':>10} {'max |I| (A)':>12}")
    for j, name in enumerate(r.joint_names):
        print(f"  {name:<10} {r.rms_error_deg[j]:10.3f} {r.max_error_deg[j]:10.3f} "
              f"{r.max_abs_current_A[j]:12.2f}")
    print(f"  simulated {sim:.1f} s in {wall:.2f} s wall: {sim / wall:.1f}× real time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
