"""Semirecursive rigid-body dynamics as numba kernels (Hidalgo & Rocón §2.1).

All vectors are in the inertial frame; 6-vectors are [linear; angular]. For body i hanging
on joint i (unit axis u_i through point r_i, the body frame's origin):

    Z_i = [ṡ_i; ω_i] = Z_p + b_i ż_i,   b_i = [r_i × u_i; u_i] (revolute), [u_i; 0] (prismatic)
    Ż_i = Ż_p + b_i z̈_i + d_i,  d_i = [ṡ_p × u_i + ω_p × (r_i × u_i); ω_p × u_i] ż_i (revolute),
                                 d_i = [ω_p × u_i; 0] ż_i (prismatic)    (Hidalgo & Rocón eqs. 9–12)

ṡ_i is the velocity of the body point that coincides with the inertial origin, so every
body's force and inertia are reduced to the same point and *add* along a path:

    M_ij = b_iᵀ M̄^Σ_k b_j   (k the deeper of i, j on one path; M̄^Σ accumulated leaves → root)
    τ_i  = b_iᵀ Σ_{k ⪰ i} (M̄_k Ż_k − Q̄_k)                  (Hidalgo & Rocón eqs. 17–21)

M̄_k Ż_k − Q̄_k is written as the Newton–Euler wrench about the origin,
[f; c × f + J_G ω̇ + ω × J_G ω] with f = m (a_G − gravity) — the same vector, fewer flops.
Tree coordinates map to the independent ones through the constant R_z of a ``<mimic>`` or a
harmonic drive (Hidalgo & Rocón eqs. 23–27): z_i = k_i q_{j(i)} + c_i, so M = R_zᵀ M_z R_z,
τ = R_zᵀ τ_z with no linear solve.

Calling convention: ``kernel(model, data, inputs…, out)`` where ``model`` is
``Mechanism.packed`` (read-only) and ``data`` a workspace from :func:`workspace_size` — the
split of Pinocchio's model and data. Nothing allocates; every function is
``@njit(cache=True)`` and can be called from other njit code (the laws and the plant).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.jit import njit
from exo_rt.mechanism_layout import (
    HDR_GRAVITY,
    HDR_NQ,
    JOINT_REVOLUTE,
    P_AXIS,
    P_AXIS_INDEX,
    P_C,
    P_COM,
    P_INERTIA,
    P_JTYPE,
    P_K,
    P_MASS,
    P_PARENT,
    P_QIDX,
    P_ROT,
    P_ROT_IDENTITY,
    P_XYZ,
)

# --- workspace (data) columns, one float64 row of W_WIDTH per body (width 1 unless given)
W_A = 0  # world rotation of the body frame, row-major (9)
W_O = 9  # m: world origin of the body frame = point r_i on the joint axis (3)
W_B = 12  # b_i = [r × u (m); u] revolute, [u; 0] prismatic (6)
W_Z = 18  # Z_i = [ṡ (m/s); ω (rad/s)] (6)
W_ZD = 24  # Ż_i: [m/s²; rad/s²] (6)
W_F = 30  # accumulated wrench about the world origin: [N; N·m] (6)
W_C = 36  # m: world COM (3)
W_JG = 39  # kg·m²: world inertia about the COM (9)
W_K = 48  # composite inertia: m (kg), h = m c (kg·m, 3), J_O (kg·m², 9) → 13
W_WIDTH = 61


def workspace_size(n_bodies: int, nq: int) -> int:
    """Length of the flat float64 workspace the kernels need."""
    return n_bodies * W_WIDTH + nq * nq + 3 * nq


def model_and_data(mech) -> tuple[np.ndarray, np.ndarray]:
    """A mechanism's packed model and a new workspace for it: the first two arguments of
    every kernel (as Pinocchio's ``model`` and ``model.createData()``). Nothing compiles."""
    return mech.packed, np.zeros(workspace_size(mech.n_bodies, mech.nz))


@njit(cache=True, inline="always")
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True, python=False)
def _dims(model):
    nb = model.shape[0] - 1
    return nb, int(model[nb, HDR_NQ])


