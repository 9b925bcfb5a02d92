"""Dynamics benchmarks side by side with Pinocchio (docs/performance.md).

Usage: ``python tools/bench_pinocchio.py [--quick] [--json FILE] [--no-compile] [--wall]``, or
``python tools/bench_dynamics.py …`` (the same benchmark, its Pinocchio twins written by an
URDF writer independent of exo-rt's exporter).

Mechanisms
    ``leg2`` (pelvis base, hip and knee flexion about y, thigh 0.42 m, shank 0.40 m),
    ``two_legs`` (pelvis, each leg hip/knee/ankle: a 6-DOF branched tree, its joints listed
    breadth-first, i.e. *not* depth-first, in our specs), ``exo_leg`` (the shipped config, with
    its two harmonic-drive rotor bodies, when it loads) and serial chains of n = 4 … 128
    random revolute links (seeded; random unit axes, rotated joint frames, box inertias, so
    the triangle inequality holds). Gravity is −9.81 m/s² along z.

What is timed (µs per call), on one random state (q ∈ U(−1, 1), v, a ~ N(0, 1))
    - ``py facade``: ``dyn.inverse_dynamics(q, v, a, out)`` etc. — the public API with
      preallocated ``out=`` (what a Python caller pays);
    - ``py raw``: ``kernels.inverse_dynamics(model, data, q, v, a, out)`` — the kernel through
      numba's dispatcher (type dispatch and NRT on every call, which the facade avoids);
    - ``pin``: ``pin.rnea``, ``pin.crba``, ``pin.aba`` on the Pinocchio twin (built from URDF
      text), on the same state in Pinocchio's q order;
    - ``njit``: a jitted loop calling the kernel N times, the state perturbed every iteration
      (q[j] ± 1e-9, j cycling, so nothing can be hoisted out of the loop) and the output summed
      (so nothing is dead); loop time / N. This is what a law or the plant pays inside njit.
    Every statement is timed as a user writes it (``dyn.inverse_dynamics(…)``,
    ``pin.rnea(…)``: one attribute lookup each), compiled straight into the ``timeit`` loop
    (no lambda in between), with the garbage collector off (``timeit``'s default).

How a figure is formed (the machine may be noisy: a few vCPUs shared with other jobs)
    0. The clock is this thread's CPU time (``time.thread_time``) unless ``--wall``: every
       candidate is single-threaded and compute-bound, so CPU time equals wall time on a
       quiet machine, and on a busy one it leaves out the slices in which the scheduler ran
       someone else. What CPU time cannot remove (cache and SMT interference) is what the
       medians are for.
    1. Calibrate a batch size so that one batch lasts about 2 ms: long enough that the
       clock's cost and ``timeit``'s own loop vanish in the mean, short enough that most
       batches run inside one scheduler slice (a batch is either clean or visibly slow).
    2. Warm up (one call to compile or load from the cache, then one batch).
    3. ``repeats`` batches per candidate (31; 9 with ``--quick``), *interleaved*: repeat r
       runs one batch of every candidate of the mechanism, alternating the order, so a slow
       phase of the machine hits ours and Pinocchio alike and the ratio stays honest.
    4. The figure is the *median* over the repeats of the per-call mean of a batch; the
       minimum is kept in the JSON.

Correctness before speed
    Before anything is timed, each mechanism's inverse dynamics and mass matrix are compared
    with Pinocchio's on the benchmarked state (≤ 1e-9 relative, ‖Δ‖∞/‖ref‖∞), and forward
    dynamics through the residual of τ = ID(q, v, FD(q, v, τ)) and against the FD solved from
    Pinocchio's M and h: a benchmark never times a wrong result. Harmonic-drive rotors (mimic
    couplings z = k q + c) are mapped with the constant R_z: τ = R_zᵀ τ_z, M = R_zᵀ M_z R_z;
    for such a mechanism ``pin.aba`` solves the *uncoupled* tree, so its FD ratio is n/a.

Compile time
    A fresh interpreter with ``NUMBA_CACHE_DIR`` pointing to an empty temporary directory
    imports ``exo_rt.dynamics``, builds a ``Dynamics`` (which compiles the facade's entry
    points), calls every facade method and every kernel once (cold: everything is compiled
    and written to the cache); then the same again with the same directory (warm: loaded).

Targets (docs/performance.md), printed as PASS/MISS
    ID and M from Python (facade) at 2–6 DOF: ratio ≤ 1 (on the plain trees; a mechanism with
    rotors is printed but Pinocchio solves a larger, uncoupled tree there); ID from Python at
    32–128: ratio ≤ 0.6; ID scaling t(128)/t(16) ≤ 10 inside njit and from Python; the 2-DOF
    leg's ID inside njit ≤ 1 µs (and the leg with rotors, exo_leg); dynamics start-up from a
    warm cache ≤ 2 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import typeof

from exo_rt.dynamics import Dynamics, kernels
from exo_rt.jit import njit
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism

ROOT = Path(__file__).resolve().parents[1]
GRAVITY = np.array([0.0, 0.0, -9.81])
Y = np.array([0.0, 1.0, 0.0])
CHAIN_SIZES = (4, 8, 16, 32, 64, 128)
QUICK_CHAIN_SIZES = (4, 16, 128)
TOL = 1e-9
OPS = (("id", "ID"), ("mass", "M"), ("fd", "FD"))


# --------------------------------------------------------------------------- mechanisms
def box_link(name: str, mass: float, size, com) -> LinkSpec:
    """A solid box's inertia about its COM: always positive definite, triangle inequality."""
    a, b, c = (float(s) for s in size)
    inertia = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return LinkSpec(name, float(mass), np.asarray(com, dtype=float), inertia)


