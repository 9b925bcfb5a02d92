#!/usr/bin/env python3
"""Per-frame cost of the cycle's CAN I/O: python-can's own API against the frame ports
(:mod:`exo_rt.bus.port`), on the interfaces this machine has.

    python tools/bench_ports.py [--frames N] [--cycles N]

udp_multicast (cross-process, what the real-time simulation uses): send, and receive of a
frame that has arrived, through ``bus.send``/``bus.recv`` and through ``UdpMulticastPort``;
then one control cycle's I/O as the leg's bus has it — read the two drives' answers, send two
RPDOs and the SYNC, recorded — frame by frame against the compiled batches (one
``recvmmsg``, one ``sendmmsg`` for the RPDOs and one for the SYNC), a millisecond's sleep
before each cycle as in the loop (cold caches, as the real cycle finds them); and the
real-time simulation's read of what one of its turns finds — a bus's SYNC and two RPDOs —
frame by frame against a table (``RealtimeServer._arrived``: one ``recvmmsg``).
socketcan: measured where a ``vcan0``/``can0`` interface is up (``ip link add dev vcan0 type
vcan``); otherwise the ``struct can_frame`` codec alone.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

import can
import numpy as np

from exo_rt.bus.port import CAN_FRAME, SocketcanPort, open_port


def timed_blocks(setup, fn, blocks: int = 200, per_block: int = 20) -> float:
    """Median µs of ``fn()``: ``setup()`` (untimed) then ``per_block`` timed calls, per block."""
    out = []
    for _ in range(blocks):
        setup()
        t0 = time.perf_counter()
        for _ in range(per_block):
            fn()
        out.append((time.perf_counter() - t0) / per_block * 1e6)
    return float(np.median(out))


def per_call(fn, n: int) -> float:
    """Median µs of ``fn()`` over n calls, in 20 blocks."""
    return timed_blocks(lambda: None, fn, 20, max(1, n // 20))


def udp(n: int) -> None:
    group = "239.74.251.1"
    a = can.Bus(interface="udp_multicast", channel=group)
    b = can.Bus(interface="udp_multicast", channel=group)
    port = open_port(a)  # a's socket: now non-blocking, read by the port
    msg = can.Message(arbitration_id=0x201, data=b"\x0f\x00\x10\x27", is_extended_id=False)
    blocks = max(20, n // 50)

    def drain() -> None:  # untimed: both sockets emptied, as the two sides do every cycle
        time.sleep(0.001)  # what is still being delivered (the loopback's softirq) arrives
        while b.recv(0.0) is not None:
            pass
        port.drain()

    send_api = timed_blocks(drain, lambda: a.send(msg), blocks)
    send_port = timed_blocks(drain, lambda: port.send(0x201, b"\x0f\x00\x10\x27"), blocks)

    def fill() -> None:  # untimed: 20 frames from the other bus waiting on a's socket
        drain()
        for _ in range(20):
            b.send(msg)
        time.sleep(0.002)

    recv_api = timed_blocks(fill, lambda: a.recv(0.0), blocks)
    recv_port = timed_blocks(fill, port.recv, blocks)
    print(f"  udp_multicast  send: python-can {send_api:6.1f} µs, port {send_port:6.1f} µs "
          f"({send_api / send_port:.1f}×)")
    print(f"  udp_multicast  recv: python-can {recv_api:6.1f} µs, port {recv_port:6.1f} µs "
          f"({recv_api / recv_port:.1f}×)")
    for bus in (a, b):
        bus.shutdown()


def cycle(n: int) -> None:
    """One cycle's frame I/O, per frame and in batches (µs per cycle, median)."""
    from exo_rt.record.rings import FrameRing

    group = "239.74.251.2"
    a = can.Bus(interface="udp_multicast", channel=group)
    b = can.Bus(interface="udp_multicast", channel=group)
    port, drives = open_port(a), open_port(b)
    ring = FrameRing(1 << 16)
    port.tap = ring
    tpdo = b"\x37\x02\x10\x27\x00\x00\xe8\x03"
    rx, rpdos, sync = port.batch(32), port.batch(2), port.batch(1)
    for k in range(2):
        rpdos.arbitration_id[k], rpdos.length[k] = 0x201 + k, 4
    sync.arbitration_id[0] = 0x080

    def answers() -> None:  # untimed: the drives answer the last SYNC, the loop sleeps
        drives.send(0x181, tpdo)
        drives.send(0x182, tpdo)
        time.sleep(0.001)
        ring.header[1] = ring.head  # (the recording process keeps up)
        while drives.recv() is not None:
            pass

    def per_frame() -> None:
        while port.recv() is not None:
            pass
        port.send(0x201, b"\x0f\x00\x10\x27")
        port.send(0x202, b"\x0f\x00\x10\x27")
        port.send(0x080, b"")

    def batches() -> None:
        while port.recv_batch(rx) == rx.capacity:
            pass
        port.send_batch(rpdos, 2)
        port.send_batch(sync, 1)

    blocks = max(50, n // 10)
    frame_us = timed_blocks(answers, per_frame, blocks, 1)
    batch_us = timed_blocks(answers, batches, blocks, 1)
    print(f"  one cycle (2 frames in, 3 out, recorded): per frame {frame_us:6.1f} µs, batches "
          f"{batch_us:6.1f} µs ({frame_us / batch_us:.1f}×)")
    port.tap = None
    ring.release()
    for bus in (a, b):
        bus.shutdown()


def serving(n: int) -> None:
    """The real-time simulation's read of one turn's frames (a bus's SYNC and two RPDOs, each
    handed on in the port's reusable frame), frame by frame and as a table (µs, median)."""
    from exo_rt.sim.server import RealtimeServer

    group = "239.74.251.3"
    a = can.Bus(interface="udp_multicast", channel=group)
    b = can.Bus(interface="udp_multicast", channel=group)
    sim, master = open_port(a), open_port(b)
    sim.warm_up()
    rows = sim.batch()

    def commands() -> None:  # untimed: the controller's cycle sent, the loop slept
        master.send(0x201, b"\x0f\x00\x10\x27")
        master.send(0x202, b"\x0f\x00\x10\x27")
        master.send(0x080, b"")
        time.sleep(0.001)

    def per_frame() -> None:
        while sim.recv() is not None:
            pass

    def table() -> None:
        for _frame in RealtimeServer._arrived(sim, rows):
            pass

    blocks = max(50, n // 10)
    frame_us = timed_blocks(commands, per_frame, blocks, 1)
    table_us = timed_blocks(commands, table, blocks, 1)
    print(f"  a simulation turn's read (3 frames in): per frame {frame_us:6.1f} µs, a table "
          f"{table_us:6.1f} µs ({frame_us / table_us:.1f}×)")
    for bus in (a, b):
        bus.shutdown()


def socketcan(n: int) -> None:
    try:
        bus = can.Bus(interface="socketcan", channel="vcan0")
    except (OSError, can.CanError, ImportError):
        bus = None
    if bus is None:
        x, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        port = SocketcanPort(None, sock=x)
        raw = CAN_FRAME.pack(0x181, 8, bytes(8))
        enc = per_call(lambda: CAN_FRAME.pack(0x201, 4, b"\x0f\x00\x10\x27"), n)
        dec = per_call(lambda: port.decode(raw, 0.0), n)
        print(f"  socketcan: no vcan0 here; struct can_frame codec: encode {enc:.2f} µs, decode "
              f"{dec:.2f} µs (+ one send/recv system call per frame)")
        return
    port = open_port(bus)
    msg = can.Message(arbitration_id=0x201, data=b"\x0f\x00\x10\x27", is_extended_id=False)
    send_api = per_call(lambda: bus.send(msg), n)
    send_port = per_call(lambda: port.send(0x201, b"\x0f\x00\x10\x27"), n)
    print(f"  socketcan vcan0  send: python-can {send_api:6.1f} µs, port {send_port:6.1f} µs")
    bus.shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--cycles", type=int, default=3000)
    args = ap.parse_args(argv)
    print("per-frame cost of the cycle's CAN I/O (median of 20 blocks):")
    udp(args.frames)
    cycle(args.cycles)
    serving(args.cycles)
    socketcan(args.frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
