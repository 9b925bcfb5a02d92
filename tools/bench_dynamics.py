#!/usr/bin/env python3
"""Dynamics benchmarks side by side with Pinocchio: ``python tools/bench_dynamics.py [--quick]``.

The code lives in :mod:`exo_rt.bench` so that ``exo-rt bench`` runs the same thing.
"""

import sys

from exo_rt.bench import main

if __name__ == "__main__":
    sys.exit(main())
