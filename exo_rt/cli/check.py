"""``exo-rt check``: a config file validated and what it describes printed — a top config
with every file it names, a robot, a session script, an activities file or a wearer profile."""

from __future__ import annotations

import argparse

from exo_rt.cli.common import Command, default_config
from exo_rt.errors import ExoError


def setup(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
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


COMMAND = Command(
    "check", "validate a config file: a top config (and every file it names), a robot, a "
    "session script, an activities file or a wearer profile", setup, handle,
    numbers={"rate": (0.0, 100_000.0, False, "Hz")})
