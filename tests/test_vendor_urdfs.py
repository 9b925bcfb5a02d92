"""Real robot descriptions, as a lab would try them: every URDF that the ``example-robot-data``
wheel (a PyPI package of public robots: arms, quadrupeds, humanoids, hands) ships.

Each one with a movable joint loads; the dynamics agree with Pinocchio (which reads the same
file with its own parser) to 1e-12 relative; the files with implausible inertias (CAD exports
outside the triangle inequality, zero-mass links with inertia, products of inertia of the wrong
sign) load with warnings that are counted here — a broken inertia fixed to the base is not
(tiago's antenna), and strict loading refuses exactly those.
Base links whose inertia is broken at 1e-22 (go1, b1, anymal, hyq) and inertias broken at
rounding level (icub, ±1e-20) load silently.
"""

from __future__ import annotations

from importlib import metadata

import numpy as np
import pytest

from exo_rt.dynamics import Dynamics
from exo_rt.errors import ModelError
from exo_rt.model import load_urdf

pin = pytest.importorskip("pinocchio")
REL = 1e-12


def _urdfs() -> dict[str, str]:
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return {}
    out = {}
    for f in dist.files or ():
        s = str(f)
        if s.endswith(".urdf") and "/robots/" in s:
            out[s.split("/robots/", 1)[1]] = str(dist.locate_file(f))
    return dict(sorted(out.items()))


URDFS = _urdfs()
needs_robots = pytest.mark.skipif(not URDFS, reason="example-robot-data is not installed")

# what the wheel's files hold that is not a mechanism: refused, with the reason
NOT_A_MECHANISM = {
    "hector_description/robots/quadrotor_base.urdf": "no movable joint",  # one rigid body
    "iris_description/robots/iris_simple.urdf": "no movable joint",
    "ur_description/urdf/ur3.urdf": "no links",  # an empty xacro output
}
# implausible but finite: loads with this many warnings (at least; the kinds named)
WARNED = {
    "allegro_hand_description/urdf/allegro_left_hand.urdf": (4, "triangle inequality"),
    "allegro_hand_description/urdf/allegro_right_hand.urdf": (4, "triangle inequality"),
    "bolt_description/robots/bolt.urdf": (2, "inertia but zero mass"),
    "pr2_description/urdf/pr2.urdf": (2, "triangle inequality"),
    "romeo_description/urdf/romeo_small.urdf": (2, "triangle inequality"),
    "romeo_description/urdf/romeo_laas_small.urdf": (4, "triangle inequality"),
    "hyq_description/robots/hyq_no_sensors.urdf": (4, "triangle inequality"),
    "alex_description/urdf/alex_psyonic_hands.urdf": (12, "mimics unknown movable joint"),
}
# fixed-base inertias broken at 1e-22, rounding-level ones: load with no warning at all
SILENT = ("go1_description/urdf/go1.urdf", "b1_description/urdf/b1.urdf",
          "anymal_b_simple_description/robots/anymal.urdf", "icub_description/robots/icub.urdf")


@needs_robots
def test_every_robot_with_a_movable_joint_loads_and_warnings_are_counted():
    assert len(URDFS) >= 60, f"only {len(URDFS)} URDFs found in example-robot-data"
    loaded, warned, refused = {}, {}, {}
    for name, path in URDFS.items():
        try:
            mech = load_urdf(path)
        except ModelError as exc:
            refused[name] = str(exc)
            continue
        loaded[name] = mech.nq
        if mech.warnings:
            warned[name] = [str(w) for w in mech.warnings]
            for w in warned[name]:
                assert f"{path}:" in w and " — " in w, w  # file:line and the fix
    assert set(refused) == set(NOT_A_MECHANISM), refused
    for name, why in NOT_A_MECHANISM.items():
        assert why in refused[name], refused[name]
    for name, (count, kind) in WARNED.items():
        if name in URDFS:
            assert len(warned.get(name, ())) == count, (name, warned.get(name))
            assert any(kind in w for w in warned[name]), warned[name]
    for name in SILENT:
        if name in URDFS:
            assert name in loaded and name not in warned, warned.get(name)
    total = sum(len(w) for w in warned.values())
    print(f"{len(loaded)} of {len(URDFS)} URDFs load ({len(refused)} are not mechanisms); "
          f"{len(warned)} with {total} warnings")


