"""The wearer's crutch buttons as a source of requests, and the crutch's display as a sink of
answers (the board protocol's BUTTONS, ANSWER and MENU frames: docs/board.md).

A button's press is a request — GO (progress; with no motion running: start the selected
one), STOP, NEXT / PREV (the selection among the possible motions), MODE (the next speed
preset) — and GO's release is one too (a motion that needs GO held freezes). The board sends
its buttons every ``BUTTON_PERIOD_S``: silent for more than ``BUTTON_SILENCE_S`` while
walking, the input is lost and the walk is stopped with its closing step (a STOP from the
board, noted ``buttons silent``) — not SAFE: the wearer is walking normally, only their
means to stop has gone.
"""

from __future__ import annotations

import math

from exo_rt.session.roles import Sink, Source
from firmware_bridge import requests as rq
from firmware_bridge.requests import Request

EMPTY: tuple = ()
PRESS = ((rq.B_GO, rq.GO), (rq.B_STOP, rq.STOP), (rq.B_NEXT, rq.NEXT), (rq.B_PREV, rq.PREV),
         (rq.B_MODE, rq.MODE))


class BoardButtons(Source, Sink):
    """Requests from the board ``link`` (:class:`firmware_bridge.link.BoardLink` or one that
    has its ``button_changes``, ``buttons_time`` and ``clock``), answers and the menu back to
    it, for the ``machine`` (:class:`~exo_rt.session.machine.ActivityMachine`). ``listen``
    False (replay): the buttons are not heard (the recorded requests are asked instead)."""

    def __init__(self, link, machine, *, listen: bool = True, state=None) -> None:
        self.link, self.machine, self.listen = link, machine, listen
        self.mask = 0
        self.lost = False  # the buttons went silent during this walk (stopped once)
        self.state = state or (lambda: 0)  # the controller's state, for the menu

    def poll(self, k: int):
        """The requests of the buttons' changes since the last cycle; a STOP when they went
        silent during a walk."""
        if not self.listen:
            return EMPTY
        changes = self.link.button_changes
        out = None
        while changes:
            _t, mask, _presses = changes.popleft()
            pressed, released = mask & ~self.mask, self.mask & ~mask
            self.mask = mask
            if pressed & rq.B_STOP:  # STOP wins over GO in the same frame: that GO is
                pressed &= ~rq.B_GO  # not heard (held on, it counts only once released
                # and pressed again)
            for bit, kind in PRESS:
                if pressed & bit:
                    out = out or []
                    out.append(Request(kind, rq.BOARD))
            if released & rq.B_GO:
                out = out or []
                out.append(Request(rq.GO_RELEASE, rq.BOARD))
        m = self.machine
        walking = m.motion is not None and m.motion.kind == "walk" and not m.stop_asked
        if walking and not self.lost:
            last = self.link.buttons_time
            if math.isfinite(last) and self.link.clock() - last > rq.BUTTON_SILENCE_S:
                self.lost = True
                out = out or []
                out.append(Request(rq.STOP, rq.BOARD, note="buttons silent"))
        elif not walking:
            self.lost = False
        return out or EMPTY

    # ------------------------------------------------------------------ the crutch's display
    def answer(self, ans, k: int) -> None:
        if not self.listen:
            return
        idx = self.machine.activities.index(ans.motion) if ans.motion else None
        self.link.send_answer(ans.kind, ans.answer, ans.reason, idx)

    def show(self, machine, k: int) -> None:
        if not self.listen:
            return
        act = machine.activities
        names = list(act.postures)
        possible = 0
        for name in machine.possible():
            possible |= 1 << act.index(name)
        sel = machine.selected_motion()
        levels = list(machine.levels.values()) or [0.0]
        self.link.send_menu(self.state(), names.index(machine.posture) if machine.posture in names
                            else None, act.index(machine.motion.name) if machine.motion
                            else None, act.index(sel) if sel else None, possible,
                            machine.steps, 1000.0 * machine.speed,
                            100.0 * sum(levels) / len(levels))
