"""The drives protect the wearer by themselves, and restart is explicit.

The controller is a CANopen heartbeat producer; bring-up gives each CiA 402 drive its
consumer heartbeat time (1016h), error behaviour (1029h), abort connection option (6007h)
and, on request, the communication cycle period (1006h) for a SYNC watchdog. The emulated
drives watch them on their own clock (the simulated world's, period by period, whether SYNCs
come or not). A controller that finds a drive stopped says which and why, and clears it only
when asked (``reset_faults``). Lockstep, in-process: a "dead master" is a world that goes on
(:meth:`SimWorld.advance`) while the host sends nothing."""

from __future__ import annotations

import math
import re
from pathlib import Path

import can
import canopen
import numpy as np
import pytest

from exo_rt.bus import cia402 as c
from exo_rt.bus.bringup import read_back
from exo_rt.bus.config import load_buses
from exo_rt.bus.drives import Drives
from exo_rt.bus.flags import F_NOT_ENABLED
from exo_rt.errors import BusError, ConfigError
from exo_rt.model import load_mechanism
from exo_rt.sim.plant import ST_ON
from exo_rt.sim.simbus import SimWorld

ROOT = Path(__file__).resolve().parents[1]
BUSES = ROOT / "configs" / "buses"
EDS = BUSES / "eds" / "exo_drive.eds"
ROBOT = load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")
DT = 1e-3
PUSH = np.array([2.0, -3.0])  # A: the drives are applying something when the master dies


def _bus_file(tmp_path: Path, extra: str = "", eds: Path = EDS, name: str = "bus") -> Path:
    """exo_leg.yaml with an absolute EDS path and ``extra`` lines under the bus."""
    path = tmp_path / f"{name}.yaml"
    path.write_text((BUSES / "exo_leg.yaml").read_text().replace("eds/exo_drive.eds", str(eds))
                    + extra)
    return path


def _open(world: str, path: Path | None = None):
    buses = load_buses(path or BUSES / "exo_leg.yaml", ROBOT)
    sim = SimWorld.open(world, ROBOT, buses)
    sim.reset([0.0, math.pi / 2])
    d = Drives(can.Bus(interface="exo_sim", channel="leg", world=world), buses[0], ROBOT)
    return sim, d


def _running(world: str, path: Path | None = None, cycles: int = 30):
    """Drives brought up, enabled and cycling with a current, the master's heartbeat on."""
    sim, d = _open(world, path)
    d.configure()
    d.enable()
    for _ in range(cycles):
        d.cycle(PUSH)
    assert (sim.cmd != 0).all()
    return sim, d, [drive for drive, _ in sim.endpoints["leg"].drives]


def _emcys(sim) -> list[tuple[int, int, int, float]]:
    """(node, code, error register, time) of the EMCYs waiting on the simulated bus."""
    out = []
    for msg in sim.endpoints["leg"].rx:
        if 0x081 <= msg.arbitration_id <= 0x0FF and len(msg.data) == 8:
            code, reg, _ = c.decode_emcy(bytes(msg.data))
            out.append((msg.arbitration_id - 0x80, code, reg, msg.timestamp))
    return out


def _master_dies(sim, drives, periods: int, heartbeat=None):
    """The world goes on ``periods`` periods with no SYNC (and no heartbeat unless
    ``heartbeat`` sends one when called with the period's index); each drive's state, its
    current command and power stage per period."""
    states, cmds, power = [], [], []
    for k in range(periods):
        if heartbeat is not None:
            heartbeat(k)
        sim.advance()
        states.append([drive.state for drive in drives])
        cmds.append(sim.cmd.copy())
        power.append(sim.plant.state[ST_ON, :2].copy())
    return states, np.array(cmds), np.array(power)


def _first(states, test) -> int:
    """The first period (1-based) in which every drive satisfies ``test``."""
    return next(k + 1 for k, s in enumerate(states) if all(test(x) for x in s))


def test_the_controller_is_a_heartbeat_producer():
    sim, d = _open("wd-producer")
    sent = []
    original = d.port.send
    d.port.send = lambda arb, data, extended=False: (sent.append((arb, bytes(data))),
                                                     original(arb, data, extended))[1]
    d.configure()
    d.enable()
    assert not [f for f in sent if f[0] == 0x77F]  # none while enabling: the cycle starts it
    for _ in range(100):
        d.cycle(np.zeros(2))
    beats = [f for f in sent if f[0] == 0x77F]
    assert len(beats) == 10 and set(beats) == {(0x77F, bytes([c.HB_OPERATIONAL]))}
    for drive, _ in sim.endpoints["leg"].drives:  # every drive watches it: 127 << 16 | 40 ms
        assert drive._hb_watch[0x77F][0] == pytest.approx(0.040)
    d.bus.shutdown()


