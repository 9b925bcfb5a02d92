"""How a run is to go, beside its top config: the options of ``exo-rt run`` (docs/cli.md)
as the controller takes them (``Controller(top, bus, **options)``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exo_rt.model.mechanism import Mechanism
from exo_rt.runtime.injections import Injection


@dataclass(frozen=True)
class RunOptions:
    """A run's options; every one has the default ``exo-rt run`` gives it."""

    realtime: bool = False  # the simulated bus at the wall clock's rate (its own process)
    injections: tuple[Injection, ...] = ()  # faults injected (--inject)
    start_pose: tuple[float, ...] | None = None  # rad: the simulated leg's initial angles
    seed: int = 0  # the simulated bus's noise
    status: bool = False  # a live status line on stderr (the recording prints it; exo-rt run
    # --console leaves it off: the console's status shows the time)
    rt_setup: bool = True  # SCHED_FIFO, affinity, mlockall, the gc frozen (real time)
    board: str | None = "emulator"  # the embedded board: emulator, a pyserial URL, None
    plant: Mechanism | None = None  # the simulated leg's model (default: the robot's)
    history: bool | None = None  # Controller.log: None the first minute, True all, False none
    live: str | None = None  # serve live telemetry on [HOST:]PORT (read only)
    live_remote: bool = False  # allow --live on an address other than loopback
    live_wait: float = 0.0  # s to wait for a live client before the drives enable
    reset_faults: bool = False  # clear drives found in FAULT before enabling them (explicit)
    session: str | None = None  # the session script (None: configs/sessions/default.yaml)
    activities: str | None = None  # the activities file (None: the robot's shipped one)
    wearer: str | None = None  # the wearer profile (None: the robot file's wearer)
    console: bool = False  # the therapist's console: keys on stdin, status on stderr (alone,
    # without session: the only source; lockstep paced to the wall clock)
    web: object | None = None  # the therapist's web page: its address (exo_rt.web.address.
    # WebAddress, or "[HOST:]PORT"); served by a process of its own; lockstep paced
    requests: tuple | None = None  # replay: the recorded request events, asked again
    sources: tuple = ()  # more request sources: callables (controller) → source (a rehearsal's
    # crutch plan on the emulated board, exo_rt.sim.crutch; a test's own)
    abort: Callable[[], bool] | None = None  # asked every cycle: True stops the run at once,
    # as ctrl-C does (the bench's abort key)
    compile_ahead: Callable[[], None] | None = None  # called before the buses open: compile
    # the run's kernels ahead, in parallel with progress (exo-rt run: exo_rt.warmup.for_run);
    # None: each kernel compiles (or loads from the cache) when first called
