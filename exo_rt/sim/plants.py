"""Plant models by name: one registry from a top config's ``simulation: {plant: NAME}`` to the
class that simulates the leg behind the emulated drives (docs/architecture.md, "Recipes": a
plant model — its own module ``exo_rt/sim/NAME.py`` and one line here, the module in
:data:`BUILTIN`).

A plant model is a :class:`PlantModel` subclass registered under a name::

    @plants.model("my_plant", doc="one line: what it models")
    class MyPlant(plants.PlantModel):
        def __init__(self, robot, *, dt=1e-3, substeps=10): ...   # fills the arrays below
        kernel = staticmethod(my_step)   # nopython-compilable, allocates nothing
        def reset(self, q_joints, v_joints=None, *, equilibrium=True): ...
        def energy(self): ...
        @property
        def output_torques(self): ...

Its arrays are what every user of a plant reads, laid out the same for every model:

- ``state`` (rows, columns): the robot's joints first (as ``robot.joint_names``), then the
  model's own coordinates; rows :data:`ST_Q` (rad), :data:`ST_V` (rad/s), :data:`ST_LOCK` (1:
  held, e.g. an output clamped on a test bench) and :data:`ST_EXT` (external generalized force,
  N·m: the wearer's muscles) per coordinate, :data:`ST_I` (actual motor current, A) and
  :data:`ST_ON` (1: the drive's power stage is on) per transmission; rows from
  :data:`ST_COMMON` on are the model's own;
- ``transmissions`` (one row per transmission, in the order of ``robot.transmissions``):
  columns :data:`T_JOINT` (the joint's column in ``state``), :data:`T_ROTOR` (the column whose
  ST_Q/ST_V hold the rotor's angle and speed — what the drive's encoder reads; a model without
  rotor coordinates of its own keeps them there anyway) and :data:`T_K` (the multiplier k,
  rotor angle = k·joint angle through a rigid gear; −N); columns from :data:`T_COMMON` on are
  the model's own parameters;
- ``model``, ``data``: the packed rigid model and its workspace (the kernels of
  :mod:`exo_rt.dynamics.kernels`); ``cmd``: the motor current commands (A, per transmission);
  ``scratch``: the kernel's 2-D work space.

``kernel(model, data, transmissions, state, cmd, dt, substeps, scratch)`` advances the state by
dt (s) in ``substeps`` steps of the model's own integration under ``cmd``. :meth:`PlantModel.step`
calls it from Python (the simulated bus, replay); model-in-the-loop calls it from inside its own
compiled loop through :func:`compiled_step` (a numba ``cfunc`` of :data:`STEP_SIGNATURE`, cached
on disk like every kernel), so every model runs there without a Python call per period.

The built-in models are ``harmonic_drive`` (:mod:`exo_rt.sim.plant`) and ``world``
(:mod:`exo_rt.sim.world_plant`: the rigid bodies in MuJoCo, harmonic_drive's drives; on the
test stand, or on the floor with the top config's room keys: docs/world.md); a third party
registers its own under the entry-point group ``exo_rt.plants`` (name → the module defining
it), as control laws do under ``exo_rt.laws``. A model that takes the room keys says so
(``has_room``); :func:`create` refuses them for one that does not.
"""

from __future__ import annotations

import abc
import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numba import types
from numba.core.errors import NumbaExperimentalFeatureWarning

from exo_rt import plugins
from exo_rt.jit import cfunc
from exo_rt.schema import top

GROUP = "exo_rt.plants"
# modules whose import registers the built-in models (neither imports MuJoCo until a world is made)
BUILTIN = ("exo_rt.sim.plant", "exo_rt.sim.world_plant")
DEFAULT = top.DEFAULT_PLANT  # the top config's default plant model (one name)

# --- state rows every model keeps: per coordinate (state[row, i]) …
ST_Q, ST_V = 0, 1  # position (rad or m), velocity (rad/s or m/s)
ST_LOCK = 2  # 1.0: held by the user (an output on a test bench)
# … per transmission (state[row, t]) …
ST_I = 3  # actual motor current (A)
ST_ON = 4  # 1.0: the drive's power stage is on; 0.0: off (no current)
# … per coordinate again
ST_EXT = 5  # external generalized force (N·m or N), e.g. the wearer's muscles
ST_COMMON = 6  # a model's own rows start here