@pytest.mark.hazard("H-CONTROLLER-DEAD")
@pytest.mark.parametrize("sync_watchdog", [False, True])
def test_a_dead_master_leaves_every_drive_stopped_at_zero_current(tmp_path, sync_watchdog):
    """No SYNC and no heartbeat any more: within the consumer time (40 ms) + 1 period every
    drive leaves OPERATION ENABLED, its current command is zero at once and its power stage
    off (disable voltage, the default 6007h), EMCY 8130h goes out, the drive falls back to
    NMT pre-operational (1029h = 0) and keeps 8130h in 603Fh. With the SYNC watchdog (1006h
    = 1 ms) the SYNC's loss stops them after 3 periods, EMCY 8100h, the heartbeat's later."""
    path = _bus_file(tmp_path, "    drive_watchdog: {sync_watchdog: true}\n"
                     if sync_watchdog else "")
    sim, d, drives = _running(f"wd-dead-{sync_watchdog}", path)
    t_dead = sim.t
    last_beat = max(w[0x77F][1] for w in (x._hb_watch for x in drives))
    states, cmds, power = _master_dies(sim, drives, 60)
    stop = _first(states, lambda s: s != c.OPERATION_ENABLED)
    if sync_watchdog:
        assert stop <= 3 + 1
    else:
        assert t_dead + stop * DT <= last_beat + 0.040 + DT + 1e-9
        assert t_dead + stop * DT > last_beat + 0.040 - 1e-9  # not before the consumer time
    assert all(s == c.SWITCH_ON_DISABLED for s in states[stop - 1])
    assert (cmds[stop - 1:] == 0).all() and (power[stop - 1:] == 0).all()
    assert (cmds[: stop - 1] != 0).all()  # the current was on until then
    assert np.all(sim.plant.currents == 0.0)  # the power stage off: no current at once
    emcys = _emcys(sim)
    for drive in drives:
        codes = [code for node, code, reg, _ in emcys if node == drive.node]
        assert c.EMCY_HEARTBEAT in codes
        assert codes[0] == (c.EMCY_COMMUNICATION if sync_watchdog else c.EMCY_HEARTBEAT)
        assert all(reg & c.ERRREG_COMMUNICATION for node, _, reg, _ in emcys)
        assert drive.nmt_state == c.HB_PRE_OPERATIONAL
        assert drive.error_code == codes[0]
        assert drive.history[:len(codes)] == codes[::-1]
    d.bus.shutdown()


@pytest.mark.hazard("H-CONTROLLER-DEAD")
def test_sync_loss_alone_stops_the_drives_while_the_heartbeat_goes_on(tmp_path):
    """The heartbeat keeps coming (a master whose cycle hangs, not its heartbeat): with the
    SYNC watchdog the drives stop after 3 × 1006h, EMCY 8100h and no 8130h; without it they
    go on (the heartbeat is what they watch by default)."""
    for sync_watchdog in (True, False):
        path = _bus_file(tmp_path, f"    drive_watchdog: {{sync_watchdog: "
                         f"{str(sync_watchdog).lower()}}}\n", name=f"s{sync_watchdog}")
        sim, d, drives = _running(f"wd-sync-{sync_watchdog}", path)

        def beat(k, d=d):
            if k % 10 == 0:
                d.port.send(0x77F, bytes([c.HB_OPERATIONAL]))

        states, cmds, _ = _master_dies(sim, drives, 100, heartbeat=beat)
        codes = {code for _, code, _, _ in _emcys(sim)}
        if sync_watchdog:
            assert _first(states, lambda s: s != c.OPERATION_ENABLED) <= 3 + 1
            assert codes == {c.EMCY_COMMUNICATION} and (cmds[4:] == 0).all()
            assert all(x.error_code == c.EMCY_COMMUNICATION for x in drives)
        else:
            assert all(s == c.OPERATION_ENABLED for row in states for s in row)
            assert not codes and (cmds != 0).all()
        d.bus.shutdown()


