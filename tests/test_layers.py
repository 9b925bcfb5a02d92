"""Layers that only point down (issue 34): no import cycle among the modules of exo_rt and
firmware_bridge — imports inside functions included — and nothing below the run
(``exo_rt.runtime``) and the simulation (``exo_rt.sim``) imports from them, but the modules
that orchestrate them (:data:`UPPER`). A lower module that needs what they define keeps the
constant itself, or has the upper side register it (:data:`exo_rt.sim.simbus.EMULATORS`).

The graph is read from the source with :mod:`ast`, nothing imported: every ``import`` and
``from … import`` anywhere in a module (module level, functions, classes), relative ones
resolved; ``from P import n`` is an edge to the submodule ``P.n`` where there is one, else to
``P``; a package is its ``__init__``. Python imports a module's parent packages too, but that
is no edge: a package's ``__init__`` may import its submodules as long as none imports the
``__init__`` back (that is a cycle here).

Packages layer too (issue 46): every module collapsed to its package (``exo_rt.runtime``,
``exo_rt.sim`` …, ``firmware_bridge``; a top-level module of ``exo_rt`` is its own node), the
package graph has no cycle. It counts string imports besides: a string literal in the code (not
a docstring) that names a module of the tree, ``"package.module"`` or ``"package.module:name"``,
is an edge from its module to the one it names — what a registry, ``plugins.load_attr``,
``importlib`` or a helper process imports by name. Within a package such strings are how a
registry names its built-in entries without importing them (the module check leaves them out);
across packages they are dependencies like any import. docs/architecture.md ("Layers") draws the
packages bottom to top, and every package edge points down that picture.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("exo_rt", "firmware_bridge")

# Edges still to be removed, (importer, imported): why each is there and what removes it. The
# cycle check leaves them out; one that no longer closes a cycle fails the test: strike it.
CYCLE_EDGES_TO_REMOVE: dict[tuple[str, str], str] = {}  # none now

# The modules that may import exo_rt.runtime and exo_rt.sim: those layers and what runs them.
UPPER = {
    "exo_rt.runtime": "the run around the cycle: controller, rig, buses, lifecycle, replay",
    "exo_rt.sim": "the simulated exoskeleton: plant models, emulated drives, simulated bus",
    "exo_rt.cli": "the exo-rt command: starts runs, simulations, replays, bench procedures",
    "exo_rt.__main__": "python -m exo_rt: the command",
    "exo_rt.warmup": "compiles the run's and the simulation's kernels ahead by running them",
    "exo_rt.hil": "bench procedures: the controller's safety and top config on a test bench",
    "exo_rt.batch": "replay and parameter sweeps over many runs: controller, model-in-the-loop",
}
GUARDED = ("exo_rt.runtime", "exo_rt.sim")


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Every module of the packages below ``root`` by dotted name (a package: its
    ``__init__.py``)."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(root: Path, packages=PACKAGES) -> dict[str, dict[str, int]]:
    """The import graph: module → {module it imports: the line of its first import}, modules of
    the packages only (the standard library and third parties left out)."""
    mods = modules(root, packages)

    def known(name: str) -> str | None:  # the module itself, else its deepest package
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else known(base)
                           for a in node.names]
            for target in targets:
                if target is not None and target != name:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def string_imports(root: Path, packages=PACKAGES) -> dict[str, dict[str, int]]:
    """The modules named by string: module → {module a string literal of its code names: the
    line of the first}, ``"package.module"`` or ``"package.module:name"`` naming a module of
    the packages. A docstring, or any string standing alone as a statement, names nothing."""
    mods = modules(root, packages)
    named = re.compile(rf"(?:{'|'.join(map(re.escape, packages))})(?:\.\w+)+(?::[\w.]+)?")
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_bytes(), str(path))
        alone = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in alone and named.fullmatch(node.value)):
                target = node.value.partition(":")[0]
                if target in mods and target != name:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def merged(*graphs: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The union of module graphs (an edge in several: its first line in the first)."""
    out: dict[str, dict[str, int]] = {}
    for g in reversed(graphs):
        for v, edges in g.items():
            out.setdefault(v, {}).update(edges)
    return out


# packages whose subpackages and modules are packages of the graph of their own; any other
# package of PACKAGES is one
SPLIT = ("exo_rt",)


