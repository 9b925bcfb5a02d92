"""Control laws by name: one registry from a controller file's ``law:`` to the function the
control cycle calls (docs/architecture.md, "Recipes": a control law — its own module
``exo_rt/control/NAME.py`` and one line here, the module in :data:`BUILTIN`).

A law is a function of one signature, the same for every law — the law's model and data
(Pinocchio's split: what it reads, what it writes)::

    @registry.law("my_law", doc="one line: what it does")
    def my_law(m, d):
        ...  # joint torques (N·m) into d.tau, nopython-compilable, allocating nothing

- ``m`` (:data:`LAW_MODEL`): ``m.opts`` the controller's options, one :data:`OPTIONS` record
  (``m.opts[0].inertia_feedforward``); ``m.gains`` one :data:`GAINS` record per joint, read by
  field name (``m.gains[j].kp``: the controller file's gain keys); ``m.model`` and
  ``m.model_exo`` the packed rigid models (``Mechanism.packed``, read-only) of the whole leg
  (exoskeleton, wearer, rotors) and of the exoskeleton alone; ``m.dt`` the period (s);
- ``d`` (:data:`LAW_DATA`): ``d.data``/``d.data_exo`` the models' workspaces — Pinocchio's
  model and data — for the kernels of :mod:`exo_rt.dynamics.kernels` (``inverse_dynamics``,
  ``mass_matrix``, ``gravity_forces``); ``d.law_state`` the law's own per-joint
  :data:`STATE` record (``d.law_state[j].integral``, kept across cycles, zeroed when RUN
  begins); the measured ``d.q``, ``d.qd`` and the reference ``d.qr``, ``d.qdr``, ``d.qddr``
  (rad, rad/s, rad/s²); ``d.assist`` the wearer's own torque along the reference (N·m,
  computed by the cycle when a joint's gain ``assist`` is set); ``d.scratch`` (n + 4, n)
  work space, its row n + 2 last cycle's output clamp per joint (1: saturated), for an
  anti-windup; ``d.tau`` the torque out; ``d.gait`` the wearer's gait-phase estimate (one
  ``phase_estimate.STATE`` record: ``d.gait[0].phase``, ``.walking``), ``d.level`` the
  assistance level per joint (0–1), ``d.offsets`` each joint's gait phase offset (strides);
  ``d.load`` the vertical force each foot of ``m.stance`` carries (N, the board's sole
  sensors, filtered by the cycle; 0 when stale) and ``d.jac`` a (3, n) work space, for the
  stance-load feedforward (:func:`exo_rt.control.laws.stance_load`, a law registered
  ``carries_stance``; ``m.stance`` and ``m.stance_at`` its legs and ankle points).

The cycle clamps ``tau`` to each joint's torque limit after the law, and turns it into
current (:func:`exo_rt.control.laws.torque_to_current`). The cycle's model holds its law
compiled (:func:`function`: a numba ``cfunc``, cached on disk like every kernel) and calls it
through that value — every law has the same type, so the compiled cycle is every law's, and
the control cycle stays one call. A run compiles only its own law (~0.4 s of a cold start per
law saved; :func:`compile_all`: every law, for model-in-the-loop and the tools).

The built-in laws (nine) are those of :mod:`exo_rt.control.laws` (:data:`BUILTIN`); a third
party registers its own under the entry-point group ``exo_rt.laws`` (name → the module
defining it), as drive protocols do under ``exo_rt.protocols``. A law that needs a new kind
of gain adds it to the schema's ``Gains`` (:mod:`exo_rt.schema.controller`): :data:`GAINS`,
the record ``m.gains`` holds, is made from it.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import types
from numba.core.errors import NumbaExperimentalFeatureWarning

from exo_rt import plugins, structs
from exo_rt.control import phase_estimate
from exo_rt.jit import cfunc, njit
from exo_rt.schema.gains import Gains

GROUP = "exo_rt.laws"
BUILTIN = ("exo_rt.control.laws",)  # modules whose import registers the built-in laws

# the records a law reads by field name (docs/performance.md, "Named layouts")
OPTIONS = np.dtype([  # the controller's options: one record
    ("law", "i8"),  # the law's code (its order of registration: code())
    ("inertia_feedforward", "?"),  # model_pid: add M(q) q̈_d
    ("friction_compensation", "?"),  # compensate wave-generator friction in torque → current
    ("follows_wearer", "?"),  # the wearer leads the motion: friction compensated along the
    #                           measured speed (a law registered with follows_wearer=True)
    ("feeds_acceleration", "?"),  # the law feeds the reference's q̈ forward: the rotor
    #                               inertia torque friction carries is the reference's
], align=True)
# one record per joint, its fields the controller file's gain keys (exo_rt.schema.gains.Gains:
# the key ``lambda`` is the field ``lam``); the units depend on the law
GAINS = np.dtype([(f.name, "f8") for f in Gains.KEYS.values()])
STATE = np.dtype([  # the law's state, one record per joint
    ("integral", "f8"),  # rad·s: ∫e dt
])
# the stance-load feedforward (exo_rt.control.laws.stance_load): one record per leg the
# controller file's ``stance_load`` names (none: off); each leg's ankle point is the row of
# the model's ``stance_at`` (m, in its shank's frame)
STANCE = np.dtype([
    ("sensor", "i8"),  # the board's foot-sole sensor under the leg (PRESSURE's index)
    ("body", "i8"),  # the shank's body in the controller's model (the ankle hangs on it)
    ("up_x", "f8"), ("up_y", "f8"), ("up_z", "f8"),  # up, −gravity/|gravity|, in the model's
    #                                                  base frame (the pelvis taken upright)
    ("alpha", "f8"),  # the first-order filter's gain per period, 1 − exp(−dt/τ)
    ("max_n", "f8"),  # N: the force's clamp
])



class LawModelType(structs.Struct):
    """The numba type of :class:`LawModel`."""


class LawModel(structs.Record):
    """What a law reads and never writes, for a run: its options, gains, the rigid models."""


class LawDataType(structs.Struct):
    """The numba type of :class:`LawData`."""


class LawData(structs.Record):
    """What a law reads and writes each cycle: workspaces, its state, the joint vectors."""


@njit(cache=True)
def _law_model(*fields):
    return LawModel(*fields)


@njit(cache=True)
def _law_data(*fields):
    return LawData(*fields)


# a law's model: the controller's options (one OPTIONS record), the gains (one GAINS record
# per joint), the packed rigid models of the whole leg and of the exoskeleton alone, the
# period (s), the gait-phase estimate's parameters (one phase_estimate.PARAMS record), the
# stance-load feedforward's legs (STANCE records, none: off) and their ankle points (legs × 3,
# m, each in its shank's frame)
LAW_MODEL = structs.declare(LawModelType, LawModel, [
    ("opts", structs.records(OPTIONS)), ("gains", structs.records(GAINS)),
    ("model", structs.MODEL), ("model_exo", structs.MODEL), ("dt", structs.F64),
    ("gp", structs.records(phase_estimate.PARAMS)), ("stance", structs.records(STANCE)),
    ("stance_at", structs.MAT)], _law_model)
# a law's data: the two rigid workspaces, its per-joint STATE records, (n + 4, n) scratch
# (row n + 2: last cycle's output clamp per joint, for an anti-windup), the measured q, q̇,
# the reference q_r, q̇_r, q̈_r (rad, rad/s, rad/s²), the wearer's own torque along the
# reference (N·m) and the torque out (N·m) — views of the cycle's joint vectors; the gait
# phase estimate (one phase_estimate.STATE record), the assistance level per joint (0–1) and
# each joint's gait phase offset (strides); the vertical force each stance-load leg's foot
# carries (N, filtered, clamped; 0 when its sensor is stale), filled by the cycle; a (3, n)
# work space for a point's Jacobian
LAW_DATA = structs.declare(LawDataType, LawData, [
    ("data", structs.VEC), ("data_exo", structs.VEC), ("law_state", structs.records(STATE)),
    ("scratch", structs.MAT), ("q", structs.VEC), ("qd", structs.VEC), ("qr", structs.VEC),
    ("qdr", structs.VEC), ("qddr", structs.VEC), ("assist", structs.VEC),
    ("tau", structs.VEC), ("gait", structs.records(phase_estimate.STATE)),
    ("level", structs.VEC), ("offsets", structs.VEC), ("load", structs.VEC),
    ("jac", structs.MAT)], _law_data)
SIGNATURE = types.void(LAW_MODEL, LAW_DATA)
FUNCTION = types.FunctionType(SIGNATURE)


def law_model(opts, gains, model, model_exo, dt: float, gp, stance=None,
              stance_at=None) -> LawModel:
    """A law's model (fields of :data:`LAW_MODEL`), checked against the declaration;
    ``stance`` (:data:`STANCE` records) and ``stance_at`` (legs × 3) the stance-load
    feedforward's legs (none: off)."""
    if stance is None:
        stance, stance_at = np.zeros(0, STANCE), np.zeros((0, 3))
    m = LawModel(opts=opts, gains=gains, model=model, model_exo=model_exo, dt=float(dt),
                 gp=gp, stance=stance, stance_at=stance_at)
    structs.check(m, LAW_MODEL, "law model")
    return m