@njit(cache=True, python=False)
def _check(nq, x):
    if x.shape[0] != nq:
        raise ValueError("array length differs from the mechanism's number of coordinates")


@njit(cache=True)
def positions(model, data, q):
    """Forward kinematics: world rotation A, origin r, joint column b, COM and J_G per body."""
    nb, nq = _dims(model)
    _check(nq, q)
    w = data
    # base: identity frame at the world origin, at rest
    for k in range(W_JG):
        w[k] = 0.0
    w[W_A] = 1.0
    w[W_A + 4] = 1.0
    w[W_A + 8] = 1.0
    for i in range(1, nb):
        oi = i * W_WIDTH
        p = int(model[i, P_PARENT])
        op = p * W_WIDTH
        z = model[i, P_K] * q[int(model[i, P_QIDX])] + model[i, P_C]
        # M1 = A_p · R0 (joint frame at zero displacement); R0 = 1: M1 = A_p
        if model[i, P_ROT_IDENTITY] != 0.0:
            for k in range(9):
                w[oi + W_A + k] = w[op + W_A + k]
        else:
            for r in range(3):
                a0 = w[op + W_A + 3 * r]
                a1 = w[op + W_A + 3 * r + 1]
                a2 = w[op + W_A + 3 * r + 2]
                for c in range(3):
                    w[oi + W_A + 3 * r + c] = (
                        a0 * model[i, P_ROT + c] + a1 * model[i, P_ROT + 3 + c]
                        + a2 * model[i, P_ROT + 6 + c]
                    )
        # world axis u = M1 · axis
        ax, ay, az = model[i, P_AXIS], model[i, P_AXIS + 1], model[i, P_AXIS + 2]
        ux = w[oi + W_A] * ax + w[oi + W_A + 1] * ay + w[oi + W_A + 2] * az
        uy = w[oi + W_A + 3] * ax + w[oi + W_A + 4] * ay + w[oi + W_A + 5] * az
        uz = w[oi + W_A + 6] * ax + w[oi + W_A + 7] * ay + w[oi + W_A + 8] * az
        # origin r_i = r_p + A_p · xyz
        x, y, zz = model[i, P_XYZ], model[i, P_XYZ + 1], model[i, P_XYZ + 2]
        rx = w[op + W_O] + w[op + W_A] * x + w[op + W_A + 1] * y + w[op + W_A + 2] * zz
        ry = w[op + W_O + 1] + w[op + W_A + 3] * x + w[op + W_A + 4] * y + w[op + W_A + 5] * zz
        rz = w[op + W_O + 2] + w[op + W_A + 6] * x + w[op + W_A + 7] * y + w[op + W_A + 8] * zz
        if int(model[i, P_JTYPE]) == JOINT_REVOLUTE:
            cz, sz = math.cos(z), math.sin(z)
            k = int(model[i, P_AXIS_INDEX])
            if k >= 0:
                # about ±x, ±y or ±z: two columns of M1 turn, the third stays (Rodrigues
                # below, its zero terms dropped: the same values)
                sg = sz * model[i, P_AXIS + k]
                ca, cb = (k + 1) % 3, (k + 2) % 3
                for r in range(3):
                    ma = w[oi + W_A + 3 * r + ca]
                    mb = w[oi + W_A + 3 * r + cb]
                    w[oi + W_A + 3 * r + ca] = ma * cz + mb * sg
                    w[oi + W_A + 3 * r + cb] = mb * cz - ma * sg
            else:
                # A_i = M1 · Rot(axis, z), with the local rotation from the constant unit
                # axis (Rodrigues): rounding errors then grow linearly along a chain, not
                # geometrically
                t = 1.0 - cz
                r00, r01, r02 = cz + t * ax * ax, t * ax * ay - sz * az, t * ax * az + sz * ay
                r10, r11, r12 = t * ay * ax + sz * az, cz + t * ay * ay, t * ay * az - sz * ax
                r20, r21, r22 = t * az * ax - sz * ay, t * az * ay + sz * ax, cz + t * az * az
                for r in range(3):
                    m0 = w[oi + W_A + 3 * r]
                    m1 = w[oi + W_A + 3 * r + 1]
                    m2 = w[oi + W_A + 3 * r + 2]
                    w[oi + W_A + 3 * r] = m0 * r00 + m1 * r10 + m2 * r20
                    w[oi + W_A + 3 * r + 1] = m0 * r01 + m1 * r11 + m2 * r21
                    w[oi + W_A + 3 * r + 2] = m0 * r02 + m1 * r12 + m2 * r22
            bx, by, bz = _cross(rx, ry, rz, ux, uy, uz)
            w[oi + W_B], w[oi + W_B + 1], w[oi + W_B + 2] = bx, by, bz
            w[oi + W_B + 3], w[oi + W_B + 4], w[oi + W_B + 5] = ux, uy, uz
        else:
            rx += ux * z
            ry += uy * z
            rz += uz * z
            w[oi + W_B], w[oi + W_B + 1], w[oi + W_B + 2] = ux, uy, uz
            w[oi + W_B + 3], w[oi + W_B + 4], w[oi + W_B + 5] = 0.0, 0.0, 0.0
        w[oi + W_O], w[oi + W_O + 1], w[oi + W_O + 2] = rx, ry, rz
        _body_inertia(model, w, i)


