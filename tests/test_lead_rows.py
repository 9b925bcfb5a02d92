"""The leading wearer's shared reference rows (issue 44, :mod:`exo_rt.sim.lead`): a block the
controller's side creates, names and unlinks; another process attaches it by name, reads what
was written, writes back, and leaves the block to its creator; the mirror copies the cycle's
three reference rows (rad, rad/s, rad/s²) and nothing else, allocating nothing; the session's
hand-over of the cycle's ``v``; the simulation's side prepares a Leader on the block and makes
it the world's wearer on the line ``lead``, whose torque follows the rows written after it was
built."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from exo_rt.cycle.layout import V_QDDR, V_QDR, V_QR, V_WIDTH
from exo_rt.sim import lead
from exo_rt.sim.plants import ST_EXT

ROOT = Path(__file__).resolve().parents[1]

ATTACH = """
import sys
import numpy as np
from exo_rt.sim.lead import SharedRows
b = SharedRows((int(sys.argv[2]), int(sys.argv[3])), name=sys.argv[1])
print(repr(float(b.rows.sum())), repr(float(b.rows[1, 2])), flush=True)
b.rows[0, 0] = 42.0
b.close()
"""


def test_a_block_is_created_named_attached_read_and_unlinked():
    block = lead.SharedRows((3, 4))
    try:
        name, rows, cols = block.spec()
        assert (rows, cols) == ("3", "4") and block.owner
        assert block.rows.shape == (3, 4) and not block.rows.any()  # (zeroed)
        block.rows[:] = np.arange(12.0).reshape(3, 4)
        out = subprocess.run([sys.executable, "-c", ATTACH, name, rows, cols],
                             capture_output=True, text=True, timeout=60, check=True, cwd=ROOT)
        total, value = (float(x) for x in out.stdout.split())
        assert total == 66.0 and value == 6.0  # what this process wrote, read there
        assert block.rows[0, 0] == 42.0  # and what it wrote, read here
        assert "leaked" not in out.stderr  # its resource tracker did not take the block
        again = lead.SharedRows((3, 4), name=name)  # the other process's end left it here
        assert again.rows[1, 2] == 6.0 and not again.owner
        again.close()
        again.close()  # (idempotent)
        with pytest.raises(ValueError, match="not the"):
            lead.SharedRows((300, 400), name=name)  # a shape larger than the block: refused
    finally:
        block.close()
    with pytest.raises(FileNotFoundError):
        lead.SharedRows((3, 4), name=name)  # the creator's close unlinked it
    block.close()  # (idempotent)


CRASH = """
import os, signal
from exo_rt.sim.lead import SharedRows
b = SharedRows((3, 4))
print(b.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_creator_that_dies_unclosed_leaves_no_block():
    """A controller's process killed (no ``close``, no ``finally``): its resource tracker
    unlinks the block it created."""
    out = subprocess.run([sys.executable, "-c", CRASH], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    name = out.stdout.split()[0]
    path = Path("/dev/shm") / name.lstrip("/")
    deadline = time.monotonic() + 10.0
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not path.exists(), name


def test_the_mirror_copies_the_three_reference_rows_and_allocates_nothing():
    n = 4
    v = np.random.default_rng(3).normal(size=(V_WIDTH, n))
    mirror = lead.RowsMirror(lead.SharedRows((V_WIDTH, n)))
    try:
        assert not mirror.pairs
        mirror.follow(v)  # the first copy at once
        shared = mirror.block.rows
        rows = [V_QR, V_QDR, V_QDDR]
        np.testing.assert_array_equal(shared[rows], v[rows])
        others = [r for r in range(V_WIDTH) if r not in rows]
        assert not shared[others].any()  # nothing else of the cycle's vectors
        v[V_QDR] += 1.0
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(1000):
                mirror.put()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 1000  # bytes over 1000 copies: none kept per copy
        np.testing.assert_array_equal(shared[V_QDR], v[V_QDR])
        with pytest.raises(ValueError, match="do not fit"):
            mirror.follow(np.zeros((V_WIDTH, n + 1)))
    finally:
        mirror.close()
    assert mirror.block.rows is None and not mirror.pairs


def test_the_session_hands_the_cycles_rows_over_once():
    v = np.zeros((V_WIDTH, 2))
    token = lead.offer(v)
    assert lead.claim(token) is v
    assert lead.claim(token) is None  # claimed once
    lead.offer(v)
    assert lead.claim("0") is None  # another token: nothing


def test_the_simulations_leader_is_prepared_on_the_block_and_leads_on_the_line():
    """In one process, the two sides of a real-time run: the controller's block of the cycle's
    ``v`` shape, the simulation's world on the floor (configs/exo_2leg_world.yaml's room) with
    a Leader prepared on an attached view; ``lead`` installs it; the torque it applies in the
    next period is that of a Leader reading the rows directly (the lockstep one)."""
    from exo_rt.runtime.config import load_top
    from exo_rt.sim.server import RealtimeServer
    from exo_rt.sim.simbus import SimWorld
    from exo_rt.sim.walker import Leader

    top = load_top(ROOT / "configs" / "exo_2leg_world.yaml")
    n = top.robot.nq
    world = SimWorld.open("lead-rows", top.robot, top.buses, dt=1.0 / top.rate_hz,
                          plant_model=top.simulation.plant,
                          plant_room=top.simulation.plant_options())
    world.reset(np.zeros(n))
    mirror = lead.RowsMirror(lead.SharedRows((V_WIDTH, n)))
    leader, block = lead.prepare(world, top.robot, top.exo, mirror.block.spec())
    try:
        assert leader is not None and not len(leader.torques())  # (the warm-up logs nothing)
        server = RealtimeServer(world, {}, leader=leader)
        world.advance()
        assert world.wearer is None  # prepared, idle
        v = np.zeros((V_WIDTH, n))
        v[V_QR] = np.linspace(0.2, -0.2, n)  # rad
        v[V_QDR] = 0.5
        mirror.follow(v)
        server.command("lead")
        assert world.wearer is leader
        state = world.plant.state.copy()
        force = world.truth.force.copy()
        world.advance()
        want = state.copy()
        Leader(top.robot, top.exo, v, world.truth.feet).apply(want, force, 0.0)
        tau = leader.torques()
        assert tau.shape == (1, 1 + n)
        np.testing.assert_allclose(tau[0, 1:], want[ST_EXT, :n], rtol=1e-12, atol=1e-9)
        assert np.abs(tau[0, 1:]).max() > 10.0  # N·m: the impedance pulls towards 0.2 rad
        assert lead.report(leader, top.robot.joint_names).startswith("leading wearer: 1 steps")
    finally:
        block.close()
        mirror.close()
        SimWorld._worlds.pop("lead-rows", None)


class _Started(Exception):
    """Raised by the stand-in for the simulation's process: its command line seen."""


@pytest.mark.parametrize("wearer, leads", [("leading.yaml", True), ("default.yaml", False),
                                           (None, False), ("no-such-wearer.yaml", False)])
def test_only_a_leading_wearer_gets_the_shared_rows(monkeypatch, wearer, leads):
    """The real-time simulation of a floor world is handed the block (``--lead``) only where
    the run's wearer profile leads: a passive wearer's start-up prepares no Leader (≈ 0.2 s
    of its models). A profile that does not load is passive here (the session says what is
    wrong with it); none is the robot file's wearer, passive."""
    from exo_rt.runtime.config import load_top
    from exo_rt.runtime.options import RunOptions
    from exo_rt.runtime.rig import open_rig
    from exo_rt.sim import launch

    seen = {}

    def helper(name, module, args, **_):
        seen["args"] = list(args)
        raise _Started

    monkeypatch.setattr(launch, "Helper", helper)
    top = load_top(ROOT / "configs" / "exo_2leg_world.yaml")
    path = None if wearer is None else str(ROOT / "configs" / "wearers" / wearer)
    with pytest.raises(_Started):
        open_rig(top, "sim", RunOptions(realtime=True, wearer=path, rt_setup=False), cpus=set())
    assert ("--lead" in seen["args"]) is leads, seen["args"]