def law_data(data, data_exo, law_state, scratch, **vectors) -> LawData:
    """A law's data (fields of :data:`LAW_DATA`): the workspaces, the law's state and
    scratch, and by name the joint vectors (``q``, ``qd``, ``qr``, ``qdr``, ``qddr``,
    ``assist``, ``tau``, ``level``, ``offsets``) and the gait-phase estimate (``gait``) — the
    caller's arrays (views of its joint vectors), so that what the law writes is where the
    caller reads it. ``load`` (N per stance-load leg) and ``jac`` (3 × n) default to none and
    a zero work space."""
    n = vectors["q"].shape[0]
    vectors.setdefault("load", np.zeros(0))
    vectors.setdefault("jac", np.zeros((3, n)))
    d = LawData(data=data, data_exo=data_exo, law_state=law_state, scratch=scratch, **vectors)
    structs.check(d, LAW_DATA, "law data")
    return d


@dataclass(frozen=True)
class Law:
    """A registered law: its name, its code (order of registration) and its function."""

    name: str
    code: int
    torque: Callable
    doc: str = ""
    follows_wearer: bool = False  # the wearer leads: friction compensated along q̇ measured
    feeds_acceleration: bool = True  # the reference's q̈ is fed forward (its rotor inertia
    # torque is taken out of the load the mesh friction grows with)
    carries_stance: bool = False  # the law adds the stance-load feedforward (−J_aᵀ f) where
    # the controller file asks for it (``stance_load``)