def leg2_specs() -> tuple[list[LinkSpec], list[JointSpec]]:
    """Pelvis fixed, hip and knee flexion about y; thigh 0.42 m (8 kg), shank 0.40 m (4 kg)."""
    links = [
        box_link("pelvis", 10.0, (0.20, 0.35, 0.15), (0.0, 0.0, 0.05)),
        box_link("thigh", 8.0, (0.14, 0.14, 0.42), (0.01, 0.0, -0.18)),
        box_link("shank", 4.0, (0.10, 0.10, 0.40), (0.0, 0.005, -0.17)),
    ]
    joints = [
        JointSpec("hip", "revolute", "pelvis", "thigh", np.array([0.0, -0.09, 0.0]), axis=-Y),
        JointSpec("knee", "revolute", "thigh", "shank", np.array([0.0, 0.0, -0.42]), axis=Y),
    ]
    return links, joints


def two_legs_specs() -> tuple[list[LinkSpec], list[JointSpec]]:
    """Pelvis fixed; each leg hip, knee, ankle flexion (6 DOF), joints listed breadth-first."""
    links = [box_link("pelvis", 10.0, (0.20, 0.35, 0.15), (0.0, 0.0, 0.05))]
    hips, knees, ankles = [], [], []
    for side, dy in (("l", 0.09), ("r", -0.09)):
        links += [
            box_link(f"{side}_thigh", 8.0, (0.14, 0.14, 0.42), (0.01, 0.0, -0.18)),
            box_link(f"{side}_shank", 4.0, (0.10, 0.10, 0.40), (0.0, 0.0, -0.17)),
            box_link(f"{side}_foot", 1.2, (0.25, 0.09, 0.07), (0.05, 0.0, -0.05)),
        ]
        hips.append(JointSpec(f"{side}_hip", "revolute", "pelvis", f"{side}_thigh",
                              np.array([0.0, dy, 0.0]), axis=-Y))
        knees.append(JointSpec(f"{side}_knee", "revolute", f"{side}_thigh", f"{side}_shank",
                               np.array([0.0, 0.0, -0.42]), axis=Y))
        ankles.append(JointSpec(f"{side}_ankle", "revolute", f"{side}_shank", f"{side}_foot",
                                np.array([0.0, 0.0, -0.40]), axis=-Y))
    return links, hips + knees + ankles


def chain_specs(n: int) -> tuple[list[LinkSpec], list[JointSpec]]:
    """A serial chain of ``n`` random revolute links (seeded by n): random unit axes,
    rotated joint frames (rpy ∈ U(−π, π)), joint offsets 0.05–0.25 m, box inertias."""
    rng = np.random.default_rng(1000 + n)
    links = [box_link("base", 1.0, (0.1, 0.1, 0.1), (0.0, 0.0, 0.0))]
    joints = []
    for i in range(1, n + 1):
        size = rng.uniform(0.02, 0.25, 3)
        links.append(box_link(f"l{i}", rng.uniform(0.2, 2.0), size, rng.uniform(-0.1, 0.1, 3)))
        axis = rng.normal(size=3)
        offset = rng.normal(size=3)
        offset *= rng.uniform(0.05, 0.25) / np.linalg.norm(offset)
        joints.append(JointSpec(f"j{i}", "revolute", links[i - 1].name, f"l{i}", offset,
                                rng.uniform(-math.pi, math.pi, 3), axis / np.linalg.norm(axis)))
    return links, joints


