#!/usr/bin/env python3
"""Board link figures: heartbeat → status round trip over a pseudo-terminal (median, p99) and
the stream decoder's throughput in Python and in C: ``python tools/bench_board.py``."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from firmware_bridge import protocol as p
from firmware_bridge.emulator import BoardEmulator
from firmware_bridge.link import BoardLink

ROOT = Path(__file__).resolve().parents[1]


def round_trip(n: int = 2000) -> list[float]:
    emu = BoardEmulator(status_period=1e9, answer_heartbeats=True)
    stop = threading.Event()

    def serve():  # the board side: answer as soon as bytes arrive
        while not stop.is_set():
            emu.tick()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    link = BoardLink(emu.path, heartbeat_hz=1e9)
    out = []
    try:
        for _ in range(n):
            before = link.stats.status
            t0 = time.perf_counter()
            link.send_heartbeat(4, force=True)
            while link.stats.status == before and time.perf_counter() - t0 < 0.1:
                link.poll()
            out.append((time.perf_counter() - t0) * 1e6)
    finally:
        stop.set()
        thread.join()
        link.close()
        emu.close()
    return out


def python_throughput(frames: int = 20000) -> float:
    blob = b"".join(p.encode(p.Pressure((10, 20, 30, 40)), k) for k in range(frames))
    dec = p.FrameDecoder()
    t0 = time.perf_counter()
    for i in range(0, len(blob), 4096):
        dec.feed(blob[i : i + 4096])
    return len(blob) / (time.perf_counter() - t0) / 1e6


def c_throughput() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "ebt"
        c = ROOT / "firmware_bridge" / "c"
        subprocess.run(["gcc", "-std=c99", "-O2", "-o", str(exe), str(c / "exo_bridge.c"),
                        str(c / "exo_bridge_test.c")], check=True)
        return subprocess.run([str(exe), "bench", "2000000"], capture_output=True, text=True,
                              check=True).stdout.strip()


def main() -> int:
    rtt = np.array(round_trip())
    print(f"heartbeat → status round trip over a pty: median {statistics.median(rtt):.1f} µs, "
          f"p99 {np.percentile(rtt, 99):.1f} µs")
    print(f"stream decoder, Python: {python_throughput():.1f} MB/s")
    print(f"stream decoder, C (-O2): {c_throughput()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
