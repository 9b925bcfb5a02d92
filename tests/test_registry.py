"""The one registry (exo_rt.plugins.Registry) that control laws, plant models, bench procedures
and drive protocols are thin users of: unique names, the unregister rule of numbered entries,
one clear error for an unknown name, and built-in and installed entries found only on first
use — the built-ins by module or by "module:attribute", a third party's by entry point
(importlib.metadata's entry_points replaced by a fake, as tests/test_protocols.py does)."""

from __future__ import annotations

import itertools
import sys

import pytest

from exo_rt import plugins

_count = itertools.count()


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Write modules into a folder on sys.path: ``write(body)`` → a fresh module name (not
    imported yet); every one written is forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(body: str) -> str:
        name = f"_registry_probe_{next(_count)}"
        (tmp_path / f"{name}.py").write_text(body)
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def _group() -> str:
    return f"exo_rt.test_registry_{next(_count)}"


def _registering(group: str, *names: str) -> str:
    """A module's text that registers ``names`` (entry: the name upper-cased) on import."""
    lines = ["from exo_rt.plugins import Group", f"r = Group({group!r}, '').names"]
    return "\n".join(lines + [f"r.add({n!r}, {n.upper()!r})" for n in names]) + "\n"


class _EntryPoint:
    """What importlib.metadata hands out: a name, and ``load()`` imports what it names."""

    def __init__(self, name: str, ref: str) -> None:
        self.name, self.ref, self.loaded = name, ref, 0

    def load(self):
        self.loaded += 1
        return plugins.load_attr(self.ref) if ":" in self.ref else __import__(self.ref)


def _install(monkeypatch, group: str, *eps: _EntryPoint) -> None:
    """Installed packages offering ``eps`` under ``group`` (and nothing under another)."""
    def entry_points(*, group: str, _offered: str = group) -> list[_EntryPoint]:
        return list(eps) if group == _offered else []

    monkeypatch.setattr(plugins, "entry_points", entry_points)


def test_a_name_is_registered_once_and_the_error_names_it():
    reg = plugins.Registry(_group(), "widget")
    assert reg.add("a", 1) == 1
    with pytest.raises(ValueError, match="a widget named 'a' is registered already"):
        reg.add("a", 2)
    assert reg.get("a") == 1 and list(reg) == ["a"] and reg.entries() == {"a": 1}


def test_an_unknown_name_is_one_line_naming_the_registered_ones_and_the_group():
    group = _group()
    reg = plugins.Registry(group, "widget", docs="docs/widgets.md")
    reg.add("a", 1)
    reg.add("b", 2)
    with pytest.raises(KeyError) as err:
        reg.get("c")
    line = str(err.value)
    assert line == ("no widget 'c' is registered — use one of a, b (docs/widgets.md), or "
                    f"install the package that registers it under the entry-point group "
                    f"'{group}'")
    assert isinstance(err.value, plugins.NotRegistered) and "c" not in reg
    with pytest.raises(plugins.NotRegistered, match="no widget 'c' is registered"):
        reg.unregister("c")


def test_any_entry_unregisters_but_a_numbered_one_only_last():
    free = plugins.Registry(_group(), "widget")
    for name in "abc":
        free.add(name, name)
    assert free.unregister("a") == "a" and list(free) == ["b", "c"]
    numbered = plugins.Registry(_group(), "control law", last_only=True)
    for name in "abc":
        numbered.add(name, name)
    with pytest.raises(ValueError, match="'b' is not the law registered last \\('c'\\)"):
        numbered.unregister("b")
    numbered.unregister("c")
    numbered.unregister("b")
    assert list(numbered) == ["a"]


def test_builtin_modules_are_imported_on_first_use_and_register_first(modules):
    """Importing the registry imports no built-in module; the first lookup does. A numbered
    registry loads its built-ins before a third party's entry, so their numbers never move."""
    group = _group()
    builtin = modules(_registering(group, "one", "two"))
    reg = plugins.Registry(group, "widget", (builtin,), last_only=True)
    assert builtin not in sys.modules
    reg.add("third", "THIRD")  # a third party first: the built-ins are loaded before it
    assert builtin in sys.modules
    assert list(reg) == ["one", "two", "third"] and reg.get("two") == "TWO"


def test_an_installed_module_registers_on_first_mention(modules, monkeypatch):
    """An entry point naming a module that registers: listed by names() without importing
    it, imported once by the first lookup of its name, never for another name."""
    group = _group()
    module = modules(_registering(group, "plug"))
    ep = _EntryPoint("plug", module)
    _install(monkeypatch, group, ep)
    reg = plugins.Registry(group, "widget")
    reg.add("own", "OWN")
    assert reg.names() == ("own", "plug") and list(reg) == ["own"]
    assert "other" not in reg and ep.loaded == 0 and module not in sys.modules
    assert "plug" in reg and reg.get("plug") == "PLUG" and ep.loaded == 1
    assert reg.names() == ("own", "plug") and list(reg) == ["own", "plug"]
    assert reg.installed() == ()


def test_references_are_loaded_on_get_and_made_into_entries(modules, monkeypatch):
    """The protocol style: built-in name → "module:attribute" and entry points naming the
    object itself; neither is imported before its name is looked up, ``make`` turns what is
    loaded into the entry once, and an entry point cannot replace a built-in."""
    group = _group()
    builtin = modules("class Widget:\n    pass\n")
    plug = modules("class Plug:\n    pass\n")
    shadow = _EntryPoint("base", f"{plug}:Plug")
    ep = _EntryPoint("plug", f"{plug}:Plug")
    _install(monkeypatch, group, shadow, ep)
    made = []

    def make(name, obj):
        made.append(name)
        return (name, obj())

    reg = plugins.Registry(group, "widget", {"base": f"{builtin}:Widget"}, make=make)
    assert reg.names() == ("base", "plug") and "base" in reg and "plug" in reg
    assert builtin not in sys.modules and plug not in sys.modules and made == []
    base = reg.get("base")
    assert base[0] == "base" and type(base[1]).__name__ == "Widget" and reg.get("base") is base
    assert reg.get("plug")[0] == "plug" and made == ["base", "plug"] and shadow.loaded == 0
    assert list(reg.entries()) == ["base", "plug"] and made == ["base", "plug"]


def test_a_lower_module_finds_the_registry_by_its_group(modules):
    group = _group()
    module = modules(f"from exo_rt import plugins\nR = plugins.Registry({group!r}, 'widget')\n"
                     "R.add('x', 1)\n")
    names = plugins.Group(group, module)
    assert module not in sys.modules
    assert "x" in names and list(names) == ["x"] and module in sys.modules
