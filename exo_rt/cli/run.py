"""``exo-rt run``: the controller through a session — on the simulated leg or on real
drives — and the run's outcome in a few lines (docs/cli.md)."""

from __future__ import annotations

import argparse
import math
import sys

from exo_rt.cli.common import Command, check_pose
from exo_rt.resources import run_config
from exo_rt.schema.session import MAX_DURATION_S  # the longest --duration: 24 h


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, metavar="FILE",
                   help="top config (default configs/exo_2leg_world.yaml: the default wearer in "
                        "the two-leg exoskeleton on the world's floor; configs/exo_leg.yaml is "
                        "the one-leg exoskeleton on the test stand)")
    p.add_argument("--bus", action="append", default=None, metavar="[NAME=]SPEC",
                   help="sim (lockstep) | sim-realtime (the simulation in its own "
                        "process, same as sim with --realtime) | INTERFACE:CHANNEL[@BITRATE] "
                        "(socketcan:can0, udp_multicast:239.74.0.1 …) for every bus; "
                        "NAME=SPEC for bus NAME (repeatable). Default: each bus from its bus "
                        "file (interface, channel, bitrate), sim where none names one")
    p.add_argument("--controller", metavar="NAME|FILE", help="override the config's controller")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="the session's time (s; default the session script's 'duration', "
                        "else 10): the default session walks this long; any session still "
                        "going 30 s after it is stopped (docs/sessions.md)")
    p.add_argument("--session", metavar="FILE",
                   help="session script: requests at times or after events (default the "
                        "top config's own, its key 'session:', else "
                        "configs/sessions/default.yaml: home, walk for --duration, stop, "
                        "end)")
    p.add_argument("--activities", metavar="FILE",
                   help="activities file: postures and motions (default the robot's, "
                        "configs/activities/ROBOT.yaml)")
    p.add_argument("--wearer", metavar="FILE",
                   help="wearer profile: height, ranges, speeds, assistance (default from the "
                        "robot file's wearer)")
    p.add_argument("--console", action="store_true",
                   help="the therapist's console: keys on standard input become requests, the "
                        "session's status on standard error; alone it runs no script (with "
                        "--session, that script too); lockstep goes at the wall clock's pace "
                        "(docs/sessions.md)")
    p.add_argument("--out", metavar="DIR",
                   help="run folder (default runs/<date-time>): new or empty, or an earlier "
                        "run's — a finished run's files there are replaced, a run that did not "
                        "finish is moved aside to DIR.crashed-<its start>; a folder of other "
                        "files is refused")
    p.add_argument("--realtime", action="store_true",
                   help="wall-clock rate on the sim bus: the simulation runs in its own process, "
                        "the control thread SCHED_FIFO on its own CPU (always so on real buses)")
    p.add_argument("--inject", action="append", default=[], metavar="KIND[:JOINT]@T[+D]",
                   help="fault injection on the simulated bus (repeatable): T in s from the "
                        "start of RUN, D how long, e.g. drop:knee@2.0+0.05 (docs/cli.md)")
    p.add_argument("--start-pose", type=float, nargs="*", metavar="RAD",
                   help="initial joint angles of the simulated leg (default: the session "
                        "script's start posture, else 0); inside that posture when the "
                        "script declares one")
    p.add_argument("--board", default="emulator", metavar="URL",
                   help="the embedded board's serial link: emulator (default), a pyserial URL "
                        "(/dev/ttyACM0) or none")
    p.add_argument("--can-log", default=".blf", choices=(".blf", ".asc", ".log"),
                   help="format of the run's CAN traffic log (python-can writers)")
    p.add_argument("--no-rt-setup", action="store_true",
                   help="skip SCHED_FIFO, affinity, mlockall and the gc freeze (to compare)")
    p.add_argument("--live", nargs="?", const="8765", default=None, metavar="[HOST:]PORT",
                   help="serve live telemetry to Foxglove on a WebSocket (default 127.0.0.1:8765;"
                        " read only, from the recording process)")
    p.add_argument("--live-remote", action="store_true",
                   help="allow --live on an address other than loopback (prints a warning)")
    p.add_argument("--live-wait", type=float, default=None, metavar="S",
                   help="with --live: wait up to S s for a Foxglove client before the drives "
                        "enable (default 10 on the simulated bus, 0 on real buses; a simulated "
                        "run watched live goes at the wall clock's pace)")
    p.add_argument("--web", nargs="?", const="8080", default=None, metavar="[HOST:]PORT",
                   help="the therapist's web console: a page served by a process of its own "
                        "(default 127.0.0.1:8080); the pairing code is printed here; alone it "
                        "runs no script; lockstep goes at the wall clock's pace "
                        "(docs/console-web.md)")
    p.add_argument("--web-remote", action="store_true",
                   help="allow --web on an address other than loopback (TLS required)")
    p.add_argument("--web-cert", metavar="FILE|device",
                   help="TLS for --web: a PEM certificate (with --web-key), or 'device' (a "
                        "self-signed one made for this device, its fingerprint printed)")
    p.add_argument("--web-key", metavar="FILE", help="the --web-cert certificate's PEM key")
    p.add_argument("--reset-faults", action="store_true",
                   help="clear drives found in FAULT or QUICK STOP ACTIVE, or stopped by "
                        "their own watchdog, before enabling them (the operator's explicit "
                        "step; without it such a drive stops the start with its error code)")


