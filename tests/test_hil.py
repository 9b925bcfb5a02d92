"""Bench procedures on the simulated bus, against the plant's known parameters: bring-up and its
clear failures, latency, step/chirp bandwidth, friction, stiffness and inertia identification,
the YAML snippets, abort at any moment, and the command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import yaml
from hil_fixtures import FRICTION_KEYS, ROOT, sim_bench, variant_top

from exo_rt.bus import cia402 as c
from exo_rt.dynamics import Dynamics
from exo_rt.dynamics.couplings import released
from exo_rt.errors import BusError
from exo_rt.hil import identify, response
from exo_rt.hil.bench import second_order_bandwidth
from exo_rt.hil.procedures import bringup, latency, run_procedure
from exo_rt.model import load_mechanism
from exo_rt.model.robot_yaml import SEGMENT_KEYS, load_robot_yaml
from exo_rt.sim.plant import ST_LOCK

JOINTS = ("hip", "knee")


def _drive(robot, joint):
    return next(tr.drive for tr in robot.transmissions if tr.joint == joint)


def test_bringup_reports_nodes_heartbeats_and_load():
    r = bringup(sim_bench())
    (leg,) = r["buses"].values()
    assert leg["states_enabled"] == [c.OPERATION_ENABLED] * 2
    assert all(abs(p - 100.0) < 1.0 for p in leg["heartbeat_ms"].values())
    assert 0.45 <= leg["bus_load"] <= 0.6  # 52 % computed from the frame sizes
    assert leg["missing_frames"] == 0


def test_bringup_fails_clearly():
    b = sim_bench()  # a missing node
    b.world.endpoints["leg"].drives.pop()
    b.drives[0].sdo_timeout = 0.05
    with pytest.raises(BusError, match="drive 2 on bus 'leg' does not answer SDO"):
        bringup(b)
    b = sim_bench()  # another product on node 1 (bring-up writes the mapping; it checks 1018h)
    b.world.endpoints["leg"].drives[0][0].local.data_store[0x1018][2] = bytes(4)
    with pytest.raises(BusError, match="drive 1 on bus 'leg' reports product code 0x00000000 "
                                       r"\(1018h/2.*expects 0x00000402"):
        bringup(b)
    b = sim_bench()  # a faulted drive
    b.world.inject("fault", "leg", 2)
    with pytest.raises(BusError, match="drive 2 is in FAULT.*--reset-faults"):
        bringup(b)


def test_latency_is_two_cycles_and_the_joints_move():
    b = sim_bench()
    for joint in JOINTS:
        r = latency(b, joint)
        # the RPDO is applied at its SYNC, whose TPDO was sampled at that instant: the
        # current shows in the next SYNC's sample
        assert r["current_cycles"] == 2
        assert r["motion_cycles"] is not None and r["motion_cycles"] <= 4


@pytest.mark.slow
def test_step_and_chirp_match_the_known_bandwidth(tmp_path):
    """Drives without friction (the linear plant): the computed-torque PD makes each joint the
    design's second-order system, whose bandwidth the plant's inertia fixes."""
    top = variant_top(tmp_path, {k: 0.0 for k in FRICTION_KEYS})
    b = sim_bench(top)
    # the premise, independently: the plant's joint inertia (rotor rigidly geared, from the
    # released plant's mass matrix) equals the model's M_jj the gains were designed on
    plant = released(b.robot)
    q = np.zeros(plant.nq)
    q[:2] = b.home()
    for tr in b.robot.transmissions:
        q[plant.joint_names.index(tr.rotor_joint)] = tr.multiplier * q[
            b.robot.joint_names.index(tr.joint)]
    m = Dynamics(plant).mass_matrix(q)
    model = b.inertia(b.home())
    for j, tr in enumerate(b.robot.transmissions):
        r, k = plant.joint_names.index(tr.rotor_joint), tr.multiplier
        assert m[j, j] + 2 * k * m[j, r] + k * k * m[r, r] == pytest.approx(model[j], rel=1e-9)
    known = second_order_bandwidth(2 * math.pi * 3.0, 0.7) / (2 * math.pi)
    for joint in JOINTS:
        s = response.step(b, joint)
        assert s["step"]["bandwidth_hz"] == pytest.approx(known, rel=0.10)
        assert s["step"]["overshoot"] == pytest.approx(0.046, abs=0.015)  # ζ = 0.7
        ch = response.chirp(b, joint)
        assert ch["chirp"]["bandwidth_hz"] == pytest.approx(known, rel=0.10)


@pytest.mark.slow
def test_chirp_on_the_default_plant():
    """With the wave generator's friction compensated from its configured values (the mesh
    friction on the torque the flexspline carries, the rotor's inertial share left out), both
    joints stay within 5 % of the design bandwidth on the shipped leg."""
    b = sim_bench()
    known = second_order_bandwidth(2 * math.pi * 3.0, 0.7) / (2 * math.pi)
    for joint in JOINTS:
        assert response.chirp(b, joint)["chirp"]["bandwidth_hz"] == pytest.approx(known,
                                                                                rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("joint", JOINTS)
def test_friction_is_recovered(joint):
    b = sim_bench()
    r = identify.friction(b, joint)
    d = _drive(b.robot, joint)
    for key in ("coulomb", "static", "viscous", "load_friction"):
        assert r["fit"][key] == pytest.approx(getattr(d, key), rel=0.10), key
    # ω_s = 0.5 rad/s at the wave generator is 5 mrad/s at the joint: sweeps that slow
    # stick–slip under position control, so the band is not observable and is not faked
    assert r["fit"]["stribeck_velocity"] is None
    assert len({v for v in r["data"]["speed"] if v > 0}) >= 3  # the steady ones
    assert set(r["unsteady_speeds"]) <= {0.016, 0.03, 0.06}  # stick–slip: listed, not fitted
    snippet = yaml.safe_load(r["snippet"])
    (entry,) = snippet["transmissions"]
    assert entry["joint"] == joint and "stribeck_velocity" not in entry["drive"]


@pytest.mark.slow
def test_stiffness_is_recovered():
    b = sim_bench()
    for joint in JOINTS:
        r = identify.stiffness(b, joint)
        d = _drive(b.robot, joint)
        p = r["fit"]
        assert p["k1"] == pytest.approx(d.k1, rel=0.10)
        assert p["k2"] == pytest.approx(d.k2, rel=0.10)
        assert p["hysteresis"] == pytest.approx(d.hysteresis, rel=0.10)
        if joint == "knee":  # the hip's T2 = 48 N·m is beyond 75 % of its current limit
            assert p["k3"] == pytest.approx(d.k3, rel=0.10)
        else:
            assert p["k3"] is None and p["torque_range_Nm"][1] < d.t2
        assert b.world.plant.state[ST_LOCK].sum() == 0.0  # the fixture let go


def test_stiffness_needs_the_fixture_sensor(tmp_path):
    from exo_rt.hil.fixture import OperatorFixture

    b = sim_bench()
    b.fixture = OperatorFixture(ask=lambda prompt: "")  # clamped by hand, no load cell
    r = run_procedure("stiffness", b, tmp_path, "knee")
    assert r["aborted"] and "torque sensor" in r["reason"]


@pytest.mark.slow
def test_inertia_is_recovered():
    """A wearer heavier than the model's de Leva segments (thigh +20 %, shank +15 % with its
    COM 5 % lower): masses and COM fractions back within 10 %."""
    top_path = ROOT / "configs" / "exo_leg.yaml"
    truth = {"thigh": {"mass": 12.7, "com_fraction": 0.4095},
             "shank": {"mass": 3.75, "com_fraction": 0.47}}
    robot_path = ROOT / "configs" / "robots" / "exo_leg.yaml"
    b = sim_bench(top_path, plant=load_robot_yaml(robot_path, segments=truth))
    r = identify.inertia(b)
    for seg, values in truth.items():
        for key, value in values.items():
            assert r["segments"][seg][key] == pytest.approx(value, rel=0.10), (seg, key)
    f = r["fit"]
    assert f["gravity_rms_Nm"] < 0.2 * f["gravity_rms_before_Nm"]
    snippet = yaml.safe_load(r["snippet"])
    for entry in snippet["wearer"]["segments"]:
        assert set(entry) <= set(SEGMENT_KEYS)


@pytest.mark.slow
def test_snippets_drop_into_the_robot_file(tmp_path):
    """The stiffness snippet's values, written into the robot file, load and read back."""
    b = sim_bench()
    r = run_procedure("stiffness", b, tmp_path / "run", "knee")
    snippet = yaml.safe_load((tmp_path / "run" / "bench-stiffness.yaml").read_text())
    (entry,) = snippet["transmissions"]
    top = variant_top(tmp_path / "robot", {k: v for k, v in entry["drive"].items()
                                           if k in ("hysteresis",)})
    robot = load_mechanism(top.parent / "exo_leg.yaml")
    assert _drive(robot, "knee").hysteresis == pytest.approx(r["joints"]["knee"]["fit"][
        "hysteresis"], rel=1e-3)
    assert (tmp_path / "run" / "bench-stiffness.png").stat().st_size > 10_000


