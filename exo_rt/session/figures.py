"""The figures of a session run, from the controller's record (every cycle kept) and its
events: what docs/sessions.md's "Measured" table shows (``python tools/session_figures.py``)
and what tests/test_sessions.py asserts.

- ``answer_ms``: the longest time from a press or release of the crutch's buttons (the board
  emulator's send) to the board's receipt of its ANSWER;
- ``dq_max`` rad, ``dqd_max`` rad/s: the largest change of q_r and q̇_r from one cycle to the
  next anywhere in RUN (every boundary included);
- ``rms_deg``: the largest joint's tracking RMS over RUN;
- ``freeze_ms``: after GO's release mid-motion, until q_r stops changing; ``resume_cycles``:
  after its press, until it moves again;
- ``stop_s`` and ``stop_period_s``: STOP to the walk's end in its end posture, and the stride
  period then;
- ``walks``: per speed walked steadily, the measured stride length and cadence and the
  requested ones (:func:`exo_rt.control.gait_speed.measure` on the left leg's hip and knee).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exo_rt.control import gait_speed
from exo_rt.cycle.states import RUN
from firmware_bridge import requests as rq


def accepted(events, kind: str, motion: str | None = None) -> list[dict]:
    """The accepted requests of ``kind`` (and ``motion``), in order."""
    return [e for e in events if e["event"] == "request" and e["request"] == kind and
            e["answer"] == "accepted" and (motion is None or e.get("motion") == motion)]


def _boundaries(phase, a: int, b: int) -> list[int]:
    return [k for k in range(a + 1, b) if math.floor(phase[k]) > math.floor(phase[k - 1])]


def speed_windows(events, log, first_speed: float) -> list[tuple[float, int, int]]:
    """(speed, first cycle, end cycle) of the whole strides walked steadily at each speed: from
    the first stride boundary after the walk began (after a change: after its blend's stride)
    to the boundary the next change starts at (the last: the last boundary before STOP)."""
    walk = next(e["cycle"] for e in events if e["event"] == "request" and
                e["answer"] == "accepted" and "period" in e and e.get("motion") == "walk")
    stop = accepted(events, "stop")[0]["cycle"]
    bounds = _boundaries(log["phase"], walk, stop)
    changes = [(first_speed, walk)] + [(e["speed"], e["cycle"]) for e in events
                                       if e["event"] == "request" and e["answer"] == "accepted"
                                       and e["request"] in ("mode", "speed")]
    out = []
    for i, (speed, at) in enumerate(changes):
        after = [b for b in bounds if b > at]
        start = after[0] if i == 0 else after[1]
        end = [b for b in bounds if b > changes[i + 1][1]][0] if i + 1 < len(changes) \
            else bounds[-1]
        out.append((speed, start, end))
    return out


@dataclass(frozen=True)
class FinishedSession:
    """What :func:`session_figures` reads of a finished session run: its record of every
    cycle (a controller's ``log`` with ``history=True``), its events, the period (s), the
    robot and the wearer profile, the activity machine's step count and the board emulator
    in this process (None: none here, no answer latency)."""

    log: np.ndarray
    events: list
    dt: float
    robot: object
    wearer: object
    steps: int
    board: object = None


def session_figures(done: FinishedSession) -> dict:
    """The figures of a finished session run."""
    log, events, dt = done.log, done.events, done.dt
    out: dict = {}
    run = np.flatnonzero(log["state"] == RUN)
    qr, qdr = log["q_ref"], log["qd_ref"]
    out["dq_max"] = float(np.abs(np.diff(qr[run], axis=0)).max())
    out["dqd_max"] = float(np.abs(np.diff(qdr[run], axis=0)).max())
    e = np.degrees(log["q"][run] - qr[run])
    out["rms_deg"] = float(np.sqrt(np.mean(e**2, axis=0)).max())
    board = done.board  # the board emulator in this process (None: none here)
    if board is not None:
        changes = [c[0] for c in board.button_changes]
        reqs = [x for x in events if x["event"] == "request"]
        answers = [(t, a) for t, a in board.answers if a.answer != rq.FINISHED]
        lat = [t - max(c for c in changes if c <= t) for (t, _), x in zip(answers, reqs,
                                                                      strict=False)
               if x["source"] == "board"]
        out["answer_ms"] = 1e3 * max(lat) if lat else None
    releases = accepted(events, "go_release")
    moving = [x for x in releases if any(p["cycle"] > x["cycle"] for p in
                                         accepted(events, "go"))]
    if moving:
        k = moving[0]["cycle"]
        press = next(p["cycle"] for p in accepted(events, "go") if p["cycle"] > k)
        still = k + 1
        while still < press and np.any(qr[still + 1] != qr[still]):
            still += 1
        out["freeze_ms"] = 1e3 * (still - k) * dt
        go = press + 1
        while go < len(qr) - 1 and np.all(qr[go] == qr[press]):
            go += 1
        out["resume_cycles"] = go - press
    stops = accepted(events, "stop")
    if stops:
        walks = [x for x in events if x["event"] == "finished" and x.get("motion") == "walk"]
        out["stop_s"] = (walks[0]["cycle"] - stops[0]["cycle"]) * dt
        periods = [x["period"] for x in events if x["event"] == "request" and
                   x["answer"] == "accepted" and "period" in x and x["cycle"] <= stops[0]["cycle"]]
        out["stop_period_s"] = periods[-1]
        start = next(x for x in events if x["event"] == "request" and
                     x["answer"] == "accepted" and x.get("motion") == "walk" and "period" in x)
        prefix = "left_" if "left_hip" in done.robot.joint_names else ""
        hip = done.robot.joint_names.index(prefix + "hip")
        thigh, shank = gait_speed.leg_lengths(done.robot, prefix)
        out["walks"] = {}
        for speed, a, b in speed_windows(events, log, start["speed"]):
            length, cadence = gait_speed.measure(log["q"][a:b, hip], log["q"][a:b, hip + 1],
                                                 log["phase"][a:b], dt, thigh, shank)
            w = done.wearer.walk(speed, done.robot)
            out["walks"][speed] = {"stride_m": length, "cadence_per_min": cadence,
                                   "asked_stride_m": w.stride_length,
                                   "asked_cadence_per_min": 60.0 / w.period,
                                   "strides": int(round((b - a) * dt / w.period))}
    out["steps"] = done.steps
    return out
