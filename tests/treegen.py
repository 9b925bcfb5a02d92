"""Random kinematic trees written as URDF and as robot YAML (for cross-checks and fuzzing).

Bodies are attached to random earlier bodies, so branches are listed out of depth-first order;
joint frames are rotated; axes are random unit vectors; inertias are those of random boxes
(positive definite, triangle inequality satisfied) in a random orientation.

The URDF is meant for independent parsers too (Pinocchio's among them): every link has a name
and an ``<inertial>`` with mass > 0, revolute and prismatic joints have a full ``<limit>``
(lower, upper, effort, velocity), continuous joints ``<limit effort velocity>``. ``<mimic>``
is written only when asked (``mimic=True``): Pinocchio reads it only on request
(``buildModelFromXML(text, mimic=True)``), between joints of the same type, the master met
before the mimic joint. Note that Pinocchio gives a continuous joint two configuration
variables (cos, sin) and one velocity: compare ``info["nq"]`` with its ``nv``.
"""

from __future__ import annotations

import numpy as np

LIMIT = {"lower": -3.0, "upper": 3.0, "velocity": 10.0, "effort": 100.0}


def _box_inertia(rng: np.random.Generator, mass: float) -> np.ndarray:
    d = rng.uniform(0.02, 0.4, 3) ** 2
    r = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return r @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) * mass / 12 @ r.T


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def _joint_type(rng: np.random.Generator, i: int, prismatic: bool, fixed: bool) -> str:
    r = rng.random()
    if fixed and r < 0.12 and i > 1:  # j1 stays movable: the tree has at least one coordinate
        return "fixed"
    if prismatic and r < 0.3:
        return "prismatic"
    if r < 0.4:
        return "continuous"
    return "revolute"


def _add_mimics(rng: np.random.Generator, joints: list[dict]) -> None:
    """Make about a quarter of the eligible joints mimic an independent ancestor joint.

    The master is an ancestor (on the path to the base) so that any depth-first builder has
    met it before the mimic joint — Pinocchio's URDF parser requires that.
    """
    by_child = {j["child"]: j for j in joints}
    for j in joints:
        if j["type"] not in ("revolute", "prismatic") or rng.random() >= 0.25:
            continue
        masters = []
        up = by_child.get(j["parent"])
        while up is not None:
            if up["type"] == j["type"] and "mimic" not in up:
                masters.append(up["name"])
            up = by_child.get(up["parent"])
        if masters:
            j["mimic"] = (masters[int(rng.integers(len(masters)))],
                          float(rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 3.0)),
                          float(rng.uniform(-0.5, 0.5)))


def random_tree_specs(rng: np.random.Generator, n_bodies: int, *, prismatic: bool = True,
                      fixed: bool = True, mimic: bool = False, aligned: bool = False) -> dict:
    """A random tree as plain data, with what a loader should make of it.

    ``aligned``: most joints then turn about ±x, ±y or ±z, and most have no origin rotation
    (the kernels' fast paths, as an exoskeleton's joints usually are; the rest stay general).

    Keys: ``links`` (name, mass, com, inertia), ``joints`` (name, type, parent, child, xyz,
    rpy, axis, and ``mimic`` = (master, multiplier, offset) on mimic joints), ``nq`` (number
    of independent coordinates), ``n_bodies`` (bodies after fixed joints are lumped) and
    ``joint_names`` (the coordinates in the order of q).
    """
    links = [{"name": "base", "mass": 1.0, "com": rng.normal(0, 0.05, 3),
              "inertia": _box_inertia(rng, 1.0)}]
    joints = []
    for i in range(1, n_bodies):
        mass = float(rng.uniform(0.2, 5.0))
        links.append({"name": f"b{i}", "mass": mass, "com": rng.normal(0, 0.15, 3),
                      "inertia": _box_inertia(rng, mass)})
        kind = _joint_type(rng, i, prismatic, fixed)
        parent = links[int(rng.integers(0, i))]["name"]
        joints.append({"name": f"j{i}", "type": kind, "parent": parent,
                       "child": f"b{i}", "xyz": rng.normal(0, 0.3, 3),
                       "rpy": rng.uniform(-np.pi, np.pi, 3), "axis": _unit(rng)})
    if aligned:
        for i, j in enumerate(joints):  # the first one always, the others mostly
            if rng.uniform() < 0.8 or i == 0:
                j["axis"] = np.eye(3)[int(rng.integers(0, 3))] * rng.choice([-1.0, 1.0])
            if rng.uniform() < 0.7 or i == 0:
                j["rpy"] = np.zeros(3)
    if mimic:
        _add_mimics(rng, joints)
    movable = [j for j in joints if j["type"] != "fixed"]
    names = [j["name"] for j in movable if "mimic" not in j]
    return {"links": links, "joints": joints, "nq": len(names), "n_bodies": len(movable) + 1,
            "joint_names": names}