@pytest.mark.parametrize("name,joint,at", [("latency", "hip", 30), ("step", "knee", 900),
                                           ("friction", "hip", 2500),
                                           ("stiffness", "knee", 400)])
def test_abort_leaves_the_drives_disabled_inside_the_limits(tmp_path, name, joint, at):
    b = sim_bench()
    cycle = b.cycle

    def abort_key_at(currents, **kw):
        cycle(currents, **kw)
        if b.cycles == at:
            b.abort.pressed.set()  # the operator's abort key

    b.cycle = abort_key_at
    report = run_procedure(name, b, tmp_path / "r", joint)
    assert report["aborted"] and report["reason"] == "operator abort"
    for d in b.drives:
        d.cycle(np.zeros(d.n))
        assert all(c.state_of(int(sw)) == c.SWITCH_ON_DISABLED for sw in d.statusword)
    plant = b.world.plant
    assert plant.state[ST_LOCK].sum() == 0.0
    q = plant.joint_positions
    assert np.all(q >= b.robot.lower) and np.all(q <= b.robot.upper)
    saved = json.loads((tmp_path / "r" / f"bench-{name}.json").read_text())
    assert saved["aborted"] and not (tmp_path / "r" / f"bench-{name}.yaml").exists()


@pytest.mark.slow
def test_bench_command(tmp_path):
    res = subprocess.run([sys.executable, "-m", "exo_rt", "bench-test", "stiffness", "--joint",
                          "knee", "--out", str(tmp_path / "b")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "OUTPUT LOCKED" in res.stdout and "snippet file:" in res.stdout
    for suffix in ("json", "yaml", "png"):
        assert (tmp_path / "b" / f"bench-stiffness.{suffix}").exists()
    res = subprocess.run([sys.executable, "-m", "exo_rt", "bench-test", "step", "--joint",
                          "ankle", "--out", str(tmp_path / "c")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 2 and "no joint 'ankle'" in res.stderr
    assert "Traceback" not in res.stderr


def test_friction_fit_recovers_a_stribeck_band_inside_the_sweeps():
    """The fit itself, on the friction law's own numbers: where steady sweeps do reach into the
    Stribeck band (a drive that does not stick–slip there) ω_s comes back; where they do not,
    it is reported None rather than guessed."""
    from exo_rt.hil.fit import friction_fit, friction_model

    true = {"coulomb": 0.03, "static": 0.08, "viscous": 1.5e-4, "stribeck_velocity": 3.0,
            "load_friction": 0.6}
    rng = np.random.default_rng(1)
    speed = np.repeat([0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32], 12)
    load = rng.uniform(0.0, 30.0, len(speed))
    half = friction_model(speed, load, true, 100.0) + rng.normal(0.0, 0.02, len(speed))
    fit = friction_fit(speed, half, load, 100.0)
    for key, value in true.items():
        assert fit[key] == pytest.approx(value, rel=0.05), key
    fast = speed >= 0.08
    fit = friction_fit(np.r_[0.0, speed[fast]], np.r_[half[0], half[fast]],
                       np.r_[load[0], load[fast]], 100.0)
    assert fit["stribeck_velocity"] is None
    assert fit["coulomb"] == pytest.approx(0.03, rel=0.05)


def zero_current_drift(bench, joint, *, cycles: int = 100) -> dict:
    """A procedure from outside the package: the joint's drift (rad) over ``cycles`` at zero
    current, the other joints at zero current too."""
    from exo_rt.hil.bench import BenchAbort

    j = bench.robot.joint_names.index(joint)
    bench.start()
    q0 = float(bench.q[j])
    for _ in range(cycles):
        bench.cycle(np.zeros(bench.n))
    if not np.isfinite(bench.q[j]):
        raise BenchAbort("no position")
    return {"drift_rad": float(bench.q[j]) - q0, "cycles": cycles}


def test_a_procedure_defined_here_runs_through_the_registry(tmp_path):
    """Registered through the public registry, it runs like a built-in: the checklist names
    what moves, run_procedure runs it per joint, writes its report, and refuses options (it
    declares none in the bench options schema)."""
    from exo_rt.errors import ConfigError
    from exo_rt.hil import registry
    from exo_rt.hil.procedures import checklist

    registry.procedure("drift", per_joint=True, moves="no joint driven (zero current)")(
        zero_current_drift)
    try:
        assert "drift" in registry.names()
        b = sim_bench()
        assert "no joint driven (zero current)" in checklist("drift", b.top, "knee")[0]
        r = run_procedure("drift", b, tmp_path, "knee")
        assert not r.get("aborted") and r["joints"]["knee"]["cycles"] == 100
        # the harmonic drive holds the knee at zero current (docs/safety.md): under 0.01°
        assert abs(r["joints"]["knee"]["drift_rad"]) < math.radians(0.01)
        assert json.loads((tmp_path / "bench-drift.json").read_text())["procedure"] == "drift"
        with pytest.raises(ConfigError, match="takes no options"):
            run_procedure("drift", b, tmp_path, "knee", cycles=5)
    finally:
        registry.unregister("drift")
    assert "drift" not in registry.names()


def test_procedure_names_load_only_for_bench_test():
    """The procedure names (bench-test's choices) are looked up when bench-test parses, not
    when the parser is built for another command: `exo-rt run` does not import them (~0.3 s
    of every start). A name that is none of them is one clear line listing them."""
    probe = ("import sys; from exo_rt.cli import build_parser; "
             "build_parser().parse_args(['run', '--duration', '1']); "
             "print('exo_rt.hil.procedures' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr
    res = subprocess.run([sys.executable, "-m", "exo_rt", "bench-test", "nope"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2 and "invalid choice: 'nope'" in res.stderr
    assert "'stiffness'" in res.stderr and "Traceback" not in res.stderr
