"""Rising from the chair against the harness's share of the weight: the table of docs/world.md,
"Sit-to-stand: how much support".

For each body-weight support (the top config's ``simulation.support``, a fraction of the whole
weight) the tool runs the sit/stand session (``configs/sessions/sit_stand.yaml``: stand up with
GO held, stand 3 s, sit down) on a copy of the top config with only that key changed, then
gives the run's end, its peak hip and knee torque per leg (``exo-rt size``'s peak |τ|, N·m),
their sum per kg of the wearer's body mass (the robot file's ``wearer.mass``) — a rising
person asks about 1.53 N·m/kg whatever their strategy, 1.1–2.0 across them (Yoshioka et al.
2007) — and each joint's largest current against the drive's peak.

``--sitting HIP KNEE`` (rad) seats the wearer otherwise: a copy of the robot's activities
file with that ``sitting`` posture (knee more flexed than hip: the feet drawn back under the
chair, the ankle orthoses' hinges setting them down flat).

``python tools/rise_support.py [--config FILE] [--support F ...] [--sitting HIP KNEE]``
(default ``configs/exo_2leg_world.yaml`` at 0.5 0.3 0.2 0.1 0.0, the robot's own sitting).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSION = ROOT / "configs" / "sessions" / "sit_stand.yaml"
PATH_KEYS = ("robot", "buses", "controller", "session")  # the top config's files


@dataclass
class Rise:
    """One sit/stand run at one support: how it ended and what it asked of the drives."""

    support: float  # fraction of the whole weight on the harness
    final_state: str
    faults: list  # the summary's faults (empty: none)
    per_kg: dict[str, float]  # leg ('left_', 'right_' or '') → peak hip + knee N·m per kg
    peak_current: dict[str, float]  # joint → largest |current|, A
    peak_current_limit: float  # the drives' peak current, A


def config_with_support(top: Path, support: float, folder: Path) -> Path:
    """A copy of the top config ``top`` in ``folder`` with ``simulation.support`` set to
    ``support``, its file references made absolute so that they still name ``top``'s files."""
    import yaml

    data = yaml.safe_load(top.read_text())
    for key in PATH_KEYS:
        if isinstance(data.get(key), str):
            data[key] = str((top.parent / data[key]).resolve())
    data["simulation"]["support"] = float(support)
    out = folder / f"{top.stem}_support{support:g}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def activities_with_sitting(top: Path, sitting: tuple[float, float], folder: Path) -> Path:
    """A copy in ``folder`` of the activities file of ``top``'s robot (its default, by the
    robot's name) whose ``sitting`` posture is (hip, knee) ``sitting`` rad at every leg."""
    import yaml

    from exo_rt.model import load_mechanism
    from exo_rt.session.activities import default_path

    robot = yaml.safe_load(top.read_text())["robot"]
    path = default_path(load_mechanism(top.parent / robot).name)
    data = yaml.safe_load(Path(path).read_text())
    data["postures"]["sitting"] = {"hip": float(sitting[0]), "knee": float(sitting[1])}
    out = folder / "activities_sitting.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def rise(top: Path, support: float, folder: Path,
         sitting: tuple[float, float] | None = None) -> Rise:
    """Run the sit/stand session at ``support`` (the module's docstring) in ``folder``, seated
    at ``sitting`` (hip, knee rad; None: the activities file's own)."""
    import yaml

    from exo_rt import cli
    from exo_rt.record.sizing import size_runs

    run = folder / f"run{support:g}"
    extra = [] if sitting is None else [
        "--activities", str(activities_with_sitting(top, sitting, folder))]
    cli.main(["run", "--config", str(config_with_support(top, support, folder)),
              "--session", str(SESSION), "--out", str(run), *extra])
    summary = json.loads((run / "summary.json").read_text())
    sizing, robot = size_runs([run])
    mass = float(yaml.safe_load(robot.read_text())["wearer"]["mass"])  # kg
    legs = sorted({name[: -len("hip")] for name in sizing if name.endswith("hip")})
    per_kg = {leg: (sizing[leg + "hip"].figures.peak_torque
                    + sizing[leg + "knee"].figures.peak_torque) / mass for leg in legs}
    return Rise(support, summary["final_state"], summary["faults"], per_kg,
                {j: s.figures.peak_current for j, s in sizing.items()},
                min(s.rating.peak_current for s in sizing.values()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "exo_2leg_world.yaml",
                   help="top config of a floor scene (default configs/exo_2leg_world.yaml)")
    p.add_argument("--support", type=float, nargs="+", default=[0.5, 0.3, 0.2, 0.1, 0.0],
                   metavar="F", help="body-weight supports to run (fractions of the weight)")
    p.add_argument("--sitting", type=float, nargs=2, metavar=("HIP", "KNEE"),
                   help="the seated posture (rad; default the activities file's)")
    args = p.parse_args(argv)
    print(f"{'support':>7}  {'end':<34}  {'hip + knee per leg (N·m/kg)':<27}  largest current (A)")
    with tempfile.TemporaryDirectory() as folder:
        for support in args.support:
            r = rise(args.config.resolve(), support, Path(folder), args.sitting)
            end = r.final_state + ("" if not r.faults else
                                   f" ({r.faults[0]['cause']} on {r.faults[0]['joint']})")
            kg = ", ".join(f"{v:.2f}" for v in r.per_kg.values())
            print(f"{support:7.0%}  {end:<34}  {kg:<27}  {max(r.peak_current.values()):.1f} "
                  f"of {r.peak_current_limit:g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
