"""Every shipped controller in the world: configs/exo_2leg_world.yaml's wearer (half the
weight on the harness) through the sit/stand session and the default session's walk, one run
each, and how each ended (docs/world.md, "Every controller on the floor").

``python tools/world_controllers.py [--only NAME …] [--sessions sit_stand default]
[--duration S]`` — prints a Markdown table: per controller file, the wearer it ran with and,
per session, the final state and the first fault.

``python tools/world_controllers.py --figures [--only NAME …]`` — docs/assistance.md's
figures measured again in the world, per law that follows the wearer: the default session's
walk with the leading wearer at assistance level 1 and at level 0 (:func:`figures`): the
gait-phase estimate's error (RMS and mean, % of the stride) against the leg's true phase —
linear between its foot's landings in the world (:func:`true_phase`) — and against the
phase of the walk the session plans, and the wearer's effort (RMS of their joint torque,
N·m) over the steady strides.

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
import functools
import json
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTROLLERS = ROOT / "configs" / "controllers"
WEARERS = ROOT / "configs" / "wearers"
SKIP = {"computed_torque_12dof"}  # a 12-joint robot's controller: not exo_2leg's
# a row → the file it runs in the world: gains for the sized drives' rotors (10× the test
# stand's reflected inertia), the test stand's file keeping its figures
WORLD_VARIANTS = {"pid": "pid_world", "computed_torque_events": "computed_torque_events_world"}


@functools.cache
def _robot():
    from exo_rt.model import load_mechanism

    return load_mechanism(ROOT / "configs" / "robots" / "exo_2leg_sized.yaml")


def wearer_for(controller: Path) -> str:
    """``passive`` or ``leading``: who moves the legs of a run with ``controller`` — the
    wearer leads where the law follows them (registered ``follows_wearer``)."""
    from exo_rt.control import registry
    from exo_rt.control.config import load_controller

    cfg = load_controller(controller, _robot())
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


@contextmanager
def opened_worlds():
    """While open, every lockstep world a run opens in this process (``SimWorld.open``) is
    appended to the list it yields: the run's world, which the registry forgets when the run
    closes its buses, stays within reach (its leading wearer's torques)."""
    from exo_rt.sim.simbus import SimWorld

    opened: list = []
    original = SimWorld.__dict__["open"]

    def open_(cls, name, *args, **kw):
        world = original.__func__(cls, name, *args, **kw)
        opened.append(world)
        return world

    SimWorld.open = classmethod(open_)
    try:
        yield opened
    finally:
        SimWorld.open = original


def figures(name: str, duration: float, out: Path, levels=(1.0, 0.0)) -> dict:
    """One law's world figures (the module's docstring): ``true_phase_rms``,
    ``true_phase_mean`` (% of the stride, level 1: against the world's landings),
    ``phase_rms``, ``phase_mean`` (against the plan), ``effort`` {level: {joint: N·m RMS}}
    and ``final`` {level: final state}, at each of ``levels``. The window is the steady walk:
    the session's stride count from 1 to 1 before its last (the left leg's phase: the
    estimate follows the left hip)."""
    import numpy as np
    import yaml

    from exo_rt.record.recorder import read_cycle_log

    names = _robot().joint_names
    profile = yaml.safe_load((WEARERS / "leading.yaml").read_text())
    result: dict = {"effort": {}, "final": {}}
    for level in levels:
        wearer = out / f"leading-{level:g}.yaml"
        wearer.parent.mkdir(parents=True, exist_ok=True)
        wearer.write_text(yaml.safe_dump({**profile, "assistance": {"default": level}}))
        run = out / f"{name}-level{level:g}"
        from exo_rt import cli

        with opened_worlds() as opened:
            cli.main(["run", "--config", str(ROOT / "configs" / "exo_2leg_world.yaml"),
                      "--controller", str(CONTROLLERS / f"{name}.yaml"), "--wearer",
                      str(wearer), "--duration", str(duration), "--out", str(run)])
        result["final"][level] = json.loads((run / "summary.json").read_text())["final_state"]
        (world,) = opened  # the run's lockstep world
        leader = world.wearer
        r, _ = read_cycle_log(run / "cycles.exolog")
        phase = r["phase"]
        steady = (phase >= 1.0) & (phase <= np.floor(phase.max()) - 1.0)
        t0, t1 = r["t"][steady][[0, -1]]
        tau = leader.torques()
        inside = (tau[:, 0] >= t0) & (tau[:, 0] <= t1)
        rms = np.sqrt(np.mean(tau[inside, 1:] ** 2, axis=0))
        result["effort"][level] = dict(zip(names, (float(x) for x in rms), strict=True))
        if level == 1.0:
            err = (r["gait_phase"][steady] - phase[steady] % 1.0 + 0.5) % 1.0 - 0.5
            result["phase_rms"] = 100.0 * float(np.sqrt(np.mean(err**2)))
            result["phase_mean"] = 100.0 * float(np.mean(err))
            true = true_phase(run, r["t"])
            inside = steady & np.isfinite(true)
            err = (r["gait_phase"][inside] - true[inside] % 1.0 + 0.5) % 1.0 - 0.5
            result["true_phase_rms"] = 100.0 * float(np.sqrt(np.mean(err**2)))
            result["true_phase_mean"] = 100.0 * float(np.mean(err))
    return result


LANDING_N = 10.0  # N: a foot carrying more has landed (the world's own force, no sensor's)
SWING_S = 0.2  # s: unloaded this long before a landing (a bounce after one is none)


def landings(rows: list[dict], foot: str) -> list[float]:
    """The times (s, the records' clock) at which ``foot`` lands in a world run's ``/world``
    rows: its floor force rises through :data:`LANDING_N` after it carried less for at least
    :data:`SWING_S` — the heel strikes a force plate sees, not the board's thresholds."""
    out, unloaded_since = [], None
    for row in rows:
        loaded = row["force"][foot]["z"] > LANDING_N
        if not loaded:
            unloaded_since = row["t"] if unloaded_since is None else unloaded_since
        elif unloaded_since is not None:
            if row["t"] - unloaded_since >= SWING_S:
                out.append(row["t"])
            unloaded_since = None
    return out


def true_phase(run: Path, t):
    """The left leg's phase (strides) at the records' times ``t`` from its foot's landings in
    the world (:func:`landings`): k + (t − L_k)/(L_{k+1} − L_k) between the k-th and the next —
    the gait-phase truth of force plates or foot switches, linear between heel strikes (the
    walker's true phase of docs/assistance.md, for a walker whose heel strikes are the world's);
    NaN outside the first and the last landing."""
    import numpy as np

    from exo_rt.record.walking import world_rows

    rows = world_rows(run)
    foot = next(iter(rows[0]["force"]))  # the legs' order: the left leg's foot first
    land = np.asarray(landings(rows, foot))
    out = np.full(len(t), np.nan)
    if len(land) < 2:
        return out
    k = np.searchsorted(land, t, side="right") - 1
    ok = (k >= 0) & (k < len(land) - 1)
    out[ok] = k[ok] + (t[ok] - land[k[ok]]) / (land[k[ok] + 1] - land[k[ok]])
    return out


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
    p.add_argument("--figures", action="store_true",
                   help="the assistance figures in the world (phase RMS, effort at level 1 "
                        "and 0) instead of the table")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="world-controllers-"))
    if args.figures:
        print("| law | phase error RMS (mean): against the world's landings | against the "
              "plan | effort level 0 → 1, N·m RMS: hips | knees | final |")
        print("|---|---|---|---|---|---|")
        for name in rows(args.only):
            if wearer_for(CONTROLLERS / f"{name}.yaml") != "leading":
                continue
            f = figures(name, args.duration, tmp / name)
            e0, e1 = f["effort"][0.0], f["effort"][1.0]
            cells = [f"{f['true_phase_rms']:.1f} % ({f['true_phase_mean']:+.1f} %)",
                     f"{f['phase_rms']:.1f} % ({f['phase_mean']:+.1f} %)"]
            for kind in ("hip", "knee"):
                cells.append(", ".join(
                    f"{e0[j]:.1f} → {e1[j]:.1f} ({100 * (e1[j] / e0[j] - 1):+.0f} %)"
                    for j in e0 if j.endswith(kind)))
            cells.append(" / ".join(f["final"][lv] for lv in (0.0, 1.0)))
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        return 0
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
