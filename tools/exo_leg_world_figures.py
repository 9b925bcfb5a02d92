"""The one-leg exoskeleton on the world's floor: the figures of docs/world.md, "The one-leg
exoskeleton" — configs/exo_leg_world.yaml's default session (home, walk, STOP, end) and its
sit/stand session, for the exoskeleton's leg and the wearer's other leg.

The run's world truth (run.mcap's ``/world``, :mod:`exo_rt.record.walking`) holds the
exoskeleton's foot only: the wearer's other leg is no part of the robot. So the run is made
here, in this process (the lockstep simulated bus), and after every physics period the plant's
other leg is taken beside the world's truth (:func:`capturing`): its hip and knee, the target
it follows, its foot's vertical reaction. Both feet's figures are then those of
:mod:`exo_rt.record.walking` — stance fraction, the reaction in swing, slip while flat, peaks
over the weight the floor carries (both feet), tracking — over the walk's steady strides, the
other leg's phase half a stride behind.

At another speed than the wearer's default (``--speed``: the session asks it before the walk)
the other leg takes its delay from the strides it sees (``world_plant._other_leg_stride``):
the lines printed end with its landings' lags behind the exoskeleton foot's (strides) and the
delay it walked with (s).

With ``--change`` the session changes the walk's speed a few strides in: the strides of its
blend are among those in which the other leg takes the new pace up, and their line gives the
reaction in swing and the currents there.

``--strides`` adds the walk stride by stride, its opening and closing strides included.

``python tools/exo_leg_world_figures.py [--duration S] [--speed M_S] [--change M_S [--after N]]
[--activities FILE] [--strides] [--sit-stand]``
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "exo_leg_world.yaml"
SIT_STAND = ROOT / "configs" / "sessions" / "sit_stand.yaml"
OTHER_FOOT = "wearer_shank"  # the other leg's foot (room.other_leg: its heel and toe spheres)
# captured columns: world t, pelvis x z pitch, other hip knee, its target hip knee, its foot's
# vertical reaction, its delay (s)
T, BX, BZ, BP, OH, OK, TH, TK, FZ, DELAY = range(10)


@contextmanager
def capturing():
    """While open, every world truth's update (each physics period of a world run on the
    floor, lockstep) also appends a row of the plant's other leg (the module's columns) to the
    list it yields."""
    import mujoco

    from exo_rt.sim import world_truth

    rows: list[tuple] = []
    f6 = np.zeros(6)  # a contact's force in its frame (MuJoCo's mj_contactForce)
    original = world_truth.WorldTruth.update
    spheres: dict[int, set] = {}

    def update(self, world) -> None:
        original(self, world)
        plant = self.plant
        m, d = self.model, plant.mj_data
        mine = spheres.setdefault(id(self), {m.geom(f"{OTHER_FOOT}_{tag}").id
                                             for tag in ("heel", "toe")})
        fz = 0.0
        for i in range(d.ncon):
            g1, g2 = d.contact.geom[i]
            if g2 in mine and self.pushers[g1]:
                mujoco.mj_contactForce(m, d, i, f6)
                fz += float((d.contact.frame[i].reshape(3, 3).T @ f6[:3])[2])
        rows.append((world.t, *plant.base, *plant.other_leg, *plant.other_leg_target, fz,
                     plant.other_leg_delay))

    world_truth.WorldTruth.update = update
    try:
        yield rows
    finally:
        world_truth.WorldTruth.update = original


# the default session (home, walk, STOP, end) with the walking speed asked before the walk
PACED = """description: home, walk at {speed} m/s for --duration, stop, end
steps:
  - {{request: start, motion: home, at: 0.0}}
  - {{request: confirm, after: rejected}}
  - {{request: speed, value: {speed}, after: finished}}
  - {{request: start, motion: walk, after: accepted}}
  - {{request: stop, after: accepted, wait: duration}}
  - {{request: end, after: finished}}
"""
# … and with a speed change ``after`` strides into the walk, STOP --duration s after it
CHANGED = """description: home, walk, {change} m/s after {after} strides, stop --duration later
steps:
  - {{request: start, motion: home, at: 0.0}}
  - {{request: confirm, after: rejected}}
  - {{request: start, motion: walk, after: finished}}
  - {{request: speed, value: {change}, after: strides {after}}}
  - {{request: stop, after: accepted, wait: duration}}
  - {{request: end, after: finished}}
