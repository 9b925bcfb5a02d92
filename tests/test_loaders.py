"""Loader semantics checked by hand: lumping, point masses, inertial frames, settings."""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.model import load_mechanism
from exo_rt.model.topology import rpy_matrix

URDF = """\
<robot name="lump">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0.1 0 0" rpy="0 0 0.5"/><mass value="2"/>
      <inertia ixx="0.01" iyy="0.02" izz="0.03" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="tool">
    <inertial><origin xyz="0 0 0"/><mass value="1"/>
      <inertia ixx="0.001" iyy="0.001" izz="0.001"/></inertial>
  </link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="10" velocity="2"/>
  </joint>
  <joint name="flange" type="fixed">
    <parent link="arm"/><child link="tool"/><origin xyz="0.4 0 0" rpy="0 0 0"/>
  </joint>
</robot>
"""


def test_fixed_joint_lumps_the_child_into_the_parent(tmp_path):
    path = tmp_path / "lump.urdf"
    path.write_text(URDF)
    mech = load_mechanism(path)
    assert mech.body_names == ("base", "arm")
    m1, c1 = 2.0, np.array([0.1, 0, 0])
    r = rpy_matrix([0, 0, 0.5])
    i1 = r @ np.diag([0.01, 0.02, 0.03]) @ r.T  # the inertial origin's rpy rotates the tensor
    m2, c2, i2 = 1.0, np.array([0.4, 0, 0]), np.eye(3) * 0.001
    c = (m1 * c1 + m2 * c2) / 3.0
    expected = sum(
        i + m * ((cc - c) @ (cc - c) * np.eye(3) - np.outer(cc - c, cc - c))
        for m, cc, i in ((m1, c1, i1), (m2, c2, i2))
    )
    assert mech.mass[1] == pytest.approx(3.0)
    np.testing.assert_allclose(mech.com[1], c, atol=1e-15)
    np.testing.assert_allclose(mech.inertia[1], expected, atol=1e-15)
    assert mech.lower[0] == -1 and mech.upper[0] == 1 and mech.effort_limit[0] == 10


def test_point_masses_give_mass_com_and_inertia(tmp_path):
    path = tmp_path / "pm.yaml"
    path.write_text("""\
name: pm
bodies:
  - name: base
  - name: rod
    point_masses: [[1.0, 0, 0, 0], [2.0, 0.5, 0, 0], [1.0, 1.0, 0, 0]]
joints:
  - {name: j, type: revolute, parent: base, child: rod, axis: [0, 0, 1]}
""")
    mech = load_mechanism(path)
    assert mech.mass[1] == pytest.approx(4.0)
    np.testing.assert_allclose(mech.com[1], [0.5, 0, 0])
    # about the COM: 1·0.5² + 2·0 + 1·0.5² = 0.5 about y and z, 0 about the rod's axis
    np.testing.assert_allclose(mech.inertia[1], np.diag([0.0, 0.5, 0.5]), atol=1e-15)


def test_settings_fix_a_telescopic_joint(tmp_path):
    path = tmp_path / "tele.yaml"
    path.write_text("""\
name: tele
bodies:
  - name: base
  - name: upper
    mass: 1
    inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}
  - name: slider
    mass: 0.5
    inertia: {ixx: 0.001, iyy: 0.001, izz: 0.001}
  - name: lower
    mass: 1
    inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}
joints:
  - {name: hip, type: revolute, parent: base, child: upper, axis: [0, 1, 0]}
  - name: thigh_length
    type: prismatic
    parent: upper
    child: slider
    origin: {xyz: [0, 0, -0.35]}
    axis: [0, 0, -1]
    limit: {lower: 0.0, upper: 0.08}
  - {name: knee, type: revolute, parent: slider, child: lower, axis: [0, 1, 0]}
settings: {thigh_length: 0.05}
""")
    mech = load_mechanism(path)
    assert mech.joint_names == ("hip", "knee")
    from exo_rt.dynamics import Dynamics

    frames = Dynamics(mech).frame_positions(np.zeros(2))
    np.testing.assert_allclose(frames[mech.body_names.index("lower")], [0, 0, -0.40], atol=1e-15)


