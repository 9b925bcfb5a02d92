"""What a walk on the world's floor measured, from a run's run.mcap (docs/world.md, "Walking
on the floor"): the cycle's records (the reference, the joints, the gait phase) joined to the
world's truth (/world: the pelvis, each foot's ground reaction, the joints' true angles).

Figures over the walk's whole steady strides (from the first stride boundary after the
opening step to the last before the closing step begins):

- **stance fraction** per foot: the share of each stride its vertical reaction exceeds
  :data:`CONTACT` of the carried weight — a force plate's stance, not the gait's: a foot the
  gait keeps on the floor but no longer loads is not in it;
- **touch-down and unloading** per foot: the leg's phase (strides, its offset taken off; the
  median over its whole strides) at which its reaction first exceeds :data:`CONTACT` of the
  carried weight, and at which it first falls below it again after mid-stance — when the
  weight left the trailing foot, against the gait's lift-off;
- **the reaction in swing**: the largest vertical reaction while the reference has the leg in
  swing, :data:`EDGE` of a stride clear of lift-off and touch-down;
- **peaks**: each foot's largest vertical reaction over the carried weight — the summed
  reaction's mean over whole strides, which is what the floor carries (the weight less a
  harness's support), by the vertical momentum of a periodic walk — raw, and averaged over
  :data:`SMOOTH` as a force plate's low-pass reads it (a foot landing flat gives a spike of
  about 10 ms);
- **slip**: the largest horizontal travel of a foot's ankle (the joints' true angles and the
  pelvis, forward kinematics) while its foot is flat on the floor — its ankle within
  :data:`FLAT` of its lowest, between the end of the heel rocker and lift-off (rolling on the
  heel or the toe moves the ankle without the foot sliding);
- **tracking**: each joint's RMS error over the strides (°), and the pelvis's mean speed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CONTACT = 0.01  # of the carried weight: a foot touches the floor
EDGE = 0.03  # strides: the swing window's margin at lift-off and touch-down
FLAT = 0.002  # m: a foot is flat while its ankle is this close to its lowest in the step
SMOOTH = 0.025  # s: the peaks' moving average (force plates' 20–40 Hz low-pass)


@dataclass(frozen=True)
class WalkFigures:
    """A walk's figures (SI; angles in degrees), per foot/joint in the run's order."""

    strides: int  # whole steady strides measured
    speed: float  # m/s: the pelvis's mean forward speed over them
    carried: float  # N: the summed vertical reaction's mean (weight less the support)
    stance: dict[str, float]  # foot → stance fraction of the stride
    touch: dict[str, float]  # foot → leg phase of its touch-down (strides)
    unload: dict[str, float]  # foot → leg phase its contact first breaks after mid-stance
    swing_force: dict[str, float]  # foot → largest vertical reaction in swing (N)
    peak: dict[str, float]  # foot → largest vertical reaction / carried weight
    peak_smooth: dict[str, float]  # … of its SMOOTH moving average
    slip: dict[str, float]  # foot → largest ankle travel while flat (m)
    tracking_rms: dict[str, float]  # joint → RMS of q_ref − q (°)


def world_rows(run_dir: Path) -> list[dict]:
    """The /world messages of a run, in order."""
    from mcap.reader import make_reader

    with open(Path(run_dir) / "run.mcap", "rb") as f:
        return [json.loads(m.data) for _s, _c, m in make_reader(f).iter_messages(
            topics=["/world"])]


def measure(run_dir: str | Path, *, stance: float, rocker: float,
            offsets: dict[str, float], thigh: float, shank: float) -> WalkFigures:
    """The figures of the walk recorded in ``run_dir`` (the module's docstring). ``stance``
    and ``rocker`` (strides): the gait's stance fraction and heel rocker; ``offsets``: each
    leg's phase offset (strides, by its joints' prefix, e.g. ``{'left_': 0, 'right_': 0.5}``);
    ``thigh``, ``shank`` (m): the legs' lengths (the ankle's forward kinematics)."""
    from exo_rt.control.gait_speed import ankle_x as ankle_x_of
    from exo_rt.record.mcap_log import read_mcap

    run_dir = Path(run_dir)
    rows, meta = read_mcap(run_dir / "run.mcap")
    names = list(meta["joint_names"])
    by_cycle = {int(m["cycle"]): m for m in world_rows(run_dir)}
    walking = rows["walking"] > 0.5
    phase = rows["phase"]
    first = math.ceil(phase[walking].min() + 1e-9) + 1  # after the opening step's stride
    last = math.floor(phase[walking].max()) - 1  # before the closing step's
    if last <= first:
        raise ValueError(f"{run_dir}: the walk has no whole steady stride to measure")
    keep = walking & (phase >= first) & (phase < last)
    idx = np.flatnonzero(keep)
    world = [by_cycle.get(int(c)) for c in rows["cycle"][idx]]
    if any(w is None for w in world):
        raise ValueError(f"{run_dir}: cycles without the world's truth (not a world run?)")
    feet = list(world[0]["force"])
    fz = np.array([[w["force"][f]["z"] for f in feet] for w in world])
    base = np.array([[w["base"]["x"], w["base"]["z"], w["base"]["pitch"]] for w in world])
    q_true = np.array([[w["q"][j] for j in names] for w in world])
    t = rows["t"][idx]
    carried = float(fz.sum(axis=1).mean())
    prefixes = list(offsets)
    stance_of, swing_of, peak_of, smooth_of, slip_of = {}, {}, {}, {}, {}
    touch_of, unload_of = {}, {}
    dt = float(np.median(np.diff(t)))
    window = np.ones(max(1, round(SMOOTH / dt))) / max(1, round(SMOOTH / dt))
    for k, foot in enumerate(feet):
        prefix = prefixes[k]
        leg = (phase[idx] - offsets[prefix]) % 1.0
        touching = fz[:, k] > CONTACT * carried
        stance_of[foot] = float(touching.mean())
        swing = (leg > stance + EDGE) & (leg < 1.0 - EDGE)
        swing_of[foot] = float(fz[swing, k].max()) if swing.any() else 0.0
        peak_of[foot] = float(fz[:, k].max() / carried)
        smooth_of[foot] = float(np.convolve(fz[:, k], window, "same").max() / carried)
        hip, knee = names.index(prefix + "hip"), names.index(prefix + "knee")
        a = q_true[:, hip] - base[:, 2]  # the thigh from the vertical (pitch > 0: trunk back)
        ankle_x = base[:, 0] + ankle_x_of(a, q_true[:, knee], thigh, shank)
        ankle_z = base[:, 1] - thigh * np.cos(a) - shank * np.cos(a - q_true[:, knee])
        step = np.floor(phase[idx] - offsets[prefix])
        travel, touches, unloads = [], [], []
        for s in np.unique(step):
            whole = step == s
            if (leg[whole].min() < EDGE and leg[whole].max() > stance + EDGE
                    and touching[whole].any()):
                on_leg, loaded = leg[whole], touching[whole]
                touches.append(float(on_leg[np.argmax(loaded)]))
                off = ~loaded & (on_leg > 0.5 * stance)
                if off.any():
                    unloads.append(float(on_leg[np.argmax(off)]))
            on = (step == s) & (leg >= rocker) & (leg < stance)
            if not on.any():
                continue
            flat = on & (ankle_z < ankle_z[on].min() + FLAT)  # not on its heel or toe
            travel.append(float(np.ptp(ankle_x[flat])))
        slip_of[foot] = max(travel) if travel else 0.0
        touch_of[foot] = float(np.median(touches)) if touches else math.nan
        unload_of[foot] = float(np.median(unloads)) if unloads else math.nan
    err = np.degrees(rows["q_ref"][idx] - rows["q"][idx])
    rms = {j: float(np.sqrt(np.mean(err[:, i] ** 2))) for i, j in enumerate(names)}
    speed = float((base[-1, 0] - base[0, 0]) / (t[-1] - t[0]))
    return WalkFigures(int(last - first), speed, carried, stance_of, touch_of, unload_of,
                       swing_of, peak_of, smooth_of, slip_of, rms)
