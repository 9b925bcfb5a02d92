"""One clock for every frame of a run's CAN log, sent and received alike: in lockstep the
simulated time (from the run's epoch), so the log reads as the bus would have carried it —
one SYNC a millisecond, each drive's answer at its SYNC's instant — and its frames line up
with the cycle log's rows in ``run.mcap``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import can
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clock") / "run"
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", "0.5", "--out",
                          str(out), "--config", "configs/exo_leg.yaml"],  # the test stand
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.slow
def test_lockstep_frames_sent_and_received_on_one_clock(run):
    frames = list(can.LogReader(str(run / "can.blf")))
    t = np.array([f.timestamp for f in frames])
    assert np.all(np.diff(t) >= -1e-9)  # in the order the bus carried them
    syncs = np.array([f.timestamp for f in frames if f.arbitration_id == 0x080])
    # the loop's SYNCs 1 ms apart on the log's clock (before it, bring-up's enabling cycles)
    gaps = np.diff(syncs[-400:])
    np.testing.assert_allclose(gaps, 1e-3, atol=2e-6)
    # a received frame (a TPDO) carries its SYNC's instant: sent and received share the clock
    by_sync = {}
    last = None
    for f in frames:
        if f.arbitration_id == 0x080 and not f.is_rx:
            last = f.timestamp
        elif f.is_rx and f.arbitration_id in (0x181, 0x182) and last is not None:
            by_sync.setdefault(last, []).append(f.timestamp)
    answers = [v for k, vs in by_sync.items() for v in vs if k >= syncs[-400]]
    keys = [k for k, vs in by_sync.items() for _v in vs if k >= syncs[-400]]
    np.testing.assert_allclose(answers, keys, atol=2e-6)
    # thousands of distinct instants, not a handful (every frame had the file's start time)
    assert len(np.unique(np.round(t, 6))) >= 0.9 * len(syncs)


@pytest.mark.slow
def test_lockstep_frames_line_up_with_the_cycles_in_mcap(run):
    """In run.mcap a cycle's SYNC (its command going out) comes one period after the row's log
    time at most: frames and rows on the same time base."""
    from mcap.reader import make_reader

    with open(run / "run.mcap", "rb") as f:
        reader = make_reader(f)
        rows, syncs = [], []
        for _schema, channel, message in reader.iter_messages(topics=["/state", "/can"]):
            if channel.topic == "/state":
                rows.append(message.log_time)
            elif b'"id":128' in message.data and b'"rx":false' in message.data:
                syncs.append(message.log_time)
    rows, syncs = np.array(rows) * 1e-9, np.array(syncs) * 1e-9
    first, last = rows[0], rows[-1]
    inside = syncs[(syncs >= first) & (syncs <= last)]
    assert len(inside) >= 0.9 * len(rows)
    # each SYNC within a period of a row's time
    idx = np.searchsorted(rows, inside)
    near = np.minimum(np.abs(inside - rows[np.clip(idx, 0, len(rows) - 1)]),
                      np.abs(inside - rows[np.clip(idx - 1, 0, len(rows) - 1)]))
    assert near.max() <= 1e-3 + 1e-6
