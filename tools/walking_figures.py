"""Walking on the world's floor: the figures of docs/world.md, "Walking on the floor" — the
shipped default session (home, walk, STOP, end; not the config's own from the chair) on
configs/exo_2leg_world.yaml, measured from the run's
world truth (exo_rt/record/walking.py): stance fraction, the reaction in swing, slip, peaks,
tracking, the pelvis's speed.

``python tools/walking_figures.py [--duration S] [--wearer FILE] [--run DIR]`` — ``--run``
measures a run already made (of the same config) instead of making one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
    print("| foot | stance | reaction in swing | slip while flat | peak / carried (raw, "
          "25 ms) |")
    print("|---|---|---|---|---|")
    for foot in f.stance:
        print(f"| {foot} | {100 * f.stance[foot]:.1f} % | {f.swing_force[foot]:.1f} N | "
              f"{1000 * f.slip[foot]:.1f} mm | {f.peak[foot]:.2f}, "
              f"{f.peak_smooth[foot]:.2f} |")
    print("tracking RMS: " + ", ".join(f"{j} {v:.2f}°" for j, v in f.tracking_rms.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