NAMES: plugins.Registry[Law] = plugins.Registry(  # every law, as the schema checks its name
    GROUP, "control law", BUILTIN, last_only=True, docs="docs/architecture.md")
_compiled_laws: dict[str, object] = {}  # name → its compiled cfunc, compiled on first use


def law(name: str, doc: str = "", follows_wearer: bool = False,
        feeds_acceleration: bool | None = None,
        carries_stance: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated function as the law ``name`` (see the module's docstring); its
    code is the number of laws registered before it (the built-in ones first).
    ``follows_wearer``: the wearer leads the motion (the drives' friction is compensated along
    the measured speed, not the reference's). ``feeds_acceleration``: the law feeds the
    reference's acceleration forward (default: a law the wearer does not lead); the
    friction compensation then takes the reference's rotor inertia torque out of the load
    (:func:`exo_rt.control.laws.friction_acceleration`). ``carries_stance``: the law adds
    the stance-load feedforward (:func:`exo_rt.control.laws.stance_load`) — a controller
    file's ``stance_load`` is refused for a law that does not."""
    feeds = not follows_wearer if feeds_acceleration is None else feeds_acceleration

    def register(fn: Callable) -> Callable:
        NAMES.add(name, Law(name, len(list(NAMES)), fn, doc, follows_wearer, feeds,
                            carries_stance))
        return fn
    return register


def unregister(name: str) -> None:
    """Remove the law registered last (the others keep their codes)."""
    NAMES.unregister(name)
    _compiled_laws.pop(name, None)


def get(name: str) -> Law:
    """The law ``name`` (a KeyError naming the registered ones if there is none)."""
    return NAMES.get(name)


def code(name: str) -> int:
    """The law's code (the controller options' ``law``: which law a cycle model holds)."""
    return get(name).code


def compiled(fn: Callable):
    """``fn(m, d)`` — a function of the laws' signature — compiled as a numba ``cfunc`` (cached
    on disk where its source is in a file): what a cycle model's field holds."""
    cache = inspect.getsourcefile(fn) is not None  # (a law typed at a prompt: no cache)
    with warnings.catch_warnings():  # numba calls first-class function types experimental
        warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
        return cfunc(SIGNATURE, cache=cache)(fn)


def _not_compiled(m, d):
    """A stand-in of the laws' signature where a cycle calls nothing (the wearer's torque
    without assistance): NaN torques, a fault, were it ever called."""
    for j in range(d.tau.shape[0]):
        d.tau[j] = np.nan


@functools.cache
def stand_in():
    """The compiled stand-in: NaN torques (a fault, were it ever called)."""
    return compiled(_not_compiled)


def function(name: str):
    """The law ``name`` compiled (a KeyError naming the registered ones if there is none; an
    installed one loaded): what a cycle's model holds. Compiled once per process."""
    law_ = get(name)
    if name not in _compiled_laws:
        _compiled_laws[name] = compiled(law_.torque)
    return _compiled_laws[name]


def compile_all() -> None:
    """Every registered law compiled (into numba's cache: model-in-the-loop, the tools)."""
    for name in NAMES.entries():
        function(name)
