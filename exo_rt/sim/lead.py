"""A leading wearer in real time: the cycle's reference rows shared with the simulation's
process (``exo-rt run --realtime`` with a wearer profile of ``role: leading``).

On the lockstep bus the leading wearer (:class:`exo_rt.sim.walker.Leader`) reads the cycle's
own ``v`` — its reference rows ``V_QR``, ``V_QDR``, ``V_QDDR`` (rad, rad/s, rad/s²: the walk
the session plans) — each physics period, in the controller's process. With ``--realtime`` the
plant runs in its own process (``exo-rt drives``), which does not hear the session's plan; so:

- the controller's side (:class:`exo_rt.sim.launch.SimulatedBuses`, simulation code in the
  controller's process) creates a :class:`SharedRows` block of the cycle's ``v`` shape in
  ``multiprocessing.shared_memory`` when it starts the simulation of a run whose wearer
  profile leads, and names it on the simulation's command line (``--lead NAME ROWS COLS``);
- the simulation's process attaches it at start-up and builds the Leader on a view of it
  (:func:`prepare`: the robot file it loads, the exoskeleton alone from the same file, the
  world's feet), its kernels run once there — a Leader built at the session's start would
  stall the serving loop for a second (numba's cache and the packed models) and the drives
  would answer late;
- when the session begins (:class:`exo_rt.sim.crutch.WearerGait`) the cycle's ``v`` is handed
  to the bus set (:func:`offer`, the line ``lead TOKEN`` to its ``board_command``,
  :func:`claim`), which from then copies the three rows into the block once per control cycle,
  after the cycle's commands went out (:class:`RowsMirror`, from ``SimulatedBuses.tick``: one
  assignment of a (3, n) view onto a view, no allocation, ≈ 0.8 µs), and tells the
  simulation ``lead``: the prepared Leader becomes the world's wearer from its next physics
  period.

The cycle's ``v`` cannot live in the block itself: the compiled cycle's data holds views of
the array :func:`exo_rt.cycle.step.new_data` allocates. A read of a row torn by a copy in
progress mixes two consecutive cycles' references (1 ms apart): the wearer's impedance pulls
towards a reference at most one period of the reference's motion off — far below the joint
tracking the walk needs — so the rows are read without a lock.

The controller's side owns the block: it unlinks it when the buses close (``close`` runs in
the run's ``finally``), and Python's resource tracker unlinks it if the controller's process
dies without closing; the simulation's process only unmaps it (its own tracker is told to
forget the block, :func:`untrack`).
"""

from __future__ import annotations

from multiprocessing import shared_memory

import numpy as np

from exo_rt.cycle.layout import V_QDDR, V_QDR, V_QR
from exo_rt.record.rings import CREATED, check_size_limit, untrack

REFERENCE_ROWS = (V_QR, V_QDR, V_QDDR)  # the rows the Leader reads (rad, rad/s, rad/s²)
# where ``exo-rt drives`` saves the leading wearer's log at its end (numpy .npy by physics
# period: the world's time s, each joint's torque N·m, q rad, q̇ rad/s; Leader.rows_logged)
LOG_ENV = "EXO_RT_LEAD_LOG"


class SharedRows:
    """A (rows, cols) float64 block in shared memory: created (``name`` None: zeroed, owned,
    unlinked at :meth:`close`) or attached by ``name`` (unmapped at :meth:`close`).
    :attr:`rows` is the numpy view on it; :meth:`spec` the three words that name it
    (``NAME ROWS COLS``)."""

    def __init__(self, shape: tuple[int, int], name: str | None = None) -> None:
        rows, cols = (int(x) for x in shape)
        if rows < 1 or cols < 1:
            raise ValueError(f"shared rows of shape ({rows}, {cols}): give at least 1 × 1")
        size = rows * cols * 8
        self.owner = name is None
        if self.owner:
            check_size_limit(size)
            self.shm = shared_memory.SharedMemory(create=True, size=size)
            CREATED.add(self.shm._name)
        else:
            self.shm = shared_memory.SharedMemory(name=name)
            untrack(self.shm)
            if self.shm.size < size:
                self.shm.close()
                raise ValueError(f"shared rows '{name}': {self.shm.size} bytes, not the "
                                 f"{size} of ({rows}, {cols}) float64")
        self.name = self.shm.name
        self.shape = (rows, cols)
        self.rows: np.ndarray | None = np.ndarray(self.shape, np.float64, self.shm.buf)
        if self.owner:
            self.rows[:] = 0.0

    def spec(self) -> list[str]:
        """``[NAME, ROWS, COLS]``: what the other process attaches with."""
        return [self.name, str(self.shape[0]), str(self.shape[1])]

    def close(self) -> None:
        """This process's mapping dropped (the view first: a mapped buffer with a view on it
        cannot close) and, for the creator, the block unlinked. Idempotent."""
        if self.rows is None:
            return
        self.rows = None
        try:
            self.shm.close()
        except BufferError:  # (a caller still holds a view: the mapping goes with it)
            pass
        if self.owner:
            CREATED.discard(self.shm._name)
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass


