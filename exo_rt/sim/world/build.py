"""The world: a Mechanism as a compiled MuJoCo model, and where its coordinates live there."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from exo_rt.model.mechanism import Mechanism
from exo_rt.sim.world.rotors import RigidBodies, fold_rotors
from exo_rt.sim.world.spec import SAGITTAL_JOINTS, add_mechanism, new_spec

DEFAULT_TIMESTEP = 1e-3  # s


@dataclass(frozen=True, eq=False)
class World:
    """A compiled MuJoCo model of ``mechanism`` and the maps between their coordinates.

    ``qpos``/``dof`` hold, per coordinate of the Mechanism's q (``mechanism.joint_names``),
    its address in MuJoCo's ``qpos`` and ``qvel``; ``base_qpos``/``base_dof`` the sagittal
    base's three (x, z, pitch; empty for a fixed base). ``bodies`` maps Mechanism body indices
    to MuJoCo body ids (rotors have none: they are folded into their joints).
    """

    mechanism: Mechanism
    base: str
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    rigid: RigidBodies
    qpos: np.ndarray
    dof: np.ndarray
    base_qpos: np.ndarray
    base_dof: np.ndarray
    bodies: dict

    def new_data(self) -> mujoco.MjData:
        """A fresh ``MjData`` for this model."""
        return mujoco.MjData(self.model)

    def set_state(self, data: mujoco.MjData, q, v, base_q=None, base_v=None) -> None:
        """Write the Mechanism's (q, q̇) — and the base's (x, z, pitch) and their rates — into
        ``data`` (rad, m, rad/s, m/s)."""
        data.qpos[self.qpos] = q
        data.qvel[self.dof] = v
        if base_q is not None:
            data.qpos[self.base_qpos] = base_q
        if base_v is not None:
            data.qvel[self.base_dof] = base_v

    def joint_positions(self, data: mujoco.MjData) -> np.ndarray:
        """The Mechanism's q read from ``data`` (rad or m)."""
        return np.array(data.qpos[self.qpos])

    def joint_velocities(self, data: mujoco.MjData) -> np.ndarray:
        """The Mechanism's q̇ read from ``data`` (rad/s or m/s)."""
        return np.array(data.qvel[self.dof])


def build_world(mech: Mechanism, *, base: str = "fixed", base_pos=(0.0, 0.0, 0.0),
                timestep: float = DEFAULT_TIMESTEP, extras=()) -> World:
    """Compile ``mech`` into a MuJoCo world.

    ``base``: ``fixed`` (the pelvis welded to the world) or ``sagittal`` (forward, vertical,
    pitch); ``base_pos`` (m) is where the pelvis frame starts in the world. ``extras`` are
    callables ``f(spec, mech, bodies)`` that add to the spec before it compiles (the floor,
    contacts, the upper body: :mod:`exo_rt.sim.world.scene`).
    """
    rigid = fold_rotors(mech)
    spec = new_spec(mech.name, mech.gravity, timestep)
    bodies = add_mechanism(spec, mech, rigid, base=base, base_pos=base_pos)
    for extra in extras:
        extra(spec, mech, bodies)
    model = spec.compile()
    qpos = np.array([model.joint(n).qposadr[0] for n in mech.joint_names], dtype=np.int64)
    dof = np.array([model.joint(n).dofadr[0] for n in mech.joint_names], dtype=np.int64)
    names = [n for n, _, _ in SAGITTAL_JOINTS] if base == "sagittal" else []
    base_qpos = np.array([model.joint(n).qposadr[0] for n in names], dtype=np.int64)
    base_dof = np.array([model.joint(n).dofadr[0] for n in names], dtype=np.int64)
    ids = {b: model.body(mech.body_names[b]).id for b in bodies}
    return World(mech, base, spec, model, rigid, qpos, dof, base_qpos, base_dof, ids)


def mass_matrix(world: World, data: mujoco.MjData) -> np.ndarray:
    """MuJoCo's joint-space mass matrix (armature included) after ``mj_forward``, in MuJoCo's
    dof order (kg·m², kg)."""
    m = np.zeros((world.model.nv, world.model.nv))
    mujoco.mj_fullM(world.model, data, m)
    return m
