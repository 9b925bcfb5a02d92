"""Declared schemas of the config files, one module per kind (:mod:`exo_rt.schema.core` is
the engine: reading with ``file:line`` errors, JSON Schema, the docs' key tables).

``exo-rt schema KIND`` writes a kind's JSON Schema; the shipped ones are
``configs/schemas/KIND.schema.json``, named by each shipped config's
``# yaml-language-server: $schema=…`` line so that editors complete and check its keys.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

# kind → (module with SCHEMA, title, the shipped configs of that kind, its docs page)
KINDS = {
    "robot": ("exo_rt.schema.robot", "exo-rt robot file", "configs/robots/**/*.yaml",
              "docs/config-robot.md"),
    "controller": ("exo_rt.schema.controller", "exo-rt controller file",
                   "configs/controllers/*.yaml", "docs/config-controller.md"),
    "buses": ("exo_rt.schema.buses", "exo-rt bus file", "configs/buses/*.yaml",
              "docs/config-buses.md"),
    "top": ("exo_rt.schema.top", "exo-rt top configuration", "configs/*.yaml",
            "docs/config.md"),
    "bench": ("exo_rt.schema.bench", "exo-rt bench procedure options", "configs/bench/*.yaml",
              "docs/config-bench.md"),
}
SCHEMA_DIR = "configs/schemas"


def schema_class(kind: str):
    """The schema dataclass of a file kind."""
    return importlib.import_module(KINDS[kind][0]).SCHEMA


def json_schema(kind: str) -> dict:
    """The JSON Schema of a file kind."""
    from exo_rt.schema.core import json_schema as build

    return build(schema_class(kind), KINDS[kind][1])


def json_text(kind: str) -> str:
    """The JSON Schema as the shipped file holds it."""
    return json.dumps(json_schema(kind), indent=1, ensure_ascii=False) + "\n"


def schema_path(root: Path, kind: str) -> Path:
    return root / SCHEMA_DIR / f"{kind}.schema.json"
