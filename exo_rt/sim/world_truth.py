"""The world's own truth, taken on the simulated side after every physics period: the pelvis's
pose, each foot's ground reaction and centre of pressure, the seat, the links' true angles
(docs/world.md, "What a world run records").

It is what the simulation knows and the controller never measures, so it is computed where
the simulation runs — :class:`~exo_rt.sim.simbus.SimWorld`, in the control process on the
lockstep bus (stepped by its SYNCs, beside the cycle, not in it) and in the simulation's own
process with ``--realtime`` — and reaches the recording process through a shared-memory ring
of its own (:class:`exo_rt.record.rings.RecordRing`), as the cycle's records do; the control
process's 1 kHz path computes none of it. A run on the test stand or on real hardware has no
world truth: :func:`layout` is None there.

Two users:

- **The recording** (:func:`layout`, :func:`attach`): one row per physics period — its time
  stamp on the CAN log's clock (lockstep: the run's epoch + the simulated time; real time: the
  wall clock, ``time.time()``), the pelvis's x, z (m) and pitch (rad), each foot's force from
  the floor (N, world x, y, z), its centre of pressure (m, world), the seat box (centre and
  size, m) and the joints' true link angles (rad). The recording process joins them to the
  cycle's records (:mod:`exo_rt.record.world_log`).
- **The board's foot-sole sensors** (:meth:`WorldTruth.soles`): each foot's vertical reaction
  (N), which the emulated board sends as its pressures — the heel strikes it reports come from
  the world's foot contacts, not from a timer.

A foot is the shank that carries the heel and toe spheres (``<shank>_heel``, ``<shank>_toe``);
feet in the legs' order (:func:`exo_rt.sim.world.room.legs`: the first hip's leg first, the
leg whose hip the gait-phase estimate follows by default).
"""

from __future__ import annotations

import time

import numpy as np

from exo_rt.jit import njit
from exo_rt.record.recorder import row_width

FLOOR_GEOMS = ("floor", "seat")  # what pushes on the robot (geom1 of a contact with it)
LOADED_N = 1.0  # N: below this a foot's centre of pressure is its sole's middle
SOLE_MAX_N = 65535  # N: the board's pressure field (u16)
LOCKSTEP_LEAD = 1.25  # periods: the world's clock at the SYNC a cycle's feedback answers is
# one period past the record's t on the lockstep bus (the step at a SYNC simulates the period
# that ends there); a quarter period more for rounding (the next row is a period later)


def columns(n_feet: int, n_joints: int) -> dict[str, tuple[int, int]]:
    """The truth row's columns (float64)."""
    out: dict[str, tuple[int, int]] = {}
    o = 0
    for name, width in (("t", 1), ("base", 3), ("foot_force", 3 * n_feet),
                        ("foot_point", 3 * n_feet), ("seat", 6), ("q_world", n_joints)):
        out[name] = (o, o + width)
        o += width
    return out


@njit(cache=True)
def foot_reactions(geom, frame, pos, dim, efc_address, friction, efc_force, pushers, foot_of,
                   force, moment):
    """Each foot's force from the floor (N, world x, y, z) and its Σ f_z·x, Σ f_z·y (N·m)
    over MuJoCo's contacts now, into ``force`` (feet, 3) and ``moment`` (feet, 2): a
    contact's force as ``mj_contactForce`` gives it for a pyramidal friction cone (the
    world's) — the normal the sum of its pyramid's edge forces, each tangent μ_i times the
    difference of its two edges (Todorov 2014; MuJoCo's ``mju_decodePyramid``) — turned from
    the contact frame into the world's, on the foot's sphere from the floor or the seat.
    ``pushers``: per geom, 1 for the floor and the seat; ``foot_of``: per geom, its foot or
    −1. Compiled: the contacts' loop in Python took 29 µs a physics period."""
    force[:] = 0.0
    moment[:] = 0.0
    for i in range(geom.shape[0]):
        g1, g2 = geom[i, 0], geom[i, 1]
        pushed = pushers[g1] != 0
        foot = foot_of[g2] if pushed else foot_of[g1]
        a = efc_address[i]
        if foot < 0 or a < 0:
            continue
        n = 0.0
        t1 = 0.0
        t2 = 0.0
        if dim[i] == 1:
            n = efc_force[a]
        else:
            for k in range(dim[i] - 1):
                n += efc_force[a + 2 * k] + efc_force[a + 2 * k + 1]
            t1 = (efc_force[a] - efc_force[a + 1]) * friction[i, 0]
            if dim[i] > 2:
                t2 = (efc_force[a + 2] - efc_force[a + 3]) * friction[i, 1]
        sign = 1.0 if pushed else -1.0  # (on geom2, from geom1)
        for r in range(3):  # the frame's rows are the contact's axes (normal first)
            f = sign * (frame[i, r] * n + frame[i, 3 + r] * t1 + frame[i, 6 + r] * t2)
            force[foot, r] += f
            if r == 2:
                moment[foot, 0] += f * pos[i, 0]
                moment[foot, 1] += f * pos[i, 1]


