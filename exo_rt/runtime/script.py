"""The run's script: which state follows which, and when — READY (``READY_CYCLES``) →
ALIGN (a minimum-jerk move to the gait's start, ``align_s``) → RUN (the gait for the run's
duration; the board emulator's wearer starts walking) → STOPPING (the last posture held,
``stop_s``) → SHUTDOWN (the drives disabled). The one scripted activity a run has today;
the controller's update loop calls :func:`advance` at the end of every cycle."""

from __future__ import annotations

from exo_rt.control import trajectory
from exo_rt.runtime.states import ALIGN, READY, READY_CYCLES, RUN, SHUTDOWN, STOPPING

NEXT = {ALIGN: RUN, RUN: STOPPING, STOPPING: SHUTDOWN}


def next_state(state: int, k: int, k0: dict, dt: float, lasts: dict) -> int | None:
    """The state after cycle ``k`` (None: the same): READY → ALIGN after ``READY_CYCLES``;
    a timed state → the next once its time is up (``lasts``: s in ALIGN, RUN, STOPPING;
    ``k0``: the cycle each state began). The controller's run and the bench's run of the
    controller (:meth:`exo_rt.hil.bench.Bench.run_controller`) step by it."""
    if state == READY and k >= READY_CYCLES:
        return ALIGN
    if state in lasts and (k + 1 - k0[state]) * dt >= lasts[state]:
        return NEXT[state]
    return None


def advance(ctl, k: int) -> None:
    """The state change at the end of cycle ``k`` of the controller ``ctl``, if one is due."""
    dt, top = ctl.dt, ctl.top
    new = next_state(ctl.state, k, ctl.k0, dt,
                     {ALIGN: top.align_s, RUN: ctl.duration, STOPPING: top.stop_s})
    if new == ALIGN:
        ctl.q_align0[:] = ctl.q
    elif new == RUN:
        ctl.law_state[:] = 0
    elif new == SHUTDOWN:
        for d in ctl.drives:
            d.request_disable()
        ctl.cur[:] = 0.0
        ctl.io.write()
    if new is None:
        return
    ctl._go(new, k + 1)  # (STOPPING holds the last reference)
    if new == RUN:
        ctl._t_run = ctl.board.clock() + dt if ctl.board is not None else 0.0
        heel_strikes(ctl)  # those of ALIGN's last cycles
        if ctl.rig.board_emulated:  # the emulated wearer starts walking
            ctl.bus_set.board_command(f"walk {ctl._t_run!r}")


def run_cycle(dt: float, align_s: float) -> int:
    """The control cycle RUN starts in (as :func:`advance` steps READY → ALIGN → RUN):
    where ``--inject``'s T counts from."""
    align = 1
    while align * dt < align_s:
        align += 1
    return READY_CYCLES + 1 + align


def heel_strikes(ctl) -> None:
    """The wearer's heel strikes the board reported, into the gait phase's estimate (RUN,
    with ``reference.phase: events``)."""
    ref, board = ctl.cfg.reference, ctl.board
    if ctl.state != RUN or ref.phase != "events" or board is None:
        return
    while board.heel_strikes:
        trajectory.phase_on_heel_strike(ctl.phase_state,
                                        board.heel_strikes.popleft() - ctl._t_run,
                                        0.5 * ref.period, 2.0 * ref.period, 0.5)
