"""The therapist's web console in a real browser (Debian's chromium, headless, through Selenium
and Debian's chromium-driver) against the lockstep simulated exoskeleton at the wall clock's
pace, as ``exo-rt run --web`` runs it: a whole session driven from the page equals the same
session from a script; two pages (the second read only, the first closed mid-walk: STOP at
the stride's end, then the second takes control); a wrong pairing code; the page's latency;
the forbidden requests of the session tests, through the page. The screenshots of
docs/console-web.md are this file's (``EXO_RT_SCREENSHOTS=docs/img`` writes them there)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from sessions_fixtures import requests, run_session

from exo_rt.runtime.config import load_top
from exo_rt.session.session import load_files
from exo_rt.session.web import SILENCE_S
from tools.web_page import (
    LATENCY_JS,
    Beside,
    chromium,
    chromium_available,
    level_request,
    percentiles,
    session_time,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[1]
NO_BROWSER = chromium_available()
# s: how long before a tab closes its last heartbeat may have reached the run: the page beats
# every 0.25 s, the web process relays at most every 0.1 s, and on a loaded CPU the page's timer
# may fire a beat late (CI, 2 CPUs, three workers and the browser: 0.47 s seen)
HEARTBEAT_LAG_S = 0.6
# exclusive: each test's figures are the wall clock's — the session's pace against the page's
# requests, a heartbeat's silence, the page's latency — and in CI, with the other worker's
# tests beside them on two CPUs, a request met the wrong state and a heartbeat came late
pytestmark = [pytest.mark.slow, pytest.mark.exclusive,
              pytest.mark.skipif(NO_BROWSER is not None, reason=str(NO_BROWSER))]
SHOTS = ("console-web-pairing", "console-web-sitting", "console-web-standing-up",
         "console-web-walking", "console-web-stopping", "console-web-watcher",
         "console-web-ended")


@pytest.fixture(scope="module")
def browser():
    driver = chromium()
    yield driver
    driver.quit()


def _shots(tmp_path) -> Path:
    where = os.environ.get("EXO_RT_SCREENSHOTS")
    out = Path(where) if where else tmp_path / "shots"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


# ------------------------------------------------------------------ the page, from Selenium
class Page:
    """One tab of the browser on the console's page."""

    def __init__(self, driver, url: str) -> None:
        self.d = driver
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # (a tablet's screen)
                               {"width": 1280, "height": 800, "deviceScaleFactor": 1,
                                "mobile": False})
        driver.get(url)
        self.handle = driver.current_window_handle
        wait_until(lambda: self.js("return !!(window.exo && exo.state.client && "
                                   "exo.state.status)"), 20.0, "the page's first status")

    def js(self, code: str, *args):
        self.d.switch_to.window(self.handle)
        return self.d.execute_script(code, *args)

    def state(self) -> dict:
        return self.js("const s = exo.state; return {role: s.role, client: s.client, "
                       "controller: s.controller, status: s.status, tick: s.tick, "
                       "answers: s.answers, alarms: s.alarms, ended: s.ended, "
                       "notice: s.notice};")

    def click(self, element_id: str) -> None:
        from selenium.webdriver.common.by import By

        self.d.switch_to.window(self.handle)
        self.d.find_element(By.ID, element_id).click()

    def text(self, element_id: str) -> str:
        from selenium.webdriver.common.by import By

        self.d.switch_to.window(self.handle)
        return self.d.find_element(By.ID, element_id).text

    def pair(self, code: str) -> None:
        from selenium.webdriver.common.by import By

        self.d.switch_to.window(self.handle)
        box = self.d.find_element(By.ID, "pair-code")
        box.clear()
        box.send_keys(code)
        self.click("pair-ok")

    def wait(self, pred, timeout: float, what: str):
        return wait_until(lambda: pred(self.state()), timeout, what, period=0.02)

    def ask(self, req: dict) -> dict:
        """A request through the page's own ``exo.ask`` (what its buttons call); its answer
        (or the page's refusal) once shown."""
        self.d.switch_to.window(self.handle)
        return self.d.execute_async_script(
            "const [req, done] = arguments; exo.ask(req).then((r) => done(r));", req)

    def shot(self, folder: Path, name: str) -> None:
        self.d.switch_to.window(self.handle)
        self.d.save_screenshot(str(folder / f"{name}.png"))


