"""Pinocchio twin of a mechanism: the independent reference for the dynamics tests.

Pinocchio reads the same URDF text (its parser builds the tree depth-first, which its CRBA
needs — docs/dynamics.md). Coordinates are mapped by joint name, since the two libraries may order
them differently.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from exo_rt.dynamics import loops
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.urdf import write_urdf


class PinTwin:
    """A Pinocchio model of ``urdf_text`` with our q order mapped onto Pinocchio's."""

    def __init__(self, urdf_text: str, mech: Mechanism) -> None:
        self.model = pin.buildModelFromXML(urdf_text)
        self.model.gravity.linear = np.array(mech.gravity, dtype=float)
        self.data = self.model.createData()
        self.mech = mech
        jids = [self.model.getJointId(n) for n in mech.joint_names]
        self.idx = np.array([self.model.idx_vs[j] for j in jids], dtype=int)
        # continuous joints are (cos θ, sin θ) in Pinocchio's configuration vector
        self.qslots = [(self.model.idx_qs[j], self.model.joints[j].nq) for j in jids]
        assert self.model.nv == mech.nq, "Pinocchio and exo-rt disagree on the number of joints"

    def _config(self, q: np.ndarray) -> np.ndarray:
        y = pin.neutral(self.model)
        for (start, nq), value in zip(self.qslots, q, strict=True):
            if nq == 2:
                y[start : start + 2] = np.cos(value), np.sin(value)
            else:
                y[start] = value
        return y

    def _full(self, x: np.ndarray) -> np.ndarray:
        y = np.zeros(self.model.nv)
        y[self.idx] = x
        return y

    def rnea(self, q, v, a):
        return pin.rnea(self.model, self.data, self._config(q), self._full(v), self._full(a))[
            self.idx
        ]

    def crba(self, q):
        m = pin.crba(self.model, self.data, self._config(q))
        m = np.triu(m) + np.triu(m, 1).T
        return m[np.ix_(self.idx, self.idx)]

    def gravity(self, q):
        return pin.computeGeneralizedGravity(self.model, self.data, self._config(q))[self.idx]

    def nle(self, q, v):
        return pin.nonLinearEffects(self.model, self.data, self._config(q), self._full(v))[self.idx]

    def aba(self, q, v, tau):
        return pin.aba(self.model, self.data, self._config(q), self._full(v), self._full(tau))[
            self.idx
        ]

    def energy(self, q, v):
        ke = pin.computeKineticEnergy(self.model, self.data, self._config(q), self._full(v))
        pe = pin.computePotentialEnergy(self.model, self.data, self._config(q))
        return ke, pe

    def frame_positions(self, q):
        """World origin of each of our bodies (base first), from Pinocchio's joint placements."""
        pin.forwardKinematics(self.model, self.data, self._config(q))
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
    """URDF of the unconstrained tree (rotors as ordinary joints) for Pinocchio."""
    return write_urdf(mech, mimic=False, limits=False)


class TreeTwin:
    """Pinocchio model of the unconstrained tree: every body's joint is a coordinate."""

    def __init__(self, mech):
        self.model = pin.buildModelFromXML(mechanism_urdf(mech))
        self.model.gravity.linear = np.array(mech.gravity)
        self.data = self.model.createData()
        # R_z built here, from the joint list, independently of exo-rt's coupling code
        nt = mech.n_bodies - 1
        self.r = np.zeros((self.model.nq, mech.nq))
        self.c = np.zeros(self.model.nq)
        for i in range(1, mech.n_bodies):
            col = self.model.idx_qs[self.model.getJointId(mech.tree_joint_names[i])]
            self.r[col, mech.q_index[i]] = mech.mimic_multiplier[i]
            self.c[col] = mech.mimic_offset[i]
        assert self.model.nq == nt

    def reduced(self, q, v, a):
        z, zd, zdd = self.r @ q + self.c, self.r @ v, self.r @ a
        m = pin.crba(self.model, self.data, z)
        m = np.triu(m) + np.triu(m, 1).T
        h = pin.nonLinearEffects(self.model, self.data, z, zd)
        tau = pin.rnea(self.model, self.data, z, zd, zdd)
        return self.r.T @ m @ self.r, self.r.T @ h, self.r.T @ tau


