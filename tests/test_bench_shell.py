"""The bench runs the controller's own shell (:meth:`exo_rt.hil.bench.Bench.run_controller` is
:meth:`exo_rt.runtime.controller.Controller.run` on the bench's drives): on the same simulated
leg from the same pose its records are ``exo-rt run``'s bit for bit, and its abort key stops
the run at once, the drives disabled."""

from __future__ import annotations

import numpy as np
import pytest
from hil_fixtures import CONFIGS, sim_bench

from exo_rt.bus import cia402
from exo_rt.hil.fixture import BenchAbort
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller
from exo_rt.session.roles import Source

POSE = (0.3, 0.6)  # rad: where the simulated leg starts


@pytest.mark.slow
def test_the_benchs_run_is_the_controllers_bit_for_bit():
    seconds = 1.0
    log, summary = sim_bench(pose=POSE).run_controller(seconds)
    ctl = Controller(load_top(CONFIGS / "exo_leg.yaml"), "sim", board=None,
                     start_pose=list(POSE), history=True)
    run = ctl.run(seconds, None)
    assert log.n == summary["cycles"] == run.summary["cycles"] == ctl.cycles
    h = ctl.log
    for ours, column in ((log.q, "q"), (log.qd, "qd"), (log.q_ref, "q_ref"),
                         (log.i_cmd, "command"), (log.i_meas, "current"), (log.tau, "torque")):
        assert ours.tobytes() == h[column].tobytes(), column
    assert np.array_equal(log.state, h["state"].astype(np.int64))
    assert summary["joints"] == run.summary["joints"]
    assert summary["final_state"] == run.summary["final_state"] == "SHUTDOWN"


class PressAbort(Source):
    """The operator presses the abort key at the end of control cycle ``at`` (RUN)."""

    def __init__(self, bench, at: int) -> None:
        self.bench, self.at = bench, at

    def poll(self, k: int):
        if k == self.at:
            self.bench.abort.pressed.set()
        return ()


@pytest.mark.slow
def test_the_abort_key_stops_the_run_at_once():
    """Pressed in RUN: the run stops in that cycle, as on ctrl-C (zero current, the drives
    disabled), and the bench raises BenchAbort."""
    b = sim_bench(pose=POSE)
    at = 300
    b.sources.append(lambda ctl: PressAbort(b, at))
    with pytest.raises(BenchAbort, match="operator abort"):
        b.run_controller(1.0)
    # the simulated drives saw cycle at's SYNC, the stop's zero current and little else (the
    # bring-up's and disable's few): not the rest of a run (≈ 8000 cycles)
    assert at < b.world.cycle <= at + 10
    (d,) = b.drives
    d.cycle(np.zeros(d.n))
    assert [cia402.state_of(int(sw)) for sw in d.statusword] == [cia402.SWITCH_ON_DISABLED] * 2
    assert np.all(d.current == 0.0)