def handle(args: argparse.Namespace) -> int:
    """Run the controller: BOOT → … → RUN for --duration → SHUTDOWN, or SAFE on a fault."""
    from exo_rt import compile_workers, processes

    compile_workers.prestart()  # a cold numba cache: the compile workers start with us
    processes.request("exo_rt.record.writer")  # the recording process: started ahead
    from pathlib import Path

    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller, Injection

    config = Path(args.config) if args.config else run_config()
    top = load_top(config, controller=args.controller)
    check_pose(args.start_pose, top.robot, "--start-pose")
    for w in top.robot.warnings:  # loaded as written (exo-rt check --strict refuses them)
        print(f"model warning: {w}", file=sys.stderr)
    injections = tuple(Injection.parse(s, top.robot.joint_names) for s in args.inject)
    from exo_rt.session.session import load_files

    # checked before anything starts
    script, acts, _ = load_files(top, args.session, args.activities, args.wearer)
    from exo_rt.runtime.buses import resolve_specs

    bus = resolve_specs(top.buses, args.bus)
    bus = "sim-realtime" if args.realtime and bus == "sim" else bus
    start_pose = _session_start(script, acts, args.start_pose, bus)
    if args.live is not None:  # a bad or open address: refused before anything starts
        from exo_rt.record.telemetry import parse_live, remote_warning

        host, port = parse_live(args.live, args.live_remote)
        if args.live_remote and host not in ("127.0.0.1", "localhost", "::1"):
            print(remote_warning(host, port), file=sys.stderr)
    web = None
    if args.web is not None or args.web_cert or args.web_key or args.web_remote:
        from exo_rt.web.address import parse_web  # (no TLS on the network: refused here)

        web = parse_web(args.web if args.web is not None else "8080", args.web_remote,
                        args.web_cert, args.web_key)
        processes.request("exo_rt.web")  # its process: started ahead, as the recording's
    from exo_rt.record import runfolder
    from exo_rt.resources import runs_root

    # the run folder, taken before anything starts (one held by a live run: refused here)
    out = Path(args.out) if args.out else _new_run_folder(runs_root(config) / top.runs_dir)
    runfolder.claim(out)
    from exo_rt import warmup

    ctl = Controller(top, bus, realtime=args.realtime, injections=injections,
                     start_pose=start_pose,
                     compile_ahead=lambda: warmup.for_run(top, bus, args.realtime),
                     status=not args.console, rt_setup=not args.no_rt_setup, board=args.board,
                     live=args.live, live_remote=args.live_remote,
                     live_wait=_live_wait(args, bus),
                     reset_faults=args.reset_faults, session=args.session,
                     activities=args.activities, wearer=args.wearer, console=args.console,
                     web=web)
    ctl.can_format = args.can_log
    import signal

    def stop(signum, _frame):  # ctrl-C or SIGTERM: the safe stop, not an exception mid-cycle
        ctl.request_stop(f"signal {signal.Signals(signum).name}: safe stop")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    result = ctl.run(script.run_duration(args.duration), out)
    s = result.summary
    for line in result.setup:
        print(f"set-up: {line}")
    print(_final_line(s, ctl.realtime))
    if ctl.session is not None and ctl.session.stalled:  # the guard ended it: say why
        print(f"session script stalled: {ctl.session.stalled}", file=sys.stderr)
    for name, j in s["joints"].items():
        print(f"  {name:<12} RMS {j['rms_error_deg']:.3f}°  max {j['max_error_deg']:.3f}°  "
              f"|I| ≤ {j['max_abs_current_A']:.2f} A")
    for f in s["faults"]:
        into = f"; RUN + {f['t_run']:.3f} s" if f.get("t_run") is not None else ""
        print(f"  FAULT {f['cause']} on {f['joint']} at {f['t']:.3f} s{into}: reacted in "
              f"{f['reaction_cycles']} cycles ({f['action']})"
              + (f" — {f['detail']}" if f.get("detail") else ""))
    if s.get("after_safe"):
        print(_after_safe_line(s["after_safe"]))
    from exo_rt.sim.launch import SIM_SPECS

    hint = _late_simulation_hint(s, ctl.realtime, bus in SIM_SPECS, bool(injections))
    if hint:
        print(hint, file=sys.stderr)
    rec = s.get("recording", {})
    if rec.get("recorded") is False:
        where = f" (not recorded: {rec.get('error')})"
    elif rec.get("stopped"):
        where = (f" (recording stopped at t = {rec['stopped']['t']:.3f} s: "
                 f"{rec['stopped']['error']})")
    else:
        where = ""
    if s.get("files_not_written"):
        where += f" ({'; '.join(s['files_not_written'])})"
    print(f"run folder: {result.run_dir}{where}")
    return result.exit_code


