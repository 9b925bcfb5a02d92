"""Numba warm-up: each component the run, the simulator and the bench use, built by its own
public constructor from the top config and stepped once (or its ``warm_up`` called), so its
kernels are in numba's on-disk cache before a cycle needs them, with the runtime's own
argument types (a registered plant model or law warms by the same code). ``exo-rt warmup``
runs every entry, :func:`ensure` the run's groups on a cold cache; a kernel compiled later
is reported. Entries run here and in workers at once (:func:`exo_rt.compile_workers.pool`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path

import numpy as np

from exo_rt import compile_workers
from exo_rt.compile_workers import report_compiles  # noqa: F401  (part of this API)
from exo_rt.compile_workers import warm_set as _warm_set

GROUPS = ("controller", "io", "plant", "bench", "sim", "dynamics")
RUN_GROUPS = ("controller", "plant")  # what `exo-rt run` on the simulated leg needs
REAL_BUS_GROUPS = ("controller", "io")  # … and on a real bus (or the simulation's own process)
MISSED = " — missed by exo_rt/warmup.py's registry"  # a kernel no entry's component compiled


@dataclass(frozen=True)
class Entry:
    """``run(context)`` builds a component, steps it once; ``per_…``: per law, buses, plant."""

    name: str
    group: str
    run: Callable[[Context], object]
    per_law: bool = False
    per_buses: bool = False
    per_plant: bool = False


ENTRIES: dict[str, Entry] = {}


def entry(name: str, group: str, **per: bool) -> Callable:
    """Register the decorated ``fn(context)`` as entry ``name`` (unique) of ``group``."""
    if group not in GROUPS:
        raise ValueError(f"unknown warm-up group '{group}' (one of {', '.join(GROUPS)})")
    if name in ENTRIES:
        raise ValueError(f"warm-up entry '{name}' is registered twice")

    def register(fn: Callable[[Context], object]) -> Callable[[Context], object]:
        ENTRIES[name] = Entry(name, group, fn, **per)
        return fn
    return register


class Context:
    """The top config the components are built from (``config``, default configs/exo_leg.yaml;
    ``controller``: another controller file), and the components entries share, made once."""

    def __init__(self, top=None, *, config: str | Path | None = None,
                 controller: str | None = None) -> None:
        self._top, self._config, self._controller = top, config, controller

    @cached_property
    def top(self):
        if self._top is not None:
            return self._top
        from exo_rt.resources import default_config
        from exo_rt.runtime.config import load_top
        return load_top(self._config or default_config(), controller=self._controller)

    def spec(self) -> dict:  # what a worker process builds the same context from
        return {"config": str(Path(self.top.path).resolve()),
                "controller": str(self.top.controller.source)}

    @cached_property
    def plant(self):
        """The configured plant model, as the simulated bus makes it."""
        from exo_rt.sim import plants
        t, s = self.top, self.top.simulation
        return plants.create(s.plant, t.robot, dt=1.0 / t.rate_hz, room=s.plant_options())


# ---------------------------------------------------------------- the components
# In the order the pool takes them: the run's, the longest first (the cycle's step, the plant)
@entry("cycle", "controller")
def _cycle(c: Context) -> None:
    """The cycle's step in every state, on the passive law (every law's step: a law's value is
    typed by the laws' signature) without assistance: the run's law and the wearer's torque (the
    dynamics) compile in 'law', the one call in 'cycle.call'."""
    from exo_rt.cycle import step as cy
    t = c.top
    passive = replace(t.controller, law="passive", gains=t.controller.gains.copy())
    passive.gains["assist"] = 0.0
    cyc = cy.build(t.robot, t.exo, passive, t.safety, dt=1.0 / t.rate_hz)
    cy.warm(cyc)
    cyc.fresh().set_hist(np.zeros((1, cyc.width)))  # as a run keeps its history


@entry("plant", "plant", per_plant=True)
def _plant(c: Context) -> None:
    from exo_rt.sim import world_truth

    p = c.plant  # a step at zero current, as the simulated bus does before serving frames
    p.reset(np.zeros(p.n_joints))  # at rest in equilibrium, as the simulated bus opens it
    p.step(np.zeros_like(p.cmd))
    truth = world_truth.for_plant(p)  # the floor's truth row, taken after each period
    if truth is not None:
        truth.prepare()
    p.reset(np.zeros(p.n_joints))


@entry("bus.pdo", "controller")
def _pdo(c: Context) -> None:
    from exo_rt.bus import drives, pdo_cycle
    pdo_cycle.warm_up()  # every CiA 402 bus's steps, the simulated bus's too
    drives.warm_up_records(c.top)  # and the run's own buses' records, as its drives make them


@entry("board", "controller")
def _board(c: Context) -> None:
    from firmware_bridge import link
    link.warm_up()  # a link on a descriptor, as a run's: its poll is compiled code


@entry("cycle.call", "controller")
def _cycle_call(c: Context) -> None:
    from exo_rt.cycle import cycle_call
    cycle_call.warm_up([])  # the one call, its buses Python's (lockstep, python-can ports)


@entry("law", "controller", per_law=True)
def _law(c: Context) -> None:
    from exo_rt.control import registry
    from exo_rt.cycle import step as cy
    registry.function(c.top.controller.law)  # the run's law compiled, and
    if c.top.controller.assists:  # the wearer's torque (a function of its signature) it adds
        cy.wearer_function()


@entry("gait_phase", "controller")
def _gait_phase(c: Context) -> None:
    from exo_rt.control import trajectory
    from exo_rt.session import envelope
    trajectory.warm_up()  # the heel strikes' kernels
    envelope.warm_up()  # the walks' trace: a session checks each walk before it begins


@entry("timing", "controller")
def _timing(c: Context) -> None:
    from exo_rt.runtime.loop import TimingStats
    TimingStats().warm_up()  # the scheduler's histograms


@entry("dynamics", "dynamics")
def _dynamics(c: Context) -> None:
    """The Dynamics facade (tools, tests, the bench), the integrator, a closed chain's."""
    from exo_rt.dynamics import Dynamics, integrate
    from exo_rt.model import load_mechanism
    from exo_rt.resources import config
    dyn = Dynamics(c.top.robot)
    dyn.warm_up()
    integrate.warm_up(dyn)
    Dynamics(load_mechanism(config("robots", "fourbar_knee.yaml"))).warm_up()