"""


def run(out: Path, *, duration: float = 10.0, session: Path | None = None,
        config: Path = CONFIG, speed: float | None = None, change: float | None = None,
        after: int = 3, activities: Path | None = None) -> tuple[int, np.ndarray]:
    """(exit code, the other leg's rows) of ``exo-rt run`` on ``config`` into ``out``;
    ``speed`` (m/s): the default session walking at it; ``change`` (m/s): the walk changed to
    it ``after`` strides in, STOP ``duration`` s after (each a session file beside ``out``);
    ``activities``: another activities file."""
    from exo_rt import cli

    args = ["run", "--config", str(config), "--duration", str(duration), "--out", str(out)]
    text = None
    if change is not None:
        session, text = out.parent / f"change-{change:g}.yaml", CHANGED.format(
            change=change, after=after)
    elif speed is not None:
        session, text = out.parent / f"walk-{speed:g}.yaml", PACED.format(speed=speed)
    if text is not None:
        session.parent.mkdir(parents=True, exist_ok=True)
        session.write_text(text)
    if session is not None:
        args += ["--session", str(session)]
    if activities is not None:
        args += ["--activities", str(activities)]
    with capturing() as rows:
        rc = cli.main(args)
    return rc, np.array(rows, float)


IN_PACE = 0.005  # of the stride: the other leg walks at the pace while its delay is this close
# to half the stride the exoskeleton walks


def strides(out: Path, rows: np.ndarray, rec: np.ndarray) -> tuple[list[int], list[int]]:
    """(steady, adapting): the walk's whole strides — :mod:`exo_rt.record.walking`'s, from
    the first stride boundary after the opening step's stride to the last before the closing
    step's — split by the other leg's pace. A stride is steady where the other leg's delay
    was half the stride the exoskeleton walked (within :data:`IN_PACE` of the stride) from half
    a stride before it began (what the other leg then does, it takes from there) to its end;
    the others are the other leg walking at the pace it last walked, or taking up a new one
    (a walk at another speed, or the session slowing a walk: its first strides)."""
    walk, phase, t = rec["walking"] > 0.5, rec["phase"], rec["t"]
    first = math.ceil(phase[walk].min() + 1e-9) + 1
    last = math.floor(phase[walk].max()) - 1
    idx = np.flatnonzero(walk)
    delay = _aligned(out, rows, rec["cycle"][idx])[:, DELAY]
    p = phase[idx]
    steady, adapting = [], []
    for k in range(first, last):
        period = float(np.interp(k + 1, p, t[idx]) - np.interp(k, p, t[idx]))
        during = (p >= k - 0.5) & (p < k + 1)
        paced = np.all(np.abs(delay[during] - 0.5 * period) <= IN_PACE * period)
        (steady if paced else adapting).append(k)
    return steady, adapting


def _exo_fz(world: dict, cycles: np.ndarray) -> np.ndarray:
    """N: the exoskeleton foot's vertical reaction at each of ``cycles`` (``world``: the
    run's /world rows by cycle; the robot's one foot)."""
    return np.array([next(iter(world[int(c)]["force"].values()))["z"] for c in cycles])


def landing_lags(out: Path, rows: np.ndarray) -> np.ndarray:
    """Strides: how long after the exoskeleton foot's last landing each landing of the other
    leg's foot comes, over the steady strides (a foot lands when it carries 5 % of the weight
    after 0.2 stride or more in the air, not a lift-off's flicker) — 0.5 for a leg half a
    stride behind, 0 for one in step."""
    from exo_rt.record import walking
    from exo_rt.record.mcap_log import read_mcap

    rec, _ = read_mcap(out / "run.mcap")
    walk, phase = rec["walking"] > 0.5, rec["phase"]
    steady, _adapting = strides(out, rows, rec)
    first = math.ceil(phase[walk].min() + 1e-9)  # (the landings of the whole walk …
    idx = np.flatnonzero(walk & (phase >= first))
    other = _aligned(out, rows, rec["cycle"][idx])
    world = {int(w["cycle"]): w for w in walking.world_rows(out)}
    exo = _exo_fz(world, rec["cycle"][idx])
    phase = phase[idx]
    carried = float((exo + other[:, FZ]).mean())

    def landings(fz):
        on = np.flatnonzero(fz > 0.05 * carried)
        return phase[on[1:]][np.diff(phase[on]) > 0.2]

    mine, theirs = landings(exo), landings(other[:, FZ])
    pairs = [(p, mine[mine < p].max()) for p in theirs if (mine < p).any()]
    return np.array([p - m for p, m in pairs  # … those of steady strides, both feet's)
                     if math.floor(p) in steady and math.floor(m) in steady])


@dataclass(frozen=True)
class LegFigures:
    """One leg's figures over the walk's steady strides (SI, angles in degrees)."""

    stance: float  # stance fraction of the stride
    swing_force: float  # N: the largest vertical reaction in swing
    peak: float  # the largest vertical reaction / the carried weight, raw …
    peak_smooth: float  # … and over 25 ms
    slip: float  # m: the ankle's largest travel while the foot is flat, per step
    tracking_rms: dict  # joint → RMS of target − angle (°)


@dataclass(frozen=True)
class Figures:
    strides: int
    speed: float  # m/s: the pelvis's mean forward speed
    carried: float  # N: both feet's summed vertical reaction, mean over the strides
    legs: dict  # 'exoskeleton' / 'other' → LegFigures
    current: dict  # joint → the largest commanded |current| over the strides (A)


def _aligned(out: Path, rows: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """The captured rows at each recorded cycle's world row (``/world``: its pelvis equals
    the capture's at the same physics period; the two clocks differ by one offset; /world's
    clock is float32, so rows are matched to 0.1 ms)."""
    from exo_rt.record.walking import world_rows

    world = world_rows(out)
    key = {(r[BX], r[BZ], r[BP]): r[T] for r in rows}
    offsets = [w["sim_t"] - key[k] for w in world
               if (k := (w["base"]["x"], w["base"]["z"], w["base"]["pitch"])) in key]
    if len(offsets) < 0.9 * len(world):
        raise ValueError(f"{out}: the capture does not match the run's /world rows")
    offset = float(np.median(offsets))
    sim_t = {int(w["cycle"]): w["sim_t"] for w in world}
    at = np.array([sim_t[int(c)] - offset for c in cycles])
    idx = np.clip(np.searchsorted(rows[:, T], at - 1e-4), 0, len(rows) - 1)
    if np.max(np.abs(rows[idx, T] - at)) > 1e-4:  # (/world's sim_t is float32)
        raise ValueError(f"{out}: a recorded cycle has no captured row")
    return rows[idx]


def measure(out: Path, rows: np.ndarray, adapting: bool = False) -> Figures | None:
    """Both legs' figures of the walk recorded in ``out`` with the other leg's ``rows``
    (:func:`run`): :mod:`exo_rt.record.walking`'s definitions over the steady strides
    (:func:`strides`), the other leg's gait phase half a stride behind the exoskeleton's; with
    ``adapting``, over the others, in which the other leg walks at another pace (None: none)."""
    from exo_rt.control import flat_foot
    from exo_rt.control.gait_speed import ankle_x as ankle_x_of
    from exo_rt.record import walking
    from exo_rt.record.mcap_log import read_mcap

    rec, meta = read_mcap(out / "run.mcap")
    names = list(meta["joint_names"])
    walk, phase = rec["walking"] > 0.5, rec["phase"]
    steady, early = strides(out, rows, rec)
    chosen = early if adapting else steady
    if adapting and not chosen:
        return None
    if not chosen:
        raise ValueError(f"{out}: the walk has no whole stride with the other leg at its "
                         f"pace to measure ({len(early)} in which it takes the pace up) — "
                         "walk longer (--duration)")
    idx = np.flatnonzero(walk & np.isin(np.floor(phase), chosen))
    other = _aligned(out, rows, rec["cycle"][idx])
    world = {int(w["cycle"]): w for w in walking.world_rows(out)}
    w = [world[int(c)] for c in rec["cycle"][idx]]
    foot = next(iter(w[0]["force"]))
    fz = np.stack([[x["force"][foot]["z"] for x in w], other[:, FZ]], axis=1)
    base = other[:, BX:BP + 1]
    q_exo = np.array([[x["q"][j] for j in names] for x in w])
    thigh, shank = 0.43, 0.42
    carried = float(fz.sum(axis=1).mean())
    t = rec["t"][idx]
    dt = float(np.median(np.diff(t)))
    n = max(1, round(walking.SMOOTH / dt))
    legs = {}
    angles = {"exoskeleton": (q_exo[:, names.index("hip")], q_exo[:, names.index("knee")]),
              "other": (other[:, OH], other[:, OK])}
    err = np.degrees(rec["q_ref"][idx] - rec["q"][idx])
    tracking = {"exoskeleton": {j: float(np.sqrt(np.mean(err[:, i] ** 2)))
                                for i, j in enumerate(names)},
                "other": {j: float(np.sqrt(np.mean(np.degrees(other[:, a] - other[:, b]) ** 2)))
                          for j, a, b in (("hip", TH, OH), ("knee", TK, OK))}}
    for k, (leg, offset) in enumerate((("exoskeleton", 0.0), ("other", 0.5))):
        p = (phase[idx] - offset) % 1.0
        swing = (p > flat_foot.STANCE + walking.EDGE) & (p < 1.0 - walking.EDGE)
        hip, knee = angles[leg]
        a = hip - base[:, 2]
        ax = base[:, 0] + ankle_x_of(a, knee, thigh, shank)
        az = base[:, 1] - thigh * np.cos(a) - shank * np.cos(a - knee)
        step = np.floor(phase[idx] - offset)
        travel = []
        for s in np.unique(step):
            on = (step == s) & (p >= flat_foot.ROCKER) & (p < flat_foot.STANCE)
            if on.any():
                flat = on & (az < az[on].min() + walking.FLAT)
                travel.append(float(np.ptp(ax[flat])))
        legs[leg] = LegFigures(
            stance=float((fz[:, k] > walking.CONTACT * carried).mean()),
            swing_force=float(fz[swing, k].max()) if swing.any() else 0.0,
            peak=float(fz[:, k].max() / carried),
            peak_smooth=float(np.convolve(fz[:, k], np.ones(n) / n, "same").max() / carried),
            slip=max(travel) if travel else 0.0, tracking_rms=tracking[leg])
    speed = float((base[-1, 0] - base[0, 0]) / (t[-1] - t[0]))
    current = {j: float(np.abs(rec["current"][idx, i]).max()) for i, j in enumerate(names)}
    return Figures(len(chosen), speed, carried, legs, current)


@dataclass(frozen=True)
class Stride:
    """One stride of the walk (its gait phase [k, k + 1): the opening's first, the closing's
    last), as a table row: both feet's largest vertical reaction (N), the pelvis's lowest and
    highest (m), each joint's largest commanded |current| (A) and the cycles above 26 A."""

    k: int
    exoskeleton: float
    other: float
    pelvis: tuple
    current: dict
    over_26: int


