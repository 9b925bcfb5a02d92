"""Small shared helpers for reading model files: numbers and vectors with clear errors.

Both loaders (URDF and robot YAML) turn user text into floats through the same functions
(:mod:`exo_rt.yamlio`, where every config reader finds them), so a bad value gets the same
message everywhere: what, where (file:line and key), how to fix.
"""

from __future__ import annotations

import numpy as np

from exo_rt.yamlio import did_you_mean, to_float, to_vector

__all__ = ["did_you_mean", "inertia_matrix", "to_float", "to_vector"]


def inertia_matrix(ixx: float, iyy: float, izz: float, ixy: float, ixz: float,
                   iyz: float) -> np.ndarray:
    """The symmetric inertia tensor from its six URDF components (kg·m²)."""
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)
