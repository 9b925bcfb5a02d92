"""The world's model checked against exo-rt's dynamics: the helpers of the independent check
(``tests/test_world_model.py``, ``tools/world_figures.py``; docs/world.md).

- :func:`mujoco_terms`: MuJoCo's mass matrix (``mj_fullM`` after ``mj_forward``) and bias
  forces (``qfrc_bias``) in the Mechanism's coordinate order;
- :func:`worst_errors`: their largest relative errors against :class:`exo_rt.dynamics.Dynamics`
  over random states;
- :func:`sagittal_mechanism`: exo-rt's own model of the sagittal base (the pelvis on prismatic
  x, prismatic z and revolute y), the reference for the floating base;
- :func:`random_tree_with_rotors`: random 3-D trees whose revolute joints carry harmonic-drive
  rotors, for the rotors' folding.
"""

from __future__ import annotations

import mujoco
import numpy as np

from exo_rt.dynamics import Dynamics
from exo_rt.model.mechanism import JOINT_PRISMATIC, JOINT_REVOLUTE, Mechanism
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism
from exo_rt.sim.world.build import mass_matrix
from exo_rt.sim.world.spec import SAGITTAL_JOINTS


def rel_error(ours, ref) -> float:
    """‖ours − ref‖∞ / ‖ref‖∞."""
    return float(np.max(np.abs(np.asarray(ours) - ref)) / np.max(np.abs(ref)))


def mujoco_terms(world, data, q, v, base_q=None, base_v=None):
    """(M, h) from MuJoCo in the order [base (x, z, pitch)…, the Mechanism's q…]."""
    world.set_state(data, q, v, base_q, base_v)
    mujoco.mj_forward(world.model, data)
    order = np.concatenate([world.base_dof, world.dof])
    return mass_matrix(world, data)[np.ix_(order, order)], np.array(data.qfrc_bias[order])


def worst_errors(mech: Mechanism, world, rng, states=100, q_range=2.0):
    """Largest relative errors of M and h over ``states`` random states."""
    dyn, data = Dynamics(mech), world.new_data()
    worst_m = worst_h = 0.0
    for _ in range(states):
        q = rng.uniform(-q_range, q_range, mech.nq)
        v = rng.normal(0.0, 2.0, mech.nq)
        m, h = mujoco_terms(world, data, q, v)
        worst_m = max(worst_m, rel_error(m, dyn.mass_matrix(q)))
        worst_h = max(worst_h, rel_error(h, dyn.bias_forces(q, v)))
    return worst_m, worst_h


def _margin(inertia: np.ndarray) -> float:
    """How much a principal moment can change before the inertia stops being physical."""
    eig = np.linalg.eigvalsh(inertia)
    return float(min(eig[0], eig[0] + eig[1] - eig[2]))


def sagittal_mechanism(mech: Mechanism, base_pos) -> Mechanism:
    """exo-rt's own model of the sagittal base: a massless world body, the pelvis on
    prismatic x, prismatic z and revolute y (three coordinates first), the rest unchanged."""
    extra = 3
    parent = np.concatenate([[-1, 0, 1, 2], np.asarray(mech.parent[1:]) + extra])
    q_index = np.concatenate([[-1, 0, 1, 2], np.asarray(mech.q_index[1:]) + extra])
    eye = np.broadcast_to(np.eye(3), (extra, 3, 3))
    origin_xyz = np.concatenate([np.zeros((1, 3)), [base_pos], np.zeros((2, 3)),
                                 mech.origin_xyz[1:]])
    names = tuple(n for n, _, _ in SAGITTAL_JOINTS)
    return Mechanism(
        name=f"{mech.name}_sagittal", source=mech.source,
        body_names=("world", "base_x_body", "base_z_body") + mech.body_names,
        joint_names=names + mech.joint_names,
        tree_joint_names=("",) + names + mech.tree_joint_names[1:],
        joint_types=("prismatic", "prismatic", "revolute") + mech.joint_types,
        parent=parent, q_index=q_index,
        joint_type=np.concatenate([[0, JOINT_PRISMATIC, JOINT_PRISMATIC, JOINT_REVOLUTE],
                                   mech.joint_type[1:]]),
        mimic_multiplier=np.concatenate([np.ones(4), mech.mimic_multiplier[1:]]),
        mimic_offset=np.concatenate([np.zeros(4), mech.mimic_offset[1:]]),
        origin_xyz=origin_xyz,
        origin_rot=np.concatenate([np.eye(3)[None], eye, mech.origin_rot[1:]]),
        axis=np.concatenate([np.zeros((1, 3)), [[1.0, 0, 0], [0, 0, 1.0], [0, 1.0, 0]],
                             mech.axis[1:]]),
        mass=np.concatenate([[0.0, 0.0, 0.0], mech.mass]),
        com=np.concatenate([np.zeros((3, 3)), mech.com]),
        inertia=np.concatenate([np.zeros((3, 3, 3)), mech.inertia]),
        gravity=mech.gravity,
        lower=np.concatenate([np.full(3, -np.inf), mech.lower]),
        upper=np.concatenate([np.full(3, np.inf), mech.upper]),
        velocity_limit=np.concatenate([np.full(3, np.inf), mech.velocity_limit]),
        effort_limit=np.concatenate([np.full(3, np.inf), mech.effort_limit]),
        total_mass=mech.total_mass,
        coordinate_names=names + mech.coordinate_names,
    )