def test_urdf_mimic_and_yaml_transmission_give_the_same_mechanism(tmp_path):
    """A URDF <mimic> rotor and a robot-YAML transmission are one Mechanism."""
    (tmp_path / "leg.urdf").write_text("""\
<robot name="leg">
  <link name="thigh"><inertial><mass value="3"/><inertia ixx="0.05" iyy="0.05" izz="0.01"/>
  </inertial></link>
  <link name="shank"><inertial><origin xyz="0 0 -0.2"/><mass value="2"/>
    <inertia ixx="0.03" iyy="0.03" izz="0.005"/></inertial></link>
  <link name="knee_rotor"><inertial><mass value="0.3"/>
    <inertia ixx="2e-5" iyy="3e-5" izz="2e-5"/></inertial></link>
  <joint name="knee" type="revolute"><parent link="thigh"/><child link="shank"/>
    <origin xyz="0 0 -0.4"/><axis xyz="0 1 0"/></joint>
  <joint name="knee_rotor_joint" type="continuous"><parent link="thigh"/>
    <child link="knee_rotor"/><origin xyz="0 0.08 -0.4"/><axis xyz="0 1 0"/>
    <mimic joint="knee" multiplier="-100" offset="0"/></joint>
</robot>
""")
    motor = "motor: {torque_constant: 0.04, rated_current: 3, peak_current: 10}"
    (tmp_path / "a.yaml").write_text(f"""\
name: leg
urdf: leg.urdf
transmissions:
  - {{joint: knee, ratio: 100, rotor_joint: knee_rotor_joint, {motor}}}
""")
    (tmp_path / "b.yaml").write_text(f"""\
name: leg
bodies:
  - name: thigh
    mass: 3
    inertia: {{ixx: 0.05, iyy: 0.05, izz: 0.01}}
  - name: shank
    mass: 2
    com: [0, 0, -0.2]
    inertia: {{ixx: 0.03, iyy: 0.03, izz: 0.005}}
joints:
  - {{name: knee, type: revolute, parent: thigh, child: shank, origin: {{xyz: [0, 0, -0.4]}},
     axis: [0, 1, 0]}}
transmissions:
  - joint: knee
    ratio: 100
    rotor: {{mass: 0.3, inertia: {{ixx: 2e-5, iyy: 3e-5, izz: 2e-5}},
            origin: {{xyz: [0, 0.08, -0.4]}}, axis: [0, 1, 0]}}
    {motor}
""")
    a = load_mechanism(tmp_path / "a.yaml")
    b = load_mechanism(tmp_path / "b.yaml")
    np.testing.assert_allclose(a.packed, b.packed, atol=0)
    assert a.transmissions[0].multiplier == b.transmissions[0].multiplier == -100


def test_inertial_origin_rpy_rotates_the_inertia(tmp_path):
    """URDF <inertial><origin rpy>: I_link = R I Rᵀ. A quarter turn about z swaps ixx and iyy."""
    path = tmp_path / "rot.urdf"
    path.write_text("""\
<robot name="rot">
  <link name="base"/>
  <link name="arm"><inertial><origin xyz="0.1 0.2 0.3" rpy="0 0 1.5707963267948966"/>
    <mass value="2"/><inertia ixx="0.01" iyy="0.02" izz="0.03" ixy="0.001"/></inertial></link>
  <joint name="j" type="continuous"><parent link="base"/><child link="arm"/></joint>
</robot>
""")
    mech = load_mechanism(path)
    np.testing.assert_allclose(mech.com[1], [0.1, 0.2, 0.3])
    # R = Rz(90°) maps x → y, y → −x: I' = [[iyy, −ixy, 0], [−ixy, ixx, 0], [0, 0, izz]]
    expected = [[0.02, -0.001, 0], [-0.001, 0.01, 0], [0, 0, 0.03]]
    np.testing.assert_allclose(mech.inertia[1], expected, atol=1e-15)
    assert mech.joint_types == ("continuous",)
    assert mech.lower[0] == -np.inf and mech.upper[0] == np.inf


