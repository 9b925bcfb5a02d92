"""The controller end to end on the MIT and RMD-X bus files (lockstep simulated bus): the gait
tracked and SHUTDOWN, every applicable fault injection → SAFE within 3 cycles, controller
replay of a run bit-identical, the bench procedures; and ``--bus`` per bus (resolve_specs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt.errors import ConfigError
from exo_rt.runtime import controller as ctl
from exo_rt.runtime.buses import resolve_specs
from exo_rt.runtime.config import load_top

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"mit": ROOT / "configs" / "exo_leg_mit.yaml",
           "rmdx": ROOT / "configs" / "exo_leg_rmdx.yaml"}


def _run(family: str, duration: float, injections=(), out=None):
    top = load_top(CONFIGS[family])
    inj = tuple(ctl.Injection.parse(s, top.robot.joint_names) for s in injections)
    c = ctl.Controller(top, "sim", injections=inj)
    result = c.run(duration, out)
    return top, c, result


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_the_gait_is_tracked_and_the_run_shuts_down(family):
    top, c, result = _run(family, 3.0)
    s = result.summary
    assert s["final_state"] == "SHUTDOWN" and s["faults"] == [] and result.exit_code == 0
    assert {b.protocol for b in top.buses} == {family}
    for name, j in s["joints"].items():
        assert j["rms_error_deg"] <= 0.5, (name, j)
    assert np.all(np.abs(c.log["command"]) <= top.controller.current_limit + 1e-9)
    # the feedback's resolution shows in the commands' cycle-to-cycle jitter (A); RMD-X's
    # whole degrees without the speed between them: 3.8 A at the hip
    run = c.log["command"][c.log["state"] == ctl.RUN]
    assert np.max(np.std(np.diff(run, axis=0), axis=0)) < 1.0


# every injection these families can act out (no heartbeats: heartbeat_loss does not apply;
# board_link_loss is the board's own 20 ms timeout, whatever the drives)
INJECT = ["drop:knee@0.4+0.05", "delay:knee@0.4+0.05", "corrupt:knee@0.4+0.05",
          "emcy:knee@0.4", "bus_off@0.4+0.05", "encoder_glitch:hip@0.4", "overcurrent:knee@0.4",
          "overrun@0.4+0.01", "nan:hip@0.4", "estop@0.4"]
EXPECTED = {"drop": "stale_feedback", "delay": "stale_feedback", "corrupt": "stale_feedback",
            "estop": "estop", "emcy": "drive_fault", "bus_off": "stale_feedback",
            "encoder_glitch": "encoder_glitch", "overcurrent": "current_limit",
            "overrun": "overrun", "nan": "not_finite"}


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(CONFIGS))
@pytest.mark.parametrize("spec", INJECT, ids=[s.split("@")[0] for s in INJECT])
def test_every_applicable_injection_is_caught_within_three_cycles(family, spec):
    top, c, result = _run(family, 0.8, (spec,))
    s = result.summary
    assert s["final_state"] == "SAFE" and result.exit_code != 0
    (fault,) = s["faults"]
    kind = spec.split("@")[0].split(":")[0]
    assert fault["cause"] == EXPECTED[kind]
    assert fault["reaction_cycles"] <= 3
    if ":" in spec.split("@")[0]:
        assert fault["joint"] == spec.split("@")[0].split(":")[1]
    assert np.all(np.abs(c.log["command"]) <= top.controller.current_limit + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_controller_replay_of_a_run_is_bit_identical(tmp_path, family):
    from exo_rt.runtime.replay import replay, replay_can_log

    top, c, result = _run(family, 0.5, (), tmp_path / "run")
    assert result.summary["final_state"] == "SHUTDOWN"
    out = replay(tmp_path / "run", "controller")
    assert out["max_abs_command_diff_A"] == 0.0 and out["first_diff_cycle"] is None
    assert out["cycles"] == result.summary["cycles"]
    # the bare CAN log through the family's own decoder: the plant predicts the joints
    bare = replay_can_log(tmp_path / "run" / "can.blf", CONFIGS[family])
    assert bare["cycles"] > 2000
    for j in bare["joints"].values():
        assert j["rms_error_deg"] < 0.05


def _posed(family: str, tmp: Path, pose: tuple[float, float]) -> Path:
    """The family's top config with the leg standing at ``pose`` (MIT: homed there)."""
    configs = ROOT / "configs"
    buses = configs / "buses" / f"exo_leg_{family}.yaml"
    if family == "mit":
        text = buses.read_text()
        for joint, q in zip(("hip", "knee"), pose, strict=True):
            text = text.replace(f"{{joint: {joint}, node: {1 + (joint == 'knee')}, home: 0.0}}",
                                f"{{joint: {joint}, node: {1 + (joint == 'knee')}, home: {q}}}")
        buses = tmp / "buses.yaml"
        buses.write_text(text)
    top = CONFIGS[family].read_text()
    top = top.replace(f"buses: buses/exo_leg_{family}.yaml", f"buses: {buses}")
    top = top.replace("robot: robots/", f"robot: {configs / 'robots'}/")
    top = top.replace("controller: controllers/", f"controller: {configs / 'controllers'}/")
    (tmp / "top.yaml").write_text(top)
    return tmp / "top.yaml"


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_bench_procedures_run_on_the_family(family, tmp_path):
    from exo_rt.hil.bench import Bench
    from exo_rt.hil.fixture import CanFixture
    from exo_rt.hil.procedures import bringup, latency

    top = load_top(_posed(family, tmp_path, (0.3, 0.6)))
    c = ctl.Controller(top, "sim", board=None, start_pose=[0.3, 0.6])
    bench = Bench(top, c.drives, fixture=CanFixture(c.drives), world=c.bus_set.world)
    try:
        r = bringup(bench)
        assert set(r["buses"]) == {b.name for b in top.buses}
        for bus in r["buses"].values():
            assert bus["protocol"] == family and bus["missing_frames"] == 0
            assert bus["states_enabled"] == ["enabled"] * len(bus["nodes"])
            assert 0.2 <= bus["bus_load"] <= 0.8
        if family == "rmdx":
            assert all(v["B3h_comm_timeout_ms"] == 20 for bus in r["buses"].values()
                       for v in bus["watchdog"].values())
        lat = latency(bench, "knee")
        assert lat["current_cycles"] <= 2 and lat["motion_cycles"] <= 5
    finally:
        bench.close()


