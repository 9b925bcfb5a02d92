"""Benches on the simulated bus for the procedure tests, and robot-file variants with known
plant parameters (drive keys replaced in a copy of the shipped exo_leg files)."""

from __future__ import annotations

import re
from pathlib import Path

from exo_rt.hil.bench import Bench
from exo_rt.hil.fixture import CanFixture
from exo_rt.runtime.config import load_top
from exo_rt.runtime.options import RunOptions
from exo_rt.runtime.rig import open_rig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
FRICTION_KEYS = ("coulomb", "static", "viscous", "load_friction")


def variant_top(tmp: Path, drive: dict[str, float]) -> Path:
    """A top config whose robot's drives have ``drive`` keys replaced (both joints)."""
    (tmp / "modules").mkdir(parents=True, exist_ok=True)
    module = (CONFIGS / "robots" / "modules" / "exo_leg_module.yaml").read_text()
    for key, value in drive.items():
        module, n = re.subn(rf"\b{key}: [0-9.e+-]+", f"{key}: {value}", module)
        assert n == 2, key
    (tmp / "modules" / "exo_leg_module.yaml").write_text(module)
    (tmp / "exo_leg.yaml").write_text((CONFIGS / "robots" / "exo_leg.yaml").read_text())
    top = (CONFIGS / "exo_leg.yaml").read_text()
    top = top.replace("robot: robots/exo_leg.yaml", f"robot: {tmp / 'exo_leg.yaml'}")
    top = top.replace("buses: buses/", f"buses: {CONFIGS / 'buses'}/")
    top = top.replace("controller: controllers/", f"controller: {CONFIGS / 'controllers'}/")
    (tmp / "top.yaml").write_text(top)
    return tmp / "top.yaml"


def sim_bench(top_path: Path | None = None, plant=None, pose=(0.3, 0.6)) -> Bench:
    """A bench on the in-process simulated bus (``plant``: a different leg than the model),
    its drives opened as a run opens them (:func:`exo_rt.runtime.rig.open_rig`, no board)."""
    top = load_top(top_path or CONFIGS / "exo_leg.yaml")
    rig = open_rig(top, "sim", RunOptions(board=None, start_pose=tuple(pose), plant=plant),
                   cpus=set())
    return Bench(top, rig.drives, fixture=CanFixture(rig.drives), world=rig.bus_set.world)