def _box_inertia(rng: np.random.Generator, mass: float) -> np.ndarray:
    """A random box's inertia about its centre (kg·m²) in a random orientation."""
    d = rng.uniform(0.03, 0.4, 3) ** 2
    r = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return r @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) * (mass / 12.0) @ r.T


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_tree_with_rotors(rng: np.random.Generator, n_bodies: int,
                            rotors: bool = True) -> Mechanism:
    """A random tree of ``n_bodies`` links (bodies hang on random earlier ones; revolute and
    prismatic joints, rotated frames, random axes, random boxes; gravity in any direction)
    where, with ``rotors``, about half the revolute joints (the first always) get a harmonic
    drive: a rotor on the joint's parent link, its axis parallel to the joint's (same origin
    rotation, ±axis, random offset), axisymmetric, its COM on its axis, turning k = ±N·q
    (N 30–160). Its axial moment is sized so the folded carrier and output links stay physical
    (a tenth of their smallest margin)."""
    links = {"base": LinkSpec("base", 1.0, rng.normal(0, 0.05, 3), _box_inertia(rng, 1.0))}
    joints = []
    for i in range(1, n_bodies):
        mass = float(rng.uniform(0.2, 5.0))
        links[f"b{i}"] = LinkSpec(f"b{i}", mass, rng.normal(0, 0.15, 3),
                                  _box_inertia(rng, mass))
        kind = "prismatic" if i > 1 and rng.random() < 0.3 else "revolute"
        joints.append(JointSpec(f"j{i}", kind, list(links)[int(rng.integers(0, i))], f"b{i}",
                                rng.normal(0, 0.3, 3), rng.uniform(-np.pi, np.pi, 3),
                                _unit(rng), -3.0, 3.0))
    count = 0
    for j in list(joints) if rotors else ():
        if j.type != "revolute" or (rng.random() < 0.5 and count):
            continue
        ratio = float(rng.uniform(30.0, 160.0))
        u = float(rng.choice([-1.0, 1.0])) * j.axis
        budget = 0.1 * min(_margin(links[j.parent].inertia), _margin(links[j.child].inertia))
        axial = budget / ratio
        transverse = axial * float(rng.uniform(0.5, 2.0))
        inertia = axial * np.outer(u, u) + transverse * (np.eye(3) - np.outer(u, u))
        name = f"{j.name}_rotor"
        links[name] = LinkSpec(name, float(rng.uniform(0.1, 0.5)),
                               u * float(rng.uniform(-0.02, 0.02)), inertia)
        joints.append(JointSpec(f"{name}_joint", "revolute", j.parent, name,
                                rng.normal(0.0, 0.1, 3), j.origin_rpy.copy(), u,
                                mimic=(j.name, float(rng.choice([-1.0, 1.0])) * ratio,
                                       float(rng.uniform(-1.0, 1.0)))))
        count += 1
    gravity = _unit(rng) * 9.81
    return build_mechanism(f"random{n_bodies}", list(links.values()), joints, gravity,
                           "<random tree>")
