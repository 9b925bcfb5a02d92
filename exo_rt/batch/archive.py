"""A generated archive of short runs, for the batch tests (tests/test_batch.py), the scaling
benchmark (tools/bench_scale.py) and trying ``exo-rt replay ARCHIVE`` without a lab's data:
real runs of the shipped leg on the lockstep simulated bus, each a little different
(duration, start pose), some deliberately broken."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

BROKEN = {  # name → what is wrong with it, and the words its failure must carry
    "w2/day1/run_truncated": "the cycle log cut inside its header",
    "w2/day1/run_bad_header": "the cycle log's magic overwritten",
    "w2/day2/run_missing": "no cycle log nor run.mcap (summary.json only)",
}


def short_config(folder: Path) -> Path:
    """A top config of the shipped leg with a 0.6 s alignment and a 50 ms stop (short runs)."""
    from exo_rt.resources import default_config

    configs = default_config().parent
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "top.yaml"
    path.write_text(f"robot: {configs / 'robots/exo_leg.yaml'}\n"
                    f"buses: {configs / 'buses/exo_leg.yaml'}\n"
                    f"controller: {configs / 'controllers/computed_torque.yaml'}\n"
                    "rate_hz: 1000\nstop: {duration: 0.05}\n")
    return path


def make_archive(root: Path, n_good: int = 20, *, broken: bool = True,
                 run_s: float = 0.3) -> list[str]:
    """``n_good`` sessions walking ``run_s`` + k·10 ms (≈ 3–4 s each with homing, the closing
    step and the stop), under
    wearer/day folders, plus the :data:`BROKEN` ones; returns the good runs' names."""
    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.controller import Controller

    top = load_top(short_config(root / "configs"))
    names = []
    for k in range(n_good):
        name = f"w{k % 2}/day{k % 3}/run{k:02d}"
        pose = [0.05 * (k % 5), 0.1 + 0.04 * (k % 4)]
        Controller(top, "sim", start_pose=pose).run(run_s + 0.01 * k, root / "archive" / name)
        names.append(name)
    if broken:
        src = root / "archive" / names[0]
        for name in BROKEN:
            dst = root / "archive" / name
            shutil.copytree(src, dst)
        raw = (src / "cycles.exolog").read_bytes()
        trunc = root / "archive" / "w2/day1/run_truncated"
        (trunc / "cycles.exolog").write_bytes(raw[:40])
        (trunc / "run.mcap").unlink()
        bad = root / "archive" / "w2/day1/run_bad_header"
        (bad / "cycles.exolog").write_bytes(b"NOTALOG!" + raw[8:])
        (bad / "run.mcap").unlink()
        missing = root / "archive" / "w2/day2/run_missing"
        for f in missing.iterdir():
            if f.is_dir():  # the run's copy of its config files
                shutil.rmtree(f)
            elif f.name != "summary.json":
                f.unlink()
    return names


def rms_of(table_json: dict) -> np.ndarray:
    """Every ok session's joints' RMS errors (deg), in table order."""
    return np.array([j["rms_error_deg"] for s in table_json["sessions"] if s["status"] == "ok"
                     for j in s["result"]["joints"].values()])