def _build(name: str, specs) -> Mechanism:
    return build_mechanism(name, *specs, GRAVITY, "bench")


def leg2() -> Mechanism:
    return _build("leg2", leg2_specs())


def two_legs() -> Mechanism:
    return _build("two_legs", two_legs_specs())


def chain(n: int) -> Mechanism:
    return _build(f"chain{n}", chain_specs(n))


@dataclass
class Case:
    """A benchmark mechanism and the specs it was built from (None: loaded from a file)."""

    name: str
    mech: Mechanism
    links: list[LinkSpec] | None = None
    joints: list[JointSpec] | None = None
    notes: str = ""


def spec_case(name: str, specs) -> Case:
    return Case(name, _build(name, specs), *specs)


def exo_leg_case() -> Case | None:
    """The shipped default leg (configs/robots/exo_leg.yaml, with rotors), if it loads."""
    try:
        from exo_rt.model import load_mechanism
        from exo_rt.resources import config

        mech = load_mechanism(config("robots", "exo_leg.yaml"))
        if mech.closure is not None:
            return None
        return Case("exo_leg", mech, notes="with 2 rotors")
    except Exception as exc:  # another team's file being edited must not stop the bench
        print(f"  (exo_leg skipped: {type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def cases(quick: bool) -> list[Case]:
    out = [spec_case("leg2", leg2_specs()), spec_case("two_legs", two_legs_specs())]
    leg = exo_leg_case()
    if leg is not None:
        out.append(leg)
    out += [spec_case(f"chain{n}", chain_specs(n))
            for n in (QUICK_CHAIN_SIZES if quick else CHAIN_SIZES)]
    return out


# --------------------------------------------------------------------------- Pinocchio twin
def exporter_urdf(case: Case) -> str:
    """The twin's URDF from exo-rt's own exporter (rotors written as plain joints)."""
    from exo_rt.model.urdf import write_urdf

    return write_urdf(case.mech, mimic=False, limits=False)


@dataclass
class Twin:
    """Pinocchio model of a case and the constant map z = R_z q + c to its coordinates."""

    pin: object
    model: object
    data: object
    rz: np.ndarray  # (pin nv, our nq)
    c: np.ndarray  # (pin nq,)
    coupled: bool  # mimic couplings present (R_z is not a permutation)


def make_twin(case: Case, twin_urdf: Callable[[Case], str] = exporter_urdf) -> Twin:
    import pinocchio as pin

    model = pin.buildModelFromXML(twin_urdf(case))
    model.gravity.linear = np.array(case.mech.gravity, dtype=float)
    if model.nq != model.nv:
        raise RuntimeError(f"{case.name}: Pinocchio twin has nq {model.nq} ≠ nv {model.nv}")
    mech = case.mech
    rz = np.zeros((model.nv, mech.nq))
    c = np.zeros(model.nq)
    for i in range(1, mech.n_bodies):
        jid = model.getJointId(mech.tree_joint_names[i])
        if jid >= model.njoints:
            raise RuntimeError(f"{case.name}: joint {mech.tree_joint_names[i]} not in the twin")
        iq = model.idx_qs[jid]
        rz[iq, mech.q_index[i]] = mech.mimic_multiplier[i]
        c[iq] = mech.mimic_offset[i]
    coupled = not (np.all(np.abs(rz).sum(axis=1) == 1) and rz.shape[0] == rz.shape[1])
    return Twin(pin, model, model.createData(), rz, c, bool(coupled))


def _rel(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-300))


