"""Rigid-body dynamics of a :class:`~exo_rt.model.Mechanism` (DESIGN §3.2).

:class:`Dynamics` is the thin Python facade (it owns a workspace and calls the njit kernels of
:mod:`exo_rt.dynamics.kernels`); laws and the plant call the kernels directly inside njit.
"""

from __future__ import annotations

import numpy as np

from exo_rt.dynamics import kernels, loops
from exo_rt.errors import ModelError
from exo_rt.model.mechanism import Mechanism

__all__ = ["ClosedChainDynamics", "Dynamics", "kernels"]


def _f64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


class Dynamics:
    """Mass matrix, bias forces, inverse/forward dynamics, energy and frames of a mechanism.

    All arrays are float64 and ordered as ``mech.joint_names`` (SI: rad, m, rad/s, N·m, N).
    Each method accepts ``out=`` to write into the caller's array and then allocates nothing.
    One instance owns one workspace: do not share an instance between threads.
    """

    def __new__(cls, mech: Mechanism):
        if cls is Dynamics and mech.closure is not None:
            return super().__new__(ClosedChainDynamics)
        return super().__new__(cls)

    def __init__(self, mech: Mechanism) -> None:
        self.mech = mech
        self.nq = mech.nq
        self._pk = mech.packed
        self._ws = np.zeros(kernels.workspace_size(mech.n_bodies, mech.nz))

    @property
    def packed(self) -> np.ndarray:
        """The mechanism's packed arrays (first argument of every kernel)."""
        return self._pk

    @property
    def workspace(self) -> np.ndarray:
        """This instance's workspace (second argument of every kernel)."""
        return self._ws

    def mass_matrix(self, q, out=None) -> np.ndarray:
        """M(q), (nq, nq), symmetric positive definite (kg·m², kg)."""
        if out is None:
            out = np.empty((self.nq, self.nq))
        try:
            kernels.mass_matrix(self._pk, self._ws, q, out)
        except TypeError:
            kernels.mass_matrix(self._pk, self._ws, _f64(q), out)
        return out

    def bias_forces(self, q, v, out=None) -> np.ndarray:
        """h(q, v) = C(q, v) v + g(q), (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        try:
            kernels.bias_forces(self._pk, self._ws, q, v, out)
        except TypeError:
            kernels.bias_forces(self._pk, self._ws, _f64(q), _f64(v), out)
        return out

    def gravity(self, q, out=None) -> np.ndarray:
        """g(q) = ∂V/∂q, (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        try:
            kernels.gravity_forces(self._pk, self._ws, q, out)
        except TypeError:
            kernels.gravity_forces(self._pk, self._ws, _f64(q), out)
        return out

    def inverse_dynamics(self, q, v, a, out=None) -> np.ndarray:
        """τ = M(q) a + h(q, v), (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        try:
            kernels.inverse_dynamics(self._pk, self._ws, q, v, a, out)
        except TypeError:
            kernels.inverse_dynamics(self._pk, self._ws, _f64(q), _f64(v), _f64(a), out)
        return out

    def forward_dynamics(self, q, v, tau, out=None) -> np.ndarray:
        """a = M(q)⁻¹ (τ − h(q, v)), (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        try:
            kernels.forward_dynamics(self._pk, self._ws, q, v, tau, out)
        except TypeError:
            kernels.forward_dynamics(self._pk, self._ws, _f64(q), _f64(v), _f64(tau), out)
        return out

    def energy(self, q, v, out=None) -> tuple[float, float]:
        """(kinetic, potential) in J; potential = −Σ m_i gravity·c_i over the moving bodies."""
        if out is None:
            out = np.empty(2)
        try:
            kernels.energy(self._pk, self._ws, q, v, out)
        except TypeError:
            kernels.energy(self._pk, self._ws, _f64(q), _f64(v), out)
        return float(out[0]), float(out[1])

    def frame_positions(self, q, out=None) -> np.ndarray:
        """World origin of each body frame, (n_bodies, 3), in the order of ``mech.body_names``."""
        if out is None:
            out = np.empty((self.mech.n_bodies, 3))
        try:
            kernels.frame_positions(self._pk, self._ws, q, out)
        except TypeError:
            kernels.frame_positions(self._pk, self._ws, _f64(q), out)
        return out

    def frame_rotations(self, q, out=None) -> np.ndarray:
        """World rotation of each body frame, (n_bodies, 3, 3), in the order of ``body_names``."""
        if out is None:
            out = np.empty((self.mech.n_bodies, 3, 3))
        try:
            kernels.frame_rotations(self._pk, self._ws, q, out)
        except TypeError:
            kernels.frame_rotations(self._pk, self._ws, _f64(q), out)
        return out


class ClosedChainDynamics(Dynamics):
    """The same API for a mechanism closed by loops (``Dynamics(mech)`` returns one).

    q, v, a, τ are the independent coordinates (``mech.joint_names``); dependent ones are
    solved by Newton's method from the last solution (warm start). The equations are the
    reduced ones of seed 000 eq. 22: M̄(q) q̈ = τ − h̄(q, q̇), τ acting on the independent
    (actuated) coordinates. :meth:`complete` gives all tree coordinates.
    """

    def __init__(self, mech: Mechanism) -> None:
        super().__init__(mech)
        c = mech.closure
        nz, nd = mech.nz, len(c.dependent)
        self._lp = c.packed
        self._cidx = c.index
        self._cws = np.zeros(loops.workspace_size(nz, nd, c.n_rows))
        self._z = np.array(c.reference, dtype=float)
        self._zd = np.zeros(nz)
        self._m = np.empty((self.nq, self.nq))
        self._h = np.empty(self.nq)
        self._zero = np.zeros(self.nq)

    def _terms(self, q, v, gscale: float, vscale: float) -> None:
        q = _f64(q)
        v = self._zero if v is None else _f64(v)
        status = loops.reduced_terms(
            self._pk, self._ws, self._lp, self._cidx, self._cws, self._z, q, v,
            self._m, self._h, gscale, vscale,
        )
        if status < 0:
            self._z[:] = self.mech.closure.reference
            why = "does not converge" if status == -1 else "meets a singular partition"
            raise ModelError(
                f"the loops of '{self.mech.name}' cannot close at q = {np.round(q, 6).tolist()}"
                f" (Newton {why})",
                None, "stay inside the mechanism's workspace",
            )

    def complete(self, q, v=None) -> tuple[np.ndarray, np.ndarray]:
        """All tree coordinates (z, ż), ordered as ``mech.coordinate_names``."""
        self._terms(q, v, 0.0, 1.0)
        loops.complete_velocities(
            self._cws, self.mech.nz, len(self.mech.closure.dependent), self.mech.closure.n_rows,
            self._zd,
        )
        return self._z.copy(), self._zd.copy()

    def mass_matrix(self, q, out=None) -> np.ndarray:
        self._terms(q, None, 0.0, 0.0)
        return _store(self._m, out)

    def bias_forces(self, q, v, out=None) -> np.ndarray:
        self._terms(q, v, 1.0, 1.0)
        return _store(self._h, out)

    def gravity(self, q, out=None) -> np.ndarray:
        self._terms(q, None, 1.0, 0.0)
        return _store(self._h, out)

    def inverse_dynamics(self, q, v, a, out=None) -> np.ndarray:
        self._terms(q, v, 1.0, 1.0)
        return _store(self._m @ _f64(a) + self._h, out)

    def forward_dynamics(self, q, v, tau, out=None) -> np.ndarray:
        self._terms(q, v, 1.0, 1.0)
        if out is None:
            out = np.empty(self.nq)
        kernels.cholesky_solve(self._m, _f64(tau) - self._h, out)
        return out

    def energy(self, q, v, out=None) -> tuple[float, float]:
        z, zd = self.complete(q, v)
        if out is None:
            out = np.empty(2)
        kernels.energy(self._pk, self._ws, z, zd, out)
        return float(out[0]), float(out[1])

    def frame_positions(self, q, out=None) -> np.ndarray:
        z, _ = self.complete(q)
        return super().frame_positions(z, out)

    def frame_rotations(self, q, out=None) -> np.ndarray:
        z, _ = self.complete(q)
        return super().frame_rotations(z, out)


def _store(value: np.ndarray, out) -> np.ndarray:
    if out is None:
        return np.array(value)
    out[...] = value
    return out
