"""Config files as declared schemas: one frozen dataclass per YAML mapping, one :func:`key`
per entry (type, unit, range, default, one-line description). From that one declaration come

- reading and validation (:func:`read`): a :class:`~exo_rt.yamlio.Node` tree → an instance
  of the dataclass, defaults filled in, every mistake one line ``file:line: key — what is
  wrong — how to fix`` ("did you mean" for unknown keys);
- the allowed keys (the dataclass's fields) and the defaults (the fields' defaults);
- a JSON Schema (:func:`json_schema`) for editors (``# yaml-language-server: $schema=…``) and
  independent validators;
- the key tables of ``docs/config*.md`` (:func:`doc_rows`).

What spans several keys (a joint name that must exist in the robot, a current limit at most
the drive's peak, the physics of a mechanism) stays in the loaders, which keep the nodes for
their own ``file:line`` errors.
"""

from __future__ import annotations

import abc
import dataclasses
import math

import numpy as np

from exo_rt.yamlio import Node, did_you_mean, plain, to_float, to_vector

REQUIRED = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()  # no default: required
_NUM = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"  # a number YAML 1.1 reads as text (1e-5)


class Type(abc.ABC):
    """How one value is read, checked and described (a number, a name, a list, …).

    Subclasses list their parameters in ``FIELDS`` ((name, default) pairs; plain classes
    rather than dataclasses: a dozen fewer classes to generate at import)."""

    FIELDS: tuple = ()

    def __init__(self, *args, **kw):
        for i, (name, default) in enumerate(self.FIELDS):
            setattr(self, name, args[i] if i < len(args) else kw.get(name, default))

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self.FIELDS)
        return f"{type(self).__name__}({args})"

    @abc.abstractmethod
    def read(self, node: Node, label: str, fix: str):
        """The value of ``node`` (a ConfigError with file:line when it does not fit)."""

    def json(self) -> dict:
        return {}

    def text(self) -> str:
        """The type as the docs' tables write it."""
        return ""


