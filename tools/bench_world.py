#!/usr/bin/env python3
"""The plant ``world`` (the rigid bodies in MuJoCo, harmonic_drive's drives) against
``harmonic_drive`` on the test stand: ``python tools/bench_world.py [--quick]``.

Prints, for ``exo_leg`` and ``exo_2leg``:

- the cost of one plant period (1 ms, 10 RK4 sub-steps) inside njit, driven by sine currents,
  µs per period for both plants and their ratio;
- the cost of one model-in-the-loop period with ``computed_torque`` on the default gait (the
  controller's cycle and the plant), µs per period, both plants, the ratio, and the tracking
  RMS on each;
- the joints' RMS difference between the two plants over the same driven run;

and, for ``exo_leg``, the energy drift of 10 s of coasting (drives off, no friction, hysteresis
or brake; 0.5 ms periods of one RK4 step), relative to the peak kinetic energy, for the world
plant and for the alternative it does not take — MuJoCo's own RK4 ``mj_step`` with the
flexsplines' torques written into ``qfrc_applied`` once per step. Medians of repeated runs.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from exo_rt.actuators.harmonic_drive import stiffness_torque
from exo_rt.actuators.motor import M_BRAKE
from exo_rt.control.config import load_controller
from exo_rt.model import load_mechanism
from exo_rt.sim import plants
from exo_rt.sim.mil import run_mil
from exo_rt.sim.plant import T_DRIVE, T_MOTOR, plant_run, twist
from exo_rt.sim.plants import ST_Q, ST_V, T_JOINT, T_ROTOR

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = ("exo_leg", "exo_2leg")


def driving(steps: int, n: int, dt: float = 1e-3) -> np.ndarray:
    """Sine currents (A): about ±3 A at 1–2 Hz on every motor, a bias of 1 A."""
    t = np.arange(steps) * dt
    return np.stack([1.0 + 3.0 * np.sin(2 * np.pi * (1.0 + 0.5 * j) * t + j) for j in range(n)],
                    1)


def plant_cost(plant, currents, repeats: int) -> tuple[float, np.ndarray]:
    """(median µs per period, joint log) of ``plant_run`` over ``currents`` from rest."""
    times, log = [], None
    for _ in range(repeats):
        plant.reset(np.zeros(plant.n_joints))
        log = np.zeros((len(currents), plant.n_joints))
        t0 = time.perf_counter()
        plant_run(*plant.args, currents, log)
        times.append((time.perf_counter() - t0) / len(currents) * 1e6)
    return statistics.median(times), log


def mil_cost(robot, cfg, plant: str, cycles: float, repeats: int):
    """(median µs per control period, tracking RMS per joint (deg)) of model-in-the-loop."""
    run_mil(robot, cfg, cycles=0.01, plant_model=plant)  # compile
    times, r = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = run_mil(robot, cfg, cycles=cycles, plant_model=plant)
        times.append((time.perf_counter() - t0) / (cycles * cfg.reference.period / 1e-3) * 1e6)
    return statistics.median(times), r.rms_error_deg


def coasting_world(robot, seconds: float) -> tuple[float, float]:
    """(largest |E − E₀| (J), peak kinetic energy (J)) of the world plant coasting."""
    p = plants.create("world", robot, dt=5e-4, substeps=1, friction=False, hysteresis=False)
    p.transmissions[:, T_MOTOR + M_BRAKE] = 0.0
    p.reset([0.8, 1.2], equilibrium=False)
    p.power(False)
    e0, drift, kinetic = p.energy(), 0.0, 0.0
    for k in range(int(round(seconds / p.dt))):
        p.step()
        if k % 20 == 19:
            drift = max(drift, abs(p.energy() - e0))
            kinetic = max(kinetic, p.mj_data.energy[1])
    return drift, kinetic


def coasting_mj_step(robot, seconds: float, step: float) -> tuple[float, float, float]:
    """The same coasting with MuJoCo's RK4 ``mj_step`` (steps of ``step`` s) and the
    flexsplines' torques in ``qfrc_applied``, computed once per step from its start: (the
    time (s) |E − E₀| first passed 1 J, the time (s) MuJoCo found the state non-finite and
    reset it — nan: never —, the largest |E − E₀| (J) before)."""
    import mujoco

    p = plants.create("world", robot, dt=5e-4, substeps=1, friction=False, hysteresis=False)
    p.reset([0.8, 1.2], equilibrium=False)
    e0 = p.energy()
    w, rows = p.world, p.transmissions
    m = w.model
    m.opt.timestep = step
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    d.qpos[w.qpos], d.qvel[w.dof] = p.q, p.v
    q = p.q.copy()
    bad = int(mujoco.mjtWarning.mjWARN_BADQACC)
    warn = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda msg: None)  # counted below, not written to a log file
    try:
        return _coast(p, w, m, d, rows, q, e0, seconds, bad)
    finally:
        mujoco.set_mju_user_warning(warn)


def _coast(p, w, m, d, rows, q, e0, seconds, bad):
    """:func:`coasting_mj_step`'s loop."""
    import mujoco

    joule, blown, drift = math.nan, math.nan, 0.0
    for k in range(int(round(seconds / m.opt.timestep))):
        q[:] = d.qpos[w.qpos]
        d.qfrc_applied[:] = 0.0
        for t in range(len(rows)):
            delta, dq = twist(rows, t, q)
            torque = stiffness_torque(delta, rows[t, T_DRIVE:T_MOTOR])
            d.qfrc_applied[w.dof[int(rows[t, T_JOINT])]] -= torque
            d.qfrc_applied[w.dof[int(rows[t, T_ROTOR])]] += torque * dq
        mujoco.mj_step(m, d)
        if d.warning[bad].number > 0:
            blown = (k + 1) * m.opt.timestep
            break
        p.state[ST_Q], p.state[ST_V] = d.qpos[w.qpos], d.qvel[w.dof]
        drift = max(drift, abs(p.energy() - e0))
        if math.isnan(joule) and drift > 1.0:
            joule = (k + 1) * m.opt.timestep
    return joule, blown, drift


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats, shorter runs")
    args = ap.parse_args(argv)
    repeats, steps, cycles = (3, 1000, 1) if args.quick else (7, 3000, 3)
    print(f"test stand (pelvis fixed), 1 ms periods of 10 RK4 sub-steps; medians of {repeats}")
    for name in ROBOTS:
        robot = load_mechanism(ROOT / "configs" / "robots" / f"{name}.yaml")
        cfg = load_controller(ROOT / "configs" / "controllers" / "computed_torque.yaml", robot)
        currents = driving(steps, len(robot.transmissions))
        hd, world = plants.create("harmonic_drive", robot), plants.create("world", robot)
        plant_cost(hd, currents[:10], 1)
        plant_cost(world, currents[:10], 1)  # compile
        us_hd, log_hd = plant_cost(hd, currents, repeats)
        us_w, log_w = plant_cost(world, currents, repeats)
        diff = np.degrees(np.sqrt(np.mean((log_w - log_hd) ** 2, axis=0))).max()
        swing = np.degrees(np.ptp(log_hd, axis=0)).min()
        mil_hd, rms_hd = mil_cost(robot, cfg, "harmonic_drive", cycles, repeats)
        mil_w, rms_w = mil_cost(robot, cfg, "world", cycles, repeats)
        print(f"{name} ({robot.nq} joints, {len(robot.transmissions)} drives)")
        print(f"  plant period      harmonic_drive {us_hd:7.1f} µs   world {us_w:7.1f} µs   "
              f"ratio {us_w / us_hd:4.2f}")
        print(f"  mil period        harmonic_drive {mil_hd:7.1f} µs   world {mil_w:7.1f} µs   "
              f"ratio {mil_w / mil_hd:4.2f}")
        print(f"  joints' RMS difference over {steps} driven periods: {diff:.1e}° "
              f"(each joint swings ≥ {swing:.0f}°)")
        fmt = lambda r: np.array2string(r, precision=4)  # noqa: E731
        print(f"  computed_torque tracking RMS (deg): harmonic_drive {fmt(rms_hd)}, "
              f"world {fmt(rms_w)}")
    robot = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
    seconds = 2.0 if args.quick else 10.0
    drift, kinetic = coasting_world(robot, seconds)
    print(f"exo_leg coasting {seconds:g} s at 0.5 ms, the world plant (the drives in every RK4 "
          f"stage): |ΔE| ≤ {drift:.2e} J, {drift / kinetic:.1e} of the peak kinetic "
          f"{kinetic:.1f} J")
    for step in (5e-4, 1e-4):
        joule, blown, drift = coasting_mj_step(robot, seconds, step)
        end = (f"unstable (MuJoCo resets) at {blown:.3f} s" if math.isfinite(blown) else
               f"|ΔE| up to {drift:.3g} J in {seconds:g} s")
        print(f"exo_leg coasting {seconds:g} s at {step * 1e3:g} ms, mj_step RK4 with the "
              f"torques once per step: |ΔE| > 1 J from {joule:.3f} s, {end}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
