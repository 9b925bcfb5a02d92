"""Wearer profiles: YAML → :class:`Wearer` (``exo-rt run --wearer FILE``; without one,
:func:`default_wearer` builds the profile from the robot file's ``wearer:`` section).

The file's keys are declared in :mod:`exo_rt.schema.wearer` (docs/config-wearer.md). What the
schema cannot know is checked here: ranges that are ranges (lower < upper), speeds and presets
inside the speed range, the walk ratio's step length at every speed of the range inside the
step-length range (:func:`exo_rt.control.gait_speed.cadence_and_step`) and, against the robot
when given, joint and leg names that exist, ranges of motion and posture angles inside the
joints' limits, and the longest step within the legs' reach. Every error names the file, the
line and the key. The profile keeps its file's text and SHA-256 for the run folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from exo_rt.control import gait_speed
from exo_rt.errors import ConfigError, Where
from exo_rt.schema import core
from exo_rt.schema.wearer import Assistance, Range, Speed, StepLength, WearerFile
from exo_rt.yamlio import Node, did_you_mean, plain, read_yaml

__all__ = ["Wearer", "load_wearer", "default_wearer"]


@dataclass(frozen=True)
class Wearer:
    """A validated wearer profile. Joint keys (``range_of_motion``, ``postures``) are as the
    file writes them: a joint's name, or a kind naming every joint ending in ``_kind``
    (``hip`` → ``left_hip``, ``right_hip``); the methods resolve them on a robot."""

    source: str  # the file ('' for a default profile)
    height: float  # m
    mass: float  # kg
    sex: str  # 'male' | 'female'
    description: str
    range_of_motion: dict[str, Range]  # {joint or kind: Range} rad
    speed: Speed  # m/s: min, max, default, presets (tuple)
    step_length: StepLength  # m: min, max
    assistance: Assistance  # default, legs {leg: level}
    postures: dict  # {posture: {joint or kind: rad}}
    sha256: str  # of ``text``
    text: str  # the file's contents (a default profile: the YAML that reproduces it)
    role: str = "passive"  # who moves the legs in a simulated world: 'passive' | 'leading'

    def limits(self, mech) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) rad per joint of the robot's q: the wearer's range of motion where
        the profile gives one, else the robot's limits."""
        names = list(mech.coordinate_names)
        lower, upper = np.array(mech.lower, float), np.array(mech.upper, float)
        for written, r in self.range_of_motion.items():
            for j in _joints(written, names):
                lower[names.index(j)], upper[names.index(j)] = r.lower, r.upper
        return lower[: mech.nq], upper[: mech.nq]

    def joint_range(self, mech) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) rad per joint in the robot's joint order (:meth:`limits`): the
        range every posture and reference keeps inside."""
        lower, upper = self.limits(mech)
        names = list(mech.coordinate_names)
        idx = [names.index(j) for j in mech.joint_names]
        return np.asarray(lower)[idx], np.asarray(upper)[idx]

    def rom(self, mech, prefix: str = "") -> dict[str, tuple[float, float]]:
        """{'hip': (lower, upper), 'knee': …} rad of the leg ``prefix`` (:meth:`limits`): the
        ranges :func:`exo_rt.control.gait_speed.walk` keeps the reference in."""
        lower, upper = self.limits(mech)
        names = list(mech.joint_names)
        return {k: (float(lower[names.index(prefix + k)]), float(upper[names.index(prefix + k)]))
                for k in gait_speed.KINDS if prefix + k in names}

    def level(self, leg: str) -> float:
        """The assistance level (0–1) of the leg named by its joints' prefix (``'left'`` or
        ``'left_'``; ``''`` for a one-leg robot's leg)."""
        return float(self.assistance.legs.get(leg.rstrip("_"), self.assistance.default))

    def posture(self, name: str, mech) -> dict[str, float]:
        """The profile's angles (rad) for posture ``name`` by the robot's joint names ({} when
        the profile keeps the activities file's)."""
        out: dict[str, float] = {}
        for written, q in self.postures.get(name, {}).items():
            for j in _joints(written, list(mech.joint_names)):
                out[j] = float(q)
        return out

    def walk(self, speed: float, mech, step_length: float | None = None) -> gait_speed.Walk:
        """The gait reference's period and amplitude for ``speed`` m/s (and ``step_length``
        m, else the walk ratio's) on the robot ``mech``: every leg's lengths and ranges
        (:meth:`rom`) checked (:func:`exo_rt.control.gait_speed.walk`; ValueError as it
        raises). The range checks of the profile (speed, step length) are the caller's."""
        walks = []
        for prefix in gait_speed.leg_prefixes(mech):
            thigh, shank = gait_speed.leg_lengths(mech, prefix)
            walks.append(gait_speed.walk(speed, self.height, thigh, shank, step_length,
                                         self.rom(mech, prefix)))
        if not walks:
            raise ValueError(f"the robot {mech.name} has no leg (joints *hip and *knee) to walk")
        if max(w.amplitude for w in walks) - min(w.amplitude for w in walks) > 1e-6:
            raise ValueError(f"the legs of {mech.name} differ in length: one gait amplitude "
                             "cannot give both the same stride — make their thighs and shanks "
                             "equal")
        return walks[0]