def _fmt(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


class Num(Type):
    """A finite number (``inf``: ``.inf`` allowed; ``integer``: a whole number) within the
    bounds given (``ge`` ≥, ``gt`` >, ``le`` ≤)."""

    FIELDS = (("integer", False), ("inf", False), ("ge", None), ("gt", None), ("le", None))

    def read(self, node, label, fix):
        x = to_float(node.value, node.where(), allow_inf=self.inf, error=node.error)
        lo = self.ge if self.ge is not None else self.gt
        bounds = (f"{_fmt(lo)}…{_fmt(self.le)}" if lo is not None and self.le is not None
                  else None)
        if self.integer and x != int(x):
            what = f"in {bounds}" if bounds else ""
            raise node.error(f"{label} {node.value!r} is not a whole number {what}".rstrip(),
                             node.where(), fix or "write a whole number")
        low = (self.ge is not None and x < self.ge) or (self.gt is not None and x <= self.gt)
        high = self.le is not None and x > self.le
        if low or high:
            if self.integer and bounds:
                what = f"is not a whole number in {bounds}"
            elif bounds:
                what = f"is out of range (outside {bounds})"
            elif high:
                what = f"is above {_fmt(self.le)}"
            elif self.ge is not None:
                what = (f"is negative (it must be ≥ {_fmt(self.ge)})" if self.ge == 0
                        else f"is below {_fmt(self.ge)} (it must be ≥ {_fmt(self.ge)})")
            else:
                what = f"is not above {_fmt(self.gt)} (it must be > {_fmt(self.gt)})"
            raise node.error(f"{label} {_fmt(int(x) if self.integer else x)} {what}",
                             node.where(), fix or f"give {self.text()}")
        return int(x) if self.integer else x

    def json(self):
        out: dict = {"type": "integer" if self.integer else "number"}
        for k, v in (("minimum", self.ge), ("exclusiveMinimum", self.gt), ("maximum", self.le)):
            if v is not None:
                out[k] = v
        if self.integer:
            return out
        return {"anyOf": [out, {"type": "string", "pattern": _NUM}]}

    def text(self):
        kind = "whole number" if self.integer else "number"
        lo = f"≥ {_fmt(self.ge)}" if self.ge is not None else (
            f"> {_fmt(self.gt)}" if self.gt is not None else "")
        hi = f"≤ {_fmt(self.le)}" if self.le is not None else ""
        rng = ", ".join(x for x in (lo, hi) if x)
        return f"{kind} {rng}".strip()


class Flag(Type):
    """``true`` or ``false`` — nothing else (the text ``"false"`` is not a truth value)."""

    def read(self, node, label, fix):
        if not isinstance(node.value, bool):
            raise node.error(f"{label} {plain(node)!r} is not true or false", node.where(),
                             fix or "write true or false")
        return node.value

    def json(self):
        return {"type": "boolean"}

    def text(self):
        return "true/false"


class Name(Type):
    """A non-empty text (a name, a path, a free description)."""

    def read(self, node, label, fix):
        if not isinstance(node.value, str) or not node.value:
            raise node.error(f"expected a name, got {plain(node)!r}", node.where(),
                             fix or "write a name")
        return node.value

    def json(self):
        return {"type": "string", "minLength": 1}

    def text(self):
        return "name"


class Choice(Type):
    """One of ``options``; ``what`` names it in errors (``unknown law 'pd'``)."""

    FIELDS = (("options", ()), ("what", ""))

    def read(self, node, label, fix):
        value = node.value
        if not isinstance(value, str) or not value:
            raise node.error(f"expected a name, got {plain(node)!r}", node.where(),
                             f"use one of {', '.join(self.options)}")
        if value not in self.options:
            raise node.error(f"unknown {self.what or label} '{value}'", node.where(),
                             did_you_mean(value, self.options)
                             or f"use one of {', '.join(self.options)}")
        return value

    def json(self):
        return {"enum": list(self.options)}

    def text(self):
        return " \\| ".join(f"`{o}`" for o in self.options)


class Vec(Type):
    """``n`` finite numbers (m, rad …): a list, or numbers separated by spaces."""

    FIELDS = (("n", 3),)

    def read(self, node, label, fix):
        return to_vector(plain(node), self.n, node.where(), error=node.error)

    def json(self):
        return {"type": "array", "items": Num().json(), "minItems": self.n,
                "maxItems": self.n}

    def text(self):
        return f"[{self.n} numbers]"


class Sub(Type):
    """A nested mapping declared by its own schema dataclass."""

    FIELDS = (("cls", None),)

    def read(self, node, label, fix):
        return read(self.cls, node)

    def json(self):
        return json_schema(self.cls)

    def text(self):
        return "mapping"


class ListOf(Type):
    """A list (``- …`` items) of ``item`` values; read as a tuple."""

    FIELDS = (("item", None),)

    def read(self, node, label, fix):
        if not isinstance(node.value, list):
            raise node.error(f"{label} must be a list ('- …' items)", node.where(),
                             "write one '- ' item per entry")
        return tuple(self.item.read(v, label, fix) for v in node.value)

    def json(self):
        return {"type": "array", "items": self.item.json()}

    def text(self):
        inner = self.item.text()
        return "list" if inner == "mapping" else f"list of {inner}"


class MapOf(Type):
    """A mapping of free names (joints, segments, python-can keywords) to ``value``s."""

    FIELDS = (("value", None), ("example", "name: …"))

    def read(self, node, label, fix):
        if not isinstance(node.value, dict):
            raise node.error(f"{label} must map names to values", node.where(),
                             f"e.g. {label.split('.')[-1]}: {{{self.example}}}")
        return {k: self.value.read(v, f"{label}.{k}", fix) for k, v in node.value.items()}

    def json(self):
        return {"type": "object", "additionalProperties": self.value.json()}

    def text(self):
        inner = self.value.text()
        return f"{{name: {inner}}}"


class AnyOf(Type):
    """The first of ``types`` whose YAML shape (mapping, list, text, number) the value has."""

    FIELDS = (("types", ()),)

    def read(self, node, label, fix):
        shape = _shape(node.value)
        for t in self.types:
            if shape in _shapes(t):
                return t.read(node, label, fix)
        return self.types[0].read(node, label, fix)

    def json(self):
        return {"anyOf": [t.json() for t in self.types]}

    def text(self):
        return " or ".join(t.text() for t in self.types)


class Plain(Type):
    """A plain YAML value (a number, a name or true/false), kept as written."""

    def read(self, node, label, fix):
        if not isinstance(node.value, (str, int, float, bool)):
            raise node.error(f"{label} must be a number, a name or true/false", node.where(),
                             fix or "write one plain value")
        return node.value

    def json(self):
        return {"type": ["string", "number", "boolean"]}

    def text(self):
        return "number, name or true/false"


class Raw(Type):
    """A value read by other code (it keeps the node): only its shape is declared here."""

    FIELDS = (("schema", ()), ("words", "see below"))  # schema: JSON Schema (key, value) pairs

    def read(self, node, label, fix):
        return node

    def json(self):
        return dict(self.schema)

    def text(self):
        return self.words


def _shape(value) -> str:
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "flag"
    if isinstance(value, (int, float)):
        return "number"
    return "text"


def _shapes(t: Type) -> set[str]:
    if isinstance(t, (Sub, MapOf)):
        return {"mapping"}
    if isinstance(t, (ListOf, Vec)):
        return {"list"}
    if isinstance(t, Num):
        return {"number"}
    if isinstance(t, Flag):
        return {"flag"}
    return {"text"}


# ----------------------------------------------------------------------------- declaring
def key(type_: Type, default=REQUIRED, *, unit: str = "", doc: str = "", what: str = "",
        fix: str = "", shown: str | None = None, name: str = ""):
    """One key of a schema dataclass: its type, default (:data:`REQUIRED` if none), unit,
    one-line description; ``what`` names it in errors (default: the key path), ``fix`` is the
    hint for a bad value, ``shown`` the default as the docs write it, ``name`` the YAML key
    when it is not a Python name (``lambda``)."""
    meta = {"schema": KeySpec(type_, unit, doc, what, fix, shown, name)}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class KeySpec(Type):
    """One key's declaration (see :func:`key`)."""

    FIELDS = (("type", None), ("unit", ""), ("doc", ""), ("what", ""), ("fix", ""),
              ("shown", None), ("name", ""))

    def read(self, node: Node, label: str, fix: str):
        """The key's value, read by its type."""
        return self.type.read(node, label, fix)


def section(what: str, result: bool = False):
    """Make a class a schema: a frozen dataclass whose errors call it ``what`` (``a joint``).
    ``result``: the run uses it as it is (it compares by value); the others are the file's
    shape only (compared by identity, a cheaper class to make at import)."""

    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True, eq=result)(cls)
        cls.WHAT = what
        cls.KEYS = {(f.metadata["schema"].name or f.name): f for f in dataclasses.fields(cls)
                    if "schema" in f.metadata}
        return cls

    return wrap