def per_stride(out: Path, rows: np.ndarray) -> list[Stride]:
    """The walk recorded in ``out`` (the other leg's ``rows``: :func:`run`) stride by
    stride, the opening and closing strides included: what the steady figures leave out."""
    from exo_rt.record import walking
    from exo_rt.record.mcap_log import read_mcap

    rec, meta = read_mcap(out / "run.mcap")
    names = list(meta["joint_names"])
    world = {int(w["cycle"]): w for w in walking.world_rows(out)}
    idx = np.flatnonzero((rec["walking"] > 0.5) & np.isin(rec["cycle"], list(world)))
    phase = rec["phase"][idx]
    other = _aligned(out, rows, rec["cycle"][idx])
    exo = _exo_fz(world, rec["cycle"][idx])
    current = np.abs(rec["current"][idx])
    table = []
    for k in range(int(phase.max()) + 1):
        s = (phase >= k) & (phase < k + 1)
        if s.any():
            table.append(Stride(k, float(exo[s].max()), float(other[s, FZ].max()),
                                (float(other[s, BZ].min()), float(other[s, BZ].max())),
                                {j: float(current[s, i].max()) for i, j in enumerate(names)},
                                int((current[s] > 26.0).sum())))
    return table


def sit_stand(out: Path, rows: np.ndarray) -> dict:
    """The sit/stand session's figures: the other leg's RMS and largest difference from its
    target (°: the exoskeleton leg's hip and knee at the same instant, as it sits and
    stands), over the whole run."""
    both = rows[:, OH:OK + 1] - rows[:, TH:TK + 1]
    return {"other_rms": float(np.degrees(np.sqrt(np.mean(both ** 2)))),
            "other_max": float(np.degrees(np.max(np.abs(both))))}


