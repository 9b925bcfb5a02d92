#!/usr/bin/env python3
"""Dynamics benchmarks side by side with Pinocchio (docs/performance.md).

Usage: ``python tools/bench_dynamics.py [--quick] [--json FILE] [--no-compile] [--wall]``, or
``main(argv)`` from Python (returns the exit code).

The benchmark itself is :mod:`tools.bench_pinocchio` (its module docstring says what is timed
and how). The one difference here: the Pinocchio twins are written by
:mod:`tools.urdfgen` — from the link/joint specs a mechanism was built from, or from the
built mechanism for one loaded from a config — independently of exo-rt's own URDF exporter,
so that the agreement checked before timing also covers our loader and packing.
"""

from __future__ import annotations

import sys

try:
    from tools import bench_pinocchio as bench
    from tools import urdfgen
except ImportError:  # run as ``python tools/bench_dynamics.py``: tools/ itself is on sys.path
    import bench_pinocchio as bench  # type: ignore[no-redef]
    import urdfgen  # type: ignore[no-redef]


def independent_urdf(case: bench.Case) -> str:
    """The twin's URDF from the specs (joints depth-first), else from the built mechanism."""
    if case.links is not None:
        return urdfgen.urdf_from_specs(case.name, case.links, case.joints)
    return urdfgen.urdf_from_mechanism(case.mech)


def main(argv: list[str] | None = None) -> int:
    return bench.main(argv, twin_urdf=independent_urdf, twin_label="tools/urdfgen.py",
                      prog="bench_dynamics")


if __name__ == "__main__":
    sys.exit(main())