def package_of(module: str) -> str:
    """The package a module counts to: ``exo_rt.sim`` for ``exo_rt.sim.world.room``,
    ``exo_rt.structs`` for itself, ``firmware_bridge`` for ``firmware_bridge.link``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in SPLIT else parts[0]


Edge = tuple[str, str, int, str]  # (importer module, imported module, line, "import"/"string")


def package_graph(graph: dict[str, dict[str, int]], strings: dict[str, dict[str, int]] | None
                  = None) -> dict[str, dict[str, list[Edge]]]:
    """The package graph: package → {package it imports: the module edges that make the
    edge}, from the import graph and the string imports."""
    out: dict[str, dict[str, list[Edge]]] = {}
    for g, kind in ((graph, "import"), (strings or {}, "string")):
        for v, edges in g.items():
            pv = package_of(v)
            out.setdefault(pv, {})
            for w, line in edges.items():
                if package_of(w) != pv:
                    out[pv].setdefault(package_of(w), []).append((v, w, line, kind))
    return {v: {w: sorted(e) for w, e in sorted(out[v].items())} for v in sorted(out)}


def package_cycle_report(packages: dict[str, dict[str, list[Edge]]], mods: dict[str, Path],
                         root: Path) -> str:
    """Every package cycle, one block each: its shortest cycle and every package edge within
    it with the module edges that make it (file:line); '' when there is none."""
    blocks = []
    for comp in components(packages):
        lines = []
        for v in comp:
            for w in packages[v]:
                if w in comp:
                    lines.append(f"    {v} → {w}:")
                    lines += [f"      {a} → {b}   ({mods[a].relative_to(root)}:{n}"
                              + (", by string)" if kind == "string" else ")")
                              for a, b, n, kind in packages[v][w]]
        blocks.append(f"package cycle among {len(comp)} packages: "
                      + " → ".join(shortest_cycle(packages, comp))
                      + "\n  its edges (importer → imported, and the module edges):\n"
                      + "\n".join(lines))
    if not blocks:
        return ""
    return ("\n\n".join(blocks) + "\n\nfix: move the module or the names the lower package "
            "takes to it (or to a package below both), register what the upper one provides "
            "from there (a factory, exo_rt.plugins), or check a name where the file that "
            "holds it is read, above both")


def components(graph: dict[str, dict]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan 1972, iterative),
    each sorted, in sorted order: every import cycle lies within one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def shortest_path(graph: dict[str, dict], start: str, goal: str) -> list[str] | None:
    """The shortest import chain start → … → goal (breadth first), None if there is none."""
    before: dict[str, str | None] = {start: None}
    todo = deque([start])
    while todo:
        v = todo.popleft()
        for w in sorted(graph.get(v, ())):
            if w == goal:
                path = [w, v]
                while before[path[-1]] is not None:
                    path.append(before[path[-1]])
                return path[::-1]
            if w not in before:
                before[w] = v
                todo.append(w)
    return None


def shortest_cycle(graph: dict[str, dict], comp: list[str]) -> list[str]:
    """One shortest cycle of a component, through its first module: [a, b, …, a]."""
    sub = {v: {w: 0 for w in graph[v] if w in comp} for v in comp}
    return shortest_path(sub, comp[0], comp[0])


def without(graph: dict[str, dict], edges) -> dict[str, dict]:
    return {v: {w: line for w, line in out.items() if (v, w) not in edges}
            for v, out in graph.items()}


def cycle_report(graph: dict[str, dict], mods: dict[str, Path], root: Path) -> str:
    """Every import cycle, one block each: its shortest cycle (module → module → …) and every
    edge within it with file:line; '' when there is none."""
    blocks = []
    for comp in components(graph):
        edges = [f"    {v} → {w}   ({mods[v].relative_to(root)}:{graph[v][w]})"
                 for v in comp for w in sorted(graph[v]) if w in comp]
        blocks.append(f"import cycle among {len(comp)} modules: "
                      + " → ".join(shortest_cycle(graph, comp))
                      + "\n  its edges (importer → imported, where):\n" + "\n".join(edges))
    if not blocks:
        return ""
    return ("\n\n".join(blocks) + "\n\nfix: the lower module keeps what it takes from the "
            "higher one (a constant, a small module of its own), or gets names handed down "
            "(exo_rt.plugins.Group); an edge that must wait goes into CYCLE_EDGES_TO_REMOVE "
            "with its reason")


def layers(packages: dict[str, dict]) -> list[list[str]]:
    """The packages by layer, bottom first: a package one layer above the highest it imports
    (the longest import chain below it), those importing none of them at the bottom."""
    level: dict[str, int] = {}

    def of(v: str, seen: frozenset = frozenset()) -> int:
        if v not in level:
            assert v not in seen, f"a package cycle through {v}"
            level[v] = 1 + max((of(w, seen | {v}) for w in packages.get(v, ())), default=-1)
        return level[v]

    for v in packages:
        of(v)
    return [sorted(v for v in packages if level[v] == n) for n in range(max(level.values()) + 1)]


def short(package: str) -> str:
    """A package's name in the layer picture: ``sim`` for ``exo_rt.sim``."""
    return package.removeprefix("exo_rt.")