def test_bus_specs_per_bus():
    two = load_top(ROOT / "configs" / "exo_2leg.yaml").buses
    assert resolve_specs(two, None) == "sim"  # the shipped files name no interface
    assert resolve_specs(two, ["sim-realtime"]) == "sim-realtime"
    assert resolve_specs(two, ["socketcan:can0", "right=pcan:PCAN_USBBUS1@500000"]) == {
        "left": "socketcan:can0", "right": "pcan:PCAN_USBBUS1@500000"}
    assert resolve_specs(two, ["left=socketcan:can0", "right=socketcan:can1"]) == {
        "left": "socketcan:can0", "right": "socketcan:can1"}
    one = load_top(ROOT / "configs" / "exo_leg.yaml").buses
    assert resolve_specs(one, ["socketcan:can0"]) == {"leg": "socketcan:can0"}
    for values, words in ((["middle=socketcan:can0"], "no bus 'middle'"),
                          (["socketcan:can0"], "'left' and 'right' would both open "
                                               "socketcan:can0"),
                          (["left=virtual:a", "right=virtual:a@500000"], "both open virtual:a"),
                          (["left=socketcan:can0"], "bus 'right' has no interface"),
                          (["sim", "left=socketcan:can0"], "cannot be mixed"),
                          (["a:b", "c:d"], "without a bus name"),
                          (["left=socketcan"], "cannot read the bus spec")):
        with pytest.raises(ConfigError, match=words):
            resolve_specs(two, values)


def test_bus_file_interface_and_command_line_override(tmp_path):
    """A bus file that names its interface opens it; ``--bus NAME=SPEC`` overrides one bus;
    ``exo-rt check --buses`` prints what each will open."""
    text = (ROOT / "configs" / "buses" / "exo_2leg.yaml").read_text()
    text = text.replace("  - name: left\n", "  - name: left\n    interface: socketcan\n"
                        "    channel: can0\n    bitrate: 1000000\n")
    text = text.replace("  - name: right\n", "  - name: right\n    interface: kvaser\n"
                        "    channel: 1\n    bitrate: 500000\n    can_options: {fd: false}\n")
    (tmp_path / "b.yaml").write_text(text)
    res = subprocess.run([sys.executable, "-m", "exo_rt", "check",
                          str(ROOT / "configs" / "robots" / "exo_2leg.yaml"), "--buses",
                          str(tmp_path / "b.yaml"), "--rate", "500",
                          "--bus", "left=udp_multicast:239.74.3.1"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert ("opens bus left (cia402, 2 drives): python-can interface=udp_multicast "
            "channel=239.74.3.1\n") in res.stdout
    assert ("opens bus right (cia402, 2 drives): python-can interface=kvaser channel=1 "
            "bitrate=500000, fd=False\n") in res.stdout


def test_each_bus_opens_its_own_spec(tmp_path):
    """HardwareBuses with a spec per bus: the left bus from its bus file (python-can's
    ``virtual`` interface, channel a), the right one from ``--bus right=virtual:b``; a frame
    sent on each reaches only its own channel."""
    import can

    from exo_rt.runtime.buses import HardwareBuses

    text = (ROOT / "configs" / "buses" / "exo_2leg.yaml").read_text()
    text = text.replace("  - name: left\n", "  - name: left\n    interface: virtual\n"
                        "    channel: a\n    can_options: {receive_own_messages: false}\n")
    (tmp_path / "b.yaml").write_text(text)
    top_text = (ROOT / "configs" / "exo_2leg.yaml").read_text()
    top_text = top_text.replace("buses: buses/exo_2leg.yaml", f"buses: {tmp_path / 'b.yaml'}")
    top_text = top_text.replace("robot: robots/", f"robot: {ROOT / 'configs' / 'robots'}/")
    top_text = top_text.replace("controller: controllers/",
                                f"controller: {ROOT / 'configs' / 'controllers'}/")
    (tmp_path / "top.yaml").write_text(top_text)
    top = load_top(tmp_path / "top.yaml")
    specs = resolve_specs(top.buses, ["right=virtual:b"])
    assert specs == {"left": "virtual:a", "right": "virtual:b"}
    hw = HardwareBuses(top, specs)
    listen = {ch: can.Bus(interface="virtual", channel=ch) for ch in "ab"}
    try:
        assert hw.specs == ["virtual:a", "virtual:b"]
        for i, bus in enumerate(hw.buses):
            bus.send(can.Message(arbitration_id=0x200 + i, data=b"\x01", is_extended_id=False))
        got = {ch: [] for ch in "ab"}
        for ch, lst in listen.items():
            while (msg := lst.recv(0.05)) is not None:
                got[ch].append(msg.arbitration_id)
        assert got == {"a": [0x200], "b": [0x201]}
    finally:
        hw.close()
        for lst in listen.values():
            lst.shutdown()
