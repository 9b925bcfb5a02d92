"""The world plant's floor scene (docs/world.md, "The floor scene"): ``exo_2leg`` and its
75 kg wearer on the floor through exo-rt's own motors, flexsplines and friction, held by a
joint PD on the drives' currents (a stand-in for the controller).

Measured (``python tools/world_figures.py --floor``): standing 60 s, the summed vertical
reaction equals the weight to 1.5e-7, the spheres slip 1.9 mm and the pelvis drifts 1.9 mm
(MuJoCo's soft contacts creep, ≈ 0.03 mm/s); 30 % body-weight support takes 30.000 % of it;
seated, the chair carries the whole weight and the hips hold 1.3 A; the drives switched off
in a flexed stance (hip = knee = 0.4 rad), the pelvis drops 3.5 mm and the knees flex 2.2°
in 2 s.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exo_rt.model import load_mechanism
from exo_rt.sim import plants
from exo_rt.sim.world.standing import drives_off, drives_pd, stand_on_drives
from exo_rt.sim.world_plant import R_SUPPORT, W_ROOM, Room, WorldPlant

STANDING = np.array([0.05, 0.05, 0.05, 0.05])  # rad: hip = knee, the feet flat (the ankle fixed)
SITTING = np.array([1.55, 1.55, 1.55, 1.55])  # rad: thighs on the chair, shanks upright


@pytest.fixture(scope="module")
def robot():
    return load_mechanism("configs/robots/exo_2leg.yaml")


def _plant(robot, posture, **room):
    plant = WorldPlant(robot, room=Room(scene="floor", wearer_damping=1.0, **room))
    plant.reset(posture)
    return plant


@pytest.mark.slow
def test_standing_a_minute_on_the_drives(robot):
    """60 s standing, no support: the floor carries the whole weight (1 %), no foot slips
    5 mm, the pelvis drifts < 1 cm."""
    plant = _plant(robot, STANDING)
    assert plant.total_mass == pytest.approx(95.70)  # 50.49 kg robot file + 45.21 upper body
    f = stand_on_drives(plant, STANDING, seconds=60.0)
    assert f.reaction_worst < 0.01
    assert f.slip < 5e-3
    assert f.pelvis_drift < 1e-2


@pytest.mark.slow
def test_body_weight_support_takes_its_share(robot):
    """With 30 % support the reaction falls by 30 % ± 1 %; without it, it is the weight — the
    check tells the two apart."""
    weight = None
    for support in (0.0, 0.3):
        plant = _plant(robot, STANDING, support=support)
        f = stand_on_drives(plant, STANDING, seconds=2.0)
        weight = plant.total_mass * 9.81
        assert f.reaction_mean / weight == pytest.approx(1.0 - support, abs=0.01)
    assert abs(f.reaction_mean / weight - 1.0) > 0.2


def test_the_chair_carries_a_seated_wearer(robot):
    """Seated, the thighs rest on the chair placed under them: the hips hold less than their
    rated current (3.29 A) — on the test stand the hip held the whole leg up."""
    plant = _plant(robot, SITTING)
    top, front = plant.seat
    assert 0.40 <= top <= 0.45  # the default 0.45 m chair, lowered to the thighs
    for _ in range(2000):
        plant.step(drives_pd(plant, SITTING))
    seat = sum(f[2] for g, f in plant.contact_forces().items() if g.endswith("_seat"))
    assert seat > 0.5 * plant.total_mass * 9.81  # the chair carries most of the weight
    assert np.all(np.abs(plant.currents[[0, 2]]) < 3.29)
    np.testing.assert_allclose(plant.joint_positions, SITTING, atol=0.02)


@pytest.mark.parametrize("posture", [STANDING, np.array([0.4, 0.4, 0.4, 0.4])])
def test_drives_off_in_stance_do_not_drop_the_wearer(robot, posture):
    """The drives switched off (SAFE's zero current) with both feet on the floor: in 2 s the
    pelvis drops ≤ 5 cm and no knee flexes by more than 10° — the brakes and the harmonic
    drives' friction hold the rotors."""
    plant = _plant(robot, posture)
    drop, dq = drives_off(plant, posture)
    assert drop <= 0.05
    assert np.all(dq[[1, 3]] <= np.radians(10.0))
    assert plant.stuck.all()


@pytest.mark.parametrize("robot_file", ["exo_2leg_sized.yaml", "exo_2leg_tq.yaml",
                                        "exo_2leg_tq_heavy.yaml", "exo_2leg_tq32.yaml"])
def test_drives_off_half_way_up_from_the_chair(robot_file):
    """The sized exoskeleton (hip and knee brakes — its robot file's SAFE reactions) rising
    from the chair with half the weight on the harness, the drives switched off half-way up
    (pelvis 0.28 m above the seated height): in 2 s the pelvis drops ≤ 5 cm
    and no knee flexes by more than 10° (measured: the pelvis 2 mm up, the knees 0.3°
    extended); and the exoskeleton with torque motors (its brakes 2.4 N·m through 50:1:
    0.9 mm up, 0.03° extended), the heavy wearer on them through CSG-32-50 (the same
    brakes: 2.1 mm up, 0.05° extended) and the default wearer through CSG-32-50 (0.9 mm up,
    0.05° extended)."""
    sized = load_mechanism(f"configs/robots/{robot_file}")
    assert [tr.safe_reaction for tr in sized.transmissions] == ["brake", "brake"] * 2
    plant = WorldPlant(sized, room=Room(scene="floor", wearer_damping=1.0, support=0.5))
    plant.reset(SITTING)
    stand, z_seated = np.full(4, 0.05), plant.base[1]
    for k in range(2850):  # 0.5 s seated, then half (2.35 s) of a 4.69 s minimum-jerk rise
        s = min(max((k * plant.dt - 0.5) / 4.6875, 0.0), 1.0)
        s = s**3 * (10.0 - 15.0 * s + 6.0 * s**2)
        plant.step(drives_pd(plant, SITTING + (stand - SITTING) * s, kp=3000.0, kd=60.0))
    assert plant.base[1] - z_seated > 0.2  # half-way up, off the chair
    drop, dq = drives_off(plant)
    assert drop <= 0.05
    assert np.all(dq[[1, 3]] <= np.radians(10.0))


def test_the_top_configs_room_reaches_the_plant(tmp_path, robot):
    """Every ``simulation:`` room key of a top config reaches the plant ``plants.create``
    makes, as the simulated bus, replay and the warm-up make it."""
    from exo_rt.runtime.config import load_top

    cfg = Path(__file__).resolve().parents[1] / "configs"
    top = tmp_path / "top.yaml"
    top.write_text(f"robot: {cfg / 'robots' / 'exo_2leg.yaml'}\n"
                   f"buses: {cfg / 'buses' / 'exo_2leg.yaml'}\n"
                   f"controller: {cfg / 'controllers' / 'computed_torque.yaml'}\n"
                   "simulation: {plant: world, scene: floor, seat_height: 0.42, support: 0.2,\n"
                   "             stabiliser_stiffness: 1500, stabiliser_damping: 150,\n"
                   "             wearer_damping: 2.0}\n")
    sim = load_top(top).simulation
    plant = plants.create(sim.plant, robot, room=sim.plant_options())
    assert plant.room == Room(scene="floor", seat_height=0.42, stabiliser=(1500.0, 150.0),
                              support=0.2, wearer_damping=2.0)
    assert plant.seat[0] <= 0.42 and plant.model[W_ROOM, R_SUPPORT] == pytest.approx(
        0.2 * plant.total_mass * 9.81)  # the harness's force, N


def test_sprung_ankles_move_the_foot_not_the_mass(robot):
    """``ankle_stiffness``: each foot on a sprung hinge — the wearer's foot taken out of the
    shank where the loader lumped it, so the world's mass is the fixed-ankle world's to
    rounding; standing, the floor still carries the whole weight (1e-4) and the ankles bend
    by the little their springs allow (measured 0.006 rad at 300 N·m/rad)."""
    fixed = _plant(robot, STANDING)
    plant = _plant(robot, STANDING, ankle_stiffness=300.0, ankle_damping=5.0)
    assert len(plant.ankles) == 2 and len(fixed.ankles) == 0
    assert plant.total_mass == pytest.approx(fixed.total_mass, rel=1e-12)
    f = stand_on_drives(plant, STANDING, seconds=2.0)
    assert f.reaction_worst < 1e-4 and f.slip < 1e-3
    assert np.all(np.abs(plant.ankles) < 0.02) and np.any(plant.ankles != 0.0)


def test_on_sprung_ankles_a_foot_drawn_back_is_set_down_flat(robot):
    """A seated posture with the feet drawn back under the chair (knee 0.3 rad more flexed
    than the hip: the shanks lean forward 17°): on sprung ankles each foot is put flat on the
    floor, its ankle dorsiflexed by the shank's lean (−0.3 rad) — heel and toe on the floor
    together, carrying the feet's share from the first step. Square to the shank (the ankle
    fixed at 0), the toe alone would touch and the pelvis sit 5 cm high, the feet in the air.
    Postures with upright shanks keep their ankles at 0 (every walk and shipped posture)."""
    from exo_rt.sim.world.room import _geom_points, place

    drawn_back = np.array([1.60, 1.90, 1.60, 1.90])
    plant = _plant(robot, drawn_back, ankle_stiffness=60.0, ankle_damping=20.0,
                   ankle_rest=-0.3)
    np.testing.assert_allclose(plant.ankles, -0.3, atol=0.01)
    for _ in range(500):
        plant.step(drives_pd(plant, drawn_back))
    d = plant.mj_data
    soles = np.concatenate([_geom_points(plant.world, d, "_heel")[:, 2],
                            _geom_points(plant.world, d, "_toe")[:, 2]])
    assert np.ptp(soles) < 2e-3, soles  # heels and toes level: the feet flat
    feet = sum(f[2] for g, f in plant.contact_forces().items() if g.endswith(("_heel", "_toe")))
    assert feet > 0.1 * plant.total_mass * 9.81, feet  # on the floor, not hovering over it
    upright = _plant(robot, SITTING, ankle_stiffness=60.0, ankle_damping=20.0,
                     ankle_rest=-0.3)
    upright.reset(SITTING, equilibrium=False)  # the posture itself, not its settled twist
    assert np.all(place(upright.world, upright.state[0, :upright.mech.nq], 0.45)[4] == 0.0)


def test_room_keys_need_the_world_plant(robot):
    """A room asked of a plant model without one is refused, not ignored."""
    with pytest.raises(ValueError, match="has no room: simulation keys scene"):
        plants.create("harmonic_drive", robot, room={"scene": "floor"})
    with pytest.raises(ValueError, match="no scene 'moon'"):
        plants.create("world", robot, room={"scene": "moon"})


@pytest.mark.slow
def test_the_drives_command_takes_the_room():
    """``exo-rt drives --room`` (set by exo-rt run for the real-time simulation): a JSON
    object of the simulation section's room keys that the plant model can take, else one
    clear message and exit 2 — never a traceback."""
    for plant, room, said in (("world", "[1, 2]", "is not a JSON object"),
                              ("world", '{"sceen": "floor"}', "did you mean 'scene'"),
                              ("world", '{"scene": "moon"}', "no scene 'moon'"),
                              ("harmonic_drive", '{"scene": "floor"}', "has no room")):
        bad = subprocess.run([sys.executable, "-m", "exo_rt", "drives", "--config",
                              "configs/robots/exo_2leg.yaml", "--buses",
                              "configs/buses/exo_2leg.yaml", "--plant", plant, "--room", room],
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2, bad.stderr
        assert said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_room_keys_without_a_room_are_refused_at_load(tmp_path):
    """A top config whose simulation section places a plant without a room in one is refused
    where it says so (file:line), before anything starts."""
    from exo_rt.errors import ConfigError
    from exo_rt.runtime.config import load_top

    cfg = Path(__file__).resolve().parents[1] / "configs"
    top = tmp_path / "top.yaml"
    top.write_text(f"robot: {cfg / 'robots' / 'exo_2leg.yaml'}\n"
                   f"buses: {cfg / 'buses' / 'exo_2leg.yaml'}\n"
                   f"controller: {cfg / 'controllers' / 'computed_torque.yaml'}\n"
                   "simulation: {plant: harmonic_drive, scene: floor, support: 0.3}\n")
    with pytest.raises(ConfigError, match="simulation keys scene, support place a plant") as e:
        load_top(top)
    assert f"{top}:4" in str(e.value) and "plant: world" in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize(("top_file", "kd"), [("exo_2leg_world.yaml", 60.0),
                                               ("exo_2leg_world_tq.yaml", 20.0),
                                               ("exo_2leg_world_tq_heavy.yaml", 20.0),
                                               ("exo_2leg_world_tq32.yaml", 20.0)])
def test_drives_off_in_mid_stance_of_a_walk(top_file, kd):
    """The sized exoskeleton walking the flat-foot gait at 0.4 m/s on the room of
    configs/exo_2leg_world.yaml (half the weight on the harness, the ankles in orthoses), held
    by a PD with the gait's velocity: the drives switched off as the left leg carries the
    wearer alone in mid-stance (its SAFE reactions: hip and knee brakes) — in 2 s the pelvis
    drops ≤ 5 cm and no knee flexes by more than 10° (measured: 0.4 mm; the knees 0.05° and
    0.67° extended; with the knee's phases shorted instead of braked, 22 mm and 13.1°); and
    the exoskeleton with torque motors (its brakes 2.4 N·m through 50:1: the pelvis 0.03 mm
    up; the left knee 0.11° flexed, the right 0.11° extended), the heavy wearer on them
    through CSG-32-50 (the same brakes; the same walk, 0.79 m strides: 0.47 mm up; 0.17° flexed,
    0.21° extended) and the default wearer through CSG-32-50 (0.21 mm up; 0.11° flexed, 0.21°
    extended). The PD's damping ``kd`` is each exoskeleton's own world controller's order: 60
    N·m·s/rad on the sized drives' heavy rotors; on the torque motors' (0.39 kg·m² through
    50:1) 60 rings — the stance foot chatters on the floor at about 50 Hz, 0 to 1400 N every
    20 ms, so "the left leg alone in mid-stance" held at one sample by chance — and 20 does
    not (computed_torque_world_tq.yaml takes 20 for the same reason)."""
    from exo_rt.control import flat_foot
    from exo_rt.control.trajectory import gait
    from exo_rt.runtime.config import load_top

    top = load_top(Path(__file__).resolve().parents[1] / "configs" / top_file)
    sized = top.robot
    plant = WorldPlant(sized, room=Room.from_options(top.simulation.plant_options()))
    stand = np.full(4, 0.05)
    plant.reset(stand)
    walk = flat_foot.walk(0.4, 1.75)
    rows = flat_foot.gait_rows(sized, ["hip", "knee"] * 2, walk.stride_length)
    offset = np.array([0.0, 0.0, 0.5, 0.5])  # the right leg half a stride behind
    q, qd, qdd = np.zeros(1), np.zeros(1), np.zeros(1)
    target = 1.0 + 0.5 * flat_foot.STANCE  # the left leg's mid-stance in the second stride
    for k in range(int(round(target * walk.period / plant.dt))):
        phase = k * plant.dt / walk.period
        x = min(phase / 0.5, 1.0)  # the opening step: half a stride's minimum-jerk blend
        w, dw = x**3 * (10 - 15 * x + 6 * x * x), 30 * x * x * (1 - x) ** 2 / 0.5
        ref, vel = np.zeros(4), np.zeros(4)
        for j in range(4):
            gait((phase + offset[j]) % 1.0, walk.period, rows[j:j + 1], q, qd, qdd)
            ref[j] = (1 - w) * stand[j] + w * q[0]
            vel[j] = w * qd[0] + dw / walk.period * (q[0] - stand[j])
        plant.step(drives_pd(plant, ref, kp=3000.0, kd=kd, velocity=vel))
    forces = plant.contact_forces()
    left = sum(f[2] for name, f in forces.items() if name.startswith("left_shank"))
    right = sum(f[2] for name, f in forces.items() if name.startswith("right_shank"))
    on_left = left > 0.5 * plant.total_mass * 9.81 * 0.5 and right == 0.0  # on the left alone
    assert on_left, (left, right)
    drop, dq = drives_off(plant)
    assert drop <= 0.05
    assert np.all(dq[[1, 3]] <= np.radians(10.0))


def test_mujocos_terms_kept_within_a_step_are_the_ones_computed_afresh(robot):
    """A sub-step's first stage takes M and h from its contacts' mj_forward (and the stick–slip
    decision's repeated stages from the stage before) rather than computing them again: the
    accelerations are bit for bit those of a fresh computation, a velocity changed in between
    (a later stage's) is seen, and nothing is kept from one step to the next (between
    steps MuJoCo's data is anyone's)."""
    from numba import njit

    from exo_rt.sim.plant import X_KIN
    from exo_rt.sim.world_plant import _contacts as contacts_
    from exo_rt.sim.world_plant import _world_accelerations as accelerations_

    @njit  # (the kernels have no Python entry: called here from compiled code, as the step does)
    def _contacts(model, data, tr, state, q, v, scratch):
        contacts_(model, data, tr, state, q, v, scratch)

    @njit
    def _world_accelerations(model, data, tr, state, q, v, scratch, acc):
        accelerations_(model, data, tr, state, q, v, scratch, acc)

    plant = _plant(robot, STANDING)
    rng = np.random.default_rng(7)
    for k in range(300):  # a leg swinging under load, rotors sliding and sticking
        plant.step(drives_pd(plant, STANDING + 0.2 * np.sin(k * 0.02)) + rng.normal(0, 3, 4))
    model, data, tr, state, _cmd, _dt, _sub, scratch = plant.args
    n = plant.q.size
    kin = 2 * n + X_KIN
    assert scratch[kin, 0] == 0.0  # cleared at the step's end
    q, v = plant.q, plant.v
    v[plant._rotors[0]] += 1e-3  # a rotor sliding: its velocity terms count
    acc_kept, acc_fresh = np.zeros(n), np.zeros(n)
    _contacts(model, data, tr, state, q, v, scratch)
    assert scratch[kin, 0] == 1.0
    _world_accelerations(model, data, tr, state, q, v, scratch, acc_kept)
    m_kept, h_kept = scratch[:n].copy(), scratch[2 * n].copy()
    scratch[kin, 0] = 0.0
    _world_accelerations(model, data, tr, state, q, v, scratch, acc_fresh)
    assert np.array_equal(acc_kept, acc_fresh) and np.array_equal(m_kept, scratch[:n])
    assert np.array_equal(h_kept, scratch[2 * n])
    h_before = h_kept
    v[0] += 0.5  # the hip faster (a later stage's velocities): h is computed at it
    _world_accelerations(model, data, tr, state, q, v, scratch, acc_kept)
    h_kept = scratch[2 * n].copy()
    scratch[kin, 0] = 0.0
    _world_accelerations(model, data, tr, state, q, v, scratch, acc_fresh)
    assert np.array_equal(acc_kept, acc_fresh) and np.array_equal(h_kept, scratch[2 * n])
    assert not np.array_equal(h_kept, h_before)