class LagrangeReference:
    """Open-tree Pinocchio model + Pinocchio-computed constraint terms of a closed mechanism."""

    def __init__(self, mech):
        self.mech = mech
        self.model = pin.buildModelFromXML(mechanism_urdf(mech))
        self.model.gravity.linear = np.array(mech.gravity)
        self.data = self.model.createData()
        self.idx = np.array([self.model.idx_qs[self.model.getJointId(n)]
                             for n in mech.coordinate_names])
        self.jid = {i: self.model.getJointId(mech.tree_joint_names[i])
                    for i in range(1, mech.n_bodies)}

    def _full(self, x):
        y = np.zeros(self.model.nq)
        y[self.idx] = x
        return y

    def constraint_terms(self, z, zd):
        """Φ, Φ_z and γ from Pinocchio's kinematics (LOCAL_WORLD_ALIGNED)."""
        m, d = self.model, self.data
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        pin.forwardKinematics(m, d, self._full(z), self._full(zd), np.zeros(m.nv))
        pin.computeJointJacobians(m, d, self._full(z))
        phi, jac, gamma = [], [], []
        for row in self.mech.closure.packed:
            parts = {}
            for side, body, pcol in (("a", int(row[loops.LOOP_A]), loops.LOOP_PA),
                                     ("b", int(row[loops.LOOP_B]), loops.LOOP_PB)):
                jid = self.jid[body]
                om = d.oMi[jid]
                p = om.act(row[pcol:pcol + 3])
                r = p - om.translation
                jj = pin.getJointJacobian(m, d, jid, lwa)[:, self.idx]
                jp = jj[:3] - np.cross(r, jj[3:].T).T  # v_p = v_o + ω × r
                vel = pin.getVelocity(m, d, jid, lwa)
                acc = pin.getClassicalAcceleration(m, d, jid, lwa)
                w, alpha = vel.angular, acc.angular
                ap = acc.linear + np.cross(alpha, r) + np.cross(w, np.cross(w, r))
                parts[side] = (om.rotation, p, jp, jj[3:], w, alpha, ap)
            ra, pa, ja, jwa, wa, aa, acca = parts["a"]
            rb, pb, jb, jwb, wb, ab, accb = parts["b"]
            phi.extend(pa - pb)
            jac.extend(ja - jb)
            gamma.extend(acca - accb)
            if int(row[loops.LOOP_KIND]) == loops.KIND_REVOLUTE:
                n = ra @ row[loops.LOOP_NA:loops.LOOP_NA + 3]
                dn = np.cross(wa, n)
                ddn = np.cross(aa, n) + np.cross(wa, dn)
                for col in (loops.LOOP_M1, loops.LOOP_M2):
                    mm = rb @ row[col:col + 3]
                    dm = np.cross(wb, mm)
                    ddm = np.cross(ab, mm) + np.cross(wb, dm)
                    phi.append(n @ mm)
                    # d(n·m) = (ω_a × n)·m + n·(ω_b × m) = (n × m)·ω_a − (n × m)·ω_b
                    nm = np.cross(n, mm)
                    jac.append(nm @ jwa - nm @ jwb)
                    gamma.append(ddn @ mm + 2 * dn @ dm + n @ ddm)
        return np.array(phi), np.array(jac), np.array(gamma)

    def inverse_dynamics(self, z, zd, qdd):
        """τ on the independent coordinates for independent accelerations qdd."""
        mech = self.mech
        ind, dep = mech.closure.independent, mech.closure.dependent
        phi, jac, gamma = self.constraint_terms(z, zd)
        zdd = np.zeros(mech.nz)
        zdd[ind] = qdd
        zdd[dep] = np.linalg.lstsq(jac[:, dep], -gamma - jac[:, ind] @ qdd, rcond=None)[0]
        mz = pin.crba(self.model, self.data, self._full(z))
        mz = (np.triu(mz) + np.triu(mz, 1).T)[np.ix_(self.idx, self.idx)]
        hz = pin.nonLinearEffects(self.model, self.data, self._full(z), self._full(zd))[self.idx]
        r = mz @ zdd + hz
        lam = np.linalg.lstsq(jac[:, dep].T, r[dep], rcond=None)[0]
        return r[ind] - jac[:, ind].T @ lam, phi, zdd
