"""Every shipped controller in the world: configs/exo_2leg_world.yaml's wearer (half the
weight on the harness) through the sit/stand session and the default session's walk, one run
each, and how each ended (docs/world.md, "Every controller on the floor").

``python tools/world_controllers.py [--only NAME …] [--sessions sit_stand default]
[--duration S]`` — prints a Markdown table: per controller file, the wearer it ran with and,
per session, the final state and the first fault.

- **Which file.** A controller whose test-stand gains cannot carry the sized drives on the
  floor has a world variant beside it (:data:`WORLD_VARIANTS`: ``pid`` → ``pid_world.yaml``,
  ``computed_torque_events`` → ``computed_torque_events_world.yaml``); its row runs that file
  and names it, and the test stand's file keeps its own figures. The variants are no rows of
  their own.
- **Which wearer.** The tracking laws move a passive wearer (configs/wearers/default.yaml);
  the laws that follow the wearer (registered ``follows_wearer``: the assistance laws and
  ``transparent``) have nothing to follow unless the wearer walks, and run with a leading one
  (configs/wearers/leading.yaml: their own torques, :mod:`exo_rt.sim.walker`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTROLLERS = ROOT / "configs" / "controllers"
WEARERS = ROOT / "configs" / "wearers"
SKIP = {"computed_torque_12dof"}  # a 12-joint robot's controller: not exo_2leg's
# a row → the file it runs in the world: gains for the sized drives' rotors (10× the test
# stand's reflected inertia), the test stand's file keeping its figures
WORLD_VARIANTS = {"pid": "pid_world", "computed_torque_events": "computed_torque_events_world"}


def wearer_for(controller: Path) -> str:
    """``passive`` or ``leading``: who moves the legs of a run with ``controller`` — the
    wearer leads where the law follows them (registered ``follows_wearer``)."""
    from exo_rt.control import registry
    from exo_rt.control.config import load_controller
    from exo_rt.model import load_mechanism

    mech = load_mechanism(ROOT / "configs" / "robots" / "exo_2leg_sized.yaml")
    cfg = load_controller(controller, mech)
    return "leading" if registry.get(cfg.law).follows_wearer else "passive"


def run_one(controller: Path, session: str, duration: float, out: Path,
            wearer: str = "passive") -> tuple[str, str]:
    """(final state, first fault or '') of one run."""
    from exo_rt import cli

    args = ["run", "--config", str(ROOT / "configs" / "exo_2leg_world.yaml"),
            "--controller", str(controller), "--out", str(out)]
    if wearer == "leading":
        args += ["--wearer", str(WEARERS / "leading.yaml")]
    if session == "default":
        args += ["--duration", str(duration)]
    else:
        args += ["--session", str(ROOT / "configs" / "sessions" / f"{session}.yaml")]
    cli.main(args)
    s = json.loads((out / "summary.json").read_text())
    faults = s.get("faults") or []
    first = ""
    if faults:
        f = faults[0]
        first = f"{f.get('cause', '?')} on {f.get('joint', '?')} at {f.get('t', 0.0):.1f} s"
    return s["final_state"], first


def rows(only=None) -> list[str]:
    """The table's rows: every controller file but :data:`SKIP` and the world variants."""
    variants = set(WORLD_VARIANTS.values())
    return [f.stem for f in sorted(CONTROLLERS.glob("*.yaml"))
            if f.stem not in SKIP | variants and (not only or f.stem in only)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", help="controller files by name (default: all)")
    p.add_argument("--sessions", nargs="*", default=["sit_stand", "default"],
                   help="sit_stand and/or default (the walk)")
    p.add_argument("--duration", type=float, default=8.0,
                   help="s of walking in the default session (default 8)")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="world-controllers-"))
    print("| controller | wearer | " + " | ".join(args.sessions) + " |")
    print("|---|---|" + "---|" * len(args.sessions))
    for name in rows(args.only):
        file = CONTROLLERS / f"{WORLD_VARIANTS.get(name, name)}.yaml"
        wearer = wearer_for(file)
        cells = []
        for session in args.sessions:
            state, fault = run_one(file, session, args.duration, tmp / f"{name}-{session}",
                                   wearer)
            cells.append(state + (f" ({fault})" if fault else ""))
        shown = name + (f" (`{file.name}`)" if name in WORLD_VARIANTS else "")
        print(f"| {shown} | {wearer} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