def verify(case: Case, dyn: Dynamics, twin: Twin, q, v, a) -> dict:
    """Errors of ours against Pinocchio on the benchmarked state; raise if above TOL."""
    pin, model, data, rz = twin.pin, twin.model, twin.data, twin.rz
    z, zd, zdd = rz @ q + twin.c, rz @ v, rz @ a
    tau_ref = rz.T @ pin.rnea(model, data, z, zd, zdd)
    h_ref = rz.T @ pin.rnea(model, data, z, zd, np.zeros(model.nv))
    mz = np.array(pin.crba(model, data, z))
    mz = np.triu(mz) + np.triu(mz, 1).T  # whatever triangle the binding fills
    m_ref = rz.T @ mz @ rz
    fd_ref = np.linalg.solve(m_ref, a - h_ref)  # FD with τ := a (any τ will do)
    n = case.mech.nq
    tau, m, fd, back = np.empty(n), np.empty((n, n)), np.empty(n), np.empty(n)
    dyn.inverse_dynamics(q, v, a, tau)
    dyn.mass_matrix(q, m)
    dyn.forward_dynamics(q, v, a, fd)
    dyn.inverse_dynamics(q, v, fd, back)
    err = {
        "id": _rel(tau, tau_ref),
        "mass": _rel(m, m_ref),
        "fd_vs_pin_M_h": _rel(fd, fd_ref),
        "fd_residual": _rel(back, a),
        "mass_cond": float(np.linalg.cond(m_ref)),
    }
    if not twin.coupled:
        err["fd_vs_aba"] = _rel(fd, rz.T @ pin.aba(model, data, z, zd, rz @ a))
    # ID and M are products (well conditioned); FD is a solve: its error is bounded by
    # cond(M)·ε, so it is checked through the residual of ID(FD(τ)) = τ and against cond(M)
    bad = [k for k in ("id", "mass", "fd_residual") if not err[k] <= TOL]
    if not err["fd_vs_pin_M_h"] <= max(TOL, 1e-13 * err["mass_cond"]):
        bad.append("fd_vs_pin_M_h")
    if bad:
        raise RuntimeError(f"{case.name}: ours and Pinocchio disagree on the benchmarked state: "
                           + ", ".join(f"{k} {err[k]:.2e}" for k in bad))
    return err


# --------------------------------------------------------------------------- njit loops
# Deliberately not cached: numba revalidates a cached function against its own file only,
# and NUMBA_CACHE_DIR may be the user's (then exo_rt's source-keyed cache directory is not
# used), so a cached loop could keep stale kernel code. Compiling these few loops is quick.
@njit(cache=False)
def _jiggle(q, j, d):
    """Nudge q[j] by d (so no call sees the same state twice); returns the next (j, d)."""
    q[j] += d
    j += 1
    return (0, -d) if j == q.shape[0] else (j, d)


@njit(cache=False)
def _njit_id(model, data, q, v, a, out, n):
    j, d, s = 0, 1e-9, 0.0
    for _ in range(n):
        j, d = _jiggle(q, j, d)
        kernels.inverse_dynamics(model, data, q, v, a, out)
        s += out[0]
    return s


@njit(cache=False)
def _njit_mass(model, data, q, m, n):
    j, d, s = 0, 1e-9, 0.0
    for _ in range(n):
        j, d = _jiggle(q, j, d)
        kernels.mass_matrix(model, data, q, m)
        s += m[0, 0]
    return s


@njit(cache=False)
def _njit_fd(model, data, q, v, tau, out, n):
    j, d, s = 0, 1e-9, 0.0
    for _ in range(n):
        j, d = _jiggle(q, j, d)
        kernels.forward_dynamics(model, data, q, v, tau, out)
        s += out[0]
    return s


# empty functions: what calling compiled code from Python costs before any work
@njit(cache=False)
def _empty1(a):
    return None


@njit(cache=False)
def _empty6(model, data, q, v, a, out):
    return None


@njit(cache=False, _nrt=False)
def _empty6_no_nrt(model, data, q, v, a, out):
    return None


# --------------------------------------------------------------------------- timing
@dataclass
class Timing:
    median: float  # µs per call
    minimum: float
    number: int  # calls per batch
    samples: list[float] = field(default_factory=list)


def _calibrate(run, batch_s: float) -> int:
    """Calls per batch so that ``run(number)`` lasts about ``batch_s``."""
    number = 1
    while True:
        t = run(number)
        if t >= batch_s / 5:
            return max(1, round(number * batch_s / t))
        number *= 10 if t < batch_s / 100 else 2


def _interleaved(runs: dict, batch_s: float, repeats: int) -> dict[str, Timing]:
    """Median over ``repeats`` interleaved batches of each ``run(number) -> seconds``."""
    for run in runs.values():
        run(1)  # first call: compile or load from the cache, page in, outside any timing
    numbers = {k: _calibrate(run, batch_s) for k, run in runs.items()}
    for k, run in runs.items():
        run(numbers[k])  # warm-up batch
    samples: dict[str, list[float]] = {k: [] for k in runs}
    keys = list(runs)
    for r in range(repeats):
        for k in keys if r % 2 == 0 else reversed(keys):
            samples[k].append(runs[k](numbers[k]) / numbers[k] * 1e6)
    return {k: Timing(statistics.median(s), min(s), numbers[k], s) for k, s in samples.items()}


