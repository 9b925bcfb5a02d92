#!/usr/bin/env python3
"""How long a poll of the board's serial line takes: a plain non-blocking read against asking
the line first (``FIONREAD``, firmware_bridge.ttyio), with the controller's and the simulated
board's threads both real-time, as in ``exo-rt run --realtime``.

    python tools/bench_tty.py [--seconds 5]

A pseudo-terminal pair: the "board" (SCHED_FIFO 70, first CPU) polls its end every 100 µs and
writes a status frame every 1 ms; the "controller" (SCHED_FIFO 80, last CPU) polls its end
once a millisecond and writes a heartbeat; a busy SCHED_OTHER process shares the first CPU
(the recording writer does in a run; ``--no-hog`` leaves it out). Each side's poll times are
printed for each way of reading; a plain read of an idle line waits on the kernel's tty worker
thread, so its worst case is the worker's wait for a CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tty

import numpy as np

from firmware_bridge import ttyio


def _poll(fd: int, mode: str, count) -> None:
    if mode == "fionread" and not ttyio.waiting(fd, count):
        return
    try:
        os.read(fd, 4096)
    except BlockingIOError:
        pass


def _realtime(cpu: int, priority: int) -> str:
    try:
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return f"SCHED_FIFO {priority} on CPU {cpu}"
    except (OSError, AttributeError) as exc:
        return f"not real-time ({exc})"


def _line(who: str, mode: str, us: np.ndarray) -> str:
    return (f"  {who:<10} {mode:<9} polls {len(us):6d}  p50 {np.percentile(us, 50):6.1f}  "
            f"p99 {np.percentile(us, 99):6.1f}  p99.9 {np.percentile(us, 99.9):7.1f}  "
            f"max {us.max():7.1f} µs  over 500 µs: {(us > 500).sum()}")


def _hog(cpu: int, seconds: float) -> int:
    """A SCHED_OTHER process spinning on ``cpu`` for ``seconds`` (its pid)."""
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu})
        try:  # (a second run forks from a real-time parent)
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except (OSError, AttributeError):
            pass
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        os._exit(0)
    return pid


def run(mode: str, seconds: float, hog: bool) -> list[str]:
    board, pc = os.openpty()
    tty.setraw(pc)
    os.set_blocking(board, False)
    os.set_blocking(pc, False)
    cpus = sorted(os.sched_getaffinity(0))
    hog_pid = _hog(cpus[0], seconds + 0.5) if hog else None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the board
        os.close(r)
        _realtime(cpus[0], 70)
        count, times, due = ttyio.probe(), [], 0.0
        end = time.monotonic() + seconds + 0.3
        while time.monotonic() < end:
            t0 = time.perf_counter()
            _poll(board, mode, count)
            now = time.monotonic()
            if now >= due:
                due = now + 1e-3
                try:
                    os.write(board, b"s" * 24)
                except BlockingIOError:
                    pass
            times.append(time.perf_counter() - t0)
            time.sleep(1e-4)
        os.write(w, _line("board", mode, np.array(times) * 1e6).encode())
        os._exit(0)
    os.close(w)
    how = _realtime(cpus[-1], 80)
    count, times = ttyio.probe(), []
    deadline = time.perf_counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        deadline += 1e-3
        remaining = deadline - time.perf_counter()
        if remaining > 3e-4:
            time.sleep(remaining - 2e-4)
        while time.perf_counter() < deadline:
            pass
        t0 = time.perf_counter()
        _poll(pc, mode, count)
        times.append(time.perf_counter() - t0)
        os.write(pc, b"h" * 8)
    os.waitpid(pid, 0)
    if hog_pid is not None:
        os.waitpid(hog_pid, 0)
    board_line = os.read(r, 4096).decode()
    os.close(r)
    for fd in (board, pc):
        os.close(fd)
    beside = ", a busy process beside the board" if hog else ""
    return [f"{mode} ({how}{beside})", _line("controller", mode, np.array(times) * 1e6),
            board_line]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--no-hog", action="store_true", help="no busy process on the first CPU")
    args = ap.parse_args(argv)
    for mode in ("read", "fionread"):
        print("\n".join(run(mode, args.seconds, not args.no_hog)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
