"""Where a world walk's drive currents peak, and which term of the computed torque asks for
them (docs/world.md, "Walking on the floor"): per joint, the largest |current| (A) in each
part of a run — before the walk, the opening step, the strides until STOP, the closing
step (the stride under way at STOP and the closing step), after the walk — and, at the
steady strides' peak, its phase in the stride and its split into the law's terms (each as
the current it alone would ask, A).

The terms:

- **feedforward**: the controller's model along the reference, ID(q, q̇, q̈_ref) — the hanging
  leg's gravity and the reflected rotor inertia accelerated as the gait asks;
- **feedback**: M(q)(K_p e + K_d ė) — the model error (a stance leg's load) and the tracking
  error an impact leaves;
- **rest**: what the record's current holds beyond both — the law's other terms (the
  integral, the stance load fed forward), and, where the current is clamped at the drive's
  peak, less what the law asked beyond it (a clamped peak's terms are the law's, its rest
  the difference).

Each torque term is turned into current at the sample's own ratio, current / law torque, so
the friction compensation is shared among them in proportion. A second line gives it apart:
the cycle's command, the law's torque τ through the motor alone, τ/(k·k_M), and the
compensation's current — :func:`exo_rt.control.laws.torque_to_current` with it less without
it, along the reference's speed (a tracking law's); their sum is the command, unless the
drive's limit clamps it. The gear's mesh friction grows with the torque it carries (the
drive's ``load_friction`` μ: μ·|τ|/N at the wave generator), so a loaded joint lifting its
load asks (1 + μ)/(1 − μ) times the current it asks yielding under the same τ (4 for the
shipped drives' μ = 0.6): the compensation's sign follows the reference's speed.

q̈_ref is the recorded q̇_ref's central difference (1 kHz). The run is one of
``computed_torque``'s (the gains are read from the run's own controller file).

``python tools/landing_currents.py RUN_DIR [RUN_DIR …]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _read(run: Path):
    from mcap.reader import make_reader

    joints, phase = [], {}
    with open(run / "run.mcap", "rb") as f:
        for _s, ch, m in make_reader(f).iter_messages(topics=["/joints", "/state"]):
            d = json.loads(m.data)
            if ch.topic == "/joints":
                joints.append(d)
            else:
                phase[int(d["cycle"])] = d["phase"]
    return joints, phase


def parts(run: Path, t: np.ndarray, opening: float = 0.5) -> dict[str, np.ndarray]:
    """Masks of a run's parts by its events: before the walk, the opening step (its first
    ``opening`` strides, the activities file's), the strides until STOP, the closing step (STOP
    to the walk's end: the stride under way and the closing step), after the walk."""
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    start = next((e for e in events if e.get("motion") == "walk"
                  and e.get("answer") == "accepted" and e.get("request") == "start"), None)
    if start is None:
        return {"whole run": np.ones(len(t), bool)}
    t0 = start["t"]
    t1 = t0 + opening * start["period"]
    stop = next((e["t"] for e in events if e.get("request") == "stop"
                 and e.get("answer") == "accepted" and e["t"] > t0), t[-1])
    end = next((e["t"] for e in events if e.get("motion") == "walk"
                and e.get("answer") == "finished" and e["t"] > t0), t[-1])
    return {"before": t < t0, "opening": (t >= t0) & (t < t1), "steady": (t >= t1) & (t < stop),
            "closing": (t >= stop) & (t < end), "after": t >= end}


def _motor_and_friction(top, tau: np.ndarray, qdr: np.ndarray, qddr: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """(A per joint, same) of one cycle: its law torque ``tau`` through the motor alone,
    τ/(k·k_M), and the friction compensation's current — the controller's torque → current
    with it less without it, along the reference's speed and acceleration (a tracking law's:
    exo_rt.control.laws.friction_speed), unclamped; zero where the controller file turns the
    compensation off."""
    from exo_rt.control.config import transmission_rows
    from exo_rt.control.laws import torque_to_current

    cfg = top.controller
    rows = transmission_rows(top.robot, cfg)
    rows["current_limit"] = np.inf  # (the shares, not the clamp)
    on, off = np.zeros(len(tau)), np.zeros(len(tau))
    torque_to_current(tau, qdr, qddr, rows, bool(cfg.friction_compensation), on)
    torque_to_current(tau, qdr, qddr, rows, False, off)
    return off, on - off


def measure(run: Path) -> str:
    """The report of one run (the module's docstring)."""
    from exo_rt.dynamics import Dynamics
    from exo_rt.runtime.config import load_top

    top = load_top(run / "config.yaml")
    names = list(top.robot.joint_names)
    joints, ph = _read(run)
    cyc = [int(d["cycle"]) for d in joints]
    t = np.array([d["t"] for d in joints])

    def col(key):
        return np.array([[d[key][n] for n in names] for d in joints])

    cur, cmd, q, qd, qr, qdr, tau = (col(k) for k in ("current", "command", "q", "qd",
                                                      "q_ref", "qd_ref", "torque"))
    phase = np.array([ph.get(c, np.nan) for c in cyc])
    lines = [f"{run}: |current| peaks (A) per part of the run"]
    masks = parts(run, t)
    lines.append(f"{'part':10s} " + " ".join(f"{n:>11s}" for n in names))
    for name, mask in masks.items():
        if mask.any():
            lines.append(f"{name:10s} " + " ".join(
                f"{np.abs(cur[mask, j]).max():11.2f}" for j in range(len(names))))
    steady = masks.get("steady")
    if steady is None or not steady.any():
        return "\n".join(lines)
    dyn = Dynamics(top.robot)
    law = top.controller.law
    kp = kd = None
    if law == "computed_torque":  # its gains per joint, 1/s² and 1/s
        kp, kd = (np.asarray(top.controller.gains[k], float) for k in ("kp", "kd"))
    qddr = np.gradient(qdr, t, axis=0)
    lines.append("steady strides' peak: t (s), phase in the stride, current A = "
                 "feedforward + feedback + rest (each as current, A)")
    for j, n in enumerate(names):
        k = np.flatnonzero(steady)[np.argmax(np.abs(cur[steady, j]))]
        ff = dyn.inverse_dynamics(q[k], qd[k], qddr[k])
        per_amp = tau[k, j] / cur[k, j] if abs(cur[k, j]) > 1e-6 else np.nan  # N·m per A
        line = (f"  {n:11s} t {t[k]:7.3f}  phase {phase[k] % 1.0:.2f}  {cur[k, j]:6.1f} A"
                f" = {ff[j] / per_amp:6.1f}")
        if kp is not None:
            fb = dyn.mass_matrix(q[k]) @ (kp * (qr[k] - q[k]) + kd * (qdr[k] - qd[k]))
            line += (f" + {fb[j] / per_amp:6.1f} + "
                     f"{cur[k, j] - (ff[j] + fb[j]) / per_amp:6.1f}")
        lines.append(line)
        motor, friction = _motor_and_friction(top, tau[k], qdr[k], qddr[k])
        lines.append(f"  {'':11s} command {cmd[k, j]:6.1f} A: the law's {tau[k, j]:7.1f} N·m "
                     f"through the motor alone {motor[j]:6.1f} A, the friction "
                     f"compensation {friction[j]:+6.1f} A (reference speed "
                     f"{qdr[k, j]:+.2f} rad/s)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run folders of world walks")
    args = p.parse_args(argv)
    for run in args.runs:
        print(measure(Path(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
