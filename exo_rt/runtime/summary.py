"""A run's outcome: its faults, its result and the summary written to ``summary.json``
(docs/replay.md names its keys) — from the cycle's running figures and the run's events."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt import __version__
from exo_rt.cycle import safety
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import RUN, STATES
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.injections import InjectionPlan


@dataclass
class Fault:
    """A safety cause that took the controller to SAFE: when (s), what, where, how fast."""

    t: float
    cause: str
    joint: str | None
    reaction_cycles: int
    action: str
    cycle: int = 0
    detail: str | None = None  # what else names the cause (foreign_master: the COB-ID, the bus)


@dataclass
class RunResult:
    """What ``Controller.run`` returns: the summary, the run folder, the exit code."""

    summary: dict
    run_dir: Path | None
    exit_code: int
    setup: list[str] = field(default_factory=list)


def joints(cycle: cy.Cycle, names) -> dict:
    """Per joint: tracking error over RUN (RMS, max, degrees), peak command, position range."""
    s, v = cycle.s, cycle.v
    runs = max(s["run_cycles"], 1.0)
    out = {}
    for j, name in enumerate(names):
        lo, hi = v[cy.V_Q_MIN, j], v[cy.V_Q_MAX, j]
        out[name] = {
            "rms_error_deg": float(np.sqrt(v[cy.V_SSE, j] / runs)),
            "max_error_deg": float(v[cy.V_MAX_ERROR, j]),
            "max_abs_current_A": float(v[cy.V_MAX_CURRENT, j]),
            "min_position_deg": float(np.degrees(lo)) if np.isfinite(lo) else 0.0,
            "max_position_deg": float(np.degrees(hi)) if np.isfinite(hi) else 0.0,
        }
    return out


def phases(events: list[dict], cycles: int, dt: float) -> dict[str, float]:
    """Each state's time in the loop (s, cycles × period), in the order entered; a state
    entered twice is summed."""
    marks = [(e["cycle"], e["state"]) for e in events if e.get("event") == "state"
             and e["state"] not in ("BOOT", "CONFIGURE")]
    out: dict[str, float] = {}
    for i, (k, state) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else cycles
        out[state] = round(out.get(state, 0.0) + max(0, end - k) * dt, 6)
    return out


def startup(times: dict) -> dict:
    """Start-up in parts (s): boot to READY, from the process's start to READY and to RUN;
    process_to_ready split into the kernels compiled (or loaded from the cache), the
    bring-up (recording, drives configured and enabled, the board's power) and the rest
    (imports, buses opened)."""
    nan = float("nan")
    boot, ready = times.get("boot_to_ready", nan), times.get("process_to_ready", nan)
    compile_s, in_run = times.get("compile", 0.0), times.get("compile_in_run", 0.0)
    return {"boot_to_ready": round(boot, 3), "process_to_ready": round(ready, 3),
            "process_to_run": round(times.get("process_to_run", nan), 3),
            "compile": round(compile_s, 3), "bring_up": round(boot - in_run, 3),
            "imports_and_open": round(ready - boot - compile_s + in_run, 3)}


def faults(found: list[Fault], dt: float, k_run: int | None) -> list[dict]:
    """The faults as the summary lists them (``t_run``: s from the start of RUN)."""
    return [{"t": round(f.t, 6), "cause": f.cause, "joint": f.joint,
             "reaction_cycles": f.reaction_cycles, "action": f.action,
             "t_run": round(f.t - k_run * dt, 6) if k_run is not None else None}
            | ({"detail": f.detail} if f.detail else {}) for f in found]


def foreign_detail(drives) -> str | None:
    """foreign_master: the first frame of another master, by COB-ID and bus."""
    for d in drives:
        seen, first = int(d.foreign[1]), int(d.foreign[2])
        if seen:
            return (f"COB-ID 0x{first:03X} from another node on bus '{d.config.name}' "
                    f"({seen} such frames)")
    return None


def fault(top: TopConfig, plan: InjectionPlan, drives, events: list[dict], k: int,
          cause: int, joint: int, raised: str | None = None) -> Fault:
    """The fault the cycle of a run of ``top`` found in cycle ``k`` (its cause, joint, how
    many cycles after the onset ``plan`` injected it was seen; ``drives``: who saw another
    master; ``raised``: what the compiled cycle raised, for cycle_exception), its event
    appended to the run's ``events``."""
    dt = 1.0 / top.rate_hz
    name = top.robot.joint_names[joint] if joint >= 0 else None
    onset = plan.onset(k, name)
    detail = (foreign_detail(drives) if cause == safety.FOREIGN_MASTER else
              raised if cause == safety.CYCLE_EXCEPTION else None)
    f = Fault(t=onset * dt, cause=safety.CAUSES[cause], joint=name,
              reaction_cycles=k - onset + 1, action=top.safety.action, cycle=k,
              detail=detail)
    events.append({"cycle": k, "t": round(k * dt, 6), "event": "fault",
                   "cause": f.cause, "joint": f.joint, "action": f.action}
                  | ({"detail": f.detail} if f.detail else {}))
    return f


@dataclass(frozen=True)
class Outcome:
    """How a run went, as its summary reports it: the cycles run and the state it ended in,
    its events and faults, the cycle each state began (``k0``), where the start-up went
    (``times``, s), the scheduler's timing, the derating watch's and the session's ends, the
    set-up's lines."""

    cycles: int
    final_state: int
    events: list[dict]
    faults: list[Fault]
    k0: dict[int, int]
    times: dict[str, float]
    timing: dict
    derating: dict
    session_ended_by: str | None
    setup: list[str]


def summary(top: TopConfig, bus_spec, cycle: cy.Cycle, run: Outcome) -> dict:
    """The summary (``summary.json``) of a finished run of ``top`` on the buses ``bus_spec``,
    from its ``cycle``'s running figures and its :class:`Outcome`."""
    dt = 1.0 / top.rate_hz
    return {
        "exo_rt_version": __version__,
        "config": str(top.path),
        "config_sha256": top.sha256,
        "controller": top.controller.law,
        "bus": bus_spec,
        "rate_hz": top.rate_hz,
        "duration_s": float(run.cycles * dt),
        "cycles": int(run.cycles),
        "startup_s": startup(run.times),
        "phases_s": phases(run.events, run.cycles, dt),
        "timing": run.timing,
        "joints": joints(cycle, top.robot.joint_names),
        "faults": faults(run.faults, dt, run.k0.get(RUN)),
        "derating": run.derating,  # per joint whose winding passed its warning
        "session_ended_by": run.session_ended_by,
        "final_state": STATES[run.final_state],
        "setup": list(run.setup),
    }
