"""Compiled-code records declared once by field name: numba structrefs for Model/Data pairs.

The cycle's arguments are grouped as Pinocchio groups a rigid model's: an immutable *model*
(parameters fixed for a run) and a mutable *data* (what a cycle reads and writes). Each group
is one numba structref: compiled code reads its fields by name (``m.gains``, ``d.q``), and the
dispatcher unboxes one object per call instead of one per array (~0.1 µs each on a cold
cache). :func:`declare` makes one from an ordered list of ``(name, numba type)``: the type
class, the Python-side proxy and the concrete type, so that a function signature (a control
law's ``cfunc``) can name it before any instance exists.

A proxy is made in Python by the caller's own cached constructor — one line per struct,
``@njit(cache=True) def new(*fields): return Proxy(*fields)`` — because numba's own Python
constructor compiles anew in every process (0.1–0.3 s of a cold start each). :func:`check`
compares what was made with the declaration: a wrong dtype or a non-contiguous view is said
in one line at set-up, not as a compile error mid-start.
"""

from __future__ import annotations

import numba
from numba import types
from numba.experimental import structref


class Struct(types.StructRef):
    """A structref type whose fields are typed from what it is made of (literal-free)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


def declare(type_class: type, proxy_class: type, fields: list[tuple[str, types.Type]]):
    """Register ``type_class`` (a :class:`Struct` subclass) and ``proxy_class`` for ``fields``
    and return the concrete type. Field names are the declaration: compiled code reads them
    as attributes; Python keeps the same arrays under the same names."""
    structref.register(type_class)
    names = [name for name, _t in fields]
    structref.define_proxy(proxy_class, type_class, names)
    for name in names:
        setattr(proxy_class, name, property(_getter(name), doc=f"the field {name!r}"))
    return type_class(fields)


def _getter(name: str):
    @numba.njit(cache=False)
    def get(s):
        return getattr(s, name)
    return lambda self: get(self)


def check(made, declared: types.Type, what: str) -> None:
    """``made`` (a proxy) has the declared type, else one clear error naming the field."""
    got = numba.typeof(made)
    if got == declared:
        return
    have = dict(got.field_dict)
    for name, t in declared.field_dict.items():
        if have.get(name) != t:
            raise TypeError(f"{what}: field {name!r} is {have.get(name)}, declared {t}")
    raise TypeError(f"{what}: {got} is not the declared {declared}")


# the numba types of the arrays the records hold
F64 = types.float64
VEC = types.Array(types.float64, 1, "C")
MAT = types.Array(types.float64, 2, "C")
IVEC = types.Array(types.int64, 1, "C")
IMAT = types.Array(types.int64, 2, "C")
MODEL = types.Array(types.float64, 2, "C", readonly=True)  # a packed rigid model (read-only)


def records(dtype) -> types.Array:
    """The numba type of a 1-D C array of ``dtype`` records."""
    return types.Array(numba.from_dtype(dtype), 1, "C")
