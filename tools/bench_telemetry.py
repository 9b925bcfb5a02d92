#!/usr/bin/env python3
"""What live telemetry and MCAP cost, and how big run.mcap gets:
``python tools/bench_telemetry.py [--duration S] [--repeats N]``.

Runs ``exo-rt run`` of the test stand (``configs/exo_leg.yaml``, the figures' run since they
were first made) on the lockstep simulated bus, alternately without and with ``--live``
(a Foxglove WebSocket client of its own subscribed to every live channel for the whole run),
and reports

- the control thread's compute time per cycle (median, p99, from summary.json): telemetry
  lives in the recording process, so this should not move;
- the recording process's CPU time per second of run (recording.json ``cpu_s``: cycle log,
  CAN log, run.mcap, and the live server when on), and what the client received;
- run.mcap: bytes and messages per second of run, and how fast it is written (the cycle log
  and CAN log of the run encoded again through the same writer, ``exo-rt export --mcap``).

Medians over the repeats; the runs alternate so that other load on the machine hits both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

STAND = Path(__file__).resolve().parents[1] / "configs" / "exo_leg.yaml"  # the test stand


def _client(url: str, counts: dict, stop: threading.Event) -> None:
    from websockets.sync.client import connect

    with connect(url, subprotocols=["foxglove.sdk.v1"], open_timeout=10, max_size=None) as ws:
        json.loads(ws.recv(timeout=10))  # serverInfo
        subs = []
        while not subs:
            m = json.loads(ws.recv(timeout=10))
            if m.get("op") == "advertise":
                subs = [{"id": i, "channelId": c["id"]} for i, c in enumerate(m["channels"])]
        ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        try:
            while not stop.is_set():
                m = ws.recv(timeout=30)
                if isinstance(m, bytes):
                    _op, _sub, _ns = struct.unpack_from("<BIQ", m)
                    json.loads(m[13:])
                    counts["messages"] = counts.get("messages", 0) + 1
        except Exception:  # the run ended: the server closed the connection
            pass


def one_run(duration: float, live: bool, out: Path) -> dict:
    cmd = [sys.executable, "-m", "exo_rt", "run", "--duration", str(duration), "--out", str(out),
           "--config", str(STAND)]
    if live:
        cmd += ["--live", "127.0.0.1:0"]
    # stderr (the status line, the live server's address) is read by one thread to its end,
    # and only by it: the run's stdout is not needed
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    counts: dict = {}
    stop = threading.Event()
    client = None
    url: list[str] = []

    def drain():
        for line in proc.stderr:
            if "live telemetry on ws://" in line and not url:
                url.append(line.split("live telemetry on ", 1)[1].split()[0])

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    if live:
        end = time.monotonic() + 120
        while not url and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        if url:
            client = threading.Thread(target=_client, args=(url[0], counts, stop), daemon=True)
            client.start()
    proc.wait(timeout=600)
    t.join(10)  # stderr to its end (EOF once the run and its processes have exited)
    if not t.is_alive():  # (closed under a reading thread, it would raise there)
        proc.stderr.close()
    stop.set()
    if client is not None:
        client.join(10)
    if proc.returncode not in (0, 1):  # 1: final state SAFE, still a run with its files
        raise SystemExit(f"bench_telemetry: `{' '.join(cmd[1:])}` exited {proc.returncode}")
    summary = json.loads((out / "summary.json").read_text())
    rec = json.loads((out / "recording.json").read_text())
    return {"compute": summary["timing"]["compute_us"], "sim_s": summary["duration_s"],
            "cpu_s": rec.get("cpu_s"), "received": counts.get("messages", 0),
            "mcap_bytes": (out / "run.mcap").stat().st_size, "mcap": rec["mcap_messages"],
            "records": rec["records"], "frames": rec["frames"], "out": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0, help="RUN time of each run (s)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    res: dict[str, list[dict]] = {"without --live": [], "with --live": []}
    with tempfile.TemporaryDirectory() as tmp:
        one_run(0.5, False, Path(tmp) / "warm")  # numba cache, imports
        for i in range(args.repeats):
            for label in res:
                res[label].append(one_run(args.duration, label == "with --live",
                                          Path(tmp) / f"{i}-{label.split()[0]}"))
        # MCAP writing speed: the last run's logs encoded again through the same writer
        from exo_rt.record.mcap_log import export_mcap

        last = res["without --live"][-1]
        (last["out"] / "run.mcap").rename(last["out"] / "run-recorded.mcap")
        t0 = time.perf_counter()
        export_mcap(last["out"])
        encode_s = time.perf_counter() - t0

    def med(label, f):
        return statistics.median(f(r) for r in res[label])

    print(f"exo-rt run, default leg, lockstep simulated bus, {args.duration:g} s of RUN, "
          f"median of {args.repeats}:")
    print("  control thread compute per cycle (µs)   p50     p99")
    for label in res:
        print(f"    {label:<16}                   {med(label, lambda r: r['compute']['p50']):6.1f}"
              f"  {med(label, lambda r: r['compute']['p99']):6.1f}")
    d50 = med("with --live", lambda r: r["compute"]["p50"]) - med(
        "without --live", lambda r: r["compute"]["p50"])
    print(f"    difference (with − without)          {d50:+6.1f} µs")
    print("  recording process CPU per second of run (cycle log, CAN log, run.mcap[, live])")
    for label in res:
        print(f"    {label:<16}                   "
              f"{med(label, lambda r: 1e3 * r['cpu_s'] / r['sim_s']):6.1f} ms/s")
    live = res["with --live"]
    print(f"  live client received {med('with --live', lambda r: r['received'] / r['sim_s']):.0f}"
          f" messages per second of run ({live[-1]['received']} in the last run)")
    sim = med("without --live", lambda r: r["sim_s"])
    size = med("without --live", lambda r: r["mcap_bytes"])
    msgs = sum(last["mcap"].values())
    # a channel per cycle: one message for each cycle record (/joints, /state, /timing …)
    per_cycle = [t for t, n in last["mcap"].items() if n == last["records"]]
    print(f"  run.mcap: {size / sim / 1e3:.0f} kB per second of run "
          f"({size / sim * 3600 / 1e9:.2f} GB per hour), {msgs / last['sim_s']:.0f} messages/s "
          f"({last['records'] / last['sim_s']:.0f} cycles/s × {len(per_cycle)} channels "
          f"{', '.join(per_cycle)}; {last['frames'] / last['sim_s']:.0f} CAN frames/s; "
          f"{(msgs - len(per_cycle) * last['records'] - last['frames']) / last['sim_s']:.1f}"
          f"/s on the others)")
    print(f"  MCAP writing: {last['records'] / encode_s:.0f} cycles/s with their CAN frames "
          f"({last['sim_s'] / encode_s:.1f}× real time at 1 kHz; export of the last run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
