"""Standing in the world: the exoskeleton and its wearer on the floor, joints held by a PD.

The PD (τ = K_p·(q* − q) − K_d·q̇ on each of the Mechanism's joints, written into MuJoCo's
``qfrc_applied``) is a stand-in for the controller and its drives — not exo-rt's law, not its
motors — to check that the world stands: the floor carries the whole weight, the feet do not
slip and the pelvis does not drift (docs/world.md, "Standing").
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from exo_rt.model.mechanism import Mechanism
from exo_rt.sim.world.build import World, build_world
from exo_rt.sim.world.scene import CONTACT_RADIUS, feet, floor, upper_body

# exo_2leg's heel and toe: the shank carries the foot (the ankle fixed 0.42 m below the knee,
# configs/robots/modules/exo_leg_module.yaml); the sole is 0.07 m below the ankle, from 0.06 m
# behind it to 0.19 m ahead (the ends of the wearer's foot segment in exo_2leg.yaml)
EXO_2LEG_FEET = {b: ((-0.06, 0.0, -0.49), (0.19, 0.0, -0.49))
                 for b in ("left_shank", "right_shank")}
KP = 3000.0  # N·m/rad: the stand-in's stiffness per joint
KD = 60.0  # N·m·s/rad


@dataclass(frozen=True)
class StandingFigures:
    """What a standing run measured after it settled (SI)."""

    total_mass: float  # kg: everything in the world that moves
    reaction_mean: float  # N: summed vertical ground reaction, mean over the window
    reaction_worst: float  # relative: max |reaction / (total mass · g) − 1| over the window
    slip: float  # m: the largest horizontal travel of any contact sphere's centre
    pelvis_drift: float  # m: the largest distance of the pelvis origin from where it settled
    seconds: float  # s: the measured window


def standing_world(mech: Mechanism, feet_points: dict, *, wearer=(75.0, 1.75, "male"),
                   timestep: float = 1e-3, radius: float = CONTACT_RADIUS) -> World:
    """``mech`` on the sagittal base, on the floor, with heel and toe spheres at
    ``feet_points`` and the wearer's (mass kg, height m, sex) upper body on the pelvis.

    The pelvis starts at the height where the soles of the legs at q = 0 touch the floor."""
    world0 = build_world(mech)  # where the feet are at q = 0, pelvis at the origin
    data0 = world0.new_data()
    mujoco.mj_kinematics(world0.model, data0)
    lowest = min(
        float((data0.xpos[world0.bodies[mech.body_names.index(b)]]
               + data0.xmat[world0.bodies[mech.body_names.index(b)]].reshape(3, 3)
               @ np.asarray(p))[2])
        for b, pair in feet_points.items() for p in pair)
    return build_world(mech, base="sagittal", base_pos=(0.0, 0.0, -lowest), timestep=timestep,
                       extras=(floor(), feet(feet_points, radius), upper_body(*wearer)))


def vertical_reaction(model: mujoco.MjModel, data: mujoco.MjData) -> float:
    """Summed vertical force the floor exerts on the world's contacts (N, +z)."""
    total, f = 0.0, np.zeros(6)
    for i in range(data.ncon):
        mujoco.mj_contactForce(model, data, i, f)
        frame = data.contact[i].frame.reshape(3, 3)  # rows: normal, tangents (world)
        total += float(f[:3] @ frame[:, 2])
    return total


def stand(world: World, posture, *, settle: float = 1.0, seconds: float = 5.0,
          kp: float = KP, kd: float = KD) -> StandingFigures:
    """Hold ``posture`` (the Mechanism's q, rad) for ``settle`` + ``seconds`` of simulated
    time; measure over the last ``seconds``."""
    model, data = world.model, world.new_data()
    q_star = np.asarray(posture, dtype=float)
    world.set_state(data, q_star, np.zeros(len(q_star)))
    mujoco.mj_forward(model, data)
    spheres = [g for g in range(model.ngeom)
               if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE]
    pelvis = world.bodies[0]
    g = float(np.linalg.norm(model.opt.gravity))
    total_mass = float(model.body_mass.sum())
    n_settle = int(round(settle / model.opt.timestep))
    n_run = int(round(seconds / model.opt.timestep))
    reactions = np.zeros(n_run)
    start_spheres = start_pelvis = None
    slip = drift = 0.0
    for k in range(n_settle + n_run):
        q, v = data.qpos[world.qpos], data.qvel[world.dof]
        data.qfrc_applied[world.dof] = kp * (q_star - q) - kd * v
        mujoco.mj_step(model, data)
        if k < n_settle:
            continue
        if start_spheres is None:
            start_spheres = np.array(data.geom_xpos[spheres])
            start_pelvis = np.array(data.xpos[pelvis])
        reactions[k - n_settle] = vertical_reaction(model, data)
        travel = data.geom_xpos[spheres, :2] - start_spheres[:, :2]
        slip = max(slip, float(np.max(np.linalg.norm(travel, axis=1))))
        drift = max(drift, float(np.linalg.norm(data.xpos[pelvis] - start_pelvis)))
    weight = total_mass * g
    return StandingFigures(total_mass, float(reactions.mean()),
                           float(np.max(np.abs(reactions / weight - 1.0))), slip, drift,
                           seconds)