@njit(cache=True, python=False)
def _body_inertia(model, w, i):
    """World COM c = r + A·com and J_G = A · I · Aᵀ of body i (after its frame is known)."""
    oi = i * W_WIDTH
    for r in range(3):
        w[oi + W_C + r] = (
            w[oi + W_O + r]
            + w[oi + W_A + 3 * r] * model[i, P_COM]
            + w[oi + W_A + 3 * r + 1] * model[i, P_COM + 1]
            + w[oi + W_A + 3 * r + 2] * model[i, P_COM + 2]
        )
    # T = A · I (stored temporarily in the composite-inertia slot), J_G = T · Aᵀ
    for r in range(3):
        for c in range(3):
            w[oi + W_K + r * 3 + c] = (
                w[oi + W_A + 3 * r] * model[i, P_INERTIA + c]
                + w[oi + W_A + 3 * r + 1] * model[i, P_INERTIA + 3 + c]
                + w[oi + W_A + 3 * r + 2] * model[i, P_INERTIA + 6 + c]
            )
    for r in range(3):
        for c in range(r, 3):
            v = (
                w[oi + W_K + r * 3] * w[oi + W_A + 3 * c]
                + w[oi + W_K + r * 3 + 1] * w[oi + W_A + 3 * c + 1]
                + w[oi + W_K + r * 3 + 2] * w[oi + W_A + 3 * c + 2]
            )
            w[oi + W_JG + 3 * r + c] = v
            w[oi + W_JG + 3 * c + r] = v


