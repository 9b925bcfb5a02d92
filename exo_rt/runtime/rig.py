"""What the controller drives: its buses (real, simulated, or a recording), each bus's
drives by their protocol (:class:`exo_rt.bus.host.HostDrives`), and the embedded board.

The controller's configure step opens a :class:`Rig` (:func:`open_rig`); replay hands it one
made of a recording instead (:mod:`exo_rt.runtime.replay`) — the same controller runs on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from exo_rt.bus import protocols
from exo_rt.bus.host import HostDrives
from exo_rt.errors import BusError, ConfigError
from exo_rt.runtime.buses import BusSet, open_buses


class Board(Protocol):
    """The embedded board as a run uses it (:class:`firmware_bridge.link.BoardLink`; replay's
    recorded board; :class:`NoBoard` where the run has none): whether one is there
    (``present``), its status word each cycle, the heartbeat the controller sends, motor
    power, the wearer's heel strikes (s on its ``clock``), and its link's timeout (s)."""

    present: bool
    heel_strikes: deque
    link_timeout: float
    estop: bool
    motor_power: bool
    link_lost: bool
    status: object  # the last status frame (firmware_bridge.protocol.Status; None: none yet)
    decoder_state: object  # its decoder's state array (fastdecode's st), None: no sensors

    def poll(self) -> int: ...
    def take_news(self, news: int, now: float) -> None: ...
    def compiled_poll(self) -> tuple | None: ...
    def clock(self) -> float: ...
    def send_heartbeat(self, state: int, force: bool = False) -> None: ...
    def set_power(self, on: bool) -> None: ...
    def wait_for_status(self, timeout: float, tick=None) -> bool: ...
    def wait_for_power(self, timeout: float, tick=None) -> bool: ...
    def close(self) -> None: ...


class NoBoard(Board):
    """The board of a run that has none (the bench, ``--board none``): the :class:`Board`
    protocol with nothing behind it — never polled, nothing to send or switch, no heel
    strikes, no status (its watchdog is not checked), and motor power taken as on (there is
    no board to switch it). The cycle's io says ``board`` 0 for it (``present``)."""

    present = False
    link_timeout = 0.0  # s (io's default: the cycle never compares with it)
    estop = motor_power = link_lost = False
    status = None
    decoder_state = None  # (no sole sensors: the stance load is never fed forward)

    def __init__(self) -> None:
        self.heel_strikes: deque = deque(maxlen=1)  # (never one)

    def poll(self) -> int:
        return 0

    def compiled_poll(self) -> tuple | None:
        return None  # (nothing on a descriptor)

    def clock(self) -> float:
        return 0.0

    def wait_for_status(self, timeout: float, tick=None) -> bool:
        return False  # no status ever comes

    def wait_for_power(self, timeout: float, tick=None) -> bool:
        return True  # nothing to switch on


@dataclass
class Rig:
    """The buses (``bus_set``: opened by :func:`exo_rt.runtime.buses.open_buses`, or a
    recording's stand-in, :class:`~exo_rt.runtime.buses.BusSet`), their drives, the board
    link (:class:`NoBoard`: none) and whether it is the emulator (simulated injections need it)."""

    bus_set: BusSet
    drives: list[HostDrives]
    board: Board = field(default_factory=NoBoard)
    board_emulated: bool = False
    buttons: bool = False  # the board has crutch buttons a session hears (a live link's; a
    # recorded board's were heard then: replay asks the recorded requests)
    setup_lines: list[str] = field(default_factory=list)
    sync_instant: Callable[[int], float] | None = None  # when cycle k's SYNC left (None:
    # the scheduler's clock; a recording knows its own)

    @property
    def realtime(self) -> bool:
        """True on the wall clock (real buses, the simulation in its own process)."""
        return not self.bus_set.lockstep

    def close(self) -> None:
        """The board's motor power off and its link closed, then the buses."""
        self.board.set_power(False)
        self.bus_set.tick()  # (no board: the buses simulate none, nothing to advance)
        self.board.close()
        self.bus_set.close()

    def check_board_watchdog(self, reset_faults: bool) -> None:
        """Restart is explicit: a board whose watchdog cut motor power (its last controller
        went silent) is re-armed only when the operator asks (``--reset-faults``) — asking
        for power re-arms it, so it is not asked for silently."""
        b = self.board
        if not b.wait_for_status(1.0, tick=self.bus_set.tick):
            return  # no status (or no board): power_on reports the lost link
        if b.status.watchdog_tripped and not reset_faults:
            found = [r for r in (d.found_stopped() for d in self.drives) if r]
            raise BusError("the embedded board's watchdog has cut motor power: its last "
                           "controller went silent" + "".join(f"; {r}" for r in found), None,
                           "check what stopped the last controller, then start again with "
                           "--reset-faults (exo-rt run --reset-faults) to re-arm it explicitly")

    def power_on(self) -> None:
        """The board switches motor power on (2 s at most), else one clear error."""
        b = self.board
        if not b.wait_for_power(2.0, tick=self.bus_set.tick):
            raise BusError("the embedded board did not switch motor power on"
                           + (" (e-stop pressed)" if b.estop else ""), None,
                           "release the e-stop, check the board link and its supply")


def open_rig(top, bus_spec, options, cpus) -> Rig:
    """Open the buses and the board of ``top`` as the run's ``options`` (:class:`~exo_rt.
    runtime.options.RunOptions`) say, its helpers on ``cpus``: simulated, the plant is
    ``options.plant`` (default: the robot's own model — a different one stands for a leg the
    model does not match, e.g. on the bench); ``options.board``: ``emulator`` (with the
    simulated exoskeleton, or in its own process beside real buses), a pyserial URL, or
    None/``none`` (no board: bench use)."""
    o = options
    bus_set = open_buses(top, bus_spec, o, cpus, leading=_leading(o.wearer))
    rig = Rig(bus_set, [])
    try:
        if bus_set.process is not None:
            rig.setup_lines.append(f"simulation process {bus_set.process.pid}: "
                                   f"{bus_set.process.placement}")
        # each bus's host side from its protocol's registry entry (exo_rt.bus.protocols)
        dt = 1.0 / top.rate_hz
        rig.drives = [protocols.get(b.protocol).host_class()(bus, b, top.robot, period=dt)
                      for bus, b in zip(bus_set.buses, top.buses, strict=True)]
        _open_board(rig, top, o.board)
    except BaseException:
        bus_set.close()
        raise
    return rig


def _open_board(rig: Rig, top, url: str | None) -> None:
    if url is None or url == "none":
        return
    from firmware_bridge.link import BoardLink

    bs, timeout = rig.bus_set, top.safety.board_timeout
    rig.board_emulated = url == "emulator"
    rig.buttons = True
    if rig.board_emulated:
        path = bs.board_path()
        proc = bs.board_process
        if proc is not None:
            rig.setup_lines.append(f"board emulator process {proc.pid}: {proc.placement}")
        rig.board = BoardLink(path, clock=bs.clock, heartbeat_hz=250.0, link_timeout=timeout)
    else:
        rig.board = BoardLink(url, link_timeout=timeout, heartbeat_hz=250.0)


def _leading(wearer: str | None) -> bool:
    """Whether the run's wearer profile (a file, or None: the robot file's wearer, passive)
    walks with their own torques (``role: leading``). The profile is read again, and checked
    against the robot, with the session; a file that does not load is passive here and said
    there."""
    if wearer is None:
        return False
    from exo_rt.session.wearer import load_wearer

    try:
        return load_wearer(wearer).role == "leading"
    except (ConfigError, OSError):
        return False