def feet_of(mech) -> list[str]:
    """The feet (shank bodies) the floor scene gives ``mech``, in the legs' order."""
    from exo_rt.sim.world.room import legs

    return [shank for _, shank in legs(mech).pairs]


def layout(top, bus_set) -> dict | None:
    """What the recording's header says of a world run's truth (``meta["world"]``): its
    columns, feet, joints and how a cycle's record finds its row (``lead_s``: the row stamped
    at or before the record's wall_start + t + lead_s); None where there is none — a plant
    other than ``world`` on the floor, or buses that are not the simulated exoskeleton (real
    hardware, a replay)."""
    sim = top.simulation
    simulated = getattr(bus_set, "world", None) is not None or (  # lockstep, or its process
        getattr(bus_set, "process", None) is not None and hasattr(bus_set, "board_command"))
    if not simulated or sim.plant != "world" or sim.plant_options().get("scene") != "floor":
        return None
    feet = feet_of(top.robot)
    cols = columns(len(feet), top.robot.nq)
    dt = 1.0 / top.rate_hz
    return {"columns": cols, "width": row_width(cols), "feet": feet,
            "joints": list(top.robot.joint_names),
            "lead_s": LOCKSTEP_LEAD * dt if bus_set.lockstep else 0.0,
            "clock": "lockstep" if bus_set.lockstep else "wall"}


def attach(bus_set, ring, epoch: float) -> None:
    """Start handing the world's rows to the recording's truth ``ring``: lockstep, the
    in-process world's truth puts them there itself (stamped ``epoch`` + simulated time, the
    CAN log's clock); real time, the simulation's process is told the ring's name (it attaches
    to it and stamps its rows with the wall clock)."""
    if bus_set.world is not None:
        truth = bus_set.world.truth
        if truth is not None:
            truth.record(ring, epoch)
    elif bus_set.process is not None:
        bus_set.process.send(f"truth {ring.name}")


