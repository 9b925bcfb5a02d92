"""Time integrators for simulation, on the dynamics kernels (njit, preallocated).

:func:`rk4_step` advances a tree mechanism's state by the classical 4th-order Runge–Kutta
method with a constant generalized force over the step: the reference integrator for
energy-conservation checks (Borisov & Rozenblat 2017, §4) and for the plant between controller
periods. Both functions are ``@njit(cache=True)``, allocate nothing and can be called from
Python or from other njit code.

Usage::

    dyn = Dynamics(mech)
    scratch = rk4_scratch(mech.nq)
    for _ in range(steps):
        rk4_step(dyn.packed, dyn.workspace, q, v, tau, dt, scratch)   # q, v updated in place
"""

from __future__ import annotations

import numpy as np

from exo_rt.dynamics.kernels import energy, forward_dynamics
from exo_rt.jit import njit


def rk4_scratch(nq: int) -> np.ndarray:
    """Scratch space for :func:`rk4_step` (8 rows of nq)."""
    return np.zeros((8, nq))


@njit(cache=True)
def rk4_step(model, data, q, v, tau, dt, scratch):
    """One classical RK4 step of q̇ = v, v̇ = M(q)⁻¹(τ − h(q, v)), in place on ``q`` and ``v``.

    ``model`` is ``Mechanism.packed``, ``data`` a kernel workspace (``Dynamics.workspace`` or
    ``np.zeros(kernels.workspace_size(mech.n_bodies, mech.nz))``), ``tau`` the generalized
    force held constant over the step (N·m / N, ordered as q), ``dt`` the step (s), ``scratch``
    from :func:`rk4_scratch`. Four forward-dynamics calls per step; tree mechanisms only (a
    closed chain needs its constraint projection). Local error O(dt⁵), global O(dt⁴).
    """
    n = q.shape[0]
    qk = scratch[0]
    vk = scratch[1]
    a1 = scratch[2]
    a2 = scratch[3]
    a3 = scratch[4]
    a4 = scratch[5]
    v2 = scratch[6]
    v3 = scratch[7]
    # k1 = (v, a1) at (q, v)
    forward_dynamics(model, data, q, v, tau, a1)
    # k2 = (v2, a2) at (q + dt/2 v, v + dt/2 a1)
    for i in range(n):
        qk[i] = q[i] + 0.5 * dt * v[i]
        vk[i] = v[i] + 0.5 * dt * a1[i]
        v2[i] = vk[i]
    forward_dynamics(model, data, qk, vk, tau, a2)
    # k3 = (v3, a3) at (q + dt/2 v2, v + dt/2 a2)
    for i in range(n):
        qk[i] = q[i] + 0.5 * dt * v2[i]
        vk[i] = v[i] + 0.5 * dt * a2[i]
        v3[i] = vk[i]
    forward_dynamics(model, data, qk, vk, tau, a3)
    # k4 = (vk, a4) at (q + dt v3, v + dt a3)
    for i in range(n):
        qk[i] = q[i] + dt * v3[i]
        vk[i] = v[i] + dt * a3[i]
    forward_dynamics(model, data, qk, vk, tau, a4)
    for i in range(n):
        q[i] += dt / 6.0 * (v[i] + 2.0 * v2[i] + 2.0 * v3[i] + vk[i])
        v[i] += dt / 6.0 * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i])


@njit(cache=True)
def simulate_energy(model, data, q, v, tau, dt, steps, every, scratch, energy_out):
    """Integrate ``steps`` RK4 steps in place on (q, v), sampling the energies.

    Every ``every`` steps (and at t = 0) one row (kinetic, potential) in J is written to
    ``energy_out``, which needs ``steps // every + 1`` rows of 2 (fewer: ValueError — compiled
    code does not check its indices, a row past the end would be written over the heap).
    """
    if every < 1 or energy_out.shape[0] < steps // every + 1 or energy_out.shape[1] < 2:
        raise ValueError("simulate_energy: energy_out needs steps // every + 1 rows of 2")
    energy(model, data, q, v, energy_out[0])
    k = 1
    for s in range(1, steps + 1):
        rk4_step(model, data, q, v, tau, dt, scratch)
        if s % every == 0:
            energy(model, data, q, v, energy_out[k])
            k += 1


def warm_up(dyn) -> None:
    """Compile both integrators for a :class:`~exo_rt.dynamics.Dynamics`' packed model and
    workspace: one step and a two-step energy trace from rest."""
    z = np.zeros(dyn.nq)
    scratch = rk4_scratch(dyn.nq)
    rk4_step(dyn.packed, dyn.workspace, z.copy(), z.copy(), z, 1e-3, scratch)
    simulate_energy(dyn.packed, dyn.workspace, z.copy(), z.copy(), z, 1e-3, 2, 1, scratch,
                    np.zeros((3, 2)))
