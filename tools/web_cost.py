"""The web console's cost to the control cycle (docs/console-web.md): one run of the
controller with ``--web`` on the lockstep simulated exoskeleton paced to the wall clock
(standing: a page leaving mid-walk would stop the walk), its session cut in windows of
``--window`` s, a page connected in every other one (from its pairing to its leaving, when it
hands control over; the last one ENDs the session) —
a client process of its own speaking the page's protocol (paired, controlling, its heartbeat
every 0.25 s, reading every status, tick and answer), as the tablet's page does — and the
control process's compute time per cycle (the cycle log's ``compute_us``) side by side:
p50 and p99.9 without a page and with one, in the same run.

    python tools/web_cost.py [--window 3] [--pairs 2] [--config configs/exo_leg.yaml]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.web_page import Beside, session_time, wait_until  # noqa: E402

SETTLE_S = 0.2  # s: left out after each window's start (a page just paired, or gone)


def page(url: str, code: str, seconds: float, finish: bool = False) -> int:
    """``--page URL CODE S [--finish]``: a page for S seconds once paired (its heartbeat every
    0.25 s), saying ``paired`` and ``leaving`` on standard output; then it hands control
    over — or, ``--finish``, ENDs the session."""
    import asyncio

    import websockets

    async def go():
        async with websockets.connect(url.replace("http", "ws", 1) + "ws") as ws:
            await ws.send(json.dumps({"t": "pair", "code": code}))
            while json.loads(await ws.recv()).get("role") != "controller":
                pass
            print("paired", flush=True)
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                try:
                    await asyncio.wait_for(ws.recv(), 0.25)
                    n += 1
                except TimeoutError:
                    pass
                await ws.send(json.dumps({"t": "alive"}))
            print(f"leaving: {n} messages", flush=True)
            if finish:
                await ws.send(json.dumps({"t": "ask", "rid": 2, "kind": "end"}))
                while json.loads(await ws.recv()).get("rid") != 2:
                    pass
            else:
                await ws.send(json.dumps({"t": "hand_over"}))

    asyncio.run(go())
    return 0


def measure(window: float = 3.0, pairs: int = 2, config: str = "configs/exo_leg.yaml"):
    """The compute time (µs) of every cycle in windows without a page and with one:
    ``{"without": array, "with": array, "windows": [(t0, t1, page)], "messages": [...]}``.
    A window with a page spans from its pairing to its leaving (session time); the window
    without one before it is as long."""
    import numpy as np

    from exo_rt.runtime.config import load_top
    from exo_rt.session.session import load_files

    root = Path(__file__).resolve().parents[1]
    top = load_top(root / config)
    _, acts, _ = load_files(top)
    windows: list[tuple[float, float, bool]] = []
    messages: list[str] = []

    def drive(ctl, web):
        wait_until(lambda: session_time(ctl) >= 1.0, 60.0, "the session")
        for i in range(pairs):
            t0 = session_time(ctl)
            wait_until(lambda t0=t0: session_time(ctl) >= t0 + window, 60.0, "a window",
                       period=0.005)
            windows.append((t0, session_time(ctl), False))
            proc = subprocess.Popen([sys.executable, __file__, "--page", web.url, web.code,
                                     str(window)] + (["--finish"] if i == pairs - 1 else []),
                                    stdout=subprocess.PIPE, text=True)
            assert proc.stdout.readline().strip() == "paired"
            t1 = session_time(ctl)
            messages.append(proc.stdout.readline().strip())
            windows.append((t1, session_time(ctl), True))
            proc.communicate(timeout=60)

    with tempfile.TemporaryDirectory() as tmp:  # (no script: the pages alone; the last ENDs)
        ctl, res, _ = Beside(drive).run(top, 2 * pairs * window + 30.0, Path(tmp) / "run",
                                        board=None, history=True,
                                        start_pose=list(acts.posture_q("standing")))
    k0 = ctl.k0[4]
    compute = np.asarray(ctl.log["compute_us"], float).reshape(-1)[1:]  # (cycle k's: row k+1)
    out = {"without": [], "with": []}
    for t0, t1, with_page in windows:
        a, b = k0 + int((t0 + SETTLE_S) / ctl.dt), k0 + int(t1 / ctl.dt)
        out["with" if with_page else "without"].append(compute[a:b])
    return {"without": np.concatenate(out["without"]), "with": np.concatenate(out["with"]),
            "windows": windows, "messages": messages,
            "final_state": res.summary["final_state"],
            "ended_by": [e.get("source") for e in ctl.events if e.get("request") == "end"]}


def figures(got) -> dict:
    import numpy as np

    return {k: {"n": int(got[k].size), "p50": float(np.percentile(got[k], 50)),
                "p999": float(np.percentile(got[k], 99.9))} for k in ("without", "with")}


def main() -> int:
    if sys.argv[1:2] == ["--page"]:
        return page(sys.argv[2], sys.argv[3], float(sys.argv[4]), "--finish" in sys.argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=float, default=3.0, help="s a window (default 3)")
    ap.add_argument("--pairs", type=int, default=2, help="windows without and with a page")
    ap.add_argument("--config", default="configs/exo_leg.yaml")
    args = ap.parse_args()
    got = measure(args.window, args.pairs, args.config)
    f = figures(got)
    w, p = f["without"], f["with"]
    print(f"compute per cycle, µs (the control process, {got['final_state']}): without a page "
          f"p50 {w['p50']:.1f}, p99.9 {w['p999']:.1f} ({w['n']} cycles); with a page p50 "
          f"{p['p50']:.1f}, p99.9 {p['p999']:.1f} ({p['n']} cycles)")
    print("the page's messages: " + "; ".join(got["messages"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
