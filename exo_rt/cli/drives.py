"""``exo-rt drives``: emulated drives on the simulated plant, served to a controller in
another process (over a serial-line CAN pty, or in real time over UDP multicast)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from exo_rt.cli.common import Command, check_pose

MAX_PID = 4194304  # Linux's largest pid_max (2^22)


def _room_option(text: str) -> dict:
    """--room's JSON object (the simulation: section's room keys), or one clear error."""
    from exo_rt.errors import ConfigError

    try:
        room = json.loads(text)
    except json.JSONDecodeError as e:
        room = e
    if not isinstance(room, dict):
        raise ConfigError(f"--room {text!r} is not a JSON object", None,
                          "give e.g. --room '{\"scene\": \"floor\", \"support\": 0.3}'")
    from exo_rt.model.parsing import did_you_mean
    from exo_rt.schema.top import ROOM_KEYS

    for key in room:
        if key not in ROOM_KEYS:
            raise ConfigError(f"--room: unknown key {key!r}", None,
                              did_you_mean(str(key), ROOM_KEYS)
                              or f"use the simulation section's {', '.join(ROOM_KEYS)}")
    return room


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="ROBOT", help="the robot file")
    p.add_argument("--buses", required=True, metavar="FILE", help="the bus file")
    p.add_argument("--bus", default="slcan-server", metavar="SPEC",
                   help="slcan-server: one bus on a new pseudo-terminal, in lockstep with the "
                        "host's SYNCs [default]; udp_multicast[:GROUP]: every bus (or "
                        "--channel) on python-can's udp_multicast interface, physics in real "
                        "time (bus i on GROUP with its 2nd byte + i; default from the pid)")
    p.add_argument("--channel", help="which bus of the bus file to serve (default: the first "
                                     "with slcan-server, all with udp_multicast)")
    p.add_argument("--pose", type=float, nargs="*", default=None,
                   help="initial joint angles (rad), default all 0")
    p.add_argument("--plant", default="harmonic_drive", metavar="NAME",
                   help="the plant model (a registered one: exo_rt.sim.plants; a top config's "
                        "simulation: {plant: NAME}, set by exo-rt run) [harmonic_drive]")
    p.add_argument("--room", default="{}", metavar="JSON",
                   help="where the plant's exoskeleton stands: the top config's simulation: "
                        "room keys as a JSON object, e.g. '{\"scene\": \"floor\"}' (set by "
                        "exo-rt run; docs/world.md) [{}]")
    p.add_argument("--parent", type=int, default=None, metavar="PID",
                   help="end --linger s after this process is gone (set by exo-rt run)")
    p.add_argument("--linger", type=float, default=5.0, metavar="S",
                   help="seconds the drives and the leg go on after --parent is gone")
    p.add_argument("--board", action="store_true",
                   help="with udp_multicast: also the embedded board, emulated on a new "
                        "pseudo-terminal (printed as board=PATH); its power relay feeds the "
                        "simulated drives")
    p.add_argument("--trace", metavar="FILE.npz",
                   help="with udp_multicast: record the leg every period (joint angles, motor "
                        "currents, power stages, the relay) and save it to FILE.npz at the end "
                        "(exo_rt.sim.trace: what the drives and the board did once the "
                        "controller could not)")
    p.add_argument("--lead", nargs=3, metavar=("NAME", "ROWS", "COLS"),
                   help="with udp_multicast: a leading wearer's reference rows, a shared-memory "
                        "block of the cycle's rows (set by a real-time exo-rt run; exo_rt.sim."
                        "lead): their Leader is prepared on it and acts from the line 'lead'")
    p.add_argument("--fifo", type=int, default=None, metavar="PRIORITY",
                   help="with udp_multicast: the simulation's SCHED_FIFO priority, below the "
                        "controller's (it stands in for the drives' hardware) [70: 10 below "
                        "the control thread's default 80]; 0 leaves the scheduling as started")


def _drives_fifo(priority: int | None) -> str:
    """The real-time simulation's scheduling, taken by itself (started by hand or by
    ``exo-rt run --realtime``): SCHED_FIFO ``priority`` (default: 10 below the control thread's
    default), or one line saying why not."""
    from exo_rt.processes import policy_of
    from exo_rt.runtime.loop import take_fifo
    from exo_rt.sim.launch import hardware_fifo

    if priority == 0:
        return f"set-up: scheduling: {policy_of(0)} as started (--fifo 0)"
    priority = hardware_fifo() if priority is None else priority
    took = take_fifo(priority)
    if took.startswith("in effect"):
        return f"set-up: SCHED_FIFO: {took}"
    return (f"set-up: SCHED_FIFO: {took}; the simulated drives run {policy_of(0)} and may "
            f"answer late (a stale-feedback stop): start them with chrt -f {priority}")


def handle(args: argparse.Namespace) -> int:
    """Serve emulated drives on the simulated plant to a controller in another process: over a
    serial-line CAN endpoint (python-can's slcan interface opens the printed pty), or in real
    time over python-can's udp_multicast interface (what `exo-rt run --realtime` starts)."""
    import gc
    import signal

    import numpy as np

    from exo_rt.bus.config import load_buses
    from exo_rt.errors import ConfigError
    from exo_rt.model import load_mechanism
    from exo_rt.model.parsing import did_you_mean
    from exo_rt.sim import plants
    from exo_rt.sim.simbus import SimWorld

    kind, _, group = args.bus.partition(":")
    if kind not in ("slcan-server", "udp_multicast"):
        raise ConfigError(f"unsupported --bus '{args.bus}' for exo-rt drives", None,
                          "use --bus slcan-server or --bus udp_multicast[:GROUP]")
    if args.fifo is not None and not 0 <= args.fifo <= 99:
        raise ConfigError(f"--fifo {args.fifo} is not a SCHED_FIFO priority", None,
                          "give 1 … 99, below the controller's (80 by default), or 0")
    mech = load_mechanism(args.config)
    check_pose(args.pose, mech, "--pose")
    buses = load_buses(args.buses, mech)
    channels = [b.channel for b in buses]
    if args.channel and args.channel not in channels:
        raise ConfigError(f"no bus '{args.channel}' in {args.buses}", None,
                          f"use one of {', '.join(channels)}")
    if args.plant not in plants.NAMES:
        names = list(plants.NAMES)
        raise ConfigError(f"unknown plant model '{args.plant}'", None,
                          did_you_mean(args.plant, names) or f"use one of {', '.join(names)}")
    try:
        world = SimWorld.open("drives", mech, buses, plant_model=args.plant,
                              plant_room=_room_option(args.room))
    except ValueError as e:  # a room the plant model cannot take (a scene it has not …)
        raise ConfigError(f"--plant {args.plant} --room {args.room}: {e}", None,
                          "give the room keys of a top config's simulation section "
                          "(docs/world.md, 'The floor scene')") from None
    world.warm_up(np.array(args.pose if args.pose else np.zeros(mech.nq)))
    signal.signal(signal.SIGINT, signal.SIG_IGN if args.parent else signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if kind == "slcan-server":
        from exo_rt.sim.slcan_server import SlcanServer

        server = SlcanServer(world, args.channel or channels[0])
        print(f"serving bus {server.channel} on {server.path}", flush=True)
        try:
            server.serve_forever()
        finally:
            server.close()
        return 0
    import can

    from exo_rt.bus.port import open_port
    from exo_rt.sim.launch import group_for
    from exo_rt.sim.server import RealtimeServer

    ports, served = {}, []
    for i, channel in enumerate(channels):
        if args.channel and channel != args.channel:
            continue
        if group:
            a, b_, c_, d_ = (int(x) for x in group.split("."))
            address = f"{a}.{b_ + i}.{c_}.{d_}"
        else:
            address = group_for(i)
        bus = can.Bus(interface="udp_multicast", channel=address)
        ports[channel] = open_port(bus)
        served.append(f"{channel}=udp_multicast:{address}")
    board = None
    if args.board:
        from firmware_bridge.emulator import BoardEmulator

        board = BoardEmulator()
        served.append(f"board={board.path}")
    # command lines on standard input: fault injection, the board's buttons (docs/cli.md)
    trace = None
    if args.trace:
        from exo_rt.sim.trace import PlantTrace

        trace = PlantTrace(world)
    leader = block = None
    if args.lead:  # (prepared before serving: built when the session begins, it would stall)
        from exo_rt.sim import lead

        exo = mech if str(args.config).endswith(".urdf") else load_mechanism(args.config,
                                                                             wearer=False)
        try:
            leader, block = lead.prepare(world, mech, exo, args.lead)
        except (OSError, ValueError) as e:  # (the block gone: its run has ended)
            print(f"set-up: leading wearer: none ({e})", flush=True)
    server = RealtimeServer(world, ports, board=board, commands=sys.stdin.fileno(), trace=trace,
                            leader=leader)
    gc.collect()
    gc.freeze()  # the served world's objects: no collector pauses between SYNC and TPDOs
    gc.disable()
    from exo_rt.runtime.loop import lock_all_memory

    # like the controller: no page of the simulation is reclaimed and read back mid-run (a
    # disk read stalls the drives for ms). Locked before it serves: mlockall(MCL_CURRENT)
    # faults in and pins every page the process maps (≈ 0.1 s here), and a thread doing it
    # beside the serving loop held the loop's own mappings (the truth ring's attach: 110–145
    # ms) behind it. What it maps while serving is locked as it is touched, not all at once.
    t0 = time.perf_counter()
    locked = lock_all_memory(future_on_fault=True)
    print(f"simulation: mlockall {locked} ({1e3 * (time.perf_counter() - t0):.0f} ms)",
          file=sys.stderr, flush=True)
    print(_drives_fifo(args.fifo), flush=True)
    print("serving " + " ".join(served), flush=True)
    try:
        server.serve(parent=args.parent, linger=args.linger)
    finally:
        print(server.report(), file=sys.stderr, flush=True)
        if leader is not None and world.wearer is leader:
            print(lead.report(leader, mech.joint_names), file=sys.stderr, flush=True)
            if os.environ.get(lead.LOG_ENV):  # their torque and the state it acted on by
                np.save(os.environ[lead.LOG_ENV], leader.rows_logged())  # period, to look at
        if block is not None:
            block.close()
        for port in ports.values():
            port.bus.shutdown()
        if trace is not None:
            trace.save(args.trace)
    return 0


COMMAND = Command(
    "drives", "serve emulated drives on a serial-line CAN pty", setup, handle,
    numbers={"parent": (1, MAX_PID, True, ""), "linger": (0.0, 3600.0, True, "s")},
    pose="pose")
