"""A MuJoCo model of a Mechanism, built in code (``mujoco.MjSpec``): no hand-kept MJCF.

The bodies, joints, inertias and limits are the Mechanism's — the same robot file or URDF,
modules and wearer segments the controller loads (the loader has already strapped the
wearer's de Leva segments to their links) — so the world and the controller's model differ
only where the world adds what the controller does not model (floor, contacts, the upper
body). Each movable body becomes a MuJoCo body at its joint's origin (``pos``, ``quat``: the
Mechanism's origin translation and rotation in the parent frame) with one hinge or slide joint
about the same axis through the body frame's origin, the same range (continuous joints
unlimited), and an explicit inertial: the mass, the centre of mass and the full inertia tensor
about it, diagonalised here (principal moments and ``iquat``) so that MuJoCo's compiler does no
eigen-solve of its own. The harmonic drives' rotors are folded in as
:mod:`exo_rt.sim.world.rotors` explains (armature plus a share of axial inertia on the carrier
and the output link): the reflected inertia counted once.

Two bases: ``fixed`` (body 0, the pelvis, welded to the world: today's test stand) and
``sagittal`` (the pelvis on slide x, slide z and hinge y — forward, vertical, pitch — in that
order: the planar pelvis of MyoSuite's MuJoCo models).
"""

from __future__ import annotations

import mujoco
import numpy as np

from exo_rt.model.mechanism import JOINT_PRISMATIC, Mechanism
from exo_rt.sim.world.rotors import RigidBodies

BASES = ("fixed", "sagittal")
# the sagittal base's joints, in qpos order: (name, type, axis in the world frame)
SAGITTAL_JOINTS = (("base_x", mujoco.mjtJoint.mjJNT_SLIDE, (1.0, 0.0, 0.0)),
                   ("base_z", mujoco.mjtJoint.mjJNT_SLIDE, (0.0, 0.0, 1.0)),
                   ("base_pitch", mujoco.mjtJoint.mjJNT_HINGE, (0.0, 1.0, 0.0)))


def quaternion(rot: np.ndarray) -> np.ndarray:
    """The unit quaternion (w, x, y, z) of a proper rotation matrix."""
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(rot, dtype=float).reshape(9))
    return q


def principal(inertia: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(principal moments, quaternion of the principal axes in the body frame), kg·m².

    numpy's symmetric eigensolver, its eigenvector basis made right-handed.
    """
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    return moments, quaternion(axes)


def new_spec(name: str, gravity, timestep: float) -> mujoco.MjSpec:
    """An empty spec with exo-rt's conventions: radians, explicit inertials, no extras."""
    spec = mujoco.MjSpec()
    spec.modelname = name
    spec.compiler.degree = False
    spec.compiler.autolimits = False
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.balanceinertia = False
    spec.compiler.fusestatic = False
    spec.option.gravity = np.asarray(gravity, dtype=float)
    spec.option.timestep = float(timestep)
    return spec


def _inertial(body, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
    body.explicitinertial = True
    body.mass = float(mass)
    body.ipos = np.asarray(com, dtype=float)
    moments, iquat = principal(inertia)
    body.inertia = moments
    body.iquat = iquat


def add_mechanism(spec: mujoco.MjSpec, mech: Mechanism, rigid: RigidBodies, *,
                  base: str = "fixed", base_pos=(0.0, 0.0, 0.0)) -> dict[int, object]:
    """The Mechanism's rigid bodies into ``spec``'s world body; {Mechanism body: MjsBody}.

    ``base_pos`` (m) places the base frame (the pelvis) in the world.
    """
    if base not in BASES:
        raise ValueError(f"base must be one of {BASES}, not {base!r}")
    root = spec.worldbody.add_body(name=mech.body_names[0], pos=np.asarray(base_pos, float))
    if base == "sagittal":
        for name, kind, axis in SAGITTAL_JOINTS:
            root.add_joint(name=name, type=kind, axis=np.asarray(axis),
                           limited=mujoco.mjtLimited.mjLIMITED_FALSE)
        _inertial(root, rigid.mass[0], rigid.com[0], rigid.inertia[0])
    # a welded base's inertia never enters the dynamics: the fixed base carries none
    bodies = {0: root}
    for b in rigid.bodies[1:]:
        parent = bodies[int(mech.parent[b])]
        body = parent.add_body(name=mech.body_names[b], pos=np.asarray(mech.origin_xyz[b]),
                               quat=quaternion(mech.origin_rot[b]))
        qi = int(mech.q_index[b])
        kind = (mujoco.mjtJoint.mjJNT_SLIDE if mech.joint_type[b] == JOINT_PRISMATIC
                else mujoco.mjtJoint.mjJNT_HINGE)
        lo, hi = float(mech.lower[qi]), float(mech.upper[qi])
        limited = bool(np.isfinite(lo) and np.isfinite(hi))
        body.add_joint(name=mech.joint_names[qi], type=kind,
                       axis=np.asarray(mech.axis[b], dtype=float),
                       limited=(mujoco.mjtLimited.mjLIMITED_TRUE if limited
                                else mujoco.mjtLimited.mjLIMITED_FALSE),
                       range=[lo, hi] if limited else [0.0, 0.0],
                       armature=float(rigid.armature[qi]))
        _inertial(body, rigid.mass[b], rigid.com[b], rigid.inertia[b])
        bodies[b] = body
    return bodies
