"""Seed 001's energy integral: with no torque and no friction, E = T + Π stays constant.

The 5-link model (both variants) from the seed's initial conditions, and random trees,
integrated with RK4 at 0.1 ms: the drift of T + Π stays below 1e-6 of the energy scale
(|T| + |Π| at the start).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.dynamics.integrate import rk4_scratch, simulate_energy
from exo_rt.model import load_mechanism, load_urdf
from tests.treegen import random_tree

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "robots"
# seed 001, "Численное решение": absolute link angles from the x axis and their rates
PHI0 = np.array([1.68, 1.70, 1.21, 0.39, 1.57])
PHID0 = np.array([-1.57, -2.92, -0.19, -2.83, -0.07])


def relative(phi: np.ndarray) -> np.ndarray:
    """Absolute link angles → relative joint coordinates of a serial chain (q_i = φ_i − φ_{i−1})."""
    return np.diff(phi, prepend=0.0)


def energy_drift(mech, q, v, seconds: float, dt: float = 1e-4) -> float:
    dyn = Dynamics(mech)
    ke, pe = dyn.energy(q, v)
    steps = int(round(seconds / dt))
    every = 100
    out = np.zeros(steps // every + 1)
    simulate_energy(dyn.packed, dyn.workspace, q.copy(), v.copy(), np.zeros(mech.nq), dt, steps,
                    every, rk4_scratch(mech.nq), out, np.zeros(2))
    return float(np.max(np.abs(out - out[0]))) / (abs(ke) + abs(pe))


def test_relative_coordinates_reproduce_the_seed_angles():
    """The conversion is right: link i's x axis makes the angle φ_i with the world x axis."""
    mech = load_mechanism(CONFIGS / "borisov_5link.yaml")
    rot = Dynamics(mech).frame_rotations(relative(PHI0))
    angles = np.arctan2(rot[1:, 1, 0], rot[1:, 0, 0])
    np.testing.assert_allclose(np.mod(angles, 2 * np.pi), PHI0, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["borisov_5link.yaml", "borisov_5link_lumped.yaml"])
def test_seed001_energy_integral(name):
    mech = load_mechanism(CONFIGS / name)
    drift = energy_drift(mech, relative(PHI0), relative(PHID0), 5.0)
    assert drift <= 1e-6, f"relative energy drift {drift:.2e}"


@pytest.mark.parametrize("seed", range(3))
def test_random_tree_energy_integral(seed):
    rng = np.random.default_rng(100 + seed)
    text, _ = random_tree(rng, int(rng.integers(3, 9)), prismatic=True, fixed=True)
    mech = load_urdf(text)
    q, v = rng.uniform(-1, 1, mech.nq), rng.normal(0, 1, mech.nq)
    drift = energy_drift(mech, q, v, 2.0)
    assert drift <= 1e-6, f"relative energy drift {drift:.2e}"
