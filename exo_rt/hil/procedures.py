"""The bench procedures and how they run: the registry (name → procedure, what moves),
the pre-flight checklist, the abort path and the run folder (``bench-<name>.json``, the YAML
snippet ``bench-<name>.yaml`` of an identification, the plot ``bench-<name>.png``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from exo_rt.bus.config import frame_bits
from exo_rt.cycle.states import STATES
from exo_rt.errors import ConfigError
from exo_rt.hil import fit, registry
from exo_rt.hil.bench import Bench, BenchAbort
from exo_rt.hil.limits import limit_text
from exo_rt.hil.plots import plot
from exo_rt.runtime.config import TopConfig
from exo_rt.schema import core
from exo_rt.schema.bench import BenchFile

HEARTBEAT = 0x700  # CiA 301 heartbeats (counted for the families that have them)


@registry.procedure("bringup", per_joint=False, moves="no joint moves (zero current)")
def bringup(bench: Bench, seconds: float = 0.5) -> dict:
    """Every node answers, bring-up done, drives to enabled and back, heartbeat periods (where
    the family has heartbeats) and bus load measured — for any registered drive protocol."""
    report: dict = {"buses": {}}
    for d in bench.drives:
        d.configure()  # the family's bring-up (BusError on a silent or wrong drive)
        watchdog = d.protection()  # what the drives do by themselves (docs/safety.md)
        cycles = d.enable()
        hb: dict[int, list[float]] = {int(n): [] for n in d.nodes}
        bits = 0
        n = int(seconds / bench.dt)
        port = d.port
        recv, send = port.recv, port.send

        def counted_recv(recv=recv, hb=hb):
            nonlocal bits
            msg = recv()
            if msg is not None and not msg.is_error_frame:
                bits += frame_bits(len(msg.data))
                node = msg.arbitration_id & 0x7F
                if msg.arbitration_id & 0x780 == HEARTBEAT and node in hb:
                    hb[node].append(msg.timestamp)
            return msg

        def counted_send(arb, data, extended=False, send=send):
            nonlocal bits
            bits += frame_bits(len(data))
            send(arb, data, extended)

        port.recv, port.send = counted_recv, counted_send
        t0 = None
        try:
            for _ in range(n):
                d.cycle(np.zeros(d.n), bench.reply_deadline())
                bench.wait_period()
                t0 = t0 if t0 is not None else d.now
        finally:
            del port.recv, port.send
        elapsed = max(d.now - (t0 or 0.0), bench.dt)
        periods = {node: float(np.median(np.diff(ts)) * 1e3) if len(ts) > 1 else None
                   for node, ts in hb.items()}
        states = d.states()
        d.disable()
        report["buses"][d.config.name] = {
            "protocol": d.config.protocol,
            "nodes": [int(x) for x in d.nodes],
            "enabled_after_cycles": cycles,
            "states_enabled": states,
            "heartbeat_ms": periods,
            "configured_heartbeat_ms": d.config.heartbeat_ms,
            "bus_load": round(bits / elapsed / d.config.bitrate, 3),
            "missing_frames": int(d.missing_count.sum()),
            "watchdog": watchdog,
            "warnings": list(d.bringup_warnings),
        }
    return report


@registry.procedure("latency", per_joint=True,
                    moves="a 6 A current step for 60 ms (the joint moves a few degrees)")
def latency(bench: Bench, joint: str, step_A: float = 6.0) -> dict:
    """Cycles from a current step on ``joint`` to its drive reporting the current, and to the
    joint moving (the other joints at zero current)."""
    j = bench.robot.joint_names.index(joint)
    bench.start()
    cmd = np.zeros(bench.n)
    for _ in range(20):
        bench.cycle(cmd)
    q0 = bench.q[j]
    cmd[j] = step_A
    seen_current = seen_motion = None
    for k in range(1, 60):
        bench.cycle(cmd)
        if seen_current is None and abs(bench.i_meas[j]) >= 0.5 * step_A:
            seen_current = k
        if seen_motion is None and abs(bench.q[j] - q0) > 1e-5:
            seen_motion = k
    cmd[j] = 0.0
    for _ in range(20):
        bench.cycle(cmd)
    bench.disable_all()  # as every procedure ends: a drive left enabled is refused next start
    return {"joint": joint, "step_A": step_A, "current_cycles": seen_current,
            "motion_cycles": seen_motion,
            "current_ms": None if seen_current is None else seen_current * 1e3 * bench.dt}


@registry.procedure("controller", per_joint=False,
                    moves="the controller's own run, as on the exoskeleton: READY, the "
                          "default session (home to standing, walk 10 s, the closing step), "
                          "STOPPING — every joint")
def controller(bench: Bench, seconds: float = 10.0) -> dict:
    """The controller's law, reference and safety on the bench, exactly as in a run
    (:meth:`~exo_rt.hil.bench.Bench.run_controller`: :func:`exo_rt.cycle.step.step` period by
    period against the drives, READY → RUN (the default session, walking ``seconds``) →
    STOPPING): what a lab
    runs before a person wears the exoskeleton. Per joint the RMS and largest tracking error
    over RUN (deg), the largest |current| (A), and the trace every 10 ms (t, the angle and its
    reference, rad; the state). A safety cause ends it as a run ends: SAFE, the safe action
    ramped out, the drives disabled — and the report says aborted, with the cause."""
    log, summary = bench.run_controller(seconds)
    fault = summary["fault"]
    if fault is not None:
        raise BenchAbort(f"SAFE at t = {fault['t']:.3f} s in {fault['state']}: "
                         f"{fault['detail']} (safe action {fault['action']}, drives disabled)")
    every = max(1, round(0.01 / bench.dt))
    t = log.t[::every]
    summary["trace_states"] = [STATES[int(x)] for x in log.state[::every]]
    for j, name in enumerate(bench.robot.joint_names):
        summary["joints"][name]["trace"] = {"t_s": t, "q_rad": log.q[::every, j],
                                            "q_ref_rad": log.q_ref[::every, j]}
    summary["_log"] = log  # for Python callers; not written to the report
    return summary


def _option_schema(name: str):
    key = BenchFile.KEYS.get(name)
    return None if key is None else key.metadata["schema"].type.cls


def check_options(name: str, options: dict, source: str = "") -> dict:
    """Keyword options of procedure ``name`` checked against its schema
    (:mod:`exo_rt.schema.bench`: known keys, types, ranges): the ones given, read. A
    procedure without a section there takes none."""
    if _option_schema(name) is None:
        if options:
            raise ConfigError(f"the bench procedure '{name}' takes no options", None,
                              "leave them out")
        return {}
    node = core.node_of(options, source or f"bench-test {name} options", name, ConfigError)
    read = core.read(_option_schema(name), node)
    return {k: vars(read)[k] for k in core.given(node)}


def load_options(path: str | Path, name: str) -> dict:
    """Procedure ``name``'s options from a bench options file (``--options``), checked with
    file:line errors; the keys it leaves out keep the procedure's defaults."""
    from exo_rt.yamlio import read_yaml

    root = read_yaml(Path(path), ConfigError)
    read = core.read(BenchFile, root)
    if name not in root.value or _option_schema(name) is None:
        return {}
    section = vars(read)[name]  # (the procedure's section of the bench file)
    return {k: vars(section)[k] for k in core.given(root.value[name])}