@needs_robots
@pytest.mark.parametrize("name", [n for n in WARNED if n in URDFS])
def test_strict_refuses_the_warned_robots(name):
    first = str(load_urdf(URDFS[name]).warnings[0])
    with pytest.raises(ModelError) as info:
        load_urdf(URDFS[name], strict=True)
    msg = str(info.value)
    assert "(strict" in msg and first.split(" — ")[0].split(": ")[0] in msg, (msg, first)


class _Pin:
    """Pinocchio's own model of the file, with our q order mapped onto its coordinates."""

    def __init__(self, path: str, mech) -> None:
        # <mimic> joints as coupled joints (Pinocchio's default reads them as independent)
        mimic = mech.nz != mech.nq or len(mech.tree_joint_names) - 1 > mech.nq
        self.model = pin.buildModelFromUrdf(path, mimic=mimic)
        self.model.gravity.linear = np.array(mech.gravity)
        self.data = self.model.createData()
        self.ok = self.model.nv == mech.nq and all(
            self.model.existJointName(n) for n in mech.joint_names)
        if not self.ok:
            return
        jids = [self.model.getJointId(n) for n in mech.joint_names]
        self.iv = np.array([self.model.idx_vs[j] for j in jids])
        self.qs = [(self.model.idx_qs[j], self.model.joints[j].nq) for j in jids]

    def config(self, q):
        y = pin.neutral(self.model)
        for (s, nq), x in zip(self.qs, q, strict=True):
            if nq == 2:  # continuous joints: (cos, sin)
                y[s:s + 2] = np.cos(x), np.sin(x)
            else:
                y[s] = x
        return y

    def full(self, x):
        y = np.zeros(self.model.nv)
        y[self.iv] = x
        return y


def _close(ours, ref, what):
    ours, ref = np.asarray(ours), np.asarray(ref)
    err = float(np.max(np.abs(ours - ref)))
    scale = max(1.0, float(np.max(np.abs(ref))))
    assert err <= REL * scale, f"{what}: {err:.3e} > {REL:g} × {scale:.3g}"
    return err / scale


@needs_robots
@pytest.mark.parametrize("name", [n for n in URDFS if n not in NOT_A_MECHANISM])
def test_dynamics_agree_with_pinocchio(name):
    path = URDFS[name]
    mech = load_urdf(path)
    try:
        ref = _Pin(path, mech)
    except Exception as exc:  # Pinocchio's parser refuses some files: compare where it loads
        pytest.skip(f"Pinocchio does not load it: {exc}")
    if not ref.ok:  # e.g. Pinocchio reads <mimic> (coupled joints) differently
        pytest.skip(f"Pinocchio's joints differ (nv {ref.model.nv} vs {mech.nq})")
    dyn = Dynamics(mech)
    rng = np.random.default_rng(len(name))
    worst = 0.0
    for _ in range(2):
        q = rng.uniform(-1.5, 1.5, mech.nq)
        v, a = rng.normal(0, 1, mech.nq), rng.normal(0, 1, mech.nq)
        y, yv, ya = ref.config(q), ref.full(v), ref.full(a)
        m = pin.crba(ref.model, ref.data, y)
        m = (np.triu(m) + np.triu(m, 1).T)[np.ix_(ref.iv, ref.iv)]
        worst = max(worst, _close(dyn.mass_matrix(q), m, "M"))
        nle = pin.nonLinearEffects(ref.model, ref.data, y, yv)[ref.iv]
        worst = max(worst, _close(dyn.bias_forces(q, v), nle, "h"))
        tau = pin.rnea(ref.model, ref.data, y, yv, ya)[ref.iv]
        worst = max(worst, _close(dyn.inverse_dynamics(q, v, a), tau, "ID"))
        g = pin.computeGeneralizedGravity(ref.model, ref.data, y)[ref.iv]
        worst = max(worst, _close(dyn.gravity(q), g, "g"))
    assert worst <= REL
