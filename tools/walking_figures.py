"""Walking on the world's floor: the figures of docs/world.md, "Walking on the floor" — the
shipped default session (home, walk, STOP, end; not the config's own from the chair) on
configs/exo_2leg_world.yaml, measured from the run's
world truth (exo_rt/record/walking.py): stance fraction, the reaction in swing, slip, peaks,
tracking, the pelvis's speed.

The walk's opening and closing steps (:func:`steps`): each foot's largest horizontal travel
while it carries the floor's load (more than :data:`LOADED` of the carried weight) and lies
flat — its ankle within ``walking.FLAT`` of its lowest in that contact — and the largest
current of each joint. The flat-foot gait's steps keep one foot planted and lift the other
(docs/world.md, "Walking on the floor").

``python tools/walking_figures.py [--duration S] [--wearer FILE] [--run DIR]`` — ``--run``
measures a run already made (of the same config) instead of making one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOADED = 0.1  # of the carried weight: a foot the floor loads
STEP = 0.5  # strides: the activities file's opening and closing steps


def steps(run: Path, thigh: float, shank: float) -> dict[str, dict]:
    """{'opening' | 'closing': {'travel': {foot: m}, 'current': {joint: A}}} of the walk in
    ``run`` (the module's docstring): the opening its first :data:`STEP` strides, the closing
    its last (the standing before and after left out: the phase still)."""
    import numpy as np

    from exo_rt.control.gait_speed import ankle_x
    from exo_rt.record.mcap_log import read_mcap
    from exo_rt.record.walking import FLAT, world_rows

    rows, meta = read_mcap(run / "run.mcap")
    names = list(meta["joint_names"])
    by_cycle = {int(m["cycle"]): m for m in world_rows(run)}
    walking = rows["walking"] > 0.5
    phase = rows["phase"]
    end = phase[walking].max()
    out = {}
    for part, keep in (("opening", walking & (phase > 0.0) & (phase < STEP)),
                       ("closing", walking & (phase >= end - STEP) & (phase < end))):
        idx = np.flatnonzero(keep)
        world = [by_cycle[int(c)] for c in rows["cycle"][idx]]
        feet = list(world[0]["force"])
        fz = np.array([[w["force"][f]["z"] for f in feet] for w in world])
        base = np.array([[w["base"]["x"], w["base"]["z"], w["base"]["pitch"]] for w in world])
        q = np.array([[w["q"][j] for j in names] for w in world])
        carried = 0.5 * float(np.median(fz.sum(axis=1)))  # (the steps' mean load, per foot)
        travel = {}
        for k, foot in enumerate(feet):
            prefix = foot[: -len("foot")]  # ('left_foot': the joints 'left_hip', …)
            hip, knee = names.index(prefix + "hip"), names.index(prefix + "knee")
            a = q[:, hip] - base[:, 2]
            x = base[:, 0] + ankle_x(a, q[:, knee], thigh, shank)
            z = base[:, 1] - thigh * np.cos(a) - shank * np.cos(a - q[:, knee])
            on = fz[:, k] > LOADED * carried
            worst = 0.0
            for run_ in np.split(np.arange(len(on)), np.flatnonzero(np.diff(on)) + 1):
                if on[run_[0]]:
                    flat = run_[z[run_] < z[run_].min() + FLAT]
                    worst = max(worst, float(np.ptp(x[flat])))
            travel[foot] = worst
        cur = np.abs(rows["current"][idx]).max(axis=0)
        out[part] = {"travel": travel, "current": dict(zip(names, map(float, cur),
                                                           strict=True))}
    return out


def main(argv=None) -> int:
    doc = __doc__.split("\n\n")[0]
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--config", default=str(ROOT / "configs" / "exo_2leg_world.yaml"))
    p.add_argument("--duration", type=float, default=10.0, help="s of walking (default 10)")
    p.add_argument("--wearer", help="a wearer profile (default: the robot file's wearer)")
    p.add_argument("--run", help="measure this run folder instead of making a run")
    args = p.parse_args(argv)

    from exo_rt import cli
    from exo_rt.control import flat_foot
    from exo_rt.control.gait_speed import leg_lengths
    from exo_rt.record.walking import measure
    from exo_rt.runtime.config import load_top

    top = load_top(args.config)
    if args.run is None:
        out = Path(tempfile.mkdtemp(prefix="walk-")) / "run"
        extra = ["--wearer", args.wearer] if args.wearer else []
        rc = cli.main(["run", "--config", args.config, "--session",
                       str(ROOT / "configs" / "sessions" / "default.yaml"),
                       "--duration", str(args.duration),
                       "--out", str(out), *extra])
        if rc != 0:
            print(f"the run ended with exit {rc}: {out}", file=sys.stderr)
            return rc
    else:
        out = Path(args.run)
    thigh, shank = leg_lengths(top.robot, "left_")
    f = measure(out, stance=flat_foot.STANCE, rocker=flat_foot.ROCKER,
                offsets={"left_": 0.0, "right_": 0.5}, thigh=thigh, shank=shank)
    print(f"run {out}: {f.strides} steady strides, pelvis {f.speed:.3f} m/s, the floor "
          f"carries {f.carried:.1f} N")
    print(f"| foot | stance | touch-down, unloaded (the gait lifts it at {flat_foot.STANCE}) "
          "| reaction in swing | slip while flat | peak / carried (raw, 25 ms) |")
    print("|---|---|---|---|---|---|")
    for foot in f.stance:
        print(f"| {foot} | {100 * f.stance[foot]:.1f} % | {f.touch[foot]:.3f}, "
              f"{f.unload[foot]:.3f} | {f.swing_force[foot]:.1f} N | "
              f"{1000 * f.slip[foot]:.1f} mm | {f.peak[foot]:.2f}, "
              f"{f.peak_smooth[foot]:.2f} |")
    print("tracking RMS: " + ", ".join(f"{j} {v:.2f}°" for j, v in f.tracking_rms.items()))
    for part, g in steps(out, thigh, shank).items():
        print(f"the {part} step: a loaded flat foot moves "
              + ", ".join(f"{foot} {1000 * v:.1f} mm" for foot, v in g["travel"].items())
              + "; peak current " + ", ".join(f"{j} {v:.1f} A" for j, v in g["current"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