def drives_pd(plant, posture, kp: float = 2000.0, kd: float = 40.0,
              velocity=None) -> np.ndarray:
    """Motor currents (A) of a joint PD on the plant's drives — τ = K_p (q* − q) + K_d (q̇* −
    q̇) on each joint (N·m/rad, N·m·s/rad; q̇* = ``velocity``, rad/s, None: 0), as a current
    through its gear, i = τ / (k · sign · k_t), clamped at the motor's peak: a stand-in for
    the controller that reaches the world through the real motors, flexsplines and
    friction."""
    from exo_rt.actuators.motor import M_KT, M_PEAK, M_SIGN
    from exo_rt.sim.plant import T_MOTOR
    from exo_rt.sim.plants import T_JOINT, T_K

    rows = plant.transmissions
    j = rows[:, T_JOINT].astype(int)
    v_ref = np.zeros(len(plant.q)) if velocity is None else np.asarray(velocity)
    tau = kp * (np.asarray(posture)[j] - plant.q[j]) + kd * (v_ref[j] - plant.v[j])
    i = tau / (rows[:, T_K] * rows[:, T_MOTOR + M_SIGN] * rows[:, T_MOTOR + M_KT])
    peak = rows[:, T_MOTOR + M_PEAK]
    return np.clip(i, -peak, peak)


def stand_on_drives(plant, posture, *, settle: float = 1.0, seconds: float = 60.0,
                    every: int = 20) -> StandingFigures:
    """Hold ``posture`` with :func:`drives_pd` on a ``world`` plant on the floor for ``settle``
    + ``seconds`` (s); the summed vertical reaction each period (the contact forces on the
    pelvis's vertical coordinate), the spheres' and the pelvis's travel every ``every``
    periods, measured over the last ``seconds``."""
    from exo_rt.sim.world_plant import ST_CONTACT

    world, data = plant.world, plant.mj_data
    n = plant.mech.nq
    spheres = [g for g in range(world.model.ngeom)
               if world.model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE]
    periods = int(round(seconds / plant.dt))
    reactions = np.zeros(periods)
    start = None
    slip = drift = 0.0
    for k in range(int(round(settle / plant.dt)) + periods):
        plant.step(drives_pd(plant, posture))
        m = k - int(round(settle / plant.dt))
        if m < 0:
            continue
        reactions[m] = plant.state[ST_CONTACT, n + 1]
        if m % every:
            continue
        data.qpos[world.qpos] = plant.q[:n]
        data.qpos[world.base_qpos] = plant.base
        mujoco.mj_kinematics(world.model, data)
        now = (np.array(data.geom_xpos[spheres]), np.array(data.xpos[world.bodies[0]]))
        if start is None:
            start = now
        slip = max(slip, float(np.max(np.linalg.norm(now[0][:, :2] - start[0][:, :2], axis=1))))
        drift = max(drift, float(np.linalg.norm(now[1] - start[1])))
    weight = plant.total_mass * float(np.linalg.norm(world.model.opt.gravity))
    return StandingFigures(plant.total_mass, float(reactions.mean()),
                           float(np.max(np.abs(reactions / weight - 1.0))), slip, drift,
                           seconds)


def drives_off(plant, posture=None, *, hold: float = 1.0, seconds: float = 2.0
               ) -> tuple[float, np.ndarray]:
    """SAFE's zero current on a ``world`` plant on the floor: ``posture`` held by
    :func:`drives_pd` for ``hold`` s (None: the plant as it is), then every drive's power stage
    off for ``seconds``; (how far the pelvis dropped m, each joint's change rad) — what the
    robot file's SAFE reactions (brakes, gear friction, shorted phases) let the wearer do."""
    for _ in range(int(round(hold / plant.dt)) if posture is not None else 0):
        plant.step(drives_pd(plant, posture))
    z0, q0 = float(plant.base[1]), plant.joint_positions.copy()
    plant.power(False)
    off = np.zeros(len(plant.transmissions))
    for _ in range(int(round(seconds / plant.dt))):
        plant.step(off)
    return z0 - float(plant.base[1]), plant.joint_positions - q0