def checklist(name: str, top: TopConfig, joint: str | None) -> list[str]:
    """The pre-flight checklist: which joints move, how, at what current."""
    robot = top.robot
    proc = registry.get(name)
    joints = [joint] if joint and proc.per_joint else list(robot.joint_names)
    lines = [f"bench-test {name} on {', '.join(joints)}: {proc.moves}."]
    limits = top.controller.current_limit
    for tr in robot.transmissions:
        if tr.joint in joints:
            j = robot.joint_names.index(tr.joint)
            lines.append(f"  {tr.joint}: current limit {limit_text(tr, limits[j])}; "
                         f"soft limits {robot.lower[j] + top.safety.joint_margin:.2f} … "
                         f"{robot.upper[j] - top.safety.joint_margin:.2f} rad.")
    lines.append("  Safety check on every cycle; drives disabled at the end, on any fault, on "
                 "ctrl-C and on the abort key (q + Enter).")
    lines.append("  Check: e-stop within reach, bus terminated, nobody in the exoskeleton.")
    return lines


def proceed(stdin, out, err) -> bool:
    """The pre-flight question on a real bus: ``Proceed? [y/N]`` on ``out``, one line read
    from ``stdin`` — a terminal or not (a pipe, a file, /dev/null): a script that runs
    ``exo-rt bench-test`` answers it on its standard input or gives ``--yes``. True only for
    ``y`` (or ``yes``); anything else, end of input, an unreadable line or ctrl-C is no, and
    ``err`` gets one line saying what was read and that nothing moved (nothing is enabled
    before this returns True)."""
    out.write("Proceed? [y/N] ")
    out.flush()
    tty = _isatty(stdin)
    try:
        line = stdin.readline()
    except KeyboardInterrupt:
        line, why = None, "ctrl-C"
    except (OSError, ValueError, AttributeError) as exc:  # (UnicodeDecodeError is a
        line, why = None, f"standard input unreadable ({exc})"  # ValueError; None: no stdin)
    else:
        why = None if line else "end of input, no answer"
    if not tty:  # the answer read from a pipe is not echoed: say what it was
        out.write(f"{line.strip()!r} (read from standard input, not a terminal)\n"
                  if line else "\n")
        out.flush()
    answer = (line or "").strip().lower()
    if answer in ("y", "yes"):
        return True
    if why is None:
        why = f"answer {answer!r}" if answer else "an empty answer"
    err.write(f"exo-rt: bench-test not started ({why}): nothing was enabled, nothing moved — "
              "answer y to proceed, or give --yes to run without the question\n")
    err.flush()
    return False


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  " + "  ".join(c.rjust(w) if i else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in [header, *rows]]


def _num(x, fmt: str = ".3g", scale: float = 1.0) -> str:
    return "—" if x is None else format(x * scale, fmt)


