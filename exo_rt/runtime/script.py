"""The run's lifecycle between cycles: which state follows which, and when — READY
(``READY_CYCLES``) → RUN (the session: the activity machine, its requests and answers, until
END) → STOPPING (the last posture held, ``stop_s``) → SHUTDOWN (the drives disabled). The
controller's update loop calls :func:`advance` at the end of every cycle; the bench's run of
the controller steps by :func:`lifecycle` too."""

from __future__ import annotations

from exo_rt.control import trajectory
from exo_rt.runtime.states import READY, READY_CYCLES, RUN, SAFE, SHUTDOWN, STOPPING

SESSION_SPARE_S = 30.0  # s: a session still going this long after --duration is stopped


def lifecycle(state: int, k: int, k0: dict, dt: float, session, duration: float,
              stop_s: float) -> int | None:
    """The state after cycle ``k`` of a session's run (None: the same): READY → RUN after
    ``READY_CYCLES``; in RUN (and after it: a request in SAFE is answered, refused) the
    session's sources are heard and answered (:meth:`exo_rt.session.session.Session.tick`),
    and its END leads to STOPPING (the posture held ``stop_s``) → SHUTDOWN. A session still
    going ``SESSION_SPARE_S`` after ``duration`` is ended (:func:`_guard`). ``k0``: the
    cycle each state began. The controller's run and the bench's run of the controller
    (:meth:`exo_rt.hil.bench.Bench.run_controller`) step by it."""
    if state == READY and k >= READY_CYCLES:
        return RUN
    if RUN in k0 and state in (RUN, STOPPING, SAFE):
        session.tick(k, state == RUN)
        if state == RUN:
            if session.ended:
                return STOPPING
            t = (k + 1 - k0[RUN]) * dt
            if t >= duration + 2.0 * SESSION_SPARE_S or session.broken is not None:
                return _last_resort(session, k)
            if t >= duration + SESSION_SPARE_S:
                _guard(session, k)
    if state == STOPPING and (k + 1 - k0[STOPPING]) * dt >= stop_s:
        return SHUTDOWN
    return None


def advance(ctl, k: int) -> None:
    """The state change at the end of cycle ``k`` of the controller ``ctl``, if one is due
    (:func:`lifecycle`): entering RUN the session begins (the activity machine holds the
    posture the leg is in), entering SHUTDOWN the drives are disabled."""
    new = lifecycle(ctl.state, k, ctl.k0, ctl.dt, ctl.session, ctl.duration, ctl.top.stop_s)
    if new is None:
        return
    if new == SHUTDOWN:
        for d in ctl.drives:
            d.request_disable()
        ctl.cur[:] = 0.0
        ctl.io.write()
    ctl._go(new, k + 1)  # (STOPPING holds the last reference)
    if new == RUN:
        ctl.law_state[:] = 0
        ctl._t_run = ctl.board.clock() + ctl.dt if ctl.board is not None else 0.0
        ctl.session.begin(k + 1)
        heel_strikes(ctl)  # those of READY's last cycles
        if ctl.rig.board_emulated:  # the emulated wearer's heel strikes follow the session
            from exo_rt.sim.crutch import WearerGait
            ctl.session.add(WearerGait(ctl), listens=True)


def _guard(sess, k: int) -> None:
    """The run's time is up: stop a walk (or cut what STOP may cut), end a frozen GO-held
    move now (its ``on_frozen``), END from a posture."""
    from exo_rt.session import requests as rq

    m = sess.machine
    if sess.guarded is None:
        sess.guarded = k
        sess.events.append({"cycle": k, "t": round(k * sess.dt, 6), "event": "run_time_up",
                            "why": "the session is still going past --duration + "
                                   f"{SESSION_SPARE_S:g} s: stopped (STOP, END)"})
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
               else f"the session did not end {2.0 * SESSION_SPARE_S:g} s after --duration "
                    f"(posture {m.posture}, motion {m.motion.name if m.motion else None})")
        sess.events.append({"cycle": k, "t": round(k * sess.dt, 6), "event": "run_limit",
                            "why": why})
        m.freeze()
    if m.frozen() or (k - sess.last_resort) * sess.dt >= LAST_RESORT_S:
        return STOPPING
    return None


def run_cycle() -> int:
    """The control cycle RUN starts in (as :func:`advance` steps READY → RUN): where
    ``--inject``'s T counts from."""
    return READY_CYCLES + 1


def heel_strikes(ctl) -> None:
    """The wearer's heel strikes the board reported (RUN): into the gait-phase estimate of the
    cycle (its next cycle corrects the phase), and with ``reference.phase: events`` into the
    stride period's estimate."""
    ref, board = ctl.cfg.reference, ctl.board
    if ctl.state != RUN or board is None or not board.heel_strikes:
        return
    ctl.s["heel"] = 1.0
    while board.heel_strikes:
        t = board.heel_strikes.popleft()
        if ref.phase == "events":
            trajectory.phase_on_heel_strike(ctl.phase_state, t - ctl._t_run,
                                            0.5 * ref.period, 2.0 * ref.period, 0.5)
