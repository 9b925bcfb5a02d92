"""Activities files → :class:`Activities`: a robot's named postures (joint vectors in the
robot's joint order) and its motions (in the file's order, the crutch menu's), checked
against the robot: joint names, postures inside the soft limits, motions' peak speeds inside
the joints' velocity limits (docs/config-activities.md; schema
:mod:`exo_rt.schema.activities`).

The activity machine (:mod:`exo_rt.session.machine`) reads what a motion is from here; it
computes the references itself. A minimum-jerk move over Δq in T s peaks at 1.875·Δq/T at
its midpoint (Flash & Hogan 1985), which is how ``max_speed`` sets a move's duration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt import resources
from exo_rt.errors import ConfigError
from exo_rt.model.mechanism import Mechanism
from exo_rt.schema import core
from exo_rt.schema.activities import ActivitiesFile
from exo_rt.schema.top import SafetyConfig
from exo_rt.yamlio import Node, did_you_mean, read_yaml

PEAK = 1.875  # peak speed of a minimum-jerk move, in units of Δq/T (at t = T/2)
HOME_DURATION = 1.0  # s: a homing move's shortest duration when the file gives none
HOME_CEILING = 0.2  # rad/s: no homing move is faster, whatever its file says
WALK_STEP = 0.5  # strides: the opening and closing steps when the file gives none
SPEED_BLEND = 2.0  # strides: a speed change blends the old gait into the new over at least two
LEG_NAMES = ("left", "right")  # a joint "left_knee" is the left leg's knee; "knee": the one leg
MARGIN = SafetyConfig().joint_margin  # rad: the safety's soft limits, inside the joint limits

__all__ = ["Activities", "Motion", "default_path", "leg_of", "load_activities"]


@dataclass(frozen=True)
class Motion:
    """One motion of an activities file (see docs/config-activities.md).

    ``duration``: a move's duration (s; from ``duration``, or set by ``max_speed`` over its
    postures' largest excursion); a homing move's shortest (s); None for walk (its pace is
    the walking speed's). ``phase_offsets``: per joint, in the robot's joint order, in
    strides (walk; zeros for the others)."""

    name: str
    index: int  # position in the file (the board's MENU codes)
    kind: str  # move | walk | home
    start: str | None  # the posture it starts in (None: home, from anywhere)
    end: str  # the posture it ends in
    duration: float | None  # s
    max_speed: float | None  # rad/s
    hold_go: bool
    stoppable: bool
    opening: float  # strides (walk; 0 for the others)
    closing: float  # strides (walk; 0 for the others)
    phase_offsets: np.ndarray = field(repr=False)  # (n,) strides
    description: str = ""
    frozen_timeout: float = 30.0  # s: a GO-held move frozen this long ends by itself
    on_frozen: str = "return"  # … back to its start posture, or on to its end ("finish")
    stride_change: float = 0.0  # walk: the stride period's largest change per stride of a
    # speed change's blend (a fraction; 0: the blend is SPEED_BLEND strides)

    def speed_blend(self, period: float, new_period: float) -> float:
        """Strides: how long a speed change of this walk blends its gait of ``period`` s into
        one of ``new_period`` s — :data:`SPEED_BLEND`, or as many whole strides as keep the
        period's change within ``stride_change`` of it per stride (a one-leg exoskeleton's
        wearer walks their other leg at the pace they feel: docs/world.md)."""
        if self.stride_change <= 0.0:
            return SPEED_BLEND
        change = abs(new_period / period - 1.0) / self.stride_change
        return max(SPEED_BLEND, float(math.ceil(change - 1e-9)))

    @property
    def needs_confirm(self) -> bool:
        """A homing move waits for the operator's CONFIRM."""
        return self.kind == "home"