def result_lines(name: str, report: dict) -> list[str]:
    """The procedure's results as a short table for the terminal (the same figures as
    ``bench-<name>.json``); [] for an aborted run."""
    if report.get("aborted"):
        return []
    joints = report.get("joints", {})
    if name == "bringup":
        return _table(["bus", "protocol", "nodes", "load %", "heartbeat ms", "missing"],
                      [[b, r["protocol"], ",".join(map(str, r["nodes"])),
                        _num(r["bus_load"], ".0f", 100),
                        ",".join(_num(v, ".0f") for v in r["heartbeat_ms"].values()) or "—",
                        str(r["missing_frames"])] for b, r in report["buses"].items()])
    if name == "controller":
        return _table(["joint", "RMS error deg", "max error deg", "max current A"],
                      [[j, _num(r["rms_error_deg"], ".3f"), _num(r["max_error_deg"], ".3f"),
                        _num(r["max_abs_current_A"], ".1f")] for j, r in joints.items()])
    if name == "latency":
        return _table(["joint", "current (cycles)", "motion (cycles)"],
                      [[j, _num(r["current_cycles"], "d"), _num(r["motion_cycles"], "d")]
                       for j, r in joints.items()])
    if name == "step":
        return _table(["joint", "step mrad", "start mrad", "settled mrad", "rise ms",
                       "overshoot %", "settling ms", "error mrad", "bandwidth Hz"],
                      [[j, _num(r["amplitude_rad"], ".1f", 1e3),
                        _num(r["step"]["start_rad"], "+.1f", 1e3),
                        _num(r["step"]["final_rad"], ".1f", 1e3),
                        _num(r["step"]["rise_time_s"], ".0f", 1e3),
                        _num(r["step"]["overshoot"], ".1f", 100),
                        _num(r["step"]["settling_time_s"], ".0f", 1e3),
                        _num(r["step"]["steady_state_error_rad"], "+.1f", 1e3),
                        _num(r["step"].get("bandwidth_hz"), ".2f")]
                       for j, r in joints.items()])
    if name == "chirp":
        return _table(["joint", "bandwidth Hz", "design Hz"],
                      [[j, _num(r["chirp"]["bandwidth_hz"], ".2f"),
                        _num(r["expected"]["bandwidth_hz"], ".2f")] for j, r in joints.items()])
    if joints and all("configured" in r for r in joints.values()):  # identifications
        keys = list(next(iter(joints.values()))["configured"])
        return _table(["joint", *(f"{k} (configured)" for k in keys)],
                      [[j, *(f"{_num(r['fit'].get(k))} ({_num(r['configured'][k])})"
                             for k in keys)] for j, r in joints.items()])
    if "segments" in report:  # inertia
        return _table(["segment", *next(iter(report["segments"].values()), {})],
                      [[seg, *(_num(v) for v in vals.values())]
                       for seg, vals in report["segments"].items()])
    return []


def _merge_snippets(name: str, reports: dict) -> str:
    """One YAML snippet for all joints of a per-joint identification."""
    values = {j: fit.identified(r["fit"], r["configured"]) for j, r in reports.items()}
    return fit.drive_snippet(values, f"exo-rt bench-test {name}")


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def run_procedure(name: str, bench: Bench, out_dir: Path, joint: str | None = None,
                  **options) -> dict:
    """Run one procedure (on ``joint``, or on each joint in turn) with the abort path, and
    write its report, YAML snippet and plot into ``out_dir``."""
    proc = registry.get(name)
    if proc is None:
        raise ConfigError(f"unknown bench procedure '{name}'", None,
                          f"use one of {', '.join(registry.names())}")
    func, per_joint = proc.run, proc.per_joint
    options = check_options(name, options)
    if joint is not None and joint not in bench.robot.joint_names:
        raise ConfigError(f"no joint '{joint}' in the robot", None,
                          f"use one of {', '.join(bench.robot.joint_names)}")
    joints = [joint] if joint else list(bench.robot.joint_names)
    report: dict = {"procedure": name}
    try:
        if per_joint:
            from exo_rt.progress import progress

            report["joints"] = {}
            for j in progress(joints, f"bench-test {name}", unit="joint"):
                report["joints"][j] = func(bench, j, **options)
        else:
            report.update(func(bench, **options))
    except KeyboardInterrupt:
        report.update(aborted=True, reason="operator abort (ctrl-C)")
    except BenchAbort as exc:
        report.update(aborted=True, reason=str(exc))
    finally:
        bench.disable_all()
    out_dir.mkdir(parents=True, exist_ok=True)
    if proc.snippet and not report.get("aborted"):
        snippet = (report["snippet"] if not per_joint
                   else _merge_snippets(name, report["joints"]))
        report["snippet_file"] = str(out_dir / f"bench-{name}.yaml")
        Path(report["snippet_file"]).write_text(snippet)
    if not report.get("aborted"):
        if name == "inertia":
            report["robot_path"] = str(bench.top.robot_path)
        png = plot(name, report, bench.robot, out_dir)
        if png is not None:
            report["plot"] = str(png)
    (out_dir / f"bench-{name}.json").write_text(json.dumps(_jsonable(report), indent=1) + "\n")
    return report