def test_rotated_fixed_joint_lumps_by_hand(tmp_path):
    """A child on a fixed joint turned 90° about z: its COM and inertia turn with it."""
    path = tmp_path / "lump.yaml"
    path.write_text("""\
name: lump
bodies:
  - name: base
  - name: upper
    mass: 1.0
    com: [0.2, 0, 0]
    inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}
  - name: bracket
    mass: 3.0
    com: [0.1, 0, 0]
    inertia: {ixx: 0.001, iyy: 0.002, izz: 0.003}
joints:
  - {name: shoulder, type: revolute, parent: base, child: upper, axis: [0, 0, 1]}
  - name: mount
    type: fixed
    parent: upper
    child: bracket
    origin: {xyz: [0.4, 0, 0], rpy: [0, 0, 1.5707963267948966]}
""")
    mech = load_mechanism(path)
    assert mech.body_names == ("base", "upper") and mech.joint_names == ("shoulder",)
    # bracket COM in upper's frame: [0.4, 0, 0] + Rz(90°)·[0.1, 0, 0] = [0.4, 0.1, 0]
    # total COM: (1·[0.2, 0, 0] + 3·[0.4, 0.1, 0]) / 4 = [0.35, 0.075, 0]
    np.testing.assert_allclose(mech.com[1], [0.35, 0.075, 0], atol=1e-15)
    assert mech.mass[1] == pytest.approx(4.0)
    d1 = np.array([0.2, 0, 0]) - [0.35, 0.075, 0]  # = [−0.15, −0.075, 0]
    d2 = np.array([0.4, 0.1, 0]) - [0.35, 0.075, 0]  # = [0.05, 0.025, 0]
    steiner = sum(m * (d @ d * np.eye(3) - np.outer(d, d)) for m, d in ((1.0, d1), (3.0, d2)))
    own = np.eye(3) * 0.01 + np.diag([0.002, 0.001, 0.003])  # the bracket's ixx and iyy swap
    np.testing.assert_allclose(mech.inertia[1], own + steiner, atol=1e-15)
    # the off-diagonal term by hand: −(1·(−0.15)(−0.075) + 3·0.05·0.025) = −0.015
    assert mech.inertia[1][0, 1] == pytest.approx(-0.015, abs=1e-15)


def test_point_masses_add_to_the_rigid_part(tmp_path):
    path = tmp_path / "pm.yaml"
    path.write_text("""\
name: pm
bodies:
  - name: base
  - name: link
    mass: 2.0
    com: [0.0, 0.0, 0.0]
    inertia: {ixx: 0.1, iyy: 0.2, izz: 0.3}
    point_masses: [[2.0, 0, 0, 0.5]]
joints:
  - {name: j, type: prismatic, parent: base, child: link, axis: [0, 0, 1]}
""")
    mech = load_mechanism(path)
    assert mech.mass[1] == pytest.approx(4.0)
    np.testing.assert_allclose(mech.com[1], [0, 0, 0.25])
    # each mass is 0.25 m from the COM along z: + 2·(2·0.25²) = 0.25 about x and y
    np.testing.assert_allclose(mech.inertia[1], np.diag([0.35, 0.45, 0.3]), atol=1e-15)


ROUND_TRIP_URDF = """\
<robot name="rt">
  <link name="pelvis"><inertial><origin xyz="0 0 0.05"/><mass value="5"/>
    <inertia ixx="0.05" iyy="0.04" izz="0.03"/></inertial></link>
  <link name="thigh"><inertial><origin xyz="0 0 -0.2" rpy="0.1 0.2 0.3"/><mass value="3"/>
    <inertia ixx="0.06" iyy="0.05" izz="0.02" ixy="0.001" ixz="-0.002" iyz="0.003"/>
  </inertial></link>
  <link name="shank"><inertial><origin xyz="0 0 -0.18"/><mass value="2"/>
    <inertia ixx="0.03" iyy="0.03" izz="0.004"/></inertial></link>
  <link name="slider"><inertial><mass value="0.5"/>
    <inertia ixx="0.001" iyy="0.001" izz="0.001"/></inertial></link>
  <link name="plate"><inertial><origin xyz="0.05 0 0"/><mass value="0.4"/>
    <inertia ixx="0.0005" iyy="0.0006" izz="0.0007"/></inertial></link>
  <link name="cam"><inertial><mass value="0.1"/>
    <inertia ixx="1e-5" iyy="1e-5" izz="1e-5"/></inertial></link>
  <joint name="knee" type="revolute"><parent link="thigh"/><child link="shank"/>
    <origin xyz="0 0 -0.43" rpy="0 0.1 0"/><axis xyz="0 1 0"/>
    <limit lower="-0.05" upper="2.1" velocity="8" effort="60"/></joint>
  <joint name="hip" type="revolute"><parent link="pelvis"/><child link="thigh"/>
    <origin xyz="0 -0.1 0" rpy="0.3 -0.2 0.1"/><axis xyz="0 0.6 0.8"/>
    <limit lower="-0.5" upper="1.5" velocity="6" effort="80"/></joint>
  <joint name="slide" type="prismatic"><parent link="pelvis"/><child link="slider"/>
    <axis xyz="0 0 1"/><limit lower="0" upper="0.1" velocity="1" effort="200"/></joint>
  <joint name="mount" type="fixed"><parent link="shank"/><child link="plate"/>
    <origin xyz="0 0.02 -0.3" rpy="1.0 0 0.5"/></joint>
  <joint name="pan" type="continuous"><parent link="plate"/><child link="cam"/>
    <axis xyz="1 0 0"/><limit velocity="3" effort="1"/>
    <mimic joint="hip" multiplier="-2" offset="0.1"/></joint>
</robot>
"""

