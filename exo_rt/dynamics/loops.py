"""Closed kinematic chains: loop constraints, coordinate partitioning, reduced dynamics.

Hidalgo & Rocón §2.2. A closed mechanism is an open tree with tree coordinates z
plus loop-closure constraints Φ(z) = 0 between two bodies a and b:

- *point*: the point P_a (fixed in a) coincides with P_b (fixed in b) — 3 rows;
- *revolute*: point coincidence plus the axis n_a (fixed in a) staying orthogonal to two unit
  vectors m₁, m₂ fixed in b (that span the plane normal to b's copy of the axis) — 5 rows.

Planar mechanisms make some rows redundant; the independent rows and the dependent
coordinates are chosen once, at a closed reference configuration, by LU with complete pivoting
of Φ_z (Wehage–Haug), or the user names the independent (actuated) coordinates. Then, with
z = [z_d; z_i]:

    ż = R_z ż_i,  R_z = [−Φ_d⁻¹ Φ_i; I],   z̈ = R_z z̈_i + S,  S = [−Φ_d⁻¹ γ; 0],  γ = Φ̇_z ż
    M̄ = R_zᵀ M_z R_z,   h̄ = R_zᵀ (h_z + M_z S)                    (Hidalgo & Rocón eq. 22)

so the reduced equations are M̄ z̈_i = τ_i − h̄. Dependent positions come from Newton's method
on Φ_d. Every function is njit on preallocated arrays; the Jacobian columns come from the
semirecursive b_i (velocity of a body-fixed point P: Σ (b_lin + b_ang × P) ż over the path).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.dynamics.kernels import (
    W_A,
    W_B,
    W_O,
    W_WIDTH,
    W_Z,
    W_ZD,
    _cross,
    _rnea_pass,
    mass_matrix,
    positions,
)
from exo_rt.jit import njit
from exo_rt.mechanism_layout import HDR_NQ, P_K, P_PARENT, P_QIDX

# --- columns of a loop row in Closure.packed
LOOP_KIND = 0  # 0 point, 1 revolute
LOOP_A = 1  # body a
LOOP_B = 2  # body b
LOOP_PA = 3  # point in a's frame (3)
LOOP_PB = 6  # point in b's frame (3)
LOOP_NA = 9  # axis in a's frame (3), revolute
LOOP_M1 = 12  # first normal in b's frame (3), revolute
LOOP_M2 = 15  # second normal in b's frame (3), revolute
LOOP_WIDTH = 18
KIND_POINT = 0
KIND_REVOLUTE = 1
ROWS = (3, 5)  # raw constraint rows per kind

NEWTON_TOL = 1e-13  # m (and rad for the axis rows): closure tolerance of the position solve
NEWTON_MAX_ITER = 30


def raw_row_count(packed: np.ndarray) -> int:
    """Number of raw constraint rows of the loops in ``packed``."""
    return int(sum(ROWS[int(k)] for k in packed[:, LOOP_KIND]))


def workspace_size(nz: int, nd: int, n_rows: int) -> int:
    """Length of the flat loop workspace for nz tree coordinates and nd dependent ones."""
    ni = nz - nd
    return n_rows + n_rows * nz + nd * nd + nd + nz * ni + 4 * nz + nz * nz + ni * nz


@njit(cache=True)
def _views(cws, nz, nd, n_rows):
    ni = nz - nd
    o = 0
    phi = cws[o : o + n_rows]
    o += n_rows
    jac = cws[o : o + n_rows * nz].reshape((n_rows, nz))
    o += n_rows * nz
    lu = cws[o : o + nd * nd].reshape((nd, nd))
    o += nd * nd
    piv = cws[o : o + nd]
    o += nd
    rz = cws[o : o + nz * ni].reshape((nz, ni))
    o += nz * ni
    s = cws[o : o + nz]
    o += nz
    hz = cws[o : o + nz]
    o += nz
    zd = cws[o : o + nz]
    o += nz
    tmp = cws[o : o + nz]
    o += nz
    mz = cws[o : o + nz * nz].reshape((nz, nz))
    o += nz * nz
    rtm = cws[o : o + ni * nz].reshape((ni, nz))
    return phi, jac, lu, piv, rz, s, hz, zd, tmp, mz, rtm


@njit(cache=True)
def _world_point(data, body, lp, l, col):
    o = body * W_WIDTH
    x, y, z = lp[l, col], lp[l, col + 1], lp[l, col + 2]
    return (
        data[o + W_O] + data[o + W_A] * x + data[o + W_A + 1] * y + data[o + W_A + 2] * z,
        data[o + W_O + 1] + data[o + W_A + 3] * x + data[o + W_A + 4] * y + data[o + W_A + 5] * z,
        data[o + W_O + 2] + data[o + W_A + 6] * x + data[o + W_A + 7] * y + data[o + W_A + 8] * z,
    )


@njit(cache=True)
def _world_vector(data, body, lp, l, col):
    o = body * W_WIDTH
    x, y, z = lp[l, col], lp[l, col + 1], lp[l, col + 2]
    return (
        data[o + W_A] * x + data[o + W_A + 1] * y + data[o + W_A + 2] * z,
        data[o + W_A + 3] * x + data[o + W_A + 4] * y + data[o + W_A + 5] * z,
        data[o + W_A + 6] * x + data[o + W_A + 7] * y + data[o + W_A + 8] * z,
    )


@njit(cache=True)
def _point_columns(model, data, jac, r, body, px, py, pz, sign):
    """Add sign·∂P/∂z (P fixed in ``body``) to rows r…r+2 of the Jacobian."""
    k = body
    while k > 0:
        o = k * W_WIDTH
        t = _cross(data[o + W_B + 3], data[o + W_B + 4], data[o + W_B + 5], px, py, pz)
        c = int(model[k, P_QIDX])
        f = sign * model[k, P_K]
        jac[r, c] += f * (data[o + W_B] + t[0])
        jac[r + 1, c] += f * (data[o + W_B + 1] + t[1])
        jac[r + 2, c] += f * (data[o + W_B + 2] + t[2])
        k = int(model[k, P_PARENT])


@njit(cache=True)
def _axis_columns(model, data, jac, r, body, wx, wy, wz, sign):
    """Add sign·u_k·w to row r for every joint k on the path of ``body`` (rotation rows)."""
    k = body
    while k > 0:
        o = k * W_WIDTH
        c = int(model[k, P_QIDX])
        jac[r, c] += sign * model[k, P_K] * (
            data[o + W_B + 3] * wx + data[o + W_B + 4] * wy + data[o + W_B + 5] * wz
        )
        k = int(model[k, P_PARENT])


@njit(cache=True)
def constraints(model, data, lp, phi, jac, with_jacobian):
    """Raw constraint values Φ(z) and (optionally) Φ_z, after ``positions(model, data, z)``."""
    r = 0
    if with_jacobian:
        for i in range(jac.shape[0]):
            for j in range(jac.shape[1]):
                jac[i, j] = 0.0
    for l in range(lp.shape[0]):
        a = int(lp[l, LOOP_A])
        b = int(lp[l, LOOP_B])
        pa = _world_point(data, a, lp, l, LOOP_PA)
        pb = _world_point(data, b, lp, l, LOOP_PB)
        for k in range(3):
            phi[r + k] = pa[k] - pb[k]
        if with_jacobian:
            _point_columns(model, data, jac, r, a, pa[0], pa[1], pa[2], 1.0)
            _point_columns(model, data, jac, r, b, pb[0], pb[1], pb[2], -1.0)
        r += 3
        if int(lp[l, LOOP_KIND]) == KIND_REVOLUTE:
            na = _world_vector(data, a, lp, l, LOOP_NA)
            for col in (LOOP_M1, LOOP_M2):
                m = _world_vector(data, b, lp, l, col)
                phi[r] = na[0] * m[0] + na[1] * m[1] + na[2] * m[2]
                if with_jacobian:
                    w = _cross(na[0], na[1], na[2], m[0], m[1], m[2])
                    _axis_columns(model, data, jac, r, a, w[0], w[1], w[2], 1.0)
                    _axis_columns(model, data, jac, r, b, w[0], w[1], w[2], -1.0)
                r += 1


@njit(cache=True)
def _point_acceleration(data, body, px, py, pz):
    """Acceleration of the body-fixed point P from Z, Ż (Ż filled with z̈ = 0 gives γ)."""
    o = body * W_WIDTH
    sx, sy, sz = data[o + W_Z], data[o + W_Z + 1], data[o + W_Z + 2]
    wx, wy, wz = data[o + W_Z + 3], data[o + W_Z + 4], data[o + W_Z + 5]
    t = _cross(wx, wy, wz, px, py, pz)
    vx, vy, vz = sx + t[0], sy + t[1], sz + t[2]
    t1 = _cross(data[o + W_ZD + 3], data[o + W_ZD + 4], data[o + W_ZD + 5], px, py, pz)
    t2 = _cross(wx, wy, wz, vx, vy, vz)
    return (
        data[o + W_ZD] + t1[0] + t2[0],
        data[o + W_ZD + 1] + t1[1] + t2[1],
        data[o + W_ZD + 2] + t1[2] + t2[2],
    )


@njit(cache=True)
def _vector_rates(data, body, nx, ny, nz_):
    """First and second time derivative of a body-fixed vector n (with z̈ = 0)."""
    o = body * W_WIDTH
    wx, wy, wz = data[o + W_Z + 3], data[o + W_Z + 4], data[o + W_Z + 5]
    d1 = _cross(wx, wy, wz, nx, ny, nz_)
    t1 = _cross(data[o + W_ZD + 3], data[o + W_ZD + 4], data[o + W_ZD + 5], nx, ny, nz_)
    t2 = _cross(wx, wy, wz, d1[0], d1[1], d1[2])
    return d1, (t1[0] + t2[0], t1[1] + t2[1], t1[2] + t2[2])


@njit(cache=True)
def constraint_bias(data, lp, gamma):
    """γ = Φ̇_z ż (raw rows), after a velocity pass with zero acceleration filled Z and Ż."""
    r = 0
    for l in range(lp.shape[0]):
        a = int(lp[l, LOOP_A])
        b = int(lp[l, LOOP_B])
        pa = _world_point(data, a, lp, l, LOOP_PA)
        pb = _world_point(data, b, lp, l, LOOP_PB)
        aa = _point_acceleration(data, a, pa[0], pa[1], pa[2])
        ab = _point_acceleration(data, b, pb[0], pb[1], pb[2])
        for k in range(3):
            gamma[r + k] = aa[k] - ab[k]
        r += 3
        if int(lp[l, LOOP_KIND]) == KIND_REVOLUTE:
            na = _world_vector(data, a, lp, l, LOOP_NA)
            dna, ddna = _vector_rates(data, a, na[0], na[1], na[2])
            for col in (LOOP_M1, LOOP_M2):
                m = _world_vector(data, b, lp, l, col)
                dm, ddm = _vector_rates(data, b, m[0], m[1], m[2])
                g = 0.0
                for k in range(3):
                    g += ddna[k] * m[k] + 2.0 * dna[k] * dm[k] + na[k] * ddm[k]
                gamma[r] = g
                r += 1


@njit(cache=True)
def lu_factor(a, piv):
    """In-place LU with partial pivoting; returns False if ``a`` is (numerically) singular."""
    n = a.shape[0]
    scale = 0.0
    for i in range(n):
        for j in range(n):
            scale = max(scale, abs(a[i, j]))
    tol = 1e-12 * max(scale, 1e-300)
    for k in range(n):
        p = k
        big = abs(a[k, k])
        for i in range(k + 1, n):
            if abs(a[i, k]) > big:
                big = abs(a[i, k])
                p = i
        piv[k] = p
        if big <= tol:
            return False
        if p != k:
            for j in range(n):
                t = a[k, j]
                a[k, j] = a[p, j]
                a[p, j] = t
        for i in range(k + 1, n):
            a[i, k] /= a[k, k]
            f = a[i, k]
            for j in range(k + 1, n):
                a[i, j] -= f * a[k, j]
    return True


@njit(cache=True)
def lu_solve(a, piv, b):
    """Solve with the factors of :func:`lu_factor`, overwriting the vector b."""
    n = a.shape[0]
    for k in range(n):
        p = int(piv[k])
        if p != k:
            t = b[k]
            b[k] = b[p]
            b[p] = t
    for i in range(n):
        for k in range(i):
            b[i] -= a[i, k] * b[k]
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            b[i] -= a[i, k] * b[k]
        b[i] /= a[i, i]


@njit(cache=True)
def _dependent_jacobian(jac, rows, dep, lu):
    nd = dep.shape[0]
    for r in range(nd):
        for c in range(nd):
            lu[r, c] = jac[rows[r], dep[c]]


@njit(cache=True)
def solve_positions(model, data, lp, cidx, cws, z):
    """Newton's method on the dependent coordinates of z (independent ones held).

    Returns the number of iterations, −1 if it did not converge (the loop cannot close from
    there), −2 if Φ_d became singular (the partition is singular at this configuration).
    """
    nz = int(model[model.shape[0] - 1, HDR_NQ])
    nd = cidx.shape[0] - nz
    rows = cidx[:nd]
    dep = cidx[nd : 2 * nd]
    n_rows = _raw_rows(lp)
    phi, jac, lu, piv, _rz, _s, _hz, _zd, tmp, _mz, _rtm = _views(cws, nz, nd, n_rows)
    for it in range(NEWTON_MAX_ITER):
        positions(model, data, z)
        constraints(model, data, lp, phi, jac, True)
        err = 0.0
        for r in range(nd):
            err = max(err, abs(phi[rows[r]]))
        if err <= NEWTON_TOL:
            return it
        if not math.isfinite(err):
            return -1
        _dependent_jacobian(jac, rows, dep, lu)
        if not lu_factor(lu, piv):
            return -2
        for r in range(nd):
            tmp[r] = phi[rows[r]]
        lu_solve(lu, piv, tmp)
        for r in range(nd):
            z[dep[r]] -= tmp[r]
    return -1


@njit(cache=True)
def _raw_rows(lp):
    n = 0
    for l in range(lp.shape[0]):
        n += 5 if int(lp[l, LOOP_KIND]) == KIND_REVOLUTE else 3
    return n


@njit(cache=True)
def reduced_terms(model, data, lp, cidx, cws, z, q, qd, m_out, h_out, gscale, vscale):
    """Close the loops at q and fill M̄ (ni × ni) and h̄ (ni) of the reduced equations (eq. 22).

    ``z`` is the warm start and receives the closed configuration. ``vscale`` = 0 gives the
    gravity term only, ``gscale`` = 0 the velocity terms only. Returns the Newton status of
    :func:`solve_positions` (negative on failure; then the outputs are not written).
    """
    nz = int(model[model.shape[0] - 1, HDR_NQ])
    nd = cidx.shape[0] - nz
    ni = nz - nd
    rows = cidx[:nd]
    dep = cidx[nd : 2 * nd]
    ind = cidx[2 * nd :]
    n_rows = _raw_rows(lp)
    phi, jac, lu, piv, rz, s, hz, zd, tmp, mz, rtm = _views(cws, nz, nd, n_rows)
    for k in range(ni):
        z[ind[k]] = q[k]
    status = solve_positions(model, data, lp, cidx, cws, z)
    if status < 0:
        return status
    # Jacobian at the solution; R_z = [−Φ_d⁻¹ Φ_i; I]
    positions(model, data, z)
    constraints(model, data, lp, phi, jac, True)
    _dependent_jacobian(jac, rows, dep, lu)
    if not lu_factor(lu, piv):
        return -2
    for c in range(ni):
        for r in range(nd):
            tmp[r] = -jac[rows[r], ind[c]]
        lu_solve(lu, piv, tmp)
        for r in range(nd):
            rz[dep[r], c] = tmp[r]
        for r in range(ni):
            rz[ind[r], c] = 1.0 if r == c else 0.0
    # ż = R_z q̇
    for r in range(nz):
        acc = 0.0
        for c in range(ni):
            acc += rz[r, c] * qd[c] * vscale
        zd[r] = acc
    # h_z(z, ż) and, from the same pass, γ = Φ̇_z ż; S = [−Φ_d⁻¹ γ; 0]
    _rnea_pass(model, data, z, zd, zd, 1.0, 0.0, gscale, hz)
    constraint_bias(data, lp, phi)
    for r in range(nd):
        tmp[r] = -phi[rows[r]]
    lu_solve(lu, piv, tmp)
    for r in range(nz):
        s[r] = 0.0
    for r in range(nd):
        s[dep[r]] = tmp[r]
    mass_matrix(model, data, z, mz)
    # h̄ = R_zᵀ (h_z + M_z S),  M̄ = R_zᵀ M_z R_z
    for r in range(nz):
        acc = hz[r]
        for c in range(nz):
            acc += mz[r, c] * s[c]
        tmp[r] = acc
    for i in range(ni):
        acc = 0.0
        for r in range(nz):
            acc += rz[r, i] * tmp[r]
        h_out[i] = acc
        for c in range(nz):
            acc = 0.0
            for r in range(nz):
                acc += rz[r, i] * mz[r, c]
            rtm[i, c] = acc
    for i in range(ni):
        for j in range(ni):
            acc = 0.0
            for c in range(nz):
                acc += rtm[i, c] * rz[c, j]
            m_out[i, j] = acc
    return status


@njit(cache=True)
def complete_velocities(cws, nz, nd, n_rows, zd_out):
    """Copy ż = R_z q̇ of the last :func:`reduced_terms` call into ``zd_out``."""
    _phi, _jac, _lu, _piv, _rz, _s, _hz, zd, _tmp, _mz, _rtm = _views(cws, nz, nd, n_rows)
    for r in range(nz):
        zd_out[r] = zd[r]


# --------------------------------------------------------------------------- set-up (Python)


def _kin_jacobian(mech, lp, z, data, n_rows):
    phi = np.zeros(n_rows)
    jac = np.zeros((n_rows, mech.nz))
    positions(mech.packed, data, z)
    constraints(mech.packed, data, lp, phi, jac, True)
    return phi, jac


def _full_pivot(jac: np.ndarray, tol: float, columns: np.ndarray | None = None):
    """Gaussian elimination with complete pivoting: (pivot rows, pivot columns) = the rank."""
    a = jac.copy()
    cols_allowed = np.arange(a.shape[1]) if columns is None else np.asarray(columns)
    rows_free = list(range(a.shape[0]))
    cols_free = list(cols_allowed)
    prow, pcol = [], []
    while rows_free and cols_free:
        sub = np.abs(a[np.ix_(rows_free, cols_free)])
        r, c = np.unravel_index(int(np.argmax(sub)), sub.shape)
        if sub[r, c] <= tol:
            break
        rr, cc = rows_free[r], cols_free[c]
        prow.append(rr)
        pcol.append(cc)
        for i in rows_free:
            if i != rr:
                a[i] -= a[i, cc] / a[rr, cc] * a[rr]
        rows_free.remove(rr)
        cols_free.remove(cc)
    return np.array(prow, dtype=np.int64), np.array(pcol, dtype=np.int64)


def _perpendiculars(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = n / np.linalg.norm(n)
    helper = np.eye(3)[int(np.argmin(np.abs(n)))]
    m1 = np.cross(n, helper)
    m1 /= np.linalg.norm(m1)
    return m1, np.cross(n, m1)


def close_loops(mech, lp, names, wheres, independent, initial, here):
    """Close a tree's loops at a reference configuration and partition its coordinates.

    ``lp`` holds the loop rows (kind, bodies, points and a's axis); b's normals are set here
    so that the revolute axes coincide at the reference closure. ``independent`` optionally
    names coordinates that must stay independent (actuated; the dependent ones are chosen
    among the others); ``initial`` maps coordinate names to the
    Newton start (rad, m). Returns the partition, the fields of
    :class:`exo_rt.model.mechanism.Closure` but its names (read-only arrays): ``packed``,
    ``index``, ``n_rows``, ``dependent``, ``independent``, ``reference``; the model packs them
    (the dynamics sits below it).
    """
    from exo_rt.dynamics.kernels import workspace_size as tree_workspace_size
    from exo_rt.errors import ModelError, Where

    lp = np.array(lp, dtype=float).reshape(-1, LOOP_WIDTH)
    nz = mech.nz
    data = np.zeros(tree_workspace_size(mech.n_bodies, nz))
    z = np.zeros(nz)
    for key, value in (initial or {}).items():
        if key not in mech.coordinate_names:
            raise ModelError(f"initial value for unknown coordinate '{key}'",
                             Where(here.file, here.line, "initial"),
                             f"name one of {', '.join(mech.coordinate_names)}")
        z[mech.coordinate_names.index(key)] = float(value)

    def loop_of_row(row: int) -> int:
        r = 0
        for i, k in enumerate(lp[:, LOOP_KIND]):
            r += ROWS[int(k)]
            if row < r:
                return i
        return len(names) - 1

    def where(i: int) -> Where:
        return wheres[i] if i < len(wheres) else Where(here.file, here.line, f"loops[{i}]")

    # phase 1: close the point rows (revolute axes defined afterwards), min-norm Newton
    point_rows = np.concatenate(
        [np.arange(3) + sum(ROWS[int(k)] for k in lp[:i, LOOP_KIND]) for i in range(len(lp))]
    ).astype(np.int64)
    n_rows = raw_row_count(lp)
    for _ in range(100):
        phi, jac = _kin_jacobian(mech, lp, z, data, n_rows)
        res = phi[point_rows]
        if np.max(np.abs(res)) < 1e-12:
            break
        z -= np.linalg.lstsq(jac[point_rows], res, rcond=None)[0]
    phi, jac = _kin_jacobian(mech, lp, z, data, n_rows)
    res = np.abs(phi[point_rows])
    if not np.all(np.isfinite(res)) or np.max(res) > 1e-9:
        worst = loop_of_row(int(point_rows[int(np.nanargmax(res))]))
        raise ModelError(
            f"loop '{names[worst]}' cannot close: its two points stay "
            f"{float(np.nanmax(res)):.3g} m apart",
            where(worst),
            "check the bodies, the points (in each body's frame) and the link lengths, "
            "or give `initial:` joint values near a closed configuration",
        )
    # revolute normals in b's frame, so both axes coincide at the reference closure
    for i in range(len(lp)):
        if int(lp[i, LOOP_KIND]) == KIND_REVOLUTE:
            a, b = int(lp[i, LOOP_A]), int(lp[i, LOOP_B])
            rot = np.zeros((mech.n_bodies, 3, 3))
            from exo_rt.dynamics.kernels import frame_rotations

            frame_rotations(mech.packed, data, z, rot)
            n_world = rot[a] @ lp[i, LOOP_NA : LOOP_NA + 3]
            m1, m2 = _perpendiculars(rot[b].T @ n_world)
            lp[i, LOOP_M1 : LOOP_M1 + 3] = m1
            lp[i, LOOP_M2 : LOOP_M2 + 3] = m2
    phi, jac = _kin_jacobian(mech, lp, z, data, n_rows)
    tol = 1e-9 * max(1.0, float(np.max(np.abs(jac))))
    rows_all, dep_all = _full_pivot(jac, tol)
    rank = len(rows_all)
    if rank == 0:
        raise ModelError("the loops add no independent constraint", where(0),
                         "remove them, or check the bodies they connect")
    if independent:
        for n in independent:
            if n not in mech.coordinate_names:
                raise ModelError(
                    f"independent coordinate '{n}' is not a joint of the tree",
                    Where(here.file, here.line, "independent"),
                    f"name joints of the tree: {', '.join(mech.coordinate_names)}",
                )
        listed = {mech.coordinate_names.index(n) for n in independent}
        dep_cols = np.array([c for c in range(nz) if c not in listed], dtype=np.int64)
        rows_sel, dep_sel = _full_pivot(jac, tol, dep_cols)
        if len(rows_sel) < rank:
            raise ModelError(
                "the chosen independent coordinates give a singular partition (the loops' "
                f"{rank} equations cannot be solved for the other coordinates "
                f"{', '.join(mech.coordinate_names[c] for c in dep_cols)})",
                Where(here.file, here.line, "independent"),
                "choose other independent (actuated) joints, e.g. one per loop at the ground",
            )
        rows, dep = rows_sel, dep_sel
    else:
        rows, dep = rows_all, dep_all
    dep = np.sort(dep)
    ind = np.array([c for c in range(nz) if c not in set(dep.tolist())], dtype=np.int64)
    if len(ind) == 0:
        raise ModelError("the loops lock the mechanism: no independent coordinate is left",
                         where(0), "check the loop definitions (a structure cannot move)")
    closure = {
        "packed": lp,
        "index": np.concatenate([np.sort(rows), dep, ind]).astype(np.int64),
        "n_rows": n_rows,
        "dependent": dep,
        "independent": ind,
        "reference": z.copy(),
    }
    for key in ("packed", "index", "dependent", "independent", "reference"):
        closure[key].setflags(write=False)
    # the reduced coordinates are the independent ones; the tree's packed model is the same
    # (it counts every tree coordinate), so the partition is checked on it
    cws = np.zeros(workspace_size(nz, len(dep), n_rows))
    zz = z.copy()
    status = solve_positions(mech.packed, data, closure["packed"], closure["index"], cws, zz)
    if status < 0:
        raise ModelError(
            "the loop partition is singular at the reference configuration",
            where(0), "choose other independent joints or another `initial:` configuration",
        )
    return closure
