"""What the registries of laws, plant models and bench procedures share: their built-in
modules imported on first use, and a third party's found by entry point (as python-can finds
its interfaces).

A registry keeps its entries in a dict by name and exposes :class:`Names` over it: the names
a config file may use — every registered one, and an installed package's on first mention.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points


class Names:
    """The names of a registry (``registered``: its dict by name), as a schema checks them.

    ``builtin``: the modules whose import registers the built-in entries; ``group``: the
    entry-point group under which an installed package names the module registering its own.
    """

    def __init__(self, group: str, builtin: tuple[str, ...], registered: Mapping) -> None:
        self.group = group
        self.builtin = builtin
        self.registered = registered

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
