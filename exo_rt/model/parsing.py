"""Small shared helpers for reading model files: numbers and vectors with clear errors.

Both loaders (URDF and robot YAML) turn user text into floats through these functions, so a
bad value gets the same message everywhere: what, where (file:line and key), how to fix.
"""

from __future__ import annotations

import difflib
import math

import numpy as np

from exo_rt.errors import ExoError, ModelError, Where


def did_you_mean(name: str, candidates) -> str:
    """' — did you mean 'x'?' hint for a misspelt name, or an empty string."""
    close = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1)
    return f"did you mean '{close[0]}'?" if close else ""


def to_float(value, where: Where, *, allow_inf: bool = False,
             error: type[ExoError] = ModelError) -> float:
    """A finite float from a YAML scalar or a string; ModelError otherwise."""
    if isinstance(value, bool) or value is None:
        raise error(f"expected a number, got {value!r}", where, "write a number, e.g. 0.5")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise error(f"expected a number, got {value!r}", where,
                         "write a number, e.g. 0.5") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise error(f"expected a finite number, got {value!r}", where,
                         "write a finite number")
    return x


def to_vector(value, n: int, where: Where, error: type[ExoError] = ModelError) -> np.ndarray:
    """A length-``n`` float vector from a YAML list or a whitespace-separated string."""
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise error(f"expected a list of {n} numbers, got {value!r}", where,
                         f"write [{', '.join(['0'] * n)}]")
    if len(items) != n:
        raise error(f"expected {n} numbers, got {len(items)} ({value!r})", where,
                         f"write exactly {n} numbers, e.g. [{', '.join(['0'] * n)}]")
    return np.array([to_float(v, where, error=error) for v in items], dtype=float)


def inertia_matrix(ixx: float, iyy: float, izz: float, ixy: float, ixz: float,
                   iyz: float) -> np.ndarray:
    """The symmetric inertia tensor from its six URDF components (kg·m²)."""
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)
