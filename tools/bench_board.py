#!/usr/bin/env python3
"""Board link figures: heartbeat → status round trip over a pseudo-terminal (median, p99); one
control cycle's poll (the board's STATUS and PRESSURE of one millisecond waiting on the pty:
read + decode) through the compiled receive path and through the Python decoder; and the
stream decoder's throughput in Python and in C: ``python tools/bench_board.py``."""

from __future__ import annotations

import argparse
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


def cycle_poll(n: int = 5000) -> tuple[float, float]:
    """Median µs of BoardLink.poll() with one millisecond of the board's frames waiting:
    (compiled receive path, the Python decoder on the same bytes)."""
    import os

    emu = BoardEmulator()
    link = BoardLink(emu.path, heartbeat_hz=1e9)
    ms = p.encode(p.Status(False, True, False, 24000), 1) + p.encode(p.Pressure((300, 20)), 2)
    dec = p.FrameDecoder()
    fast, slow = [], []
    try:
        for k in range(n):
            os.write(emu.master, ms)
            time.sleep(0)
            t0 = time.perf_counter()
            if k % 2:
                link.poll()
                fast.append(time.perf_counter() - t0)
            else:
                for msg in dec.feed(os.read(link._fd, 4096)):
                    link.status_time = msg.sequence  # what poll() did with each message
                slow.append(time.perf_counter() - t0)
    finally:
        link.close()
        emu.close()
    return 1e6 * statistics.median(fast), 1e6 * statistics.median(slow)


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
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    rtt = np.array(round_trip())
    print(f"heartbeat → status round trip over a pty: median {statistics.median(rtt):.1f} µs, "
          f"p99 {np.percentile(rtt, 99):.1f} µs")
    fast, slow = cycle_poll()
    print(f"one cycle's poll (status + pressure waiting): compiled {fast:.1f} µs, Python "
          f"decoder {slow:.1f} µs ({slow / fast:.1f}×)")
    print(f"stream decoder, Python: {python_throughput():.1f} MB/s")
    print(f"stream decoder, C (-O2): {c_throughput()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