class RowsMirror:
    """The controller's side: ``block`` (:class:`SharedRows` of the cycle's ``v`` shape) and,
    once :meth:`follow` named the cycle's ``v``, its reference rows copied into the block by
    :meth:`put` (a (3, n) view onto a view when the rows are adjacent, as the layout has them;
    else three)."""

    def __init__(self, block: SharedRows) -> None:
        self.block = block
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []  # (destination, source) views

    @property
    def following(self) -> bool:
        return bool(self.pairs)

    def follow(self, v: np.ndarray) -> None:
        """Copy ``v``'s reference rows from now on (``v``: the cycle's, of the block's
        shape); the first copy at once."""
        dst = self.block.rows
        if dst is None or v.shape != dst.shape:
            raise ValueError(f"the cycle's rows {v.shape} do not fit the shared block "
                             f"{self.block.shape}")
        lo, hi = min(REFERENCE_ROWS), max(REFERENCE_ROWS)
        if hi - lo + 1 == len(REFERENCE_ROWS):
            self.pairs = [(dst[lo:hi + 1], v[lo:hi + 1])]
        else:
            self.pairs = [(dst[r], v[r]) for r in REFERENCE_ROWS]
        self.put()

    def put(self) -> None:
        """The rows now (once a control cycle, after its commands went out): a view's
        ``[...]`` assigned from a view (0.8 µs on this VM against ``numpy.copyto``'s 1.0 µs, a
        compiled copy's 1.0 µs and ``ctypes.memmove``'s 1.6 µs; nothing allocated)."""
        for dst, src in self.pairs:
            dst[...] = src

    def close(self) -> None:
        self.pairs = []
        self.block.close()


# --------------------------------------------------------------- the session's hand-over
_offered: dict[str, np.ndarray] = {}


def offer(v: np.ndarray) -> str:
    """The cycle's ``v`` offered to the bus set, under the token the line ``lead TOKEN``
    names (one offer at a time: a bus set that never claims it, real hardware with an
    emulated board, leaves one reference behind)."""
    token = str(id(v))
    _offered.clear()
    _offered[token] = v
    return token


def claim(token: str) -> np.ndarray | None:
    """The ``v`` offered under ``token`` (None: none)."""
    return _offered.pop(token, None)


# --------------------------------------------------------------- the simulation's process
def prepare(world, robot, exo, spec: list[str]):
    """The simulation's process: the block ``spec`` (``NAME ROWS COLS``) attached and a
    :class:`exo_rt.sim.walker.Leader` of ``robot`` (the plant's mechanism, exoskeleton and
    wearer) and ``exo`` (the exoskeleton alone) built on its view, with ``world``'s feet; its
    kernels run once on a scratch state (compiled or loaded now, not when the session
    begins). (None, block) where the world has no floor (no feet: no leading wearer)."""
    name, rows, cols = spec
    block = SharedRows((int(rows), int(cols)), name=name)
    if world.truth is None:
        return None, block
    from exo_rt.sim.walker import Leader

    return warmed(Leader, world, robot, exo, block.rows), block


def warmed(leader_class, world, robot, exo, v: np.ndarray):
    """A ``leader_class`` (:class:`exo_rt.sim.walker.Leader`) of ``robot`` and ``exo`` reading
    ``v`` with ``world``'s feet, its kernels run once first on a scratch Leader and state
    (compiled or loaded now, not at the session's first period)."""
    feet = world.truth.feet
    warm = leader_class(robot, exo, np.zeros_like(v), feet, capacity=1)  # (thrown away: its
    warm.apply(world.plant.state.copy(), np.zeros_like(world.truth.force), 0.0)  # one row)
    return leader_class(robot, exo, v, feet)


def report(leader, names) -> str:
    """One line: the physics steps the leading wearer acted in (in real time a SYNC that
    arrives within a period splits it: a step is a period or less), the world's time they
    span (s) and their torque's RMS and peak by joint (N·m) — what ``exo-rt drives`` prints at
    its end (standard error; the whole log saved where :data:`LOG_ENV` names a file)."""
    tau = leader.torques()
    if not len(tau):
        return "leading wearer: 0 steps"
    rms = np.sqrt(np.mean(tau[:, 1:] ** 2, axis=0))
    peak = np.max(np.abs(tau[:, 1:]), axis=0)
    joints = " ".join(f"{nm}={r:.2f}/{p:.1f}" for nm, r, p in zip(names, rms, peak,
                                                                   strict=True))
    return (f"leading wearer: {len(tau)} steps, t {tau[0, 0]:.3f}…"
            f"{tau[-1, 0]:.3f} s; torque RMS/peak N·m {joints}")
