"""Every mistake a user can make in a model file gives one clear error: file, line, key, fix.

Each case is a small robot YAML (or URDF) with the offending line marked ``#<``; the test
checks that the message names the file, that line and the key, and that ``exo-rt check``
exits 2 with no traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from exo_rt.errors import ModelError
from exo_rt.model import load_mechanism

GOOD = """\
name: two_link
bodies:
  - name: base
  - name: upper
    mass: 1.0
    com: [0.1, 0, 0]
    inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}
  - name: lower
    mass: 1.0
    com: [0.1, 0, 0]
    inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}
joints:
  - name: hip
    type: revolute
    parent: base
    child: upper
    axis: [0, 1, 0]
  - name: knee
    type: revolute
    parent: upper
    child: lower
    origin: {xyz: [0, 0, -0.4]}
    axis: [0, 1, 0]
"""

# (case id, text with the faulty line marked "#<", key expected in the message, words expected)
YAML_CASES = [
    ("unknown_parent", GOOD.replace("    parent: upper\n", "    parent: uper  #<\n"),
     "joints[1]", ["unknown parent", "did you mean 'upper'"]),
    ("duplicate_body", GOOD.replace("  - name: lower\n", "  - name: upper  #<\n", 1)
     .replace("child: lower", "child: upper"), "bodies[2]", ["defined twice"]),
    ("duplicate_joint", GOOD.replace("  - name: knee\n", "  - name: hip  #<\n"),
     "joints[1]", ["defined twice"]),
    ("cycle", GOOD.replace("    parent: base\n", "    parent: lower  #<\n"),
     "joints[0]", ["cycle"]),
    ("non_unit_axis", GOOD.replace("    axis: [0, 1, 0]\n", "    axis: [0, 2, 0]  #<\n", 1),
     "joints[0]", ["not a unit vector", "normalise"]),
    ("zero_axis", GOOD.replace("    axis: [0, 1, 0]\n", "    axis: [0, 0, 0]  #<\n", 1),
     "joints[0]", ["axis", "zero"]),
    ("negative_mass", GOOD.replace("    mass: 1.0\n", "    mass: -1.0  #<\n", 1),
     "bodies[1]", ["negative"]),
    ("not_psd", GOOD.replace("inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}",
                             "inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01, ixy: 0.5}  #<", 1),
     "bodies[1]", ["not positive semidefinite"]),
    ("triangle", GOOD.replace("inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}",
                              "inertia: {ixx: 0.01, iyy: 0.01, izz: 0.05}  #<", 1),
     "bodies[1]", ["triangle inequality"]),
    ("nan", GOOD.replace("    com: [0.1, 0, 0]\n", "    com: [.nan, 0, 0]  #<\n", 1),
     "bodies[1].com", ["finite"]),
    ("wrong_length", GOOD.replace("    com: [0.1, 0, 0]\n", "    com: [0.1, 0]  #<\n", 1),
     "bodies[1].com", ["expected 3 numbers"]),
    ("not_a_number", GOOD.replace("    mass: 1.0\n", "    mass: heavy  #<\n", 1),
     "bodies[1].mass", ["expected a number"]),
    ("unknown_key", GOOD.replace("    axis: [0, 1, 0]\n", "    axes: [0, 1, 0]  #<\n", 1),
     "joints[0].axes", ["unknown key 'axes'", "did you mean 'axis'"]),
    ("unknown_top_key", GOOD.replace("name: two_link\n", "name: two_link\nbodys: []  #<\n"),
     "bodys", ["unknown key", "did you mean 'bodies'"]),
    ("missing_key", GOOD.replace("    type: revolute\n", "", 1).replace("  - name: hip\n",
                                                                        "  - name: hip  #<\n"),
     "joints[0]", ["no 'type'"]),
    ("yaml_syntax", GOOD.replace("    mass: 1.0\n", "    mass: [1.0  #<\n", 1), "", ["YAML"]),
    ("bad_joint_type", GOOD.replace("    type: revolute\n", "    type: ball  #<\n", 1),
     "joints[0]", ["unknown type 'ball'"]),
    ("transmission_missing_joint", GOOD + textwrap.dedent("""\
        transmissions:
          - joint: ankle  #<
            ratio: 100
            rotor: {mass: 0.3, inertia: {ixx: 1e-5, iyy: 1e-5, izz: 1e-5}}
            motor: {torque_constant: 0.04, rated_current: 3, peak_current: 10}
        """), "transmissions[0].joint", ["missing joint 'ankle'"]),
    ("ratio_below_one", GOOD + textwrap.dedent("""\
        transmissions:
          - joint: knee
            ratio: 0.5  #<
            rotor: {mass: 0.3, inertia: {ixx: 1e-5, iyy: 1e-5, izz: 1e-5}}
            motor: {torque_constant: 0.04, rated_current: 3, peak_current: 10}
        """), "transmissions[0].ratio", ["below 1"]),
    ("loop_unknown_body", GOOD + textwrap.dedent("""\
        loops:
          - name: close
            body_a: lower
            point_a: [0.3, 0, 0]
            body_b: ghost  #<
            point_b: [0, 0, 0]
        """), "loops[0].body_b", ["unknown body 'ghost'"]),
    ("wearer_height", GOOD + textwrap.dedent("""\
        wearer:
          mass: 75
          height: 175  #<
          sex: male
          segments: []
        """), "wearer.height", ["outside", "metres"]),
]


def _line_of_marker(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if "#<" in line)


@pytest.mark.parametrize(("case", "text", "key", "words"), YAML_CASES,
                         ids=[c[0] for c in YAML_CASES])
def test_bad_robot_yaml(tmp_path, case, text, key, words):
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    with pytest.raises(ModelError) as info:
        load_mechanism(path)
    msg = str(info.value)
    assert f"{path}:{_line_of_marker(text)}" in msg, msg
    assert key in msg, msg
    for w in words:
        assert w in msg, msg
    assert " — " in msg, f"no fix hint in: {msg}"


def test_include_cycle(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD + "include:\n  - {file: b.yaml, mount: lower}\n")
    (tmp_path / "b.yaml").write_text(
        "name: b\nbodies:\n  - name: plate\ninclude:\n  - {file: a.yaml, mount: plate}  #<\n")
    with pytest.raises(ModelError) as info:
        load_mechanism(tmp_path / "a.yaml")
    msg = str(info.value)
    assert "include cycle" in msg and "b.yaml:5" in msg and "include[0].file" in msg, msg


URDF_GOOD = """\
<robot name="r">
  <link name="base"/>
  <link name="arm">
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"/></inertial>
  </link>
  <joint name="j" type="revolute">
    <parent link="base"/>
    <child link="arm"/>
    <axis xyz="0 0 1"/>
  </joint>
