"""The controller is the only master on its buses, and knows it: another node's SYNC, NMT
command, SDO request or RPDO to one of its drives, or a heartbeat with its node id is the
safety cause ``foreign_master`` (naming the COB-ID) within 3 cycles; a second answer to one
SYNC (``duplicate_answer``) and a drive whose current stays short of its command
(``current_saturation``, ``safety.saturation_cycles``) are causes too (docs/safety.md).

Each case runs the default leg in lockstep on the simulated bus, whose other node (an
``--inject`` kind) sends the frames while the gait runs; the emulated drives obey them as
real drives would (a foreign SYNC makes each answer twice a cycle).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exo_rt.bus import pdo_cycle
from exo_rt.bus.flags import F_DUPLICATE, F_FOREIGN, F_SATURATED
from exo_rt.cycle import safety
from exo_rt.runtime import controller as ctl
from exo_rt.runtime.config import load_top

# alone on the CPUs (tests/cpu_share.py): udp_multicast buses
pytestmark = pytest.mark.exclusive

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "exo_leg.yaml"
AT = 0.4  # s into RUN (--inject's T counts from the start of the gait)
DURATION = 1.0  # s of RUN


def _run(*injections: str):
    top = load_top(CONFIG)
    inj = tuple(ctl.Injection.parse(s, top.robot.joint_names) for s in injections)
    c = ctl.Controller(top, "sim", injections=inj)
    return top, c, c.run(DURATION, None)


@pytest.fixture(scope="module")
def normal_peaks() -> dict[str, float]:
    """Each joint's largest commanded current in the same run without another master (A)."""
    _top, _c, result = _run()
    assert result.summary["final_state"] == "SHUTDOWN"
    return {j: v["max_abs_current_A"] for j, v in result.summary["joints"].items()}


FOREIGN = {  # kind → the COB-ID the fault names (knee: node 2, the controller: 127)
    "foreign_sync": 0x080, "foreign_nmt_stop": 0x000, "foreign_nmt_reset": 0x000,
    "foreign_sdo": 0x602, "foreign_heartbeat": 0x77F}


@pytest.mark.slow
@pytest.mark.hazard("H-FOREIGN-MASTER")
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_another_master_is_a_fault_within_three_cycles(kind, normal_peaks):
    top, c, result = _run(f"{kind}:knee@{AT}")
    s = result.summary
    assert s["final_state"] == "SAFE" and result.exit_code != 0
    (fault,) = s["faults"]
    assert fault["cause"] == "foreign_master"
    assert fault["reaction_cycles"] <= 3
    assert fault["t"] == pytest.approx(c.run_cycle() * c.dt + AT, abs=1e-9)
    assert f"COB-ID 0x{FOREIGN[kind]:03X}" in fault["detail"]
    assert any(e.get("cause") == "foreign_master" and "COB-ID" in e.get("detail", "")
               for e in c.events)
    # no current above the run's normal peak (the commands then ramp to zero)
    for j, peak in normal_peaks.items():
        assert s["joints"][j]["max_abs_current_A"] <= peak + 1e-9, (j, peak)


@pytest.mark.hazard("H-FOREIGN-MASTER")
def test_two_answers_a_cycle_are_a_fault_when_they_go_on():
    """A drive answering twice a cycle for ``duplicate_cycles`` cycles: SAFE in the last."""
    top, _c, result = _run(f"duplicate:knee@{AT}+0.01")
    (fault,) = result.summary["faults"]
    assert (fault["cause"], fault["joint"]) == ("duplicate_answer", "knee")
    assert fault["reaction_cycles"] == top.safety.duplicate_cycles


def test_one_late_answer_is_no_fault():
    """Once is a late answer to the last SYNC read after the next one left (a held-up drive
    or simulation): flagged, not a fault."""
    _top, c, result = _run(f"duplicate:knee@{AT}")
    assert result.summary["final_state"] == "SHUTDOWN"
    assert (_streaks(c.log["flags"][:, 1], F_DUPLICATE) == 1).any()