@entry("bus.io", "io")
def _bus_io(c: Context) -> None:
    from exo_rt.bus import fastio, pdo_cycle
    fastio.warm_up()  # the frame batches of socketcan and udp_multicast ports, then
    pdo_cycle.warm_up_io()  # a CiA 402 bus's cycle I/O on them, one compiled call each way


@entry("laws", "sim")
def _laws(c: Context) -> None:
    from exo_rt.control import registry
    registry.compile_all()  # every registered law (model-in-the-loop, the tools)


@entry("plant.readouts", "sim", per_plant=True)
def _plant_readouts(c: Context) -> None:
    _ = c.plant.output_torques, c.plant.energy()  # what the simulator's tools read


@entry("cycle.buses", "io", per_buses=True)
def _cycle_buses(c: Context) -> None:
    from exo_rt.cycle import cycle_call  # the one call on CiA 402 buses (real time; others:
    if all(b.protocol == "cia402" for b in c.top.buses):  # their I/O is Python's)
        cycle_call.warm_up([len(b.drives) for b in c.top.buses])


@entry("mil", "sim", per_plant=True)
def _mil(c: Context) -> None:
    from exo_rt.sim.mil import run_mil
    t = c.top  # a millisecond of model-in-the-loop (the plant's step compiled for it too)
    run_mil(t.robot, t.controller, cycles=1e-3 / t.controller.reference.period,
            dt=1.0 / t.rate_hz, plant_model=t.simulation.plant)


@entry("bench", "bench", per_law=True, per_plant=True)
def _bench(c: Context) -> None:
    """The HIL bench as ``exo-rt bench-test`` makes it, and the simulated fixture's sensor."""
    from exo_rt.hil.bench import Bench
    from exo_rt.runtime.options import RunOptions
    from exo_rt.runtime.rig import open_rig
    rig = open_rig(c.top, "sim", RunOptions(board=None), cpus=set())
    try:
        Bench(c.top, rig.drives, world=rig.bus_set.world)
        _ = rig.bus_set.world.plant.output_torques
    finally:
        rig.close()


# ---------------------------------------------------------------- running them
def select(groups: Iterable[str] = GROUPS, names: Iterable[str] = ()) -> list[str]:
    """Entry names of ``groups`` plus ``names``, in registry order."""
    groups, names = set(groups), set(names)
    if unknown := names - set(ENTRIES):
        raise KeyError(f"no warm-up entry {', '.join(sorted(unknown))}")
    return [e.name for e in ENTRIES.values() if e.group in groups or e.name in names]


def _run(name: str, ctx: Context) -> dict:
    return compile_workers.compiles().run(name, lambda: ENTRIES[name].run(ctx))


