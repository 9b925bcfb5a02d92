"""Records that compiled code and Python share, declared once by field name: the numba
structrefs of the cycle's and the buses' Model/Data pairs.

The cycle's arguments are grouped as Pinocchio groups a rigid model's: an immutable *model*
(parameters fixed for a run) and a mutable *data* (what a cycle reads and writes). Each is a
numba structref: compiled code reads its fields by name (``m.gains``, ``d.q``), and numba's
dispatcher unboxes the whole record in one step instead of one argument per array (~0.1 µs
each on a cold cache). The Python object of a record *is* its proxy and keeps the very
objects it was made of as plain attributes under the same names: Python reads ``d.q`` as the
numpy array compiled code writes (the same memory), at attribute speed, with no compiled
getter.

Declaring one, in the module that owns it::

    class BusModelType(structs.Struct):
        "the numba type"

    class BusModel(structs.Record):
        "the Python proxy"

    @njit(cache=True)
    def _new_model(*fields):
        return BusModel(*fields)

    structs.declare(BusModelType, BusModel, ("tx", "rx", "period"), _new_model)
    model = BusModel(tx=..., rx=..., period=1e-3)

A record whose type a signature must name before any instance exists (a control law's
``cfunc`` takes the law's model and data) is declared with its fields' numba types,
``[("opts", structs.records(OPTIONS)), …]``: :func:`declare` then returns the concrete type,
and :func:`check` compares what was made with it (a wrong dtype or a non-contiguous view is
said in one line at set-up, not as a compile error mid-start). The constructor is the
declaring module's own cached function (numba's built-in one compiles anew in every process:
0.1–0.3 s of a cold start each); its ``*fields`` follows the declaration, so no field list is
written twice. A field is fixed once made (the structref would not follow a rebound
attribute): write into its array instead — or, for a record that must take another array
(the recording's rows), through its own compiled setter and :meth:`Record.rebind`.
"""

from __future__ import annotations

import numba
from numba import types
from numba.experimental import structref


class Struct(types.StructRef):
    """A record's numba type: its fields typed from what it is made of (literals widened: an
    int field is an int64, whatever value made it)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Record(structref.StructRefProxy):
    """A record's Python object: the structref, and its fields as attributes (the same
    objects). Made by keywords, one per declared field: ``BusModel(tx=..., period=...)``."""

    FIELDS: tuple[str, ...] = ()

    def __new__(cls, **values):
        names = cls.FIELDS
        missing = [n for n in names if n not in values]
        unknown = [n for n in values if n not in names]
        if missing or unknown:
            raise TypeError(f"{cls.__name__}: " + "; ".join(
                part for part in (missing and f"missing field(s) {', '.join(missing)}",
                                  unknown and f"no field(s) {', '.join(unknown)}") if part)
                + f" (its fields: {', '.join(names)})")
        obj = cls._new(*(values[n] for n in names))
        for name in names:
            object.__setattr__(obj, name, values[name])
        return obj

    def __setattr__(self, name: str, value) -> None:
        if name in type(self).FIELDS and getattr(self, name, value) is not value:
            raise AttributeError(f"{type(self).__name__}.{name} is fixed once the record is "
                                 f"made (compiled code holds it): write into it instead, "
                                 f"e.g. {name}[:] = …")
        object.__setattr__(self, name, value)

    def rebind(self, name: str, value) -> None:
        """The Python side of a field its owner's compiled setter has just replaced."""
        object.__setattr__(self, name, value)


DECLARED: dict[type, type] = {}  # every declared record's numba type class → its proxy class


def declare(type_class: type, proxy_class: type, fields, new):
    """Register ``type_class`` (a :class:`Struct`) and ``proxy_class`` (a :class:`Record`) for
    ``fields`` — names, or ``(name, numba type)`` pairs — made by ``new`` (the declaring
    module's cached ``def new(*fields): return proxy_class(*fields)``). Returns the concrete
    type where the types are given, else None."""
    typed = [f for f in fields if not isinstance(f, str)]
    names = tuple(f if isinstance(f, str) else f[0] for f in fields)
    structref.register(type_class)
    DECLARED[type_class] = proxy_class
    proxy_class.FIELDS = names
    proxy_class._new = staticmethod(new)
    structref.define_constructor(proxy_class, type_class, list(names))
    structref.define_boxing(type_class, proxy_class)
    return type_class(list(typed)) if typed else None


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
ARR3 = types.Array(types.float64, 3, "C")
IVEC = types.Array(types.int64, 1, "C")
IMAT = types.Array(types.int64, 2, "C")
MODEL = types.Array(types.float64, 2, "C", readonly=True)  # a packed rigid model (read-only)


def records(dtype) -> types.Array:
    """The numba type of a 1-D C array of ``dtype`` records."""
    return types.Array(numba.from_dtype(dtype), 1, "C")
