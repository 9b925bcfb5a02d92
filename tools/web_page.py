"""Helpers for driving the therapist's web console (docs/console-web.md) from tools and tests:
a run of the controller on the lockstep simulated exoskeleton with ``--web`` (paced to the
wall clock, as ``exo-rt run --web`` runs it) beside the code that drives its page, Debian's
``chromium`` headless through Selenium and Debian's ``chromium-driver`` (nothing downloaded:
Selenium Manager is never asked), and a page's own figures.

Used by ``tools/web_latency.py``, ``tools/web_cost.py`` and the web console's tests.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
WINDOW = (1280, 800)  # px: a 10" tablet in landscape

# The page's own latency: requests asked one after another through the page's ``exo.ask``
# (what its buttons call), each timed from its send to the frame that shows its answer
# (``ms``: the next animation frame after the answer is rendered) and to its rendering in the
# page (``dom``).
LATENCY_JS = """
const [requests, done] = arguments;
(async () => {
  const ms = [], dom = [], answers = [];
  for (const req of requests) {
    const r = await window.exo.ask(req);
    ms.push(r.ms);
    dom.push(r.dom);
    answers.push(r.answer ? (r.answer.answer || r.answer.why) : r.refused);
  }
  done({ms: ms, dom: dom, answers: answers});
})();
"""


def level_request(i: int) -> dict:
    """The i-th request of a latency run: the assistance level 0.9, 1.0, 0.9 … (accepted
    in any posture; it acts at the next stride boundary)."""
    return {"kind": "level", "value": 0.9 if i % 2 == 0 else 1.0}


def find(paths) -> str | None:
    for p in paths:
        if Path(p).exists():
            return p
    return None


def chromium_available() -> str | None:
    """Why the browser cannot be used here (None: it can)."""
    if find(CHROMIUM) is None and shutil.which("chromium") is None:
        return "Debian's chromium is not installed (apt-get install -y chromium)"
    if find(DRIVER) is None and shutil.which("chromedriver") is None:
        return "Debian's chromium-driver is not installed (apt-get install -y chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install 'exo-rt[test]')"
    return None


def chromium(width: int = WINDOW[0], height: int = WINDOW[1]):
    """A headless Chromium (Debian's) driven by Selenium through Debian's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = find(CHROMIUM) or shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars",
                "--disable-background-timer-throttling",
                "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows"):
        opts.add_argument(arg)
    service = Service(executable_path=find(DRIVER) or shutil.which("chromedriver"))
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_script_timeout(120)
    return driver


def percentiles(ms) -> dict:
    """p50, p99, max (and n) of a list of milliseconds."""
    import numpy as np

    a = np.asarray(ms, float)
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def web_console(ctl):
    """The run's :class:`exo_rt.session.web.WebConsole` (None until its session is made)."""
    from exo_rt.session.web import WebConsole

    sess = getattr(ctl, "session", None)
    for s in (sess.sources if sess is not None else ()):
        if isinstance(s, WebConsole):
            return s
    return None


class Beside:
    """A run of the controller with ``drive(ctl, web)`` run beside it in a thread once the
    web console is up (``web``: its :class:`~exo_rt.session.web.WebConsole`: ``url``,
    ``code``). The controller runs in the caller's thread. ``error``: what ``drive``
    raised, re-raised by :meth:`run` after the run."""

    def __init__(self, drive) -> None:
        self.drive, self.ctl, self.error, self.result = drive, None, None, None

    def source(self, ctl):  # (a source maker: it keeps the controller; asks nothing)
        self.ctl = ctl
        return _Nothing()

    def _beside(self) -> None:
        try:
            end = time.monotonic() + 120.0
            while time.monotonic() < end:
                web = web_console(self.ctl) if self.ctl is not None else None
                if web is not None:
                    break
                time.sleep(0.02)
            else:
                raise TimeoutError("the web console did not start")
            self.result = self.drive(self.ctl, web)
        except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread)
            self.error = e
            if self.ctl is not None:
                self.ctl.request_stop("the web page's driver failed")

    def run(self, top, duration: float, out: Path, **options):
        """Controller(top, 'sim', web=…, **options).run(duration, out), ``drive`` beside it;
        returns (controller, run result, what drive returned)."""
        from exo_rt.runtime.controller import Controller

        options.setdefault("web", "127.0.0.1:0")
        options["sources"] = (self.source, *options.get("sources", ()))
        thread = threading.Thread(target=self._beside, name="web page driver", daemon=True)
        thread.start()
        ctl = Controller(top, "sim", **options)
        self.ctl = ctl
        res = ctl.run(duration, out)
        thread.join(30.0)
        if self.error is not None:
            raise self.error
        return ctl, res, self.result


class _Nothing:
    def poll(self, k: int):
        return ()


def session_time(ctl) -> float:
    """s since the session began (RUN's first cycle), on the run's cycles (-1: not yet)."""
    from exo_rt.cycle.states import RUN

    k0 = ctl.k0.get(RUN)
    return -1.0 if k0 is None else (ctl.cycles - k0) * ctl.dt


def wait_until(pred, timeout: float, what: str, period: float = 0.01):
    """``pred()``'s first truthy value within ``timeout`` s, else TimeoutError naming
    ``what``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(period)
    raise TimeoutError(f"waited {timeout:g} s for {what}")
