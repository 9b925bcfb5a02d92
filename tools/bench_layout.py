#!/usr/bin/env python3
"""Named array layouts, measured: ``python tools/bench_layout.py`` times one body-by-body
kernel (the reads of the recursive dynamics: each body's mass, centre of mass, inertia, joint
axis and parent) on the same numbers held three ways, below.

- **columns**: a float64 (bodies × width) array read at module-level integer constants (how
  the packed model is held today: ``P_*`` in ``exo_rt/model/mechanism.py``);
- **declared layout**: the same array, its columns declared once by name, width and unit in
  a small helper that hands out the integer constants (what njit then sees is the same code);
- **structured dtype**: a numpy record array, read by field name inside njit.

It prints µs per call (median of 7 × 20 000 calls) for 6 and 32 bodies and the ratios to
the columns version; the choice and its reasons are in docs/performance.md ("Named layouts").
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass(frozen=True)
class Field:
    name: str
    width: int
    unit: str


class Layout:
    """Columns declared once (name, width, unit): ``layout.column(name)`` is the first column
    of a field, ``layout.width`` the row width — integer constants for njit code."""

    def __init__(self, *fields: Field) -> None:
        self.fields = fields
        self.offsets: dict[str, int] = {}
        o = 0
        for f in fields:
            self.offsets[f.name] = o
            o += f.width
        self.width = o

    def column(self, name: str) -> int:
        return self.offsets[name]


BODY = Layout(Field("mass", 1, "kg"), Field("com", 3, "m"), Field("inertia", 6, "kg·m²"),
              Field("axis", 3, "1"), Field("parent", 1, "index"))
# the declared layout's constants (module level: njit freezes them)
D_MASS, D_COM, D_INERTIA = BODY.column("mass"), BODY.column("com"), BODY.column("inertia")
D_AXIS, D_PARENT, D_WIDTH = BODY.column("axis"), BODY.column("parent"), BODY.width
# the hand-numbered columns of today
C_MASS, C_COM, C_INERTIA, C_AXIS, C_PARENT, C_WIDTH = 0, 1, 4, 10, 13, 14

RECORD = np.dtype([("mass", "f8"), ("com", "f8", (3,)), ("inertia", "f8", (6,)),
                   ("axis", "f8", (3,)), ("parent", "i8")], align=True)


@njit(cache=True)
def by_columns(pk, q, out):
    n = pk.shape[0]
    for i in range(n):
        m = pk[i, C_MASS]
        p = int(pk[i, C_PARENT])
        s = 0.0
        for k in range(3):
            s += m * pk[i, C_COM + k] * pk[i, C_AXIS + k]
        for k in range(6):
            s += pk[i, C_INERTIA + k] * q[i]
        out[i] = s + (out[p] if p >= 0 else 0.0)


@njit(cache=True)
def by_declared_layout(pk, q, out):
    n = pk.shape[0]
    for i in range(n):
        m = pk[i, D_MASS]
        p = int(pk[i, D_PARENT])
        s = 0.0
        for k in range(3):
            s += m * pk[i, D_COM + k] * pk[i, D_AXIS + k]
        for k in range(6):
            s += pk[i, D_INERTIA + k] * q[i]
        out[i] = s + (out[p] if p >= 0 else 0.0)


@njit(cache=True)
def by_record(rec, q, out):
    n = rec.shape[0]
    for i in range(n):
        b = rec[i]
        m = b.mass
        p = b.parent
        s = 0.0
        for k in range(3):
            s += m * b.com[k] * b.axis[k]
        for k in range(6):
            s += b.inertia[k] * q[i]
        out[i] = s + (out[p] if p >= 0 else 0.0)


@njit(cache=True)
def _repeat(fn_id, pk, rec, q, out, n):
    for _ in range(n):
        if fn_id == 0:
            by_columns(pk, q, out)
        elif fn_id == 1:
            by_declared_layout(pk, q, out)
        else:
            by_record(rec, q, out)


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    rng = np.random.default_rng(1)
    print("one body-by-body pass, µs per call (median of 7 × 20 000, inside njit):")
    for n in (6, 32):
        pk = rng.normal(size=(n, C_WIDTH))
        pk[:, C_PARENT] = np.arange(n) - 1
        rec = np.zeros(n, RECORD)
        rec["mass"], rec["com"] = pk[:, C_MASS], pk[:, C_COM:C_COM + 3]
        rec["inertia"], rec["axis"] = pk[:, C_INERTIA:C_INERTIA + 6], pk[:, C_AXIS:C_AXIS + 3]
        rec["parent"] = np.arange(n) - 1
        q = rng.normal(size=n)
        results = []
        for fn_id in range(3):
            out = np.zeros(n)
            _repeat(fn_id, pk, rec, q, out, 10)
            times = []
            for _ in range(7):
                t0 = time.perf_counter()
                _repeat(fn_id, pk, rec, q, out, 20000)
                times.append((time.perf_counter() - t0) / 20000 * 1e6)
            results.append((float(np.median(times)), out.copy()))
        assert np.allclose(results[0][1], results[1][1]) and np.allclose(results[0][1],
                                                                        results[2][1])
        base = results[0][0]
        for name, (t, _) in zip(("columns", "declared layout", "structured dtype"), results,
                                strict=True):
            print(f"  {n:3d} bodies  {name:17s} {t:7.3f} µs  ({t / base:.2f}×)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
