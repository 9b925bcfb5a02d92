"""Sessions run on the lockstep simulated exoskeleton for the session tests: a session script
written for the test, the emulated crutch's buttons pressed by plan (:mod:`exo_rt.sim.crutch`),
requests no script may hold asked by the test (:class:`Asks`), every cycle's record kept."""

from __future__ import annotations

from pathlib import Path

import yaml

from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.sim.crutch import crutch

ROOT = Path(__file__).resolve().parents[1]
EMPTY: tuple = ()


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
                plan=(), asks=(), duration: float = 60.0, **options):
    """A session run: ``steps`` (a session script's) written to a file, the buttons' ``plan``
    pressed on the emulated board. Returns the controller (``ctl.log`` every cycle,
    ``ctl.events``, ``ctl.session``) and the run's result."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "session.yaml"
    path.write_text(yaml.safe_dump({"description": "test", "steps": steps}))
    top = load_top(ROOT / "configs" / config)
    sources = tuple(options.pop("sources", ()))
    sources += ((lambda ctl: Asks(asks)),) if asks else ()
    sources += (crutch(plan),) if plan else ()
    ctl = Controller(top, "sim", history=True, session=str(path), sources=sources, **options)
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