def main(argv=None) -> int:
    doc = __doc__.split("\n\n")[0]
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--duration", type=float, default=10.0, help="s of walking (default 10)")
    p.add_argument("--speed", type=float, help="m/s: walk at this speed (default: the "
                   "wearer's default speed)")
    p.add_argument("--change", type=float, metavar="M_S", help="change the walk's speed to "
                   "this --after strides in; --duration is then the walking after the change")
    p.add_argument("--after", type=int, default=3, help="strides before --change (default 3)")
    p.add_argument("--activities", type=Path, help="another activities file (e.g. one whose "
                   "walk has another stride_change)")
    p.add_argument("--strides", action="store_true", help="also the walk stride by stride, "
                   "the opening and closing included (peaks, pelvis height, currents)")
    p.add_argument("--sit-stand", action="store_true", help="the sit/stand session instead")
    args = p.parse_args(argv)
    out = Path(tempfile.mkdtemp(prefix="exo-leg-")) / "run"
    walk = not args.sit_stand
    rc, rows = run(out, duration=args.duration, session=SIT_STAND if args.sit_stand else None,
                   speed=args.speed if walk else None, change=args.change if walk else None,
                   after=args.after, activities=args.activities)
    s = json.loads((out / "summary.json").read_text())
    print(f"run {out}: exit {rc}, {s['final_state']}, faults {s['faults'] or 'none'}")
    if args.sit_stand:
        f = sit_stand(out, rows)
        print(f"the other leg against the exoskeleton leg: {f['other_rms']:.2f}° RMS, "
              f"{f['other_max']:.2f}° at most")
        return rc
    if args.strides:
        print("| stride | exoskeleton foot | other foot | pelvis height | currents | cycles "
              "> 26 A |\n|---|---|---|---|---|---|")
        for r in per_stride(out, rows):
            print(f"| {r.k} | {r.exoskeleton:.0f} N | {r.other:.0f} N | {r.pelvis[0]:.3f}–"
                  f"{r.pelvis[1]:.3f} m | " + ", ".join(f"{j} {a:.1f} A" for j, a in
                                                        r.current.items())
                  + f" | {r.over_26} |")
    try:
        f = measure(out, rows)
    except ValueError as exc:
        print(f"exo_leg_world_figures: {exc}", file=sys.stderr)
        return 2
    print(f"{f.strides} steady strides, pelvis {f.speed:.3f} m/s, the floor carries "
          f"{f.carried:.1f} N")
    print("| leg | stance | reaction in swing | slip while flat | peak / carried (raw, 25 ms) "
          "| tracking RMS |")
    print("|---|---|---|---|---|---|")
    for leg, g in f.legs.items():
        rms = ", ".join(f"{j} {v:.2f}°" for j, v in g.tracking_rms.items())
        print(f"| {leg} | {100 * g.stance:.1f} % | {g.swing_force:.1f} N | "
              f"{1000 * g.slip:.1f} mm | {g.peak:.2f}, {g.peak_smooth:.2f} | {rms} |")
    early = measure(out, rows, adapting=True)
    print("currents at most " + ", ".join(f"{j} {a:.1f} A" for j, a in f.current.items()))
    if early is not None:
        print(f"and {early.strides} stride(s) in which the other leg takes up the pace: "
              "reaction in swing " + ", ".join(
                  f"{g.swing_force:.1f} N ({leg})" for leg, g in early.legs.items())
              + "; currents at most " + ", ".join(
                  f"{j} {a:.1f} A" for j, a in early.current.items()))
    lags = landing_lags(out, rows)
    print(("the other foot lands " + ", ".join(f"{x:.3f}" for x in lags) + " stride after the "
           "exoskeleton's" if len(lags) else "no landing pair in the steady strides")
          + f"; its delay at the end {rows[-1, DELAY]:.3f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
