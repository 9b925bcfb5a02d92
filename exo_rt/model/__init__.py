"""Mechanism descriptions (URDF or robot YAML) → immutable :class:`Mechanism` arrays."""

from __future__ import annotations

from pathlib import Path

from exo_rt.errors import ModelError, Where
from exo_rt.model.mechanism import Closure, Mechanism
from exo_rt.model.robot_yaml import load_robot_yaml
from exo_rt.model.urdf import load_urdf

__all__ = ["Closure", "Mechanism", "load_mechanism", "load_robot_yaml", "load_urdf"]


def load_mechanism(path: str | Path, *, wearer: bool = True, strict: bool = False) -> Mechanism:
    """Load a ``.urdf`` (or ``.xml``) or a robot ``.yaml``/``.yml`` file (``wearer=False``:
    without the wearer's segments; ``strict``: the model's warnings are errors)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".urdf", ".xml"):
        return load_urdf(Path(path), strict=strict)
    if suffix in (".yaml", ".yml"):
        return load_robot_yaml(path, wearer=wearer, strict=strict)
    raise ModelError(f"unknown model file type '{suffix}'", Where(str(path)),
                     "give a .urdf file or a robot .yaml file")
