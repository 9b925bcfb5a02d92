"""The figures of docs/sessions.md's "Measured" table: the whole session on the emulated
crutch (:data:`exo_rt.sim.crutch.WHOLE_SESSION`: sit, stand up with GO released and pressed
again, walk 17 strides at 0.4 / 0.5 / 0.3 m/s, STOP, stand) on the lockstep simulated
exoskeleton, per robot (:func:`exo_rt.session.figures.session_figures`).

    python tools/session_figures.py [--config configs/exo_leg.yaml ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(config: Path) -> dict:
    import yaml

    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller
    from exo_rt.session.figures import FinishedSession, session_figures
    from exo_rt.sim.crutch import WHOLE_SESSION, WHOLE_SESSION_S, crutch

    top = load_top(config)
    legs = len([j for j in top.robot.joint_names if j.endswith("hip")])
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "end.yaml"
        script.write_text(yaml.safe_dump({"steps": [{"request": "end",
                                                     "at": WHOLE_SESSION_S}]}))
        ctl = Controller(top, "sim", history=True, session=str(script),
                         start_pose=[0.9, 1.3] * legs, sources=(crutch(WHOLE_SESSION),))
        res = ctl.run(WHOLE_SESSION_S, Path(tmp) / "run")
        out = session_figures(FinishedSession(ctl.log, ctl.events, ctl.dt, ctl.robot,
                                              ctl.wearer, ctl.session.machine.steps,
                                              ctl.bus_set.board))
        out["final_state"] = res.summary["final_state"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", action="append", type=Path,
                   help="top configs (default exo_leg and exo_2leg)")
    args = p.parse_args()
    configs = args.config or [ROOT / "configs" / "exo_leg.yaml",
                              ROOT / "configs" / "exo_2leg.yaml"]
    for config in configs:
        f = run(config)
        print(f"## {config.name}: {f['final_state']}, {f['steps']} strides")
        print("| figure | required | measured |\n|---|---|---|")
        print(f"| answer to the board after a press | ≤ 10 ms | {f['answer_ms']:.1f} ms |")
        print(f"| largest change of q_r per cycle | < 0.01 rad | {f['dq_max']:.4f} rad |")
        print(f"| largest change of q̇_r per cycle | < 0.05 rad/s | {f['dqd_max']:.4f} rad/s |")
        print(f"| tracking RMS (worst joint) | ≤ 0.5° | {f['rms_deg']:.3f}° |")
        print(f"| GO released: frozen after (smoothly: no step of q̈_r) | ≤ 250 ms | "
              f"{f['freeze_ms']:.0f} ms |")
        print(f"| GO pressed: moving after | go_debounce (50 cycles) | "
              f"{f['resume_cycles']} cycles |")
        print(f"| STOP → standing | ≤ 1 stride ({f['stop_period_s']:.2f} s) | "
              f"{f['stop_s']:.2f} s |")
        for speed, w in sorted(f["walks"].items()):
            print(f"| {speed:.1f} m/s: stride, cadence ({w['strides']} strides) | "
                  f"{w['asked_stride_m']:.3f} m, {w['asked_cadence_per_min']:.1f}/min ± 5 % | "
                  f"{w['stride_m']:.3f} m ({100 * (w['stride_m'] / w['asked_stride_m'] - 1):+.1f}"
                  f" %), {w['cadence_per_min']:.1f}/min "
                  f"({100 * (w['cadence_per_min'] / w['asked_cadence_per_min'] - 1):+.1f} %) |")
        print()


if __name__ == "__main__":
    main()