def _after_safe_line(a: dict) -> str:
    """What SAFE did to the simulated wearer, one line: the pelvis's drop and the largest
    flexion of each knee (else of each joint) over the window the world ran on."""
    joints = a["joints"]
    knees = {n: j for n, j in joints.items() if "knee" in n} or joints
    flex = ", ".join(f"{n} {math.degrees(j['flexion_rad']):.2f}°" for n, j in knees.items())
    return (f"  after SAFE: in {a['window_s']:.1f} s from the fault (the world run on, the drives "
            f"as SAFE left them) the pelvis dropped {1e3 * a['pelvis_drop_m']:.1f} mm; "
            f"flexed at most: {flex}")


def _session_start(script, activities, given, bus):
    """Where the simulated leg starts for a session script (rad per joint): ``given``
    (``--start-pose``) — refused unless it is in the posture the script starts in, if it
    declares one —, else that posture's angles (None: none declared, the simulation's 0).
    On real drives ``given`` as it is: the controller checks the measured leg against the
    script's start posture before the session begins."""
    from exo_rt.session.script import check_start, start_pose
    from exo_rt.sim.launch import SIM_SPECS

    if bus not in SIM_SPECS:
        return given
    if given is None:
        return start_pose(script, activities)
    check_start(script, activities, given, "--start-pose " + " ".join(f"{x:g}" for x in given),
                f"leave --start-pose out: the simulated leg is put in {script.start}")
    return given


def _final_line(s: dict, realtime: bool) -> str:
    """The run's outcome in one line: the final state, the loop's length (simulated in
    lockstep), the start-up's wall time in its parts, and — in real time only, where they
    mean something — the loop's compute time and overruns."""
    up, ph = s["startup_s"], s.get("phases_s", {})
    walk = f" ({ph['RUN']:g} s in the session)" if "RUN" in ph else ""
    line = (f"final state {s['final_state']}, {s['cycles']} cycles = {s['duration_s']:g} s"
            f"{walk}; READY {up['process_to_ready']:.2f} s after start (imports and buses "
            f"{up.get('imports_and_open', float('nan')):.2f} s, compile "
            f"{up.get('compile', float('nan')):.2f} s, bring-up "
            f"{up.get('bring_up', float('nan')):.2f} s)")
    t = s.get("timing") or {}
    if realtime and t:
        line += (f"; compute p50 {t['compute_us']['p50']:.1f} µs, p99 "
                 f"{t['compute_us']['p99']:.1f} µs, overruns {t['overruns']}")
    elif not realtime:
        line += "; lockstep simulation (no real-time figures)"
    return line


def _late_simulation_hint(s: dict, realtime: bool, simulated: bool, injected: bool
                          ) -> str | None:
    """One line where a real-time run on the simulated drives ended on their silence
    (``stale_feedback``, nothing injected): the simulation, the drives' stand-in, answered
    late — its process did not get the CPU time it needs (its own line, ``simulation: …``,
    gives its answer and physics times and its longest turn) — and what holds instead. None
    otherwise."""
    if not (realtime and simulated and not injected):
        return None
    if not any(f.get("cause") == "stale_feedback" for f in s.get("faults") or []):
        return None
    t = (s.get("timing") or {}).get("compute_us") or {}
    own = f" (the controller's own cycle: compute p50 {t['p50']:.0f} µs)" if t else ""
    return ("exo-rt: the simulated drives answered late: their simulation did not get the CPU "
            f"time it needs on this machine{own}. Real time with the simulation needs a core "
            "for it beside the controller's; without --realtime the same run is lockstep and "
            "exact (docs/world.md, \"What stalls the simulation here\"; docs/deploy.md).")


def _live_wait(args: argparse.Namespace, bus) -> float:
    """How long a run watched live waits for its viewer: ``--live-wait``, else 10 s on the
    simulated bus (a lockstep run is over in seconds) and none on real buses."""
    if args.live is None:
        return 0.0
    if args.live_wait is not None:
        return args.live_wait
    return 10.0 if bus in ("sim", "sim-realtime") else 0.0


def _new_run_folder(root):
    """``root/<date-time>``, made here (``-2``, ``-3`` … for a second run in the same
    second): a new run never takes an earlier run's folder. A folder that cannot be made is
    returned as is (the run says why it is not recorded)."""
    import datetime

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        path = root / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
        except OSError:
            return path
    return root / stamp


COMMAND = Command(
    "run", "run the controller through a session (default: the simulated leg homes, walks, "
    "stops)", setup, handle,
    numbers={"duration": (0.0, MAX_DURATION_S, False, "s"),
             "live_wait": (0.0, 600.0, True, "s")},
    pose="start_pose")
