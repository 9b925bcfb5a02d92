"""What a leg with a fixed ankle can reach on the floor: the geometry behind a walking gait for
``exo_2leg_sized`` in the world (issue 44, "Walking at 0.4 and 0.8 m/s").

The shank carries the foot rigidly (the foot perpendicular to the shank), the trunk is held
upright, and the floor touches the foot at its heel and toe spheres (the world's feet:
:data:`exo_rt.sim.world.room.SOLE`, radius :data:`exo_rt.sim.world.scene.CONTACT_RADIUS`).
With the pelvis upright the stance leg is a two-link chain from the hip to the sphere it rolls
on: the thigh (hip → knee) and the fixed vector knee → sphere centre. Its length, hip → sphere
centre, is a function of the knee's flexion alone (:func:`reach`):

- on the heel (the shank tilted forward: early stance) it is longest with the knee straight and
  shortens as the knee flexes — the knee → heel vector points behind the shank's axis;
- on the toe (the shank tilted back: late stance, the heel off the floor) it *grows* with knee
  flexion up to the flexion at which the thigh lines up with the knee → toe vector (about 21°:
  the toe is 0.19 m ahead of the ankle), and is back at its straight-knee length only at twice
  that; rising on the toe lengthens the leg, as plantarflexion does.

What follows, printed by this script (SI units, angles in rad):

1. **A constant pelvis height is impossible** across the stance foot: foot flat needs the hip
   at or behind the ankle (hip = knee flexion ≥ 0), and once the hip is ahead of the ankle the
   foot is on its toe, where the leg is at least its straight-knee toe reach — longer than the
   standing leg — unless the knee flexes past twice the toe's angle. The table gives, for a
   pelvis height, the knee a stance leg needs as the hip passes over the foot.
2. **Double support on a leading heel and a trailing toe** needs the hip's horizontal distances
   to the leading heel centre (a) and to the trailing toe centre (e) to satisfy
   e² − a² ≥ reach_toe² − reach_heel² (both knees at the given flexion). The shortest step
   (heel to heel) with both feet down is printed against the trailing knee's largest flexion,
   beside the walk ratio's steps (exo_rt.control.gait_speed) at 0.4 and 0.8 m/s.

``python tools/fixed_ankle_reach.py``
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from exo_rt.control.gait_speed import cadence_and_step
from exo_rt.sim.world.room import SOLE
from exo_rt.sim.world.scene import CONTACT_RADIUS

THIGH = 0.43  # m: hip → knee (configs/robots/exo_2leg_sized.yaml)
HEIGHT = 1.75  # m: the default wearer (the walk ratio's steps)
KNEE_STRAIGHT = 0.05  # rad: the activities' standing knee, just off hyperextension


def centres() -> tuple[np.ndarray, np.ndarray]:
    """The heel and toe sphere centres in the shank's sagittal frame (x forward, z up; m)."""
    (hx, _, hz), (tx, _, tz), _ankle = SOLE
    return (np.array([hx, hz + CONTACT_RADIUS]), np.array([tx, tz + CONTACT_RADIUS]))


def reach(knee, point: np.ndarray):
    """Hip → contact-centre distance (m) at knee flexion ``knee`` (rad; flexion turns the shank
    back against the thigh), the thigh straight down from the hip."""
    knee = np.asarray(knee, float)
    c, s = np.cos(-knee), np.sin(-knee)  # the shank turned back by the flexion
    x = point[0] * c - point[1] * s
    z = -THIGH + point[0] * s + point[1] * c
    return np.hypot(x, z)


def toe_peak(toe: np.ndarray) -> float:
    """The knee flexion (rad) at which the toe reach is longest: the toe's angle ahead of the
    shank's axis, seen from the knee."""
    return math.atan2(toe[0], -toe[1])


def knee_for(length: float, point: np.ndarray, lo: float, hi: float) -> float | None:
    """The knee flexion in [lo, hi] (rad) giving the reach ``length`` (m), by bisection on a
    monotonic stretch; None where none does."""
    f = lambda k: float(reach(k, point)) - length  # noqa: E731
    if f(lo) * f(hi) > 0:
        return None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if f(lo) * f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    heel, toe = centres()
    peak = toe_peak(toe)
    k0 = KNEE_STRAIGHT
    print("Leg reach, hip → sphere centre (m), thigh", THIGH, "m; spheres", CONTACT_RADIUS, "m")
    print(f"  heel: {reach(k0, heel):.4f} at knee {k0} rad, {reach(0.3, heel):.4f} at 0.3")
    print(f"  toe:  {reach(k0, toe):.4f} at knee {k0} rad, longest {reach(peak, toe):.4f} at "
          f"{peak:.3f} rad ({math.degrees(peak):.1f}°), {reach(k0, toe):.4f} again at "
          f"{2 * peak - k0:.3f} rad")
    stand = THIGH + (-heel[1]) + CONTACT_RADIUS  # hip height standing straight (sole on floor)
    print(f"  standing straight, the hip is {stand:.3f} m above the floor")

    print("\n1. Pelvis at a constant height h: the knee the stance toe needs with the hip "
          "right over the toe centre")
    for h in (0.88, 0.90, 0.91, 0.92):
        length = h - CONTACT_RADIUS  # hip → toe centre, the centre one radius up
        bent = knee_for(length, toe, 2 * peak, 2.0)
        straight = knee_for(length, toe, -0.5, peak)
        print(f"  h = {h:.2f} m: knee {straight:+.3f} rad (hyperextended)" if straight is not None
              else f"  h = {h:.2f} m: no knee in [−0.5, {peak:.2f}] rad", end="")
        print(f" or {bent:.3f} rad ({math.degrees(bent):.0f}°, crouched)" if bent else "")

    print("\n2. Double support, leading heel and trailing toe: shortest step (heel to heel, m)")
    gap = toe[0] - heel[0]  # heel centre → toe centre on one foot
    for kmax in (k0, peak, 2 * peak - k0 - 1e-9, 0.8, 0.9, 1.0):
        # the trailing toe's shortest reach with its knee in [k0, kmax]; the leading heel's
        # longest at k0; e² − a² ≥ Δ, step = a + e + gap, shortest at a = 0
        toe_min = float(min(reach(np.linspace(k0, kmax, 400), toe)))
        delta = toe_min**2 - float(reach(k0, heel)) ** 2
        e = math.sqrt(max(delta, 0.0))
        print(f"  trailing knee ≤ {kmax:.3f} rad ({math.degrees(kmax):4.1f}°): "
              f"e ≥ {e:.3f} m, step ≥ {e + gap:.3f} m")
    for v in (0.4, 0.8):
        cad, step = cadence_and_step(v, HEIGHT)
        print(f"  walk ratio at {v} m/s ({HEIGHT} m): step {step:.3f} m, {cad:.1f} steps/min")


if __name__ == "__main__":
    main()
