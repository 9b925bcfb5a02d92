"""The web console's latency (docs/console-web.md): a page in Debian's headless chromium, on
loopback, asks the assistance level 200 times one after another through its ``exo.ask``
(what its buttons call) on the lockstep simulated exoskeleton paced to the wall clock, as
``exo-rt run --web`` runs it; each request is timed from its send to the frame that shows its
answer, and to its rendering in the page. Prints p50, p99 and the largest of each.

    python tools/web_latency.py [--n 200] [--config configs/exo_leg.yaml]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.web_page import (  # noqa: E402
    LATENCY_JS,
    Beside,
    chromium,
    chromium_available,
    level_request,
    percentiles,
    wait_until,
)


def measure(n: int = 200, config: str = "configs/exo_leg.yaml") -> dict:
    """{"frame": percentiles, "dom": percentiles, "answers": [...]} of ``n`` requests."""
    from exo_rt.runtime.config import load_top
    from exo_rt.session.session import load_files

    root = Path(__file__).resolve().parents[1]
    top = load_top(root / config)
    _, acts, _ = load_files(top)
    driver = chromium()

    def drive(ctl, web):
        driver.get(web.url)
        wait_until(lambda: driver.execute_script(
            "return !!(window.exo && exo.state.status)"), 20.0, "the page")
        driver.execute_script("exo.send({t: 'pair', code: arguments[0]})", web.code)
        wait_until(lambda: driver.execute_script("return exo.state.role") == "controller",
                   5.0, "control")
        got = driver.execute_async_script(LATENCY_JS, [level_request(i) for i in range(n)])
        driver.execute_async_script("const done = arguments[0]; "
                                    "exo.ask({kind: 'end'}).then(done);")
        return got

    try:
        with tempfile.TemporaryDirectory() as tmp:
            _, _, got = Beside(drive).run(top, 60.0, Path(tmp) / "run", board=None,
                                          start_pose=list(acts.posture_q("standing")))
    finally:
        driver.quit()
    return {"frame": percentiles(got["ms"]), "dom": percentiles(got["dom"]),
            "answers": got["answers"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="requests (default 200)")
    ap.add_argument("--config", default="configs/exo_leg.yaml")
    args = ap.parse_args()
    why = chromium_available()
    if why is not None:
        print(f"web_latency: {why}", file=sys.stderr)
        return 2
    fig = measure(args.n, args.config)
    accepted = sum(a == "accepted" for a in fig["answers"])
    for what, f in (("to the frame that shows the answer", fig["frame"]),
                    ("to the answer rendered in the page", fig["dom"])):
        print(f"{f['n']} requests, {what}: p50 {f['p50']:.1f} ms, p99 {f['p99']:.1f} ms, "
              f"max {f['max']:.1f} ms")
    print(f"{accepted} of {len(fig['answers'])} accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
