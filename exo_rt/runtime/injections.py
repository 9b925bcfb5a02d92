"""Fault injection on the simulated bus: ``--inject KIND[:JOINT]@T[+DURATION]``, ``T`` in
seconds from the start of RUN (the session's first cycle), ``DURATION``
how long it lasts.

Kinds the simulated drives act out (``drop``, ``delay``, ``corrupt``, ``duplicate``,
``heartbeat_loss``, ``emcy``, ``bus_off``, ``encoder_glitch``, ``overcurrent``,
``current_saturation``: at most 20 % of its peak current), another node acting as a master
on the simulated bus (``foreign_sync``: its own SYNC every period, which the drives answer
too; ``foreign_nmt_stop``, ``foreign_nmt_reset``: an NMT command to the joint's drive;
``foreign_sdo``: an SDO write of its target torque, 6071h; ``foreign_heartbeat``: a
heartbeat with the controller's node id), kinds the controller acts out on
itself (``nan``: a joint's measurement becomes NaN; ``overrun``: cycles compute for 1.5
periods), and kinds the board emulator acts out (``estop``, ``board_link_loss``).
"""

from __future__ import annotations

from dataclasses import dataclass

from exo_rt.errors import ConfigError

FOREIGN_KINDS = ("foreign_sync", "foreign_nmt_stop", "foreign_nmt_reset", "foreign_sdo",
                 "foreign_heartbeat")
INJECT_KINDS = ("drop", "delay", "corrupt", "duplicate", "heartbeat_loss", "emcy", "bus_off",
                "encoder_glitch", "overcurrent", "current_saturation", "overrun", "nan", "estop",
                "board_link_loss", *FOREIGN_KINDS)
SIM_KIND = {"drop": "drop", "delay": "delay", "corrupt": "corrupt", "duplicate": "duplicate",
            "current_saturation": "current_saturation",
            "heartbeat_loss": "heartbeat_loss", "emcy": "fault", "bus_off": "bus_off",
            "encoder_glitch": "encoder_glitch", "overcurrent": "overcurrent",
            **{k: k for k in FOREIGN_KINDS}}
BOARD_KINDS = ("estop", "board_link_loss")


@dataclass(frozen=True)
class Injection:
    """``--inject KIND[:JOINT]@T[+DURATION]`` (simulated bus only)."""

    kind: str
    joint: str | None
    t: float
    duration: float

    @staticmethod
    def parse(spec: str, joints: tuple[str, ...]) -> Injection:
        how = "write KIND[:JOINT]@T[+DURATION], e.g. drop:knee@2.0+0.05"
        try:
            head, _, when = spec.partition("@")
            kind, _, joint = head.partition(":")
            t, _, dur = when.partition("+")
            t_s, dur_s = float(t), float(dur) if dur else 0.0
        except ValueError:
            raise ConfigError(f"cannot read --inject '{spec}'", None, how) from None
        if kind not in INJECT_KINDS:
            raise ConfigError(f"unknown fault kind '{kind}' in --inject", None,
                              f"use one of {', '.join(INJECT_KINDS)}")
        if not when or t_s < 0 or dur_s < 0:
            raise ConfigError(f"--inject '{spec}' has no time", None, how)
        if joint and joint not in joints:
            raise ConfigError(f"--inject names unknown joint '{joint}'", None,
                              f"use one of {', '.join(joints)}")
        return Injection(kind, joint or None, t_s, dur_s)

    def cycles(self, dt: float) -> tuple[int, int]:
        """(first cycle, number of cycles) at period ``dt``."""
        return int(round(self.t / dt)), max(1, int(round(self.duration / dt)))


class InjectionPlan:
    """The controller-side windows of a run's injections, by cycle."""

    def __init__(self, injections: tuple[Injection, ...], dt: float, overrun_streak: int,
                 joint_names: tuple[str, ...], run_cycle: int = 0) -> None:
        """``run_cycle``: the control cycle RUN starts in, where an injection's T counts from
        (its windows here are control cycles from the loop's start)."""
        self.nan: list[tuple[int, int, int]] = []  # (from, to, joint index)
        self.overrun: list[tuple[int, int]] = []
        self.board: list[tuple[int, str, int]] = []  # (cycle, kind, cycles)
        self.sim: list[tuple[int, str, str | None, int]] = []  # (cycle, sim kind, joint, n)
        self.onsets: list[tuple[int, str, str | None]] = []  # (cycle, kind, joint)
        for inj in injections:
            k, n = inj.cycles(dt)
            k += run_cycle
            self.onsets.append((k, inj.kind, inj.joint))
            if inj.kind == "nan":
                self.nan.append((k, k + n, joint_names.index(inj.joint) if inj.joint else 0))
            elif inj.kind == "overrun":
                self.overrun.append((k, k + max(n, overrun_streak)))
            elif inj.kind in BOARD_KINDS:
                self.board.append((k, inj.kind, n))
            else:
                self.sim.append((k, SIM_KIND[inj.kind], inj.joint, n))
        self.any_nan = bool(self.nan)
        self.any_overrun = bool(self.overrun)

    def overrunning(self, k: int) -> bool:
        return any(k0 <= k < k1 for k0, k1 in self.overrun)

    def onset(self, k: int, joint: str | None) -> int:
        """The cycle a fault detected at cycle k started: its injection's, if one explains it."""
        onset = k
        for ik, kind, jname in self.onsets:
            anywhere = (jname is None or joint is None
                        or kind in ("bus_off", "overrun", *FOREIGN_KINDS))
            if ik <= k and (anywhere or joint == jname):
                # a heartbeat loss is only detectable once the consumer timeout has passed
                onset = ik if kind != "heartbeat_loss" else k
        return onset

    def schedule(self, rig) -> None:
        """The simulated bus's injections, each on its drive's node (all of the bus's for a
        bus-wide kind); the board's kinds need the board emulator."""
        for k, kind, joint, cycles in self.sim:
            for d in rig.drives:
                for cfg in d.config.drives:
                    if joint in (None, cfg.joint):
                        rig.bus_set.inject(k, kind, d.config.channel, cfg.node, cycles)
                        if joint is None:
                            break
        for _k, kind, _n in self.board:
            if not rig.board_emulated:
                raise ConfigError(f"--inject {kind} needs the board emulator", None,
                                  "run with --board emulator (the default)")

    def act_on_board(self, k: int, bus_set, dt: float) -> None:
        """Cycle k's board injections, told to the board emulator."""
        for k0, kind, cycles in self.board:
            if k == k0 and kind == "estop":
                bus_set.board_command("estop 1")
            elif k == k0:
                bus_set.board_command(f"stall {cycles * dt!r}")

