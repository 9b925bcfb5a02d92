#!/usr/bin/env python3
"""Whole controller cycle (drives read → estimate → law → safety → drives write → record) on
the lockstep simulated bus, for exo_leg (one bus) and exo_2leg (two buses), and the start-up
time: ``python tools/bench_cycle.py [--duration S]``. (The simulated physics is inside the
cycle here: on hardware that time is the drives'.)

``--world [--quick] [--repeats N]``: the same whole cycle on the plant models side by side —
``harmonic_drive``, ``world`` on its test stand and ``world`` on the floor (``exo_2leg`` only:
``exo_leg`` has no floor yet) — every run the same session, standing (the leg put at the
activities' ``standing`` posture, held for --duration: the floor scene cannot walk yet), the
cases taking turns, ``--repeats`` rounds; the median of each run's per-cycle median, its
p99, the ratio to ``harmonic_drive`` (issue 44: the world ≤ 2×), and the plant's period alone
(its step from Python, 1 ms of 10 RK4 sub-steps, holding the posture) with, on the floor,
MuJoCo's contact solve (``mj_forward``, once a sub-step) timed by itself.

``--before DIR [--repeats N]``: the whole cycle of exo_leg and exo_2leg (the default session)
in this tree and in the tree at DIR (a checkout of an earlier commit: ``git worktree add DIR
COMMIT``), each run a process of its tree's own code, the trees taking turns, DIR first, after
one discarded run of each; every run gives its compute p50 (wall clock, the summary) and the
p50 of each cycle's CPU time (``time.thread_time`` around the controller's cycle: what a
shared machine's other work takes from the thread is left out), then the medians per tree and
their ratio (this / DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller

ROOT = Path(__file__).resolve().parents[1]
# (robot, label, the top config's simulation: section); "walking": the default session
CASES = (("exo_leg", "harmonic_drive", "{plant: harmonic_drive}"),
         ("exo_leg", "world test stand", "{plant: world}"),
         ("exo_leg", "walking", "{plant: harmonic_drive}"),
         ("exo_2leg", "harmonic_drive", "{plant: harmonic_drive}"),
         ("exo_2leg", "world test stand", "{plant: world}"),
         ("exo_2leg", "world floor", "{plant: world, scene: floor}"),
         ("exo_2leg", "walking", "{plant: harmonic_drive}"))
STANDING_SESSION = ("description: stand for --duration, end (tools/bench_cycle.py --world)\n"
                    "start: standing\n"
                    "steps:\n"
                    "  - {request: end, wait: duration}\n")


def _top(folder: Path, robot: str, simulation: str) -> Path:
    """A top config of ``robot`` with computed torque and ``simulation``, written in folder."""
    cfg = ROOT / "configs"
    path = folder / f"{robot}-{abs(hash(simulation))}.yaml"
    path.write_text(f"robot: {cfg / 'robots' / f'{robot}.yaml'}\n"
                    f"buses: {cfg / 'buses' / f'{robot}.yaml'}\n"
                    f"controller: {cfg / 'controllers' / 'computed_torque.yaml'}\n"
                    f"rate_hz: 1000\nsimulation: {simulation}\n")
    return path


def lockstep(top: Path, session: Path | None, duration: float) -> tuple[float, float, str]:
    """One lockstep run, standing (``session``) or the default walk (None): (compute p50 µs,
    p99 µs, final state and faults)."""
    result = Controller(load_top(top), "sim", session=session and str(session)).run(duration,
                                                                                       None)
    s = result.summary
    t = s["timing"]["compute_us"]
    faults = [f["cause"] for f in s["faults"]]
    return t["p50"], t["p99"], s["final_state"] + (f" {faults}" if faults else "")


def plant_period(top: Path, periods: int) -> tuple[float, float]:
    """(µs per plant period, µs of MuJoCo's contact solve per period — 0 off the floor): the
    configured plant holding the ``standing`` posture with a joint PD on its drives (the step
    alone timed, from Python, in this thread's CPU time: a shared machine's other work left
    out)."""
    import mujoco
    import numpy as np

    from exo_rt.session.activities import load_activities
    from exo_rt.sim import plants
    from exo_rt.sim.world.standing import drives_pd

    t = load_top(top)
    plant = plants.create(t.simulation.plant, t.robot, dt=1.0 / t.rate_hz,
                          room=t.simulation.plant_options())
    acts = load_activities(ROOT / "configs" / "activities" / f"{Path(t.robot.source).stem}.yaml",
                           t.robot)
    posture = np.array(acts.postures["standing"])
    plant.reset(posture)
    spent = 0.0
    for k in range(periods + 100):  # the first 100 settle, untimed
        cmd = drives_pd(plant, posture)
        t0 = time.thread_time()
        plant.step(cmd)
        if k >= 100:
            spent += time.thread_time() - t0
    contact = 0.0
    if getattr(plant, "floor", False):
        m, d = plant.world.model, plant.mj_data
        t0 = time.thread_time()
        for _ in range(periods):
            mujoco.mj_forward(m, d)
        contact = (time.thread_time() - t0) / periods * plant.substeps
    return spent / periods * 1e6, contact * 1e6


def world_side_by_side(repeats: int, duration: float, periods: int, robots) -> None:
    """The ``--world`` comparison (the module's docstring)."""
    cases = [c for c in CASES if c[0] in robots]
    runs: dict[tuple, list] = {c: [] for c in cases}
    alone: dict[tuple, list] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="exo-rt-bench-cycle-") as tmp:
        session = Path(tmp) / "standing.yaml"
        session.write_text(STANDING_SESSION)
        tops = {c: _top(Path(tmp), c[0], c[2]) for c in cases}
        walk = {c: None if c[1] == "walking" else session for c in cases}
        for c in cases:  # each case's kernels loaded (or compiled) before any is timed
            lockstep(tops[c], walk[c], 0.05)
        for r in range(repeats):
            for c in cases:
                runs[c].append(lockstep(tops[c], walk[c], duration))
                if c[1] != "walking":
                    alone[c].append(plant_period(tops[c], periods))
                p50, p99, end = runs[c][-1]
                print(f"  round {r + 1}: {c[0]:<9} {c[1]:<17} p50 {p50:6.1f}  p99 {p99:7.1f} µs"
                      f"  ({end})" + (f"; plant alone {alone[c][-1][0]:6.1f} µs CPU"
                                      if c[1] != "walking" else ""), flush=True)
    print(f"whole cycle on the lockstep simulated bus, computed_torque, standing (walking: the "
          f"default session, harmonic_drive); {repeats} round(s) of {duration:g} s, the cases "
          f"alternated (µs; min / median of the runs' p50, median p99; ratio of the medians to "
          f"harmonic_drive's standing; the plant period alone in CPU µs, min / median):")
    for robot in robots:
        mine = [c for c in cases if c[0] == robot]
        base = statistics.median(p[0] for p in runs[mine[0]])
        base_alone = min(a[0] for a in alone[mine[0]])
        for c in mine:
            p50 = [p[0] for p in runs[c]]
            p99 = statistics.median(p[1] for p in runs[c])
            line = (f"  {robot:<9} {c[1]:<17} p50 {min(p50):6.1f} / {statistics.median(p50):6.1f}"
                    f"  p99 {p99:7.1f}  ratio {statistics.median(p50) / base:4.2f}")
            if alone[c]:
                us = [a[0] for a in alone[c]]
                mj = min(a[1] for a in alone[c])
                line += (f"   plant period alone {min(us):6.1f} / {statistics.median(us):6.1f} µs "
                         f"(ratio {min(us) / base_alone:4.2f})"
                         + (f", of it the contact solve ≈ {mj:5.1f} µs" if mj else ""))
            print(line)
        floor = [c for c in mine if c[1] == "world floor"]
        if floor:
            walking = statistics.median(p[0] for p in runs[mine[-1]])
            standing = statistics.median(p[0] for p in runs[floor[0]])
            print(f"  {robot}: world floor standing / harmonic_drive walking (the issue's "
                  f"test-stand figure): {standing / walking:4.2f}")


# one lockstep run in a tree's own process: each cycle's CPU time around Controller._cycle
# (the names both trees share), after a short run that loads the kernels
_SIDE_RUN = """import json, sys, time
import numpy as np
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
cpu = np.zeros(1_000_000)
n = [0]
cycle = Controller._cycle
def timed(self, k):
    t0 = time.thread_time_ns()
    out = cycle(self, k)
    cpu[n[0]] = time.thread_time_ns() - t0
    n[0] += 1
    return out
Controller._cycle = timed
Controller(load_top(sys.argv[1]), 'sim').run(0.05, None)
n[0] = 0
s = Controller(load_top(sys.argv[1]), 'sim').run(float(sys.argv[2]), None).summary
t = s['timing']['compute_us']
print(json.dumps({'p50': t['p50'], 'p99': t['p99'], 'state': s['final_state'],
                  'cpu_p50': float(np.median(cpu[:n[0]])) / 1e3}))
"""


def side_run(tree: Path, robot: str, duration: float) -> dict:
    """One lockstep run of ``robot`` (its top config in ``tree``) with ``tree``'s code."""
    res = subprocess.run([sys.executable, "-c", _SIDE_RUN,
                          str(tree / "configs" / f"{robot}.yaml"), str(duration)],
                         cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"lockstep run in {tree} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def before_side_by_side(before: Path, repeats: int, duration: float) -> None:
    """The ``--before`` comparison (the module's docstring)."""
    trees = {"before": before, "this": ROOT}
    robots = ("exo_leg", "exo_2leg")
    runs: dict = {(r, t): [] for r in robots for t in trees}
    for robot in robots:
        for tree in trees.values():
            side_run(tree, robot, 0.2)  # discarded: caches warm
    for i in range(repeats):
        for robot in robots:
            for name, tree in trees.items():
                x = side_run(tree, robot, duration)
                runs[robot, name].append(x)
                print(f"  round {i + 1}: {robot:<9} {name:<6} p50 {x['p50']:6.1f} µs, CPU p50 "
                      f"{x['cpu_p50']:6.1f} µs  ({x['state']}; load "
                      + " ".join(f"{v:.2f}" for v in os.getloadavg()) + ")", flush=True)
    print(f"whole cycle on the lockstep simulated bus, the default session, {repeats} round(s)"
          f" of {duration:g} s, the trees alternated (µs per run; median; this / before); "
          f"before: {before}")
    for robot in robots:
        for key, label in (("p50", "wall p50"), ("cpu_p50", "CPU p50")):
            med = {}
            for name in trees:
                xs = [x[key] for x in runs[robot, name]]
                med[name] = statistics.median(xs)
                print(f"  {robot:<9} {label:<8} {name:<6} " + " ".join(f"{v:6.1f}" for v in xs)
                      + f"   median {med[name]:6.1f}")
            print(f"  {robot:<9} {label:<8} this / before {med['this'] / med['before']:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=None,
                    help="s of each run [10; --world 5, --quick 0.3]")
    ap.add_argument("--world", action="store_true",
                    help="harmonic_drive, the world's test stand and floor side by side")
    ap.add_argument("--repeats", type=int, default=None,
                    help="--world or --before rounds [3; --quick 1]")
    ap.add_argument("--quick", action="store_true",
                    help="with --world: exo_2leg only, one short round (a smoke run)")
    ap.add_argument("--before", metavar="DIR", type=Path,
                    help="this tree and the tree at DIR (an earlier commit's checkout) side by "
                         "side, alternated --repeats times: wall and CPU time per cycle")
    args = ap.parse_args(argv)
    if args.before:
        before_side_by_side(args.before.resolve(), args.repeats or 3, args.duration or 10.0)
        return 0
    if args.world:
        world_side_by_side(args.repeats or (1 if args.quick else 3),
                           args.duration or (0.3 if args.quick else 5.0),
                           200 if args.quick else 2000,
                           ("exo_2leg",) if args.quick else ("exo_leg", "exo_2leg"))
        return 0
    duration = args.duration or 10.0
    print("whole cycle on the lockstep simulated bus (µs; target ≤ 150 µs median):")
    for name in ("exo_leg", "exo_2leg"):
        top = load_top(ROOT / "configs" / f"{name}.yaml")
        result = Controller(top, "sim").run(duration, None)
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