@dataclass(frozen=True)
class Activities:
    """A robot's postures and motions, checked against it.

    ``postures``: name → joint angles (rad, read-only (n,) arrays in ``joint_names`` order),
    in the file's order; ``motions``: in the file's order; ``legs``: the legs' names
    (``("left", "right")``, or ``("",)`` for a robot whose joints have no leg prefix)."""

    source: str
    joint_names: tuple[str, ...]
    legs: tuple[str, ...]
    tolerance: float  # rad
    postures: dict[str, np.ndarray]
    motions: tuple[Motion, ...]
    description: str = ""
    go_debounce: float = 0.0  # s: GO held this long before it moves a GO-held motion
    gait: str = "normal"  # the walks' reference (schema.activities.GAITS)
    _by_name: dict = field(init=False, repr=False, compare=False)
    _possible: dict = field(init=False, repr=False, compare=False)
    _table: np.ndarray = field(init=False, repr=False, compare=False)
    _scratch: np.ndarray = field(init=False, repr=False, compare=False)
    _row: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {m.name: m for m in self.motions}
        possible = {p: tuple(m.name for m in self.motions if m.start == p)
                    for p in self.postures}
        possible[None] = tuple(m.name for m in self.motions if m.kind == "home")
        table = (np.array(list(self.postures.values()), dtype=float) if self.postures
                 else np.zeros((0, len(self.joint_names))))
        for name, value in (("_by_name", by_name), ("_possible", possible),
                            ("_table", table), ("_scratch", np.empty_like(table)),
                            ("_row", np.empty(len(table)))):
            object.__setattr__(self, name, value)

    @property
    def names(self) -> tuple[str, ...]:
        """The motions' names, in the file's order."""
        return tuple(self._by_name)

    def motion(self, name: str) -> Motion | None:
        """The motion called ``name`` (None: there is none)."""
        return self._by_name.get(name)

    def index(self, name: str) -> int:
        """A motion's position in the file (the board's MENU sends it); KeyError if none."""
        m = self._by_name.get(name)
        if m is None:
            raise KeyError(f"no motion '{name}' in {self.source} (its motions: "
                           f"{', '.join(self._by_name)})")
        return m.index

    def posture_q(self, name: str) -> np.ndarray:
        """A posture's joint angles (rad, (n,) read-only, the robot's joint order)."""
        return self.postures[name]

    def posture_of(self, q, tolerance: float | None = None) -> str | None:
        """The posture ``q`` (rad, (n,)) is in — every joint within ``tolerance`` (default the
        file's) of it; the first in the file's order if several — or None. Allocates nothing
        (a scratch buffer: call it from one thread)."""
        tol = self.tolerance if tolerance is None else tolerance
        if not len(self._table):
            return None
        np.subtract(self._table, q, out=self._scratch)
        np.abs(self._scratch, out=self._scratch)
        np.max(self._scratch, axis=1, out=self._row)
        for i, name in enumerate(self.postures):
            if self._row[i] <= tol:
                return name
        return None

    def possible(self, posture: str | None) -> tuple[str, ...]:
        """The motions that may start in ``posture`` (file order); in no named posture
        (None): only the homing motions."""
        return self._possible.get(posture, ())

    def move_duration(self, motion: Motion | str, q_from) -> float:
        """How long a move or homing motion takes from ``q_from`` (rad, (n,)) to its end
        posture: its ``duration``, stretched so that the minimum-jerk peak speed
        1.875·max|Δq|/T stays at most ``max_speed`` (s). Walk: ValueError."""
        m = self._by_name[motion] if isinstance(motion, str) else motion
        if m.kind == "walk":
            raise ValueError(f"motion '{m.name}' is a walk: its pace is the walking speed's")
        t = m.duration or 0.0
        if m.max_speed is not None:
            reach = float(np.max(np.abs(self.postures[m.end] - np.asarray(q_from, float))))
            t = max(t, PEAK * reach / m.max_speed)
        return t


def leg_of(joint: str) -> str:
    """The leg a joint belongs to: its prefix before '_' when that is a leg's name
    (:data:`LEG_NAMES`), else "" (a robot with one leg and unprefixed joints)."""
    head = joint.split("_", 1)[0]
    return head if head in LEG_NAMES and "_" in joint else ""