def serve_worker() -> None:
    """A worker process's main (:class:`exo_rt.compile_workers.Worker`)."""
    from exo_rt.runtime import config  # noqa: F401  (what the context loads, imported early)

    compile_workers.serve(lambda spec: partial(_run, ctx=Context(**spec)))


def _tags(names: Iterable[str], ctx: Context) -> set[str]:
    """Each entry's warmth: per dynamics variant (tree, closed chain), and its ``per_…``."""
    t = ctx.top
    base = "closed" if t.robot.closure is not None else "tree"
    law = t.controller.law + "+assist" * t.controller.assists
    return {f"{e.name}@{base}" + (f"/{law}" if e.per_law else "")
            + (f"/{len(t.buses)}buses" if e.per_buses else "")
            + (f"/{t.simulation.plant}" if e.per_plant else "")
            for e in (ENTRIES[n] for n in names)}


def warm_up(groups: Iterable[str] = GROUPS, *, ctx: Context | None = None,
            jobs: int | None = None, names: Iterable[str] = (), force: bool = False,
            stream=None, header: str | None = None) -> list[dict]:
    """Run the entries of ``groups`` and ``names`` the marker does not say ran into this cache
    (``force``: all), a line each on ``stream`` (stderr); their results (none: all warm)."""
    ctx = ctx or Context()
    warm = set() if force else _warm_set()
    if not (todo := [n for n in select(groups, names) if not _tags([n], ctx) <= warm]):
        compile_workers.discard_spares()
        return []
    jobs = max(1, min(jobs or compile_workers.default_jobs(), len(todo)))
    results = compile_workers.pool(todo, partial(_run, ctx=ctx),
                                   ctx.spec() if jobs > 1 else {}, jobs, stream or sys.stderr,
                                   header)
    compile_workers.mark(_tags([r["name"] for r in results if not r["error"]], ctx))
    return results


def for_run(top, bus_spec: str, realtime: bool) -> None:
    """:func:`ensure` of what a run on ``bus_spec`` needs (the controller's ``compile_ahead``
    for ``exo-rt run``): a real bus's (or the simulation's own process's) I/O, else the
    simulated leg's plant, and the I/O for real time."""
    ensure(top, REAL_BUS_GROUPS if ":" in str(bus_spec)
           else RUN_GROUPS + (("io",) if realtime else ()))


def ensure(top=None, groups: Iterable[str] = RUN_GROUPS, *, stream=None) -> None:
    """Before a run: on a cold cache warm the groups' components up now, in parallel (a file
    lookup on a warm one); kernels compiled later are reported (EXO_RT_WARMUP=0: all)."""
    if os.environ.get(compile_workers.WORKER_ENV):
        return
    if os.environ.get("EXO_RT_WARMUP") == "0":
        report_compiles(stream)
        return
    report_compiles(stream, MISSED)
    ctx = Context(top)
    warm_up(groups, ctx=ctx, stream=stream,
            header=f"numba: {why_cold(select(groups), ctx)} — compiling in parallel; "
                   "`exo-rt warmup` does this ahead of time …")


def why_cold(names: Iterable[str], ctx: Context) -> str:
    """Why this run's components are not all in the cache (empty, a first law/buses/plant…)."""
    warm = _warm_set()
    if not warm:
        return ("the compile cache is empty (first start after installing, or after a kernel "
                "module changed)")
    missing = [ENTRIES[n] for n in names if not _tags([n], ctx) <= warm]
    t = ctx.top
    for flag, what in (("per_law", f"control law '{t.controller.law}'"),
                       ("per_buses", f"the cycle for {len(t.buses)} buses"),
                       ("per_plant", f"plant model '{t.simulation.plant}'")):
        if missing and all(getattr(e, flag) for e in missing):
            return f"the compile cache lacks {what} (its first run)"
    return (f"the compile cache lacks {len(missing)} of this run's components "
            f"({', '.join(e.name for e in missing[:3])}{' …' * (len(missing) > 3)})")


def main(groups: Iterable[str] = GROUPS, *, config=None, controller=None, jobs=None,
         force: bool = False, names: Iterable[str] = ()) -> int:
    """``exo-rt warmup``: 0 when every entry ran, 1 when one failed (fix its entry)."""
    results = warm_up(groups, ctx=Context(config=config, controller=controller), jobs=jobs,
                      names=names, force=force)
    if not results:
        print(f"numba: cache already warm ({os.environ.get('NUMBA_CACHE_DIR')})",
              file=sys.stderr)
    return 1 if any(r["error"] for r in results) else 0
