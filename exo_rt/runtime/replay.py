"""Replay a recorded run against the simulated bus.

- *plant*: the recorded motor-current commands drive the plant (the top config's plant model,
  by default compliant harmonic drives and motors): how well does the model predict the
  recorded measurements?
- *controller*: the recorded measurements feed the current controller: did its commands
  change? (Bit-identical for an unchanged controller; first difference and size otherwise.)
- *closed-loop*: the session's scenario (config, start pose, duration, injections) runs again on
  the simulated exoskeleton and is compared with the recording.

Each writes ``replay-<mode>.json`` in the run folder, and ``replay-<mode>.mcap``: the replay's
records with the run's 3D scene (:mod:`exo_rt.record.replay_mcap`), to watch beside run.mcap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.bus.drives import ENABLE_CYCLES
from exo_rt.bus.flags import F_MISSING, F_NOT_ENABLED
from exo_rt.bus.host import HostDrives
from exo_rt.bus.scale import held, permille_current
from exo_rt.control import estimate
from exo_rt.errors import ConfigError, LogError, Where
from exo_rt.model.mechanism import Mechanism
from exo_rt.record import events as recorded_events
from exo_rt.record import integrity, replay_mcap, runfolder
from exo_rt.runtime import snapshot
from exo_rt.runtime.config import load_top
from exo_rt.runtime.controller import Controller, Injection
from exo_rt.runtime.rig import Board, Rig
from exo_rt.sim import plants
from exo_rt.sim.plants import ST_ON, T_JOINT, T_K
from firmware_bridge import fastdecode as fd

MODES = ("plant", "controller", "closed-loop")
SYNC = 0x080  # the cycle's tick on every family's bus (CiA 402's SYNC)


@dataclass
class Run:
    """A run folder opened for replay: its records (checked whole: :mod:`exo_rt.record.
    integrity`), their metadata, the top config the replay loads (the run's snapshot, or
    ``--config``), and the notes the user must see (a run that did not finish, a run without
    a snapshot, a config that differs from the recorded one)."""

    path: Path  # the run folder
    records: np.ndarray
    meta: dict
    config: Path
    notes: list[str] = field(default_factory=list)
    finished: bool = True
    status_summary: dict | None = None  # summary.json (a finished run's)


def _config(run_dir: Path, meta: dict, path: Path, config, allow: bool,
            controller) -> tuple[Path, list[str]]:
    """The top config to replay with, and notes: the run's snapshot (its copies checked
    against their recorded SHA-256), else — a run recorded before exo-rt kept one — the
    config the log names, as it is now, with a warning. A ``config`` that differs from the
    recorded one is refused unless ``allow`` (then each difference is a note)."""
    notes: list[str] = []
    doc = snapshot.manifest(run_dir)
    recorded_files = None
    if doc is not None:
        snapshot.verify(run_dir, doc)
        recorded = run_dir / doc["top"]
        recorded_files = snapshot.recorded_files(run_dir, doc)
        from exo_rt.bus.eds import DEFAULT_EDS

        for f in doc.get("files", ()):  # named by no file: today's is used
            if f["kind"] == "eds-default" and f["sha256"] != snapshot.sha_of(DEFAULT_EDS):
                notes.append(f"{run_dir}: the package's default EDS ({DEFAULT_EDS.name}, for "
                             "drives whose bus file names none) changed since the run; the "
                             "replay uses today's (the run's is in its configs/default-eds/)")
    else:
        if (run_dir / "configs").is_dir() and config is None:  # the copy is there, unverified
            raise LogError(f"{snapshot.MANIFEST} is missing, but the run's own copy of its "
                           "configs (configs/, config.yaml) is there: without the manifest "
                           "the copy cannot be checked, and today's files are not the run's",
                           Where(str(run_dir / snapshot.MANIFEST)),
                           "restore it from a copy of the run folder, or replay with the copy "
                           f"as it is: --config {run_dir / 'config.yaml'} "
                           "--allow-config-change")
        recorded = Path(meta.get("config", ""))
        if not recorded.is_file() and config is None:
            raise LogError(f"the run's config {recorded} is gone (the run keeps no copy of "
                           "it: recorded before exo-rt kept a config snapshot)",
                           Where(str(path)), "replay where the run was recorded, or give "
                           "--config FILE --allow-config-change")
        if recorded.is_file():
            changed = meta.get("config_sha256") not in (None, snapshot.sha_of(recorded))
            notes.append(f"{run_dir}: no config snapshot (recorded before exo-rt kept one): "
                         f"replaying with the config files as they are now ({recorded}"
                         + ("; the top config changed since the run)" if changed else ")"))
    if config is None:
        return recorded, notes
    config = Path(config)
    given = snapshot.given_files(config, controller)
    if recorded_files is None and recorded.is_file():
        recorded_files = snapshot.given_files(recorded, controller)
    if recorded_files is None:
        changes = [f"the recorded config {recorded} is gone: nothing to compare with"]
    else:
        if controller is not None:  # --controller changes the controller on purpose
            recorded_files = [f for f in recorded_files if f[0] != "controller"]
            given = [f for f in given if f[0] != "controller"]
        changes = snapshot.differences(recorded_files, given)
    if changes and not allow:
        raise ConfigError(f"--config {config} differs from the config the run recorded in "
                          f"{len(changes)} file(s), e.g. {changes[0]}", Where(str(run_dir)),
                          "replay without --config (the run's own copy), or add "
                          "--allow-config-change to replay with it")
    notes += [f"{run_dir}: replaying with --config {config}, not the recorded config: {c}"
              for c in changes]
    return config, notes


def open_run(run_dir: Path, config: str | Path | None = None, allow_config_change: bool = False,
             controller: str | Path | None = None) -> Run:
    """Open a run folder for replay: its records (LogError when damaged), the config to
    replay with and the notes to show (see :class:`Run`)."""
    run_dir = Path(run_dir)
    records, meta, path = integrity.read_records(run_dir)
    status = integrity.check(records, meta, path, run_dir)
    if len(records) < 2:
        raise LogError("the cycle log holds fewer than 2 cycles", Where(str(path)),
                       "record a longer run")
    if "q_initial" not in meta:
        raise LogError("the log's header lacks q_initial (the run stopped before READY)",
                       Where(str(path)), "replay a run that reached READY")
    cfg, notes = _config(run_dir, meta, path, config, allow_config_change, controller)
    return Run(run_dir, records, meta, cfg, status.notes + notes, status.finished,
               status.summary)


def load_run(run_dir: Path):
    """(records, meta, top config) of a run folder: its cycle log, or else its run.mcap (the
    same records, e.g. a run shared as MCAP alone), checked whole, and the config it recorded
    (:func:`open_run`)."""
    run = open_run(run_dir)
    return run.records, run.meta, run.config


def _errors(sim: np.ndarray, rec: np.ndarray, names) -> tuple[dict, int | None]:
    """Per joint RMS and largest difference (deg) of ``sim`` from ``rec``. A recorded
    measurement that is not finite (a sensor's NaN the controller faulted on) has nothing to
    compare with and is left out; a simulated value that is not finite against a finite
    measurement is an infinite difference (never 0)."""
    err = np.degrees(sim - rec)
    measured = np.isfinite(rec)
    err = np.where(measured & ~np.isfinite(err), np.inf, err)
    joints = {}
    for j, n in enumerate(names):
        e = err[measured[:, j], j]
        joints[n] = {"rms_error_deg": float(np.sqrt(np.mean(e ** 2))) if len(e) else 0.0,
                     "max_error_deg": float(np.max(np.abs(e))) if len(e) else 0.0}
    over = np.flatnonzero(np.any(measured & (np.abs(err) > 0.1), axis=1))  # diverging (> 0.1°)
    return joints, (int(over[0]) if len(over) else None)


LEAD_SYNCS = 2  # SYNC periods before cycle 0's command acts: READY's first SYNC, cycle 0's


def _powered_at(plant, meta: dict) -> np.ndarray | None:
    """The period of the simulation's start in which each of ``plant``'s transmissions had
    its power stage first on (−1: never; the recording's ``sim_start``), or None where the
    recording does not say."""
    start = meta.get("sim_start")
    if not isinstance(start, dict) or not isinstance(start.get("powered_at"), dict):
        return None
    names = plant.robot.joint_names
    at = start["powered_at"]
    try:
        return np.array([int(at[names[int(j)]]) for j in plant.transmissions[:, T_JOINT]])
    except (KeyError, TypeError, ValueError):
        return None


def _start_plant(plant, meta: dict, powered_flags: np.ndarray, rate_hz: float) -> None:
    """Put ``plant`` where the recording's leg was when cycle 0's command began to act.

    On the lockstep simulated bus (``bus: sim``) that state is known exactly: the simulation
    was reset to the run's start pose (``--start-pose``, else every joint at 0) in static
    equilibrium, stepped at zero current through the drives' bring-up, each power stage on
    from the period it came on in the simulation (the recording's ``sim_start``: the
    periods, each joint's ``powered_at`` — two buses' drives enable a period apart; a
    recording without it: every stage off through the simulated clock from the recording's
    start to the loop's, ``wall_start`` − ``wall_boot``), then :data:`LEAD_SYNCS` periods at zero
    current with the stages as the drives reported them (``powered_flags``, cycle 0's
    flags). A leg that does
    not start at rest in equilibrium — sitting, its hip sagging as soon as the drives enable
    at zero current in READY — is then replayed from the very state the simulation had
    (issue 43: from sitting, plant replay started at the start pose itself, two periods early,
    and the knee drifted off by 9.5° RMS). Any other bus: the measured posture at READY
    (``q_initial``), at rest."""
    lockstep = meta.get("bus") == "sim"
    start = meta.get("start_pose")
    if start is None:
        start = np.zeros(plant.n_joints) if lockstep else meta["q_initial"]
    plant.reset(np.asarray(start, float))
    if not lockstep:
        return
    zero = np.zeros(len(plant.transmissions))
    on = _powered_at(plant, meta)
    if on is None:  # (recorded before the simulation kept its start: the clock's periods,
        # every power stage off through them)
        bring_up = meta.get("wall_start", 0.0) - meta.get("wall_boot", 0.0)  # s, simulated
        periods = min(max(round(bring_up * rate_hz), 0), int(rate_hz))  # (≤ 1 s: a clock
        on = np.full(len(zero), periods)  # that is not the simulation's cannot stall it)
    else:
        periods = int(meta["sim_start"]["periods"])
    for k in range(periods):
        plant.state[ST_ON, : len(zero)] = (on >= 0) & (k >= on)
        plant.step(zero)
    plant.state[ST_ON, : len(zero)] = ~(powered_flags.astype(np.int64) & F_NOT_ENABLED
                                       ).astype(bool)
    for _ in range(LEAD_SYNCS):
        plant.step(zero)


def replay_plant(run_dir: Path | Run, robot: Mechanism | None = None) -> dict:
    """The recorded commands into the plant; the predicted motor-encoder joint angles against
    the recorded ones. Cycle k's command is applied at its SYNC and acts until the next one,
    whose sample cycle k + 2 reads (the drives sample at a SYNC, before its command acts)."""
    return _plant(run_dir, robot)[0]


def _plant(run_dir: Path | Run, robot: Mechanism | None = None, truth: list | None = None
           ) -> tuple[dict, np.ndarray]:
    """:func:`replay_plant`'s result and the predicted joint angles (rad), one row per
    recorded cycle from cycle 2 (the first whose sample a replayed command reaches). With a
    ``truth`` list and the world's floor, the replayed world's truth after each step goes
    into it: (its :class:`~exo_rt.sim.world_truth.WorldTruth`, the rows) — what the replay's
    MCAP draws the pelvis, the ground reactions and the seat from."""
    run = run_dir if isinstance(run_dir, Run) else open_run(run_dir)
    records, meta = run.records, run.meta
    top = load_top(run.config)
    robot = robot or top.robot
    plant = plants.create(top.simulation.plant, robot, dt=1.0 / top.rate_hz,
                          room=top.simulation.plant_options())
    n = robot.nq
    k_mult = plant.transmissions[:, T_K]
    joint_of = plant.transmissions[:, T_JOINT].astype(int)
    _start_plant(plant, meta, records["flags"][0][joint_of], top.rate_hz)
    cpr = np.array([next(d.scale.counts_per_rev for b in top.buses for d in b.drives
                         if d.joint == robot.joint_names[j]) for j in joint_of], float)
    # the drives receive torque in per mille of their rated torque: the same rounding here,
    # and back to a current as a drive computes it (its rated torque as its object holds it:
    # the same bits as the emulated drives, so a replay of an unstable plant — a wearer
    # standing — does not drift off from the last bit)
    drives = [next(d for b in top.buses for d in b.drives if d.joint == robot.joint_names[j])
              for j in joint_of]
    scale = np.array([d.scale.rated_torque / d.scale.torque_constant / 1000.0 for d in drives])
    rated_nm = np.array([held(d.scale.rated_torque, 1e-3 if d.profile is None
                              else d.profile.torque_unit) for d in drives])
    kt = np.array([d.scale.torque_constant for d in drives])
    peak = np.array([d.scale.peak_current for d in drives])
    sim = np.zeros((len(records) - 2, n))
    cmd = np.zeros(len(k_mult))
    world = _truth_of(plant, len(sim)) if truth is not None else None
    for k in range(len(records) - 2):
        permille = np.round(records["command"][k][joint_of] / scale)  # finite: checked
        cmd[:] = np.clip(permille_current(permille, rated_nm, kt), -peak, peak)
        # the drives' power stages as sampled at the SYNC that applies the command
        flags = records["flags"][k + 1][joint_of].astype(np.int64)
        plant.state[ST_ON, : len(cmd)] = ~(flags & F_NOT_ENABLED).astype(bool)
        plant.step(cmd)
        for t in range(len(k_mult)):
            rotor = estimate.quantize(plant.motor_positions[t], cpr[t])
            sim[k, joint_of[t]] = rotor / k_mult[t]
        if world is not None:
            world[0].update(world[2])
            world[1][k] = world[0].row
    joints, first = _errors(sim, records["q"][2:], robot.joint_names)
    if world is not None:
        truth.extend(world[:2])
    return {"mode": "plant", "cycles": int(len(sim)), "joints": joints,
            "first_diff_cycle": first}, sim


class _SimClock:
    """The replay's simulated time, as the world's truth stamps its rows (lockstep)."""

    realtime = False
    t = 0.0


def _truth_of(plant, n: int):
    """(truth, rows, clock) for a world plant on the floor, else None."""
    from exo_rt.sim.world_truth import for_plant

    truth = for_plant(plant)
    return None if truth is None else (truth, np.full((n, len(truth.row)), np.nan), _SimClock())


class _Cursor:
    """The recorded cycle being replayed (the board reads it first, the drives last)."""

    def __init__(self, records) -> None:
        self.records, self.k = records, 0

    def row(self):
        """This cycle's record; past the end, None (the drives then fall silent)."""
        return self.records[self.k] if self.k < len(self.records) else None


class RecordedBoard(Board):
    """The embedded board as the recording saw it: its word each cycle (e-stop, link loss,
    motor power), always powered for the run's start — and its foot-sole sensors as the
    cycle read them (:attr:`decoder_state`, what the stance-load feedforward takes; None for
    a recording made before they were recorded)."""

    present = True
    link_timeout = 1.0
    board_timeout = 1.0
    estop = False

    def __init__(self, cursor: _Cursor) -> None:
        self.cursor = cursor
        self.heel_strikes: list = []
        self.status = type("Status", (), {"watchdog_tripped": False})()
        self.decoder_state = (np.zeros(fd.D_WIDTH, np.int64)
                              if "soles" in cursor.records.dtype.names else None)

    def poll(self) -> int:
        r = self.cursor.row()
        if r is None:
            return 0
        st = self.decoder_state
        if st is not None:  # the decoder's state as the recorded cycle read it
            st[fd.D_PRESSURE_N] = int(r["sole_frames"])
            st[fd.D_N_SENSORS] = k = int(r["sole_sensors"])
            soles = r["soles"]
            for i in range(min(k, len(soles))):
                st[fd.D_SENSORS + i] = int(soles[i])
        return int(r["board"])

    def wait_for_status(self, timeout: float, tick=None) -> bool:
        return True

    def wait_for_power(self, timeout: float, tick=None) -> bool:
        return True

    def send_heartbeat(self, state: int, force: bool = False) -> None:
        """The recording heard the real board's; nothing to send."""

    def clock(self) -> float:
        return 0.0

    def set_power(self, on: bool) -> None:
        """Nothing to switch."""

    def close(self) -> None:
        """Nothing was opened."""


class RecordedDrives(HostDrives):
    """The drives of a recorded run, as a bus of drives (:class:`exo_rt.bus.host.
    HostDrives`, whose other methods do nothing here: no bus, no power stage): each cycle's
    feedback — positions, currents, flags — and what the loop measured of itself (its
    overrun streak, into the cycle's ``scalars``) from the record; the commands sent to
    them are the replay's output (the controller's own log)."""

    def __init__(self, cursor: _Cursor, joints: int, q_initial, config) -> None:
        self.cursor = cursor
        self.n = joints
        self.joint_index = np.arange(joints)
        self.position, self.current = np.zeros(joints), np.zeros(joints)
        self.flags = np.zeros(joints, np.int64)
        self.foreign = np.array([0, 0, -1], np.int64)
        self.temperature = np.full(joints, np.nan)  # °C: the drives' readings, as recorded
        self.bringup_warnings: list[str] = []
        self.q_initial = np.asarray(q_initial, dtype=float)
        self.config = config
        self.bus = self.port = None
        self.scalars = None  # the cycle's scalars (the controller's), set by the replay

    def enable(self, max_cycles: int = ENABLE_CYCLES, reset_faults: bool = False) -> int:
        """Where the recorded run started from."""
        self.position[:] = self.q_initial
        return 0

    def collect(self, deadline: float | None = None) -> None:
        r = self.cursor.row()
        if r is None:
            self.flags[:] = F_MISSING
        else:
            self.position[:] = r["q"]
            self.current[:] = r["current"]
            self.flags[:] = r["flags"].astype(np.int64)
            self.scalars["overrun_streak"] = r["overrun_streak"]
            self.scalars["heel"] = float(self._heel(self.cursor.k))
            if "drive_temp" in r.dtype.names:  # (the drives' own readings, as recorded)
                self.temperature[:] = r["drive_temp"]
        self.cursor.k += 1

    def _heel(self, k: int) -> bool:
        """The gait-phase estimate took a heel strike in cycle k (its count rose)."""
        records = self.cursor.records
        if "heels" not in records.dtype.names:
            return False
        return records[k]["heels"] > (records[k - 1]["heels"] if k > 0 else 0.0)


class RecordedBuses:
    """The bus set of a replay: lockstep, no bus; each SYNC at the time the recording says
    the next cycle's feedback was sampled."""

    lockstep = True
    injectable = False
    world = None
    process = None
    board_process = None
    pending: list = []

    def __init__(self, cursor: _Cursor, dt: float) -> None:
        self.cursor, self.dt = cursor, dt
        names = cursor.records.dtype.names
        self._sample_t = "sample_t" in names

    def sample_time(self, k: int) -> float:
        """When cycle k's feedback was sampled, as recorded (before the column was recorded:
        the SYNC of the cycle before, on the period grid)."""
        r = self.cursor.records
        if self._sample_t and 0 <= k < len(r):
            return float(r[k]["sample_t"])
        return (k - 1) * self.dt

    def sync_instant(self, k: int) -> float:
        """When cycle k's SYNC left: cycle k + 1's sample time."""
        return self.sample_time(k + 1)

    def clock(self) -> float:
        """The bus's clock (s): a replay keeps none of its own."""
        return 0.0

    def replay_start(self) -> dict:
        """A replay records no start of its own to replay."""
        return {}

    def after_safe(self, since: float) -> dict:
        """A replay has no world to run on."""
        return {}

    def tick(self) -> None:
        """Nothing to advance: the recording holds the board's state."""

    def close(self) -> None:
        """Nothing was opened."""


def replay_rig(records, meta: dict, top) -> Rig:
    """A rig made of a recording: one bus of recorded drives (every joint), the recorded
    board; the controller runs on it as on any other."""
    cursor = _Cursor(records)
    buses = RecordedBuses(cursor, 1.0 / top.rate_hz)
    drives = RecordedDrives(cursor, top.robot.nq, meta["q_initial"], top.buses[0])
    return Rig(buses, [drives], RecordedBoard(cursor), sync_instant=buses.sync_instant)


def _session(run: Run) -> tuple[dict, int | None]:
    """The recorded session's options for a replay — its requests (every ``request`` event of
    ``events.jsonl``, checked line by line: :func:`exo_rt.record.events.load`; asked again at
    the cycles they came in, whoever asked then) and the run folder's copies of its activities
    file and wearer profile (a run recorded before sessions: the defaults) — and the cycle up
    to which the file holds every event (None: the whole run). A cut last line of a run that
    did not finish is left out, with a note."""
    from exo_rt.runtime.snapshot import recorded_session

    _script, activities, wearer = recorded_session(run.path)
    rec = (run.status_summary or {}).get("recording") if run.finished else None
    expected = rec.get("events") if isinstance(rec, dict) else None
    got = recorded_events.load(run.path, run.finished,
                               expected if isinstance(expected, int) else None)
    run.notes.extend(got.notes)
    return ({"requests": tuple(got.requests), "activities": None if activities is None else
             str(activities), "wearer": None if wearer is None else str(wearer)},
            got.complete_through)


def _compared(run: Run, through: int | None) -> int:
    """How many of the recorded cycles a controller replay can compare: all of a finished
    run's; of a run that did not finish, those whose requests its events.jsonl holds (a
    request answered in cycle k acts from cycle k + 1: up to its last mark's cycle + 1).
    LogError when that leaves fewer than 2 (no comparison is made, never a difference of inf)."""
    n = len(run.records)
    if through is None:
        return n
    m = min(n, through + 2) if through >= 0 else 0
    if m < 2:
        raise LogError(f"the run did not finish and its events.jsonl holds no mark of the "
                       f"events it had (\"{recorded_events.MARK}\"): which requests it made "
                       f"is unknown, its {n} recorded cycles cannot be compared",
                       Where(str(run.path / "events.jsonl")),
                       "replay it in plant mode (--mode plant), which needs no events")
    if m < n:
        run.notes.append(f"{run.path}: compared over its first {m} of {n} recorded cycles: "
                         "its events.jsonl holds every event up to cycle "
                         f"{through} (the crash cut the rest)")
    return m


def _soles_recorded(top, records, run: Run) -> None:
    """A controller that feeds the stance load forward (``stance_load``) needs the board's
    foot-sole sensors it reads, as the run's cycle log recorded them (its ``soles``: the
    first :data:`~exo_rt.record.recorder.SOLES`; none before they were recorded) — else a
    controller replay could not give it what the run had: refused in one line."""
    sl = top.controller.stance_load
    if sl is None:
        return
    where = Where(str(run.config))
    how = ("replay it in plant mode (--mode plant) or closed loop (--mode closed-loop), or "
           "with --controller a file without stance_load")
    if "soles" not in records.dtype.names:
        raise LogError("the controller feeds the stance load forward from the board's "
                       "foot-sole sensors (stance_load), which this recording does not hold "
                       "(it was made before they were recorded): a controller replay cannot "
                       "give it what the run had", where, how)
    kept = records.dtype["soles"].shape[0]
    beyond = {leg: s for leg, s in sl.sensors.items() if s >= kept}
    if beyond:
        raise LogError(f"the controller's stance_load reads the board's sensor(s) {beyond}; the "
                       f"recording holds the first {kept} only", where, how)


def replay_controller(run_dir: Path | Run, controller: str | Path | None = None) -> dict:
    """The recorded measurements into the (recorded, or ``controller``) controller."""
    return _controller(run_dir, controller)[0]


def _controller(run_dir: Path | Run, controller: str | Path | None = None
                ) -> tuple[dict, Controller]:
    """:func:`replay_controller`'s result and the controller that ran (its records: ``log``)."""
    run = run_dir if isinstance(run_dir, Run) else open_run(run_dir, controller=controller)
    records, meta = run.records, run.meta
    top = load_top(run.config, controller=controller)
    _soles_recorded(top, records, run)
    session, through = _session(run)
    n = _compared(run, through)
    ctl = Controller(top, "replay", history=True, rig=replay_rig(records, meta, top),
                     **session)
    ctl.drives[0].scalars = ctl.s
    ctl.run(float(meta["duration_s"]))
    commands = ctl.log["command"][:n]  # what the recording holds for each compared cycle
    diff = _command_diff(commands, records["command"][: len(commands)])
    changed = np.flatnonzero(np.any(diff > 0.0, axis=1))
    out = {"mode": "controller", "cycles": int(n),
           "max_abs_command_diff_A": float(diff.max()) if len(diff) else 0.0,
           "first_diff_cycle": int(changed[0]) if len(changed) else None,
           "cycles_with_differences": int(len(changed))}
    if len(commands) < n:  # the replay ended (SAFE) before the recorded cycles did
        out["replay_ended_at_cycle"] = int(len(commands))
        out["cycles_with_differences"] += n - len(commands)
        if out["first_diff_cycle"] is None:
            out["first_diff_cycle"] = int(len(commands))
    return out, ctl


def replay_closed_loop(run_dir: Path | Run, controller: str | Path | None = None) -> dict:
    """The session's scenario again on the simulated exoskeleton, compared with the record."""
    return _closed_loop(run_dir, controller)[0]


def _closed_loop(run_dir: Path | Run, controller: str | Path | None = None
                 ) -> tuple[dict, Controller]:
    """:func:`replay_closed_loop`'s result and the controller that ran."""
    run = run_dir if isinstance(run_dir, Run) else open_run(run_dir, controller=controller)
    records, meta = run.records, run.meta
    top = load_top(run.config, controller=controller)
    inj = tuple(Injection(k, j, t, d) for k, j, t, d in meta.get("injections", []))
    session, through = _session(run)
    n = _compared(run, through)
    ctl = Controller(top, "sim", injections=inj, start_pose=meta.get("start_pose"),
                     history=True, **session)  # every cycle's record, to compare
    if meta.get("injections_from") != "RUN":  # recorded before T counted from RUN's start
        ctl.injections = tuple(Injection(i.kind, i.joint, i.t - ctl.run_cycle() * ctl.dt,
                                         i.duration) for i in inj)
    result = ctl.run(float(meta["duration_s"]), None)
    log = ctl.log
    m = min(n, result.summary["cycles"], len(log))
    joints, first = _errors(log["q"][:m], records["q"][:m], top.robot.joint_names)
    diff = _command_diff(log["command"][:m], records["command"][:m])
    return {"mode": "closed-loop", "cycles": int(m), "joints": joints,
            "max_abs_command_diff_A": float(diff.max()), "first_diff_cycle": first,
            "final_state": result.summary["final_state"],
            "recorded_final_state": _recorded_final_state(run.path)}, ctl


# what a replay MCAP's /joints q (and so its /tf) is, by mode (its metadata's replay.q)
REPLAYED_Q = {"plant": "the plant's prediction from the recorded commands, from cycle 2; "
                       "every other field as recorded",
              "controller": "the recorded measurements, fed to the replayed controller; "
                            "command and the rest: the replay's",
              "closed-loop": "the simulated exoskeleton's, under the replayed controller"}


def _plant_rows(run: Run, sim: np.ndarray, truth: list, meta: dict
                ) -> tuple[np.ndarray, dict, dict]:
    """A plant replay's records for its MCAP: the recorded ones from cycle 2, their ``q`` the
    plant's prediction (``sim``: row k is cycle k + 2's) — and, from a world on the floor,
    the replayed world's pelvis, ground reactions and seat (``truth``: :func:`_plant`'s), in
    the columns and metadata the 3D scene reads (:mod:`exo_rt.record.scene`)."""
    columns = replay_mcap.columns_of(run.records)
    rows = replay_mcap.float_rows(run.records[2:])
    a, b = columns["q"]
    rows[:, a:b] = sim
    if not truth:
        return rows, columns, meta
    world, truth_rows = truth
    scene, _ = replay_mcap.scene_of(run.path, meta, run.config)
    names = world.feet
    if scene is not None:  # the scene's foot carried by each shank
        by_body = {scene.mech.body_names[f.body]: f.name for f in scene.feet}
        names = [by_body.get(s, s) for s in world.feet]
    extra = []
    for name in ("base", "foot_force", "foot_point"):
        c0, c1 = world.cols[name]
        columns[name] = (rows.shape[1] + sum(x.shape[1] for x in extra),
                         rows.shape[1] + sum(x.shape[1] for x in extra) + c1 - c0)
        extra.append(truth_rows[:, c0:c1])
    sa, sb = world.cols["seat"]
    at = rows.shape[1] + sum(x.shape[1] for x in extra)
    columns["seat_x"] = (at, at + 1)
    extra.append(truth_rows[:, sa:sa + 1])  # the seat's centre x: a chair kept behind moves
    meta = dict(meta, feet=list(names))
    if np.all(np.isfinite(truth_rows[0, sa:sb])):
        meta["seat"] = {"center": truth_rows[0, sa:sa + 3].tolist(),
                        "size": truth_rows[0, sa + 3:sb].tolist()}
    return np.hstack([rows, *extra]), columns, meta


def _command_diff(replayed: np.ndarray, recorded: np.ndarray) -> np.ndarray:
    """|replayed − recorded| (A); a command that is not finite on one side only is an infinite
    difference (never 0), the same non-finite value on both sides none."""
    diff = np.abs(replayed - recorded)
    same = ~np.isfinite(replayed) & ~np.isfinite(recorded)
    return np.where(np.isfinite(diff), diff, np.where(same, 0.0, np.inf))


def _recorded_final_state(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "summary.json").read_text())["final_state"]
    except (OSError, ValueError, KeyError):
        return None


def replay(run_dir: str | Path, mode: str, controller: str | Path | None = None, *,
           config: str | Path | None = None, allow_config_change: bool = False,
           mcap: bool = True) -> dict:
    """Run one replay mode and write ``replay-<mode>.json`` into the run folder — and, with
    ``mcap``, ``replay-<mode>.mcap``: the replay's records with the run's 3D scene
    (:mod:`exo_rt.record.replay_mcap`; the result's ``mcap`` names it) —: with the run's
    config snapshot, or ``config`` (refused when it differs from the recorded one, unless
    ``allow_config_change``). The result's ``notes`` are for the user (a run that did not
    finish, no snapshot, each config difference, a replay MCAP without its scene)."""
    run_dir = Path(run_dir)
    if mode not in MODES:
        raise LogError(f"unknown replay mode '{mode}'", None, f"use one of {', '.join(MODES)}")
    run = open_run(run_dir, config, allow_config_change,
                   controller if mode != "plant" else None)
    truth: list = []
    if mode == "plant":
        out, sim = _plant(run, truth=truth if mcap else None)
    else:
        out, ctl = (_controller if mode == "controller" else _closed_loop)(run, controller)
    if mcap:
        meta = dict(run.meta, replay={"mode": mode, "run": str(run_dir),
                                      "q": REPLAYED_Q[mode]})
        if mode == "plant":
            rows, columns, meta = _plant_rows(run, sim, truth, meta)
        else:  # a controller replay's records: the recorded cycles (past them the drives
            # fall silent); a closed-loop replay's: every cycle it ran
            n = len(run.records) if mode == "controller" else ctl.cycles
            rows, columns = ctl.cycle.hist[: min(n, ctl.cycles)], ctl.columns
        path, notes = replay_mcap.write(run_dir, mode, rows, columns, meta, run.config)
        out["mcap"] = path.name
        run.notes.extend(notes)
    if not run.finished:
        out["did_not_finish"] = True
    if run.notes:
        out["notes"] = run.notes
    # whole or not at all; a link planted there is replaced, its target never written
    runfolder.write_atomic(run_dir / f"replay-{mode}.json", json.dumps(out, indent=2) + "\n")
    return out


def replay_can_log(log_path: str | Path, config: str | Path) -> dict:
    """Plant-mode replay of a bare CAN log (``.blf``/``.asc``/``.log``, from any tool) with a top
    config naming the bus mapping: per SYNC, the commands each bus's family decodes (CiA 402:
    the RPDO torques) and the next measurements (its TPDOs, or the replies). Each family reads
    its own frames (:meth:`exo_rt.bus.protocols.Protocol.log_decoder`)."""
    import can

    from exo_rt.bus import protocols

    top = load_top(config)
    robot = top.robot
    decoders = []
    for b in top.buses:
        dec = protocols.get(b.protocol).log_decoder(b, robot)
        if dec is None:
            raise LogError(f"the drive protocol '{b.protocol}' of bus '{b.name}' cannot be "
                           "read from a bare CAN log", Where(str(config)),
                           "replay the run folder instead (exo-rt replay RUN_DIR)")
        decoders.append(dec)
    n = robot.nq
    cmd_now = np.zeros(n)
    on_now = np.zeros(n)
    commands, measured, powered = [], [], []
    meas = np.full(n, np.nan)
    try:
        reader = can.LogReader(str(log_path))
        frames = list(reader)
    except (OSError, ValueError, can.CanError) as exc:
        raise LogError(f"cannot read the CAN log ({exc})", Where(str(log_path)),
                       "give a .blf, .asc or .log file") from None
    # a log that tells its buses apart (python-can's channel: the bus's name, or its index)
    # gives each bus's frames to that bus's decoder; one that does not, to every decoder —
    # then no two buses may share a drive id
    names = [b.channel for b in top.buses]
    channels = {m.channel for m in frames}
    routed = len(top.buses) > 1 and len(channels) == len(top.buses)
    ids = [d.node for b in top.buses for d in b.drives]
    if len(top.buses) > 1 and not routed and len(set(ids)) < len(ids):
        raise LogError(f"the CAN log does not tell the {len(top.buses)} buses apart (its "
                       f"frames carry {len(channels)} channel(s)) and their drives share ids",
                       Where(str(log_path)), "replay the run folder instead (exo-rt replay "
                       "RUN_DIR), or a log with one channel per bus")
    order = sorted(channels, key=str)
    for msg in frames:
        arb, data = msg.arbitration_id, bytes(msg.data)
        if arb == SYNC and not data:
            if np.isfinite(meas).all():
                measured.append(meas.copy())
                commands.append(cmd_now.copy())
                powered.append(on_now.copy())
            meas[:] = np.nan
            continue
        if routed:
            ch = msg.channel
            i = names.index(ch) if ch in names else order.index(ch)
            decoders[i].frame(arb, data, cmd_now, meas, on_now)
            continue
        for dec in decoders:
            dec.frame(arb, data, cmd_now, meas, on_now)
    if len(measured) < 3:
        raise LogError("the CAN log holds fewer than 3 control cycles of this robot's drives",
                       Where(str(log_path)), "check the bus file's node ids against the log")
    measured, commands, powered = np.array(measured), np.array(commands), np.array(powered)
    plant = plants.create(top.simulation.plant, robot, dt=1.0 / top.rate_hz,
                          room=top.simulation.plant_options())
    # entry i: the command a SYNC applies, and the sample taken at the SYNC before it; that
    # command acts until the next SYNC, whose sample is entry i + 2's
    plant.reset(measured[1])
    joint_of = plant.transmissions[:, T_JOINT].astype(int)
    k_mult = plant.transmissions[:, T_K]
    sim = np.zeros((len(measured) - 2, n))
    for k in range(len(measured) - 2):
        # a drive applies current only when its statusword said operation enabled
        plant.state[ST_ON, : len(joint_of)] = powered[k + 1][joint_of]
        plant.step(commands[k][joint_of])
        for t in range(len(k_mult)):
            sim[k, joint_of[t]] = plant.motor_positions[t] / k_mult[t]
    joints, first = _errors(sim, measured[2:], robot.joint_names)
    return {"mode": "plant", "source": str(log_path), "cycles": int(len(sim)),
            "joints": joints, "first_diff_cycle": first}
