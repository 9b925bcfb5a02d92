"""The world's MuJoCo model is built right (issue 44, its first "Must show"; docs/world.md).

MuJoCo's joint-space mass matrix (``mj_fullM`` after ``mj_forward``) and bias forces
(``qfrc_bias``: Coriolis, centrifugal and gravity) equal exo-rt's semirecursive dynamics —
itself checked against Pinocchio (``tests/test_dynamics_pinocchio.py``) — to 1e-9 relative
(‖error‖∞ ≤ 1e-9·‖exo-rt's‖∞, no absolute floor), at 100 random states each:

- ``exo_leg`` and ``exo_2leg`` with their wearers and their harmonic drives' rotors (folded
  into MuJoCo as armature plus a share of axial inertia: :mod:`exo_rt.sim.world.rotors`);
- 10 random trees of ``tests/treegen.py`` (revolute, continuous, prismatic and fixed joints,
  rotated frames, random axes, gravity in any direction) without ``<mimic>``: a general mimic
  linkage has no MuJoCo equivalent and the builder refuses it (tested below);
- 10 random trees with random harmonic-drive rotors
  (:func:`exo_rt.sim.world.check.random_tree_with_rotors`; 3-D axes: the rotor's coupling to
  its carrier's rotation and its gyroscopic terms);
- the sagittal floating base against exo-rt's own model of the same base (the pelvis on two
  prismatic joints and a revolute one, as three extra coordinates).

That the rotors' cross coupling matters is shown too: armature alone misses it.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.errors import ModelError
from exo_rt.model import load_mechanism, load_urdf
from exo_rt.model.mechanism import Mechanism
from exo_rt.sim.world import build_world
from exo_rt.sim.world.check import (
    mujoco_terms,
    random_tree_with_rotors,
    rel_error,
    sagittal_mechanism,
    worst_errors,
)
from tests.treegen import random_tree

REL = 1e-9
STATES = 100
ROBOTS = ("configs/robots/exo_leg.yaml", "configs/robots/exo_2leg.yaml")


# ----------------------------------------------------------------------- shipped robots
@pytest.mark.parametrize("path", ROBOTS)
def test_shipped_robot_matches_exo_rt(path):
    """The shipped exoskeletons with their wearer and rotors, base fixed: M and h to 1e-9."""
    mech = load_mechanism(path)
    world = build_world(mech)
    assert len(world.rigid.rotors) == len(mech.transmissions) > 0
    worst_m, worst_h = worst_errors(mech, world, np.random.default_rng(44))
    assert worst_m <= REL, f"mass matrix: {worst_m:.3e}"
    assert worst_h <= REL, f"bias forces: {worst_h:.3e}"


def test_world_carries_the_wearer():
    """The wearer's segments are in the world's bodies: the moving mass of ``exo_leg`` on its
    stand is the thigh, the shank and the knee's rotor (13.82 + 6.675 + 0.35 kg; the hip's
    rotor rides on the welded pelvis), and without the wearer de Leva's thigh, shank and foot
    of a 75 kg man (75 × (0.1416 + 0.0433 + 0.0137) = 14.895 kg) less."""
    with_wearer = build_world(load_mechanism(ROBOTS[0]))
    alone = build_world(load_mechanism(ROBOTS[0], wearer=False))
    moving = [with_wearer.model.body_mass.sum(), alone.model.body_mass.sum()]
    assert moving[0] == pytest.approx(13.82 + 6.675 + 0.35, rel=1e-12)
    assert moving[0] - moving[1] == pytest.approx(75.0 * (0.1416 + 0.0433 + 0.0137), rel=1e-9)


def test_armature_alone_misses_the_rotor_coupling():
    """Without the axial share on the carrier and the output link (armature N²·I_a only, the
    usual way), the knee's rotor loses its coupling to the hip: M[hip, knee] is off by
    k·I_a = −100 × 3.74e-5 kg·m² — 3.74e-3 kg·m², far above 1e-9 — so the test can fail."""
    mech = load_mechanism(ROBOTS[0])
    world = build_world(mech)
    spec = world.spec.copy()
    for rotor in world.rigid.rotors:
        joint = spec.joint(mech.joint_names[rotor.joint])
        joint.armature = rotor.multiplier ** 2 * rotor.axial
    # the carrier and output links back to the rotor rigid on its carrier, no axial share
    from exo_rt.sim.world.spec import principal
    for rotor in world.rigid.rotors:
        for body, sign in ((rotor.carrier, 1.0), (rotor.output, -1.0)):
            if body == 0:
                continue
            u = mech.axis[rotor.output]
            inertia = world.rigid.inertia[body] + sign * rotor.link_share * rotor.axial * \
                np.outer(u, u)
            b = spec.body(mech.body_names[body])
            b.inertia, b.iquat = principal(inertia)
    model = spec.compile()
    data = mujoco.MjData(model)
    q = np.array([0.3, 0.8])
    data.qpos[:] = q
    mujoco.mj_forward(model, data)
    m = np.zeros((2, 2))
    mujoco.mj_fullM(model, data, m)
    ref = Dynamics(mech).mass_matrix(q)
    assert abs(m[0, 1] - ref[0, 1]) == pytest.approx(100 * 3.74e-5, rel=1e-6)


# ----------------------------------------------------------------------- random trees
def _random_tree(seed: int) -> Mechanism:
    rng = np.random.default_rng(1000 + seed)
    text, _ = random_tree(rng, int(rng.integers(2, 21)), prismatic=True, fixed=True)
    gravity = rng.normal(size=3)
    return load_urdf(text).with_gravity(9.81 * gravity / np.linalg.norm(gravity))


@pytest.mark.parametrize("seed", range(10))
def test_random_tree_matches_exo_rt(seed):
    """Random trees (no mimic joints), base fixed: M and h to 1e-9 at 100 states."""
    mech = _random_tree(seed)
    world = build_world(mech)
    assert world.model.nv == mech.nq
    worst_m, worst_h = worst_errors(mech, world, np.random.default_rng(seed))
    assert worst_m <= REL, f"mass matrix: {worst_m:.3e}"
    assert worst_h <= REL, f"bias forces: {worst_h:.3e}"


@pytest.mark.parametrize("seed", range(10))
def test_random_tree_with_rotors_matches_exo_rt(seed):
    """Random 3-D trees with harmonic-drive rotors, base fixed: M and h to 1e-9."""
    rng = np.random.default_rng(2000 + seed)
    mech = random_tree_with_rotors(rng, int(rng.integers(3, 13)))
    world = build_world(mech)
    assert world.rigid.rotors
    worst_m, worst_h = worst_errors(mech, world, np.random.default_rng(seed))
    assert worst_m <= REL, f"mass matrix: {worst_m:.3e}"
    assert worst_h <= REL, f"bias forces: {worst_h:.3e}"


def test_mimic_linkage_is_refused():
    """A URDF ``<mimic>`` that is not a rotor (a mimic body carrying its own links, or off
    the output joint's parent) has no MuJoCo equivalent here: a ModelError says so."""
    refused = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        text, specs = random_tree(rng, 8, prismatic=True, fixed=False, mimic=True)
        if not any("mimic" in j for j in specs["joints"]):
            continue
        with pytest.raises(ModelError, match="mimic"):
            build_world(load_urdf(text))
        refused += 1
    assert refused >= 5


# ----------------------------------------------------------------------- sagittal base
@pytest.mark.parametrize("path", ROBOTS)
def test_sagittal_base_matches_exo_rt(path):
    """The floating sagittal base (x, z, pitch) with the legs and rotors: MuJoCo's M and h
    equal exo-rt's on the same base written as three coordinates, to 1e-9 at 100 states —
    the hip rotors' coupling to the pelvis's pitch included."""
    mech = load_mechanism(path)
    base_pos = np.array([0.1, 0.0, 0.95])
    world = build_world(mech, base="sagittal", base_pos=base_pos)
    ref = sagittal_mechanism(mech, base_pos)
    dyn, data = Dynamics(ref), world.new_data()
    rng = np.random.default_rng(45)
    worst_m = worst_h = 0.0
    for _ in range(STATES):
        z = rng.uniform(-2.0, 2.0, ref.nq)
        zd = rng.normal(0.0, 2.0, ref.nq)
        m, h = mujoco_terms(world, data, z[3:], zd[3:], z[:3], zd[:3])
        worst_m = max(worst_m, rel_error(m, dyn.mass_matrix(z)))
        worst_h = max(worst_h, rel_error(h, dyn.bias_forces(z, zd)))
    assert worst_m <= REL, f"mass matrix: {worst_m:.3e}"
    assert worst_h <= REL, f"bias forces: {worst_h:.3e}"
    # the whole mass moves with the base: M[x, x] = M[z, z] = total mass
    assert m[0, 0] == pytest.approx(mech.total_mass, rel=1e-12)


def test_joint_frames_and_limits():
    """Each MuJoCo joint has the Mechanism's axis, range and type, and the bodies' world
    positions at a random q are exo-rt's frame origins (1e-12 m)."""
    mech = load_mechanism(ROBOTS[1])
    world = build_world(mech)
    model = world.model
    for i, name in enumerate(mech.joint_names):
        j = model.joint(name)
        assert j.type[0] == mujoco.mjtJoint.mjJNT_HINGE
        assert j.range.tolist() == [mech.lower[i], mech.upper[i]]
        assert j.limited[0] == 1
    q = np.random.default_rng(3).uniform(-1, 1, mech.nq)
    data = world.new_data()
    world.set_state(data, q, np.zeros(mech.nq))
    mujoco.mj_kinematics(model, data)
    frames = Dynamics(mech).frame_positions(q)
    for b, body_id in world.bodies.items():
        assert np.max(np.abs(data.xpos[body_id] - frames[b])) < 1e-12


def test_unknown_base_is_refused():
    with pytest.raises(ValueError, match="base"):
        build_world(load_mechanism(ROBOTS[0]), base="free")