class Wearer:
    """The wearer on the emulated crutch: GO held while a motion that needs it runs, released
    once its posture is reached (GO stays the crutch's: the page never presses it)."""

    def __init__(self, ctl) -> None:
        self.ctl, self.held = ctl, False

    def poll(self, k: int):
        m = self.ctl.session.machine
        want = m.motion is not None and m.motion.hold_go
        if want != self.held:
            self.held = want
            self.ctl.bus_set.board_command("buttons go" if want else "buttons none")
        return ()


def _recorded(ctl) -> list[dict]:
    """Every request with its answer and every finished motion, as recorded, without when
    (cycle, t) or who (source, client, note)."""
    drop = {"cycle", "t", "source", "client", "note"}
    return [{k: v for k, v in e.items() if k not in drop} for e in ctl.events
            if e["event"] in ("request", "finished")]


def _posture(config: str, name: str) -> list[float]:
    top = load_top(ROOT / "configs" / config)
    _, acts, _ = load_files(top)
    return [float(x) for x in acts.posture_q(name)]


# ------------------------------------------------------------------ a whole session
WHOLE_SCRIPT = [
    {"request": "start", "motion": "stand_up", "at": 0.5},
    {"request": "go", "after": "accepted"},
    {"request": "go_release", "after": "finished"},
    {"request": "start", "motion": "walk", "wait": 0.5},
    {"request": "speed", "value": 0.45, "after": "strides 2"},
    {"request": "level", "value": 0.9, "legs": ["left"], "after": "strides 1"},
    {"request": "stop", "after": "strides 1"},
    {"request": "start", "motion": "sit_down", "after": "finished"},
    {"request": "go", "after": "accepted"},
    {"request": "go_release", "after": "finished"},
    {"request": "end", "wait": 0.5},
]


def test_a_whole_session_driven_from_the_page_equals_the_scripts(tmp_path, browser):
    """Sitting, on the two-leg exoskeleton: stand up (the wearer holds GO on the crutch) →
    walk → speed + 0.05 m/s → the left leg's level − 10 % → STOP → sit down → END, each
    a tap on the page; the run's recorded requests and answers (what was asked, each answer
    with its reason and figures, each motion finished) equal the same session's from a
    session script. The screenshots of docs/console-web.md are taken on the way."""
    shots = _shots(tmp_path)
    config = "exo_2leg.yaml"
    sitting = _posture(config, "sitting")

    def drive(ctl, web):
        page = Page(browser, web.url)
        page.shot(shots, "console-web-pairing")
        page.pair("000000")  # (a wrong code first: refused, said on the page)
        page.wait(lambda s: "wrong pairing code" in page.text("pair-why"), 5.0,
                  "the wrong code refused")
        page.pair(web.code)
        page.wait(lambda s: s["role"] == "controller", 5.0, "control")
        page.shot(shots, "console-web-sitting")
        page.click("motion-stand_up")
        page.wait(lambda s: (s["tick"] or {}).get("progress") and s["tick"]["progress"] > 0.4,
                  15.0, "standing up half-way")
        page.shot(shots, "console-web-standing-up")
        page.wait(lambda s: s["status"]["posture"] == "standing" and not s["status"]["go"],
                  15.0, "standing, GO released")
        page.click("motion-walk")
        page.wait(lambda s: s["tick"]["strides"] >= 2, 20.0, "two strides")
        page.click("speed-up")
        page.wait(lambda s: s["status"]["speed"] == pytest.approx(0.45), 5.0, "0.45 m/s")
        page.wait(lambda s: s["tick"]["strides"] >= 3, 20.0, "three strides")
        page.click("level-left-down")
        page.wait(lambda s: s["status"]["levels"]["left"] == pytest.approx(0.9), 5.0,
                  "the left leg at 90 %")
        page.shot(shots, "console-web-walking")
        page.wait(lambda s: s["tick"]["strides"] >= 4, 20.0, "four strides")
        page.click("stop")
        page.wait(lambda s: s["status"]["stopping"], 5.0, "stopping")
        page.shot(shots, "console-web-stopping")
        page.wait(lambda s: s["status"]["posture"] == "standing", 15.0, "standing again")
        page.click("motion-sit_down")
        page.wait(lambda s: s["status"]["posture"] == "sitting" and not s["status"]["go"],
                  15.0, "sitting, GO released")
        for _ in range(3):  # END takes a second tap within 3 s by the page's clock: a page
            # starved of the CPU on a loaded machine may handle the second tap later, as a
            # first one again — then the therapist taps twice again
            asked = page.js("return exo.state.rid;")
            page.click("end")
            page.click("end")
            if page.js("return exo.state.rid;") > asked:
                break
        try:
            page.wait(lambda s: s["ended"], 30.0, "the run's end")
        except TimeoutError as e:
            raise TimeoutError(f"{e}; the page's last answers: {page.state()['answers']}") from e
        page.shot(shots, "console-web-ended")
        return page.state()

    beside = Beside(drive)
    ctl, res, last = beside.run(load_top(ROOT / "configs" / config), 60.0, tmp_path / "page",
                                start_pose=sitting, history=True, sources=(Wearer,))
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    asked = requests(ctl)
    web = [e for e in asked if e["source"] == "web"]
    assert [e["request"] for e in web] == ["start", "start", "speed", "level", "stop", "start",
                                           "end"]
    assert len({e["client"] for e in web}) == 1 and web[0]["client"].startswith("page")
    assert {e["source"] for e in asked} == {"web", "board"}  # (GO: the crutch's)
    notes = [(e["what"], e.get("client")) for e in ctl.events if e["event"] == "web"]
    assert notes[:3] == [("wrong_code", web[0]["client"]), ("paired", web[0]["client"]),
                         ("control", web[0]["client"])]
    ref, ref_res = run_session(tmp_path / "script", WHOLE_SCRIPT, config=config,
                               start_pose=sitting, duration=60.0)
    assert ref_res.summary["final_state"] == "SHUTDOWN"
    page, script = _recorded(ctl), _recorded(ref)
    assert len(page) == 14, page  # (7 of the page, 4 of the crutch, 3 motions finished)
    assert page == script
    assert "the session is over" in json.dumps(last["alarms"])
    doc = (ROOT / "docs" / "console-web.md").read_text()
    for name in SHOTS:
        assert f"](img/{name}.png)" in doc, f"docs/console-web.md does not show {name}"
        assert _png_size(ROOT / "docs" / "img" / f"{name}.png") == (1280, 800), name
        if name != "console-web-watcher":  # (the two pages' test takes that one)
            assert _png_size(shots / f"{name}.png") == (1280, 800), name


