"""One registry of named entries for each thing a third party may add: control laws, plant
models, bench procedures, drive protocols (docs/architecture.md, "Recipes (how to add …)").

A :class:`Registry` keeps its entries by name, in the order they were registered. Its
built-in entries are found on first use, so that importing the registry imports none of them:

- *modules* whose import registers them (a decorator calling :meth:`Registry.add`: laws,
  plant models, procedures), or
- *references* ``name → "module:attribute"`` (drive protocols), imported when that name is
  first looked up, so that reading a bus file imports only the families it names.

A third party's entries are found the same two ways through its package's entry points (as
python-can finds its interfaces), by the registry's group: the entry point names the module
that registers the entry, or (a registry made with ``make``) the object itself.

:class:`Registry` is also what a config file's name is checked against (``in``, iteration).
The config schemas sit below the registries (docs/architecture.md, "Layers"), so a schema
keeps a plain name and the file's reader, above both, checks it against the registry with the
schema's own message for a choice (``file:line``, the key, a near name): the law in
:mod:`exo_rt.control.config`, the plant model in :mod:`exo_rt.runtime.config`.
:class:`Group` finds a registry by its entry-point group for a module that may not import the
registry's module at import time; it names that module by string, which tests/test_layers.py
counts as an import like any other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

T = TypeVar("T")

_by_group: dict[str, Registry] = {}  # every registry, by its entry-point group


def load_attr(ref: str):
    """``"package.module:attribute"`` → the attribute (its module imported now)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


class NotRegistered(KeyError):
    """No entry of that name: ``what`` is wrong and the ``fix`` (the names registered, the
    entry-point group that would add one), as a user-facing :class:`exo_rt.errors.ExoError`
    takes them."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix

    def __str__(self) -> str:  # (a KeyError would print its argument quoted)
        return f"{self.what} — {self.fix}"


class _Ref:
    """An entry not loaded yet: a ``"module:attribute"`` reference or an entry point."""

    __slots__ = ("ref",)

    def __init__(self, ref: str | EntryPoint) -> None:
        self.ref = ref

    def load(self) -> object:
        return load_attr(self.ref) if isinstance(self.ref, str) else self.ref.load()


class Registry(Generic[T]):
    """Entries of one kind by name.

    ``group``: the entry-point group of third parties' entries; ``kind``: what an entry is,
    in messages ("control law"); ``builtin``: the modules whose import registers the built-in
    entries, or a mapping name → ``"module:attribute"`` of each; ``make(name, obj)``: the
    entry from an object loaded by reference (a check, an instance of a class) — a registry
    without it takes its entry points for modules that register; ``last_only``: the entries
    are numbered in order (a law's code is its index in the compiled table), so only the last
    one may be removed and the built-in ones register first; ``docs``: where the kind is
    documented, for the error of an unknown name.
    """

    def __init__(self, group: str, kind: str, builtin: tuple[str, ...] | Mapping[str, str] = (),
                 *, make: Callable[[str, object], T] | None = None, last_only: bool = False,
                 docs: str = "") -> None:
        self.group, self.kind, self.make, self.last_only, self.docs = (
            group, kind, make, last_only, docs)
        self._entries: dict[str, T | _Ref] = {}
        if isinstance(builtin, Mapping):
            self.modules: tuple[str, ...] = ()
            self._entries.update((name, _Ref(ref)) for name, ref in builtin.items())
        else:
            self.modules = tuple(builtin)
        _by_group[group] = self

    # --- registering
    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` as ``name`` (ValueError if that name is registered)."""
        if self.last_only:
            self.load_builtin()  # their numbers never move
        if name in self._entries:
            raise ValueError(f"a {self.kind} named '{name}' is registered already")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> T | None:
        """Remove the entry ``name`` (with ``last_only``, only the last registered); the
        entry removed (None if it was never loaded)."""
        if name not in self._entries:
            raise self._missing(name)
        if self.last_only and next(reversed(self._entries)) != name:
            raise ValueError(f"'{name}' is not the {self.kind.split()[-1]} registered last "
                             f"('{next(reversed(self._entries))}'): the {self.kind}s are "
                             "numbered in order, so only the last one can be removed")
        entry = self._entries.pop(name)
        return None if isinstance(entry, _Ref) else entry

    # --- looking up
    def load_builtin(self) -> None:
        """Import the modules that register the built-in entries (a dict look-up once they
        are: ``sys.modules``)."""
        for module in self.modules:
            importlib.import_module(module)

    def get(self, name: str) -> T:
        """The entry ``name``, its package imported on first use (:class:`NotRegistered`, a
        KeyError naming the registered ones, if there is none)."""
        if name not in self:
            raise self._missing(name)
        entry = self._entries[name]
        if isinstance(entry, _Ref):
            obj = entry.load()
            entry = self._entries[name] = obj if self.make is None else self.make(name, obj)
        return entry

    def names(self) -> tuple[str, ...]:
        """Every name: the registered ones, then those installed packages offer."""
        self.load_builtin()
        return (*self._entries, *self.installed())

    def installed(self) -> tuple[str, ...]:
        """The names installed packages offer and that are not registered yet."""
        return tuple(name for name in self._found() if name not in self._entries)

    def entries(self) -> dict[str, T]:
        """Every registered entry by name, in order (built-in ones loaded)."""
        self.load_builtin()
        return {name: self.get(name) for name in list(self._entries)}

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered, or an installed package registers it now."""
        self.load_builtin()
        return isinstance(name, str) and (name in self._entries or self._from_entry_point(name))

    def __iter__(self) -> Iterator[str]:
        """The registered names (built-in ones loaded), as a schema lists them."""
        self.load_builtin()
        return iter(list(self._entries))

    # --- entry points
    def _found(self) -> dict[str, EntryPoint]:
        """The installed packages' entry points by name, read now (1–4 ms: only for a name
        not registered, and for :meth:`names`)."""
        return {ep.name: ep for ep in entry_points(group=self.group)}

    def _from_entry_point(self, name: str) -> bool:
        """Load what an installed package names for ``name``: True if it is registered now
        (its module registered it, or it is the entry itself, loaded on first get)."""
        ep = self._found().get(name)
        if ep is None:
            return False
        if self.make is not None:
            self._entries[name] = _Ref(ep)
        else:
            ep.load()
        return name in self._entries

    def _missing(self, name: str) -> NotRegistered:
        docs = f" ({self.docs})" if self.docs else ""
        return NotRegistered(f"no {self.kind} '{name}' is registered",
                             f"use one of {', '.join(self.names())}{docs}, or install the "
                             f"package that registers it under the entry-point group "
                             f"'{self.group}'")


class Group:
    """The :class:`Registry` of entry-point group ``group``, for a module that checks its names
    without importing the registry's module at import time. ``module``, the registry's, is
    imported by name on the first check, as the built-in modules are, and the names are the
    registry's own, third parties' included. The name is an import all the same (the layer
    test counts it): a module below the registry checks no names of it this way."""

    def __init__(self, group: str, module: str) -> None:
        self.group = group
        self.module = module

    @property
    def names(self) -> Registry:
        if self.group not in _by_group:
            importlib.import_module(self.module)
        try:
            return _by_group[self.group]
        except KeyError:
            raise LookupError(f"importing {self.module} registered no names of the entry-point "
                              f"group '{self.group}': give the Group the module that makes "
                              f"the registry (plugins.Registry)") from None

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)
