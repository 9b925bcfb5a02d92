"""The wearer on the emulated crutch: button presses planned in time, handed to the board
emulator (a rehearsal of a session the wearer drives, for tests, the figures of
docs/sessions.md and a bench rehearsal on the simulated exoskeleton).

A plan is a list of ``(t, command, what)``: ``t`` s from the session's start (its first RUN
cycle) on the board's clock; ``command`` one of the emulator's (:func:`firmware_bridge.
emulator.apply_command`): ``buttons`` (hold exactly ``what`` — names as ``go``, ``go+next``,
``none``), ``click`` (press ``what`` for one frame period), ``silence`` (no BUTTONS frames
for ``what`` s), ``estop`` (``1`` pressed, ``0`` released; at the first cycle at or after
``t``). ``exo-rt run`` takes none; ``Controller(..., sources=(crutch(plan),))`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exo_rt.sim import lead  # (here, not at the session's first cycle: no import in the loop)
from firmware_bridge import requests as rq

EMPTY: tuple = ()


class CrutchPlan:
    """A request source that asks nothing itself: at the session's first cycle it hands the
    plan's presses to the emulated board (whose buttons the session hears as any board's):
    ``emulated``, whether the run's board is the emulator; ``clock``, the board's clock (s);
    ``tell``, a line to the emulator (the bus set's ``board_command``)."""

    def __init__(self, plan, emulated: bool, clock: Callable[[], float],
                 tell: Callable[[str], None]) -> None:
        if not emulated:
            raise ValueError("a crutch plan presses the emulated board's buttons: run with "
                             "the board emulator (--board emulator) on the simulated bus")
        self.clock, self.tell, self.t0 = clock, tell, None
        self.timed = [(float(t), c, str(w)) for t, c, w in plan if c != "estop"]
        self.estops = sorted((float(t), str(w)) for t, c, w in plan if c == "estop")

    def poll(self, k: int):
        if self.t0 is None:
            self.t0 = self.clock()
            for t, cmd, what in self.timed:
                self.tell(f"{cmd} {self.t0 + t!r} {what}")
        while self.estops and self.clock() >= self.t0 + self.estops[0][0]:
            self.tell(f"estop {self.estops.pop(0)[1]}")
        return EMPTY


def crutch(plan):
    """The plan as a source maker for :class:`~exo_rt.runtime.options.RunOptions`'
    ``sources`` (called with the controller when its session is made: the plan takes its
    rig's board and bus set)."""
    return lambda ctl: CrutchPlan(plan, ctl.rig.board_emulated, ctl.board.clock,
                                  ctl.bus_set.board_command)


# A whole session on the crutch (docs/sessions.md's figures, tests/test_sessions.py), from
# sitting: stand up with GO held (released half-way for a second, pressed again), stand 5 s,
# GO: walk at the profile's default 0.4 m/s, MODE → 0.5, MODE → 0.3 (the presets wrap), 17
# strides in all, STOP, stand. The session's END at ``WHOLE_SESSION_S`` is a script's (the
# crutch has no END). It ends standing: on the simulated leg, which hangs with no seat or
# ground under it, the walk heats the hip's winding by about 1.5 K/s, and sitting down and
# holding the leg at a stool's height (≈ 10 A, three times the motor's rating) passes the
# warning level even from cold (docs/assistance.md, "The exoskeleton's thermal budget");
# sitting down from the crutch has its own test (tests/test_sessions.py).
WHOLE_SESSION = ((0.5, "buttons", "go"), (2.0, "buttons", "none"), (3.0, "buttons", "go"),
                 (7.5, "buttons", "none"),
                 (12.0, "buttons", "go"), (12.3, "buttons", "none"),
                 (22.5, "click", "mode"), (32.0, "click", "mode"), (44.0, "click", "stop"))
WHOLE_SESSION_S = 48.0
# From standing: NEXT selects sitting down, GO held sits down (released once sitting).
SIT_DOWN = ((0.5, "click", "next"), (1.5, "buttons", "go"), (8.0, "buttons", "none"))
SIT_DOWN_S = 9.5


@dataclass(frozen=True)
class WearerRun:
    """What the emulated wearer's feet follow of their run (:class:`WearerGait`): the run's
    ``cycle`` (:class:`exo_rt.cycle.step.Cycle`: its segment's stride period ``b_period``,
    s, and its vectors), the ``robot`` and its ``exo`` (a leading wearer's body), the wearer
    profile's ``role`` (``leading``: their own torques move the legs), the reference's
    ``phase`` (``time``: the exoskeleton walks the leg; ``events``: the wearer paces it), the
    board's ``clock`` (s), ``tell`` (a line to the board emulator: the bus set's
    ``board_command``) and the simulated ``world`` in this process (None: none). When RUN
    began is the gait's own (:meth:`WearerGait.begin`): this is made before the loop."""

    cycle: object
    robot: object
    exo: object
    role: str
    phase: str
    clock: Callable[[], float]
    tell: Callable[[str], None]
    world: object | None


class WearerGait:
    """The emulated wearer's heel strikes, told to the board emulator (its foot-sole pressure):
    where the exoskeleton walks the leg (``reference.phase: time``), the wearer's feet follow
    it — no strikes while the session stands, and from the walk's start a strike at each of
    its stride boundaries, at its stride period; where the wearer paces the walk
    (``reference.phase: events``), they walk at the emulator's own cadence from the session's
    start, and the exoskeleton follows them. A session source that asks nothing; ``run``:
    what it follows of its run (:class:`WearerRun`)."""

    def __init__(self, run: WearerRun) -> None:
        self.run, self.started, self.walking = run, False, False
        self.t_run = 0.0  # s on the board's clock: when RUN began (:meth:`begin`)
        self._token: str | None = None  # real time: the cycle's ``v`` offered (``lead``)
        self._leader = None  # lockstep: the leading wearer, put into the world at the start
        self._prepare_lead()

    def begin(self, t_run: float) -> WearerGait:
        """RUN began at ``t_run`` (s on the board's clock): the gait starts at its first poll."""
        self.t_run = t_run
        return self

    def _tell(self, line: str) -> None:
        self.run.tell(line)

    def _walk(self) -> None:
        period = float(self.run.cycle.seg["b_period"])
        self._tell(f"walk {self.run.clock()!r} {period!r}")

    def poll(self, k: int):
        if not self.started:
            self.started = True
            self._lead()
            events = self.run.phase == "events"
            self._tell(f"walk {self.t_run!r}" if events else "stand")
        return EMPTY

    def _prepare_lead(self) -> None:
        """A wearer profile with ``role: leading`` on the world's floor: their own torques
        move the legs from the session's start (:class:`exo_rt.sim.walker.Leader`, towards
        the walk the session plans). Made here, before the control loop (a Leader's kernels
        load in tens of ms): in this process (lockstep) a Leader reading the cycle's ``v``,
        its kernels run once on a scratch state; with the simulation in its own process (real
        time) the cycle's ``v`` offered to the bus set, which shares its reference rows with
        the Leader prepared there (:mod:`exo_rt.sim.lead`; a world without a floor ignores
        it)."""
        if self.run.role != "leading":
            return
        world = self.run.world
        if world is None:
            self._token = lead.offer(self.run.cycle.v)
            return
        if world.truth is None:
            return
        from exo_rt.sim.walker import Leader

        self._leader = lead.warmed(Leader, world, self.run.robot, self.run.exo,
                                   self.run.cycle.v)

    def _lead(self) -> None:
        """The session began: the leading wearer's torques act from now on."""
        if self._token is not None:
            self._tell(f"lead {self._token}")
        elif self._leader is not None:
            self.run.world.wearer = self._leader

    def notify(self, answer, k: int) -> None:
        if self.run.phase == "events":
            return
        if answer.answer == rq.FINISHED and self.walking:
            self.walking = False
            self._tell("stand")  # (the closing step ended: standing)
        elif (answer.answer == rq.ACCEPTED and answer.motion is not None
              and "period" in answer.extra):  # (a motion with a stride period: a walk)
            self.walking = True
            self._walk()  # (the walk's start)

    def on_stride(self, steps: int, k: int) -> None:
        if self.walking and self.run.phase != "events":
            self._walk()  # a stride boundary: the heel strikes, at the stride's period