def _joint_kind(joint: str) -> str:
    leg = leg_of(joint)
    return joint[len(leg) + 1:] if leg else joint


def _joints(name: str, node: Node, joints: tuple[str, ...], legs: bool) -> tuple[int, list]:
    """The joints ``name`` means: (specificity, indices) — a full joint name (2), a joint
    kind of every leg (1: ``hip``), or, where ``legs``, a leg's joints (0: ``right``)."""
    if name in joints:
        return 2, [joints.index(name)]
    kind = [i for i, j in enumerate(joints) if _joint_kind(j) == name]
    if kind:
        return 1, kind
    leg = [i for i, j in enumerate(joints) if leg_of(j) == name and name]
    if legs and leg:
        return 0, leg
    words = list(joints) + sorted({_joint_kind(j) for j in joints})
    if legs:
        words += sorted({leg_of(j) for j in joints} - {""})
    what = "joint or leg" if legs else "joint"
    raise ConfigError(f"unknown {what} '{name}'", node.where(),
                      did_you_mean(name, words)
                      or f"the robot's joints are {', '.join(joints)}")


def _per_joint(values: dict, node: Node, joints: tuple[str, ...], legs: bool = False
               ) -> np.ndarray:
    """A {name: value} map as a (n,) vector: unnamed joints 0, a full joint name over its
    kind's value over its leg's (whatever the order they are written in)."""
    out = np.zeros(len(joints))
    found = [(*_joints(k, node.value[k], joints, legs), v) for k, v in values.items()]
    for _rank, idx, v in sorted(found, key=lambda x: x[0]):
        out[idx] = v
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _postures(f: ActivitiesFile, nodes: dict, robot: Mechanism, margin: float,
              rom=None) -> dict:
    """name → joint vector, each inside the soft limits (the joint limits less ``margin``)
    and, with ``rom`` ((lower, upper) rad per joint, the wearer's range of motion), inside
    the wearer's range."""
    joints = tuple(robot.joint_names)
    lo = _per_coordinate(robot, robot.lower) + margin
    hi = _per_coordinate(robot, robot.upper) - margin
    whose = np.array(["the soft limits"] * len(joints), dtype=object)
    if rom is not None:
        tighter_lo, tighter_hi = np.asarray(rom[0]) > lo, np.asarray(rom[1]) < hi
        whose[tighter_lo | tighter_hi] = "the wearer's range of motion"
        lo, hi = np.maximum(lo, rom[0]), np.minimum(hi, rom[1])
    out = {}
    for name, angles in f.postures.items():
        node = nodes["postures"].value[name]
        q = _per_joint(angles, node, joints)
        for i, x in enumerate(q):
            if lo[i] <= x <= hi[i]:
                continue
            given = next((k for k in angles if i in _joints(k, node.value[k], joints,
                                                             False)[1]), None)
            where = node.value[given].where() if given else node.where()
            why = (f"the joint's limits less the safety's margin {margin:g} rad"
                   if whose[i] == "the soft limits" else "the wearer profile's")
            raise ConfigError(
                f"posture '{name}': {joints[i]} {x:g} rad is outside {whose[i]} "
                f"{lo[i]:g}…{hi[i]:g} rad ({why})", where,
                f"give {joints[i]} a value within {lo[i]:g}…{hi[i]:g} rad"
                if given else f"name {joints[i]} in the posture (unnamed joints are 0)")
        out[name] = _read_only(q)
    return out


def _per_coordinate(robot: Mechanism, values: np.ndarray) -> np.ndarray:
    """A per-coordinate array of the robot's (limits) in the order of its q."""
    names = list(robot.coordinate_names)
    return np.array([values[names.index(j)] for j in robot.joint_names], dtype=float)