@pytest.mark.hazard("H-CONTROLLER-DEAD")
def test_abort_connection_options_give_their_cia402_states(tmp_path):
    """6007h = fault signal → FAULT; disable voltage → SWITCH ON DISABLED at once; quick stop
    → QUICK STOP ACTIVE, the torque ramped to zero over 2 ms, then as 605Ah says: 2 (the
    default) SWITCH ON DISABLED, 6 stay in QUICK STOP ACTIVE at zero current."""
    results = {}
    for option, qs in (("fault", None), ("disable_voltage", None), ("quick_stop", None),
                       ("quick_stop", 6)):
        path = _bus_file(tmp_path, f"    drive_watchdog: {{abort_connection: {option}}}\n",
                         name=f"{option}{qs}")
        sim, d = _open(f"wd-abort-{option}-{qs}", path)
        d.configure()
        if qs is not None:
            for node in d.nodes:
                d.sdo_write(int(node), (0x605A, 0), qs, 2)
        d.enable()
        for _ in range(30):
            d.cycle(PUSH)
        drives = [drive for drive, _ in sim.endpoints["leg"].drives]
        before = sim.cmd.copy()
        states, cmds, power = _master_dies(sim, drives, 50)
        stop = _first(states, lambda s: s != c.OPERATION_ENABLED)
        results[(option, qs)] = (states[stop - 1:], cmds[stop - 1:], power[stop - 1:], before)
        d.bus.shutdown()
    states, cmds, power, _ = results[("fault", None)]
    assert all(s == c.FAULT for row in states for s in row) and not cmds.any()
    assert not power.any()
    states, cmds, power, _ = results[("disable_voltage", None)]
    assert all(s == c.SWITCH_ON_DISABLED for row in states for s in row) and not cmds.any()
    for qs, final, on in ((None, c.SWITCH_ON_DISABLED, 0.0), (6, c.QUICK_STOP_ACTIVE, 1.0)):
        states, cmds, power, before = results[("quick_stop", qs)]
        assert states[0] == [c.QUICK_STOP_ACTIVE] * 2
        np.testing.assert_allclose(cmds[0], before, rtol=1e-12)  # from where it was …
        np.testing.assert_allclose(cmds[1], before / 2, rtol=1e-12)  # … down a ramp …
        assert not cmds[2:].any()  # … to zero in 2 ms
        assert states[2:] == [[final] * 2] * (len(states) - 2)
        assert (power[2:] == on).all() and power[0].all()


def test_error_behaviour_chooses_the_nmt_state_after_the_loss(tmp_path):
    """1029h/1: no_change keeps NMT operational (the TPDOs say SWITCH ON DISABLED: the
    controller sees its drives disabled), stopped goes to NMT stopped."""
    for behaviour, nmt in (("no_change", c.HB_OPERATIONAL), ("stopped", c.HB_STOPPED)):
        path = _bus_file(tmp_path, f"    drive_watchdog: {{error_behaviour: {behaviour}}}\n",
                         name=behaviour)
        sim, d, drives = _running(f"wd-eb-{behaviour}", path)
        _master_dies(sim, drives, 50)
        assert all(x.nmt_state == nmt and x.state == c.SWITCH_ON_DISABLED for x in drives)
        sim.endpoints["leg"].rx.clear()
        d.cycle(PUSH)  # the master is back: it sees what the drives did
        if behaviour == "no_change":
            assert (d.flags & F_NOT_ENABLED).all() and (sim.cmd == 0).all()
        else:
            assert not d.seen.any()
        d.bus.shutdown()


@pytest.mark.hazard("H-RESTART-STOPPED")
def test_a_drive_found_in_fault_is_one_clear_error_and_reset_faults_enables_it():
    sim, d = _open("wd-found-fault")
    sim.inject("fault", "leg", 2)  # node 2 faulted before this controller started
    sim.endpoints["leg"].rx.clear()  # (its EMCY went to the last controller)
    d.configure()
    assert d.found[1]["state"] == c.FAULT and d.found[1]["error_code"] == c.EMCY_OVERCURRENT
    with pytest.raises(BusError) as err:
        d.enable()
    msg = str(err.value)
    assert "\n" not in msg
    assert re.search(r"on bus 'leg' drive 2 is in FAULT \(error code 603Fh = 2310h, "
                     r"continuous over-current; last error 1003h/1 2310h, continuous "
                     r"over-current\).* --reset-faults", msg), msg
    assert "drive 1" not in msg
    drive = sim.endpoints["leg"].drives[1][0]
    assert drive.state == c.FAULT  # nothing was sent to it: no silent re-enable
    d.enable(reset_faults=True)
    for _ in range(5):
        d.cycle(np.zeros(2))
    assert [c.state_of(int(sw)) for sw in d.statusword] == [c.OPERATION_ENABLED] * 2
    assert drive.error_code == 0 and not d.flags.any()
    d.bus.shutdown()