CLOCK = time.thread_time  # main(--wall) switches to time.perf_counter


def time_python(stmts: dict[str, tuple[str, dict]], batch_s: float, repeats: int):
    """Time Python statements (each compiled into its own ``timeit`` loop)."""
    runs = {k: timeit.Timer(stmt, timer=CLOCK, globals=ns).timeit
            for k, (stmt, ns) in stmts.items()}
    return _interleaved(runs, batch_s, repeats)


def time_njit(loops: dict[str, tuple], batch_s: float, repeats: int):
    """Time jitted loops ``loop(*args, n)``: seconds / n per call."""

    def runner(loop, args):
        def run(n: int) -> float:
            t0 = CLOCK()
            loop(*args, n)
            return CLOCK() - t0

        return run

    return _interleaved({k: runner(*v) for k, v in loops.items()}, batch_s, repeats)


# --------------------------------------------------------------------------- one mechanism
def bench_case(case: Case, batch_s: float, repeats: int,
               twin_urdf: Callable[[Case], str] = exporter_urdf) -> dict:
    mech = case.mech
    dyn = Dynamics(mech)
    model, data = dyn.packed, dyn.workspace
    n = mech.nq
    rng = np.random.default_rng(7)
    q, v, a = rng.uniform(-1, 1, n), rng.normal(0, 1, n), rng.normal(0, 1, n)
    out, m = np.empty(n), np.empty((n, n))
    ns = {"dyn": dyn, "kernels": kernels, "model": model, "data": data, "q": q, "v": v, "a": a,
          "out": out, "m": m}
    stmts = {
        "id_facade": "dyn.inverse_dynamics(q, v, a, out)",
        "id_raw": "kernels.inverse_dynamics(model, data, q, v, a, out)",
        "mass_facade": "dyn.mass_matrix(q, m)",
        "mass_raw": "kernels.mass_matrix(model, data, q, m)",
        "fd_facade": "dyn.forward_dynamics(q, v, a, out)",
        "fd_raw": "kernels.forward_dynamics(model, data, q, v, a, out)",
    }
    row: dict = {"mechanism": case.name, "nq": n, "bodies": mech.n_bodies - 1,
                 "coupled": mech.n_bodies - 1 != n,  # rotors share their joint's coordinate
                 "notes": case.notes}
    try:
        twin = make_twin(case, twin_urdf)
    except ImportError:  # Pinocchio is optional (the test extra): ours alone, unverified
        twin = None
    if twin is not None:
        row["errors"] = verify(case, dyn, twin, q, v, a)
        row["pin_nv"], row["coupled"] = int(twin.model.nv), twin.coupled
        ns.update(pin=twin.pin, pin_model=twin.model, pin_data=twin.data, z=twin.rz @ q + twin.c,
                  zd=twin.rz @ v, zdd=twin.rz @ a)
        stmts.update(id_pin="pin.rnea(pin_model, pin_data, z, zd, zdd)",
                     mass_pin="pin.crba(pin_model, pin_data, z)",
                     fd_pin="pin.aba(pin_model, pin_data, z, zd, zdd)")
    for stmt in stmts.values():
        exec(stmt, ns)  # first call: compile / load from cache, outside the timing
    py = time_python({k: (s, ns) for k, s in stmts.items()}, batch_s, repeats)
    qj = q.copy()
    jit = time_njit({
        "id_njit": (_njit_id, (model, data, qj, v, a, out)),
        "mass_njit": (_njit_mass, (model, data, qj, m)),
        "fd_njit": (_njit_fd, (model, data, qj, v, a, out)),
    }, batch_s, repeats)
    for k, t in {**py, **jit}.items():
        row[k] = t.median
        row[k + "_min"] = t.minimum
        row[k + "_number"] = t.number
    if twin is not None and twin.coupled:  # pin.aba solves the uncoupled tree: not the same problem
        row["fd_pin_note"] = "pin.aba on the uncoupled tree (not comparable)"
    return row