def _joints(written: str, names: list[str]) -> list[str]:
    """A key as the profile writes it → the joints it names (the controller file's rule)."""
    return [written] if written in names else [n for n in names if n.endswith("_" + written)]


# ----------------------------------------------------------------------------- loading
def load_wearer(path: str | Path, robot=None) -> Wearer:
    """Read and validate a wearer profile; checked against ``robot`` (a Mechanism) when
    given. ConfigError with file:line and key."""
    path = Path(path)
    root = read_yaml(path, ConfigError)
    text = path.read_text(encoding="utf-8")
    return _build(root, text, str(path), robot)


def default_wearer(robot) -> Wearer:
    """The profile of the robot file's wearer (``wearer:`` height, mass, sex, and the speed
    range where it gives one) with every other key at its default (docs/config-wearer.md),
    checked against ``robot`` (a Mechanism).
    Its ``text`` is the profile's YAML, which :func:`load_wearer` reads back to the same
    values. ConfigError when the robot file has no wearer."""
    src = Path(str(robot.source))
    where = Where(str(src), 0, "wearer")
    fix = "add a 'wearer:' section (mass, height, sex) to the robot file, or give --wearer FILE"
    if src.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError("the robot is a URDF: it names no wearer", where, fix)
    top = read_yaml(src, ConfigError).value
    if not isinstance(top, dict) or "wearer" not in top or not isinstance(
            top["wearer"].value, dict):
        raise ConfigError("the robot file has no wearer section", where, fix)
    w = top["wearer"].value
    body = {k: w[k].value for k in ("height", "mass", "sex") if k in w}
    values = {**body, **{k: _plain(v) for k, v in core.defaults(WearerFile).items()
                         if k not in ("height", "mass", "sex", "description")}}
    if "speed" in w and isinstance(w["speed"].value, dict):  # the robot's own speed range
        values["speed"] = {**values["speed"], **plain(w["speed"])}
    values["description"] = f"the wearer of {src.as_posix()} (default profile)"
    text = (f"# generated by exo_rt.session.wearer.default_wearer from {src.as_posix()}\n"
            + yaml.safe_dump(values, sort_keys=False, allow_unicode=True))
    node = core.node_of(values, f"{src} (its wearer's default profile)", error=ConfigError)
    return _build(node, text, "", robot)


def _plain(v):
    """A schema default as YAML writes it (sections as mappings, tuples as lists)."""
    if dataclasses.is_dataclass(v):
        return {k: _plain(vars(v)[f.name]) for k, f in type(v).KEYS.items()}
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _at(node: Node, *keys: str) -> Node:
    """The node of ``keys`` below ``node`` (the deepest one the file writes)."""
    for k in keys:
        if not isinstance(node.value, dict) or k not in node.value:
            break
        node = node.value[k]
    return node