def _streaks(flags: np.ndarray, bit: int) -> np.ndarray:
    """Per cycle, how many cycles in a row (this one included) carry ``bit``."""
    out = np.zeros(len(flags), np.int64)
    run = 0
    for k, f in enumerate(flags.astype(np.int64)):
        run = run + 1 if f & bit else 0
        out[k] = run
    return out


@pytest.mark.hazard("H-FOREIGN-MASTER")
def test_a_drive_that_cannot_follow_its_command_is_a_fault():
    """The hip's drive delivers at most 20 % of its peak from 2.4 s on: once the gait asks it
    for more (by over 20 % of peak) for ``saturation_cycles`` cycles in a row, SAFE — in the
    cycle that completes the streak, not before."""
    top, c, result = _run(f"current_saturation:hip@{AT}+1.0")
    (fault,) = result.summary["faults"]
    assert (fault["cause"], fault["joint"]) == ("current_saturation", "hip")
    n = top.safety.saturation_cycles
    streak = _streaks(c.log["flags"][:, 0], F_SATURATED)
    first_full = int(np.argmax(streak >= n))
    assert streak[first_full] == n
    (event,) = [e for e in c.events if e.get("event") == "fault"]
    assert event["cycle"] == int(c.log["cycle"][first_full])


def test_a_normal_gait_never_saturates_for_long():
    """The default limit (20 cycles) is far from what a normal run shows: its longest streak
    of F_SATURATED cycles (2 in this run)."""
    top, c, result = _run()
    assert result.summary["final_state"] == "SHUTDOWN"
    longest = max(_streaks(c.log["flags"][:, j], F_SATURATED).max() for j in range(2))
    assert longest <= top.safety.saturation_cycles // 5


def _take(frames) -> tuple[np.ndarray, np.ndarray]:
    """``frames`` ((COB-ID, data) pairs) through :func:`pdo_cycle.take_tpdos` for a bus of two
    drives (nodes 1, 2; the controller 127): the drives' flags and the foreign-master watch."""
    from exo_rt.bus import fastio

    b = fastio.FrameBatch(max(1, len(frames)))
    for r, (arb, data) in enumerate(frames):
        b.arbitration_id[r] = arb
        b.length[r] = len(data)
        b.data[r, : len(data)] = np.frombuffer(bytes(data), np.uint8)
        b.time[r] = 1.0
    bus = pdo_cycle.io_arguments(2, fastio.WIRE_UDP)
    model, data = bus.model, bus.data
    data.late_before[0] = 0.0
    pdo_cycle.take_tpdos(b, len(frames), model, data)
    return data.flags, data.foreign


@pytest.mark.parametrize("arb,data,which", [
    (0x080, b"", "all"), (0x000, b"\x02\x00", "all"), (0x000, b"\x81\x02", "all"),
    (0x77F, b"\x05", "all"), (0x602, b"\x2b\x71\x60\x00\xf4\x01\x00\x00", 1),
    (0x202, b"\x0f\x00\x00\x00", 1), (0x501, b"\x00", 0)])
@pytest.mark.hazard("H-FOREIGN-MASTER")
def test_take_tpdos_flags_every_frame_only_a_master_sends(arb, data, which):
    """The decoder itself: the COB-IDs of CiA 301 that only the master sends, from anyone
    but the controller (a port never hands it its own frames), flag the bus or the drive."""
    flags, foreign = _take([(arb, data)])
    expect = [F_FOREIGN] * 2 if which == "all" else [F_FOREIGN if k == which else 0
                                                     for k in range(2)]
    assert flags.tolist() == expect
    assert foreign.tolist() == [127, 1, arb]


def test_a_drives_own_frames_and_other_nodes_are_not_foreign():
    """TPDOs, EMCYs, SDO answers and heartbeats of the drives, and another device's frames
    (a fixture on node 3), are not another master."""
    flags, foreign = _take([(0x181, bytes(8)), (0x081, bytes(8)), (0x581, bytes(8)),
                            (0x701, b"\x05"), (0x203, bytes(4)), (0x603, bytes(8)),
                            (0x183, bytes(8))])
    assert not (flags & (F_FOREIGN | F_DUPLICATE)).any() and foreign[1] == 0


