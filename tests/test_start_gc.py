"""exo-rt run pauses Python's garbage collector for its start and resumes it as the run goes
READY (RunOptions.at_ready): the start's allocations are not collected meanwhile
(docs/performance.md, "Start-up"), and the run itself collects as any process does."""

from __future__ import annotations

import gc

import pytest

from exo_rt import cli


@pytest.mark.slow
def test_the_collector_is_paused_until_ready_and_on_after(tmp_path, monkeypatch):
    monkeypatch.setenv("EXO_RT_WARMUP", "0")
    seen = []
    enable = gc.enable

    def resumed():
        seen.append(gc.isenabled())  # paused until here
        enable()

    monkeypatch.setattr(gc, "enable", resumed)
    try:
        assert cli.main(["run", "--duration", "0.2", "--out", str(tmp_path / "run")]) == 0
    finally:
        enable()
    assert seen == [False]  # resumed once, from paused
    assert gc.isenabled()
