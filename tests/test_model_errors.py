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
    ("wearer_identified_com", GOOD + textwrap.dedent("""\
        wearer:
          mass: 75
          height: 1.75
          sex: male
          segments:
            - segment: thigh
              body: upper
              distal: knee
              com_fraction: 1.4  #<
        """), "com_fraction", ["out of range", "0…1"]),
    ("infinite", GOOD.replace("    mass: 1.0\n", "    mass: .inf  #<\n", 1),
     "bodies[1].mass", ["finite"]),
    ("urdf_and_bodies", GOOD.replace("name: two_link\n", "name: two_link\nurdf: a.urdf  #<\n"),
     "urdf", ["both 'urdf' and inline"]),
    ("urdf_not_found", "name: r\nurdf: missing.urdf  #<\n", "urdf", ["'missing.urdf' not found"]),
    ("missing_name", GOOD.replace("name: two_link\nbodies:\n", "bodies:  #<\n"),
     "", ["has no 'name'"]),
    ("inertia_not_a_mapping", GOOD.replace("inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}",
                                           "inertia: [0.01, 0.01, 0.01]  #<", 1),
     "bodies[1].inertia", ["must be a mapping"]),
    ("name_not_text", GOOD.replace("    parent: upper\n", "    parent: [upper]  #<\n"),
     "joints[1].parent", ["expected a name"]),
    ("bodies_not_a_list", GOOD[:GOOD.index("bodies:")] + "bodies: {name: base}  #<\n"
     + GOOD[GOOD.index("joints:"):], "bodies", ["must be a list"]),
    ("nested_unknown_key", GOOD.replace("    origin: {xyz: [0, 0, -0.4]}\n",
                                        "    origin: {xyz: [0, 0, -0.4]}\n"
                                        "    limit: {lowr: -1, upper: 1}  #<\n"),
     "joints[1].limit.lowr", ["unknown key 'lowr'", "did you mean 'lower'"]),
    ("duplicate_key", GOOD.replace("    mass: 1.0\n", "    mass: 1.0\n    mass: 2.0  #<\n", 1),
     "bodies[1].mass", ["appears twice"]),
    ("point_mass_length", GOOD.replace("    mass: 1.0\n", "    point_masses: [[1.0, 0, 0]]  #<\n",
                                       1), "bodies[1].point_masses[0]", ["expected 4 numbers"]),
    ("mimic_unknown_joint", GOOD.replace("    child: lower\n",
                                         "    child: lower\n    mimic: {joint: hp}  #<\n"),
     "joints[1].mimic", ["mimics unknown movable joint 'hp'", "did you mean 'hip'"]),
    ("reversed_limits", GOOD.replace("    child: lower\n",
                                     "    child: lower\n    limit: {lower: 1, upper: -1}  #<\n"),
     "joints[1].lower", ["reversed"]),
    ("continuous_position_limit", GOOD.replace(
        "    type: revolute\n    parent: upper\n",
        "    type: continuous\n    parent: upper\n    limit:\n      upper: 1  #<\n"),
     "joints[1].limit.upper", ["continuous joint has no upper"]),
    ("bad_timestamp", GOOD.replace("    mass: 1.0\n", "    mass: 2020-13-01  #<\n", 1),
     "bodies[1].mass", ["cannot read the value"]),
    ("recursive_alias", GOOD.replace("    com: [0.1, 0, 0]\n", "    com: &c [*c, 0, 0]  #<\n", 1),
     "bodies[1].com", ["alias refers to itself"]),
    ("complex_key", GOOD.replace("    mass: 1.0\n", "    ? [mass]  #<\n    : 1.0\n", 1),
     "bodies[1]", ["key is a list"]),
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


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_robot_yaml(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ModelError, match="the file is empty") as info:
        load_mechanism(path)
    assert f"{path}:1" in str(info.value)


def test_missing_files_are_named(tmp_path):
    for name in ("nope.yaml", "nope.urdf"):
        with pytest.raises(ModelError, match="file not found") as info:
            load_mechanism(tmp_path / name)
        assert str(tmp_path / name) in str(info.value)


def test_deep_nesting_is_a_model_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: x\nbodies: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ModelError, match="nests too deeply") as info:
        load_mechanism(path)
    assert str(path) in str(info.value)