class WorldTruth:
    """The truth of a world plant on the floor (the module's docstring): :meth:`update` after
    each physics period; :attr:`row` the latest; :meth:`soles` the feet's vertical reactions."""

    def __init__(self, plant) -> None:
        import mujoco

        self.plant = plant
        m = plant.world.model
        self.model = m
        self.feet = feet_of(plant.world.mechanism)
        self.n_joints = plant.n_joints
        self.cols = columns(len(self.feet), self.n_joints)
        self.row = np.full(row_width(self.cols), np.nan)
        self.foot_of = np.full(m.ngeom, -1, np.int64)  # geom → foot index (heel, toe spheres)
        self.spheres = np.zeros((len(self.feet), 2), np.int64)
        for f, shank in enumerate(self.feet):
            for s, tag in enumerate(("heel", "toe")):
                g = m.geom(f"{shank}_{tag}").id
                self.foot_of[g] = f
                self.spheres[f, s] = g
        self.pushers = np.zeros(m.ngeom, np.int64)  # per geom: 1 for the floor and the seat
        for n in FLOOR_GEOMS:
            g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n)
            if g >= 0:
                self.pushers[g] = 1
        if m.opt.cone != mujoco.mjtCone.mjCONE_PYRAMIDAL:
            raise ValueError("the world's truth decodes pyramidal friction cones only")
        self.radius = m.geom_size[self.spheres[:, 0], 0]
        self.seat = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "seat")
        self.force = np.zeros((len(self.feet), 3))
        self.moment = np.zeros((len(self.feet), 2))  # N·m: each foot's Σ f_z·x, Σ f_z·y
        self.ring = None
        self.epoch = 0.0

    def record(self, ring, epoch: float = 0.0) -> None:
        """Put every row from now on into ``ring`` (a :class:`~exo_rt.record.rings.
        RecordRing` of the row's width), stamped ``epoch`` + the simulated time (lockstep) or
        the wall clock (real time)."""
        self.ring, self.epoch = ring, float(epoch)

    def update(self, world) -> None:
        """The row of the plant's state now (after ``world``'s physics period), into the ring
        when recording."""
        plant, m, row, c = self.plant, self.model, self.row, self.cols
        d = plant.mj_data
        if world.realtime:  # the instant the period ends: its serving loop's, or now
            row[0] = time.time() if world.stamp is None else world.stamp
        else:
            row[0] = self.epoch + world.t
        row[c["base"][0]:c["base"][1]] = plant.base
        force, moment = self.force, self.moment
        con = d.contact
        foot_reactions(con.geom, con.frame, con.pos, con.dim, con.efc_address, con.friction,
                       d.efc_force, self.pushers, self.foot_of, force, moment)
        fa, fb = c["foot_force"]
        row[fa:fb] = force.ravel()
        pa, _ = c["foot_point"]
        for f in range(len(self.feet)):
            p = row[pa + 3 * f: pa + 3 * f + 3]
            if force[f, 2] > LOADED_N:
                p[:2] = moment[f] / force[f, 2]
                p[2] = 0.0  # on the floor
            else:  # unloaded: the sole's middle, between the heel's and toe's lowest points
                p[:] = d.geom_xpos[self.spheres[f]].mean(axis=0)
                p[2] -= self.radius[f]
        sa, sb = c["seat"]
        if self.seat >= 0 and plant.seat is not None:
            row[sa:sa + 3] = d.geom_xpos[self.seat]  # the chair may have moved (seat_follows)
            row[sa + 3:sb] = 2.0 * m.geom_size[self.seat]
        qa, qb = c["q_world"]
        row[qa:qb] = plant.joint_positions
        if self.ring is not None and self.ring.header is not None:
            self.ring.put(row)

    def prepare(self) -> None:
        """Load (or compile) :func:`foot_reactions` for both layouts MuJoCo hands its contact
        arrays over in — strided from two contacts on, contiguous below — before the first
        physics period: loaded at the first row instead, it would hold the simulation's
        first answers to the controller (stale feedback in a real-time run's first cycles).
        Nothing is written: the rows stay as they were."""
        con, d = self.plant.mj_data.contact, self.plant.mj_data
        force, moment = self.force.copy(), self.moment.copy()
        arrays = (con.geom, con.frame, con.pos, con.dim, con.efc_address, con.friction)
        for layout in (lambda a: a, lambda a: np.ascontiguousarray(a[:1])):
            foot_reactions(*(layout(a) for a in arrays), d.efc_force, self.pushers,
                           self.foot_of, force, moment)

    def soles(self) -> tuple[int, ...]:
        """Each foot's vertical reaction (N, whole, 0 … 65535), the legs' order: what the
        emulated board's foot-sole sensors read."""
        return tuple(int(min(SOLE_MAX_N, max(0.0, f))) for f in self.force[:, 2])


def for_plant(plant) -> WorldTruth | None:
    """The truth of ``plant``, or None: a plant that is not the world's floor scene has none."""
    if not (plant.has_room and plant.floor):
        return None
    return WorldTruth(plant)


def for_world(world) -> WorldTruth | None:
    """The truth of ``world``'s plant (a SimWorld's): :func:`for_plant`."""
    return for_plant(world.plant)
