"""The ``exo-rt`` command (every subcommand: docs/cli.md).

Each subcommand is a module of this package declaring its :class:`~exo_rt.cli.common.Command`
(its name, help, arguments and handler), registered in :data:`COMMANDS`. User errors
(:class:`exo_rt.errors.ExoError`) print one line and exit 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from exo_rt import __version__
from exo_rt.cli import run
from exo_rt.cli.common import MAX_JOBS, Command, LazyChoices, call, check_pose, default_config
from exo_rt.errors import ExoError

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



def _setup_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a top config (configs/exo_leg.yaml: it and every file it "
                                "names), a robot .yaml or a .urdf file, a session script, an "
                                "activities file (with --robot) or a wearer profile")
    p.add_argument("--buses", metavar="FILE",
                   help="with a robot file: a bus file, checked, with its bus load")
    p.add_argument("--rate", type=float, default=None,
                   help="control rate (Hz) for the load (default: the top config's, else 1000)")
    p.add_argument("--bus", action="append", default=None, metavar="[NAME=]SPEC",
                   help="with --buses: what `exo-rt run --bus` would open (repeatable)")
    p.add_argument("--strict", action="store_true",
                   help="refuse the model's warnings (implausible inertias, floating joints)")
    p.add_argument("--robot", metavar="FILE",
                   help="with an activities file (needed) or a wearer profile: the robot it "
                        "is for — a robot file or a top config (the wearer's walking table); "
                        "with a session script: the top config it runs with (default "
                        "configs/exo_leg.yaml)")
    p.add_argument("--activities", metavar="FILE",
                   help="with a session script: the activities file it runs with (default "
                        "the robot's, as exo-rt run)")
    p.add_argument("--wearer", metavar="FILE",
                   help="with a session script: the wearer profile it runs with (default the "
                        "robot file's, as exo-rt run)")


CONFIG_KINDS = ("top", "robot", "buses", "controller", "bench", "activities", "session",
                "wearer")  # the schema's file kinds


def config_kind(path) -> str:
    """Which kind of config file ``path`` is: its ``$schema`` line (``…/top.schema.json``)
    if it has one, else its keys — a top config names ``robot`` and ``buses`` files, a bus
    file has ``buses``, a controller file a ``law``, an activities file ``motions``, a
    session script ``steps``, a wearer profile ``height`` and ``mass`` (and no ``bodies``);
    anything else (a .urdf) is a robot."""
    import re
    from pathlib import Path

    from exo_rt.errors import ConfigError
    from exo_rt.yamlio import read_yaml

    path = Path(path)
    if path.suffix.lower() not in (".yaml", ".yml"):
        return "robot"  # a .urdf (the model loader names any other suffix)
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            head = f.read(4096).splitlines()[:3]
    except OSError:
        return "robot"  # the loader says what is wrong with the file
    for line in head:
        m = re.search(r"\$schema=\S*?([a-z]+)\.schema\.json", line)
        if m and m.group(1) in CONFIG_KINDS:
            return m.group(1)
    try:
        keys = read_yaml(path, ConfigError).value
    except ExoError:
        return "robot"  # the loader reports it, as for any robot file
    keys = set(keys) if isinstance(keys, dict) else set()
    if {"robot", "buses"} <= keys or {"robot", "controller"} <= keys:
        return "top"
    if "buses" in keys:
        return "buses"
    if "law" in keys:
        return "controller"
    if "motions" in keys:
        return "activities"
    if "steps" in keys:
        return "session"
    if {"height", "mass"} <= keys and not keys & {"bodies", "joints", "include", "urdf"}:
        return "wearer"
    return "robot"


def _print_transmissions(mech, current_limit=None) -> None:
    """A line per harmonic drive: ratio, motor, and the joint torque at the drive's peak
    current (and at the controller's current limit, when given): exo_rt.hil.limits."""
    from exo_rt.hil.limits import limit_text

    for tr in mech.transmissions:
        m = tr.motor
        line = (f"  transmission {tr.joint}: harmonic drive N = {tr.ratio:g} "
                f"(rotor {tr.rotor_joint}, multiplier {tr.multiplier:g}, efficiency "
                f"{tr.drive.efficiency:g}), motor {m.name or '?'} k_M = {m.torque_constant:g} "
                f"N·m/A, peak {limit_text(tr, m.peak_current)}")
        if current_limit is not None:
            a = float(current_limit[mech.joint_names.index(tr.joint)])
            line += f"; controller's current limit {limit_text(tr, a)}"
        print(line)


def _print_buses(buses, rate: float, specs) -> None:
    from exo_rt.runtime.buses import describe, resolve_specs

    for bus in buses:
        nodes = ", ".join(f"{d.joint}@{d.node}" for d in bus.drives)
        print(f"  bus {bus.name}: {bus.protocol}, {bus.interface} {bus.bitrate / 1e6:g} "
              f"Mbit/s, {nodes}; load {100 * bus.load(rate):.0f} % at {rate:g} Hz")
    for line in describe(buses, resolve_specs(buses, specs)):
        print(f"  opens {line}")


def _eds_files(buses_path) -> list:
    """The EDS files a bus file names (``eds:`` keys, relative to the bus file)."""
    from pathlib import Path

    from exo_rt.errors import ConfigError
    from exo_rt.yamlio import read_yaml

    found: list = []

    def walk(node) -> None:
        value = node.value
        if isinstance(value, dict):
            for key, sub in value.items():
                if key == "eds" and isinstance(sub.value, str):
                    p = Path(sub.file).parent / sub.value
                    if p not in found:
                        found.append(p)
                else:
                    walk(sub)
        elif isinstance(value, list):
            for sub in value:
                walk(sub)

    walk(read_yaml(Path(buses_path), ConfigError))
    return found


def _check_top(args: argparse.Namespace) -> int:
    """``exo-rt check TOP.yaml``: the top config and every file it names (robot, buses with
    their EDS files, controller), checked together as a run loads them: one report."""
    from exo_rt.errors import ConfigError
    from exo_rt.model import load_mechanism
    from exo_rt.runtime.config import load_top

    if args.buses:
        raise ConfigError(f"--buses is for a robot file; {args.file} is a top config", None,
                          "leave --buses out: the top config names its bus file")
    top = load_top(args.file)
    mech = load_mechanism(top.robot_path, strict=True) if args.strict else top.robot
    rate = args.rate if args.rate is not None else top.rate_hz
    cfg = top.controller
    eds = _eds_files(top.buses_path)
    print(f"top config {args.file}: {top.rate_hz:g} Hz, run folders under "
          f"{top.runs_dir}/")
    print(f"robot {top.robot_path}")
    print(mech.describe())
    _print_transmissions(mech, cfg.current_limit)
    print(f"buses {top.buses_path}" + (f" (EDS {', '.join(str(p) for p in eds)})" if eds
                                         else ""))
    _print_buses(top.buses, rate, args.bus)
    print(f"controller {cfg.source}: {cfg.law} for {', '.join(mech.joint_names)}")
    from exo_rt.session import session as sessions
    for line in sessions.check_lines(top):  # (each motion's peaks against the governor's)
        print(line)
    _print_warnings(mech)
    n = 3 + len(eds)
    print(f"ok: {args.file} and the {n} files it names")
    return 0


def _print_warnings(mech) -> None:
    if mech.warnings:
        print(f"{len(mech.warnings)} warning{'s' if len(mech.warnings) > 1 else ''} "
              "(loaded as written; --strict refuses them):")
        for w in mech.warnings:
            print(f"  warning: {w}")


def _check_robot_option(args: argparse.Namespace, needed_by: str | None = None):
    """``--robot FILE`` (a robot file or a top config) → (Mechanism, the safety's joint
    margin in rad), or None when it was not given (ConfigError when ``needed_by`` needs it)."""
    from exo_rt.errors import ConfigError
    from exo_rt.model import load_mechanism
    from exo_rt.session.activities import MARGIN

    if args.robot is None:
        if needed_by is not None:
            raise ConfigError(f"{args.file} is {needed_by}: it is checked against the robot "
                              "it is for", None, "give --robot FILE (a robot file, or a top "
                              "config such as configs/exo_leg.yaml)")
        return None
    if config_kind(args.robot) == "top":
        from exo_rt.runtime.config import load_top

        top = load_top(args.robot)
        return top.robot, top.safety.joint_margin
    return load_mechanism(args.robot, strict=args.strict), MARGIN


def _check_session(args: argparse.Namespace) -> int:
    """``exo-rt check SESSION.yaml [--robot TOP] [--activities FILE] [--wearer FILE]``: the
    script checked against the files ``exo-rt run --session`` runs it with (its motions,
    legs and start posture against the activities file, which it names), where it starts,
    and its steps, each with when it is made."""
    from pathlib import Path

    from exo_rt.errors import ConfigError
    from exo_rt.runtime.config import load_top
    from exo_rt.session.session import load_files

    config = Path(args.robot) if args.robot is not None else default_config()
    if config_kind(config) != "top":
        raise ConfigError(f"{config} is a {config_kind(config)} file; a session script is "
                          "checked against the top config it runs with", None,
                          "give --robot CONFIG, a top config such as configs/exo_leg.yaml")
    script, acts, _ = load_files(load_top(config), args.file, args.activities, args.wearer)
    print(f"session script {args.file}" + (f": {script.description}" if script.description
                                           else ""))
    print(f"  checked against {_shown(acts.source)} (its motions, legs and postures), as "
          f"exo-rt run --config {_shown(config)} runs it")
    if script.start is None:
        print("  starts wherever the leg is")
    else:
        angles = ", ".join(f"{j} {x:.3g}" for j, x in zip(acts.joint_names,
                                                          acts.posture_q(script.start),
                                                          strict=True))
        print(f"  starts {script.start} ({angles} rad): the simulated leg is put there; on "
              f"real drives the session begins only with every joint within "
              f"{acts.tolerance:g} rad of it")
    for i, step in enumerate(script.steps, 1):
        print(f"  {i:2d}. {step.describe():<24} {_when(step)}")
    print(f"  the run's --duration unless given: {script.run_duration(None):g} s")
    print(f"ok: {len(script.steps)} step{'s' if len(script.steps) != 1 else ''}")
    return 0


def _shown(path) -> str:
    """A path as a line shows it: relative to the working directory when it is inside it."""
    from pathlib import Path

    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _when(step) -> str:
    """When a session script's step is made, in words."""
    wait = "--duration" if step.wait_duration else f"{step.wait:g} s"
    if step.at is not None:
        return f"at {step.at:g} s"
    if step.after == "strides":
        head = f"after {step.strides} stride{'s' if step.strides != 1 else ''}"
    elif step.after is not None:
        head = f"once the step before is {step.after}"
    else:
        head = "after the step before is made"
    return head + (f", then {wait} later" if step.wait_duration or step.wait else "")


def _check_wearer(args: argparse.Namespace) -> int:
    """``exo-rt check WEARER.yaml [--robot FILE]``: the profile; with the robot, checked
    against it (joint names, ranges, the longest step) and its walking table."""
    from exo_rt.session.wearer import load_wearer, table

    robot = _check_robot_option(args)
    mech = robot[0] if robot is not None else None
    w = load_wearer(args.file, mech)
    sp, sl = w.speed, w.step_length
    print(f"wearer profile {args.file}" + (f": {w.description}" if w.description else ""))
    print(f"  height {w.height:g} m, mass {w.mass:g} kg, {w.sex}")
    print(f"  speed {sp.min:g}–{sp.max:g} m/s, starts at {sp.default:g} m/s, presets "
          f"{', '.join(f'{v:g}' for v in sp.presets)} m/s; step length {sl.min:g}–{sl.max:g} m")
    legs = ", ".join(f"{leg} {v:g}" for leg, v in w.assistance.legs.items())
    print(f"  assistance {w.assistance.default:g}" + (f" ({legs})" if legs else ""))
    for joint, r in w.range_of_motion.items():
        print(f"  range of motion {joint}: {r.lower:g} … {r.upper:g} rad")
    for name, angles in w.postures.items():
        print(f"  posture {name}: " + ", ".join(f"{j} {q:g}" for j, q in angles.items())
              + " rad")
    if mech is None:
        print("  (give --robot FILE for the walking table: cadence, step and stride length at "
              "each speed on that robot)")
    else:
        speeds = sorted({sp.min, *sp.presets, sp.default, sp.max})
        print(f"  walking on {mech.name}: speed m/s | cadence steps/min | stride period s | "
              "step m | stride m | amplitude")
        for v, c, t, step, stride, a in table(speeds, mech, w):
            print(f"    {v:5.2f} | {c:6.1f} | {t:6.3f} | {step:6.3f} | {stride:6.3f} | {a:5.3f}")
    print(f"ok: {args.file}" + (f" for {args.robot}" if mech is not None else ""))
    return 0


def _check_activities(args: argparse.Namespace) -> int:
    """``exo-rt check ACTIVITIES.yaml --robot FILE``: the postures, the motions, and which
    motions may start in each posture."""
    from exo_rt.session.activities import load_activities

    mech, margin = _check_robot_option(args, needed_by="an activities file")
    a = load_activities(args.file, mech, margin)
    print(f"activities {args.file} for {mech.name}" + (f": {a.description}" if a.description
                                                       else ""))
    print(f"  postures (every joint within {a.tolerance:g} rad of one: in it):")
    for name, q in a.postures.items():
        print(f"    {name}: " + ", ".join(f"{j} {x:.3f}"
                                          for j, x in zip(a.joint_names, q, strict=True))
              + " rad")
    print("  motions (in the crutch menu's order):")
    for m in a.motions:
        peak = f", ≤ {m.max_speed:g} rad/s" if m.max_speed is not None else ""
        if m.kind == "walk":
            pace = f"opening {m.opening:g}, closing {m.closing:g} stride"
        else:  # a homing move's: its shortest (it goes from wherever the leg is)
            pace = f"{'≥ ' if m.kind == 'home' else ''}{m.duration:.3g} s{peak}"
        marks = [w for w, on in (("GO held", m.hold_go), ("stoppable", m.stoppable),
                                 ("needs CONFIRM", m.needs_confirm)) if on]
        print(f"    {m.name}: {m.kind} {m.start or 'anywhere'} → {m.end}, {pace}"
              + (f" ({', '.join(marks)})" if marks else ""))
    print("  possible motions:")
    for posture in (*a.postures, None):
        print(f"    {posture or 'in no named posture'}: "
              f"{', '.join(a.possible(posture)) or '—'}")
    print(f"ok: {args.file} for {args.robot}")
    return 0


SESSION_CHECKS = {"session": _check_session, "wearer": _check_wearer,
                  "activities": _check_activities}


def cmd_check(args: argparse.Namespace) -> int:
    """Validate a config file and print what it describes. A top config: it and every file it
    names, as a run loads them (robot, buses and their EDS files and load, the controller
    against the robot). A robot file (or URDF): the model — bodies, joints (order of q),
    mass, limits, its drives — then its warnings (what loads but is physically implausible;
    --strict refuses them). A session script: its steps. A wearer profile: its values (with
    --robot: checked against the robot, and its walking table). An activities file (with
    --robot): its postures, motions and the motions possible in each posture. A bus or
    controller file alone: what to check instead."""
    from exo_rt.errors import ConfigError
    from exo_rt.model import load_mechanism

    kind = config_kind(args.file)
    what = {"top": "top config", "buses": "bus file"}.get(kind, f"{kind} file")
    if args.robot is not None and kind not in ("activities", "wearer", "session"):
        raise ConfigError(f"--robot is for an activities file, a wearer profile or a session "
                          f"script; {args.file} is a {what}", None, "leave --robot out")
    for option in ("activities", "wearer"):
        if getattr(args, option) is not None and kind != "session":
            raise ConfigError(f"--{option} is for a session script; {args.file} is a {what}",
                              None, f"leave --{option} out")
    if kind in SESSION_CHECKS:
        if args.buses:
            raise ConfigError(f"--buses is for a robot file; {args.file} is a {kind} file",
                              None, "leave --buses out")
        return SESSION_CHECKS[kind](args)
    if kind == "top":
        return _check_top(args)
    if kind == "bench":
        raise ConfigError(f"{args.file} is a bench options file", None,
                          "it is checked where it is used: exo-rt bench-test NAME --options "
                          "FILE")
    if kind != "robot":
        raise ConfigError(f"{args.file} is a {'bus' if kind == 'buses' else kind} file, "
                          "checked with the robot it drives",
                          None, "check the top config that names it (exo-rt check "
                          "configs/exo_leg.yaml)" + (", or its robot file with --buses FILE"
                                                     if kind == "buses" else ""))
    mech = load_mechanism(args.file, strict=args.strict)
    print(mech.describe())
    _print_transmissions(mech)
    if args.buses:
        from exo_rt.bus.config import load_buses

        rate = args.rate if args.rate is not None else 1000.0
        _print_buses(load_buses(args.buses, mech, rate), rate, args.bus)
    _print_warnings(mech)
    return 0


def _setup_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (smoke run)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")


def cmd_bench(args: argparse.Namespace) -> int:
    """Dynamics benchmark side by side with Pinocchio (packaged quick version; the full
    interleaved benchmark with raw-kernel and njit columns is tools/bench_dynamics.py)."""
    from exo_rt import bench

    argv = (["--quick"] if args.quick else []) + (["--json", args.json] if args.json else [])
    return bench.main(argv)


def _setup_drives(p: argparse.ArgumentParser) -> None:
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


def cmd_drives(args: argparse.Namespace) -> int:
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
    server = RealtimeServer(world, ports, board=board, commands=sys.stdin.fileno(), trace=trace)
    gc.collect()
    gc.freeze()  # the served world's objects: no collector pauses between SYNC and TPDOs
    gc.disable()
    import threading

    from exo_rt.runtime.loop import lock_all_memory

    # like the controller: no page of the simulation is reclaimed and read back mid-run (a
    # disk read stalls the drives for ms); locked beside the serving loop, not before it
    threading.Thread(target=lock_all_memory, name="mlockall", daemon=True).start()
    print(_drives_fifo(args.fifo), flush=True)
    print("serving " + " ".join(served), flush=True)
    try:
        server.serve(parent=args.parent, linger=args.linger)
    finally:
        print(server.report(), file=sys.stderr, flush=True)
        for port in ports.values():
            port.bus.shutdown()
        if trace is not None:
            trace.save(args.trace)
    return 0


def _setup_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="ARCHIVE",
                   help="run folders, folders of runs (an archive, at any depth), or bare CAN "
                        "logs (.blf/.asc/.log) with --config")
    p.add_argument("--config", metavar="FILE",
                   help="top config naming the bus mapping, to replay a bare CAN log; for a "
                        "run folder, refused where it differs from the run's own copy")
    p.add_argument("--allow-config-change", action="store_true",
                   help="replay run folders with --config although it differs from the "
                        "config they recorded (each difference is printed)")
    p.add_argument("--mode", required=True, choices=("plant", "controller", "closed-loop"))
    p.add_argument("--controller", metavar="NAME|FILE",
                   help="controller to compare with (controller and closed-loop modes)")
    p.add_argument("--jobs", type=int, default=1,
                   help="replay several runs in parallel (local processes, or a local Ray's CPUs)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray (the cluster extra; docs/scale.md)")
    p.add_argument("--address", metavar="ray://HOST:10001",
                   help="with --engine ray: the cluster to use (default: a local Ray)")
    p.add_argument("--out", metavar="DIR",
                   help="write replay-summary.csv/.json/.png and the result cache here "
                        "(default: the archive, when a folder of runs is given)")
    p.add_argument("--force", action="store_true",
                   help="replay sessions whose result is already in the cache")
    p.add_argument("--no-mcap", action="store_true",
                   help="write no replay-<mode>.mcap (the replay's records and 3D scene, "
                        "about 0.4 MB per second of run) into the run folders")


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay recorded runs (or whole archives) against the simulated bus, on local processes
    or Ray; writes replay-<mode>.json in each run and, for an archive or with --out, the
    batch's replay-summary table and plot. A failed session is reported and the others go
    on; the exit status is 2 when any failed."""
    from exo_rt.batch.replay import run_batch

    b = run_batch(args.run_dirs, args.mode, controller=args.controller, config=args.config,
                  engine=args.engine, jobs=args.jobs, address=args.address, out=args.out,
                  force=args.force, allow_config_change=args.allow_config_change,
                  mcap=not args.no_mcap)
    for row in b.results:
        r = row["result"]
        if r is None:
            continue
        for note in r.get("notes", ()):  # not finished, no snapshot, a changed config
            print(f"exo-rt: warning: {note}", file=sys.stderr)
        head = f"{row['path']}: {r['mode']} replay of {r['cycles']} cycles"
        if "joints" in r:
            head += "; " + ", ".join(f"{n} RMS {j['rms_error_deg']:.4f}° max "
                                     f"{j['max_error_deg']:.4f}°" for n, j in r["joints"].items())
        if "max_abs_command_diff_A" in r:
            head += f"; largest command difference {r['max_abs_command_diff_A']:.6g} A"
        if r.get("first_diff_cycle") is not None:
            head += f" (first at cycle {r['first_diff_cycle']})"
        if r.get("replay_ended_at_cycle") is not None:  # no command after it to compare
            head += f"; the replay ended at cycle {r['replay_ended_at_cycle']}"
        if r.get("mcap"):  # the replay's records and 3D scene, beside run.mcap
            head += f"; wrote {r['mcap']}"
        print(head)
    for row in b.failed:
        print(f"exo-rt: error: session {row['session']}: {row['error']}", file=sys.stderr)
    if b.out is not None:
        print(f"{len(b.results)} sessions ({len(b.computed)} replayed, {len(b.cached)} from the "
              f"cache), {len(b.failed)} failed, in {b.wall_s:.1f} s on {args.engine}")
        for f in b.files:
            print(f"wrote {f}")
    return 2 if b.failed else 0


def _setup_sweep(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="CONFIG",
                   help="a controller file or name (configs/controllers/), or a top config")
    p.add_argument("--grid", required=True, metavar="KEY=VALUES,…",
                   help="GAIN=LO:HI:N scales that gain on every joint (1 = the file's); "
                        "JOINT.GAIN=V1/V2/… sets one joint's gain (docs/scale.md)")
    p.add_argument("--model-error", default="1.0", metavar="E1,E2,…",
                   help="the controller model's masses and inertias × each (default 1.0)")
    p.add_argument("--wearers", metavar="FILE",
                   help="YAML wearers: [{name, mass (kg), stiffness, damping}] (default: the "
                        "robot file's wearer, passive)")
    p.add_argument("--robot", metavar="FILE", help="robot file (default: the top config's, or "
                                                   "the shipped leg)")
    p.add_argument("--cycles", type=float, default=1.0, help="gait cycles per task (default 1)")
    p.add_argument("--max-saturation", type=float, default=0.01, metavar="FRACTION",
                   help="the best point saturates its current at most this fraction of cycles")
    p.add_argument("--jobs", type=int, default=1, help="tasks in parallel")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray (the cluster extra)")
    p.add_argument("--address", metavar="ray://HOST:10001",
                   help="with --engine ray: the cluster to use (default: a local Ray)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where the table and heat map go (default: "
                        "runs/sweep-<controller>-<date-time>/, beside the runs)")


def cmd_sweep(args: argparse.Namespace) -> int:
    """Sweep gains × model errors × wearers in model-in-the-loop simulation; print the best
    point as a controller-file snippet."""
    from pathlib import Path

    from exo_rt.batch import sweep as sw

    errors = sw.parse_list(args.model_error, "--model-error")
    wearers = sw.load_wearers(args.wearers) if args.wearers else None
    out = Path(args.out) if args.out else sw.default_out(args.config)
    s = sw.run_sweep(args.config, args.grid, model_errors=errors, wearers=wearers,
                     robot=args.robot, cycles=args.cycles, engine=args.engine, jobs=args.jobs,
                     address=args.address, max_saturation=args.max_saturation, out=out)
    print(f"{len(s.points)} points × {len(errors)} model errors × {len(wearers or [0])} "
          f"wearers = {len(s.tasks)} tasks in {s.wall_s:.1f} s on {args.engine}")
    failed = [t for t in s.tasks if t["status"] != "ok"]
    for t in failed[:10]:
        print(f"exo-rt: error: point {s.points[t['point']]['label']} (model ×"
              f"{t['model_error']:g}, {t['wearer']}): {t['error']}", file=sys.stderr)
    print(sw.verdict(s))
    if s.best is not None:
        print(sw.snippet(s, s.best), end="")
    for f in s.files:
        print(f"wrote {f}")
    return 2 if failed else 0


def _setup_run_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")


def _setup_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--csv", action="store_true", help="write cycles.csv")
    what.add_argument("--mcap", action="store_true",
                      help="write run.mcap (runs recorded before exo-rt wrote it)")


def cmd_recover(args: argparse.Namespace) -> int:
    """Make a run folder's run.mcap whole after a crash (power loss, kill, full disk): every
    record that reached the disk whole, into a new file any MCAP reader reads; the damaged
    original kept as run.mcap.damaged. Exit 0 also when there is nothing to recover."""
    from exo_rt.record.runfolder import recover_folder

    done = recover_folder(args.run_dir)
    if not done:
        print(f"{args.run_dir}: run.mcap is whole, nothing to recover")
    for rec in done:
        print(rec.line())
    return 0


def _setup_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run folder; with --wearer, an archive (a folder of run folders)")
    p.add_argument("--wearer", metavar="NAME",
                   help="write the progress page of this wearer's sessions in the archive "
                        "(NAME: their profile's file name, configs/wearers/NAME.yaml)")


def cmd_report(args: argparse.Namespace) -> int:
    """PNG plots, a text summary and the clinic's report.html of a run (needs the plot extra);
    with --wearer, a wearer's progress page over an archive's sessions."""
    from exo_rt.record.report import progress_report, report

    if args.wearer is not None:
        for f in progress_report(args.run_dir, args.wearer):
            print(f)
        return 0
    notes: list[str] = []
    files = report(args.run_dir, notes)
    for note in notes:  # a run that did not finish
        print(f"exo-rt: warning: {note}", file=sys.stderr)
    for f in files:
        print(f)
    return 0


def _setup_size(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="one or more run folders")
    p.add_argument("--robot", metavar="FILE",
                   help="the robot file whose drives to hold the runs against (default: the "
                        "first run's own copy of its robot file)")


def cmd_size(args: argparse.Namespace) -> int:
    """Per joint, the runs' peak and RMS torque, current and speed against the drives'
    ratings (docs/sizing.md); exit 1 when a joint is over a rating."""
    from exo_rt.record.sizing import main as size

    return size(args.run_dirs, args.robot)


def cmd_export(args: argparse.Namespace) -> int:
    """The cycle log as CSV, or the run (cycle log and CAN log) as MCAP."""
    if args.mcap:
        from pathlib import Path

        from exo_rt.errors import LogError, Where
        from exo_rt.record.mcap_log import export_mcap

        if (Path(args.run_dir) / "run.mcap").is_symlink():  # never written through a link
            raise LogError("run.mcap is a symbolic link: nothing is written through it",
                           Where(str(Path(args.run_dir) / "run.mcap")),
                           "remove the link and export again")
        print(export_mcap(args.run_dir))
        return 0
    from exo_rt.record.report import export_csv

    print(export_csv(args.run_dir))
    return 0


def _procedure_names() -> tuple[str, ...]:
    from exo_rt.hil import registry

    return registry.names()


def _setup_bench_test(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", choices=LazyChoices(_procedure_names), metavar="PROCEDURE",
                   help="the procedure: %(choices)s (docs/bench.md)")
    p.add_argument("--config", default=None, metavar="FILE", help="top config")
    p.add_argument("--bus", action="append", default=None, metavar="[NAME=]SPEC",
                   help="sim, or INTERFACE:CHANNEL[@BITRATE] (e.g. slcan:/dev/pts/5) for every "
                        "bus, NAME=SPEC for one (repeatable); default: each bus from its bus "
                        "file, sim where none names an interface")
    p.add_argument("--joint", help="only this joint (per-joint procedures)")
    p.add_argument("--pose", type=float, nargs="*", default=None,
                   help="simulated bus: the leg's initial joint angles (rad)")
    p.add_argument("--reply-timeout", type=float, default=None, metavar="MS",
                   help="how long a cycle waits for the drives' replies on a real bus "
                        "(default 0.7 of the period; 50 for the emulated drives over SLCAN)")
    p.add_argument("--lockstep", action="store_true",
                   help="drives in lockstep, their time one period per SYNC (the emulated "
                        "drives of exo-rt drives): SYNCs not paced, samples a period apart "
                        "(default: the simulated bus; a real bus is paced on the wall clock)")
    p.add_argument("--fixture", metavar="KIND", default=None,
                   help="can[:NODE] (the rig's fixture node on the bus; default on the "
                        "simulated bus and for the emulated drives) | operator (a person clamps; "
                        "default on a real bus)")
    p.add_argument("--out", metavar="DIR", help="run folder (default runs/bench-<date-time>)")
    p.add_argument("--yes", action="store_true", help="skip the pre-flight confirmation")
    p.add_argument("--options", metavar="FILE", default=None,
                   help="bench options file: the procedure's options (docs/config-bench.md)")


def _fixture(spec: str, drives):
    from exo_rt.errors import ConfigError
    from exo_rt.hil.fixture import CanFixture, OperatorFixture

    kind, _, node = spec.partition(":")
    if kind == "operator" and not node:
        return OperatorFixture()
    if kind == "can":
        try:
            return CanFixture(drives, int(node, 0)) if node else CanFixture(drives)
        except ValueError:
            pass
    raise ConfigError(f"cannot read --fixture '{spec}'", None,
                      "write can, can:NODE (e.g. can:0x70) or operator")


def cmd_bench_test(args: argparse.Namespace) -> int:
    """A hardware-in-the-loop bench procedure (docs/bench.md)."""
    import datetime
    from pathlib import Path

    from exo_rt import warmup
    from exo_rt.hil.bench import AbortKey, Bench
    from exo_rt.hil.procedures import (
        checklist,
        load_options,
        proceed,
        result_lines,
        run_procedure,
    )
    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller

    config = Path(args.config) if args.config else default_config()
    top = load_top(config)
    check_pose(args.pose, top.robot, "--pose")
    options = load_options(args.options, args.name) if args.options else {}
    for line in checklist(args.name, top, args.joint):
        print(line)
    from exo_rt.runtime.buses import resolve_specs

    bus = resolve_specs(top.buses, args.bus)
    simulated = bus in ("sim", "sim-realtime")
    # a real bus: asked whenever --yes is absent, from a terminal or not (docs/bench.md)
    if not args.yes and not simulated and not proceed(sys.stdin, sys.stdout, sys.stderr):
        return 1
    interactive = sys.stdin.isatty()
    # the bench's kernels with the run's (a cold cache compiles them all now, in parallel)
    warmup.ensure(top, (warmup.RUN_GROUPS if simulated else warmup.REAL_BUS_GROUPS)
                  + ("bench",))
    ctl = Controller(top, bus, board=None, start_pose=args.pose)
    fixture = _fixture(args.fixture or ("can" if simulated else "operator"), ctl.drives)
    timeout = None if simulated else (0.7 * ctl.dt if args.reply_timeout is None
                                      else args.reply_timeout * 1e-3)
    bench = Bench(top, ctl.drives, fixture=fixture, reply_timeout=timeout,
                  pace=not (simulated or args.lockstep),
                  abort=AbortKey(sys.stdin if interactive else None), world=ctl.bus_set.world)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    from exo_rt.resources import runs_root

    out = Path(args.out) if args.out else runs_root(config) / top.runs_dir / f"bench-{stamp}"
    print("running (ctrl-C or q + Enter aborts) …", flush=True)
    try:
        report = run_procedure(args.name, bench, out, args.joint, **options)
    finally:
        bench.close()
    for line in result_lines(args.name, report):
        print(line)
    for key in ("reason", "snippet_file", "plot"):
        if key in report:
            print(f"{key.replace('_', ' ')}: {report[key]}")
    print(f"report: {out / f'bench-{args.name}.json'}")
    if report.get("aborted"):
        print(f"ABORTED: {report['reason']} — drives disabled", file=sys.stderr)
        return 1
    return 0


def _setup_warmup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", action="append", default=[], metavar="G",
                   help="controller, io, plant, bench, sim or dynamics (repeatable; default "
                        "all)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="top config whose robot and controller the kernels are compiled for "
                        "(default configs/exo_leg.yaml)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="compiling processes (default: the CPUs this process may use)")
    p.add_argument("--force", action="store_true",
                   help="run every entry even if the cache is marked warm")
    p.add_argument("--list", action="store_true", help="list the registry's entries and exit")


def cmd_warmup(args: argparse.Namespace) -> int:
    """Compile every njit kernel the run, the simulator and the bench use into numba's on-disk
    cache, in parallel processes (exo_rt/warmup.py): the next start loads instead of compiling.
    Exit 1 when an entry failed (its kernel's arguments changed: fix its registry line)."""
    from exo_rt import compile_workers

    if not args.list:
        compile_workers.prestart()  # a cold cache: the workers start while this one imports
    from exo_rt import warmup
    from exo_rt.errors import ConfigError

    unknown = sorted(set(args.group) - set(warmup.GROUPS))
    if unknown:
        raise ConfigError(f"unknown warm-up group {', '.join(unknown)}", None,
                          f"use one of {', '.join(warmup.GROUPS)}")
    if args.list:
        for e in warmup.ENTRIES.values():
            print(f"{e.group:<10} {e.name}")
        return 0
    config = args.config or default_config()
    code = warmup.main(args.group or warmup.GROUPS, config=config, jobs=args.jobs,
                       force=args.force)
    # Everything is in the on-disk cache now. End without the interpreter's teardown (freeing
    # numba's and LLVM's objects: ~0.3 s). (It was also seen to abort with a corrupted heap;
    # the cause was the `dyn.integrate` entry writing an energy row past its array, now
    # refused by the kernel itself: tests/test_energy.py.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _setup_schema(p: argparse.ArgumentParser) -> None:
    from exo_rt.schema import KINDS

    p.add_argument("kind", nargs="?", choices=tuple(KINDS), help="the config file kind")
    p.add_argument("--out", metavar="FILE", help="write the JSON Schema here (default: stdout)")
    p.add_argument("--write", action="store_true",
                   help="regenerate configs/schemas/*.schema.json, the docs' key tables and "
                        "the shipped configs' $schema lines under --root")
    p.add_argument("--root", default=".", metavar="DIR", help="the repository (default: .)")


def cmd_schema(args: argparse.Namespace) -> int:
    """The JSON Schema of a config file kind (docs/config.md); --write regenerates the
    shipped schemas, the docs' key tables and the configs' $schema lines."""
    from pathlib import Path

    from exo_rt import schema
    from exo_rt.errors import ConfigError

    if args.write:
        for path in schema.write(Path(args.root)):
            print(f"wrote {path}")
        return 0
    if args.kind is None:
        raise ConfigError("no file kind given", None,
                          f"give one of {', '.join(schema.KINDS)}, or --write")
    text = schema.json_text(args.kind)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0




COMMANDS: dict[str, Command] = {c.name: c for c in (
    run.COMMAND,
    Command("check", "validate a config file: a top config (and every file it names), a robot, a "
            "session script, an activities file or a wearer profile", _setup_check, cmd_check,
            numbers={"rate": (0.0, 100_000.0, False, "Hz")}),
    Command("replay", "replay recorded runs against the simulated bus", _setup_replay,
            cmd_replay, numbers={"jobs": (1, MAX_JOBS, True, "")}),
    Command("report", "PNG plots, a text summary and the clinic's report.html of a run",
            _setup_report, cmd_report),
    Command("export", "export a run as CSV or MCAP", _setup_export, cmd_export),
    Command("size", "per joint, the runs' torque, current and speed against the drives' ratings",
            _setup_size, cmd_size),
    Command("recover", "make a crashed run's run.mcap whole again", _setup_run_dir, cmd_recover),
    Command("bench", "dynamics benchmarks (side by side with Pinocchio)", _setup_bench,
            cmd_bench),
    Command("drives", "serve emulated drives on a serial-line CAN pty", _setup_drives,
            cmd_drives, numbers={"parent": (1, MAX_PID, True, ""),
                                 "linger": (0.0, 3600.0, True, "s")}, pose="pose"),
    Command("bench-test", "a hardware-in-the-loop bench procedure", _setup_bench_test,
            cmd_bench_test, numbers={"reply_timeout": (0.0, 1000.0, False, "ms")}, pose="pose"),
    Command("warmup", "compile the numba kernels into the cache, in parallel", _setup_warmup,
            cmd_warmup, numbers={"jobs": (1, MAX_JOBS, True, "")}),
    Command("schema", "the JSON Schema of a config file kind", _setup_schema, cmd_schema),
    Command("sweep", "sweep gains in model-in-the-loop simulation", _setup_sweep, cmd_sweep,
            numbers={"cycles": (0.0, 1000.0, False, "gait cycles"),
                     "max_saturation": (0.0, 1.0, True, ""), "jobs": (1, MAX_JOBS, True, "")}),
)}


def build_parser() -> argparse.ArgumentParser:
    """The ``exo-rt`` parser: the global options, and a subparser per command of
    :data:`COMMANDS` (its help also its description)."""
    parser = argparse.ArgumentParser(
        prog="exo-rt",
        description="Real-time controller of a powered lower-limb exoskeleton.",
    )
    parser.add_argument("--version", action="version", version=f"exo-rt {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.setup(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``exo-rt`` command on ``argv`` (default: the process's): its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return call(COMMANDS[args.command], args)