def _posture_name(name: str | None, node: Node, postures: dict, label: str) -> None:
    if name not in postures:
        raise ConfigError(f"unknown posture '{name}' in '{label}'", node.where(),
                          did_you_mean(name, postures)
                          or f"the postures are {', '.join(postures)}")


# which optional keys each kind of motion takes
ONLY = {"from": ("move", "walk"), "duration": ("move", "home"),
        "max_speed": ("move", "home"), "opening": ("walk",), "closing": ("walk",),
        "phase_offsets": ("walk",), "stride_change": ("walk",)}


def _motion(name: str, index: int, spec, node: Node, postures: dict, robot: Mechanism
            ) -> Motion:
    """One motion, checked: keys its kind takes, posture names, timing, speeds."""
    joints = tuple(robot.joint_names)
    keys = node.value
    for k, kinds in ONLY.items():
        if k in keys and spec.kind not in kinds:
            raise ConfigError(f"motion '{name}': a {spec.kind} takes no '{k}'",
                              keys[k].where(), f"remove '{k}' (only {' and '.join(kinds)} "
                                               f"motions take it)")
    if spec.kind != "home" and spec.start is None:
        raise ConfigError(f"motion '{name}' ({spec.kind}) has no 'from'", node.where(),
                          "add 'from: POSTURE' (the posture it starts in)")
    if spec.kind == "home" and spec.max_speed is not None and spec.max_speed > HOME_CEILING:
        raise ConfigError(f"motion '{name}': a homing move's max_speed {spec.max_speed:g} "
                          f"rad/s is above the ceiling {HOME_CEILING:g} rad/s",
                          keys["max_speed"].where(),
                          f"give at most {HOME_CEILING:g} rad/s (homing starts from anywhere, "
                          f"a person in the exoskeleton: no file lifts this ceiling)")
    if spec.kind == "home" and spec.max_speed is None:
        raise ConfigError(f"motion '{name}' (home) has no 'max_speed'", node.where(),
                          "add 'max_speed: 0.2' (rad/s: a homing move starts anywhere, so "
                          "its duration follows from its speed)")
    if spec.kind == "move" and spec.duration is None and spec.max_speed is None:
        raise ConfigError(f"motion '{name}' (move) has neither 'duration' nor 'max_speed'",
                          node.where(), "add 'duration: S' or 'max_speed: RAD_PER_S'")
    if spec.start is not None:
        _posture_name(spec.start, keys["from"], postures, "from")
    _posture_name(spec.end, keys["to"], postures, "to")
    vmax = _per_coordinate(robot, robot.velocity_limit)
    if spec.max_speed is not None and spec.max_speed > vmax.min():
        j = int(np.argmin(vmax))
        raise ConfigError(f"motion '{name}': max_speed {spec.max_speed:g} rad/s exceeds "
                          f"{joints[j]}'s velocity limit {vmax[j]:g} rad/s",
                          keys["max_speed"].where(),
                          f"give at most {vmax[j]:g} rad/s (any joint may move farthest)")
    duration = spec.duration
    if spec.kind == "move":
        delta = np.abs(postures[spec.end] - postures[spec.start])
        if not delta.max() > 0:
            raise ConfigError(f"motion '{name}' moves from '{spec.start}' to the same "
                              f"angles", keys["to"].where(), "give another end posture")
        if spec.max_speed is not None:
            duration = max(duration or 0.0, PEAK * float(delta.max()) / spec.max_speed)
        peak = PEAK * delta / duration
        over = np.flatnonzero(peak > vmax)
        if len(over):
            j = int(over[0])
            raise ConfigError(
                f"motion '{name}': {joints[j]} peaks at {peak[j]:g} rad/s over "
                f"{duration:g} s, above its velocity limit {vmax[j]:g} rad/s",
                keys["duration"].where(),
                f"give a duration of at least {PEAK * delta[j] / vmax[j]:.3g} s")
    elif spec.kind == "home":
        duration = HOME_DURATION if duration is None else duration
    walk = spec.kind == "walk"
    stoppable = walk if spec.stoppable is None else spec.stoppable
    if walk and not stoppable:
        raise ConfigError(f"motion '{name}': a walk must be stoppable (STOP ends it with "
                          f"the closing step)", keys["stoppable"].where(),
                          "remove 'stoppable: false'")
    offsets = (_per_joint(spec.phase_offsets, keys["phase_offsets"], joints, legs=True)
               if "phase_offsets" in keys else np.zeros(len(joints)))
    return Motion(
        name=name, index=index, kind=spec.kind, start=spec.start, end=spec.end,
        duration=duration, max_speed=spec.max_speed, hold_go=spec.hold_go,
        stoppable=stoppable,
        opening=(WALK_STEP if spec.opening is None else spec.opening) if walk else 0.0,
        closing=(WALK_STEP if spec.closing is None else spec.closing) if walk else 0.0,
        phase_offsets=_read_only(offsets), description=spec.description,
        frozen_timeout=spec.frozen_timeout, on_frozen=spec.on_frozen,
        stride_change=spec.stride_change or 0.0)