</robot>
"""

URDF_CASES = [
    ("bad_xml", URDF_GOOD.replace('<child link="arm"/>', '<child link=arm/>  <!--#<-->'),
     ["malformed XML"]),
    ("unknown_child", URDF_GOOD.replace('<child link="arm"/>', '<child link="hand"/> <!--#<-->'),
     ["unknown child link 'hand'"]),
    ("short_axis", URDF_GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1"/> <!--#<-->'),
     ["expected 3 numbers"]),
    ("floating", URDF_GOOD.replace('type="revolute">', 'type="floating"> <!--#<-->'),
     ["not supported"]),
    ("mass_text", URDF_GOOD.replace('<mass value="1"/>', '<mass value="one"/>')
     .replace("<inertial>", "<inertial> <!--#<-->"), ["expected a number"]),
]


@pytest.mark.parametrize(("case", "text", "words"), URDF_CASES, ids=[c[0] for c in URDF_CASES])
def test_bad_urdf(tmp_path, case, text, words):
    path = tmp_path / f"{case}.urdf"
    path.write_text(text)
    with pytest.raises(ModelError) as info:
        load_mechanism(path)
    msg = str(info.value)
    assert f"{path}:{_line_of_marker(text)}" in msg, msg
    for w in words:
        assert w in msg, msg


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "exo_rt", *args], capture_output=True, text=True,
                          timeout=120)


def test_check_reports_a_bad_file_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    text = YAML_CASES[0][1]
    path.write_text(text)
    res = _cli("check", str(path))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert f"{path}:{_line_of_marker(text)}" in res.stderr and "unknown parent" in res.stderr


def test_check_missing_file_and_unknown_suffix(tmp_path):
    res = _cli("check", str(tmp_path / "nope.yaml"))
    assert res.returncode == 2 and "file not found" in res.stderr and "Traceback" not in res.stderr
    res = _cli("check", str(tmp_path / "robot.txt"))
    assert res.returncode == 2 and "unknown model file type" in res.stderr


def test_check_prints_the_model(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    res = _cli("check", str(path))
    assert res.returncode == 0, res.stderr
    assert "coordinates q (2): hip, knee" in res.stdout
    assert "total mass 2.0000 kg" in res.stdout
