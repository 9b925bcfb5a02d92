"""Borisov & Rozenblat 2017's energy integral: with no torque or friction, E = T + Π is constant.

Borisov & Rozenblat 2017 (§4) prove that the exoskeleton's
ballistic motion (no control torque) has the energy integral E = T + Π = h. We integrate the
paper's 5-link model (both variants, configs/robots/borisov_5link*.yaml) from the paper's
initial conditions (§5) for 5 s, and random trees for 2 s, with classical RK4 at dt = 0.1 ms
(:func:`exo_rt.dynamics.integrate.rk4_step`), zero torque.

Drift measure: max over t of |E(t) − E(0)| divided by the kinetic energy at the start, T(0).
Π's datum (the world origin) is arbitrary, so |E(0)| or |Π(0)| could be made as large as one
likes and would flatter the figure; T(0) > 0 does not depend on it. (The motions are far from
quiet: T grows more than tenfold, so E is exchanged between T and Π many times over the drift.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.dynamics.integrate import rk4_scratch, simulate_energy
from exo_rt.model import load_mechanism
from tests.randmech import random_mechanism

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "robots"
# Borisov & Rozenblat 2017, §5: absolute link angles φ_i (from x, counter-clockwise), rates
PHI0 = np.array([1.68, 1.70, 1.21, 0.39, 1.57])  # rad
PHID0 = np.array([-1.57, -2.92, -0.19, -2.83, -0.07])  # rad/s
DT = 1e-4  # s


def relative(phi: np.ndarray) -> np.ndarray:
    """Absolute link angles (or rates) of a serial chain → relative joint coordinates.

    φ = S q with S lower-triangular ones (φ_i = q_1 + … + q_i), so q = S⁻¹ φ:
    q_1 = φ_1, q_i = φ_i − φ_{i−1}. Rates convert the same way (S is constant).
    """
    return np.diff(phi, prepend=0.0)


def integrate_energies(mech, q, v, seconds: float, dt: float = DT, every: int = 10):
    """Kinetic and potential energy (rows (T, Π), J) every ``every`` steps of zero-torque RK4."""
    dyn = Dynamics(mech)
    steps = int(round(seconds / dt))
    out = np.zeros((steps // every + 1, 2))
    simulate_energy(dyn.packed, dyn.workspace, np.array(q, float), np.array(v, float),
                    np.zeros(mech.nq), dt, steps, every, rk4_scratch(mech.nq), out)
    return out


def drift(energies: np.ndarray) -> float:
    """max_t |E(t) − E(0)| / T(0) (see the module docstring)."""
    e = energies.sum(axis=1)
    return float(np.max(np.abs(e - e[0])) / energies[0, 0])


def test_relative_coordinates_reproduce_the_seed_angles():
    """q = relative(φ) puts link i's x axis (along the rod, A → B) at φ_i from the world x axis."""
    for name in ("borisov_5link.yaml", "borisov_5link_lumped.yaml"):
        mech = load_mechanism(CONFIGS / name)
        q = relative(PHI0)
        np.testing.assert_allclose(q, [1.68, 0.02, -0.49, -0.82, 1.18], atol=1e-15)
        rot = Dynamics(mech).frame_rotations(q)
        angles = np.arctan2(rot[1:, 1, 0], rot[1:, 0, 0])
        np.testing.assert_allclose(np.mod(angles, 2 * np.pi), PHI0, atol=1e-12)
        # rates: link i turns at φ̇_i = q̇_1 + … + q̇_i
        np.testing.assert_allclose(np.cumsum(relative(PHID0)), PHID0, atol=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["borisov_5link.yaml", "borisov_5link_lumped.yaml"])
def test_seed001_energy_integral(name):
    mech = load_mechanism(CONFIGS / name)
    energies = integrate_energies(mech, relative(PHI0), relative(PHID0), 5.0)
    d = drift(energies)
    print(f"{name}: T(0) = {energies[0, 0]:.3f} J, Π(0) = {energies[0, 1]:.3f} J, "
          f"max T = {energies[:, 0].max():.1f} J, drift {d:.2e}")
    assert energies[:, 0].max() > 10 * energies[0, 0]  # a lively motion, not a quiet one
    assert d <= 1e-6, f"relative energy drift {d:.2e}"


@pytest.mark.parametrize("name", ["borisov_5link.yaml", "borisov_5link_lumped.yaml"])
def test_drift_is_rk4_truncation_error(name):
    """Halving dt divides the drift by ~2⁴: it is the integrator's error, not the model's.

    Non-conservative terms in h (a wrong Coriolis term, say) would leave a floor that does
    not shrink with dt. Measured ratios over 1 s: 16.3–18.5.
    """
    mech = load_mechanism(CONFIGS / name)
    d = [drift(integrate_energies(mech, relative(PHI0), relative(PHID0), 1.0, dt))
         for dt in (4e-4, 2e-4)]
    assert 12.0 <= d[0] / d[1] <= 24.0, f"drift {d[0]:.2e} → {d[1]:.2e} when dt is halved"


@pytest.mark.parametrize("seed", range(3))
def test_random_tree_energy_integral(seed):
    """Branched trees of 3–8 bodies, revolute and prismatic joints, gravity in any direction."""
    rng = np.random.default_rng(100 + seed)
    mech = random_mechanism(rng, int(rng.integers(3, 9)))
    assert {"revolute", "prismatic"} <= set(mech.joint_types)
    q, v = rng.uniform(-1, 1, mech.nq), rng.normal(0, 1, mech.nq)
    energies = integrate_energies(mech, q, v, 2.0)
    d = drift(energies)
    print(f"random tree {seed} ({mech.n_bodies} bodies, {mech.joint_types}): drift {d:.2e}")
    assert d <= 1e-6, f"relative energy drift {d:.2e}"


def test_simulate_energy_refuses_an_output_too_short_for_its_samples():
    """Compiled code does not check indices: an energy table one row short would be written
    past its end (over the heap). The kernel refuses it instead, and writes nothing."""
    mech = load_mechanism(CONFIGS / "exo_leg.yaml")
    dyn = Dynamics(mech)
    short = np.full((2, 2), 7.0)  # 2 steps sampled every step need 3 rows
    with pytest.raises(ValueError, match="steps // every \\+ 1 rows"):
        simulate_energy(dyn.packed, dyn.workspace, np.zeros(mech.nq), np.zeros(mech.nq),
                        np.zeros(mech.nq), DT, 2, 1, rk4_scratch(mech.nq), short)
    assert (short == 7.0).all()