@pytest.mark.hazard("H-RESTART-STOPPED")
def test_quick_stop_active_found_at_start_is_refused_too():
    sim, d = _open("wd-found-qs")
    d.configure()
    d.enable()
    drive = sim.endpoints["leg"].drives[0][0]
    d.controlword[0] = c.CW_QUICK_STOP
    drive.history.clear()
    drive._quick_stop_option = 6  # stays in QUICK STOP ACTIVE
    d.cycle(np.zeros(2))
    assert drive.state == c.QUICK_STOP_ACTIVE
    d.bus.shutdown()
    _, d2 = _open_again("wd-found-qs", sim)
    d2.configure()
    # drive 2, still enabled, was left running by the controller that is gone: named too
    with pytest.raises(BusError, match=r"drive 1 is in QUICK STOP ACTIVE, drive 2 is in "
                                       r"OPERATION ENABLED \(left running by a controller that "
                                       r"is gone.*\): it stopped and stays stopped until "
                                       r"cleared — .*--reset-faults"):
        d2.enable()
    d2.enable(reset_faults=True)
    assert drive.state == c.OPERATION_ENABLED
    d2.bus.shutdown()


def _open_again(world: str, sim):
    """A new controller (its own Drives, the same world: the drives as they were left)."""
    bus_config = sim.endpoints["leg"].config
    return sim, Drives(can.Bus(interface="exo_sim", channel="leg", world=world), bus_config,
                       ROBOT)


@pytest.mark.hazard("H-RESTART-STOPPED")
def test_restart_after_the_master_died_needs_the_operators_reset():
    """The drives stopped themselves when their controller died; the next one says so
    (8130h, heartbeat) and moves nothing until it is told to reset them."""
    sim, d, drives = _running("wd-restart")
    _master_dies(sim, drives, 60)
    d.bus.shutdown()
    sim.endpoints["leg"].rx.clear()
    _, d2 = _open_again("wd-restart", sim)
    d2.configure()
    assert all(f["stopped"] and f["error_code"] == c.EMCY_HEARTBEAT for f in d2.found)
    with pytest.raises(BusError, match=r"drive 1 is in SWITCH ON DISABLED \(error code 603Fh "
                                       r"= 8130h, heartbeat or life guard error; last error "
                                       r"1003h/1 8130h.*\), drive 2 is in SWITCH ON DISABLED"):
        d2.enable()
    assert all(x.state == c.SWITCH_ON_DISABLED for x in drives)
    d2.enable(reset_faults=True)
    for _ in range(200):  # the new master's heartbeat is watched again: no trip
        d2.cycle(PUSH)
    assert all(x.state == c.OPERATION_ENABLED and not x._hb_watch[0x77F][2] for x in drives)
    assert (sim.cmd != 0).all()
    d2.bus.shutdown()


def test_canopen_as_an_independent_master_reads_back_what_bring_up_wrote(tmp_path):
    path = _bus_file(tmp_path, "    master: {node: 100, heartbeat_ms: 20}\n"
                               "    drive_watchdog: {heartbeat_periods: 5, abort_connection: "
                               "quick_stop, error_behaviour: no_change, sync_watchdog: true}\n")
    sim, d = _open("wd-readback", path)
    d.configure()
    assert d.bringup_warnings == []
    d.bus.shutdown()
    network = canopen.Network(can.Bus(interface="exo_sim", channel="leg", world="wd-readback"))
    network.connect()
    try:
        for node_id in (1, 2):
            node = canopen.BaseNode402(node_id, str(EDS))
            network.add_node(node)
            assert node.sdo[0x1016][1].raw == 100 << 16 | 100  # node 100, 5 × 20 ms
            assert node.sdo[0x1029][1].raw == 1  # no change of the NMT state
            assert node.sdo[0x6007].raw == 3  # quick stop command
            assert node.sdo[0x1006].raw == 1000  # µs: the control period
            assert node.sdo[0x1017].raw == 100  # (its own heartbeat, as before)
            assert node.sdo[0x603F].raw == 0 and node.sdo[0x1003][0].raw == 0
    finally:
        network.disconnect()


