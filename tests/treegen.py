"""Random kinematic trees written as URDF and as robot YAML (for cross-checks and fuzzing).

Bodies are attached to random earlier bodies, so branches are listed out of depth-first order;
joint frames are rotated; axes are random unit vectors; inertias are those of random boxes
(positive definite, triangle inequality satisfied) in a random orientation.
"""

from __future__ import annotations

import numpy as np


def _box_inertia(rng: np.random.Generator, mass: float) -> np.ndarray:
    d = rng.uniform(0.02, 0.4, 3) ** 2
    r = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return r @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) * mass / 12 @ r.T


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_tree_specs(rng: np.random.Generator, n_bodies: int, *, prismatic: bool = True,
                      fixed: bool = True) -> dict:
    """A random tree as plain data: links (name, mass, com, inertia) and joints."""
    links = [{"name": "base", "mass": 1.0, "com": rng.normal(0, 0.05, 3),
              "inertia": _box_inertia(rng, 1.0)}]
    joints = []
    for i in range(1, n_bodies):
        mass = float(rng.uniform(0.2, 5.0))
        links.append({"name": f"b{i}", "mass": mass, "com": rng.normal(0, 0.15, 3),
                      "inertia": _box_inertia(rng, mass)})
        r = rng.random()
        kind = "revolute"
        if fixed and r < 0.12 and i > 1:
            kind = "fixed"
        elif prismatic and r < 0.3:
            kind = "prismatic"
        elif r < 0.4:
            kind = "continuous"
        parent = links[int(rng.integers(0, i))]["name"]
        joints.append({"name": f"j{i}", "type": kind, "parent": parent,
                       "child": f"b{i}", "xyz": rng.normal(0, 0.3, 3),
                       "rpy": rng.uniform(-np.pi, np.pi, 3), "axis": _unit(rng)})
    return {"links": links, "joints": joints}


def _f(v) -> str:
    return " ".join(repr(float(x)) for x in np.ravel(v))


def specs_urdf(specs: dict, name: str = "random") -> str:
    out = [f'<robot name="{name}">']
    for lk in specs["links"]:
        i = lk["inertia"]
        out.append(
            f'  <link name="{lk["name"]}">\n    <inertial>\n'
            f'      <origin xyz="{_f(lk["com"])}" rpy="0 0 0"/>\n'
            f'      <mass value="{float(lk["mass"])!r}"/>\n'
            f'      <inertia ixx="{float(i[0, 0])!r}" ixy="{float(i[0, 1])!r}" '
            f'ixz="{float(i[0, 2])!r}" iyy="{float(i[1, 1])!r}" iyz="{float(i[1, 2])!r}" '
            f'izz="{float(i[2, 2])!r}"/>\n    </inertial>\n  </link>'
        )
    for j in specs["joints"]:
        lim = ('    <limit lower="-3" upper="3" effort="100" velocity="10"/>\n'
               if j["type"] in ("revolute", "prismatic") else
               '    <limit effort="100" velocity="10"/>\n' if j["type"] == "continuous" else "")
        out.append(
            f'  <joint name="{j["name"]}" type="{j["type"]}">\n'
            f'    <parent link="{j["parent"]}"/>\n    <child link="{j["child"]}"/>\n'
            f'    <origin xyz="{_f(j["xyz"])}" rpy="{_f(j["rpy"])}"/>\n'
            f'    <axis xyz="{_f(j["axis"])}"/>\n{lim}  </joint>'
        )
    out.append("</robot>")
    return "\n".join(out) + "\n"


def specs_yaml(specs: dict, name: str = "random") -> str:
    out = [f"name: {name}", "bodies:"]
    for lk in specs["links"]:
        i = lk["inertia"]
        out += [f"  - name: {lk['name']}", f"    mass: {float(lk['mass'])!r}",
                f"    com: [{', '.join(repr(float(x)) for x in lk['com'])}]",
                f"    inertia: {{ixx: {float(i[0, 0])!r}, iyy: {float(i[1, 1])!r}, "
                f"izz: {float(i[2, 2])!r}, ixy: {float(i[0, 1])!r}, ixz: {float(i[0, 2])!r}, "
                f"iyz: {float(i[1, 2])!r}}}"]
    out.append("joints:")
    for j in specs["joints"]:
        out += [f"  - name: {j['name']}", f"    type: {j['type']}", f"    parent: {j['parent']}",
                f"    child: {j['child']}",
                f"    origin: {{xyz: [{', '.join(repr(float(x)) for x in j['xyz'])}], "
                f"rpy: [{', '.join(repr(float(x)) for x in j['rpy'])}]}}",
                f"    axis: [{', '.join(repr(float(x)) for x in j['axis'])}]"]
        if j["type"] in ("revolute", "prismatic"):
            out.append("    limit: {lower: -3, upper: 3, velocity: 10, effort: 100}")
    return "\n".join(out) + "\n"


def random_tree(rng: np.random.Generator, n_bodies: int, *, prismatic: bool = True,
                fixed: bool = True) -> tuple[str, dict]:
    """(URDF text, specs) of a random tree with ``n_bodies`` links (the base included)."""
    specs = random_tree_specs(rng, n_bodies, prismatic=prismatic, fixed=fixed)
    return specs_urdf(specs), specs
