"""Pinocchio twin of a mechanism: the independent reference for the dynamics tests.

Pinocchio reads the same URDF text (its parser builds the tree depth-first, which its CRBA
needs — DESIGN §3.2). Coordinates are mapped by joint name, since the two libraries may order
them differently.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from exo_rt.model.mechanism import Mechanism
from exo_rt.model.topology import matrix_rpy


class PinTwin:
    """A Pinocchio model of ``urdf_text`` with our q order mapped onto Pinocchio's."""

    def __init__(self, urdf_text: str, mech: Mechanism) -> None:
        self.model = pin.buildModelFromXML(urdf_text)
        self.model.gravity.linear = np.array(mech.gravity, dtype=float)
        self.data = self.model.createData()
        self.mech = mech
        self.idx = np.array(
            [self.model.idx_qs[self.model.getJointId(n)] for n in mech.joint_names], dtype=int
        )
        assert self.model.nq == mech.nq, "Pinocchio and exo-rt disagree on the number of joints"

    def _full(self, x: np.ndarray) -> np.ndarray:
        y = np.zeros(self.model.nq)
        y[self.idx] = x
        return y

    def rnea(self, q, v, a):
        return pin.rnea(self.model, self.data, self._full(q), self._full(v), self._full(a))[
            self.idx
        ]

    def crba(self, q):
        m = pin.crba(self.model, self.data, self._full(q))
        m = np.triu(m) + np.triu(m, 1).T
        return m[np.ix_(self.idx, self.idx)]

    def gravity(self, q):
        return pin.computeGeneralizedGravity(self.model, self.data, self._full(q))[self.idx]

    def nle(self, q, v):
        return pin.nonLinearEffects(self.model, self.data, self._full(q), self._full(v))[self.idx]

    def aba(self, q, v, tau):
        return pin.aba(self.model, self.data, self._full(q), self._full(v), self._full(tau))[
            self.idx
        ]

    def energy(self, q, v):
        ke = pin.computeKineticEnergy(self.model, self.data, self._full(q), self._full(v))
        pe = pin.computePotentialEnergy(self.model, self.data, self._full(q))
        return ke, pe

    def frame_positions(self, q):
        """World origin of each of our bodies (base first), from Pinocchio's joint placements."""
        pin.forwardKinematics(self.model, self.data, self._full(q))
        out = np.zeros((self.mech.n_bodies, 3))
        for i in range(1, self.mech.n_bodies):
            jid = self.model.getJointId(self.mech.tree_joint_names[i])
            out[i] = self.data.oMi[jid].translation
        return out


def assert_close(ours, ref, rel: float, what: str) -> None:
    """‖ours − ref‖∞ ≤ rel · max(1, ‖ref‖∞): relative agreement with a floor for tiny values."""
    ours = np.asarray(ours, dtype=float)
    ref = np.asarray(ref, dtype=float)
    err = float(np.max(np.abs(ours - ref))) if ours.size else 0.0
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    assert err <= rel * scale, f"{what}: error {err:.3e} exceeds {rel:g} × {scale:.3g}"


def mechanism_urdf(mech: Mechanism) -> str:
    """URDF text of a (tree) mechanism, body by body, so Pinocchio can read a robot YAML."""

    def f(v) -> str:
        return " ".join(repr(float(x)) for x in np.ravel(v))

    out = [f'<robot name="{mech.name}">']
    for i, b in enumerate(mech.body_names):
        inertia = mech.inertia[i]
        out.append(
            f'<link name="{b}"><inertial><origin xyz="{f(mech.com[i])}" rpy="0 0 0"/>'
            f'<mass value="{float(mech.mass[i])!r}"/><inertia ixx="{float(inertia[0, 0])!r}" '
            f'ixy="{float(inertia[0, 1])!r}" ixz="{float(inertia[0, 2])!r}" '
            f'iyy="{float(inertia[1, 1])!r}" iyz="{float(inertia[1, 2])!r}" '
            f'izz="{float(inertia[2, 2])!r}"/></inertial></link>'
        )
    for i in range(1, mech.n_bodies):
        jt = "prismatic" if mech.joint_type[i] == 2 else "revolute"
        name = mech.tree_joint_names[i]
        out.append(
            f'<joint name="{name}" type="{jt}"><parent link="{mech.body_names[mech.parent[i]]}"/>'
            f'<child link="{mech.body_names[i]}"/><origin xyz="{f(mech.origin_xyz[i])}" '
            f'rpy="{f(matrix_rpy(mech.origin_rot[i]))}"/><axis xyz="{f(mech.axis[i])}"/>'
            f'<limit lower="-10" upper="10" effort="100" velocity="10"/></joint>'
        )
    out.append("</robot>")
    return "\n".join(out)