def _build(root: Node, text: str, source: str, robot) -> Wearer:
    f = core.read(WearerFile, root)
    w = Wearer(source=source, height=f.height, mass=f.mass, sex=f.sex,
               description=f.description, range_of_motion=dict(f.range_of_motion),
               speed=f.speed, step_length=f.step_length, assistance=f.assistance,
               postures={k: dict(v) for k, v in f.postures.items()},
               sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), text=text,
               role=f.role)
    _check(w, root)
    if robot is not None:
        _check_robot(w, root, robot)
    return w


def _check(w: Wearer, root: Node) -> None:
    """What spans keys of the profile itself."""
    for written, r in w.range_of_motion.items():
        if not r.lower < r.upper:
            raise ConfigError(f"range of motion of '{written}': lower {r.lower:g} rad is not "
                              f"below upper {r.upper:g} rad",
                              _at(root, "range_of_motion", written).where(),
                              "give lower < upper (rad, flexion > 0)")
    s = w.speed
    if not s.min <= s.max:
        raise ConfigError(f"speed.min {s.min:g} m/s is above speed.max {s.max:g} m/s",
                          _at(root, "speed", "min").where(), "give min ≤ max")
    if not s.min <= s.default <= s.max:
        raise ConfigError(f"speed.default {s.default:g} m/s is outside speed.min … speed.max "
                          f"({s.min:g} … {s.max:g} m/s)", _at(root, "speed", "default").where(),
                          "give a default within the range")
    presets = _at(root, "speed", "presets")
    if not s.presets:
        raise ConfigError("speed.presets is empty: the crutch's MODE button has no speed to "
                          "give", presets.where(), "list at least one speed, e.g. [0.4]")
    for i, v in enumerate(s.presets):
        if not s.min <= v <= s.max:
            item = presets.value[i] if isinstance(presets.value, list) else presets
            raise ConfigError(f"speed preset {v:g} m/s is outside speed.min … speed.max "
                              f"({s.min:g} … {s.max:g} m/s)", item.where(),
                              "give presets within the range, or widen it")
    st = w.step_length
    if not st.min < st.max:
        raise ConfigError(f"step_length.min {st.min:g} m is not below step_length.max "
                          f"{st.max:g} m", _at(root, "step_length", "min").where(),
                          "give min < max")
    # the walk ratio's step grows with the speed: its ends are at speed.min and speed.max
    for end, v in (("min", s.min), ("max", s.max)):
        step = gait_speed.cadence_and_step(v, w.height)[1]
        if not st.min <= step <= st.max:
            key = "max" if step > st.max else "min"
            raise ConfigError(
                f"at speed.{end} {v:g} m/s a {w.height:g} m tall wearer's steps are "
                f"{step:.3f} m (walk ratio), outside step_length {st.min:g} … {st.max:g} m",
                _at(root, "step_length", key).where(),
                f"{'raise' if key == 'max' else 'lower'} step_length.{key} to "
                f"{'≥' if key == 'max' else '≤'} {step:.2f} m, or narrow speed.{end}")


