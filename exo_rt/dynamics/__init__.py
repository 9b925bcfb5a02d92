"""Rigid-body dynamics of a :class:`~exo_rt.model.Mechanism` (docs/dynamics.md).

:class:`Dynamics` is the thin Python facade (it owns a workspace and calls the njit kernels of
:mod:`exo_rt.dynamics.kernels`); laws and the plant call the kernels directly inside njit.

From Python, the cost of a small mechanism's call is mostly numba's, not the kernel's: the
dispatcher types every argument on every call, and a function compiled with the NRT wraps
every array argument in a reference-counted memory record (allocated and freed per call).
The facade's hot methods therefore call the compiled entry point of a thin wrapper built
without the NRT (``_nrt=False``: the kernels allocate nothing, so it is not needed), looked
up once per process for one fixed signature. That entry point checks nothing but the item
size, so the facade checks the rest itself, as cheaply as it can while staying safe:

- inputs (q, v, a, τ): ``dtype is float64`` and ``ndim == 1`` on every call (an object that
  only looks like that is refused by the entry point with ``TypeError``, caught); the wrapper
  takes them as read-only, unaligned, any-stride vectors, so every such array is read right;
- the output: a C-contiguous, aligned, writable float64 ndarray of the right ``ndim``, checked
  in full on the first call with that array and then remembered: calls with the same object
  only re-check its ``ndim`` (a shape can be reassigned in place, and the entry point trusts
  the dimensions for memory; a dtype or writeable flag changed in place is not seen);
- anything else (lists, integer arrays, a strided or float32 output, …) takes the general
  path: inputs converted with ``np.ascontiguousarray(…, float64)``, the kernel called through
  numba's dispatcher. A read-only output, or one or an input of the wrong ``ndim``, raises
  ``ValueError`` there; wrong lengths raise ``ValueError`` from the kernels on either path.
"""

from __future__ import annotations

import numpy as np
from numba import types

from exo_rt.dynamics import kernels, loops
from exo_rt.errors import ModelError
from exo_rt.jit import njit

__all__ = ["ClosedChainDynamics", "Dynamics", "kernels"]

_F8 = np.dtype(np.float64)


def _f64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def _proper_out(out, ndim: int) -> bool:
    """``out`` can be written by the entry points: a C-contiguous, aligned, writable
    float64 ndarray of ``ndim`` dimensions (its shape is checked by the kernel)."""
    return (isinstance(out, np.ndarray) and out.dtype is _F8 and out.ndim == ndim
            and out.flags.carray)


# --- thin wrappers without the NRT: what the facade calls from Python (see the docstring)
@njit(cache=True, _nrt=False)
def _inverse_dynamics(model, data, q, v, a, out):
    kernels.inverse_dynamics(model, data, q, v, a, out)


@njit(cache=True, _nrt=False)
def _mass_matrix(model, data, q, out):
    kernels.mass_matrix(model, data, q, out)


@njit(cache=True, _nrt=False)
def _bias_forces(model, data, q, v, out):
    kernels.bias_forces(model, data, q, v, out)


@njit(cache=True, _nrt=False)
def _gravity_forces(model, data, q, out):
    kernels.gravity_forces(model, data, q, out)


@njit(cache=True, _nrt=False)
def _forward_dynamics(model, data, q, v, tau, out):
    kernels.forward_dynamics(model, data, q, v, tau, out)


_PK = types.Array(types.float64, 2, "C", readonly=True)  # Mechanism.packed
_WS = types.Array(types.float64, 1, "C")  # the instance's workspace
_IN = types.Array(types.float64, 1, "A", readonly=True, aligned=False)  # q, v, a, τ
_OUT1 = types.Array(types.float64, 1, "C")
_OUT2 = types.Array(types.float64, 2, "C")
_SIGNATURES = {  # key: (wrapper, kernel, signature of both)
    "id": (_inverse_dynamics, kernels.inverse_dynamics, (_PK, _WS, _IN, _IN, _IN, _OUT1)),
    "mass": (_mass_matrix, kernels.mass_matrix, (_PK, _WS, _IN, _OUT2)),
    "bias": (_bias_forces, kernels.bias_forces, (_PK, _WS, _IN, _IN, _OUT1)),
    "gravity": (_gravity_forces, kernels.gravity_forces, (_PK, _WS, _IN, _OUT1)),
    "fd": (_forward_dynamics, kernels.forward_dynamics, (_PK, _WS, _IN, _IN, _IN, _OUT1)),
}
_ENTRY_POINTS: dict = {}


