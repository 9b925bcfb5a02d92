"""Modules (Chung & Yi) and the wearer (Borisov & Rozenblat 2017, de Leva 1996)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.model import anthropometry, load_mechanism

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = ROOT / "configs" / "robots"


def test_composed_robot_equals_its_one_file_twin():
    """Chung & Yi's validation: equal inverse-dynamics torques, to 1e-12, on random states."""
    composed = load_mechanism(ROBOTS / "hybrid_modules.yaml")
    twin = load_mechanism(Path(__file__).parent / "data" / "hybrid_one_file.yaml")
    assert composed.joint_names == twin.joint_names
    da, db = Dynamics(composed), Dynamics(twin)
    rng = np.random.default_rng(5)
    q0 = composed.closure.reference[composed.closure.independent]
    for _ in range(20):
        q = q0 + rng.uniform(-0.1, 0.1, composed.nq)
        v, a = rng.normal(0, 1, composed.nq), rng.normal(0, 3, composed.nq)
        ta, tb = da.inverse_dynamics(q, v, a), db.inverse_dynamics(q, v, a)
        assert np.max(np.abs(ta - tb)) <= 1e-12 * max(1.0, np.max(np.abs(tb)))
        np.testing.assert_allclose(da.mass_matrix(q), db.mass_matrix(q), rtol=1e-12, atol=1e-15)


def test_two_leg_robot_is_two_copies_of_the_leg_module():
    one = load_mechanism(ROBOTS / "exo_leg.yaml")
    two = load_mechanism(ROBOTS / "exo_2leg.yaml")
    assert two.joint_names == ("left_hip", "left_knee", "right_hip", "right_knee")
    rng = np.random.default_rng(2)
    q, v, a = rng.uniform(-0.5, 1, 2), rng.normal(0, 1, 2), rng.normal(0, 2, 2)
    z = np.zeros(2)
    # the left leg moving alone feels exactly the one-leg robot's torques (same wearer tables)
    tau_two = Dynamics(two).inverse_dynamics(np.r_[q, z], np.r_[v, z], np.r_[a, z])
    np.testing.assert_allclose(tau_two[:2], Dynamics(one).inverse_dynamics(q, v, a), rtol=1e-12)


@pytest.mark.parametrize("sex", ["male", "female"])
def test_wearer_segments_follow_de_leva(tmp_path, sex):
    """Segment masses and COMs of two bodies (male / female) from de Leva's Table 4."""
    mass, height = (80.0, 1.80) if sex == "male" else (62.0, 1.65)
    path = tmp_path / "w.yaml"
    path.write_text(f"""\
name: w
bodies:
  - {{name: pelvis}}
  - {{name: thigh, mass: 1e-9, inertia: {{ixx: 1e-12, iyy: 1e-12, izz: 1e-12}}}}
  - {{name: shank, mass: 1e-9, inertia: {{ixx: 1e-12, iyy: 1e-12, izz: 1e-12}}}}
joints:
  - {{name: hip, type: revolute, parent: pelvis, child: thigh, axis: [0, 1, 0]}}
  - {{name: knee, type: revolute, parent: thigh, child: shank, origin: {{xyz: [0, 0, -0.43]}},
     axis: [0, 1, 0]}}
wearer:
  mass: {mass}
  height: {height}
  sex: {sex}
  segments:
    - {{segment: thigh, body: thigh, proximal: [0, 0, 0], distal: knee}}
    - {{segment: shank, body: shank, proximal: [0, 0, 0], distal: [0, 0, -0.41]}}
""")
    mech = load_mechanism(path)
    table = {"male": {"thigh": (0.1416, 0.4095, 0.329, 0.329, 0.149),
                      "shank": (0.0433, 0.4459, 0.255, 0.249, 0.103)},
             "female": {"thigh": (0.1478, 0.3612, 0.369, 0.364, 0.162),
                        "shank": (0.0481, 0.4416, 0.271, 0.267, 0.093)}}[sex]
    for body, length in (("thigh", 0.43), ("shank", 0.41)):
        frac, com, r_sag, r_tra, r_long = table[body]
        i = mech.body_names.index(body)
        assert mech.mass[i] == pytest.approx(frac * mass + 1e-9, rel=1e-9)
        assert mech.com[i][2] == pytest.approx(-com * length, rel=1e-6)
        m = frac * mass
        # lateral y is the sagittal (flexion) axis, x the transverse, z the segment axis
        np.testing.assert_allclose(
            np.diag(mech.inertia[i]),
            [m * (r_tra * length) ** 2, m * (r_sag * length) ** 2, m * (r_long * length) ** 2],
            rtol=1e-6)


def test_stature_scaled_length():
    seg = anthropometry.segment("thigh", 70.0, 1.741, "male")
    assert seg.length == pytest.approx(0.4222)
    assert anthropometry.segment("foot", 60.0, 1.735 * 1.1, "female").length == pytest.approx(
        0.2283 * 1.1)


def test_numba_cache_is_keyed_to_the_sources(tmp_path):
    """Editing any module (not only a kernel's own file) moves numba's cache: a kernel that
    inlines another module's function never runs stale code."""
    import os
    import subprocess
    import sys

    from exo_rt.numba_settings import source_key

    (tmp_path / "pkg").mkdir()
    kernel, law = tmp_path / "pkg" / "plant.py", tmp_path / "pkg" / "law.py"
    kernel.write_text("x = 1\n")
    law.write_text("y = 2\n")
    before = source_key(tmp_path)
    assert source_key(tmp_path) == before
    law.write_text("y = 3  # edited\n")
    assert source_key(tmp_path) != before
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", "import os, exo_rt.jit, numba.core.config as c; "
                          "print(os.environ['NUMBA_CACHE_DIR'], c.CACHE_DIR)"], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1] and out[0].startswith(str(tmp_path / "cache" / "exo-rt" / "numba-"))
