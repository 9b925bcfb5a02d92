"""What the world adds to the Mechanism: the floor, the feet's contacts, the wearer's upper body.

Each is an *extra* for :func:`exo_rt.sim.world.build_world`: a callable ``f(spec, mech,
bodies)`` that adds to the MjSpec before it compiles. The controller's model has none of them.

- :func:`floor`: a plane at z = 0 (the world frame's z up).
- :func:`feet`: a heel and a toe sphere per foot, fixed to the body that carries the foot
  (the ankle is fixed in the shipped legs: the shank). Their centres sit one radius above the
  sole points, so the spheres touch the floor where the sole does.
- :func:`upper_body`: head, trunk and both arms of the wearer as one rigid mass welded to the
  pelvis — de Leva 1996, Table 4's mass fractions (60.28 % of a man's body mass) — at a point
  above the hip axis. Where that point lies and the block's inertia are this module's
  stand-ins (:data:`UPPER_BODY_COM_HEIGHT`, :data:`UPPER_BODY_GYRATION`), not table values.
"""

from __future__ import annotations

import mujoco
import numpy as np

from exo_rt.model import anthropometry

FLOOR_FRICTION = 1.0  # sliding friction coefficient, shoe sole on floor (MuJoCo's default)
CONTACT_RADIUS = 0.02  # m: heel and toe spheres
# the upper body's COM above the pelvis frame's origin (the hip axis), as a fraction of
# stature: 0.17·1.75 m ≈ 0.30 m, about the lower thorax of a standing adult (a stand-in)
UPPER_BODY_COM_HEIGHT = 0.17
# its radii of gyration about the COM (sagittal, transverse, longitudinal) as fractions of
# stature: a 0.8 m, 0.3 m-wide block (a stand-in)
UPPER_BODY_GYRATION = (0.13, 0.12, 0.06)


def floor(friction: float = FLOOR_FRICTION):
    """The floor: an infinite plane through the world origin, normal +z."""

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE,
                                size=[0.0, 0.0, 1.0], friction=[friction, 0.005, 0.0001])

    return add


def feet(points: dict[str, tuple], radius: float = CONTACT_RADIUS,
         friction: float = FLOOR_FRICTION):
    """Heel and toe spheres: ``points`` maps a Mechanism body's name to its foot's (heel, toe)
    sole points in that body's frame (m). Geoms named ``<body>_heel``, ``<body>_toe``."""

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        for name, (heel, toe) in points.items():
            body = bodies[mech.body_names.index(name)]
            for tag, p in (("heel", heel), ("toe", toe)):
                centre = np.asarray(p, dtype=float) + np.array([0.0, 0.0, radius])
                body.add_geom(name=f"{name}_{tag}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                              size=[radius, 0.0, 0.0], pos=centre,
                              friction=[friction, 0.005, 0.0001])

    return add


def upper_body_inertia(mass: float, height: float, sex: str) -> tuple[float, np.ndarray,
                                                                     np.ndarray]:
    """(mass kg, COM m in the pelvis frame, principal moments kg·m² about x, y, z) of the
    wearer's head, trunk and arms (de Leva 1996's fractions; placement and shape stand-ins)."""
    m = anthropometry.upper_body_fraction(sex) * mass
    com = np.array([0.0, 0.0, UPPER_BODY_COM_HEIGHT * height])
    r_sag, r_tra, r_long = (g * height for g in UPPER_BODY_GYRATION)
    # sagittal radius: about the lateral axis (y); transverse: about x; longitudinal: z
    return m, com, m * np.array([r_tra, r_sag, r_long]) ** 2


def upper_body(mass: float, height: float, sex: str, pelvis: str | None = None):
    """The wearer's head, trunk and arms welded to the pelvis (the Mechanism's base unless
    ``pelvis`` names another body): a body ``upper_body`` with no joint."""
    m, com, moments = upper_body_inertia(mass, height, sex)

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        root = bodies[0 if pelvis is None else mech.body_names.index(pelvis)]
        body = root.add_body(name="upper_body")
        body.explicitinertial = True
        body.mass = m
        body.ipos = com
        body.inertia = moments

    return add
