"""The clinic's session report (docs/report.md): its figures from a scripted session whose
steps, bouts, levels and walking time are known by construction, the symmetry index of a
gait with a known asymmetry, report.html in a real browser (Debian's chromium, headless,
driven by Selenium through Debian's chromedriver), and a wearer's progress page."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from report_fixtures import WALKS

ROOT = Path(__file__).resolve().parents[1]
# the scripted session (report_fixtures.SCRIPT: two walks, WALKS, with a level change, a
# refused request) run on exo_2leg and reported once a test session, in the background
# (conftest.py: clinic_session_run)
pytestmark = pytest.mark.usefixtures("shared_runs")


@pytest.fixture
def session_run(clinic_session_run) -> Path:
    return clinic_session_run


def _events(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_scripted_session_figures_are_known_by_construction(session_run):
    """Strides, steps, bouts, cadence and stride length per bout, walking time, levels and
    requests: each as the script made them (the walks' periods and stride lengths are what
    the session accepted, the walking time the walks' accepted start to their finish)."""
    fig = json.loads((session_run / "summary.json").read_text())["clinic"]
    events = _events(session_run)
    starts = [e for e in events if e.get("request") == "start" and e.get("motion") == "walk"
              and e.get("answer") == "accepted"]
    ends = [e for e in events if e.get("event") == "finished" and e.get("motion") == "walk"]
    assert len(fig["bouts"]) == len(WALKS) == len(starts) == len(ends)
    assert fig["strides"] == sum(n for _, n in WALKS)
    assert fig["steps"] == 2 * fig["strides"]
    walking = sum(e["t"] - s["t"] for s, e in zip(starts, ends, strict=True))
    assert fig["walking_s"] == pytest.approx(walking, abs=1e-9)
    for bout, (speed, strides), s in zip(fig["bouts"], WALKS, starts, strict=True):
        assert bout["strides"] == strides and bout["steps"] == 2 * strides
        assert s["speed"] == speed
        # every stride of a constant-speed walk lasts the accepted period, to the cycle
        assert bout["cadence_steps_min"] == pytest.approx(120.0 / s["period"], rel=1e-3)
        assert bout["stride_length_m"] == pytest.approx(s["stride"], rel=1e-3)
        assert bout["speed_m_s"] == pytest.approx(speed, rel=1e-9)
    # the left leg at 0.6 from the stride boundary after the request, the right at 1 always
    changes = [(c["leg"], c["level"]) for c in fig["level_changes"]]
    assert changes == [("left", 1.0), ("right", 1.0), ("left", 0.6)]
    assert fig["assistance"]["right"] == {"mean": 1.0, "min": 1.0, "max": 1.0}
    assert fig["assistance"]["left"]["min"] == 0.6
    made = [e for e in events if e.get("event") == "request"]
    assert fig["requests"] == {"made": len(made),
                               "accepted": sum(e["answer"] == "accepted" for e in made),
                               "refused": sum(e["answer"] == "rejected" for e in made)}
    assert fig["requests"]["refused"] == 2  # HOME before its CONFIRM, the speed of 9 m/s
    assert fig["faults"] == [] and fig["symmetry_index_pct"]["hip"] == pytest.approx(0, abs=1)
    # up time: standing between the walks and around them, and the walks (no sitting here)
    assert walking < fig["up_s"] <= fig["session_s"]


def _asymmetric(tmp_path: Path, right_gain: float):
    """Records of 6 strides of exo_2leg's normal gait, the right leg's excursion × right_gain
    about its mean: the range of motion's symmetry index is known."""
    from exo_rt.control.trajectory import GAIT_FOURIER_DEG
    from exo_rt.record import clinic
    from exo_rt.record.recorder import columns_dtype, cycle_columns, row_width

    cols = cycle_columns(4)
    width = row_width(cols)
    period, n_strides, rate = 1.0, 6, 1000
    n = int(period * rate * n_strides) + 1
    rows = np.zeros((n, width))
    t = np.arange(n) / rate
    rows[:, cols["t"][0]] = t
    rows[:, cols["cycle"][0]] = np.arange(n)
    rows[:, cols["state"][0]] = 0
    phase = t / period
    rows[:, cols["phase"][0]] = phase
    rows[:, cols["stride"][0]] = np.floor(phase + 1e-9)
    q = np.zeros((n, 4))
    for j, kind in enumerate(("hip", "knee", "hip", "knee")):
        a0 = GAIT_FOURIER_DEG[kind][0]
        curve = clinic.fourier(GAIT_FOURIER_DEG[kind], phase % 1.0)
        q[:, j] = np.radians(a0 + (curve - a0) * (right_gain if j >= 2 else 1.0))
    rows[:, cols["q"][0]:cols["q"][1]] = q
    records = rows.view(columns_dtype(cols))[:, 0]
    meta = {"joint_names": ["left_hip", "left_knee", "right_hip", "right_knee"],
            "rate_hz": rate, "states": ["RUN"], "causes": ["ok"]}
    events = [{"event": "request", "request": "start", "motion": "walk", "answer": "accepted",
               "cycle": 0, "t": 0.0, "speed": 1.0},
              {"event": "finished", "motion": "walk", "cycle": n - 1, "t": t[-1]}]
    return clinic.figures(records, meta, events, {})


@pytest.mark.parametrize("gain", [1.1, 0.8])
def test_symmetry_index_of_a_known_asymmetry(tmp_path, gain):
    """The right leg's excursion × gain: its range of motion × gain, so the symmetry index is
    (gain − 1) / (½ (gain + 1)) · 100 — found within 1 % (of that value); equal legs give 0."""
    fig = _asymmetric(tmp_path, gain)
    expect = 100.0 * (gain - 1.0) / (0.5 * (gain + 1.0))
    for kind in ("hip", "knee"):
        assert fig["symmetry_index_pct"][kind] == pytest.approx(expect, rel=0.01)
    assert fig["strides"] == 6 and fig["bouts"][0]["cadence_steps_min"] == pytest.approx(120)
    same = _asymmetric(tmp_path, 1.0)["symmetry_index_pct"]
    assert abs(same["hip"]) < 1e-9 and abs(same["knee"]) < 1e-9


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.fail("Debian's chromium and chromium-driver are needed (apt-get install "
                    "chromium chromium-driver; .ci/run installs them)")
    opts = Options()
    opts.binary_location = binary
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              "--window-size=1280,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def _value(doc: dict, key: str) -> float:
    path, _, div = key.partition("/")
    v = doc
    for part in path.split("."):
        v = v[int(part)] if isinstance(v, list) else v[part]
    return float(v) / (float(div) if div else 1.0)


@pytest.mark.slow
def test_report_html_in_a_real_browser(session_run, tmp_path):
    """report.html from file:// in headless chromium: no request leaves the file (the
    browser's network log holds the page's own URL alone), no console error, every plot
    drawn (a screenshot of each has more than one colour, much of it not white), and every
    number the page shows equals summary.json's, at the decimals shown."""
    from selenium.webdriver.common.by import By

    page = session_run / "report.html"
    doc = json.loads((session_run / "summary.json").read_text())
    browser = _browser()
    try:
        browser.get(page.as_uri())
        assert browser.title == "Session report"
        requests = []
        for entry in browser.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent":
                requests.append(msg["params"]["request"]["url"])
        assert requests and all(u == page.as_uri() or u.startswith("data:")
                                for u in requests), requests
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        plots = browser.find_elements(By.CSS_SELECTOR, "figure.plot")
        ids = {p.get_attribute("id") for p in plots}
        assert {"plot-timeline", "plot-assistance", "plot-angles", "plot-torque",
                "plot-current", "plot-thermal"} <= ids
        from PIL import Image

        for p in plots:
            browser.execute_script("arguments[0].scrollIntoView();", p)
            shot = tmp_path / f"{p.get_attribute('id')}.png"
            p.screenshot(str(shot))
            img = np.asarray(Image.open(shot).convert("L"), float)
            assert img.shape[0] > 100 and img.shape[1] > 300, p.get_attribute("id")
            drawn = np.mean(img < 200)  # not white: lines, bands, text
            assert 0.01 < drawn < 0.9, (p.get_attribute("id"), drawn)
        numbers = browser.find_elements(By.CSS_SELECTOR, "[data-key]")
        assert len(numbers) > 30
        for el in numbers:
            key, dec = el.get_attribute("data-key"), int(el.get_attribute("data-decimals"))
            want = _value(doc, key)
            if not math.isfinite(want):
                assert el.text == "–"
                continue
            assert float(el.text) == pytest.approx(round(want, dec), abs=10 ** -dec / 2), key
    finally:
        browser.quit()


@pytest.mark.slow
def test_progress_page_over_a_wearers_sessions(session_run, tmp_path):
    """exo-rt report ARCHIVE --wearer NAME: the progress page and its JSON hold the wearer's
    sessions by date with each session's own figures."""
    archive = tmp_path / "runs"  # a copy: the progress page is written beside the run
    shutil.copytree(session_run, archive / session_run.name)
    session_run = archive / session_run.name
    wearer = json.loads((session_run / "summary.json").read_text())["clinic"]["wearer"]
    assert wearer == "exo_2leg-wearer"  # the robot file's wearer, as the run kept it
    res = subprocess.run([sys.executable, "-m", "exo_rt", "report", str(archive), "--wearer",
                          wearer], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    data = json.loads((archive / f"progress-{wearer}.json").read_text())
    fig = json.loads((session_run / "summary.json").read_text())["clinic"]
    (s,) = data["sessions"]
    assert s["steps"] == fig["steps"] and s["speed_m_s"] == fig["speed_m_s"]
    assert s["session_s"] == fig["session_s"] and 0.6 < s["assistance"] < 1.0
    assert "<svg" in (archive / f"progress-{wearer}.html").read_text()
    res = subprocess.run([sys.executable, "-m", "exo_rt", "report", str(archive), "--wearer",
                          "nobody"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "no run of wearer 'nobody'" in res.stderr