def layer_picture(md: Path) -> list[list[str]]:
    """The layers docs/architecture.md draws, bottom first: the first fenced block of its
    "Layers" section, one layer a line, the top one first, packages by their short names."""
    text = md.read_text().partition("\n## Layers")[2].split("\n## ", 1)[0]
    if text.count("```") < 2:
        return []
    block = text.split("```", 2)[1].split("\n", 1)[1]
    return [sorted(line.split()) for line in reversed(block.strip("\n").splitlines())]


def in_layer(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer_report(graph: dict[str, dict], mods: dict[str, Path], root: Path,
                 upper=tuple(UPPER), guarded=GUARDED) -> str:
    """Every import of a guarded layer by a module outside ``upper``; '' when there is none."""
    bad = [f"  {v} → {w}   ({mods[v].relative_to(root)}:{graph[v][w]})"
           for v in sorted(graph) if not in_layer(v, upper)
           for w in sorted(graph[v]) if in_layer(w, guarded)]
    if not bad:
        return ""
    return (f"{len(bad)} import(s) of {' / '.join(guarded)} from below them "
            "(importer → imported, where):\n" + "\n".join(bad)
            + "\n\nfix: move the constant or class the lower module needs down (next to it), "
            "or have the upper side register it (exo_rt.sim.simbus.EMULATORS); a module that "
            "runs the controller or the simulation belongs in UPPER, with its reason")


# --- the finder on small graphs: it finds what it must, and only that

def test_components_of_a_small_graph():
    g = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {"e": 1}, "e": {"d": 1},
         "f": {"a": 1}, "g": {}}
    assert components(g) == [["a", "b", "c"], ["d", "e"]]
    assert shortest_cycle(g, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert shortest_cycle(g, ["d", "e"]) == ["d", "e", "d"]
    assert components({"a": {"b": 1}, "b": {"c": 1}, "c": {}, "d": {"a": 1, "c": 1}}) == []
    # a long chain closed at its end: one component, deep enough for a recursive finder
    chain = {f"m{i}": {f"m{i + 1}": 1} for i in range(5000)} | {"m5000": {"m0": 1}}
    assert components(chain) == [sorted(chain)]
    assert components(without(g, {("c", "a"), ("e", "d")})) == []


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_graph_of_a_small_package(tmp_path):
    """Relative imports, imports in functions, submodules named by ``from … import``, and a
    package's ``__init__`` importing its submodules (fine until one imports it back)."""
    write(tmp_path, {
        "pkg/__init__.py": "from pkg import low\nVERSION = 1\n",
        "pkg/low.py": "import os\nX = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/a.py": "def f():\n    from ..sub import b\n    from . import c\n",
        "pkg/sub/b.py": "import pkg.low as low\nfrom .. import low as again\n",
        "pkg/sub/c.py": "class K:\n    def m(self):\n        from pkg.sub.b import name\n",
    })
    g = imports(tmp_path, ("pkg",))
    assert g == {"pkg": {"pkg.low": 1}, "pkg.low": {}, "pkg.sub": {},
                 "pkg.sub.a": {"pkg.sub.b": 2, "pkg.sub.c": 3}, "pkg.sub.b": {"pkg.low": 1},
                 "pkg.sub.c": {"pkg.sub.b": 3}}
    mods = modules(tmp_path, ("pkg",))
    assert cycle_report(g, mods, tmp_path) == ""
    # a submodule importing a name of its package's __init__, inside a function
    write(tmp_path, {"pkg/low.py": "X = 1\n\n\ndef g():\n    from pkg import VERSION\n"})
    g = imports(tmp_path, ("pkg",))
    report = cycle_report(g, mods, tmp_path)
    assert "import cycle among 2 modules: pkg → pkg.low → pkg\n" in report
    assert "pkg.low → pkg   (pkg/low.py:5)" in report
    assert cycle_report(without(g, {("pkg.low", "pkg")}), mods, tmp_path) == ""


def test_layer_rule_on_a_small_package(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "", "pkg/sim/__init__.py": "", "pkg/sim/plant.py": "",
        "pkg/schema.py": "def f():\n    from pkg.sim import plant\n",
        "pkg/cli.py": "import pkg.sim.plant\n",
    })
    g, mods = imports(tmp_path, ("pkg",)), modules(tmp_path, ("pkg",))
    report = layer_report(g, mods, tmp_path, upper=("pkg.sim", "pkg.cli"), guarded=("pkg.sim",))
    assert report.startswith("1 import(s) of pkg.sim from below them")
    assert "  pkg.schema → pkg.sim.plant   (pkg/schema.py:2)\n" in report
    assert layer_report(g, mods, tmp_path, upper=("pkg.sim", "pkg.cli", "pkg.schema"),
                        guarded=("pkg.sim",)) == ""


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_checks_catch_a_cycle_and_a_layer_breach_planted_in_a_copy(tmp_path):
    """The real tree, copied, with one import inside a function added to each check (the
    schema's also a package cycle, schema ↔ sim), and a string naming a module of a package
    above (a package cycle, bus ↔ cycle)."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    eds = tmp_path / "exo_rt" / "bus" / "eds.py"  # drives → config → eds → drives
    eds.write_text(eds.read_text() + "\n\ndef _planted():\n    from exo_rt.bus import drives\n")
    planted = tmp_path / "exo_rt" / "bus" / "planted.py"  # cycle → bus, bus → cycle
    planted.write_text('CYCLE = "exo_rt.cycle.step:Cycle"\n')
    core = tmp_path / "exo_rt" / "schema" / "core.py"
    core.write_text(core.read_text() + "\n\ndef _planted():\n    from exo_rt.sim import plants\n")
    g, mods = imports(tmp_path), modules(tmp_path)
    cycles = cycle_report(without(g, CYCLE_EDGES_TO_REMOVE), mods, tmp_path)
    assert "exo_rt.bus.eds → exo_rt.bus.drives   (exo_rt/bus/eds.py:" in cycles
    breaches = layer_report(g, mods, tmp_path)
    assert breaches.startswith("1 import(s) of exo_rt.runtime / exo_rt.sim from below them")
    assert "exo_rt.schema.core → exo_rt.sim.plants   (exo_rt/schema/core.py:" in breaches
    packages = package_graph(g, string_imports(tmp_path))
    knots = package_cycle_report(packages, mods, tmp_path)
    assert knots.startswith("package cycle among ")
    assert "    exo_rt.bus → exo_rt.cycle:\n      exo_rt.bus.planted → exo_rt.cycle.step   " \
           "(exo_rt/bus/planted.py:1, by string)\n" in knots
    assert "    exo_rt.schema → exo_rt.sim:\n      exo_rt.schema.core → exo_rt.sim.plants   " \
           "(exo_rt/schema/core.py:" in knots
    assert package_cycle_report(without(packages, {("exo_rt.bus", "exo_rt.cycle"),
                                                   ("exo_rt.schema", "exo_rt.sim")}), mods,
                                tmp_path) == ""


# --- the rules on the package itself

@pytest.fixture(scope="module")
def graph():
    return imports(ROOT)


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_no_import_cycle(graph):
    stale = [f"  {v} → {w}: {why}" for (v, w), why in CYCLE_EDGES_TO_REMOVE.items()
             if w not in graph.get(v, {})
             or shortest_path(without(graph, CYCLE_EDGES_TO_REMOVE), w, v) is None]
    assert not stale, ("edges in CYCLE_EDGES_TO_REMOVE that no longer close a cycle (strike "
                       "them there):\n" + "\n".join(stale))
    report = cycle_report(without(graph, CYCLE_EDGES_TO_REMOVE), modules(ROOT), ROOT)
    assert not report, "\n" + report


@pytest.fixture(scope="module")
def strings():
    return string_imports(ROOT)


@pytest.fixture(scope="module")
def packages(graph, strings):
    return package_graph(graph, strings)


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_no_package_cycle(packages):
    report = package_cycle_report(packages, modules(ROOT), ROOT)
    assert not report, "\n" + report


def test_the_architecture_draws_the_layers_as_they_are(packages):
    """docs/architecture.md's layer picture is the package graph's."""
    md = ROOT / "docs" / "architecture.md"
    real = [sorted(short(p) for p in layer) for layer in layers(packages)]
    assert layer_picture(md) == real, (
        "docs/architecture.md's Layers block, top first, as the packages import each other "
        "now:\n" + "\n".join("  ".join(layer) for layer in reversed(real)))


def test_strings_that_name_modules_are_edges(tmp_path):
    """A string naming a module (``"pkg.b"``, ``"pkg.b:name"``) in code is an edge; a docstring,
    a name that is no module, and a package's own name are none. The package graph collapses
    modules to the packages of ``SPLIT`` and reports a cycle with its module edges."""
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": '"""Names pkg.b in its docstring."""\nREF = "pkg.b:Thing"\n'
                    'GROUP = "pkg.nothing"\nNAME = "pkg"\n',
        "pkg/b.py": 'def f():\n    """pkg.a"""\n    return "pkg.a"\n',
    })
    assert string_imports(tmp_path, ("pkg",)) == {"pkg": {}, "pkg.a": {"pkg.b": 2},
                                                  "pkg.b": {"pkg.a": 3}}
    assert [package_of(m) for m in ("exo_rt.sim.world.room", "exo_rt.structs", "exo_rt",
                                    "firmware_bridge.link")] == [
        "exo_rt.sim", "exo_rt.structs", "exo_rt", "firmware_bridge"]
    g = {"exo_rt.a.x": {"exo_rt.b.y": 3}, "exo_rt.b.y": {}, "exo_rt.b.z": {}}
    s = {"exo_rt.b.z": {"exo_rt.a.x": 7}}
    pg = package_graph(g, s)
    assert pg == {"exo_rt.a": {"exo_rt.b": [("exo_rt.a.x", "exo_rt.b.y", 3, "import")]},
                  "exo_rt.b": {"exo_rt.a": [("exo_rt.b.z", "exo_rt.a.x", 7, "string")]}}
    mods = {m: tmp_path / (m.replace(".", "/") + ".py") for m in g}
    report = package_cycle_report(pg, mods, tmp_path)
    assert report.startswith("package cycle among 2 packages: exo_rt.a → exo_rt.b → exo_rt.a\n")
    assert "      exo_rt.b.z → exo_rt.a.x   (exo_rt/b/z.py:7, by string)\n" in report
    assert layers(without(pg, {("exo_rt.b", "exo_rt.a")})) == [["exo_rt.b"], ["exo_rt.a"]]


def test_nothing_below_runtime_and_sim_imports_them(graph, strings):
    mods = modules(ROOT)
    missing = [p for p in UPPER if not any(in_layer(m, (p,)) for m in mods)]
    assert not missing, f"UPPER names modules that do not exist: {missing}"
    report = layer_report(merged(graph, strings), mods, ROOT)
    assert not report, "\n" + report


def test_names_kept_below_agree_with_the_modules_above():
    """What a lower module keeps of a higher one's names until that one imports it from
    there: the safe actions and their codes, the default plant (schema), the built-in drive
    protocols' own keys (the bus schema, for the JSON Schema and the docs), the states of a
    drive that stopped itself (bring-up)."""
    from exo_rt import plugins
    from exo_rt.bus import bringup, drives
    from exo_rt.bus import protocols as families
    from exo_rt.cycle import safety
    from exo_rt.schema import buses, top
    from exo_rt.sim import plants

    assert safety.ACTIONS == {name: code for code, name in enumerate(top.ACTIONS)}
    assert top.DEFAULT_PLANT == plants.DEFAULT and top.DEFAULT_PLANT in plants.NAMES
    assert list(buses.PROTOCOL_OWN_KEYS) == list(families.BUILTIN)
    for name, (bus_keys, drive_keys) in buses.PROTOCOL_OWN_KEYS.items():
        family = families.get(name)
        assert (tuple(family.bus_keys), tuple(family.drive_keys)) == (bus_keys, drive_keys)
    assert drives.STOPPED == bringup.STOPPED
    with pytest.raises(LookupError, match="importing exo_rt.errors registered no names of "
                                          "the entry-point group 'exo_rt.nothing'"):
        list(plugins.Group("exo_rt.nothing", "exo_rt.errors"))
