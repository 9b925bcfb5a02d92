"""Rigid-body dynamics of a :class:`~exo_rt.model.Mechanism` (DESIGN §3.2).

:class:`Dynamics` is the thin Python facade (it owns a workspace and calls the njit kernels of
:mod:`exo_rt.dynamics.kernels`); laws and the plant call the kernels directly inside njit.
"""

from __future__ import annotations

import numpy as np

from exo_rt.dynamics import kernels
from exo_rt.model.mechanism import Mechanism

__all__ = ["Dynamics", "kernels"]


def _f64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


class Dynamics:
    """Mass matrix, bias forces, inverse/forward dynamics, energy and frames of a mechanism.

    All arrays are float64 and ordered as ``mech.joint_names`` (SI: rad, m, rad/s, N·m, N).
    Each method accepts ``out=`` to write into the caller's array and then allocates nothing.
    One instance owns one workspace: do not share an instance between threads.
    """

    def __init__(self, mech: Mechanism) -> None:
        self.mech = mech
        self.nq = mech.nq
        self._pk = mech.packed
        self._ws = np.zeros(kernels.workspace_size(mech.n_bodies, mech.nq))

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