@njit(cache=True, python=False)
def _rnea_pass(model, data, q, v, a, vscale, ascale, gscale, out):
    """τ = R_zᵀ Σ bᵀ(M̄Ż − Q̄) for velocities v·vscale, accelerations a·ascale, gravity·gscale."""
    nb, nq = _dims(model)
    _check(nq, v)
    _check(nq, a)
    _check(nq, out)
    positions(model, data, q)
    w = data
    gx = model[nb, HDR_GRAVITY] * gscale
    gy = model[nb, HDR_GRAVITY + 1] * gscale
    gz = model[nb, HDR_GRAVITY + 2] * gscale
    for i in range(1, nb):
        oi = i * W_WIDTH
        p = int(model[i, P_PARENT])
        op = p * W_WIDTH
        j = int(model[i, P_QIDX])
        kk = model[i, P_K]
        zd = kk * v[j] * vscale
        zdd = kk * a[j] * ascale
        sx, sy, sz = w[op + W_Z], w[op + W_Z + 1], w[op + W_Z + 2]
        ox, oy, oz = w[op + W_Z + 3], w[op + W_Z + 4], w[op + W_Z + 5]
        if int(model[i, P_JTYPE]) == JOINT_REVOLUTE:
            ux, uy, uz = w[oi + W_B + 3], w[oi + W_B + 4], w[oi + W_B + 5]
            bx, by, bz = w[oi + W_B], w[oi + W_B + 1], w[oi + W_B + 2]
            t1 = _cross(sx, sy, sz, ux, uy, uz)
            t2 = _cross(ox, oy, oz, bx, by, bz)
            t3 = _cross(ox, oy, oz, ux, uy, uz)
            d0, d1, d2 = (t1[0] + t2[0]) * zd, (t1[1] + t2[1]) * zd, (t1[2] + t2[2]) * zd
            d3, d4, d5 = t3[0] * zd, t3[1] * zd, t3[2] * zd
        else:  # prismatic: b = [u; 0]
            t3 = _cross(ox, oy, oz, w[oi + W_B], w[oi + W_B + 1], w[oi + W_B + 2])
            d0, d1, d2 = t3[0] * zd, t3[1] * zd, t3[2] * zd
            d3, d4, d5 = 0.0, 0.0, 0.0
        for k in range(6):
            w[oi + W_Z + k] = w[op + W_Z + k] + w[oi + W_B + k] * zd
        w[oi + W_ZD] = w[op + W_ZD] + w[oi + W_B] * zdd + d0
        w[oi + W_ZD + 1] = w[op + W_ZD + 1] + w[oi + W_B + 1] * zdd + d1
        w[oi + W_ZD + 2] = w[op + W_ZD + 2] + w[oi + W_B + 2] * zdd + d2
        w[oi + W_ZD + 3] = w[op + W_ZD + 3] + w[oi + W_B + 3] * zdd + d3
        w[oi + W_ZD + 4] = w[op + W_ZD + 4] + w[oi + W_B + 4] * zdd + d4
        w[oi + W_ZD + 5] = w[op + W_ZD + 5] + w[oi + W_B + 5] * zdd + d5
        # Newton–Euler wrench about the world origin
        m = model[i, P_MASS]
        cx, cy, cz = w[oi + W_C], w[oi + W_C + 1], w[oi + W_C + 2]
        sx, sy, sz = w[oi + W_Z], w[oi + W_Z + 1], w[oi + W_Z + 2]
        ox, oy, oz = w[oi + W_Z + 3], w[oi + W_Z + 4], w[oi + W_Z + 5]
        ax_, ay_, az_ = w[oi + W_ZD], w[oi + W_ZD + 1], w[oi + W_ZD + 2]
        wx, wy, wz = w[oi + W_ZD + 3], w[oi + W_ZD + 4], w[oi + W_ZD + 5]
        e = _cross(ox, oy, oz, cx, cy, cz)
        vgx, vgy, vgz = sx + e[0], sy + e[1], sz + e[2]  # COM velocity
        e1 = _cross(wx, wy, wz, cx, cy, cz)
        e2 = _cross(ox, oy, oz, vgx, vgy, vgz)
        fx = m * (ax_ + e1[0] + e2[0] - gx)
        fy = m * (ay_ + e1[1] + e2[1] - gy)
        fz = m * (az_ + e1[2] + e2[2] - gz)
        jg = w[oi + W_JG : i * W_WIDTH + W_JG + 9]
        jwx = jg[0] * ox + jg[1] * oy + jg[2] * oz
        jwy = jg[3] * ox + jg[4] * oy + jg[5] * oz
        jwz = jg[6] * ox + jg[7] * oy + jg[8] * oz
        gyro = _cross(ox, oy, oz, jwx, jwy, jwz)
        mom = _cross(cx, cy, cz, fx, fy, fz)
        w[oi + W_F] = fx
        w[oi + W_F + 1] = fy
        w[oi + W_F + 2] = fz
        w[oi + W_F + 3] = mom[0] + jg[0] * wx + jg[1] * wy + jg[2] * wz + gyro[0]
        w[oi + W_F + 4] = mom[1] + jg[3] * wx + jg[4] * wy + jg[5] * wz + gyro[1]
        w[oi + W_F + 5] = mom[2] + jg[6] * wx + jg[7] * wy + jg[8] * wz + gyro[2]
    for k in range(nq):
        out[k] = 0.0
    for i in range(nb - 1, 0, -1):
        oi = i * W_WIDTH
        p = int(model[i, P_PARENT])
        op = p * W_WIDTH
        tau = 0.0
        for k in range(6):
            tau += w[oi + W_B + k] * w[oi + W_F + k]
            w[op + W_F + k] += w[oi + W_F + k]
        out[int(model[i, P_QIDX])] += model[i, P_K] * tau