# --- columns of a transmission row every model has
T_JOINT = 0  # the output joint's column in the state
T_ROTOR = 1  # the column holding the rotor's angle and speed
T_K = 2  # multiplier k (rotor angle = k·joint angle when rigid; −N)
T_COMMON = 3  # a model's own columns start here

_VEC = types.Array(types.float64, 1, "C")
_MAT = types.Array(types.float64, 2, "C")
_MODEL = types.Array(types.float64, 2, "C", readonly=True)  # a packed model is read-only
STEP_SIGNATURE = types.void(_MODEL, _VEC, _MAT, _MAT, _VEC, types.float64, types.int64, _MAT)
STEP = types.FunctionType(STEP_SIGNATURE)  # the type model-in-the-loop takes a step as


class PlantModel(abc.ABC):
    """A simulated leg: what the simulated bus, the emulated drives, replay, model-in-the-loop
    and the trace use of it (the module's docstring gives the arrays' layout).

    A subclass's constructor takes ``(robot, *, dt=1e-3, substeps=…)`` — the robot's (rigid)
    mechanism with its transmissions, the control period (s) and the sub-steps per period — and
    sets :attr:`robot`, :attr:`n_joints`, :attr:`dt`, :attr:`substeps` and the arrays ``model``,
    ``data``, ``transmissions``, ``state``, ``cmd``, ``scratch``. It implements :attr:`kernel`,
    :meth:`reset`, :meth:`energy` and :attr:`output_torques`; the rest is the same for every
    model and reads the common rows.
    """

    name = ""  # the registered name (set by :func:`model`)
    has_room = False  # True: it takes the top config's room keys (:func:`create`'s ``room``)
    robot: object
    n_joints: int
    dt: float
    substeps: int
    model: np.ndarray
    data: np.ndarray
    transmissions: np.ndarray
    state: np.ndarray
    cmd: np.ndarray
    scratch: np.ndarray

    # --- what each model implements
    @staticmethod
    @abc.abstractmethod
    def kernel(model, data, transmissions, state, cmd, dt, substeps, scratch) -> None:
        """Advance ``state`` by dt (s) in ``substeps`` steps under the current commands ``cmd``
        (A); nopython-compilable (numba), allocating nothing — set it with
        ``kernel = staticmethod(fn)``."""

    @abc.abstractmethod
    def reset(self, q_joints, v_joints=None, *, equilibrium: bool = True) -> None:
        """Joints at q (rad) and q̇ (rad/s, default 0), the rest of the state as the model
        starts (power stages on, locks and external forces zero); with ``equilibrium`` a leg
        at rest starts in static equilibrium where the model can."""

    @abc.abstractmethod
    def energy(self) -> float:
        """The mechanical energy the model stores (J): kinetic, gravity, elastic."""

    @property
    @abc.abstractmethod
    def output_torques(self) -> np.ndarray:
        """The torque each transmission passes to its joint (N·m), one per transmission — what
        a load cell on a clamped output measures."""

    # --- the same for every model
    @property
    def args(self) -> tuple:
        """(model, data, transmissions, state, cmd, dt, substeps, scratch): :attr:`kernel`'s
        arguments for one period."""
        return (self.model, self.data, self.transmissions, self.state, self.cmd, self.dt,
                self.substeps, self.scratch)

    def step(self, current_cmd=None, duration: float | None = None) -> None:
        """Advance one period dt (or ``duration`` s, in sub-steps no longer than dt/substeps)
        with motor current commands (A, one per transmission; None: keep the last ones)."""
        if current_cmd is not None:
            self.cmd[:] = current_cmd
        if duration is None:
            self.kernel(self.model, self.data, self.transmissions, self.state, self.cmd,
                        self.dt, self.substeps, self.scratch)
        else:
            m = max(1, math.ceil(duration * self.substeps / self.dt - 1e-9))
            self.kernel(self.model, self.data, self.transmissions, self.state, self.cmd,
                        duration, m, self.scratch)

    @cached_property
    def _rotors(self) -> np.ndarray:
        return self.transmissions[:, T_ROTOR].astype(np.int64)

    @property
    def q(self) -> np.ndarray:
        """Plant coordinates (rad): the joints (as the robot's q), then the model's own."""
        return self.state[ST_Q]

    @property
    def v(self) -> np.ndarray:
        """Plant velocities (rad/s), ordered as :attr:`q`."""
        return self.state[ST_V]

    @property
    def joint_positions(self) -> np.ndarray:
        """Joint (output) angles (rad), ordered as the robot's ``joint_names``."""
        return self.state[ST_Q, : self.n_joints]

    @property
    def joint_velocities(self) -> np.ndarray:
        """Joint (output) velocities (rad/s)."""
        return self.state[ST_V, : self.n_joints]

    @property
    def motor_positions(self) -> np.ndarray:
        """Rotor angles (rad), one per transmission (copy)."""
        return self.state[ST_Q, self._rotors]

    @property
    def motor_velocities(self) -> np.ndarray:
        """Rotor velocities (rad/s), one per transmission (copy)."""
        return self.state[ST_V, self._rotors]

    @property
    def currents(self) -> np.ndarray:
        """Actual motor currents (A), one per transmission."""
        return self.state[ST_I, : len(self.transmissions)]

    motor_currents = currents

    def apply(self, joint_torques) -> None:
        """External torques on the joints (N·m; e.g. the wearer's), held until changed."""
        self.state[ST_EXT, : self.n_joints] = joint_torques

    def power(self, on) -> None:
        """Switch the drives' power stages on or off (off: no current, the motors coast); one
        flag for every drive or one per transmission."""
        self.state[ST_ON, : len(self.transmissions)] = np.where(on, 1.0, 0.0)

    def lock(self, coordinate: str, locked: bool = True) -> None:
        """Hold a joint (e.g. an output on a test bench) where it is, at rest."""
        i = list(self.robot.joint_names).index(coordinate)
        self.state[ST_LOCK, i] = 1.0 if locked else 0.0
        if locked:
            self.state[ST_V, i] = 0.0