def keys(cls) -> dict[str, bool]:
    """The YAML keys of schema ``cls`` → required."""
    return {k: f.default is REQUIRED for k, f in cls.KEYS.items()}


def defaults(cls) -> dict:
    """The YAML keys of schema ``cls`` that have a default → that default."""
    out = {}
    for k, f in cls.KEYS.items():
        if f.default is not dataclasses.MISSING and f.default is not REQUIRED:
            out[k] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[k] = f.default_factory()
    return out


# ----------------------------------------------------------------------------- reading
def mapping(cls, node: Node, extra: dict[str, bool] | None = None,
            what: str = "") -> dict[str, Node]:
    """The node's mapping, its keys checked against schema ``cls`` and ``extra`` (key →
    required: keys another reader owns, e.g. a drive protocol's): unknown, missing."""
    what = what or cls.WHAT
    if not isinstance(node.value, dict):
        raise node.error(f"{what} must be a mapping (key: value)", node.where(),
                         "its keys are described under docs/")
    required = {k: f.default is REQUIRED for k, f in cls.KEYS.items()} | (extra or {})
    for k, sub in node.value.items():
        if k not in required:
            hint = did_you_mean(k, required) or f"allowed keys: {', '.join(required)}"
            raise node.error(f"unknown key '{k}' in {what}", sub.where(), hint)
    for k, needed in required.items():
        if needed and k not in node.value:
            raise node.error(f"{what} has no '{k}'", node.where(),
                             f"add '{k}:' (described under docs/)")
    return node.value


def read(cls, node: Node, extra: dict[str, bool] | None = None, what: str = "", **given):
    """An instance of schema ``cls`` from a mapping node: every key checked, every absent one
    its default. ``given`` values (computed by the caller) replace those keys; ``extra`` keys
    are allowed and left to their own reader (see :func:`mapping`)."""
    m = mapping(cls, node, extra, what)
    values = {}
    for k, f in cls.KEYS.items():
        if f.name in given:
            values[f.name] = given[f.name]
        elif k in m:
            spec = f.metadata["schema"]
            sub = m[k]
            values[f.name] = spec.type.read(sub, spec.what or k, spec.fix)
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
        else:
            values[f.name] = f.default
    return cls(**values)


def given(node: Node) -> list[str]:
    """The keys a mapping node writes (those not left to their defaults)."""
    return list(node.value) if isinstance(node.value, dict) else []


