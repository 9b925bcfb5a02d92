"""The recording process's memory over a long run, as its MCAP writer makes it: a chunk
closed every 0.5 s of run time (what the recording's fsync does), hour after hour, in one
file against a file an hour (``exo_rt.record.mcap_log.SEGMENT_S``). Rows are few per chunk
(the growth is per chunk, not per message), so 8 hours take a minute.

    python tools/bench_mcap_memory.py [--hours 8] [--rows-per-chunk 10]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np

from exo_rt.record.mcap_log import McapLog
from exo_rt.record.recorder import cycle_columns, row_width


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run(hours: float, rows_per_chunk: int, segment_s: float, folder: Path) -> list[float]:
    columns = cycle_columns(2)
    width = row_width(columns)
    meta = {"joint_names": ["hip", "knee"], "rate_hz": 1000.0, "states": ["RUN"],
            "causes": ["ok"], "wall_start": 1.7e9}
    log = McapLog(folder / "run.mcap", columns, meta, ["leg"], segment_s=segment_s)
    log.set_origin(meta)
    rows = np.zeros((rows_per_chunk, width))
    chunks_per_hour = 7200
    rss = [rss_mib()]
    for h in range(int(hours)):
        for c in range(chunks_per_hour):
            t = h * 3600.0 + c * 0.5
            rows[:, 0] = t + np.arange(rows_per_chunk) * 1e-3
            rows[:, 1] = rows[:, 0] * 1000.0
            log.rows(rows)
            log.flush()
        rss.append(rss_mib())
    log.close(meta)
    return rss


CASES = {"one file": math.inf, "a file an hour": 3600.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=int, default=8)
    ap.add_argument("--rows-per-chunk", type=int, default=10)
    ap.add_argument("--case", choices=list(CASES), help="one case in this process (default: "
                    "each in a process of its own)")
    args = ap.parse_args()
    if args.case is None:
        import subprocess
        import sys

        for case in CASES:
            subprocess.run([sys.executable, __file__, "--hours", str(args.hours),
                            "--rows-per-chunk", str(args.rows_per_chunk), "--case", case],
                           check=True)
        return
    with tempfile.TemporaryDirectory() as d:
        rss = run(args.hours, args.rows_per_chunk, CASES[args.case], Path(d))
    after1 = rss[1]
    print(f"{args.case:<15} RSS after hour 1 {after1:6.1f} MiB, after hour {args.hours} "
          f"{rss[-1]:6.1f} MiB: +{rss[-1] - after1:5.2f} MiB "
          f"({100 * (rss[-1] - after1) / after1:+.1f} %)", flush=True)


if __name__ == "__main__":
    main()
