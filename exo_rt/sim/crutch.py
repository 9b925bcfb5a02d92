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

EMPTY: tuple = ()


class CrutchPlan:
    """A request source that asks nothing itself: at the session's first cycle it hands the
    plan's presses to the emulated board (whose buttons the session hears as any board's)."""

    def __init__(self, ctl, plan) -> None:
        if not getattr(ctl.rig, "board_emulated", False):
            raise ValueError("a crutch plan presses the emulated board's buttons: run with "
                             "the board emulator (--board emulator) on the simulated bus")
        self.ctl, self.t0 = ctl, None
        self.timed = [(float(t), c, str(w)) for t, c, w in plan if c != "estop"]
        self.estops = sorted((float(t), str(w)) for t, c, w in plan if c == "estop")

    def poll(self, k: int):
        board = self.ctl.board
        if self.t0 is None:
            self.t0 = board.clock()
            for t, cmd, what in self.timed:
                self.ctl.bus_set.board_command(f"{cmd} {self.t0 + t!r} {what}")
        while self.estops and board.clock() >= self.t0 + self.estops[0][0]:
            self.ctl.bus_set.board_command(f"estop {self.estops.pop(0)[1]}")
        return EMPTY


def crutch(plan):
    """The plan as a source maker for :class:`~exo_rt.runtime.options.RunOptions`'
    ``sources`` (called with the controller when its session is made)."""
    return lambda ctl: CrutchPlan(ctl, plan)


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
