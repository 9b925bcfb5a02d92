"""The shipped robot configs load, and say what their comments and the papers say.

- every configs/robots/**/*.yaml loads and describes itself;
- exo_leg: q = (hip, knee), pelvis fixed, the leg hangs straight down at q = 0, hip flexion
  swings the thigh forward, knee flexion bends the shank backwards, limits in rad;
- Borisov & Rozenblat 2017's 5-link model (§5): the paper's masses
  (total 2·2.91 + 2·8.93 + 28.93 = 52.61 kg), lengths and lumped-mass split, and — in the
  paper's absolute angles φ = S q — the paper's inertia matrices (eq. 7 rigid rods, eq. 8 lumped
  masses) and potential energy (§4).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.model import load_mechanism

ROBOTS = Path(__file__).resolve().parents[1] / "configs" / "robots"
CONFIGS = sorted(ROBOTS.rglob("*.yaml"))

# Borisov & Rozenblat 2017, §5 — the reference numbers these configs must encode
SEED_M = np.array([2.91, 8.93, 8.93, 2.91, 28.93])  # link masses, kg
SEED_L = np.array([0.385, 0.477, 0.477, 0.385, 0.771])  # link lengths, m
SEED_N1 = np.array([0.595, 0.545, 0.545, 0.595, 0.500])  # rod mass at n_i1·l_i (lumped)
SEED_SPLIT = np.array([0.25, 0.5, 0.25])  # of m_i: hinge A, rod, hinge B (lumped)
G = 9.81  # m/s²
LINKS = ("link1", "link2", "link3", "link4", "link5")


def test_every_config_is_shipped():
    names = {p.relative_to(ROBOTS).as_posix() for p in CONFIGS}
    assert {"arm2_planar.yaml", "borisov_5link.yaml", "borisov_5link_lumped.yaml",
            "exo_leg.yaml"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROBOTS).as_posix())
def test_config_loads(path):
    mech = load_mechanism(path)
    assert mech.nq >= 1
    assert mech.total_mass > 0 and np.isfinite(mech.total_mass)
    assert mech.total_mass == pytest.approx(mech.mass.sum(), rel=1e-12)
    assert np.all(np.isfinite(mech.packed))
    text = mech.describe()
    assert mech.name in text and all(j in text for j in mech.joint_names)


# --- exo_leg -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def leg():
    mech = load_mechanism(ROBOTS / "exo_leg.yaml")
    return mech, Dynamics(mech)


def test_exo_leg_coordinates_and_frames(leg):
    mech, dyn = leg
    assert mech.joint_names == ("hip", "knee")
    assert mech.body_names[0] == "pelvis"  # the fixed base
    np.testing.assert_array_equal(mech.gravity, [0.0, 0.0, -9.81])
    thigh, shank = mech.body_names.index("thigh"), mech.body_names.index("shank")
    pos = dyn.frame_positions(np.zeros(2))
    rot = dyn.frame_rotations(np.zeros(2))
    # q = 0: the knee axis straight below the hip axis, both links pointing down (−z)
    hip_to_knee = pos[shank] - pos[thigh]
    assert hip_to_knee[2] < -0.3 and np.allclose(hip_to_knee[:2], 0.0, atol=1e-12)
    for b in (thigh, shank):
        np.testing.assert_allclose(rot[b] @ [0, 0, -1], [0, 0, -1], atol=1e-12)


def test_exo_leg_sign_conventions(leg):
    """+hip flexion swings the thigh forward (+x), +knee flexion the shank backwards (−x)."""
    mech, dyn = leg
    thigh, shank = mech.body_names.index("thigh"), mech.body_names.index("shank")
    down = np.array([0.0, 0.0, -1.0])
    rot = dyn.frame_rotations(np.array([0.5, 0.0]))
    assert (rot[thigh] @ down)[0] == pytest.approx(np.sin(0.5), rel=1e-12)
    assert dyn.frame_positions(np.array([0.5, 0.0]))[shank][0] > 0.1  # knee forward of hip
    rot = dyn.frame_rotations(np.array([0.0, 0.5]))
    assert (rot[shank] @ down)[0] == pytest.approx(-np.sin(0.5), rel=1e-12)
    np.testing.assert_allclose(rot[thigh] @ down, down, atol=1e-12)  # thigh unmoved
    # the knee flexed 0.5 rad with the hip flexed 0.5 rad: shank vertical again
    rot = dyn.frame_rotations(np.array([0.5, 0.5]))
    np.testing.assert_allclose(rot[shank] @ down, down, atol=1e-12)


def test_exo_leg_limits_are_in_radians(leg):
    mech, _ = leg
    hip, knee = mech.coordinate_names.index("hip"), mech.coordinate_names.index("knee")
    assert -0.5 <= mech.lower[hip] < 0 < 1.9 <= mech.upper[hip] <= 2.2
    assert -0.2 <= mech.lower[knee] <= 0 < 1.9 <= mech.upper[knee] <= 2.2
    for i in (hip, knee):
        assert 0 < mech.velocity_limit[i] < 20 and 0 < mech.effort_limit[i] < 500


# --- Borisov & Rozenblat 2017's 5-link model --------------------------------------------

def _five_link(name):
    mech = load_mechanism(ROBOTS / name)
    idx = [mech.body_names.index(b) for b in LINKS]
    return mech, idx


@pytest.mark.parametrize("name", ["borisov_5link.yaml", "borisov_5link_lumped.yaml"])
def test_five_link_masses_and_lengths(name):
    mech, idx = _five_link(name)
    assert mech.total_mass == pytest.approx(2 * 2.91 + 2 * 8.93 + 28.93, rel=1e-12)  # 52.61 kg
    np.testing.assert_allclose(mech.mass[idx], SEED_M, rtol=1e-12)
    # serial chain: joint i+1 sits at the far end B of link i, along its x axis
    np.testing.assert_allclose(mech.origin_xyz[idx[1:]], np.c_[SEED_L[:4], np.zeros((4, 2))],
                               atol=1e-15)
    np.testing.assert_array_equal(mech.parent[idx], [0] + idx[:4])
    np.testing.assert_array_equal(mech.axis[idx], np.tile([0.0, 0.0, 1.0], (5, 1)))
    np.testing.assert_allclose(mech.gravity, [0.0, -G, 0.0])


def test_five_link_rigid_rods():
    mech, idx = _five_link("borisov_5link.yaml")
    np.testing.assert_allclose(mech.com[idx], np.c_[SEED_L / 2, np.zeros((5, 2))], atol=1e-15)
    inertia = mech.inertia[idx]
    np.testing.assert_allclose(inertia[:, 2, 2], SEED_M * SEED_L**2 / 12, rtol=1e-12)
    np.testing.assert_allclose(inertia[:, 1, 1], SEED_M * SEED_L**2 / 12, rtol=1e-12)
    np.testing.assert_allclose(inertia[:, 0, 0], SEED_M * 0.01**2 / 2, rtol=1e-12)  # r = 1 cm


def test_five_link_lumped_masses():
    mech, idx = _five_link("borisov_5link_lumped.yaml")
    x = np.c_[np.zeros(5), SEED_N1 * SEED_L, SEED_L]  # A, C, B along the rod
    mk = SEED_M[:, None] * SEED_SPLIT
    c = (mk * x).sum(axis=1) / SEED_M
    np.testing.assert_allclose(mech.com[idx], np.c_[c, np.zeros((5, 2))], rtol=1e-12, atol=1e-15)
    izz = (mk * (x - c[:, None]) ** 2).sum(axis=1)
    np.testing.assert_allclose(mech.inertia[idx, 2, 2], izz, rtol=1e-12)
    np.testing.assert_allclose(mech.inertia[idx, 0, 0], 0.0, atol=1e-15)  # points on the rod


def _paper_inertia_matrix(phi, lumped: bool) -> np.ndarray:
    """Borisov & Rozenblat 2017's A(φ) at constant lengths (ξ = 0): eq. 7 (rigid rods) or
    eq. 8 (lumped).

    Printed for i ≤ j; A is symmetric (as the matrix A_n of eq. 9 shows). Rigid: I_i is the
    link's moment about its hinge (eq. 9's diagonal at ξ = 0), m l²/3 for a uniform rod.
    """
    n = len(phi)
    beyond = np.array([SEED_M[k + 1:].sum() for k in range(n)])  # Σ_{k>j} m_k
    a = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            if lumped:
                nb = np.array([0.0, SEED_N1[j], 1.0])
                mb = SEED_M[j] * SEED_SPLIT
                own = (mb * nb**2).sum() if i == j else (mb * nb).sum()
                a[i, j] = SEED_L[i] * SEED_L[j] * (own + beyond[j]) * np.cos(phi[i] - phi[j])
            elif i == j:
                a[i, i] = SEED_M[i] * SEED_L[i] ** 2 / 3 + SEED_L[i] ** 2 * beyond[i]
            else:
                a[i, j] = (SEED_L[i] * (SEED_M[j] * SEED_L[j] / 2 + SEED_L[j] * beyond[j])
                           * np.cos(phi[i] - phi[j]))
            a[j, i] = a[i, j]
    return a


def _paper_potential(phi, lumped: bool) -> float:
    """Π with the datum at the ground pivot. Lumped: Borisov & Rozenblat 2017 §4,
    g Σ_i Σ_β (m_iβ n_iβ + Σ_{j>i} m_jβ) l_i sin φ_i. Rigid: COM at l_i/2 (eqs. 2, 7),
    g Σ_i m_i y_ci."""
    beyond = np.array([SEED_M[k + 1:].sum() for k in range(len(phi))])
    if lumped:
        own = SEED_M * (SEED_SPLIT[1] * SEED_N1 + SEED_SPLIT[2])
    else:
        own = SEED_M / 2
    return float(G * np.sum((own + beyond) * SEED_L * np.sin(phi)))


@pytest.mark.parametrize("name", ["borisov_5link.yaml", "borisov_5link_lumped.yaml"])
def test_five_link_matches_the_papers_equations(name):
    """Our M (relative q) = Sᵀ A(φ) S and our Π = the paper's Π, with φ = S q."""
    lumped = "lumped" in name
    mech = load_mechanism(ROBOTS / name)
    dyn = Dynamics(mech)
    s = np.tril(np.ones((5, 5)))
    rng = np.random.default_rng(7)
    states = [np.array([1.68, 1.70, 1.21, 0.39, 1.57])] + [rng.uniform(-np.pi, np.pi, 5)
                                                             for _ in range(20)]
    for phi in states:
        q = np.linalg.solve(s, phi)
        m_ref = s.T @ _paper_inertia_matrix(phi, lumped) @ s
        np.testing.assert_allclose(dyn.mass_matrix(q), m_ref, rtol=1e-12,
                                   atol=1e-13 * np.abs(m_ref).max())
        _ke, pe = dyn.energy(q, np.zeros(5))
        assert pe == pytest.approx(_paper_potential(phi, lumped), rel=1e-12, abs=1e-10)