def dispatch_floor(case: Case, batch_s: float, repeats: int) -> dict:
    """What calling compiled code from Python costs, on the leg's arrays (diagnostics)."""
    dyn = Dynamics(case.mech)
    model, data = dyn.packed, dyn.workspace
    model_writable = np.array(model)  # a writable copy
    n = case.mech.nq
    q, out = np.zeros(n), np.empty(n)
    entry = _empty6_no_nrt.compile(tuple(typeof(x) for x in (model, data, q, q, q, out)))
    ns = {"e1": _empty1, "e6": _empty6, "e6n": _empty6_no_nrt, "entry": entry,
          "kernels": kernels, "dyn": dyn, "model": model, "model_writable": model_writable,
          "data": data, "q": q, "out": out,
          "f": (lambda: None)}
    stmts = {
        "python_call_noop": "f()",
        "njit_1_array": "e1(q)",
        "njit_6_arrays_model_readonly": "e6(model, data, q, q, q, out)",
        "njit_6_arrays_model_writable": "e6(model_writable, data, q, q, q, out)",
        "njit_6_arrays_no_nrt": "e6n(model, data, q, q, q, out)",
        "entry_point_6_arrays_no_nrt": "entry(model, data, q, q, q, out)",
        "id_raw_model_readonly": "kernels.inverse_dynamics(model, data, q, q, q, out)",
        "id_raw_model_writable": "kernels.inverse_dynamics(model_writable, data, q, q, q, out)",
        "id_facade": "dyn.inverse_dynamics(q, q, q, out)",
    }
    for stmt in stmts.values():
        exec(stmt, ns)
    t = time_python({k: (s, ns) for k, s in stmts.items()}, batch_s, repeats)
    return {k: v.median for k, v in t.items()}


# --------------------------------------------------------------------------- compile time
COMPILE_SNIPPET = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
from exo_rt.dynamics import Dynamics, kernels
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism
t_import = time.perf_counter() - t0
y = np.array([0.0, 1.0, 0.0])
links = [LinkSpec(n, 1.0, np.zeros(3), np.eye(3) * 0.01) for n in ("a", "b", "c")]
joints = [JointSpec("j1", "revolute", "a", "b", axis=y),
          JointSpec("j2", "revolute", "b", "c", np.array([0.0, 0.0, -0.4]), axis=y)]
mech = build_mechanism("tiny", links, joints, np.array([0.0, 0.0, -9.81]), "compile")
t = time.perf_counter()
dyn = Dynamics(mech)
t_facade = time.perf_counter() - t
model, n, nb = mech.packed, mech.nq, mech.n_bodies
data = np.zeros(kernels.workspace_size(nb, n))
q, v, a, out = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
calls = [
    ("Dynamics methods", lambda: (dyn.inverse_dynamics(q, v, a, out), dyn.mass_matrix(q),
                                  dyn.bias_forces(q, v, out), dyn.gravity(q, out),
                                  dyn.forward_dynamics(q, v, a, out), dyn.energy(q, v),
                                  dyn.frame_positions(q), dyn.frame_rotations(q))),
    ("positions", lambda: kernels.positions(model, data, q)),
    ("inverse_dynamics", lambda: kernels.inverse_dynamics(model, data, q, v, a, out)),
    ("bias_forces", lambda: kernels.bias_forces(model, data, q, v, out)),
    ("gravity_forces", lambda: kernels.gravity_forces(model, data, q, out)),
    ("mass_matrix", lambda: kernels.mass_matrix(model, data, q, np.zeros((n, n)))),
    ("forward_dynamics", lambda: kernels.forward_dynamics(model, data, q, v, a, out)),
    ("energy", lambda: kernels.energy(model, data, q, v, np.zeros(2))),
    ("frame_positions", lambda: kernels.frame_positions(model, data, q, np.zeros((nb, 3)))),
    ("frame_rotations", lambda: kernels.frame_rotations(model, data, q, np.zeros((nb, 3, 3)))),
]
per = {"Dynamics()": t_facade}
t1 = time.perf_counter()
for name, fn in calls:
    t = time.perf_counter()
    fn()
    per[name] = time.perf_counter() - t
t2 = time.perf_counter()
print(json.dumps({"import_s": t_import, "kernels_s": t2 - t1 + t_facade, "total_s": t2 - t0,
                  "per_kernel_s": per}))