def _f(v) -> str:
    return " ".join(repr(float(x)) for x in np.ravel(v))


def _yl(v) -> str:
    return "[" + ", ".join(repr(float(x)) for x in np.ravel(v)) + "]"


def _limits(kind: str) -> dict[str, float]:
    if kind in ("revolute", "prismatic"):
        return LIMIT
    if kind == "continuous":
        return {k: LIMIT[k] for k in ("velocity", "effort")}
    return {}


def specs_urdf(specs: dict, name: str = "random") -> str:
    """URDF text of :func:`random_tree_specs` output."""
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
        lim = _limits(j["type"])
        extra = ("    <limit " + " ".join(f'{k}="{v!r}"' for k, v in lim.items()) + "/>\n"
                 if lim else "")
        if "mimic" in j:
            master, mult, off = j["mimic"]
            extra += f'    <mimic joint="{master}" multiplier="{mult!r}" offset="{off!r}"/>\n'
        out.append(
            f'  <joint name="{j["name"]}" type="{j["type"]}">\n'
            f'    <parent link="{j["parent"]}"/>\n    <child link="{j["child"]}"/>\n'
            f'    <origin xyz="{_f(j["xyz"])}" rpy="{_f(j["rpy"])}"/>\n'
            f'    <axis xyz="{_f(j["axis"])}"/>\n{extra}  </joint>'
        )
    out.append("</robot>")
    return "\n".join(out) + "\n"


def specs_yaml(specs: dict, name: str = "random") -> str:
    """Robot YAML text of :func:`random_tree_specs` output (the same tree as its URDF)."""
    out = [f"name: {name}", "bodies:"]
    for lk in specs["links"]:
        i = lk["inertia"]
        out += [f"  - name: {lk['name']}", f"    mass: {float(lk['mass'])!r}",
                f"    com: {_yl(lk['com'])}",
                f"    inertia: {{ixx: {float(i[0, 0])!r}, iyy: {float(i[1, 1])!r}, "
                f"izz: {float(i[2, 2])!r}, ixy: {float(i[0, 1])!r}, ixz: {float(i[0, 2])!r}, "
                f"iyz: {float(i[1, 2])!r}}}"]
    out.append("joints:" if specs["joints"] else "joints: []")
    for j in specs["joints"]:
        out += [f"  - name: {j['name']}", f"    type: {j['type']}", f"    parent: {j['parent']}",
                f"    child: {j['child']}",
                f"    origin: {{xyz: {_yl(j['xyz'])}, rpy: {_yl(j['rpy'])}}}",
                f"    axis: {_yl(j['axis'])}"]
        lim = _limits(j["type"])
        if lim:
            out.append("    limit: {" + ", ".join(f"{k}: {v!r}" for k, v in lim.items()) + "}")
        if "mimic" in j:
            master, mult, off = j["mimic"]
            out.append(f"    mimic: {{joint: {master}, multiplier: {mult!r}, offset: {off!r}}}")
    return "\n".join(out) + "\n"


def random_tree(rng: np.random.Generator, n_bodies: int, *, prismatic: bool = True,
                fixed: bool = True, mimic: bool = False,
                aligned: bool = False) -> tuple[str, dict]:
    """(URDF text, specs) of a random tree with ``n_bodies`` links (the base included).

    ``specs`` is :func:`random_tree_specs`'s dict (links, joints, nq, n_bodies, joint_names).
    """
    specs = random_tree_specs(rng, n_bodies, prismatic=prismatic, fixed=fixed, mimic=mimic,
                              aligned=aligned)
    return specs_urdf(specs), specs


def random_tree_yaml(rng: np.random.Generator, n_bodies: int, *, prismatic: bool = True,
                     fixed: bool = True, mimic: bool = False) -> tuple[str, dict]:
    """(robot YAML text, specs): the tree :func:`random_tree` makes from the same ``rng`` state."""
    specs = random_tree_specs(rng, n_bodies, prismatic=prismatic, fixed=fixed, mimic=mimic)
    return specs_yaml(specs), specs
