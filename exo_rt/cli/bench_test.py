"""``exo-rt bench-test``: a hardware-in-the-loop bench procedure (docs/bench.md)."""

from __future__ import annotations

import argparse
import sys

from exo_rt.cli.common import Command, LazyChoices, check_pose, default_config


def _procedure_names() -> tuple[str, ...]:
    from exo_rt.hil import registry

    return registry.names()


def setup(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
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


COMMAND = Command(
    "bench-test", "a hardware-in-the-loop bench procedure", setup, handle,
    numbers={"reply_timeout": (0.0, 1000.0, False, "ms")}, pose="pose")