def _merge_postures(root: Node, given: dict | Node) -> None:
    """Write ``given``'s posture angles over the file's (in place, before it is read)."""
    if not isinstance(given, Node):
        given = core.node_of(given, "<postures>", "postures", ConfigError)
    if not isinstance(given.value, dict) or not isinstance(root.value, dict) \
            or "postures" not in root.value or not isinstance(root.value["postures"].value,
                                                              dict):
        return  # the schema's reader says what is wrong with the file's postures
    mine = root.value["postures"].value
    for name, angles in given.value.items():
        if name not in mine:
            raise ConfigError(f"unknown posture '{name}'", angles.where(),
                              did_you_mean(name, mine) or f"the activities file "
                              f"{root.file} names {', '.join(mine)}")
        if not isinstance(angles.value, dict) or not isinstance(mine[name].value, dict):
            raise ConfigError(f"posture '{name}' must map joints to angles",
                              angles.where(), "e.g. {hip: 1.4, knee: 1.4}")
        mine[name] = Node({**mine[name].value, **angles.value}, mine[name].file,
                          mine[name].line, mine[name].key, mine[name].error)


def load_activities(path: str | Path, robot: Mechanism, margin: float = MARGIN,
                    postures: dict | Node | None = None, rom=None) -> Activities:
    """Read and check an activities file for ``robot``. ``margin`` (rad): how far inside
    the joint limits the safety's soft limits are (the top config's
    ``safety.joint_margin``). ``postures``: angles that replace the file's, joint by joint
    ({posture: {joint or kind: rad}}, e.g. a wearer profile's; a :class:`Node` keeps its
    file's lines for errors); durations set by ``max_speed`` follow them. ConfigError with
    ``file:line`` on any mistake."""
    root = read_yaml(Path(path), ConfigError)
    if postures is not None:
        _merge_postures(root, postures)
    f = core.read(ActivitiesFile, root)
    nodes = root.value
    joints = tuple(robot.joint_names)
    postures = _postures(f, nodes, robot, margin, rom)
    if not postures:
        raise ConfigError("no postures", nodes["postures"].where(),
                          "name at least one, e.g. standing: {hip: 0.0, knee: 0.05}")
    motions = tuple(_motion(name, i, spec, nodes["motions"].value[name], postures, robot)
                    for i, (name, spec) in enumerate(f.motions.items()))
    legs = tuple(dict.fromkeys(leg_of(j) for j in joints))
    return Activities(source=str(path), joint_names=joints, legs=legs,
                      tolerance=f.tolerance, postures=postures, motions=motions,
                      description=f.description, go_debounce=f.go_debounce, gait=f.gait)


def default_path(robot_name: str) -> Path:
    """The shipped activities file of a robot (``configs/activities/NAME.yaml``)."""
    return resources.config("activities", f"{robot_name}.yaml")