def _entry_points() -> dict:
    """The wrappers' compiled entry points (compiled, or loaded from the cache, once).

    Each kernel is compiled for the wrapper's signature *first*, on its own: numba compiles
    a callee with the caller's NRT setting when the callee does not set one, so a kernel
    first compiled while typing a ``_nrt=False`` wrapper would be an NRT-less overload,
    shared with every njit caller of that signature and cached under the same key as an
    NRT one — later processes then load a broken library (a crash in LLVM's bitcode reader,
    or heap corruption). Compiled beforehand, the wrapper finds the overload and reuses it.
    """
    if not _ENTRY_POINTS:
        for key, (wrapper, kernel, sig) in _SIGNATURES.items():
            kernel.compile(sig)
            _ENTRY_POINTS[key] = wrapper.compile(sig)
    return _ENTRY_POINTS


class Dynamics:
    """Mass matrix, bias forces, inverse/forward dynamics, energy and frames of a mechanism.

    All arrays are float64 and ordered as ``mech.joint_names`` (SI: rad, m, rad/s, N·m, N).
    Each method accepts ``out=`` to write into the caller's array and then allocates nothing;
    the fastest calls pass float64 vectors and a C-contiguous float64 ``out`` reused from call
    to call (the instance keeps a reference to the last ``out`` of each method). Other
    array-likes are accepted and converted. One instance owns one workspace: do not share an
    instance between threads. ``mech`` is an :class:`exo_rt.model.mechanism.Mechanism`, read by
    its attributes: the dynamics sits below the model (docs/architecture.md, "Layers").
    """

    def __new__(cls, mech):
        if cls is Dynamics and mech.closure is not None:
            return super().__new__(ClosedChainDynamics)
        return super().__new__(cls)

    def __init__(self, mech) -> None:
        self.mech = mech
        self.nq = mech.nq
        self._pk, self._ws = kernels.model_and_data(mech)
        ep = _entry_points()
        self._ep_id, self._ep_mass, self._ep_fd = ep["id"], ep["mass"], ep["fd"]
        self._ep_bias, self._ep_gravity = ep["bias"], ep["gravity"]
        # the last output array of each method that passed _proper_out
        self._out_id = self._out_mass = self._out_fd = self._out_bias = self._out_gravity = None

    def warm_up(self) -> None:
        """Call every method once at rest (q = v = τ = 0): each kernel compiled — or loaded
        from numba's cache — now, not at a caller's first call (``exo-rt warmup``)."""
        z = np.zeros(self.nq)
        self.mass_matrix(z), self.bias_forces(z, z), self.gravity(z)
        self.inverse_dynamics(z, z, z), self.forward_dynamics(z, z, z), self.energy(z, z)
        self.frame_positions(z), self.frame_rotations(z)

    @property
    def packed(self) -> np.ndarray:
        """The mechanism's packed arrays (first argument of every kernel)."""
        return self._pk

    @property
    def workspace(self) -> np.ndarray:
        """This instance's workspace (second argument of every kernel)."""
        return self._ws

    def _general(self, kernel, out, ndim: int, *xs) -> np.ndarray:
        """Array-likes and any writable ``out`` array of ``ndim`` dimensions (another dtype or
        layout: numba's dispatcher compiles for it): the inputs converted to float64."""
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
        if out.ndim != ndim or not out.flags.writeable:
            raise ValueError(f"out must be a writable {ndim}-D array"
                             f" ({out.ndim}-D{'' if out.flags.writeable else ', read-only'})")
        xs = [_f64(x) for x in xs]
        if any(x.ndim != 1 for x in xs):
            raise ValueError("q, v, a and tau must be vectors (1-D)")
        kernel(self._pk, self._ws, *xs, out)
        return out

    def mass_matrix(self, q, out=None) -> np.ndarray:
        """M(q), (nq, nq), symmetric positive definite (kg·m², kg)."""
        if out is None:
            out = np.empty((self.nq, self.nq))
        elif out is not self._out_mass or out.ndim != 2:
            if not _proper_out(out, 2):
                return self._general(kernels.mass_matrix, out, 2, q)
            self._out_mass = out
        try:
            if q.dtype is _F8 and q.ndim == 1:
                self._ep_mass(self._pk, self._ws, q, out)
                return out
        except (AttributeError, TypeError):  # not an ndarray (TypeError: from the entry point)
            pass
        return self._general(kernels.mass_matrix, out, 2, q)

    def bias_forces(self, q, v, out=None) -> np.ndarray:
        """h(q, v) = C(q, v) v + g(q), (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        elif out is not self._out_bias or out.ndim != 1:
            if not _proper_out(out, 1):
                return self._general(kernels.bias_forces, out, 1, q, v)
            self._out_bias = out
        try:
            if q.dtype is _F8 and v.dtype is _F8 and q.ndim == 1 and v.ndim == 1:
                self._ep_bias(self._pk, self._ws, q, v, out)
                return out
        except (AttributeError, TypeError):  # not an ndarray (TypeError: from the entry point)
            pass
        return self._general(kernels.bias_forces, out, 1, q, v)

    def gravity(self, q, out=None) -> np.ndarray:
        """g(q) = ∂V/∂q, (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        elif out is not self._out_gravity or out.ndim != 1:
            if not _proper_out(out, 1):
                return self._general(kernels.gravity_forces, out, 1, q)
            self._out_gravity = out
        try:
            if q.dtype is _F8 and q.ndim == 1:
                self._ep_gravity(self._pk, self._ws, q, out)
                return out
        except (AttributeError, TypeError):  # not an ndarray (TypeError: from the entry point)
            pass
        return self._general(kernels.gravity_forces, out, 1, q)

    def inverse_dynamics(self, q, v, a, out=None) -> np.ndarray:
        """τ = M(q) a + h(q, v), (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        elif out is not self._out_id or out.ndim != 1:
            if not _proper_out(out, 1):
                return self._general(kernels.inverse_dynamics, out, 1, q, v, a)
            self._out_id = out
        try:
            if (q.dtype is _F8 and v.dtype is _F8 and a.dtype is _F8
                    and q.ndim == 1 and v.ndim == 1 and a.ndim == 1):
                self._ep_id(self._pk, self._ws, q, v, a, out)
                return out
        except (AttributeError, TypeError):  # not an ndarray (TypeError: from the entry point)
            pass
        return self._general(kernels.inverse_dynamics, out, 1, q, v, a)

    def forward_dynamics(self, q, v, tau, out=None) -> np.ndarray:
        """a = M(q)⁻¹ (τ − h(q, v)), (nq,)."""
        if out is None:
            out = np.empty(self.nq)
        elif out is not self._out_fd or out.ndim != 1:
            if not _proper_out(out, 1):
                return self._general(kernels.forward_dynamics, out, 1, q, v, tau)
            self._out_fd = out
        try:
            if (q.dtype is _F8 and v.dtype is _F8 and tau.dtype is _F8
                    and q.ndim == 1 and v.ndim == 1 and tau.ndim == 1):
                self._ep_fd(self._pk, self._ws, q, v, tau, out)
                return out
        except (AttributeError, TypeError):  # not an ndarray (TypeError: from the entry point)
            pass
        return self._general(kernels.forward_dynamics, out, 1, q, v, tau)

    def energy(self, q, v, out=None) -> tuple[float, float]:
        """(kinetic, potential) in J; potential = −Σ m_i gravity·c_i over the moving bodies."""
        if out is None:
            out = np.empty(2)
        kernels.energy(self._pk, self._ws, _f64(q), _f64(v), out)
        return float(out[0]), float(out[1])

    def frame_positions(self, q, out=None) -> np.ndarray:
        """World origin of each body frame, (n_bodies, 3), in the order of ``mech.body_names``."""
        if out is None:
            out = np.empty((self.mech.n_bodies, 3))
        kernels.frame_positions(self._pk, self._ws, _f64(q), out)
        return out

    def frame_rotations(self, q, out=None) -> np.ndarray:
        """World rotation of each body frame, (n_bodies, 3, 3), in the order of ``body_names``."""
        if out is None:
            out = np.empty((self.mech.n_bodies, 3, 3))
        kernels.frame_rotations(self._pk, self._ws, _f64(q), out)
        return out


class ClosedChainDynamics(Dynamics):
    """The same API for a mechanism closed by loops (``Dynamics(mech)`` returns one).

    q, v, a, τ are the independent coordinates (``mech.joint_names``); dependent ones are
    solved by Newton's method from the last solution (warm start). The equations are the
    reduced ones of Hidalgo & Rocón eq. 22: M̄(q) q̈ = τ − h̄(q, q̇), τ acting on the independent
    (actuated) coordinates. :meth:`complete` gives all tree coordinates.
    """

    def __init__(self, mech) -> None:
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
