"""Records that compiled code and Python share, declared once by field names.

A record is a numba structref: compiled code reads its fields by name (``model.period``,
``data.position[k]``) and numba's dispatcher unboxes the whole record in one step (an
argument per array costs ~0.1 µs each on a cold cache; a bus's cycle has ~60 of them). The
Python object of a record *is* its proxy, and it keeps the very objects the structref was
made of as plain attributes under the same names: Python reads ``data.position`` as the
numpy array that compiled code writes (the same memory), at attribute speed, with no
compiled getter.

Declaring one, in the module that owns it::

    class BusModelType(records.Fields):
        "the numba type"

    class BusModel(records.Record):
        "the Python proxy"

    @njit(cache=True)
    def _new_model(*fields):
        return BusModel(*fields)

    records.declare(BusModelType, BusModel, ("tx", "rx", "period"), _new_model)
    model = BusModel(tx=..., rx=..., period=1e-3)

(:mod:`exo_rt.structs` declares the cycle's own records with numba types given up front and
compiled getters; these bus records take their types from what they are made of and keep
their fields as plain attributes.) The constructor is the declaring module's own cached
function (numba's built-in one compiles anew in every process: 0.1–0.3 s of a cold start
each); its ``*fields`` follows the declaration, so no field list is written twice. A field
is fixed once made (the structref would not follow a rebound attribute): write into its
array instead.
"""

from __future__ import annotations

from numba.experimental import structref

from exo_rt import structs

# a record's numba type: its fields typed from what it is made of (literals widened: an int
# field is an int64, whatever value made it) — the cycle's records' own
Fields = structs.Struct


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


def declare(type_class: type, proxy_class: type, names: tuple[str, ...], new) -> None:
    """Register ``type_class`` (a :class:`Fields`) and ``proxy_class`` (a :class:`Record`)
    for the fields ``names``, made by ``new`` (the declaring module's cached
    ``def new(*fields): return proxy_class(*fields)``)."""
    structref.register(type_class)
    proxy_class.FIELDS = tuple(names)
    proxy_class._new = staticmethod(new)
    structref.define_constructor(proxy_class, type_class, list(names))
    structref.define_boxing(type_class, proxy_class)
