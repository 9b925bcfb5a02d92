"""What the world adds to the Mechanism: the floor, the feet's contacts, the wearer's upper body.

Each is an *extra* for :func:`exo_rt.sim.world.build_world`: a callable ``f(spec, mech,
bodies)`` that adds to the MjSpec before it compiles. The controller's model has none of them.

- :func:`floor`: a plane at z = 0 (the world frame's z up).
- :func:`feet`: a heel and a toe sphere per foot, fixed to the body that carries the foot
  (the ankle is fixed in the shipped legs: the shank). Their centres sit one radius above the
  sole points, so the spheres touch the floor where the sole does.
- :func:`seat`: a chair's seat, a box whose top is at a given height, and :func:`thighs`:
  capsules along the thighs (and under the pelvis) that rest on it — the only geoms that touch
  the seat, as the feet are the only ones that touch the floor (MuJoCo's ``contype`` /
  ``conaffinity`` bits :data:`FLOOR_BIT` and :data:`SEAT_BIT`), so a sitting or walking wearer
  makes at most two contacts per foot and two per thigh: the contacts stay bounded.
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
FLOOR_BIT, SEAT_BIT = 1, 2  # contype/conaffinity: feet ↔ floor, thighs ↔ seat, nothing else
# the contacts' time constant and damping ratio (MuJoCo's solref): 5 ms, critically damped —
# a standing 100 kg sinks ≈ 0.14 mm (MuJoCo's default 20 ms: ≈ 1 mm); valid for steps ≤ 2.5 ms
CONTACT_SOLREF = (0.005, 1.0)
THIGH_RADIUS = 0.07  # m: the thigh's half thickness under the hip (a stand-in: 1.75 m man)


def touching(geom, bit: int, friction: float) -> None:
    """A geom that collides with what carries ``bit`` (the floor or the seat) and nothing else."""
    geom.contype = bit
    geom.conaffinity = 0
    geom.friction = [friction, 0.005, 0.0001]
    geom.solref = CONTACT_SOLREF


def floor(friction: float = FLOOR_FRICTION):
    """The floor: an infinite plane through the world origin, normal +z."""

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        g = spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE,
                                    size=[0.0, 0.0, 1.0], friction=[friction, 0.005, 0.0001])
        g.contype, g.conaffinity = 0, FLOOR_BIT
        g.solref = CONTACT_SOLREF

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
                g = body.add_geom(name=f"{name}_{tag}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                                  size=[radius, 0.0, 0.0], pos=centre)
                touching(g, FLOOR_BIT, friction)

    return add


def seat(height: float, front: float, depth: float = 0.45, width: float = 0.5,
         friction: float = FLOOR_FRICTION):
    """A chair's seat: a box, its top at ``height`` (m) above the floor, its front edge at
    x = ``front`` (m), ``depth`` (m) deep behind it. Geom ``seat`` on body ``seat``, a mocap
    body: fixed in the world as the floor is (it never moves by forces), but the plant may
    carry it along the floor between steps — the chair a therapist keeps behind a walking
    wearer (:mod:`exo_rt.sim.world_plant`)."""

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        body = spec.worldbody.add_body(name="seat", mocap=True,
                                       pos=[front - depth / 2, 0.0, height / 2])
        g = body.add_geom(name="seat", type=mujoco.mjtGeom.mjGEOM_BOX,
                          size=[depth / 2, width / 2, height / 2],
                          friction=[friction, 0.005, 0.0001])
        g.contype, g.conaffinity = 0, SEAT_BIT
        g.solref = CONTACT_SOLREF

    return add


def thighs(segments: dict[str, tuple], radius: float = THIGH_RADIUS,
           friction: float = FLOOR_FRICTION):
    """Capsules that sit: ``segments`` maps a Mechanism body's name to two points in its frame
    (m; the hip and the knee), the capsule's axis between them. Geoms ``<body>_seat``."""

    def add(spec: mujoco.MjSpec, mech, bodies) -> None:
        for name, (a, b) in segments.items():
            body = bodies[mech.body_names.index(name)]
            g = body.add_geom(name=f"{name}_seat", type=mujoco.mjtGeom.mjGEOM_CAPSULE,
                              fromto=np.concatenate([np.asarray(a, float), np.asarray(b, float)]),
                              size=[radius, 0.0, 0.0])
            touching(g, SEAT_BIT, friction)

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
