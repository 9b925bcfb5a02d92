"""Every shipped controller in the world: configs/exo_2leg_world.yaml's wearer (passive, half
the weight on the harness) through the sit/stand session and the default session's walk, one
run each, and how each ended (docs/world.md, "Every controller on the floor").

``python tools/world_controllers.py [--only NAME …] [--sessions sit_stand default]
[--duration S]`` — prints a Markdown table: per controller file and session, the final state
and the first fault.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"computed_torque_12dof"}  # a 12-joint robot's controller: not exo_2leg's


def run_one(controller: Path, session: str, duration: float, out: Path) -> tuple[str, str]:
    """(final state, first fault or '') of one run."""
    from exo_rt import cli

    args = ["run", "--config", str(ROOT / "configs" / "exo_2leg_world.yaml"),
            "--controller", str(controller), "--out", str(out)]
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", help="controller files by name (default: all)")
    p.add_argument("--sessions", nargs="*", default=["sit_stand", "default"],
                   help="sit_stand and/or default (the walk)")
    p.add_argument("--duration", type=float, default=8.0,
                   help="s of walking in the default session (default 8)")
    args = p.parse_args(argv)
    files = sorted((ROOT / "configs" / "controllers").glob("*.yaml"))
    names = [f.stem for f in files if f.stem not in SKIP
             and (not args.only or f.stem in args.only)]
    tmp = Path(tempfile.mkdtemp(prefix="world-controllers-"))
    print("| controller | " + " | ".join(args.sessions) + " |")
    print("|---|" + "---|" * len(args.sessions))
    for name in names:
        cells = []
        for session in args.sessions:
            state, fault = run_one(ROOT / "configs" / "controllers" / f"{name}.yaml", session,
                                   args.duration, tmp / f"{name}-{session}")
            cells.append(state + (f" ({fault})" if fault else ""))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
