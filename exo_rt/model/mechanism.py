"""The immutable description of a mechanism: topology and inertia as numpy arrays.

Like Pinocchio's ``Model``: built once by a loader, never changed, shared by the controller
and the simulator. Every kernel takes :attr:`Mechanism.packed` (one float64 array, so a call
from Python or from another njit function passes few arguments) and writes into a
preallocated workspace.

Body 0 is the base (fixed to the world; its frame is the world frame). Bodies 1… each hang
on one movable joint (revolute or prismatic) whose parent body comes earlier. Each body's
joint drives tree coordinate z_i = k_i · q[q_index_i] + c_i: k = 1, c = 0 for an independent
joint, the ``<mimic>`` multiplier and offset for a dependent one (a harmonic drive's rotor:
the constant R_z of Hidalgo & Rocón, eqs. 23–27).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

# the packed model's columns (exo_rt.mechanism_layout), which the kernels read and
# __post_init__ fills; named here too, where most code takes them from
from exo_rt.mechanism_layout import (  # noqa: F401
    HDR_GRAVITY,
    HDR_NQ,
    JOINT_BASE,
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    P_AXIS,
    P_AXIS_INDEX,
    P_C,
    P_COM,
    P_INERTIA,
    P_JTYPE,
    P_K,
    P_MASS,
    P_PARENT,
    P_QIDX,
    P_ROT,
    P_ROT_IDENTITY,
    P_WIDTH,
    P_XYZ,
)
from exo_rt.model.transmission import Transmission


def _axis_index(axis) -> int:
    """0, 1, 2 where ``axis`` is exactly ±x, ±y, ±z; −1 otherwise (:data:`P_AXIS_INDEX`)."""
    nonzero = np.flatnonzero(np.asarray(axis) != 0.0)
    if len(nonzero) == 1 and abs(axis[nonzero[0]]) == 1.0:
        return int(nonzero[0])
    return -1


@dataclass(frozen=True, eq=False)
class Closure:
    """Loop closures of a mechanism and their coordinate partition (docs/dynamics.md).

    ``packed`` holds one row per loop (layout in :mod:`exo_rt.dynamics.loops`); ``index`` is
    [selected constraint rows…, dependent coordinates…, independent coordinates…] (indices
    into the raw constraint rows and into ``coordinate_names``); ``reference`` is a closed
    configuration of all tree coordinates (the Newton warm start).
    """

    names: tuple[str, ...]
    packed: np.ndarray
    index: np.ndarray
    n_rows: int  # raw constraint rows (3 per point loop, 5 per revolute loop)
    dependent: np.ndarray
    independent: np.ndarray
    reference: np.ndarray


@dataclass(frozen=True, eq=False)
class Mechanism:
    """Topology and inertia of a tree of rigid bodies (SI units, world = base frame)."""

    name: str
    source: str
    body_names: tuple[str, ...]
    joint_names: tuple[str, ...]  # order of q (independent coordinates)
    tree_joint_names: tuple[str, ...]  # per body: the joint it hangs on ("" for the base)
    joint_types: tuple[str, ...]  # per coordinate: revolute | continuous | prismatic
    parent: np.ndarray
    joint_type: np.ndarray
    q_index: np.ndarray
    mimic_multiplier: np.ndarray
    mimic_offset: np.ndarray
    origin_xyz: np.ndarray
    origin_rot: np.ndarray
    axis: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    gravity: np.ndarray
    lower: np.ndarray  # per coordinate (coordinate_names), rad or m (−inf if none)
    upper: np.ndarray
    velocity_limit: np.ndarray  # per coordinate, rad/s or m/s (inf if none)
    effort_limit: np.ndarray  # per coordinate, N·m or N (inf if none)
    total_mass: float
    transmissions: tuple[Transmission, ...] = ()
    coordinate_names: tuple[str, ...] = ()  # tree coordinates z (default: joint_names)
    closure: Closure | None = None  # loop closures (None for a tree)
    warnings: tuple = ()  # ModelWarning: implausible but loaded (exo-rt check lists them)
    packed: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.coordinate_names:
            object.__setattr__(self, "coordinate_names", tuple(self.joint_names))
        nb = len(self.body_names)
        p = np.zeros((nb + 1, P_WIDTH))
        p[:nb, P_PARENT] = self.parent
        p[:nb, P_JTYPE] = self.joint_type
        p[:nb, P_QIDX] = self.q_index
        p[:nb, P_K] = self.mimic_multiplier
        p[:nb, P_C] = self.mimic_offset
        p[:nb, P_XYZ : P_XYZ + 3] = self.origin_xyz
        p[:nb, P_ROT : P_ROT + 9] = self.origin_rot.reshape(nb, 9)
        p[:nb, P_AXIS : P_AXIS + 3] = self.axis
        p[:nb, P_MASS] = self.mass
        p[:nb, P_COM : P_COM + 3] = self.com
        p[:nb, P_INERTIA : P_INERTIA + 9] = self.inertia.reshape(nb, 9)
        p[:nb, P_ROT_IDENTITY] = [np.array_equal(r, np.eye(3)) for r in
                                  self.origin_rot.reshape(nb, 3, 3)]
        p[:nb, P_AXIS_INDEX] = [_axis_index(a) for a in np.reshape(self.axis, (nb, 3))]
        p[nb, HDR_NQ] = self.nz
        p[nb, HDR_GRAVITY : HDR_GRAVITY + 3] = self.gravity
        p.setflags(write=False)
        object.__setattr__(self, "packed", p)
        for name in (
            "parent", "joint_type", "q_index", "mimic_multiplier", "mimic_offset", "origin_xyz",
            "origin_rot", "axis", "mass", "com", "inertia", "gravity", "lower", "upper",
            "velocity_limit", "effort_limit",
        ):
            getattr(self, name).setflags(write=False)

    def with_gravity(self, gravity) -> Mechanism:
        """The same mechanism under another gravity vector (m/s², world frame)."""
        g = np.array(gravity, dtype=float).reshape(3)
        return dataclasses.replace(self, gravity=g)

    @property
    def nq(self) -> int:
        """Number of independent coordinates (length of q, v, a, τ)."""
        return len(self.joint_names)

    @property
    def nz(self) -> int:
        """Number of tree coordinates (= nq for a tree; more when loops close it)."""
        return len(self.coordinate_names)

    @property
    def n_bodies(self) -> int:
        """Number of bodies, the base included."""
        return len(self.body_names)

    def joint_index(self, name: str) -> int:
        """Position of joint ``name`` in q."""
        return self.joint_names.index(name)

    def neutral(self) -> np.ndarray:
        """A zero configuration (float64, length nq)."""
        return np.zeros(self.nq)

    def describe(self) -> str:
        """Human-readable summary: bodies, joints (order of q), total mass, limits."""
        lines = [f"mechanism '{self.name}' from {self.source}"]
        lines.append(f"  bodies ({self.n_bodies}, base first):")
        for i, b in enumerate(self.body_names):
            par = "world" if self.parent[i] < 0 else self.body_names[self.parent[i]]
            via = self.tree_joint_names[i] or "(base)"
            extra = ""
            if i and self.tree_joint_names[i] not in self.coordinate_names:
                extra = (f"  mimic {self.coordinate_names[self.q_index[i]]}"
                         f" ×{self.mimic_multiplier[i]:g} {self.mimic_offset[i]:+g}")
            lines.append(
                f"    {i:2d} {b:<20s} {self.mass[i]:9.4f} kg  on {via} ← {par}{extra}"
            )
        lines.append(f"  coordinates q ({self.nq}): {', '.join(self.joint_names)}")
        if self.closure is not None:
            dep = [self.coordinate_names[i] for i in self.closure.dependent]
            lines.append(
                f"  loops ({len(self.closure.names)}): {', '.join(self.closure.names)}; "
                f"dependent coordinates: {', '.join(dep)}"
            )
        for i, n in enumerate(self.coordinate_names):
            unit = "m" if self.joint_types[i] == "prismatic" else "deg"
            f = 1.0 if unit == "m" else 180.0 / np.pi
            tag = f"q[{self.joint_names.index(n)}]" if n in self.joint_names else "dep."
            lines.append(
                f"    {tag:>5s} {n:<16s} {self.joint_types[i]:<10s} "
                f"[{self.lower[i] * f:8.3f}, {self.upper[i] * f:8.3f}] {unit}  "
                f"vel ≤ {self.velocity_limit[i]:g}  effort ≤ {self.effort_limit[i]:g}"
            )
        lines.append(f"  total mass {self.total_mass:.4f} kg; gravity {self.gravity.tolist()} m/s²")
        return "\n".join(lines)