# ------------------------------------------------------------------ two pages
def test_two_pages_one_controls_the_other_watches_then_takes_over(tmp_path, browser):
    """Standing: page A pairs and controls; page B pairs and only watches — its walk is
    refused with the reason, never reaching the run. A's latency: 200 requests through the
    page, each accepted and shown within 100 ms at p99. A starts a walk and is closed
    mid-walk: the run stops the walk at the end of its stride (STOP from web, the page
    named, not SAFE); then B may take control, and ends the session."""
    shots = _shots(tmp_path)
    standing = _posture("exo_leg.yaml", "standing")

    def drive(ctl, web):
        a = Page(browser, web.url)
        a.pair(web.code)
        a.wait(lambda s: s["role"] == "controller", 5.0, "A controls")
        browser.switch_to.new_window("tab")
        b = Page(browser, web.url)
        b.pair(web.code)
        b.wait(lambda s: s["role"] == "watcher", 5.0, "B watches")
        refused = b.ask({"kind": "start", "motion": "walk"})
        b.shot(shots, "console-web-watcher")
        took = b.js("exo.send({t: 'take'}); return true;")
        b.wait(lambda s: "must hand over first" in s["notice"], 5.0, "B's take refused")
        reqs = [level_request(i) for i in range(200)]  # (A's latency: 200 levels asked)
        browser.switch_to.window(a.handle)
        lat = browser.execute_async_script(LATENCY_JS, reqs)
        assert took
        a.click("motion-walk")
        a.wait(lambda s: s["tick"]["strides"] >= 1 and s["status"]["motion"] == "walk", 20.0,
               "A walking")
        closed_at = session_time(ctl)
        browser.switch_to.window(a.handle)
        browser.close()  # (A closed mid-walk)
        b.wait(lambda s: any(x["answer"] == "finished" and x.get("motion") == "walk"
                             for x in s["answers"]), 15.0, "the walk stopped, on B")
        b.js("exo.send({t: 'take'});")
        b.wait(lambda s: s["role"] == "controller", 5.0, "B controls")
        b.click("end")
        b.click("end")
        b.wait(lambda s: s["ended"] or any(x["request"] == "end" for x in s["answers"]),
               15.0, "B's END answered")
        end = [x for x in b.state()["answers"] if x["request"] == "end"]
        assert end and end[0]["answer"] == "accepted", end
        return refused, lat, closed_at, None

    beside = Beside(drive)
    ctl, res, (refused, lat, closed_at, _) = beside.run(
        load_top(ROOT / "configs" / "exo_leg.yaml"), 60.0, tmp_path / "run",
        start_pose=standing, board=None, history=True)
    assert res.summary["final_state"] == "SHUTDOWN" and not res.summary["faults"]
    # B's walk: refused by the web process with its reason; the run never heard it
    assert refused["answer"]["t"] == "refused"
    assert refused["answer"]["why"].startswith("read only: this page watches (page ")
    asked = requests(ctl)
    clients = {e["client"] for e in asked if e["source"] == "web"}
    assert len(clients) == 2
    # the latency: 200 requests accepted, each shown within 100 ms at p99 (docs/console-web.md)
    fig, dom = percentiles(lat["ms"]), percentiles(lat["dom"])
    print(f"the page's latency over {fig['n']} requests, to the frame that shows the answer: "
          f"p50 {fig['p50']:.1f} ms, p99 {fig['p99']:.1f} ms, max {fig['max']:.1f} ms; to "
          f"its rendering: p50 {dom['p50']:.1f} ms, p99 {dom['p99']:.1f} ms")
    assert lat["answers"] == ["accepted"] * 200
    assert fig["p99"] <= 100.0, fig
    assert dom["p99"] <= fig["p99"]
    assert fig["p50"] > 0.5  # ms: a real round trip through the run (not the page alone)
    # A closed mid-walk: STOP from web (A named, why noted) ≈ 1 s after A's last heartbeat,
    # the walk ends standing within its stride
    (start,) = [e for e in asked if e["request"] == "start"]
    (stop,) = [e for e in asked if e["request"] == "stop"]
    assert stop["source"] == "web" and stop["client"] == start["client"]
    assert "silent" in stop["note"] and stop["answer"] == "accepted", stop
    t_stop = (stop["cycle"] - ctl.k0[4]) * ctl.dt
    # silent > 1 s since A's last heartbeat relayed (A sends one every 0.25 s, relayed at
    # most every 0.1 s: the last up to 0.35 s before it was closed)
    assert float(stop["note"].split("silent ")[1].split(" ms")[0]) >= 1000.0, stop["note"]
    # the STOP comes SILENCE_S after the last heartbeat that reached the run: at most
    # HEARTBEAT_LAG_S (beat 0.25 s, relay 0.1 s, a timer a beat late) before the tab
    # closed, less a cycle's slack of 0.05 s; and
    # no later than 0.6 s past SILENCE_S (the web process's and the run's polls, a loaded CPU)
    after_close = t_stop - closed_at
    assert SILENCE_S - HEARTBEAT_LAG_S - 0.05 <= after_close <= SILENCE_S + 0.6, (
        closed_at, t_stop)
    (walk,) = [e for e in ctl.events if e["event"] == "finished"]
    assert walk["posture"] == "standing"
    assert (walk["cycle"] - stop["cycle"]) * ctl.dt <= start["period"] + 1e-3
    (end,) = [e for e in asked if e["request"] == "end"]
    assert end["client"] != start["client"] and end["answer"] == "accepted"
    what = [e["what"] for e in ctl.events if e["event"] == "web"]
    assert what.count("refused") == 1 and what.count("paired") == 2
    assert what.count("control") == 3  # A paired first, A gone, B took


