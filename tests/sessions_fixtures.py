"""Sessions run on the lockstep simulated exoskeleton for the session tests: a session script
written for the test, the emulated crutch's buttons pressed by plan (times from the session's
start, on the board's clock), every cycle's record kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from exo_rt.runtime import controller as controller_module
from exo_rt.runtime.config import load_top

ROOT = Path(__file__).resolve().parents[1]
EMPTY: tuple = ()


class ButtonPlan:
    """A test's wearer on the emulated crutch: at the session's first cycle, every ``(t,
    command, what)`` of ``plan`` is handed to the board emulator (``buttons`` / ``click`` /
    ``silence`` / ``estop``) at the session's start + t on the board's clock."""

    def __init__(self, ctl, plan) -> None:
        self.ctl, self.plan, self.t0 = ctl, list(plan), None

    def poll(self, k: int):
        if self.t0 is None:
            self.t0 = self.ctl.board.clock()
            for t, cmd, what in self.plan:
                if cmd == "estop":
                    continue
                self.ctl.bus_set.board_command(f"{cmd} {self.t0 + t!r} {what}")
        for t, cmd, what in self.plan:  # (the e-stop has no time of its own: pressed now)
            if cmd == "estop" and self.ctl.board.clock() >= self.t0 + t and not \
                    getattr(self, "_estop", False):
                self._estop = True
                self.ctl.bus_set.board_command(f"estop {what}")
        return EMPTY


class Asks:
    """Requests a session script may not hold (an unknown motion: the script's loader refuses
    it), asked at ``(t, Request)`` s from the session's start."""

    def __init__(self, asks) -> None:
        self.asks, self.k0 = list(asks), None

    def poll(self, k: int):
        if self.k0 is None:
            self.k0 = k
        due = [r for t, r in self.asks if self.k0 + round(t / 1e-3) == k]
        return due or EMPTY


def run_session(tmp_path: Path, steps: list[dict], *, config: str = "exo_leg.yaml",
                plan=(), asks=(), duration: float = 60.0, monkeypatch=None, **options):
    """A session run: ``steps`` (a session script's) written to a file, the buttons' ``plan``
    pressed on the emulated board. Returns the controller (``ctl.log`` every cycle,
    ``ctl.events``, ``ctl.session``) and the run's result."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "session.yaml"
    path.write_text(yaml.safe_dump({"description": "test", "steps": steps}))
    top = load_top(ROOT / "configs" / config)
    ctl = controller_module.Controller(top, "sim", history=True, session=str(path), **options)
    if plan or asks:
        made = controller_module.sessions.for_run

        def with_plan(c):
            sess = made(c)
            if asks:
                sess.sources.insert(0, Asks(asks))
            if plan:
                sess.sources.insert(0, ButtonPlan(c, plan))
            return sess

        monkeypatch.setattr(controller_module.sessions, "for_run", with_plan)
    result = ctl.run(duration, tmp_path / "run")
    return ctl, result


def requests(ctl) -> list[dict]:
    """The session's request events, in order."""
    return [e for e in ctl.events if e["event"] == "request"]


def sequence(ctl) -> list[tuple]:
    """The session's activity sequence without its times or sources: each request with its
    answer (and reason), each finished motion, each posture reached."""
    out = []
    for e in ctl.events:
        if e["event"] == "request":
            out.append(("request", e["request"], e.get("motion"), e["answer"], e.get("reason")))
        elif e["event"] == "finished":
            out.append(("finished", e.get("motion"), e.get("posture")))
    return out


def jumps(log, cycles) -> tuple[float, float]:
    """The largest per-cycle change of q_r (rad) and q̇_r (rad/s) across each cycle of
    ``cycles`` (a boundary: the change from it to the next)."""
    qr, qdr = log["q_ref"], log["qd_ref"]
    dq = dqd = 0.0
    for k in cycles:
        if 0 <= k and k + 1 < len(qr):
            dq = max(dq, float(np.abs(qr[k + 1] - qr[k]).max()))
            dqd = max(dqd, float(np.abs(qdr[k + 1] - qdr[k]).max()))
    return dq, dqd
