"""Numba warm-up: every njit kernel the run, the simulator and the bench use, compiled ahead.

Why. numba compiles a kernel on its first call — for the controller's cycle and the
simulated leg about 15 s on a 2-core machine, in silence, before READY. The on-disk cache
(``exo_rt/__init__.py``) makes later starts load them in well under a second, but a fresh
install or an edit of a kernel module empties it. So:

- ``exo-rt warmup`` compiles everything listed here into the cache (``.ci/run`` runs it after
  the install), in this process and worker processes at once (one per CPU), printing one
  line per entry that compiled;
- :func:`ensure` (the controller calls it before opening its buses) does the same for the
  run's groups when the cache is cold — with progress on stderr instead of silence — and
  costs one file lookup when it is warm;
- :func:`report_compiles` prints any kernel the registry missed when it compiles later (in
  the middle of a run, where it would stall the cycle).

The registry. An entry is a callable that runs one kernel (or a few small ones) once with
arguments of *exactly* the types the runtime passes: numba compiles one specialisation per
distinct argument types — int vs float scalars, C- vs A-contiguous, read-only vs writable
arrays — so an entry with other types would compile something the runtime never loads. Take
arrays from :class:`Context` (built with the runtime's own constructors) rather than
inventing them. Adding a kernel is one line::

    add("control.my_filter", "controller", lambda c: my_filter(c.z(), c.z(), c.dt))

``after`` names the entries whose kernels this one calls inside njit: they are compiled first
(perhaps by another worker) so that this one links their cached code instead of compiling it
a second time. That is how the plant step, one long chain of calls, spreads over the workers.

Groups: ``controller`` (the cycle: dynamics, laws, safety, estimate, reference, and the
controller's own warm-up), ``io`` (the frame batches of socketcan and udp_multicast buses: a
real bus, or the real-time simulation's; the lockstep simulated bus does not use them),
``plant`` (the built-in plant model's step), ``bench`` (the HIL bench loop), ``sim`` (the
plant's read-outs, its step compiled for model-in-the-loop, the loop), ``dynamics`` (the
Dynamics facade, closed chains, the integrator).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from exo_rt import compile_workers

GROUPS = ("controller", "io", "plant", "bench", "sim", "dynamics")
RUN_GROUPS = ("controller", "plant")  # what `exo-rt run` on the simulated leg needs
REAL_BUS_GROUPS = ("controller", "io")  # … and on a real bus (or the simulation's own process)


@dataclass(frozen=True)
class Entry:
    """One warm-up step: ``run(context)`` compiles and runs its kernels once. ``cost``: a
    guess of its compile time (s), to start long chains first until a run has measured it."""

    name: str
    group: str
    run: Callable[[Context], object]
    after: tuple[str, ...] = ()
    cost: float = 0.5
    per_law: bool = False  # compiles the configured control law: warm per law, not once
    per_buses: bool = False  # compiled for the configured number of buses: warm per count


ENTRIES: dict[str, Entry] = {}


def add(name: str, group: str, run: Callable[[Context], object],
        after: Iterable[str] = (), cost: float = 0.5, per_law: bool = False,
        per_buses: bool = False) -> None:
    """Register ``run`` under ``name`` (unique) in ``group`` (one of :data:`GROUPS`);
    ``per_law``: it compiles the context's control law, so another law makes it cold;
    ``per_buses``: likewise for the number of buses (the one-call cycle's type has one part
    per bus)."""
    if group not in GROUPS:
        raise ValueError(f"unknown warm-up group '{group}' (one of {', '.join(GROUPS)})")
    if name in ENTRIES:
        raise ValueError(f"warm-up entry '{name}' is registered twice")
    ENTRIES[name] = Entry(name, group, run, tuple(after), cost, per_law, per_buses)


def default_config() -> Path:
    """configs/exo_leg.yaml of the working directory, else of the source tree (as the CLI)."""
    from exo_rt.resources import default_config as shipped  # a wheel: package data

    return shipped()


class Context:
    """Representative arguments, made by the runtime's own constructors from a top config.

    Lazy: an entry pays only for what it uses (the plant, say, runs kernels when built).
    """

    def __init__(self, top=None, *, config: str | Path | None = None,
                 controller: str | None = None) -> None:
        self._top = top
        self._config = config
        self._controller = controller

    @cached_property
    def top(self):
        if self._top is not None:
            return self._top
        from exo_rt.runtime.config import load_top

        return load_top(self._config or default_config(), controller=self._controller)

    def spec(self) -> dict:
        """What a worker process needs to build the same context."""
        return {"config": str(Path(self.top.path).resolve()),
                "controller": str(self.top.controller.source)}

    @property
    def variant(self) -> str:
        """What changes which kernels the entries compile: tree or closed-chain dynamics."""
        return "closed" if self.robot.closure is not None else "tree"

    @cached_property
    def robot(self):
        return self.top.robot

    @cached_property
    def cfg(self):
        return self.top.controller

    @property
    def n(self) -> int:
        return self.robot.nq

    @property
    def dt(self) -> float:
        return 1.0 / self.top.rate_hz

    def z(self, *shape: int) -> np.ndarray:
        """Zeros, float64, C-contiguous, writable; shape (n,) unless given."""
        return np.zeros(shape or (self.n,))

    def zi(self, k: int | None = None) -> np.ndarray:
        """Zeros, int64, shape (n,) unless given (drive flags, streaks)."""
        return np.zeros(self.n if k is None else k, dtype=np.int64)

    @cached_property
    def dyn(self) -> tuple[np.ndarray, np.ndarray]:
        """(packed, workspace) of the robot, as the kernels take them (read-only packed
        arrays); not a Dynamics facade, whose construction compiles its own entry points."""
        return _packed(self.robot)

    @cached_property
    def dyn_exo(self) -> tuple[np.ndarray, np.ndarray]:
        """(packed, workspace) of the exoskeleton alone (the transparent law)."""
        return _packed(self.top.exo)

    @cached_property
    def transmissions(self) -> np.ndarray:
        from exo_rt.config import transmission_rows

        return transmission_rows(self.robot, self.cfg)

    @cached_property
    def limits(self) -> np.ndarray:
        from exo_rt.runtime import safety

        s = self.top.safety
        return safety.limits_array(self.robot, s.joint_margin, s.tracking_error,
                                   self.cfg.current_limit)

    @cached_property
    def sopts(self) -> np.ndarray:
        from exo_rt.runtime import safety

        return safety.options(self.top.safety)

    @cached_property
    def coeffs(self) -> np.ndarray:
        from exo_rt.control import trajectory

        ref = self.cfg.reference
        kinds = [ref.gait_joints.get(nm, "hip" if nm.endswith("hip") else "knee")
                 for nm in self.robot.joint_names]
        return trajectory.gait_coefficients(list(self.robot.joint_names), kinds, ref.amplitude)

    @cached_property
    def plant(self):
        """The simulated leg of the built-in plant model, whose kernels the ``plant`` entries
        compile (building it runs the pre-twist kernels: entry ``plant.reset``)."""
        from exo_rt.sim.plant import HarmonicDrivePlant

        return HarmonicDrivePlant(self.robot, dt=self.dt)

    def plant_args(self) -> tuple:
        """(model, data, transmissions, state, cmd, q, v, h, scratch, x0): the plant step's
        arrays and views as the sub-step passes them (q, v rows of state; h the sub-step, x0
        the scratch's vector rows)."""
        from exo_rt.sim.plants import ST_Q, ST_V

        p = self.plant
        state = p.state
        return (p.model, p.data, p.transmissions, state, p.cmd, state[ST_Q], state[ST_V],
                p.dt / p.substeps, p.scratch, 2 * state.shape[1])


def _packed(mech) -> tuple[np.ndarray, np.ndarray]:
    from exo_rt.dynamics import kernels

    return kernels.model_and_data(mech)


# ---------------------------------------------------------------- the registry
def _law_torque(c: Context) -> None:
    from exo_rt.control import laws, registry

    z, n = c.z, c.n
    model = registry.law_model(c.cfg.options(), c.cfg.gains, c.dyn[0], c.dyn_exo[0], c.dt)
    data = registry.law_data(c.dyn[1], c.dyn_exo[1], laws.law_state(n), laws.law_scratch(n),
                             z(), z(), z(), z(), z(), z(), z())
    laws.law_torque(registry.table(c.cfg.law), model, data)


def _law_table(c: Context) -> None:
    """Every registered law compiled (model-in-the-loop, the tools and the tests take the
    whole table; a run compiles its own law alone)."""
    from exo_rt.control import registry

    registry.table()


def _controller(c: Context) -> None:
    """The controller's own warm-up — whatever its cycle kernels are — on the lockstep
    simulated bus without the board: exactly the runtime's types, by construction."""
    from exo_rt.runtime import cycle_call
    from exo_rt.runtime.controller import Controller

    ctl = Controller(c.top, "sim", board=None)
    try:
        ctl._warm_up()
        cycle_call.warm_up(ctl.cycle.model, ctl.cycle.data, [])  # (the buses Python's)
    finally:
        close = getattr(ctl, "close_buses", None)
        if close is not None:
            close()
        else:
            for d in ctl.drives:
                d.bus.shutdown()


def _cycle_call(c: Context) -> None:
    """The real-time cycle in one compiled call (exo_rt.runtime.cycle_call), for the
    controller's own cycle kernel arguments."""
    from exo_rt.runtime import cycle_call
    from exo_rt.runtime.controller import Controller

    ctl = Controller(c.top, "sim", board=None)
    try:
        cycle_call.warm_up(ctl.cycle.model, ctl.cycle.data, [d.n for d in ctl.drives])
    finally:
        ctl.close_buses()


def _board_decode(c: Context) -> None:
    """The board link's receive path, as BoardLink.poll calls it (n bytes read)."""
    from firmware_bridge import fastdecode as fd
    from firmware_bridge import protocol as p
    from firmware_bridge.link import FIONREAD, READ_SIZE

    st, partial, other, raw = fd.new_state()
    frame = np.frombuffer(p.encode(p.Status(False, True, False, 24000), 0), dtype=np.uint8)
    data = np.zeros(READ_SIZE, dtype=np.uint8)
    data[: len(frame)] = frame
    fd.poll(-1, FIONREAD, np.array([len(frame)], np.int32), data, st, partial, other, raw,
            200.0)


def _pdo_tables(c: Context) -> None:
    """A CiA 402 bus's PDO tables (every bus, the simulated one too)."""
    from exo_rt.bus import pdo_cycle

    pdo_cycle.warm_up()


def _frame_batches(c: Context) -> None:
    """The cycle's frame I/O in batches on a real bus (socketcan, udp_multicast)."""
    from exo_rt.bus import fastio

    fastio.warm_up()


def _cycle_io(c: Context) -> None:
    """A CiA 402 bus's whole cycle I/O in one compiled call each way (socketcan, udp)."""
    from exo_rt.bus import pdo_cycle

    pdo_cycle.warm_up_io()


def _facade(c: Context) -> None:
    """The Dynamics facade: building one prepares its entry points (compiled, or loaded)."""
    from exo_rt.dynamics import Dynamics

    Dynamics(c.robot)


def _plant_parts(c: Context) -> None:
    from exo_rt.sim import plant as p

    _model, _data, transmissions, state, cmd, q, v, h, scratch, x0 = c.plant_args()
    p._begin(transmissions, state, cmd, q, v, scratch)
    p._current_slopes(transmissions, state, cmd, v, scratch[x0 + p.X_A1], h, scratch)
    p._first_reversal(transmissions, state, scratch[x0 + p.X_V0], v)
    p._end_substep(transmissions, state, q, v, scratch[x0 + p.X_TW])
    p._restore(transmissions, state, q, v, scratch)


def _plant(fn_name: str):
    """Run a plant sub-step kernel ``fn_name`` as :func:`exo_rt.sim.plant._substep` calls it."""
    def run(c: Context) -> None:
        from exo_rt.sim import plant as p

        model, data, transmissions, state, cmd, q, v, h, scratch, x0 = c.plant_args()
        rigid = (model, data, transmissions, state)
        args = {"_accelerations": (*rigid, q, v, scratch, scratch[x0 + p.X_A1]),
                "_stick_or_slip": (*rigid, q, v, scratch, scratch[x0 + p.X_A1]),
                "_rk4": (*rigid, q, v, h, scratch),
                "_forces": (transmissions, state, q, v, scratch[x0 + p.X_T],
                            scratch[x0 + p.X_F])}[fn_name]
        getattr(p, fn_name)(*args)
        c.plant.reset(np.zeros(c.robot.nq))

    return run


def _plant_step(c: Context) -> None:
    """As :meth:`exo_rt.sim.simbus.SimWorld.warm_up`: one step at zero current."""
    c.plant.step(np.zeros_like(c.plant.cmd))
    c.plant.reset(np.zeros(c.robot.nq))


def _plant_readouts(c: Context) -> None:
    _ = c.plant.flexspline_torques, c.plant.energy()


def _plant_compiled(c: Context) -> None:
    """The built-in model's step compiled for model-in-the-loop (a cfunc, cached)."""
    from exo_rt.sim import plants

    plants.compiled_step(c.plant)


def _cholesky_a(c: Context) -> None:
    """cholesky_solve on a sub-block (A-contiguous), as the plant's free-coordinate solve."""
    from exo_rt.dynamics import kernels

    m = np.eye(c.n + 1)[: c.n, : c.n]
    kernels.cholesky_solve(m, c.z(), c.z())


def _hil_loop(c: Context) -> None:
    from exo_rt.hil.bench import loop_acceleration

    z = c.z
    loop_acceleration(z(), z(), z(), z(), z(), z(), z(), z(), c.dt, z())


def _hil_bench(c: Context) -> None:
    """The HIL bench as ``exo-rt bench-test`` builds it on the lockstep simulated bus: its own
    warm-up runs every kernel its procedures' cycles call (the Dynamics facade's entry points
    among them, for the bench's inertias and torques); and the simulated fixture's torque
    sensor (the plant's flexspline torques, read as the stiffness procedure reads them)."""
    from exo_rt.hil.bench import Bench
    from exo_rt.runtime.controller import Controller

    ctl = Controller(c.top, "sim", board=None)
    try:
        Bench(c.top, ctl.drives, world=ctl.world)
        _ = ctl.world.plant.flexspline_torques
    finally:
        ctl.close_buses()


def _mil(c: Context) -> None:
    from exo_rt.sim.mil import run_mil

    run_mil(c.robot, c.cfg, cycles=1e-3 / c.cfg.reference.period, dt=c.dt)


def _facade_rest(c: Context) -> None:
    """The Dynamics methods the controller does not call (tests, tools, exo-rt bench)."""
    from exo_rt.dynamics import Dynamics

    z, d = c.z, Dynamics(c.robot)
    d.forward_dynamics(z(), z(), z(), out=z())
    d.energy(z(), z(), out=z(2))
    d.frame_positions(z())
    d.frame_rotations(z())


def _closed_chain(c: Context) -> None:
    """A robot with a loop closure: the reduced (closed-chain) dynamics kernels."""
    from exo_rt.dynamics import Dynamics
    from exo_rt.model import load_mechanism
    from exo_rt.resources import config

    mech = load_mechanism(config("robots", "fourbar_knee.yaml"))
    d = Dynamics(mech)
    q = np.zeros(mech.nq)
    d.mass_matrix(q), d.bias_forces(q, q), d.gravity(q), d.inverse_dynamics(q, q, q)
    d.forward_dynamics(q, q, q), d.energy(q, q), d.frame_positions(q)


def _integrate(c: Context) -> None:
    from exo_rt.dynamics.integrate import rk4_scratch, rk4_step, simulate_energy

    pk, ws = c.dyn
    scratch = rk4_scratch(c.n)
    rk4_step(pk, ws, c.z(), c.z(), c.z(), 1e-3, scratch)
    simulate_energy(pk, ws, c.z(), c.z(), c.z(), 1e-3, 2, 1, scratch, c.z(3, 2))


def _register() -> None:
    from exo_rt.control import estimate, trajectory
    from exo_rt.control import laws as lw
    from exo_rt.dynamics import kernels as k
    from exo_rt.runtime import loop
    from exo_rt.runtime import safety as sf

    dyn = ("dyn.gravity", "dyn.mass_matrix", "dyn.inverse_dynamics", "dyn.bias_forces")
    # controller: the dynamics first (every law and the plant inline them)
    add("dyn.gravity", "controller", lambda c: k.gravity_forces(*c.dyn, c.z(), c.z()),
        cost=2.0)
    add("dyn.mass_matrix", "controller",
        lambda c: k.mass_matrix(*c.dyn, c.z(), c.z(c.n, c.n)), after=dyn[:1])
    add("dyn.inverse_dynamics", "controller",
        lambda c: k.inverse_dynamics(*c.dyn, c.z(), c.z(), c.z(), c.z()), after=dyn[:1])
    add("dyn.bias_forces", "controller",
        lambda c: k.bias_forces(*c.dyn, c.z(), c.z(), c.z()), after=dyn[:1])
    add("law.torque", "controller", _law_torque, after=dyn, cost=1.5, per_law=True)
    add("law.table", "sim", _law_table, after=dyn, cost=2.5)
    add("law.torque_to_current", "controller",
        lambda c: lw.torque_to_current(c.z(), c.z(), c.z(), c.transmissions, True, c.z()),
        after=("dyn.mass_matrix",))  # transmission rows: the rotors' inertia
    add("safety.check", "controller",  # as the cycle kernel and the HIL bench call it
        lambda c: sf.check(c.limits, c.sopts, c.z(), c.z(), c.z(), c.z(), c.z(), c.zi(),
                           np.zeros((sf.STREAKS, c.n), np.int64), 0, False, c.z(), c.zi(2)))
    add("loop.count_block", "controller",  # the scheduler's timing histograms
        lambda c: loop.TimingStats().warm_up())
    add("safety.safe_action", "controller",
        lambda c: sf.safe_action(0, c.z(), c.z(), c.z(), 1.0, 1.0, 1.0, c.z()))
    add("estimate.velocity_update", "controller",
        lambda c: estimate.velocity_update(c.z(), c.z(), c.z(), c.dt, 0.5))
    add("trajectory.gait", "controller",
        lambda c: trajectory.gait(0.0, 1.0, c.coeffs, c.z(), c.z(), c.z()))
    add("trajectory.minimum_jerk", "controller",
        lambda c: trajectory.minimum_jerk(0.0, 1.0, c.z(), c.z(), c.z(), c.z(), c.z()))
    add("trajectory.phase_events", "controller",
        lambda c: (trajectory.phase_on_heel_strike(np.array([0.0, 1.0, 0.0]), 1.0, 0.5, 2.0,
                                                   0.5),
                   trajectory.phase_from_events(np.array([0.0, 1.0, 0.0]), 0.0)))
    add("board.decode", "controller", _board_decode, cost=1.5)
    add("bus.pdo", "controller", _pdo_tables, cost=1.0)
    add("bus.fastio", "io", _frame_batches, cost=4.5)
    add("bus.pdo_io", "io", _cycle_io, after=("bus.fastio", "bus.pdo"), cost=2.0)
    add("runtime.cycle_call", "io", _cycle_call,
        after=("controller.warm_up", "bus.pdo_io", "board.decode"), cost=3.0, per_buses=True)
    add("controller.warm_up", "controller", _controller,
        after=(*dyn, "law.torque", "law.torque_to_current", "safety.check",
               "safety.safe_action", "estimate.velocity_update", "trajectory.gait",
               "trajectory.minimum_jerk", "trajectory.phase_events", "plant.reset",
               "bus.pdo"),
        cost=6.0)
    # plant: the sub-step's call tree, leaves first, so that workers share it out
    add("plant.reset", "plant", lambda c: c.plant, after=dyn[:1])
    add("plant.cholesky", "plant", _cholesky_a)
    add("plant.forces", "plant", _plant("_forces"), after=("plant.reset",))
    add("plant.parts", "plant", _plant_parts, after=("plant.reset",), cost=1.5)
    add("plant.accelerations", "plant", _plant("_accelerations"),
        after=("dyn.mass_matrix", "dyn.bias_forces", "plant.cholesky", "plant.forces"),
        cost=1.0)
    add("plant.stick_or_slip", "plant", _plant("_stick_or_slip"), after=("plant.accelerations",),
        cost=1.0)
    add("plant.rk4", "plant", _plant("_rk4"), after=("plant.accelerations",), cost=1.0)
    add("plant.step", "plant", _plant_step,  # the sub-step compiles into the step (inlined)
        after=("plant.parts", "plant.stick_or_slip", "plant.rk4"), cost=1.5)
    # the HIL bench, the simulator's read-outs and model-in-the-loop
    add("hil.loop_acceleration", "bench", _hil_loop)
    add("hil.bench", "bench", _hil_bench, after=("controller.warm_up", "plant.step",
                                                 "hil.loop_acceleration"), cost=5.0)
    add("plant.readouts", "sim", _plant_readouts, after=("plant.reset",), cost=1.5)
    add("plant.compiled_step", "sim", _plant_compiled, after=("plant.step",), cost=1.0)
    add("mil.loop", "sim", _mil, after=("law.table", "law.torque_to_current",
                                        "plant.compiled_step", "trajectory.gait",
                                        "estimate.velocity_update"), cost=8.0)
    # the Dynamics facade (tools, the HIL bench and model-in-the-loop; the run takes the
    # packed model and workspace alone) and the rest of the dynamics
    add("dyn.facade", "dynamics", _facade, cost=5.0)
    add("dyn.facade_rest", "dynamics", _facade_rest, after=(*dyn, "dyn.facade"))
    add("dyn.closed_chain", "dynamics", _closed_chain, after=(*dyn, "dyn.facade"), cost=5.0)
    add("dyn.integrate", "dynamics", _integrate, after=("dyn.facade_rest",))


_register()


# ---------------------------------------------------------------- compile events
class _Compiles:
    """numba's compile events, per thread: which kernels an entry compiled, and the ones
    compiled outside any entry (reported, they were missed by the registry)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.report = None  # callable(line) for compiles outside an entry
        from numba.core import event

        outer = self

        class Listener(event.Listener):
            def on_start(self, ev) -> None:
                outer.on_start(ev)

            def on_end(self, ev) -> None:
                outer.on_end(ev)

        event.register("numba:compile", Listener())

    def _stack(self) -> list:
        if not hasattr(self.local, "stack"):
            self.local.stack, self.local.names = [], None
        return self.local.stack

    def on_start(self, ev) -> None:
        self._stack().append(time.perf_counter())

    def on_end(self, ev) -> None:
        stack = self._stack()
        t0 = stack.pop() if stack else time.perf_counter()
        d = ev.data["dispatcher"]
        name = f"{d.py_func.__module__}.{d.py_func.__qualname__}"
        if self.local.names is not None:
            self.local.names.append(name)
        elif not stack and self.report is not None:
            sig = ", ".join(str(a) for a in ev.data["args"])
            sig = sig if len(sig) <= 80 else sig[:77] + "..."
            self.report(f"numba: compiled {name}({sig}) in {time.perf_counter() - t0:.2f} s")

    def run(self, entry: Entry, ctx: Context) -> dict:
        """Run one entry in this thread: seconds, the kernels it compiled, error."""
        self._stack()
        self.local.names = names = []
        t0 = time.perf_counter()
        error = None
        try:
            entry.run(ctx)
        except Exception as exc:  # a broken entry must not stop the others
            last = traceback.extract_tb(exc.__traceback__)[-1]
            msg = str(exc).strip().splitlines()
            error = (f"{type(exc).__name__}: {msg[0] if msg else ''} "
                     f"({Path(last.filename).name}:{last.lineno})")[:300]
        finally:
            self.local.names = None
        return {"name": entry.name, "s": time.perf_counter() - t0, "compiled": names,
                "error": error}


_COMPILES: _Compiles | None = None


def _compiles() -> _Compiles:
    global _COMPILES
    if _COMPILES is None:
        _COMPILES = _Compiles()
    return _COMPILES


def report_compiles(stream=None, note: str = "") -> None:
    """From now on, print every kernel compiled outside a warm-up entry (with its time and
    ``note``) to ``stream`` (stderr): on a warm cache nothing compiles, nothing is printed."""
    out = stream or sys.stderr
    _compiles().report = lambda line: print(line + note, file=out, flush=True)


# ---------------------------------------------------------------- workers and scheduling
def select(groups: Iterable[str] = GROUPS, names: Iterable[str] = ()) -> list[str]:
    """Entry names of ``groups`` plus ``names``, in registry order."""
    groups, names = set(groups), set(names)
    unknown = names - set(ENTRIES)
    if unknown:
        raise KeyError(f"no warm-up entry {', '.join(sorted(unknown))}")
    return [e.name for e in ENTRIES.values() if e.group in groups or e.name in names]


def _times_file() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "exo-rt" / "warmup-times.json"


def _measured() -> dict[str, float]:
    """Each entry's compile time (s) the last time it compiled on this machine."""
    try:
        return {k: float(v) for k, v in json.loads(_times_file().read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _remember(results: list[dict]) -> None:
    times = _measured()
    times.update({r["name"]: round(r["s"], 3) for r in results
                  if r["compiled"] and not r["error"]})
    try:
        path = _times_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps(times, indent=0, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass


def _costs(todo: list[str]) -> dict[str, float]:
    """Each entry's compile time (s): measured on this machine, else the entry's guess."""
    cost = {n: ENTRIES[n].cost for n in todo}
    cost.update({n: t for n, t in _measured().items() if n in cost})
    return cost


def _critical_paths(todo: list[str], cost: dict[str, float]) -> dict[str, float]:
    """Seconds of the longest chain from each entry through its dependents."""
    below: dict[str, list[str]] = {n: [] for n in todo}
    for n in todo:
        for a in ENTRIES[n].after:
            if a in below:
                below[a].append(n)
    memo: dict[str, float] = {}

    def depth(n: str) -> float:
        if n not in memo:
            memo[n] = cost[n] + max((depth(m) for m in below[n]), default=0.0)
        return memo[n]

    return {n: depth(n) for n in todo}


def _makespan(todo: list[str], cost: dict[str, float], prio: dict[str, float],
              jobs: int) -> float:
    """When the last entry ends, were the processes to take the ready entry of highest
    ``prio`` whenever one is free (as :func:`compile_entries` does), at the costs given."""
    free = [0.0] * jobs  # when each process is next free
    end: dict[str, float] = {}  # entries taken: when each ends
    left = set(todo)
    while left:
        w = min(range(jobs), key=free.__getitem__)
        now = free[w]
        ready = [n for n in left
                 if all(end.get(a, 0.0 if a not in left else np.inf) <= now
                        for a in ENTRIES[n].after)]
        if not ready:  # it waits for the next entry to end
            free[w] = min(e for e in end.values() if e > now)
            continue
        n = max(ready, key=lambda m: (prio[m], -todo.index(m)))  # as compile_entries
        end[n] = free[w] = now + cost[n]
        left.discard(n)
    return max(end.values(), default=0.0)


def _priorities(todo: list[str], jobs: int = 2) -> dict[str, float]:
    """The order in which ready entries are taken: the critical path first, its ties and
    near-ties settled by planning — of the critical-path order and 64 slight perturbations
    of it (fixed seeds), the one whose schedule at the measured costs ends first."""
    cost = _costs(todo)
    best = _critical_paths(todo, cost)
    if jobs < 2 or len(todo) < 3:
        return best
    rng = np.random.default_rng(0)
    span = _makespan(todo, cost, best, jobs)
    for _ in range(64):
        noisy = {n: c * (1.0 + rng.uniform(-0.3, 0.3)) for n, c in cost.items()}
        prio = _critical_paths(todo, noisy)
        s = _makespan(todo, cost, prio, jobs)
        if s < span - 1e-9:
            best, span = prio, s
    return best


def _serve(inp, out, ctx: Context) -> None:
    comp = _compiles()
    for line in inp:
        name = line.strip()
        if name:
            out.write(json.dumps(comp.run(ENTRIES[name], ctx)) + "\n")


def serve_worker() -> None:
    """Entry point of a worker process (:class:`exo_rt.compile_workers.Worker`): numba's
    registries loaded and the config loader imported while the parent is still starting,
    then its context from the first stdin line, then entries until stdin closes."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed goes to stderr, never into the replies
    from numba.core.registry import cpu_target

    from exo_rt.runtime import config  # noqa: F401  (what the context loads)

    cpu_target.typing_context.refresh()  # numba's registries: ~0.1 s of the first compile
    cpu_target.target_context.refresh()
    line = sys.stdin.readline()
    if line:
        spec = json.loads(line)
        _serve(sys.stdin, out, Context(config=spec["config"], controller=spec["controller"]))


def compile_entries(names: list[str], ctx: Context, *, jobs: int | None = None,
                    progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Run the entries ``names``: in this process and ``jobs − 1`` worker processes at once,
    each taking the most critical entry whose ``after`` entries are done. Every worker compiles
    into the same on-disk cache; this process then loads what the others compiled.

    Returns one result per entry (``name``, ``s``, ``compiled``, ``error``, ``worker``).
    """
    global _ACTIVE
    jobs = max(1, min(jobs or compile_workers.default_jobs(), len(names)))
    prio = _priorities(names, jobs)
    todo = set(names)
    done: set[str] = set()
    running: set[str] = set()
    results: list[dict] = []
    cond = threading.Condition()
    comp = _compiles()

    def take() -> str | None:
        with cond:
            while True:
                ready = [n for n in todo - running
                         if all(a in done or a not in todo for a in ENTRIES[n].after)]
                if ready:
                    n = max(ready, key=lambda m: (prio[m], -names.index(m)))
                    running.add(n)
                    return n
                if not todo - running:
                    return None
                cond.wait()

    def finish(res: dict) -> None:
        with cond:
            running.discard(res["name"])
            todo.discard(res["name"])
            done.add(res["name"])
            results.append(res)
            cond.notify_all()
        if progress is not None:
            progress(res)

    def local() -> None:
        while (n := take()) is not None:
            finish(dict(comp.run(ENTRIES[n], ctx), worker=0))

    def remote(w: int, worker: compile_workers.Worker) -> None:
        try:
            while (n := take()) is not None:
                try:
                    res = worker.run(n, spec)
                except (RuntimeError, ValueError) as exc:
                    finish({"name": n, "s": 0.0, "compiled": [], "error": str(exc),
                            "worker": w})
                    return
                finish(dict(res, worker=w))
        finally:
            worker.close()

    _ACTIVE = True  # an entry that builds a Controller must not start a warm-up of its own
    try:
        spec = ctx.spec() if jobs > 1 else {}
        workers = compile_workers.workers(jobs - 1)
        compile_workers.discard_spares()  # started ahead for more entries than there are
        threads = [threading.Thread(target=remote, args=(w, worker), daemon=True)
                   for w, worker in enumerate(workers, 1)]
        for t in threads:
            t.start()
        local()
        for t in threads:
            t.join()
    finally:
        _ACTIVE = False
    return results


# ---------------------------------------------------------------- the warm marker
def _warm_set() -> set[str]:
    path = compile_workers.marker()
    try:
        return set(json.loads(path.read_text())) if path else set()
    except (OSError, ValueError):
        return set()


def _mark(tags: Iterable[str]) -> None:
    path = compile_workers.marker()
    if path is None:
        return
    try:
        merged = sorted(_warm_set() | set(tags))
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps(merged))
        tmp.replace(path)
    except OSError:
        pass


def _tags(names: Iterable[str], ctx: Context) -> set[str]:
    return {f"{n}@{ctx.variant}" + (f"/{ctx.cfg.law}" if ENTRIES[n].per_law else "")
            + (f"/{len(ctx.top.buses)}buses" if ENTRIES[n].per_buses else "") for n in names}


# ---------------------------------------------------------------- front ends
def warm_up(groups: Iterable[str] = GROUPS, *, ctx: Context | None = None,
            jobs: int | None = None, names: Iterable[str] = (), force: bool = False,
            stream=None, header: str | None = None) -> list[dict]:
    """Compile the entries of ``groups`` (and ``names``) into numba's cache unless the
    marker says they already are (``force``: run them anyway), printing to ``stream``
    (stderr) a line per entry that compiled something and a summary. Returns the results."""
    out = stream or sys.stderr
    ctx = ctx or Context()
    todo = select(groups, names)
    if not force and _tags(todo, ctx) <= _warm_set():
        compile_workers.discard_spares()
        return []
    t0 = time.perf_counter()
    jobs = max(1, min(jobs or compile_workers.default_jobs(), len(todo)))
    print(header or f"numba: compiling {len(todo)} warm-up entries in {jobs} "
          f"process{'es' if jobs > 1 else ''} …", file=out, flush=True)
    width = max(len(n) for n in todo)

    def progress(res: dict) -> None:
        if res["error"]:
            out.write(f"  {res['name']:<{width}}  FAILED: {res['error']}\n")
            out.flush()
        elif res["compiled"]:
            k = len(res["compiled"])
            out.write(f"  {res['name']:<{width}}  {res['s']:6.2f} s  {k} kernel{'s' * (k > 1)}"
                      f"  [{time.perf_counter() - t0:5.1f} s, worker {res['worker']}]\n")
            out.flush()  # one write per line: the workers' threads report at once

    results = compile_entries(todo, ctx, jobs=jobs, progress=progress)
    ok = [r["name"] for r in results if not r["error"]]
    _mark(_tags(ok, ctx))
    _remember(results)
    n_kernels = sum(len(r["compiled"]) for r in results)
    failed = len(results) - len(ok)
    print(f"numba: warm-up done in {time.perf_counter() - t0:.1f} s, {n_kernels} kernels "
          f"compiled" + (f", {failed} entries FAILED" if failed else "")
          + f" (cache {os.environ.get('NUMBA_CACHE_DIR', 'numba default')})",
          file=out, flush=True)
    return results


_ACTIVE = False  # compile_entries() is running in this process


def ensure(top=None, groups: Iterable[str] = RUN_GROUPS, *, stream=None) -> None:
    """Before a run: on a cold cache compile the groups' kernels in parallel now (progress on
    stderr, instead of 15 s of silence kernel by kernel later); on a warm one, nothing but a
    file lookup. Kernels compiled afterwards anyway are reported (:func:`report_compiles`).

    Does nothing in a warm-up worker or while a warm-up runs in this process; with
    EXO_RT_WARMUP=0 kernels compile lazily on first call, one after the other, as numba does
    by default (each still reported with its time).
    """
    if os.environ.get(compile_workers.WORKER_ENV) or _ACTIVE:
        return
    if os.environ.get("EXO_RT_WARMUP") == "0":
        report_compiles(stream)
        return
    report_compiles(stream, " — missed by exo_rt/warmup.py's registry")
    ctx = Context(top)
    warm_up(groups, ctx=ctx, stream=stream,
            header=f"numba: {why_cold(select(groups, ()), ctx)} — compiling in parallel; "
                   "`exo-rt warmup` does this ahead of time …")


def why_cold(names: Iterable[str], ctx: Context) -> str:
    """Why this run's kernels are not all in the cache, in a few words: an empty cache (a
    fresh install, or the kernels' sources changed: the cache is keyed to them), or the
    first run of this control law, of this many buses, of this robot's shape."""
    names = list(names)
    warm = _warm_set()
    if not warm:
        return ("the compile cache is empty (first start after installing, or after a kernel "
                "module changed)")
    missing = {n for n in names if not _tags([n], ctx) <= warm}
    if missing and all(ENTRIES[n].per_law for n in missing):
        return f"the compile cache lacks control law '{ctx.cfg.law}' (its first run)"
    if missing and all(ENTRIES[n].per_buses for n in missing):
        return f"the compile cache lacks the cycle for {len(ctx.top.buses)} buses (its first run)"
    return (f"the compile cache lacks {len(missing)} of this run's kernels "
            f"({', '.join(sorted(missing)[:3])}{' …' if len(missing) > 3 else ''})")


def main(groups: Iterable[str] = GROUPS, *, config=None, controller=None, jobs=None,
         force: bool = False, names: Iterable[str] = ()) -> int:
    """``exo-rt warmup``: 0 when every entry ran, 1 when one failed (the registry needs a fix:
    a kernel's arguments changed)."""
    ctx = Context(config=config, controller=controller)
    results = warm_up(groups, ctx=ctx, jobs=jobs, names=names, force=force)
    if not results:
        print(f"numba: cache already warm ({os.environ.get('NUMBA_CACHE_DIR')})",
              file=sys.stderr)
    return 1 if any(r["error"] for r in results) else 0