# ------------------------------------------------------------------ nothing bypasses the rules
# tests/test_sessions.py's forbidden requests (issue 43's), each at a session time where the
# machine must refuse it — here 1.5 s later than there (the page cannot ask at 0.0 s: the
# first comes 0.2 s in, while still sitting, 1.3 s before GO), through the page's exo.ask (its
# buttons' call)
BASE = [{"request": "go", "at": 1.5},  # GO from sitting: stands up (the selected motion)
        {"request": "go_release", "at": 7.5},
        {"request": "start", "motion": "walk", "at": 8.0},
        {"request": "stop", "at": 10.5},
        {"request": "end", "at": 14.5}]
FORBIDDEN = [  # (the request, at s, the reason expected: tests/test_sessions.py's)
    ({"kind": "start", "motion": "walk"}, 0.2, "not_from_here"),  # walk from sitting
    ({"kind": "start", "motion": "walk"}, 2.5, "busy"),  # while standing up
    ({"kind": "next"}, 3.0, "not_selectable"),
    ({"kind": "stop"}, 3.5, "not_stoppable"),  # standing up may not be cut
    ({"kind": "end"}, 4.0, "not_in_posture"),
    ({"kind": "start", "motion": "walk"}, 7.0, "go_held"),  # GO held since standing
    ({"kind": "start", "motion": "sit_down"}, 8.5, "busy"),  # sit during a stride
    ({"kind": "speed", "value": 2.0}, 8.7, "speed_range"),
    ({"kind": "step_length", "value": 5.0}, 8.9, "step_range"),
    ({"kind": "level", "value": 1.5}, 9.1, "level_range"),
    ({"kind": "start", "motion": "fly"}, 9.3, "unknown_motion"),
    ({"kind": "confirm"}, 9.5, "nothing_to_confirm"),
    ({"kind": "stop"}, 10.7, "already"),  # the closing step is due
    ({"kind": "stop"}, 13.5, "not_walking"),
    ({"kind": "start", "motion": "stand_up"}, 13.7, "not_from_here"),
]