@njit(cache=True)
def inverse_dynamics(model, data, q, v, a, out):
    """τ = M(q) a + C(q, v) v + g(q)  (N·m / N, ordered as q)."""
    _rnea_pass(model, data, q, v, a, 1.0, 1.0, 1.0, out)


@njit(cache=True)
def bias_forces(model, data, q, v, out):
    """h(q, v) = C(q, v) v + g(q): the inverse dynamics at zero acceleration."""
    _rnea_pass(model, data, q, v, v, 1.0, 0.0, 1.0, out)


@njit(cache=True)
def gravity_forces(model, data, q, out):
    """g(q): generalized gravity forces (the inverse dynamics at rest)."""
    _rnea_pass(model, data, q, q, q, 0.0, 0.0, 1.0, out)


@njit(cache=True)
def mass_matrix(model, data, q, out):
    """M(q) = R_zᵀ M_z R_z with M_z,ij = b_iᵀ M̄^Σ_j b_j for i an ancestor of j
    (Hidalgo & Rocón eq. 19)."""
    nb, nq = _dims(model)
    if out.shape[0] != nq or out.shape[1] != nq:
        raise ValueError("mass-matrix output must be (nq, nq)")
    positions(model, data, q)
    w = data
    # composite inertia (m, h = m c, J_O = J_G + m(|c|²1 − c cᵀ)), summed leaves → root
    for i in range(1, nb):
        oi = i * W_WIDTH
        m = model[i, P_MASS]
        cx, cy, cz = w[oi + W_C], w[oi + W_C + 1], w[oi + W_C + 2]
        c2 = cx * cx + cy * cy + cz * cz
        w[oi + W_K] = m
        w[oi + W_K + 1] = m * cx
        w[oi + W_K + 2] = m * cy
        w[oi + W_K + 3] = m * cz
        w[oi + W_K + 4] = w[oi + W_JG] + m * (c2 - cx * cx)
        w[oi + W_K + 5] = w[oi + W_JG + 1] - m * cx * cy
        w[oi + W_K + 6] = w[oi + W_JG + 2] - m * cx * cz
        w[oi + W_K + 7] = w[oi + W_JG + 3] - m * cy * cx
        w[oi + W_K + 8] = w[oi + W_JG + 4] + m * (c2 - cy * cy)
        w[oi + W_K + 9] = w[oi + W_JG + 5] - m * cy * cz
        w[oi + W_K + 10] = w[oi + W_JG + 6] - m * cz * cx
        w[oi + W_K + 11] = w[oi + W_JG + 7] - m * cz * cy
        w[oi + W_K + 12] = w[oi + W_JG + 8] + m * (c2 - cz * cz)
    for i in range(nb - 1, 0, -1):
        oi = i * W_WIDTH
        p = int(model[i, P_PARENT])
        op = p * W_WIDTH
        if p == 0:
            continue  # the base's composite inertia is never used
        for k in range(13):
            w[op + W_K + k] += w[oi + W_K + k]
    for r in range(nq):
        for c in range(nq):
            out[r, c] = 0.0
    for j in range(1, nb):
        oj = j * W_WIDTH
        # f = M̄^Σ_j b_j = [m b_l − h × b_a; h × b_l + J_O b_a]
        m = w[oj + W_K]
        hx, hy, hz = w[oj + W_K + 1], w[oj + W_K + 2], w[oj + W_K + 3]
        blx, bly, blz = w[oj + W_B], w[oj + W_B + 1], w[oj + W_B + 2]
        bax, bay, baz = w[oj + W_B + 3], w[oj + W_B + 4], w[oj + W_B + 5]
        t = _cross(hx, hy, hz, bax, bay, baz)
        f0, f1, f2 = m * blx - t[0], m * bly - t[1], m * blz - t[2]
        t = _cross(hx, hy, hz, blx, bly, blz)
        f3 = t[0] + w[oj + W_K + 4] * bax + w[oj + W_K + 5] * bay + w[oj + W_K + 6] * baz
        f4 = t[1] + w[oj + W_K + 7] * bax + w[oj + W_K + 8] * bay + w[oj + W_K + 9] * baz
        f5 = t[2] + w[oj + W_K + 10] * bax + w[oj + W_K + 11] * bay + w[oj + W_K + 12] * baz
        qj = int(model[j, P_QIDX])
        kj = model[j, P_K]
        i = j
        while i > 0:
            oi = i * W_WIDTH
            val = (
                w[oi + W_B] * f0 + w[oi + W_B + 1] * f1 + w[oi + W_B + 2] * f2
                + w[oi + W_B + 3] * f3 + w[oi + W_B + 4] * f4 + w[oi + W_B + 5] * f5
            ) * kj * model[i, P_K]
            qi = int(model[i, P_QIDX])
            out[qi, qj] += val
            if i != j:
                out[qj, qi] += val
            i = int(model[i, P_PARENT])