def test_the_check_orders_foreign_first():
    """Another master outranks every other cause (it explains them: stale feedback after its
    NMT stop, duplicates after its SYNC)."""
    from exo_rt.cycle import step as cy
    from exo_rt.cycle.states import RUN
    from exo_rt.runtime.config import load_top

    top = load_top("configs/exo_leg.yaml")
    c = cy.build(top.robot, top.exo, top.controller, top.safety, dt=1e-3)
    c.s["state"] = RUN
    c.flags[:] = [F_DUPLICATE, F_FOREIGN]
    c.v[cy.V_QR] = 5.0  # a tracking error too, and a position out of range: foreign first
    safety.check(c.model, c.data)
    assert (safety.CAUSES[c.check_out[0]], c.check_out[1]) == ("foreign_master", 1)
    c.flags[:] = 0
    safety.check(c.model, c.data)
    assert safety.CAUSES[c.check_out[0]] == "tracking_error"


@pytest.mark.hazard("H-FOREIGN-MASTER")
@pytest.mark.slow
def test_a_second_sync_producer_on_the_realtime_bus():
    """The attack as seen: the simulated exoskeleton in its own real-time process (``exo-rt
    drives --bus udp_multicast:G --board``), the controller on it, and a third node — a plain
    python-can bus on the same group — sending a SYNC every 1 ms from 1 s into RUN. The
    controller goes SAFE (``foreign_master``, COB-ID 0x080) within 3 cycles of the first one it
    reads, and commands no current above what it had commanded before."""
    import json
    import threading
    import time

    import can

    from exo_rt.record.recorder import read_cycle_log
    from tests.test_udp_clients import Drives, unique_group

    group = unique_group()
    drives = Drives(group, "--board")
    out = Path(__import__("tempfile").mkdtemp()) / "run"
    stop = threading.Event()
    sent: list[float] = []

    def attacker():
        bus = can.Bus(interface="udp_multicast", channel=group)
        try:
            log = out / "cycles.exolog"
            while not stop.is_set():  # from ~1 s into RUN: the log's size
                if log.exists() and log.stat().st_size > 3100 * 24 * 8:
                    break
                time.sleep(0.01)
            while not stop.is_set():
                bus.send(can.Message(arbitration_id=0x080, data=b"", is_extended_id=False))
                sent.append(time.time())
                time.sleep(1e-3)
        finally:
            bus.shutdown()

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    try:
        res = drives.run_controller(group, 4.0, out)
    finally:
        stop.set()
        thread.join(5)
        drives.stop()
    s = json.loads((out / "summary.json").read_text())
    assert res.returncode == 1 and s["final_state"] == "SAFE", (res.stdout, res.stderr)
    (fault,) = s["faults"]
    assert fault["cause"] == "foreign_master" and "COB-ID 0x080" in fault["detail"], fault
    assert sent, "the attacker never sent"
    records, meta = read_cycle_log(out / "cycles.exolog")
    # the first foreign SYNC the controller received, on its CAN log's (wall) clock
    first = min(m.timestamp for m in can.LogReader(str(out / "can.blf"))
                if m.arbitration_id == 0x080 and m.is_rx)
    t_first = first - meta["wall_start"]  # s of the loop
    k_fault = int(records["cycle"][records["cause"] > 0][0])
    # cycle k wakes at k periods + the deadlines skipped so far (overruns) after the start
    wakes = records["t"] + records["overruns"] * 1e-3
    k_first = int(records["cycle"][np.searchsorted(wakes, t_first)])
    assert k_fault - k_first <= 3, (k_first, k_fault)
    before = np.abs(records["command"][:k_fault]).max(axis=0)
    after = np.abs(records["command"][k_fault:]).max(axis=0)
    assert np.all(after <= before + 1e-9), (before, after)
