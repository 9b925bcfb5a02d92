"""What the flat-foot gait's pelvis asks of the floor at a speed, and what a lower peak costs
the stance knee (docs/world.md, "Not done yet": walking at 0.8 m/s).

The gait keeps both feet flat in double support, so the pelvis there is as low as two legs a
stance's length apart allow; at mid-stance it is as high as the knee's flexion there
(``KNEE_MID``) allows. The drop between the two, twice a stride, is what the floor's peak
reaction pays for: ``flat_foot.pelvis_peak_load``, the closed form the 0.4 m/s walk measures
within 0.07. For each mid-stance knee flexion this prints the pelvis's drop, that peak over
the carried weight, and the stance knee's static moment at mid-stance under the whole carried
weight — the hip over the ankle, the knee off their line by thigh·shank·sin κ / r (r the
hip–ankle distance): a deeper knee lowers the peak by a drop it no longer makes, and asks the
knee to hold the body in a crouch.

    python tools/pelvis_peaks.py [--speed 0.8] [--height 1.75] [--mass 95.7]
        [--thigh 0.43] [--shank 0.42] [--edge RAD] [--mid RAD ...]

Defaults: the sized two-leg exoskeleton with the default wearer (95.7 kg carried, legs 0.43
and 0.42 m), no harness, the gait's double-support knee (``KNEE_EDGE``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exo_rt.control import flat_foot  # noqa: E402

G = 9.81  # m/s²


def knee_moment(mass: float, thigh: float, shank: float, knee: float) -> float:
    """N·m: the knee's static moment holding ``mass`` kg over a leg whose hip is over its ankle
    with the knee flexed ``knee`` rad (the leg's own masses left out)."""
    r = math.sqrt(thigh * thigh + shank * shank + 2.0 * thigh * shank * math.cos(knee))
    return mass * G * thigh * shank * math.sin(knee) / r


def rows(speed: float, height: float, mass: float, thigh: float, shank: float, edge: float,
         mids: list[float]) -> list[dict]:
    """One row per mid-stance knee flexion: {'mid' rad, 'drop' m, 'peak' (of the carried
    weight), 'moment' N·m}."""
    w = flat_foot.walk(speed, height)
    phase = np.arange(flat_foot.SAMPLES) / flat_foot.SAMPLES
    out = []
    for mid in mids:
        h = flat_foot.pelvis_height(phase, w.stride_length, thigh, shank, mid, edge)
        out.append({"mid": mid, "drop": float(h.max() - h.min()),
                    "peak": flat_foot.pelvis_peak_load(speed, height, thigh, shank, 0.0, mid,
                                                       edge),
                    "moment": knee_moment(mass, thigh, shank, mid)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--speed", type=float, default=0.8, help="m/s (default 0.8)")
    p.add_argument("--height", type=float, default=1.75, help="the wearer's height, m")
    p.add_argument("--mass", type=float, default=95.7, help="kg carried: exoskeleton and wearer")
    p.add_argument("--thigh", type=float, default=0.43, help="m")
    p.add_argument("--shank", type=float, default=0.42, help="m")
    p.add_argument("--edge", type=float, default=flat_foot.KNEE_EDGE,
                   help=f"rad: the knee in double support (the gait's {flat_foot.KNEE_EDGE})")
    p.add_argument("--mid", type=float, nargs="+",
                   default=[flat_foot.KNEE_MID, 0.4, 0.5, 0.6, 0.7, 0.8],
                   help=f"rad: mid-stance knee flexions (the gait's {flat_foot.KNEE_MID})")
    args = p.parse_args(argv)
    w = flat_foot.walk(args.speed, args.height)
    print(f"{args.speed} m/s: stride {w.stride_length:.3f} m in {w.period:.3f} s; the knee "
          f"{args.edge} rad in double support; {args.mass} kg carried, no harness")
    print("| knee at mid-stance | pelvis drop | peak / carried weight | stance knee's moment |")
    print("|---|---|---|---|")
    for r in rows(args.speed, args.height, args.mass, args.thigh, args.shank, args.edge,
                  args.mid):
        gait = " (the gait's)" if r["mid"] == flat_foot.KNEE_MID else ""
        print(f"| {r['mid']:.2f} rad{gait} | {100 * r['drop']:.1f} cm | {r['peak']:.2f} | "
              f"{r['moment']:.0f} N·m |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
