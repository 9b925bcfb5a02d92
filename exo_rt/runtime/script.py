"""The run's script: which state follows which, and when — READY (``READY_CYCLES``) →
ALIGN (a minimum-jerk move to the gait's start, ``align_s``) → RUN (the gait for the run's
duration; the board emulator's wearer starts walking) → STOPPING (the last posture held,
``stop_s``) → SHUTDOWN (the drives disabled). The one scripted activity a run has today;
the controller's update loop calls :func:`advance` at the end of every cycle."""

from __future__ import annotations

from exo_rt.control import trajectory
from exo_rt.runtime.states import ALIGN, READY, READY_CYCLES, RUN, SHUTDOWN, STOPPING


def advance(ctl, k: int) -> None:
    """The state change at the end of cycle ``k`` of the controller ``ctl``, if one is due."""
    state, dt, top = ctl.state, ctl.dt, ctl.top
    if state == READY and k >= READY_CYCLES:
        ctl.q_align0[:] = ctl.q
        ctl._go(ALIGN, k + 1)
    elif state == ALIGN and (k + 1 - ctl.k0[ALIGN]) * dt >= top.align_s:
        ctl.law_state[:] = 0
        ctl._go(RUN, k + 1)
        ctl._t_run = ctl.board.clock() + dt if ctl.board is not None else 0.0
        heel_strikes(ctl)  # those of ALIGN's last cycles
        if ctl.rig.board_emulated:  # the emulated wearer starts walking
            ctl.bus_set.board_command(f"walk {ctl._t_run!r}")
    elif state == RUN and (k + 1 - ctl.k0[RUN]) * dt >= ctl.duration:
        ctl._go(STOPPING, k + 1)  # holds the last reference
    elif state == STOPPING and (k + 1 - ctl.k0[STOPPING]) * dt >= top.stop_s:
        for d in ctl.drives:
            d.request_disable()
        ctl.cur[:] = 0.0
        ctl.io.write()
        ctl._go(SHUTDOWN, k + 1)


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