# the session runs at the wall clock's pace and each request must reach it within its state:
# the first was once 0.3 s before GO stood the wearer up, and with three workers on two CPUs it
# was asked late, met the stand-up and got `busy` (in CI, twice in a row): now 1.3 s before —
# once more, as an exclusive test is (conftest.py)
@pytest.mark.flaky(reruns=1)
def test_forbidden_requests_through_the_page_are_refused_and_leave_the_reference_unchanged(
        tmp_path, browser):
    """Every forbidden request of the session tests (15, of 9 kinds), asked through the page
    beside a script's session: each refused with the reason the session tests expect, shown
    on the page, and q_r, q̇_r bit for bit those of the same session without them."""
    import yaml

    sitting = [0.9, 1.3]
    script = tmp_path / "base.yaml"
    script.write_text(yaml.safe_dump({"description": "base", "steps": BASE}))

    def drive(ctl, web):
        page = Page(browser, web.url)
        page.pair(web.code)
        page.wait(lambda s: s["role"] == "controller", 5.0, "control")
        shown = []
        for req, t, _ in FORBIDDEN:
            wait_until(lambda t=t: session_time(ctl) >= t, 20.0, f"session time {t} s",
                       period=0.002)
            shown.append((session_time(ctl), page.ask(req)))
        return shown

    beside = Beside(drive)
    ctl, res, shown = beside.run(load_top(ROOT / "configs" / "exo_leg.yaml"), 15.0,
                                 tmp_path / "page", session=str(script), start_pose=sitting,
                                 board=None, history=True)
    assert res.summary["final_state"] == "SHUTDOWN"
    ref, _ = run_session(tmp_path / "base", BASE, duration=15.0, start_pose=sitting,
                         board=None)
    refused = [e for e in requests(ctl) if e["answer"] == "rejected"]
    assert [e["source"] for e in refused] == ["web"] * len(FORBIDDEN)
    assert [e["reason"] for e in refused] == [r for _, _, r in FORBIDDEN]
    assert [a["answer"]["reason"] for _, a in shown] == [r for _, _, r in FORBIDDEN]
    late = max(t_asked - t for (t_asked, _), (_, t, _) in zip(shown, FORBIDDEN, strict=True))
    print(f"the forbidden requests asked at most {1e3 * late:.0f} ms after their time; "
          f"answered in {max(a['ms'] for _, a in shown):.1f} ms at most")
    assert len(ctl.log) == len(ref.log)
    assert ctl.log["q_ref"].tobytes() == ref.log["q_ref"].tobytes()
    assert ctl.log["qd_ref"].tobytes() == ref.log["qd_ref"].tobytes()
