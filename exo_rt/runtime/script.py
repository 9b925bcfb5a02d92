"""The run's lifecycle between cycles: which state follows which, and when — READY
(``READY_CYCLES``) → RUN (the session: the activity machine, its requests and answers, until
END) → STOPPING (the last posture held, ``stop_s``) → SHUTDOWN (the drives disabled). The
controller's update loop steps by :func:`lifecycle` at the end of every cycle, entering RUN
by :func:`begin_run` and SHUTDOWN by :func:`shut_down`; the board's heel strikes go into the
gait phase through :class:`HeelStrikes`."""

from __future__ import annotations

import numpy as np

from exo_rt.control import trajectory
from exo_rt.cycle.states import READY, READY_CYCLES, RUN, SAFE, SHUTDOWN, STOPPING
from exo_rt.session import session as sessions


def lifecycle(state: int, k: int, k0: dict, dt: float, session, duration: float,
              stop_s: float) -> int | None:
    """The state after cycle ``k`` of a session's run (None: the same): READY → RUN after
    ``READY_CYCLES``; in RUN (and after it: a request in SAFE is answered, refused) the
    session's sources are heard and answered (:meth:`exo_rt.session.session.Session.tick`),
    and its END leads to STOPPING (the posture held ``stop_s``) → SHUTDOWN. A session still
    going ``SESSION_SPARE_S`` (:mod:`exo_rt.session.session`) after ``duration`` is ended
    (:func:`_guard`). ``k0``: the
    cycle each state began. The controller's run steps by it (on the bench too:
    :meth:`exo_rt.hil.bench.Bench.run_controller`)."""
    if state == READY and k >= READY_CYCLES:
        return RUN
    if RUN in k0 and state in (RUN, STOPPING, SAFE):
        session.tick(k, state == RUN)
        if state == RUN:
            if session.ended:
                return STOPPING
            t = (k + 1 - k0[RUN]) * dt
            if t >= duration + 2.0 * sessions.SESSION_SPARE_S or session.broken is not None:
                return _last_resort(session, k)
            if t >= duration + sessions.SESSION_SPARE_S:
                _guard(session, k)
    if state == STOPPING and (k + 1 - k0[STOPPING]) * dt >= stop_s:
        return SHUTDOWN
    return None


def shut_down(drives, cur: np.ndarray, io, k: int) -> None:
    """Entering SHUTDOWN after cycle ``k``: the drives disabled, zero current sent with a
    SYNC (``io``: the run's :class:`~exo_rt.runtime.cycle_io.CycleIO`)."""
    for d in drives:
        d.request_disable()
    cur[:] = 0.0
    io.write(k)


def begin_run(law_state: np.ndarray, session, heels: HeelStrikes, dt: float, k: int) -> None:
    """Entering RUN after cycle ``k``: the law's state zero, the session begun (the activity
    machine holds the posture the leg is in), the run's time on the board's clock, the heel
    strikes of READY's last cycles taken."""
    law_state[:] = 0
    heels.t_run = heels.board.clock() + dt
    session.begin(k + 1)
    heels.take()


def _guard(sess, k: int) -> None:
    """The run's time is up: stop a walk (or cut what STOP may cut), end a frozen GO-held
    move now (its ``on_frozen``), END from a posture."""
    from firmware_bridge import requests as rq

    m = sess.machine
    if sess.guarded is None:
        sess.guarded = k
        sess.events.append({"cycle": k, "t": round(k * sess.dt, 6), "event": "run_time_up",
                            "why": "the session is still going past --duration + "
                                   f"{sessions.SESSION_SPARE_S:g} s: stopped (STOP, END)"})
    if m.motion is None:
        if not m.ended:
            sess.ask(rq.Request(rq.END, rq.SESSION), k)
    elif not m.stop_asked and m.motion.stoppable:
        sess.ask(rq.Request(rq.STOP, rq.SESSION), k)
    else:
        m.end_frozen()  # (a frozen GO-held move: its on_frozen move, next cycle)


LAST_RESORT_S = 1.0  # s: the freeze's longest wait before STOPPING, whatever moves


def _last_resort(sess, k: int) -> int | None:
    """The session could not be ended (the run is past its limit, or the session's code
    broke): whatever moves is frozen smoothly, then the run goes STOPPING, saying why — a
    run never ends in RUN."""
    m = sess.machine
    if sess.last_resort is None:
        sess.last_resort = k
        why = (f"the session's code failed ({sess.broken})" if sess.broken is not None
               else f"the session did not end {2.0 * sessions.SESSION_SPARE_S:g} s after "
                    f"--duration (posture {m.posture}, "
                    f"motion {m.motion.name if m.motion else None})")
        sess.events.append({"cycle": k, "t": round(k * sess.dt, 6), "event": "run_limit",
                            "why": why})
        m.freeze()
    if m.frozen() or (k - sess.last_resort) * sess.dt >= LAST_RESORT_S:
        return STOPPING
    return None


def run_cycle() -> int:
    """The control cycle RUN starts in (as :func:`lifecycle` steps READY → RUN): where
    ``--inject``'s T counts from."""
    return READY_CYCLES + 1


class HeelStrikes:
    """The wearer's heel strikes the ``board`` reported (none without one), taken in RUN: into
    the gait-phase estimate of the cycle (``s["heel"]``: its next cycle corrects the phase),
    and with ``reference.phase: events`` into the stride period's estimate
    (``phase_state``, the compiled cycle's)."""

    def __init__(self, board, reference, s, phase_state: np.ndarray) -> None:
        self.board, self.reference, self.s, self.phase_state = board, reference, s, phase_state
        self.from_events = reference.phase == "events"  # the wearer's strikes pace the gait
        self.t_run = 0.0  # s on the board's clock: when RUN began (begin_run)

    def take(self) -> None:
        """The strikes reported since the last cycle (none outside RUN)."""
        board = self.board
        if self.s["state"] != RUN or not board.heel_strikes:
            return
        strikes = board.heel_strikes
        ref = self.reference
        self.s["heel"] = 1.0
        while strikes:
            t = strikes.popleft()
            if self.from_events:
                trajectory.phase_on_heel_strike(self.phase_state, t - self.t_run,
                                                0.5 * ref.period, 2.0 * ref.period, 0.5)
