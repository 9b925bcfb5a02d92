"""YAML files read into :class:`Node` values that remember file, line and key path.

Every config loader (robot files, controller files, bus files, bench options) reads these
nodes through its schema (:mod:`exo_rt.schema`), so a bad value anywhere gets the same
one-sentence error: what, where (file:line: key), how to fix.
The error class is chosen per file (:class:`~exo_rt.errors.ModelError` for robots,
:class:`~exo_rt.errors.ConfigError` for the rest) and travels with its nodes.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from exo_rt.errors import ExoError, ModelError, Where


def did_you_mean(name: str, candidates) -> str:
    """' — did you mean 'x'?' hint for a misspelt name, or an empty string."""
    close = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1)
    return f"did you mean '{close[0]}'?" if close else ""


def to_float(value, where: Where, *, allow_inf: bool = False,
             error: type[ExoError] = ModelError) -> float:
    """A finite float from a YAML scalar or a string; ModelError otherwise."""
    if isinstance(value, bool) or value is None:
        raise error(f"expected a number, got {value!r}", where, "write a number, e.g. 0.5")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise error(f"expected a number, got {value!r}", where,
                         "write a number, e.g. 0.5") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise error(f"expected a finite number, got {value!r}", where,
                         "write a finite number")
    return x


def to_vector(value, n: int, where: Where, error: type[ExoError] = ModelError) -> np.ndarray:
    """A length-``n`` float vector from a YAML list or a whitespace-separated string."""
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise error(f"expected a list of {n} numbers, got {value!r}", where,
                         f"write [{', '.join(['0'] * n)}]")
    if len(items) != n:
        raise error(f"expected {n} numbers, got {len(items)} ({value!r})", where,
                         f"write exactly {n} numbers, e.g. [{', '.join(['0'] * n)}]")
    return np.array([to_float(v, where, error=error) for v in items], dtype=float)


@dataclass
class Node:
    """A YAML value with the file and line it came from and its key path."""

    value: object
    file: str
    line: int
    key: str
    error: type[ExoError] = field(default=ModelError, repr=False)

    def where(self, sub: str = "") -> Where:
        key = f"{self.key}.{sub}" if sub and self.key else (sub or self.key)
        return Where(self.file, self.line, key)


# libyaml's composer where PyYAML has it (about ten times faster: start-up reads a dozen
# files), the same nodes and marks as the pure-Python one
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_NODES = 200_000  # more nodes than any robot or config file needs: an alias bomb


def _to_node(n: yaml.Node, file: str, key: str, error: type[ExoError],
             budget: list[int] | None = None, path: frozenset[int] = frozenset()) -> Node:
    """Wrap composed YAML ``n`` (and its children) in :class:`Node` values.

    Aliases are expanded; one that contains itself, or an expansion beyond
    :data:`MAX_NODES`, is a user error rather than a hang or a RecursionError.
    """
    budget = [MAX_NODES] if budget is None else budget
    line = n.start_mark.line + 1
    budget[0] -= 1
    if budget[0] < 0 or id(n) in path:
        why = "an alias refers to itself" if id(n) in path else \
            f"more than {MAX_NODES} values: aliases expand too far, or a list is that long"
        raise error(f"cannot expand the YAML ({why})", Where(file, line, key),
                    "write the values out instead of using '&anchor' / '*alias' (no config "
                    "holds that many values)")
    if isinstance(n, yaml.MappingNode):
        inner = path | {id(n)}
        out: dict[str, Node] = {}
        for k, v in n.value:
            kline = k.start_mark.line + 1
            if not isinstance(k, yaml.ScalarNode):
                raise error("a key is a list or a mapping", Where(file, kline, key),
                            "keys are plain names (no '?', brackets or braces)")
            name = str(k.value)
            sub = f"{key}.{name}" if key else name
            if name in out:
                raise error(f"key '{name}' appears twice", Where(file, kline, sub),
                            "keep one of them")
            out[name] = _to_node(v, file, sub, error, budget, inner)
            out[name].line = kline
        return Node(out, file, line, key, error)
    if isinstance(n, yaml.SequenceNode):
        inner = path | {id(n)}
        return Node([_to_node(v, file, f"{key}[{i}]", error, budget, inner)
                     for i, v in enumerate(n.value)], file, line, key, error)
    try:
        value = yaml.constructor.SafeConstructor().construct_object(n, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        # e.g. '2020-13-01' (a timestamp with month 13) or '!!int abc'
        raise error(f"cannot read the value {n.value!r} ({getattr(exc, 'problem', exc)})",
                    Where(file, line, key), "write a plain number, name or list") from None
    return Node(value, file, line, key, error)


# The largest config file of each kind, in bytes: refused before it is read (docs/config.md).
# The shipped files are ≤ 12 kB (YAML) and ≤ 110 kB (EDS/DCF); a vendor's EDS of a large
# device or a CAD-exported URDF can reach a few MB.
MAX_BYTES = {"YAML": 1 << 20, "EDS": 16 << 20, "URDF": 16 << 20}


def check_size(path: str | Path, kind: str, error: type[ExoError] = ModelError) -> None:
    """``error`` when the file at ``path`` is larger than :data:`MAX_BYTES` for its ``kind``
    (YAML, EDS, URDF) — said before it is parsed (a 50 MB list would take minutes and GBs).
    A file that cannot be stat'ed is left to the reader's own error."""
    limit = MAX_BYTES[kind]
    try:
        size = Path(path).stat().st_size
    except OSError:
        return
    if size > limit:
        raise error(f"the file is {size / (1 << 20):.1f} MiB, more than the {kind} limit of "
                    f"{limit >> 20} MiB", Where(str(path)),
                    f"a {kind} config file is far smaller: check that this is the right file")


def read_yaml(path: Path, error: type[ExoError] = ModelError) -> Node:
    """Parse a YAML file into :class:`Node` values; ModelError on a missing, oversized
    (:data:`MAX_BYTES`) or bad file."""
    file = str(path)
    check_size(path, "YAML", error)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error("file not found", Where(file), "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read the file ({exc})", Where(file),
                         "give a readable UTF-8 text file") from None
    try:
        root = yaml.compose(text, Loader=LOADER)
    except RecursionError:
        raise error("the YAML nests too deeply", Where(file), "flatten the brackets") from None
    except yaml.MarkedYAMLError as exc:
        # the construct that failed starts at context_mark; the parser noticed at problem_mark
        start = exc.context_mark or exc.problem_mark
        line = start.line + 1 if start is not None else 0
        noticed = ""
        if exc.problem_mark is not None and exc.problem_mark.line + 1 != line:
            noticed = f" (noticed at line {exc.problem_mark.line + 1})"
        what = "; ".join(str(x) for x in (exc.context, exc.problem) if x)
        if "maximum nesting depth" in what:  # PyYAML ≥ 6.0.4 limits it itself
            raise error("the YAML nests too deeply", Where(file, line),
                        "flatten the brackets") from None
        raise error(f"YAML syntax error: {what}{noticed}", Where(file, line),
                         "fix the brackets, indentation or quoting there") from None
    except yaml.YAMLError as exc:
        raise error(f"YAML error: {exc}", Where(file), "fix the YAML syntax") from None
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        raise error("the file is empty", Where(file, 1),
                    "fill it in; every key is described under docs/")
    try:
        return _to_node(root, file, "", error)
    except RecursionError:
        raise error("the YAML nests too deeply", Where(file), "flatten the brackets") from None


def sequence(node: Node, what: str) -> list[Node]:
    if not isinstance(node.value, list):
        raise node.error(f"{what} must be a list ('- …' items)", node.where(),
                         "write one '- ' item per entry")
    return node.value


def text(node: Node) -> str:
    """A non-empty string (a name)."""
    if not isinstance(node.value, str) or not node.value:
        raise node.error(f"expected a name, got {plain(node)!r}", node.where(), "write a name")
    return node.value


def number(node: Node, *, allow_inf: bool = False) -> float:
    return to_float(node.value, node.where(), allow_inf=allow_inf, error=node.error)


def plain(node: Node):
    """The node's value with nested nodes unwrapped (lists and mappings of plain values)."""
    if isinstance(node.value, list):
        return [plain(v) for v in node.value]
    if isinstance(node.value, dict):
        return {k: plain(v) for k, v in node.value.items()}
    return node.value


def choice(node: Node, options, what: str) -> str:
    """A name that must be one of ``options``; the error offers the nearest one."""
    value = text(node)
    if value not in options:
        raise node.error(f"unknown {what} '{value}'", node.where(),
                         did_you_mean(value, options) or f"use one of {', '.join(options)}")
    return value
