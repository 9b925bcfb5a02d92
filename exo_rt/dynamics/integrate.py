"""Time integrators for simulation, on the dynamics kernels (njit, preallocated).

:func:`rk4_step` advances a tree mechanism's state by the classical 4th-order Runge–Kutta
method with a constant generalized force over the step: the reference integrator for
energy-conservation checks (seed 001's energy integral) and for the plant between controller
periods.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exo_rt.dynamics.kernels import energy, forward_dynamics


def rk4_scratch(nq: int) -> np.ndarray:
    """Scratch space for :func:`rk4_step` (8 rows of nq)."""
    return np.zeros((8, nq))


@njit(cache=True)
def rk4_step(pk, ws, q, v, tau, dt, scratch):
    """One RK4 step of q̈ = M⁻¹(τ − h) in place on (q, v); ``scratch`` from :func:`rk4_scratch`."""
    n = q.shape[0]
    qk = scratch[0]
    vk = scratch[1]
    a1 = scratch[2]
    a2 = scratch[3]
    a3 = scratch[4]
    a4 = scratch[5]
    v2 = scratch[6]
    v3 = scratch[7]
    forward_dynamics(pk, ws, q, v, tau, a1)
    for i in range(n):
        qk[i] = q[i] + 0.5 * dt * v[i]
        vk[i] = v[i] + 0.5 * dt * a1[i]
        v2[i] = vk[i]
    forward_dynamics(pk, ws, qk, vk, tau, a2)
    for i in range(n):
        qk[i] = q[i] + 0.5 * dt * v2[i]
        vk[i] = v[i] + 0.5 * dt * a2[i]
        v3[i] = vk[i]
    forward_dynamics(pk, ws, qk, vk, tau, a3)
    for i in range(n):
        qk[i] = q[i] + dt * v3[i]
        vk[i] = v[i] + dt * a3[i]
    forward_dynamics(pk, ws, qk, vk, tau, a4)
    for i in range(n):
        q[i] += dt / 6.0 * (v[i] + 2.0 * v2[i] + 2.0 * v3[i] + vk[i])
        v[i] += dt / 6.0 * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i])


@njit(cache=True)
def simulate_energy(pk, ws, q, v, tau, dt, steps, every, scratch, energy_out, e2):
    """Integrate ``steps`` RK4 steps; every ``every`` steps store kinetic + potential energy.

    ``energy_out`` receives steps // every + 1 values (the first at t = 0).
    """
    energy(pk, ws, q, v, e2)
    energy_out[0] = e2[0] + e2[1]
    k = 1
    for s in range(1, steps + 1):
        rk4_step(pk, ws, q, v, tau, dt, scratch)
        if s % every == 0:
            energy(pk, ws, q, v, e2)
            energy_out[k] = e2[0] + e2[1]
            k += 1