def test_alias_bomb_is_a_model_error(tmp_path):
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelError, match="aliases expand too far"):
        load_mechanism(path)


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
     "", ["malformed XML"]),
    ("unclosed", URDF_GOOD.replace("</joint>\n</robot>\n", "</joint>\n<!--#<-->"),
     "", ["malformed XML"]),
    ("not_robot", URDF_GOOD.replace('<robot name="r">', '<robt name="r"> <!--#<-->')
     .replace("</robot>", "</robt>"), "", ["not <robot>"]),
    ("unknown_child", URDF_GOOD.replace('<child link="arm"/>', '<child link="hand"/> <!--#<-->'),
     "joint[j].child", ["unknown child link 'hand'"]),
    ("unknown_parent", URDF_GOOD.replace('<parent link="base"/>', '<parent link="bse"/> <!--#<-->'),
     "joint[j].parent", ["unknown parent link 'bse'", "did you mean 'base'"]),
    ("cycle", URDF_GOOD.replace('<parent link="base"/>', '<parent link="base"/> <!--#<-->')
     .replace("</robot>", '  <link name="c"/>\n'
              '  <joint name="k" type="fixed"><parent link="arm"/><child link="c"/></joint>\n'
              '  <joint name="m" type="fixed"><parent link="c"/><child link="base"/></joint>\n'
              "</robot>"), "joint[j].parent", ["cycle (arm → base → c → arm)"]),
    ("duplicate_link", URDF_GOOD.replace('<link name="base"/>',
                                         '<link name="base"/>\n  <link name="arm"/>'),
     "link[arm].name", ["defined twice"]),
    ("short_axis", URDF_GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1"/> <!--#<-->'),
     "joint[j].axis", ["expected 3 numbers"]),
    ("non_unit_axis", URDF_GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 2"/> <!--#<-->'),
     "joint[j].axis", ["not a unit vector"]),
    ("zero_axis", URDF_GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/> <!--#<-->'),
     "joint[j].axis", ["zero"]),
    ("nan_origin", URDF_GOOD.replace('<axis xyz="0 0 1"/>',
                                     '<axis xyz="0 0 1"/><origin xyz="0 nan 0"/> <!--#<-->'),
     "joint[j].origin.xyz", ["finite"]),
    ("unknown_type", URDF_GOOD.replace('type="revolute">', 'type="hinge"> <!--#<-->'),
     "joint[j].type", ["unsupported type 'hinge'"]),
    ("no_type", URDF_GOOD.replace(' type="revolute">', '> <!--#<-->'),
     "joint[j]", ["no 'type' attribute"]),
    ("no_parent", URDF_GOOD.replace('    <parent link="base"/>\n', "")
     .replace('type="revolute">', 'type="revolute"> <!--#<-->'), "joint[j]", ["no <parent>"]),
    ("no_link_name", URDF_GOOD.replace('<link name="base"/>', '<link/> <!--#<-->'),
     "link", ["no 'name' attribute"]),
    ("mass_text", URDF_GOOD.replace('<mass value="1"/>', '\n<mass value="one"/> <!--#<-->'),
     "link[arm].mass", ["expected a number"]),
    ("negative_mass", URDF_GOOD.replace('<mass value="1"/>', '\n<mass value="-1"/> <!--#<-->'),
     "link[arm].mass", ["negative"]),
]


# Physically implausible but finite: loads as written with one warning (file:line, key, fix);
# strict loading refuses it with the same message.
YAML_WARNINGS = [
    ("not_psd", GOOD.replace("inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}",
                             "inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01, ixy: 0.5}  #<", 1),
     "bodies[1]", ["not positive semidefinite"]),
    ("triangle", GOOD.replace("inertia: {ixx: 0.01, iyy: 0.01, izz: 0.01}",
                              "inertia: {ixx: 0.01, iyy: 0.01, izz: 0.05}  #<", 1),
     "bodies[1]", ["triangle inequality"]),
    ("zero_mass", GOOD.replace("    mass: 1.0\n", "    mass: 0.0  #<\n", 1),
     "bodies[1]", ["inertia but zero mass"]),
]
URDF_FLOATING = URDF_GOOD.replace('<link name="base"/>', """<link name="world"/>
  <link name="base"/>
  <joint name="free" type="floating"> <!--#<-->
    <parent link="world"/><child link="base"/>
  </joint>""")