def _check_robot(w: Wearer, root: Node, mech) -> None:
    """Joint and leg names, ranges and postures inside the robot's limits, the longest step
    within every leg's reach."""
    names = list(mech.coordinate_names)
    shown = ", ".join(mech.joint_names)
    for written, r in w.range_of_motion.items():
        node = _at(root, "range_of_motion", written)
        joints = _joints(written, names)
        if not joints:
            raise ConfigError(f"range of motion of unknown joint '{written}'", node.where(),
                              did_you_mean(written, names) or f"the robot's joints are {shown}")
        for j in joints:
            lo, hi = float(mech.lower[names.index(j)]), float(mech.upper[names.index(j)])
            if r.lower < lo or r.upper > hi:
                k, v, lim = ("lower", r.lower, lo) if r.lower < lo else ("upper", r.upper, hi)
                raise ConfigError(
                    f"range of motion of '{written}': {k} {v:g} rad is outside the robot's "
                    f"limits of '{j}' ({lo:g} … {hi:g} rad)", _at(node, k).where(),
                    f"give {'at least' if k == 'lower' else 'at most'} {lim:g} rad")
    lower, upper = w.limits(mech)
    q_names = list(mech.joint_names)
    for posture, angles in w.postures.items():
        for written, q in angles.items():
            node = _at(root, "postures", posture, written)
            joints = _joints(written, q_names)
            if not joints:
                raise ConfigError(f"posture '{posture}' names unknown joint '{written}'",
                                  node.where(), did_you_mean(written, q_names)
                                  or f"the robot's joints are {shown}")
            for j in joints:
                lo, hi = lower[q_names.index(j)], upper[q_names.index(j)]
                if not lo <= q <= hi:
                    raise ConfigError(
                        f"posture '{posture}': {j} at {q:g} rad is outside its range "
                        f"{lo:g} … {hi:g} rad (the wearer's range of motion, else the robot's "
                        f"limits)", node.where(), "give an angle within the range")
    prefixes = gait_speed.leg_prefixes(mech)
    legs = [p.rstrip("_") for p in prefixes]
    for leg in w.assistance.legs:
        if leg.rstrip("_") not in legs or leg.rstrip("_") == "":
            fix = (did_you_mean(leg, legs) or f"the robot's legs are {', '.join(legs)}"
                   if any(legs) else "the robot has one leg: give assistance.default")
            raise ConfigError(f"assistance for unknown leg '{leg}'",
                              _at(root, "assistance", "legs", leg).where(), fix)
    node = _at(root, "step_length", "max")
    for prefix in prefixes:
        thigh, shank = gait_speed.leg_lengths(mech, prefix)
        try:
            gait_speed.walk(w.speed.max, w.height, thigh, shank,
                            step_length=w.step_length.max, rom=w.rom(mech, prefix))
        except ValueError as exc:
            what, _, fix = str(exc).partition(" — ")
            raise ConfigError(f"step_length.max {w.step_length.max:g} m is beyond the leg "
                              f"'{prefix or mech.name}': {what}", node.where(),
                              fix or "lower step_length.max") from None


# ----------------------------------------------------------------------------- the table
def table(speeds, mech, wearer) -> list[tuple[float, float, float, float, float, float]]:
    """(speed m/s, cadence steps/min, period s, step length m, stride length m, amplitude)
    per speed for ``wearer`` (a :class:`Wearer`) on the robot ``mech``."""
    rows = []
    for v in speeds:
        w = wearer.walk(v, mech)
        rows.append((v, w.cadence, w.period, w.step_length, w.stride_length, w.amplitude))
    return rows


def main(argv=None) -> int:
    """``python -m exo_rt.session.wearer ROBOT [--wearer FILE] [--speeds …]``: the walks'
    table of docs/config-wearer.md ("Walking speed")."""
    import argparse

    from exo_rt.model import load_mechanism

    p = argparse.ArgumentParser(prog="python -m exo_rt.session.wearer",
                                description=main.__doc__)
    p.add_argument("robot")
    p.add_argument("--wearer", help="a wearer profile (default: the robot file's wearer)")
    p.add_argument("--speeds", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5, 0.6])
    args = p.parse_args(argv)
    mech = load_mechanism(args.robot)
    wearer = load_wearer(args.wearer, mech) if args.wearer else default_wearer(mech)
    print("| speed m/s | cadence steps/min | period s | step m | stride m | amplitude |")
    print("|---|---|---|---|---|---|")
    for v, c, t, s, L, a in table(args.speeds, mech, wearer):
        print(f"| {v:.2f} | {c:.1f} | {t:.3f} | {s:.3f} | {L:.3f} | {a:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
