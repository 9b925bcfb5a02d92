"""What the registries of laws, plant models and bench procedures share: their built-in
modules imported on first use, and a third party's found by entry point (as python-can finds
its interfaces).

A registry keeps its entries in a dict by name and exposes :class:`Names` over it: the names
a config file may use — every registered one, and an installed package's on first mention.

A registry above the module that checks its names (the plant models of :mod:`exo_rt.sim`,
checked by the top config's schema) hands them down through :class:`Group`: its
:class:`Names` are found here by entry-point group, so that the lower layer imports nothing
above it (tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points

_by_group: dict[str, Names] = {}  # every registry's names, by its entry-point group


class Names:
    """The names of a registry (``registered``: its dict by name), as a schema checks them.

    ``builtin``: the modules whose import registers the built-in entries; ``group``: the
    entry-point group under which an installed package names the module registering its own.
    """

    def __init__(self, group: str, builtin: tuple[str, ...], registered: Mapping) -> None:
        self.group = group
        self.builtin = builtin
        self.registered = registered
        _by_group[group] = self

    def load_builtin(self) -> None:
        for module in self.builtin:
            importlib.import_module(module)

    def from_entry_point(self, name: str) -> bool:
        """Import the module an installed package names for ``name``; True if that
        registered it."""
        for ep in entry_points(group=self.group):
            if ep.name == name:
                ep.load()
                return name in self.registered
        return False

    def installed(self) -> tuple[str, ...]:
        """The names installed packages offer and that are not registered yet."""
        return tuple(ep.name for ep in entry_points(group=self.group)
                     if ep.name not in self.registered)

    def __contains__(self, name: object) -> bool:
        self.load_builtin()
        return isinstance(name, str) and (name in self.registered
                                          or self.from_entry_point(name))

    def __iter__(self) -> Iterator[str]:
        self.load_builtin()
        return iter(list(self.registered))


class Group:
    """The :class:`Names` of the registry of entry-point group ``group``, for a module below
    it that checks them (a schema). ``module``, the registry's, is imported by name on the
    first check, as :attr:`Names.builtin` are: importing the checker imports nothing above
    it, and the names are the registry's own, third parties' included."""

    def __init__(self, group: str, module: str) -> None:
        self.group = group
        self.module = module

    @property
    def names(self) -> Names:
        if self.group not in _by_group:
            importlib.import_module(self.module)
        try:
            return _by_group[self.group]
        except KeyError:
            raise LookupError(f"importing {self.module} registered no names of the entry-point "
                              f"group '{self.group}': give the Group the module that makes "
                              f"the registry's plugins.Names") from None

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)
