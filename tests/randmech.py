"""Random tree mechanisms built directly with ``topology.build_mechanism`` (no file loader).

For the dynamics' own checks (energy integral, identities), independent of the URDF/YAML
parsers. Bodies hang on random earlier bodies, so branches are listed out of depth-first
order; joint frames are rotated, axes random unit vectors, inertias those of random boxes
(positive definite, triangle inequality) in random orientations; gravity 9.81 m/s² in a random
direction.
"""

from __future__ import annotations

import numpy as np

from exo_rt.model.mechanism import Mechanism
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism


def _box_inertia(rng: np.random.Generator, mass: float) -> np.ndarray:
    d = rng.uniform(0.03, 0.4, 3) ** 2
    r = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return r @ np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) * (mass / 12.0) @ r.T


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_mechanism(rng: np.random.Generator, n_bodies: int, *, p_prismatic: float = 0.3,
                     p_fixed: float = 0.0) -> Mechanism:
    """A tree of ``n_bodies`` bodies (base included): revolute, prismatic and optionally fixed.

    The first joint is always revolute; with ``p_prismatic`` > 0 and three bodies or more, the
    last one is made prismatic if the draw gave none, so such a tree has both kinds.
    """
    links = [LinkSpec("base", 1.0, rng.normal(0, 0.05, 3), _box_inertia(rng, 1.0))]
    joints = []
    for i in range(1, n_bodies):
        mass = float(rng.uniform(0.2, 5.0))
        links.append(LinkSpec(f"b{i}", mass, rng.normal(0, 0.15, 3), _box_inertia(rng, mass)))
        r = rng.random()
        kind = "revolute"
        if i > 1 and r < p_fixed:
            kind = "fixed"
        elif i > 1 and r < p_fixed + p_prismatic:
            kind = "prismatic"
        joints.append(JointSpec(
            f"j{i}", kind, links[int(rng.integers(0, i))].name, f"b{i}",
            origin_xyz=rng.normal(0, 0.3, 3), origin_rpy=rng.uniform(-np.pi, np.pi, 3),
            axis=_unit(rng),
        ))
    if p_prismatic > 0 and n_bodies >= 3 and all(j.type != "prismatic" for j in joints):
        joints[-1].type = "prismatic"
    return build_mechanism(f"random{n_bodies}", links, joints, 9.81 * _unit(rng), "<random>")
