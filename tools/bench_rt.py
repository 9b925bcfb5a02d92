#!/usr/bin/env python3
"""Real-time runs: the controller process alone on its CPU, the simulation and the recording
in their own processes — as on the exoskeleton.

    python tools/bench_rt.py [--duration S] [--configs exo_leg exo_2leg] [--hog] [--out DIR]

For each config it runs ``exo-rt run --realtime`` (recording on, board emulator on) and prints
the controller-only cycle (compute: bus I/O + the cycle kernel + state handling, from the
summary), the wake latency and the period (p50/p99/p99.9/max), the overruns as a fraction of
the cycles, the first 100 cycles after READY (wake + compute within the period?), and the
simulation's own figures. ``--hog`` runs a CPU hog on every CPU but the control thread's for
the whole run. Targets: compute median ≤ 40 µs (exo_leg) / ≤ 80 µs (exo_2leg), p99.9 ≤ 150 µs;
wake p99.9 ≤ 100 µs; overruns ≤ 0.01 %; no fault.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET_P50 = {"exo_leg": 40.0, "exo_2leg": 80.0}


def hogs(control_cpu: int) -> list[subprocess.Popen]:
    cpus = sorted(os.sched_getaffinity(0) - {control_cpu}) or [control_cpu]
    return [subprocess.Popen([sys.executable, "-c",
                              f"import os\nos.sched_setaffinity(0, {{{c}}})\nwhile True: pass"])
            for c in cpus]


def run(config: str, duration: float, out: Path, hog: bool) -> dict:
    procs = hogs(max(os.sched_getaffinity(0))) if hog else []
    try:
        path = Path(config) if config.endswith(".yaml") else ROOT / "configs" / f"{config}.yaml"
        res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--realtime", "--config",
                              str(path), "--duration",
                              str(duration), "--out", str(out)], capture_output=True, text=True,
                             cwd=ROOT)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    s = json.loads((out / "summary.json").read_text())
    sim = [line for line in res.stderr.splitlines() if line.startswith("simulation:")]
    from exo_rt.record.recorder import read_cycle_log

    records, _ = read_cycle_log(out / "cycles.exolog")
    first = records["wake_us"][:100] + records["compute_us"][1:101]
    return {"summary": s, "sim": sim[-1] if sim else "", "first100_max_us": float(first.max()),
            "records": len(records)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--configs", nargs="*", default=["exo_leg", "exo_2leg"],
                    help="names in configs/ or paths to top configs (.yaml)")
    ap.add_argument("--hog", action="store_true", help="a CPU hog on every other CPU")
    ap.add_argument("--out", default="/tmp/exo-rt-bench-rt")
    args = ap.parse_args(argv)
    print(f"exo-rt run --realtime, {args.duration:g} s each, recording and board emulator on"
          f"{', CPU hog on the other CPUs' if args.hog else ''} ({os.cpu_count()} CPUs):")
    for config in args.configs:
        out = Path(args.out) / Path(config).stem
        r = run(config, args.duration, out, args.hog)
        s = r["summary"]
        t = s["timing"]
        cycles = max(s["cycles"], 1)
        print(f"  {config}: {s['final_state']}, {s['cycles']} cycles, faults "
              f"{[f['cause'] for f in s['faults']]}")
        for key, label in (("compute_us", "compute"), ("wake_latency_us", "wake"),
                           ("period_us", "period")):
            x = t[key]
            print(f"    {label:<8} p50 {x['p50']:7.1f}  p99 {x['p99']:7.1f}  p99.9 "
                  f"{x['p999']:7.1f}  max {x['max']:8.1f} µs")
        target = TARGET_P50.get(Path(config).stem.replace("_vm", ""))
        if target:
            print(f"    compute median / target {t['compute_us']['p50'] / target:.2f}; p99.9 / "
                  f"150 µs {t['compute_us']['p999'] / 150:.2f}; wake p99.9 / 100 µs "
                  f"{t['wake_latency_us']['p999'] / 100:.2f}")
        print(f"    overruns {t['overruns']} ({100 * t['overruns'] / cycles:.4f} %, target ≤ "
              f"0.01 %); first 100 cycles: worst wake + compute {r['first100_max_us']:.0f} µs "
              f"(period {1e6 / s['rate_hz']:.0f})")
        print(f"    {r['sim']}")
        for line in s.get("setup", []):
            if "process" in line:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
