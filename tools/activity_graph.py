#!/usr/bin/env python3
"""The activity graph of an activities file, as a picture (docs/sessions.md shows the one of
``configs/activities/exo_leg.yaml``).

    python tools/activity_graph.py [ACTIVITIES] [--robot FILE] [--out PNG]

Nodes are the postures (and, for the homing motions, "no named posture": where a leg that is
in none starts); edges are the motions from their start posture to their end posture, each
labelled with its name and kind — a walk is a loop on its posture (opening step → strides →
closing step). A motion that progresses only while GO is held is drawn in orange, one that
STOP may cut is marked "STOP cuts"; a homing move (dashed) waits for the operator's CONFIRM.
It prints one line per edge it drew. Defaults: the one-leg exoskeleton's activities
(``configs/activities/exo_leg.yaml`` on ``configs/exo_leg.yaml``) into
``docs/img/activities-exo_leg.png``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "no named posture"  # the node the homing motions start from
GO_COLOUR, FREE_COLOUR = "#d9730d", "#1f5fa8"  # GO held / not


def load(activities: Path, robot: Path):
    """The activities file checked against the robot (a robot file or a top config)."""
    from exo_rt.cli.check import config_kind
    from exo_rt.model import load_mechanism
    from exo_rt.session.activities import MARGIN, load_activities

    if config_kind(robot) == "top":
        from exo_rt.runtime.config import load_top

        top = load_top(robot)
        return load_activities(activities, top.robot, top.safety.joint_margin)
    return load_activities(activities, load_mechanism(robot), MARGIN)


def label(m) -> str:
    """A motion's edge label: its name, kind and marks."""
    marks = [m.kind]
    if m.hold_go:
        marks.append("GO held")
    if m.stoppable:
        marks.append("STOP cuts" if m.kind != "walk" else "STOP: closing step")
    if m.needs_confirm:
        marks.append("CONFIRM first")
    return f"{m.name}\n({', '.join(marks)})"


def edges(a) -> list[tuple[str, str, object]]:
    """(from node, to node, motion) for every motion of the activities ``a``, in the file's
    order; a homing motion starts at :data:`NOWHERE`."""
    return [(m.start if m.start is not None else NOWHERE, m.end, m) for m in a.motions]


def positions(a) -> dict[str, tuple[float, float]]:
    """The postures evenly on a line (y = 0), "no named posture" below their middle."""
    names = list(a.postures)
    pos = {n: (3.0 * i, 0.0) for i, n in enumerate(names)}
    if any(m.start is None for m in a.motions):
        pos[NOWHERE] = (1.5 * (len(names) - 1), -2.2)
    return pos


def draw(a, out: Path, title: str) -> list[str]:
    """Draw the graph of ``a`` into ``out`` (PNG); returns one line per edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    pos = positions(a)
    fig, ax = plt.subplots(figsize=(7.2, 5.0), dpi=110)
    ax.set_aspect("equal")
    ax.axis("off")
    for name, (x, y) in pos.items():
        nowhere = name == NOWHERE
        ax.text(x, y, name, ha="center", va="center", fontsize=11, zorder=3,
                style="italic" if nowhere else "normal",
                bbox=dict(boxstyle="round,pad=0.5", fc="#eeeeee" if nowhere else "#dff0d8",
                          ec="#888888" if nowhere else "#3c763d",
                          ls="--" if nowhere else "-"))
    lines, pairs, loops = [], {}, {}
    for start, end, m in edges(a):
        colour = GO_COLOUR if m.hold_go else FREE_COLOUR
        style = "--" if m.kind == "home" else "-"
        width = 2.6 if m.kind == "walk" else 1.6
        (x0, y0), (x1, y1) = pos[start], pos[end]
        if start == end:  # a loop above the posture, larger for each further one
            k = loops[start] = loops.get(start, 0) + 1
            arrow = FancyArrowPatch((x0 - 0.35, y0 + 0.3), (x0 + 0.35, y0 + 0.3),
                                    connectionstyle=f"arc3,rad={-1.6 - 0.5 * (k - 1)}",
                                    arrowstyle="-|>", mutation_scale=16, color=colour,
                                    lw=width, ls=style, zorder=2)
            tx, ty = x0, y0 + 0.95 + 0.45 * k
        else:  # opposite directions bend to opposite sides; further ones bend more
            key = (start, end)
            k = pairs[key] = pairs.get(key, 0) + 1
            rad = 0.25 + 0.15 * (k - 1)
            arrow = FancyArrowPatch((x0, y0), (x1, y1), connectionstyle=f"arc3,rad={rad}",
                                    arrowstyle="-|>", mutation_scale=16, color=colour,
                                    lw=width, ls=style, shrinkA=28, shrinkB=28, zorder=2)
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            dx, dy = x1 - x0, y1 - y0
            d = math.hypot(dx, dy) or 1.0
            # arc3's control point is off the chord's middle by rad·|chord| (to its right)
            tx, ty = mx + rad * dy / d * d * 0.55, my - rad * dx / d * d * 0.55
        ax.add_patch(arrow)
        ax.text(tx, ty, label(m), ha="center", va="center", fontsize=8.5, color=colour,
                zorder=4, bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none",
                                    alpha=0.9))
        lines.append(f"{start} → {end}: {label(m).replace(chr(10), ' ')}")
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 2.2, max(xs) + 2.2)
    ax.set_ylim(min(ys) - 1.0, max(ys) + 1.9)
    ax.legend(handles=[
        Line2D([], [], color=GO_COLOUR, lw=1.6, label="progresses only while GO is held"),
        Line2D([], [], color=FREE_COLOUR, lw=1.6, label="runs on its own once started"),
        Line2D([], [], color="#555555", lw=2.6, label="walk: opening step → strides → "
                                                     "closing step"),
        Line2D([], [], color="#555555", lw=1.6, ls="--", label="homing: slow, after CONFIRM"),
    ], loc="lower left", fontsize=8, frameon=False)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    from exo_rt.plotting import save_png

    save_png(fig, out, metadata={"Software": None})
    plt.close(fig)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("activities", nargs="?", type=Path,
                   default=ROOT / "configs" / "activities" / "exo_leg.yaml")
    p.add_argument("--robot", type=Path, default=ROOT / "configs" / "exo_leg.yaml",
                   help="the robot file or top config the activities are for")
    p.add_argument("--out", type=Path, default=None,
                   help="the PNG (default docs/img/activities-ROBOT.png)")
    args = p.parse_args(argv)
    from exo_rt.errors import ExoError

    try:
        a = load(args.activities, args.robot)
    except ExoError as exc:
        print(f"activity_graph: error: {exc}", file=sys.stderr)
        return 2
    stem = args.activities.stem
    out = args.out or ROOT / "docs" / "img" / f"activities-{stem}.png"
    title = f"{stem}: postures and motions ({args.activities.name})"
    for line in draw(a, out, title):
        print(line)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