URDF_WARNINGS = [
    ("not_psd", URDF_GOOD.replace('izz="0.01"/>', 'izz="0.01" ixy="0.5"/> <!--#<-->'),
     "link[arm].inertia", ["not positive semidefinite"]),
    ("triangle", URDF_GOOD.replace('izz="0.01"/>', 'izz="0.05"/> <!--#<-->'),
     "link[arm].inertia", ["triangle inequality"]),
    ("zero_mass", URDF_GOOD.replace('<mass value="1"/>', '\n<mass value="0"/> <!--#<-->'),
     "link[arm].mass", ["inertia but zero mass", "give the link's mass"]),
    ("floating", URDF_FLOATING, "joint[free].type",
     ["is floating: loaded as a fixed joint", "fixes the base"]),
    ("planar", URDF_FLOATING.replace('"floating"', '"planar"'), "joint[free].type",
     ["is planar: loaded as a fixed joint"]),
    ("mimic_unknown", URDF_GOOD.replace('<axis xyz="0 0 1"/>',
                                        '<axis xyz="0 0 1"/>\n    <mimic joint="k"/> <!--#<-->'),
     "joint[j].mimic", ["mimics unknown movable joint 'k'", "independent joint"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("suffix", "case", "text", "key", "words"),
                         [(".yaml", *c) for c in YAML_WARNINGS]
                         + [(".urdf", *c) for c in URDF_WARNINGS],
                         ids=[f"yaml-{c[0]}" for c in YAML_WARNINGS]
                         + [f"urdf-{c[0]}" for c in URDF_WARNINGS])
def test_implausible_loads_with_a_warning_and_strict_refuses(tmp_path, suffix, case, text, key,
                                                            words):
    path = tmp_path / f"{case}{suffix}"
    path.write_text(text)
    mech = load_mechanism(path)
    assert len(mech.warnings) == 1, mech.warnings
    msg = str(mech.warnings[0])
    assert f"{path}:{_line_of_marker(text)}: {key}" in msg, msg
    for w in words:
        assert w in msg, msg
    assert " — " in msg, f"no fix hint in: {msg}"
    with pytest.raises(ModelError) as info:
        load_mechanism(path, strict=True)
    assert f"{path}:{_line_of_marker(text)}: {key}" in str(info.value)
    assert "(strict)" in str(info.value)
    res = _cli("check", str(path))
    assert res.returncode == 0 and "1 warning" in res.stdout and msg in res.stdout, res.stdout
    res = _cli("check", "--strict", str(path))
    assert res.returncode == 2 and "(strict)" in res.stderr and "Traceback" not in res.stderr


def test_rounding_level_and_fixed_base_inertias_load_silently(tmp_path):
    """Violations at rounding level (4.5e-8 of the tensor) pass without a warning; the base's
    inertia, and that of links fixed to it, is not checked: it enters no dynamics."""
    text = URDF_GOOD.replace('izz="0.01"/>', 'izz="0.0200000009"/>').replace(
        '<link name="base"/>', '<link name="base"><inertial><mass value="1"/>'
        '<inertia ixx="1e-22" iyy="1e-22" izz="3e-6" ixy="-2e-22"/></inertial></link>\n'
        '  <link name="plate"><inertial><mass value="0"/><inertia ixx="1" iyy="-1" izz="1"/>'
        '</inertial></link>\n  <joint name="bolt" type="fixed"><parent link="base"/>'
        '<child link="plate"/></joint>')
    path = tmp_path / "fine.urdf"
    path.write_text(text)
    mech = load_mechanism(path, strict=True)
    assert mech.warnings == () and mech.nq == 1
    path.write_text(text.replace('izz="0.0200000009"', 'izz="0.0200001"'))  # 5e-6: CAD-level
    assert ["triangle inequality" in str(w) for w in load_mechanism(path).warnings] == [True]
    path.write_text(text.replace('<parent link="base"/><child link="plate"/>',
                                 '<parent link="arm"/><child link="plate"/>'))
    found = [str(w) for w in load_mechanism(path).warnings]  # the plate now moves with the arm
    assert len(found) == 2 and "link[plate].inertia" in found[0] and "zero mass" in found[1]


def _urdf_marker_line(text: str) -> int:
    if "#<" in text:
        return _line_of_marker(text)
    # duplicate_link: the second definition of the name
    return [i for i, ln in enumerate(text.splitlines(), 1) if 'name="arm"' in ln][1]


@pytest.mark.parametrize(("case", "text", "key", "words"), URDF_CASES,
                         ids=[c[0] for c in URDF_CASES])
def test_bad_urdf(tmp_path, case, text, key, words):
    path = tmp_path / f"{case}.urdf"
    path.write_text(text)
    with pytest.raises(ModelError) as info:
        load_mechanism(path)
    msg = str(info.value)
    assert f"{path}:{_urdf_marker_line(text)}: {key}" in msg, msg
    for w in words:
        assert w in msg, msg
    assert " — " in msg, f"no fix hint in: {msg}"


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


def test_check_debug_shows_the_traceback_and_help_lists_check(tmp_path):
    path = tmp_path / "bad.urdf"
    path.write_text(URDF_CASES[0][1])
    res = _cli("--debug", "check", str(path))
    assert res.returncode == 2 and "Traceback" in res.stderr and "malformed XML" in res.stderr
    res = _cli("--help")
    assert res.returncode == 0 and "check" in res.stdout
