"""Control laws by name: one registry from a controller file's ``law:`` to the function the
control cycle calls (docs/architecture.md, "How to add a control law").

A law is a function of one signature, the same for every law::

    @registry.law("my_law", doc="one line: what it does")
    def my_law(opts, model, data, model_exo, data_exo, gains, law_state, q, qd, qr, qdr, qddr,
               assist, dt, tau, scratch):
        ...  # joint torques (N·m) into tau, nopython-compilable, allocating nothing

- ``opts``: the controller's options, one :data:`OPTIONS` record (``opts[0].law``,
  ``opts[0].inertia_feedforward``);
- ``model``/``data`` and ``model_exo``/``data_exo``: the packed rigid model
  (``Mechanism.packed``, read-only) and its workspace — Pinocchio's model and data — of the
  whole leg (exoskeleton, wearer, rotors) and of the exoskeleton alone, for the kernels of
  :mod:`exo_rt.dynamics.kernels` (``inverse_dynamics``, ``mass_matrix``, ``gravity_forces``);
- ``gains``: one :data:`GAINS` record per joint, read by field name (``gains[j].kp``; the
  controller file's gain keys); ``law_state``: the law's own per-joint :data:`STATE` record
  (``law_state[j].integral``, kept across cycles, zeroed when RUN begins);
- the measured ``q``, ``qd`` and the reference ``qr``, ``qdr``, ``qddr`` (rad, rad/s, rad/s²);
  ``assist``: the wearer's own torque along the reference (N·m); ``dt``: the period (s);
- ``scratch``: (n + 4, n) work space; its row n + 2 holds last cycle's output clamp per joint
  (1: saturated), for an anti-windup.

The cycle clamps ``tau`` to each joint's torque limit after the law, and turns it into
current (:func:`exo_rt.control.laws.torque_to_current`). The cycle's one compiled call
indexes a table of compiled functions (numba ``cfunc``, cached on disk like every kernel) by
the law's code: the control cycle stays one call. A run compiles only its own law into the
table (``table("pid")``: ~0.4 s of a cold start per law saved); the other codes hold a stand-in
that writes NaN torques, which the safety check turns into a fault, were one ever called.

The built-in laws are those of :mod:`exo_rt.control.laws` (:data:`BUILTIN`); a third party
registers its own under the entry-point group ``exo_rt.laws`` (name → the module defining it),
as drive protocols do under ``exo_rt.protocols``.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import cfunc, from_dtype, types
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.typed import List

from exo_rt import plugins
from exo_rt.jit import njit

GROUP = "exo_rt.laws"
BUILTIN = ("exo_rt.control.laws",)  # modules whose import registers the built-in laws

# the records a law reads by field name (docs/performance.md, "Named layouts")
OPTIONS = np.dtype([  # the controller's options: one record
    ("law", "i8"),  # the law's code (its index in table())
    ("inertia_feedforward", "?"),  # model_pid: add M(q) q̈_d
    ("friction_compensation", "?"),  # compensate wave-generator friction in torque → current
], align=True)
GAINS = np.dtype([  # one record per joint; the units depend on the law
    ("kp", "f8"),  # N·m/rad (PID) or 1/s² (computed torque)
    ("ki", "f8"),  # N·m/(rad·s) or 1/s³
    ("kd", "f8"),  # N·m·s/rad or 1/s
    ("i_limit", "f8"),  # N·m: bound of the integral term's torque (anti-windup)
    ("torque_limit", "f8"),  # N·m: output limit
    ("lam", "f8"),  # 1/s: sliding surface s = ė + Λe (the file's key `lambda`)
    ("k_switch", "f8"),  # N·m: robust gain of the sliding term
    ("boundary", "f8"),  # rad/s: boundary-layer width Φ
    ("k_s", "f8"),  # N·m·s/rad: linear feedback on s
    ("assist", "f8"),  # fraction of the wearer's own torque along the reference, as assistance
])
STATE = np.dtype([  # the law's state, one record per joint
    ("integral", "f8"),  # rad·s: ∫e dt
])

_VEC = types.Array(types.float64, 1, "C")
_MAT = types.Array(types.float64, 2, "C")
_MODEL = types.Array(types.float64, 2, "C", readonly=True)  # a packed model is read-only
SIGNATURE = types.void(types.Array(from_dtype(OPTIONS), 1, "C"), _MODEL, _VEC, _MODEL, _VEC,
                       types.Array(from_dtype(GAINS), 1, "C"),
                       types.Array(from_dtype(STATE), 1, "C"), _VEC, _VEC, _VEC, _VEC, _VEC,
                       _VEC, types.float64, _VEC, _MAT)
FUNCTION = types.FunctionType(SIGNATURE)


@dataclass(frozen=True)
class Law:
    """A registered law: its name, its code (index in the table) and its function."""

    name: str
    code: int
    torque: Callable
    doc: str = ""


_laws: dict[str, Law] = {}
_compiled_laws: dict[str, object] = {}  # name → its compiled cfunc, compiled on first use
_tables: dict[tuple, object] = {}  # which laws are compiled → the table (numba typed List)


def law(name: str, doc: str = "") -> Callable[[Callable], Callable]:
    """Register the decorated function as the law ``name`` (see the module's docstring)."""
    def register(fn: Callable) -> Callable:
        if name in _laws:
            raise ValueError(f"a control law named '{name}' is registered already")
        _laws[name] = Law(name, len(_laws), fn, doc)
        _tables.clear()
        return fn
    return register


def unregister(name: str) -> None:
    """Remove the law registered last (codes stay the table's indices)."""
    if not _laws or next(reversed(_laws)) != name:
        raise ValueError(f"'{name}' is not the law registered last")
    del _laws[name]
    _compiled_laws.pop(name, None)
    _tables.clear()


NAMES = plugins.Names(GROUP, BUILTIN, _laws)  # every law's name, as the schema checks it


def get(name: str) -> Law:
    """The law ``name`` (KeyError if there is none)."""
    if name not in NAMES:
        raise KeyError(name)
    return _laws[name]


def code(name: str) -> int:
    """The law's index in :func:`table` (the controller options' ``law``)."""
    return get(name).code


def _compiled(fn: Callable):
    cache = inspect.getsourcefile(fn) is not None  # (a law typed at a prompt: no cache)
    with warnings.catch_warnings():  # numba calls first-class function types experimental
        warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
        return cfunc(SIGNATURE, cache=cache)(fn)


@njit(cache=True)
def _table_of(functions):
    """The compiled laws as a typed list, built in compiled code (cached: a list built from
    Python would compile numba's list code in every process)."""
    out = List.empty_list(FUNCTION)
    for f in functions:
        out.append(f)
    return out


def _not_compiled(opts, model, data, model_exo, data_exo, gains, law_state, q, qd, qr, qdr,
                  qddr, assist, dt, tau, scratch):
    """The stand-in for a law this process has not compiled: NaN torques (a fault)."""
    for j in range(tau.shape[0]):
        tau[j] = np.nan


@functools.cache
def _stand_in():
    return _compiled(_not_compiled)


def table(*names: str):
    """The compiled laws, by code: what the control cycle calls through. ``names``: the laws
    it holds (a run's own), the other codes a NaN stand-in; none named: every registered law.
    Each law compiles once per process; each table is built once."""
    NAMES.load_builtin()
    wanted = set(names) if names else set(_laws)
    for name in wanted:
        get(name)  # KeyError for a law that is not registered
        if name not in _compiled_laws:
            _compiled_laws[name] = _compiled(_laws[name].torque)
    key = tuple(name in wanted for name in _laws)
    if key not in _tables:
        functions = tuple(_compiled_laws[name] if name in wanted else _stand_in()
                          for name in _laws)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            _tables[key] = _table_of(functions)
    return _tables[key]