"""


def compile_times() -> dict:
    """Fresh processes, NUMBA_CACHE_DIR empty (cold) then the same directory again (warm)."""
    with tempfile.TemporaryDirectory(prefix="exo-rt-numba-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        res = {}
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", COMPILE_SNIPPET], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=900)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"compile-time subprocess failed:\n{proc.stderr[-2000:]}")
            res[label] = json.loads(proc.stdout.strip().splitlines()[-1])
            res[label]["process_wall_s"] = wall
    return res


# --------------------------------------------------------------------------- report
def _fmt(x: float | None, width: int = 7, digits: int = 2) -> str:
    if x is None or not math.isfinite(x):
        return f"{'n/a':>{width}}"
    return f"{x:{width}.{digits}f}"


def _ratio(row: dict, op: str, kind: str = "facade") -> float | None:
    if (op == "fd" and row.get("coupled")) or f"{op}_pin" not in row:
        return None
    return row[f"{op}_{kind}"] / row[f"{op}_pin"]


def checks_for(rows: list[dict], compile_s: dict | None) -> list[tuple[str, bool]]:
    by = {r["mechanism"]: r for r in rows}
    checks: list[tuple[str, bool]] = []
    small = [r for r in rows if 2 <= r["nq"] <= 6 and not r["coupled"] and "id_pin" in r]
    for r in small:
        for op, label in (("id", "ID"), ("mass", "M")):
            x = _ratio(r, op)
            checks.append((f"{label} from Python, {r['mechanism']} ({r['nq']} DOF): "
                           f"ours/pin {x:.2f} ≤ 1", x <= 1.0))
    for n in (32, 64, 128):
        r = by.get(f"chain{n}")
        if r and "id_pin" in r:
            x = _ratio(r, "id")
            checks.append((f"ID from Python, chain{n}: ours/pin {x:.2f} ≤ 0.6", x <= 0.6))
    if "chain16" in by and "chain128" in by:
        for kind, label in (("njit", "inside njit"), ("facade", "from Python")):
            s = by["chain128"][f"id_{kind}"] / by["chain16"][f"id_{kind}"]
            checks.append((f"ID scaling t(128)/t(16) {label}: {s:.1f} ≤ 10", s <= 10.0))
    for name in ("leg2", "exo_leg"):
        if name in by:
            t = by[name]["id_njit"]
            checks.append((f"ID inside njit, {name}: {t:.3f} µs ≤ 1 µs", t <= 1.0))
    if compile_s:
        w = compile_s["warm"]["total_s"]
        checks.append((f"dynamics import + Dynamics + kernels from a warm cache {w:.2f} s ≤ 2 s "
                       "(part of the start-up budget)", w <= 2.0))
    return checks


def report(rows: list[dict], dispatch: dict | None, compile_s: dict | None,
           checks: list[tuple[str, bool]], twin_label: str) -> str:
    head = (f"{'mechanism':<10} {'nq':>3} {'op':<3} | {'py facade':>9} {'py raw':>7} "
            f"{'njit':>7} {'pin':>7} | {'facade/pin':>10} {'raw/pin':>7} {'njit/pin':>8}")
    clock = "thread CPU time" if CLOCK is time.thread_time else "wall clock"
    lines = [f"µs per call, median of interleaved ~2 ms batches, {clock} "
             f"(see the module docstring); Pinocchio twins from {twin_label}", "",
             head, "-" * len(head)]
    for r in rows:
        for op, label in OPS:
            pin_t = None if (op == "fd" and r["coupled"]) else r.get(f"{op}_pin")
            njr = r[f"{op}_njit"] / pin_t if pin_t else None
            lines.append(
                f"{r['mechanism']:<10} {r['nq']:>3} {label:<3} | {_fmt(r[f'{op}_facade'], 9)} "
                f"{_fmt(r[f'{op}_raw'])} {_fmt(r[f'{op}_njit'], 7, 3)} {_fmt(pin_t)} | "
                f"{_fmt(_ratio(r, op), 10)} {_fmt(_ratio(r, op, 'raw'))} {_fmt(njr, 8)}"
            )
    coupled = [r["mechanism"] for r in rows if r["coupled"]]
    if coupled:
        lines.append(f"  ({', '.join(coupled)}: Pinocchio times the uncoupled tree incl. rotors "
                     "(nv = bodies), so its ratios are not targets; FD n/a since pin.aba "
                     "ignores the coupling)")
    lines.append("")
    lines.append("agreement with Pinocchio on the timed state (relative ‖Δ‖∞/‖ref‖∞):")
    if not any("errors" in r for r in rows):
        lines.append("  (Pinocchio is not installed: nothing verified, no ratios)")
    for r in (r for r in rows if "errors" in r):
        e = r["errors"]
        lines.append(f"  {r['mechanism']:<10} ID {e['id']:.1e}  M {e['mass']:.1e}  "
                     f"FD vs M,h {e['fd_vs_pin_M_h']:.1e} (cond M {e['mass_cond']:.1e})  "
                     f"ID(FD(τ))−τ {e['fd_residual']:.1e}")
    if dispatch:
        lines.append("")
        lines.append("calling compiled code from Python (leg2 arrays, ns per call):")
        for k, val in dispatch.items():
            lines.append(f"  {k:<28} {val * 1e3:7.0f}")
        per_arg = (dispatch["njit_6_arrays_model_writable"] - dispatch["njit_1_array"]) / 5
        ro = dispatch["njit_6_arrays_model_readonly"] - dispatch["njit_6_arrays_model_writable"]
        nrt = dispatch["njit_6_arrays_model_readonly"] - dispatch["njit_6_arrays_no_nrt"]
        disp = dispatch["njit_6_arrays_no_nrt"] - dispatch["entry_point_6_arrays_no_nrt"]
        lines.append(f"  → ≈ {per_arg * 1e3:.0f} ns per array argument through the dispatcher; "
                     f"the read-only packed array {ro * 1e3:+.0f} ns; the NRT {nrt * 1e3:+.0f} ns "
                     f"and the type dispatch {disp * 1e3:+.0f} ns for 6 arrays "
                     "(the facade skips both)")
    if compile_s:
        lines.append("")
        lines.append("numba compile (fresh process: import exo_rt.dynamics, build a Dynamics, "
                     "call every method and kernel once):")
        for label in ("cold", "warm"):
            c = compile_s[label]
            lines.append(f"  {label:<5} import {c['import_s']:5.2f} s + compile/load "
                         f"{c['kernels_s']:6.2f} s = {c['total_s']:6.2f} s "
                         f"(process {c['process_wall_s']:.2f} s)")
        cold = compile_s["cold"]["per_kernel_s"]
        lines.append("  cold, each step (shared callees compile with the first user): "
                     + ", ".join(f"{k} {t:.2f}" for k, t in cold.items()))
    lines.append("")
    lines.append("targets:")
    lines += [f"  {'PASS' if ok else 'MISS'}  {text}" for text, ok in checks]
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, twin_urdf: Callable[[Case], str] = exporter_urdf,
         twin_label: str = "exo-rt's URDF exporter", prog: str = "bench_pinocchio") -> int:
    """Run the benchmark and print the table and the targets; 0 unless it could not run."""
    ap = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="chains 4, 16, 128 only and fewer batches (smoke run)")
    ap.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    ap.add_argument("--no-compile", action="store_true",
                    help="skip the cold/warm numba compile measurement")
    ap.add_argument("--wall", action="store_true",
                    help="time with the wall clock instead of this thread's CPU time")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.thread_time
    batch_s, repeats = (0.002, 9) if args.quick else (0.002, 31)
    t_start = time.perf_counter()
    try:
        all_cases = cases(args.quick)
        rows = []
        for case in all_cases:
            rows.append(bench_case(case, batch_s, repeats, twin_urdf))
            print(f"  measured {case.name}", file=sys.stderr)
        dispatch = dispatch_floor(all_cases[0], batch_s, repeats)
    except (RuntimeError, ImportError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    t_bench = time.perf_counter() - t_start
    compile_s = None
    if not args.no_compile:
        print("  measuring numba compile time (cold, then warm)…", file=sys.stderr)
        compile_s = compile_times()
    checks = checks_for(rows, compile_s)
    print(report(rows, dispatch, compile_s, checks, twin_label))
    print(f"\n(timing {t_bench:.1f} s; {'quick' if args.quick else 'full'} run; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)")
    if args.json:
        import numba
        import pinocchio

        doc = {
            "rows": rows, "dispatch_us": dispatch, "compile": compile_s,
            "checks": [{"target": t, "pass": ok} for t, ok in checks],
            "settings": {"quick": args.quick, "batch_s": batch_s, "repeats": repeats,
                         "clock": "wall" if args.wall else "thread_cpu", "twins": twin_label},
            "versions": {"python": platform.python_version(), "numpy": np.__version__,
                         "numba": numba.__version__, "pinocchio": pinocchio.__version__},
        }
        Path(args.json).write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
