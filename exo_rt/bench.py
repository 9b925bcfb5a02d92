"""Dynamics benchmarks side by side with Pinocchio (DESIGN §9; ``exo-rt bench``).

What is timed, per mechanism (the 2-DOF leg, the default exoskeleton leg with its rotors, a
6-DOF two-leg tree and serial chains of 4…128 links):
- ours from Python through the ``Dynamics`` facade with preallocated ``out=`` arrays;
- ours inside njit (a jitted loop calling the kernel, the state perturbed every iteration so
  nothing is hoisted; total time / iterations);
- Pinocchio from Python (``rnea``, ``crba``, ``aba``) on the same tree, when installed.
Each figure is the median over repeats of the mean per call of a batch (the VM is noisy, so
medians and ratios, never absolute thresholds in tests). Before timing, each mechanism's
inverse dynamics is checked against Pinocchio's (1e-9 relative): a benchmark never times a
wrong result. Numba compile time is measured in fresh processes, cold (empty cache) and warm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np
from numba import njit

from exo_rt.dynamics import Dynamics, kernels
from exo_rt.model import load_mechanism
from exo_rt.model.topology import JointSpec, LinkSpec, build_mechanism

ROOT = Path(__file__).resolve().parents[1]


def _rod(name: str, mass: float, length: float, rng: np.random.Generator) -> LinkSpec:
    d = np.array([0.05, 0.06, length]) ** 2
    inertia = np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]) * mass / 12
    return LinkSpec(name, mass, np.array([0.0, 0.0, -length / 2]) + rng.normal(0, 0.01, 3),
                    inertia)


def leg2():
    """Pelvis fixed, hip and knee flexion (no rotors)."""
    rng = np.random.default_rng(0)
    y = np.array([0.0, 1.0, 0.0])
    links = [LinkSpec("pelvis", 6.0, np.zeros(3), np.eye(3) * 0.05), _rod("thigh", 8.0, 0.43, rng),
             _rod("shank", 4.0, 0.42, rng)]
    joints = [JointSpec("hip", "revolute", "pelvis", "thigh", axis=-y),
              JointSpec("knee", "revolute", "thigh", "shank", np.array([0, 0, -0.43]), axis=y)]
    return build_mechanism("leg2", links, joints, np.array([0, 0, -9.81]), "bench")


def two_legs():
    """Pelvis fixed, each leg hip, knee and ankle flexion: 6 DOF, a branched tree."""
    rng = np.random.default_rng(1)
    y = np.array([0.0, 1.0, 0.0])
    links = [LinkSpec("pelvis", 10.0, np.zeros(3), np.eye(3) * 0.1)]
    joints = []
    for side, dy in (("l", 0.1), ("r", -0.1)):
        links += [_rod(f"{side}_thigh", 8.0, 0.43, rng), _rod(f"{side}_shank", 4.0, 0.42, rng),
                  _rod(f"{side}_foot", 1.2, 0.1, rng)]
        joints += [
            JointSpec(f"{side}_hip", "revolute", "pelvis", f"{side}_thigh", np.array([0, dy, 0]),
                      axis=-y),
            JointSpec(f"{side}_knee", "revolute", f"{side}_thigh", f"{side}_shank",
                      np.array([0, 0, -0.43]), axis=y),
            JointSpec(f"{side}_ankle", "revolute", f"{side}_shank", f"{side}_foot",
                      np.array([0, 0, -0.42]), axis=-y),
        ]
    return build_mechanism("two_legs", links, joints, np.array([0, 0, -9.81]), "bench")


def chain(n: int):
    """A serial chain of ``n`` revolute links with random axes and rotated frames."""
    rng = np.random.default_rng(n)
    links = [LinkSpec("base", 1.0, np.zeros(3), np.eye(3) * 0.01)]
    joints = []
    for i in range(1, n + 1):
        links.append(_rod(f"l{i}", float(rng.uniform(0.5, 2)), 0.2, rng))
        axis = rng.normal(size=3)
        joints.append(JointSpec(f"j{i}", "revolute", links[i - 1].name, f"l{i}",
                                np.array([0, 0, -0.2]) if i > 1 else np.zeros(3),
                                rng.uniform(-0.3, 0.3, 3), axis / np.linalg.norm(axis)))
    return build_mechanism(f"chain{n}", links, joints, np.array([0, 0, -9.81]), "bench")


@njit(cache=True)
def _loop_id(pk, ws, q, v, a, out, n):
    for _ in range(n):
        q[0] += 1e-9
        kernels.inverse_dynamics(pk, ws, q, v, a, out)


@njit(cache=True)
def _loop_mass(pk, ws, q, m, n):
    for _ in range(n):
        q[0] += 1e-9
        kernels.mass_matrix(pk, ws, q, m)


@njit(cache=True)
def _loop_fd(pk, ws, q, v, tau, out, n):
    for _ in range(n):
        q[0] += 1e-9
        kernels.forward_dynamics(pk, ws, q, v, tau, out)


def _per_call(fn, budget_s: float, repeats: int) -> float:
    """Median over ``repeats`` of the mean µs per call of a batch of about ``budget_s``."""
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(budget_s / once))
    timeit.repeat(fn, number=number, repeat=2)  # warm-up: caches, dispatch, CPU clock
    runs = timeit.repeat(fn, number=number, repeat=repeats)
    return statistics.median(runs) / number * 1e6


def _njit_per_call(loop, args, n: int, repeats: int) -> float:
    loop(*args, 10)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        loop(*args, n)
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


def _pinocchio_twin(mech):
    try:
        import pinocchio as pin
    except ImportError:
        return None
    from exo_rt.model.urdf import write_urdf

    model = pin.buildModelFromXML(write_urdf(mech, mimic=False, limits=False))
    model.gravity.linear = np.array(mech.gravity)
    idx = np.array([model.idx_vs[model.getJointId(mech.tree_joint_names[i])]
                    for i in range(1, mech.n_bodies)])
    rz = np.zeros((model.nv, mech.nq))
    for i in range(1, mech.n_bodies):
        rz[idx[i - 1], mech.q_index[i]] = mech.mimic_multiplier[i]
    return pin, model, model.createData(), rz


def bench_mechanism(mech, budget: float, repeats: int, njit_n: int) -> dict:
    dyn = Dynamics(mech)
    pk, ws = dyn.packed, dyn.workspace
    rng = np.random.default_rng(0)
    n = mech.nq
    q, v, a = rng.uniform(-1, 1, n), rng.normal(0, 1, n), rng.normal(0, 1, n)
    out, m = np.empty(n), np.empty((n, n))
    row: dict = {"mechanism": mech.name, "nq": n, "bodies": mech.n_bodies - 1}
    row["id_py"] = _per_call(lambda: dyn.inverse_dynamics(q, v, a, out), budget, repeats)
    row["mass_py"] = _per_call(lambda: dyn.mass_matrix(q, m), budget, repeats)
    row["fd_py"] = _per_call(lambda: dyn.forward_dynamics(q, v, a, out), budget, repeats)
    qj = q.copy()
    row["id_njit"] = _njit_per_call(_loop_id, (pk, ws, qj, v, a, out), njit_n, repeats)
    row["mass_njit"] = _njit_per_call(_loop_mass, (pk, ws, qj, m), njit_n, repeats)
    row["fd_njit"] = _njit_per_call(_loop_fd, (pk, ws, qj, v, a, out), njit_n, repeats)
    twin = _pinocchio_twin(mech)
    if twin is not None:
        pin, model, data, rz = twin
        z, zd, zdd = rz @ q, rz @ v, rz @ a
        ref = rz.T @ pin.rnea(model, data, z, zd, zdd)
        ours = dyn.inverse_dynamics(q, v, a)
        err = np.max(np.abs(ours - ref)) / max(1.0, np.max(np.abs(ref)))
        if err > 1e-9:
            raise RuntimeError(f"{mech.name}: inverse dynamics differs from Pinocchio ({err:.1e})")
        row["id_pin"] = _per_call(lambda: pin.rnea(model, data, z, zd, zdd), budget, repeats)
        row["mass_pin"] = _per_call(lambda: pin.crba(model, data, z), budget, repeats)
        row["fd_pin"] = _per_call(lambda: pin.aba(model, data, z, zd, zdd), budget, repeats)
    return row


COMPILE_SNIPPET = """
import time, numpy as np
t0 = time.perf_counter()
from exo_rt.model import load_mechanism
from exo_rt.dynamics import Dynamics
mech = load_mechanism({path!r})
d = Dynamics(mech); q = np.zeros(mech.nq)
d.inverse_dynamics(q, q, q); d.mass_matrix(q); d.forward_dynamics(q, q, q); d.gravity(q)
d.bias_forces(q, q); d.energy(q, q); d.frame_positions(q)
print(time.perf_counter() - t0)
"""


def compile_times() -> dict:
    """Seconds from import to every dynamics kernel called once: empty cache, then warm."""
    code = COMPILE_SNIPPET.format(path=str(ROOT / "configs" / "robots" / "exo_leg.yaml"))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = {}
        for label in ("cold", "warm"):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True)
            out[label] = float(res.stdout.strip().splitlines()[-1])
    return out


def _ratio(row, key):
    pin_t = row.get(f"{key}_pin")
    return row[f"{key}_py"] / pin_t if pin_t else float("nan")


def report(rows: list[dict], compile_s: dict) -> tuple[str, list[tuple[str, bool]]]:
    head = (f"{'mechanism':<10} {'nq':>3} | {'ID py':>7} {'pin':>6} {'ratio':>5} | "
            f"{'M py':>7} {'pin':>6} {'ratio':>5} | {'FD py':>7} {'pin':>6} {'ratio':>5} | "
            f"{'ID njit':>7} {'M njit':>7} {'FD njit':>7}   (µs per call, medians)")
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = []
        for key in ("id", "mass", "fd"):
            cells.append(f"{r[f'{key}_py']:7.2f} {r.get(f'{key}_pin', float('nan')):6.2f} "
                         f"{_ratio(r, key):5.2f}")
        lines.append(f"{r['mechanism']:<10} {r['nq']:>3} | " + " | ".join(cells) +
                     f" | {r['id_njit']:7.2f} {r['mass_njit']:7.2f} {r['fd_njit']:7.2f}")
    by = {r["mechanism"]: r for r in rows}
    checks: list[tuple[str, bool]] = []
    for name in ("leg2", "exo_leg", "two_legs"):
        if name in by and "id_pin" in by[name]:
            for key, label in (("id", "inverse dynamics"), ("mass", "mass matrix")):
                ratio = _ratio(by[name], key)
                checks.append((f"{label} from Python, {name}: ratio {ratio:.2f} ≤ 1", ratio <= 1))
    for name in ("chain32", "chain64", "chain128"):
        if name in by and "id_pin" in by[name]:
            ratio = _ratio(by[name], "id")
            checks.append((f"inverse dynamics from Python, {name}: ratio {ratio:.2f} ≤ 0.6",
                           ratio <= 0.6))
    if "chain16" in by and "chain128" in by:
        for where in ("njit", "py"):
            s = by["chain128"][f"id_{where}"] / by["chain16"][f"id_{where}"]
            checks.append((f"ID scaling t(128)/t(16) ({where}): {s:.1f} ≤ 10", s <= 10))
    if "exo_leg" in by:
        t = by["exo_leg"]["id_njit"]
        checks.append((f"law's dynamics inside njit, exo_leg with rotors: {t:.2f} µs ≤ 1", t <= 1))
    lines.append("")
    lines.append(f"numba compile (all dynamics kernels, exo_leg): cold {compile_s['cold']:.2f} s, "
                 f"warm cache {compile_s['warm']:.2f} s (target ≤ 2 s to RUN)")
    checks.append((f"start-up with a warm cache {compile_s['warm']:.2f} s ≤ 2 s",
                   compile_s["warm"] <= 2))
    lines.append("")
    lines += [f"  {'PASS' if ok else 'MISS'}  {text}" for text, ok in checks]
    return "\n".join(lines), checks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_dynamics", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = ap.parse_args(argv)
    sizes = (4, 16, 128) if args.quick else (4, 8, 16, 32, 64, 128)
    budget, repeats, njit_n = (0.02, 3, 20000) if args.quick else (0.1, 7, 200000)
    mechs = [leg2(), load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml"), two_legs()]
    mechs += [chain(n) for n in sizes]
    bench_mechanism(mechs[0], budget, 2, 1000)  # throw-away run: the process warms up
    rows = []
    for mech in mechs:
        n_calls = max(200, njit_n // max(1, mech.nq))
        rows.append(bench_mechanism(mech, budget, repeats, n_calls))
        print(f"  measured {mech.name}", file=sys.stderr)
    compile_s = compile_times()
    text, checks = report(rows, compile_s)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "compile_s": compile_s,
                                               "checks": checks}, indent=2))
    return 0
