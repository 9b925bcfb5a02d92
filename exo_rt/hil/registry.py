"""Bench procedures by name: one registry from ``exo-rt bench-test NAME`` to the procedure
(docs/architecture.md, "Recipes": a bench procedure).

A procedure is a function of the bench (and, per joint, of the joint's name) with keyword
options, returning its figures as a dict::

    @registry.procedure("my_test", per_joint=True, moves="what moves, how far, how long")
    def my_test(bench, joint, *, amplitude=0.05) -> dict:
        ...  # drive the joints through ``bench`` (its loop, its safety check every cycle)

``moves`` is the line the pre-flight checklist prints; ``snippet``: the report carries a YAML
snippet for the robot file (an identification). Its options are read from a bench options
file by the section of :mod:`exo_rt.schema.bench` of the same name; a procedure without one
takes no options from a file.

The built-in procedures are those of the modules in :data:`BUILTIN`; a third party registers
its own under the entry-point group ``exo_rt.procedures`` (name → the module defining it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exo_rt import plugins

GROUP = "exo_rt.procedures"
BUILTIN = ("exo_rt.hil.procedures", "exo_rt.hil.response", "exo_rt.hil.identify")


@dataclass(frozen=True)
class Procedure:
    """A registered procedure: how it is called and what it moves."""

    name: str
    run: Callable[..., dict]
    per_joint: bool
    moves: str
    snippet: bool = False


_NAMES: plugins.Registry[Procedure] = plugins.Registry(
    GROUP, "bench procedure", BUILTIN, docs="docs/bench.md")


def procedure(name: str, *, per_joint: bool, moves: str, snippet: bool = False):
    """Register the decorated function as the procedure ``name`` (see the module)."""
    def register(fn: Callable[..., dict]) -> Callable[..., dict]:
        _NAMES.add(name, Procedure(name, fn, per_joint, moves, snippet))
        return fn
    return register


def unregister(name: str) -> None:
    """Remove the procedure ``name``."""
    _NAMES.unregister(name)


def names() -> tuple[str, ...]:
    """Every procedure: the registered ones and those installed packages offer."""
    return _NAMES.names()


def get(name: str) -> Procedure | None:
    """The procedure ``name``, imported from its package on first use; None if none."""
    return _NAMES.get(name) if name in _NAMES else None


def registered() -> dict[str, Procedure]:
    """The registered procedures by name (built-in ones loaded)."""
    return _NAMES.entries()