@njit(cache=True)
def cholesky_solve(m, b, x):
    """Solve m x = b for symmetric positive definite m, in place (m becomes its Cholesky factor).

    Raises ValueError if m is not positive definite (a massless coordinate, for instance).
    """
    n = m.shape[0]
    for j in range(n):
        s = m[j, j]
        for k in range(j):
            s -= m[j, k] * m[j, k]
        if not s > 0.0:
            raise ValueError("mass matrix is not positive definite (a coordinate without inertia?)")
        ljj = math.sqrt(s)
        m[j, j] = ljj
        for i in range(j + 1, n):
            s = m[i, j]
            for k in range(j):
                s -= m[i, k] * m[j, k]
            m[i, j] = s / ljj
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= m[i, k] * x[k]
        x[i] = s / m[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= m[k, i] * x[k]
        x[i] = s / m[i, i]


@njit(cache=True)
def _q_ws(data, nb, nq):
    base = nb * W_WIDTH
    mq = data[base : base + nq * nq].reshape((nq, nq))
    h = data[base + nq * nq : base + nq * nq + nq]
    r = data[base + nq * nq + nq : base + nq * nq + 2 * nq]
    return mq, h, r


@njit(cache=True)
def forward_dynamics(model, data, q, v, tau, out):
    """a = M(q)⁻¹ (τ − h(q, v)), by Cholesky on the small (nq × nq) mass matrix."""
    nb, nq = _dims(model)
    _check(nq, tau)
    mq, h, r = _q_ws(data, nb, nq)
    bias_forces(model, data, q, v, h)
    mass_matrix(model, data, q, mq)
    for k in range(nq):
        r[k] = tau[k] - h[k]
    cholesky_solve(mq, r, out)


@njit(cache=True)
def energy(model, data, q, v, out):
    """out[0] = kinetic ½ Σ Zᵀ M̄ Z, out[1] = potential −Σ m gravity · c over the moving bodies."""
    nb, nq = _dims(model)
    _, h, _ = _q_ws(data, nb, nq)
    _rnea_pass(model, data, q, v, v, 1.0, 0.0, 0.0, h)  # fills Z, c, J_G
    w = data
    gx, gy, gz = model[nb, HDR_GRAVITY], model[nb, HDR_GRAVITY + 1], model[nb, HDR_GRAVITY + 2]
    ke = 0.0
    pe = 0.0
    for i in range(1, nb):
        oi = i * W_WIDTH
        m = model[i, P_MASS]
        cx, cy, cz = w[oi + W_C], w[oi + W_C + 1], w[oi + W_C + 2]
        ox, oy, oz = w[oi + W_Z + 3], w[oi + W_Z + 4], w[oi + W_Z + 5]
        e = _cross(ox, oy, oz, cx, cy, cz)
        vx, vy, vz = w[oi + W_Z] + e[0], w[oi + W_Z + 1] + e[1], w[oi + W_Z + 2] + e[2]
        jg = w[oi + W_JG : i * W_WIDTH + W_JG + 9]
        rot = (
            ox * (jg[0] * ox + jg[1] * oy + jg[2] * oz)
            + oy * (jg[3] * ox + jg[4] * oy + jg[5] * oz)
            + oz * (jg[6] * ox + jg[7] * oy + jg[8] * oz)
        )
        ke += 0.5 * (m * (vx * vx + vy * vy + vz * vz) + rot)
        pe -= m * (gx * cx + gy * cy + gz * cz)
    out[0] = ke
    out[1] = pe


@njit(cache=True)
def frame_positions(model, data, q, out):
    """World origin of every body frame (n_bodies × 3), base first."""
    nb, _ = _dims(model)
    positions(model, data, q)
    w = data
    for i in range(nb):
        oi = i * W_WIDTH
        out[i, 0] = w[oi + W_O]
        out[i, 1] = w[oi + W_O + 1]
        out[i, 2] = w[oi + W_O + 2]


@njit(cache=True)
def frame_rotations(model, data, q, out):
    """World rotation of every body frame (n_bodies × 3 × 3), base first."""
    nb, _ = _dims(model)
    positions(model, data, q)
    w = data
    for i in range(nb):
        oi = i * W_WIDTH
        for r in range(3):
            for c in range(3):
                out[i, r, c] = w[oi + W_A + 3 * r + c]



@njit(cache=True)
def point_jacobian(model, data, q, body, point, out):
    """J(q) (3 × nq, m/rad or m/m): the linear velocity of a point fixed in body ``body``
    (``point``, m, in that body's frame) per unit velocity of each independent coordinate,
    in the model's base frame: ṗ = J q̇. Each joint i on the path from the body to the base
    moves the point at b_l,i + b_a,i × p (b_i the joint's column about the world origin,
    module docstring), through its coupling z_i = k_i q_j(i) + c_i. The generalized force of
    a force f (N, base frame) applied at the point is Jᵀf: M q̈ + h = τ + Jᵀf."""
    nb, nq = _dims(model)
    if out.shape[0] != 3 or out.shape[1] != nq:
        raise ValueError("point-Jacobian output must be (3, nq)")
    positions(model, data, q)
    w = data
    ob = body * W_WIDTH
    px = w[ob + W_O] + w[ob + W_A] * point[0] + w[ob + W_A + 1] * point[1] \
        + w[ob + W_A + 2] * point[2]
    py = w[ob + W_O + 1] + w[ob + W_A + 3] * point[0] + w[ob + W_A + 4] * point[1] \
        + w[ob + W_A + 5] * point[2]
    pz = w[ob + W_O + 2] + w[ob + W_A + 6] * point[0] + w[ob + W_A + 7] * point[1] \
        + w[ob + W_A + 8] * point[2]
    for r in range(3):
        for c in range(nq):
            out[r, c] = 0.0
    i = body
    while i > 0:
        oi = i * W_WIDTH
        t = _cross(w[oi + W_B + 3], w[oi + W_B + 4], w[oi + W_B + 5], px, py, pz)
        k = model[i, P_K]
        qi = int(model[i, P_QIDX])
        out[0, qi] += k * (w[oi + W_B] + t[0])
        out[1, qi] += k * (w[oi + W_B + 1] + t[1])
        out[2, qi] += k * (w[oi + W_B + 2] + t[2])
        i = int(model[i, P_PARENT])