def node_of(value, file: str, key: str = "", error=None) -> Node:
    """Python values (keyword arguments) as a :class:`Node` tree, so that they are read and
    checked like a file's (errors name ``file`` and the key, line 0)."""
    kw = {} if error is None else {"error": error}
    if isinstance(value, dict):
        return Node({k: node_of(v, file, f"{key}.{k}" if key else k, error)
                     for k, v in value.items()}, file, 0, key, **kw)
    if isinstance(value, (list, tuple, np.ndarray)):
        return Node([node_of(v, file, f"{key}[{i}]", error) for i, v in enumerate(value)],
                    file, 0, key, **kw)
    if isinstance(value, np.generic):
        value = value.item()
    return Node(value, file, 0, key, **kw)


# ----------------------------------------------------------------------------- describing
def _default_json(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.ndarray, tuple)):
        return [_default_json(x) for x in v]
    if isinstance(v, (str, int, float, bool, list)):
        return v
    return None


def _describe(spec: KeySpec, f) -> str:
    words = spec.doc
    if spec.unit:
        words = f"{words} [{spec.unit}]"
    return words


def json_schema(cls, title: str = "") -> dict:
    """The JSON Schema (draft 2020-12) of schema ``cls``: properties with types, ranges,
    defaults and descriptions; unknown keys refused; required keys listed."""
    props = {}
    required = []
    for k, f in cls.KEYS.items():
        spec = f.metadata["schema"]
        p = dict(spec.type.json())
        desc = _describe(spec, f)
        if desc:
            p["description"] = desc
        d = defaults(cls).get(k, REQUIRED)
        if d is REQUIRED:
            if f.default is REQUIRED:
                required.append(k)
        elif _default_json(d) is not None:
            p["default"] = _default_json(d)
        props[k] = p
    out: dict = {"type": "object"}
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    if title:
        out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
               **out}
    if doc:
        out["description"] = doc
    for k, (t, doc, *_) in _extra(cls).items():
        props.setdefault(k, {**t.json(), "description": doc})
    out.update(properties=props, additionalProperties=False)
    if required:
        out["required"] = required
    return out


def _shown_default(cls, k: str, f) -> str:
    spec = f.metadata["schema"]
    if spec.shown is not None:
        return spec.shown
    if isinstance(spec.type, Sub):
        return ""
    if f.default is REQUIRED:
        return "required"
    d = defaults(cls).get(k)
    if d is None or d == {} or d == ():
        return "—"
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, float):
        return "∞" if d == math.inf else _fmt(d)
    if isinstance(d, (tuple, np.ndarray)):
        return "[" + ", ".join(_fmt(float(x)) for x in d) + "]"
    return str(d)


def doc_rows(cls, prefix: str = "", depth: int = 9) -> list[tuple[str, str, str, str]]:
    """(key, type and unit, default, meaning) of every key of ``cls`` and, to ``depth``
    levels, of its nested mappings (``safety.stop_time``, ``joints[].limit.lower``)."""
    rows = []
    for k, f in cls.KEYS.items():
        spec = f.metadata["schema"]
        path = f"{prefix}{k}"
        t = spec.type
        kind = t.text()
        if spec.unit:
            kind = f"{kind}, {spec.unit}" if kind else spec.unit
        rows.append((path, kind, _shown_default(cls, k, f), spec.doc))
        inner, suffix = t, ""
        if isinstance(t, ListOf) and isinstance(t.item, Sub):
            inner, suffix = t.item, "[]"
        elif isinstance(t, MapOf) and isinstance(t.value, Sub):
            inner, suffix = t.value, ".NAME"
        if isinstance(inner, Sub) and depth > 0:
            rows += doc_rows(inner.cls, f"{path}{suffix}.", depth - 1)
    for k, (t, doc, *_) in _extra(cls).items():
        if k not in cls.KEYS:
            rows.append((f"{prefix}{k}", t.text(), "", doc))
    return rows


def _extra(cls) -> dict:
    """Keys another reader owns (a drive protocol's), declared for the JSON Schema and the
    docs: ``cls.extra_keys()`` → {key: (type, description, …)}."""
    extra = getattr(cls, "extra_keys", None)
    return extra() if extra is not None else {}


def doc_table(cls, depth: int = 9) -> str:
    """The markdown table of :func:`doc_rows`."""
    out = ["| key | type, unit | default | meaning |", "|---|---|---|---|"]
    for path, kind, default, doc in doc_rows(cls, depth=depth):
        out.append(f"| `{path}` | {kind} | {default} | {doc} |")
    return "\n".join(out) + "\n"