@pytest.mark.parametrize("bus_file", ["exo_leg_epos4", "exo_leg_elmo"])
def test_vendor_eds_drives_take_the_watchdog_objects(bus_file):
    """The shipped maxon EPOS4 DCF and Elmo Gold EDS have 1016h, 1029h and 6007h: bring-up
    writes them without a warning (the Elmo EDS limits 1016h/1 to 16 bits, its time alone:
    the emulated drive checks CiA 301's layout instead); and their emulated drives stop."""
    buses = load_buses(BUSES / f"{bus_file}.yaml", ROBOT)
    world = f"wd-vendor-{bus_file}"
    sim = SimWorld.open(world, ROBOT, buses)
    sim.reset([0.0, math.pi / 2])
    d = Drives(can.Bus(interface="exo_sim", channel="leg", world=world), buses[0], ROBOT)
    d.configure()
    assert d.bringup_warnings == []
    drives = [drive for drive, _ in sim.endpoints["leg"].drives]
    for drive in drives:
        assert drive._int(0x1016, 1) == 127 << 16 | 40 and drive._int(0x6007, 0) == 2
        assert drive._int(0x1029, 1) == 0
    # what exo-rt bench-test bringup reports: the objects as the drives hold them
    quick_stop = {"exo_leg_epos4": 6, "exo_leg_elmo": 2}[bus_file]  # their factory 605Ah
    for values in read_back(d).values():
        assert values["1016h/1"] == 127 << 16 | 40 and values["6007h/0"] == 2
        assert values["1029h/1"] == 0 and values["605Ah/0"] == quick_stop
        assert values["603Fh/0"] == 0 and ("1006h/0" in values) == (bus_file != "exo_leg_epos4")
    d.enable()
    for _ in range(30):
        d.cycle(PUSH)
    states, cmds, _ = _master_dies(sim, drives, 50)
    assert states[-1] == [c.SWITCH_ON_DISABLED] * 2 and not cmds[-1].any()
    d.bus.shutdown()


def test_an_eds_without_1016h_is_one_warning_or_refused_when_required(tmp_path):
    lines = EDS.read_text().splitlines(keepends=True)
    kept, skip = [], False
    for line in lines:  # the EDS without its [1016] sections
        if line.startswith("["):
            skip = line.startswith("[1016")
        if not skip and line.strip() != "5=0x1016":
            kept.append(line)
    eds = tmp_path / "no1016.eds"
    eds.write_text("".join(kept))
    sim, d = _open("wd-no1016", _bus_file(tmp_path, eds=eds))
    d.configure()
    assert len(d.bringup_warnings) == 2  # one line per drive
    assert re.fullmatch(r"drive 1 on bus 'leg': its EDS \(.*no1016.eds\) has no 1016h/1 "
                        r"\(consumer heartbeat time\): the drive will not notice a silent "
                        r"controller — set the drive's own watchdog with the vendor's tool "
                        r"\(docs/safety.md\), or give the drive's own EDS",
                        d.bringup_warnings[0]), d.bringup_warnings[0]
    assert sim.endpoints["leg"].drives[0][0]._int(0x6007, 0) == 2  # the others are written
    d.bus.shutdown()
    path = _bus_file(tmp_path, "    drive_watchdog:\n      required: true\n", eds=eds,
                     name="required")
    with pytest.raises(ConfigError, match=r"required.yaml:\d+: .*required: drive 1's EDS "
                                          r"\(.*no1016.eds\) has no 1016h/1 \(consumer "
                                          r"heartbeat time\), which drive_watchdog.required"):
        load_buses(path, ROBOT)


@pytest.mark.parametrize(("extra", "match"), [
    ("    master: {node: 2}\n", r"bus.yaml:\d+: .*master node id 2 is a drive's too"),
    ("    master: {node: 200}\n", r"master node id 200 is not a whole number in 1…127"),
    ("    master: {heartbeat_ms: 2.5}\n", r"master heartbeat_ms 2.5 is not a whole number"),
    ("    master: {period: 10}\n", r"unknown key 'period' in master"),
    ("    drive_watchdog: {abort_connection: none}\n",
     r"bus.yaml:\d+: .*unknown abort_connection \(6007h\) 'none'.*use one of fault, "
     r"disable_voltage, quick_stop"),
    ("    drive_watchdog: {error_behaviour: pre_operationl}\n",
     r"unknown error_behaviour \(1029h\) 'pre_operationl'.*did you mean 'pre_operational'"),
    ("    drive_watchdog: {sync_watchdog: 1}\n", r"sync_watchdog 1 is not true or false"),
    ("    master: {heartbeat_ms: 1000}\n    drive_watchdog: {heartbeat_periods: 70}\n",
     r"a consumer heartbeat time of 70000 ms does not fit 1016h"),
])
def test_bad_watchdog_keys_are_one_line_with_file_and_line(tmp_path, extra, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_buses(_bus_file(tmp_path, extra), ROBOT)
    assert "\n" not in str(err.value)


def test_run_takes_reset_faults():
    from exo_rt.cli import build_parser

    args = build_parser().parse_args(["run", "--reset-faults"])
    assert args.reset_faults
    assert not build_parser().parse_args(["run"]).reset_faults