@dataclass(frozen=True)
class Entry:
    """A registered plant model: its name, its class and one line on what it models."""

    name: str
    cls: type[PlantModel]
    doc: str = ""


NAMES: plugins.Registry[Entry] = plugins.Registry(  # every model, as the schema checks its name
    GROUP, "plant model", BUILTIN, docs="docs/architecture.md")
_compiled: dict[type, object] = {}  # class → its compiled step (numba cfunc), built on first use


def model(name: str, doc: str = "") -> Callable[[type], type]:
    """Register the decorated :class:`PlantModel` subclass as the plant model ``name``."""
    def register(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, PlantModel)):
            raise TypeError(f"plant model '{name}' must be a subclass of PlantModel")
        NAMES.add(name, Entry(name, cls, doc or (inspect.getdoc(cls) or "").split("\n")[0]))
        cls.name = name
        return cls
    return register


def unregister(name: str) -> None:
    """Remove the plant model ``name``."""
    entry = NAMES.unregister(name)
    _compiled.pop(entry.cls, None)


def get(name: str) -> type[PlantModel]:
    """The class of the plant model ``name`` (a KeyError naming the registered ones if there
    is none)."""
    return NAMES.get(name).cls


def registered() -> dict[str, Entry]:
    """The registered models by name (built-in ones loaded)."""
    return NAMES.entries()


def create(name: str, robot, *, room: dict | None = None, **kw) -> PlantModel:
    """A plant of the model ``name`` for ``robot`` (keywords: ``dt``, ``substeps``, the
    model's own). ``room``: the top config's ``simulation:`` keys that place the exoskeleton
    (:meth:`exo_rt.schema.top.SimulationConfig.plant_options`; ``world`` takes them) — a
    model without a room refuses any (ValueError), rather than run on a test stand that the
    config did not ask for."""
    cls = get(name)
    if room:
        if not cls.has_room:
            raise ValueError(f"the plant model '{name}' has no room: simulation keys "
                             f"{', '.join(sorted(room))} need `plant: world`")
        kw["room"] = room
    return cls(robot, **kw)


def compiled_step(plant: PlantModel | type[PlantModel] | str):
    """The model's :attr:`~PlantModel.kernel` compiled to :data:`STEP_SIGNATURE` (a numba
    ``cfunc``, cached on disk when its source is in a file): what model-in-the-loop calls
    inside its own compiled loop, for any model."""
    cls = get(plant) if isinstance(plant, str) else (
        plant if isinstance(plant, type) else type(plant))
    if cls not in _compiled:
        fn = inspect.getattr_static(cls, "kernel")
        fn = getattr(fn, "__func__", fn)  # the staticmethod's function
        fn = getattr(fn, "py_func", fn)  # an njit kernel's Python function
        cache = inspect.getsourcefile(fn) is not None
        with warnings.catch_warnings():  # numba calls first-class function types experimental
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            _compiled[cls] = cfunc(STEP_SIGNATURE, cache=cache)(fn)
    return _compiled[cls]
