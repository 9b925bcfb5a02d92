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
    """DESIGN §3.3: a URDF <mimic> rotor and a robot-YAML transmission are one Mechanism."""
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