ROUND_TRIP_YAML = """\
name: rt
gravity: [0, 0, -9.81]
bodies:
  - {name: pelvis, mass: 5, com: [0, 0, 0.05], inertia: {ixx: 0.05, iyy: 0.04, izz: 0.03}}
  - {name: thigh, mass: 3, com: [0, 0, -0.2], inertia: {ixx: T0, iyy: T1, izz: T2, ixy: T3,
     ixz: T4, iyz: T5}}
  - {name: shank, mass: 2, com: [0, 0, -0.18], inertia: {ixx: 0.03, iyy: 0.03, izz: 0.004}}
  - {name: slider, mass: 0.5, inertia: {ixx: 0.001, iyy: 0.001, izz: 0.001}}
  - {name: plate, mass: 0.4, com: [0.05, 0, 0], inertia: {ixx: 0.0005, iyy: 0.0006, izz: 0.0007}}
  - {name: cam, mass: 0.1, inertia: {ixx: 1e-5, iyy: 1e-5, izz: 1e-5}}
joints:
  - name: knee
    type: revolute
    parent: thigh
    child: shank
    origin: {xyz: [0, 0, -0.43], rpy: [0, 0.1, 0]}
    axis: [0, 1, 0]
    limit: {lower: -0.05, upper: 2.1, velocity: 8, effort: 60}
  - name: hip
    type: revolute
    parent: pelvis
    child: thigh
    origin: {xyz: [0, -0.1, 0], rpy: [0.3, -0.2, 0.1]}
    axis: [0, 0.6, 0.8]
    limit: {lower: -0.5, upper: 1.5, velocity: 6, effort: 80}
  - {name: slide, type: prismatic, parent: pelvis, child: slider, axis: [0, 0, 1],
     limit: {lower: 0, upper: 0.1, velocity: 1, effort: 200}}
  - {name: mount, type: fixed, parent: shank, child: plate,
     origin: {xyz: [0, 0.02, -0.3], rpy: [1.0, 0, 0.5]}}
  - {name: pan, type: continuous, parent: plate, child: cam, axis: [1, 0, 0],
     limit: {velocity: 3, effort: 1}, mimic: {joint: hip, multiplier: -2, offset: 0.1}}
"""


def test_urdf_and_equivalent_yaml_give_equal_arrays(tmp_path):
    """One tree in both formats (knee listed before its parent hip, a rotated inertial frame,
    a fixed joint, a prismatic joint, a continuous mimic joint): equal Mechanism arrays."""
    r = rpy_matrix([0.1, 0.2, 0.3])
    thigh = r @ np.array([[0.06, 0.001, -0.002], [0.001, 0.05, 0.003],
                          [-0.002, 0.003, 0.02]]) @ r.T  # the YAML has no inertial frame
    text = ROUND_TRIP_YAML
    for k, (a, b) in enumerate([(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)]):
        text = text.replace(f"T{k}", repr(float(thigh[a, b])))
    (tmp_path / "rt.urdf").write_text(ROUND_TRIP_URDF)
    (tmp_path / "rt.yaml").write_text(text)
    a = load_mechanism(tmp_path / "rt.urdf")
    b = load_mechanism(tmp_path / "rt.yaml")
    assert a.joint_names == b.joint_names == ("knee", "hip", "slide")
    assert a.body_names == b.body_names and a.n_bodies == 5  # plate lumped into shank
    np.testing.assert_allclose(a.packed, b.packed, rtol=1e-15, atol=1e-15)
    for lim in ("lower", "upper", "velocity_limit", "effort_limit"):
        np.testing.assert_array_equal(getattr(a, lim), getattr(b, lim))
    np.testing.assert_array_equal(a.lower, [-0.05, -0.5, 0])
    assert a.total_mass == b.total_mass == pytest.approx(11.0)
