"""Drive sizing from recorded runs (``exo-rt size RUN…``, docs/sizing.md): per joint, what the
run asked of the drive — the peak and RMS joint torque, the peak and RMS motor current, the
peak joint speed, the hottest winding — against what the robot file's motor and harmonic
drive are rated for (catalogue values: docs/references.md), with one verdict per joint.

What each figure is, from the cycle log (:mod:`exo_rt.record.recorder`):

- **joint torque** (N·m): the ``torque`` column, the torque the controller asked of the joint
  — what the harmonic drive's output carries (its current is the ``current`` column);
- **motor current** (A): the ``current`` column, the drives' measured currents;
- **joint speed** (rad/s): the ``qd`` column; at the motor it is N times that;
- **winding** (°C): the ``winding`` column, the thermal model's winding temperature.

The ratings (:func:`ratings`), per joint:

- continuous joint torque: the smaller of the motor's k_M·I_rated·N·η and the drive's
  ``rated_torque``; the RMS torque is held against it (a motor's heating and a gear's wear
  follow the RMS, not the mean);
- peak joint torque: the smaller of the motor's k_M·I_peak·N·η (the drive's current limit)
  and the drive's ``peak_torque`` (the limit for repeated peak torque);
- momentary: the drive's ``momentary_torque`` (a few times in its life);
- speed: the motor's ``rated_speed`` and ``max_speed``, and the drive's ``max_input_speed``,
  divided by N (a joint speed);
- currents: the motor's ``rated_current`` (RMS) and ``peak_current`` (a current within 0.1 %
  of the peak counts as at the drive's limit: the controller asked for more).

A rating the robot file does not give is left out of the verdict and shown as ``—``.
Verdicts, from the worst: ``over momentary``, ``over peak``, ``over rated``, ``ok``; the
ratings exceeded are named with the figure and its limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.errors import ConfigError, LogError, Where
from exo_rt.model.mechanism import Mechanism

AT_PEAK = 0.999  # a |current| at this fraction of the peak current is at the drive's limit
VERDICTS = ("ok", "over rated", "over peak", "over momentary")


@dataclass
class Figures:
    """What runs asked of one joint (SI; ``samples`` cycles)."""

    peak_torque: float = 0.0  # N·m
    rms_torque: float = 0.0  # N·m
    peak_current: float = 0.0  # A
    rms_current: float = 0.0  # A
    peak_speed: float = 0.0  # rad/s at the joint
    peak_winding: float = math.nan  # °C
    samples: int = 0


@dataclass
class Rating:
    """What one joint's motor and harmonic drive are rated for (None: not given)."""

    ratio: float
    torque_continuous: float | None  # N·m at the joint
    torque_peak: float | None  # N·m at the joint
    torque_momentary: float | None  # N·m
    rated_current: float  # A
    peak_current: float  # A
    speed_rated: float | None  # rad/s at the joint
    speed_max: float | None  # rad/s at the joint
    max_winding: float  # °C
    parts: str = ""  # the catalogue names, for people


@dataclass
class JointSizing:
    """One joint's figures, ratings and verdict."""

    joint: str
    figures: Figures
    rating: Rating
    verdict: str = "ok"
    reasons: list[str] = field(default_factory=list)


def _smallest(*values):
    given = [v for v in values if v is not None]
    return min(given) if given else None


def ratings(mech: Mechanism) -> dict[str, Rating]:
    """Each driven joint's ratings from the robot's transmissions (module docstring)."""
    out = {}
    for tr in mech.transmissions:
        m, d, n = tr.motor, tr.drive, tr.ratio
        eta = d.efficiency
        thermal = getattr(m.thermal, "max_winding_temperature", None) or 125.0
        speed_max = _smallest(None if m.max_speed is None else m.max_speed / n,
                              None if d.max_input_speed is None else d.max_input_speed / n)
        out[tr.joint] = Rating(
            ratio=n,
            torque_continuous=_smallest(m.torque_constant * m.rated_current * n * eta,
                                        d.rated_torque),
            torque_peak=_smallest(m.torque_constant * m.peak_current * n * eta, d.peak_torque),
            torque_momentary=d.momentary_torque,
            rated_current=m.rated_current, peak_current=m.peak_current,
            speed_rated=None if m.rated_speed is None else m.rated_speed / n,
            speed_max=speed_max, max_winding=thermal,
            parts=" + ".join(x for x in (m.name, d.catalogue) if x))
    return out


def figures(records: np.ndarray, names: list[str]) -> dict[str, Figures]:
    """Each joint's figures over the records (the cycles whose values are finite)."""
    out = {}
    for j, name in enumerate(names):
        tau, cur, qd = (records[c][:, j] for c in ("torque", "current", "qd"))
        tau, cur, qd = tau[np.isfinite(tau)], cur[np.isfinite(cur)], qd[np.isfinite(qd)]
        f = Figures(samples=len(tau))
        if len(tau):
            f.peak_torque = float(np.max(np.abs(tau)))
            f.rms_torque = float(np.sqrt(np.mean(tau ** 2)))
        if len(cur):
            f.peak_current = float(np.max(np.abs(cur)))
            f.rms_current = float(np.sqrt(np.mean(cur ** 2)))
        if len(qd):
            f.peak_speed = float(np.max(np.abs(qd)))
        if "winding" in (records.dtype.names or ()):
            w = records["winding"][:, j]
            w = w[np.isfinite(w)]
            if len(w):
                f.peak_winding = float(np.max(w))
        out[name] = f
    return out


def judge(joint: str, f: Figures, r: Rating) -> JointSizing:
    """The verdict for one joint: the worst rating exceeded, and every one named."""
    out = JointSizing(joint, f, r)
    level = 0

    def over(lvl: int, what: str, value: float, limit: float | None, unit: str) -> None:
        nonlocal level
        if limit is not None and value > limit:
            level = max(level, lvl)
            out.reasons.append(f"{what} {value:.3g} {unit} > {limit:.3g} ({VERDICTS[lvl]})")

    over(1, "RMS torque", f.rms_torque, r.torque_continuous, "N·m")
    over(1, "RMS current", f.rms_current, r.rated_current, "A")
    over(1, "peak speed", f.peak_speed, r.speed_rated, "rad/s")
    over(2, "peak torque", f.peak_torque, r.torque_peak, "N·m")
    over(2, "peak speed", f.peak_speed, r.speed_max, "rad/s")
    if f.peak_current >= AT_PEAK * r.peak_current:
        level = max(level, 2)
        out.reasons.append(f"current at the drive's limit {r.peak_current:.3g} A (over peak)")
    if math.isfinite(f.peak_winding):
        over(2, "winding", f.peak_winding, r.max_winding, "°C")
    over(3, "peak torque", f.peak_torque, r.torque_momentary, "N·m")
    out.verdict = VERDICTS[level]
    return out


def _robot_of_run(run_dir: Path) -> Path:
    """The robot file a run used: its own copy (config.yaml's ``robot:`` in the run folder)."""
    from exo_rt.yamlio import plain, read_yaml

    top = run_dir / "config.yaml"
    if not top.is_file():
        raise ConfigError("the run keeps no copy of its config (no config.yaml)",
                          Where(str(run_dir)), "give the robot file: --robot FILE")
    doc = plain(read_yaml(top, ConfigError))
    robot = doc.get("robot") if isinstance(doc, dict) else None
    if not isinstance(robot, str):
        raise ConfigError("config.yaml names no robot file", Where(str(top)),
                          "give the robot file: --robot FILE")
    return (top.parent / robot).resolve()


def read_run(run_dir: str | Path) -> tuple[np.ndarray, dict]:
    """(records, metadata) of a run folder (its cycle log, else its run.mcap): LogError for
    what is not a run folder or holds no records."""
    from exo_rt.record import integrity

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise LogError("not a run folder (no such folder)", Where(str(run_dir)),
                       "give a run folder written by `exo-rt run` (runs/<date-time>)")
    records, meta, path = integrity.read_records(run_dir)
    names = meta.get("joint_names")
    if not len(records) or not names:
        raise LogError("the cycle log holds no records" if names else
                       "the cycle log names no joints", Where(str(path)),
                       "give a run folder whose run got past its start")
    missing = [c for c in ("torque", "current", "qd") if c not in (records.dtype.names or ())]
    if missing:
        raise LogError(f"the cycle log has no {', '.join(missing)} column", Where(str(path)),
                       "give a run recorded by exo-rt run")
    return records, meta


@dataclass
class Runs:
    """Run folders read once for ``exo-rt size`` and its ratio study."""

    records: list[np.ndarray]  # one array per run (its window's cycles)
    names: list[str]  # their joints
    mech: Mechanism  # the robot whose drives they are held against
    path: Path  # its file
    dt: float  # s: the first run's period


def load_runs(run_dirs: list[str | Path], robot: str | Path | None = None,
              window: tuple[float, float] | None = None) -> Runs:
    """The runs' records (one array each; ``window``: only the cycles whose run time ``t``
    lies in [t0, t1] s), their joints, the robot whose drives to hold them against (default:
    the first run's own copy of its robot file), its path and the first run's period."""
    from exo_rt.model import load_mechanism

    if not run_dirs:
        raise ConfigError("no run folder given", None, "give one or more: exo-rt size RUN…")
    runs = [read_run(d) for d in run_dirs]
    if window is not None:
        runs = [(_window(r, window, d), meta) for d, (r, meta) in zip(run_dirs, runs,
                                                                       strict=True)]
    names = list(runs[0][1]["joint_names"])
    for d, (_, meta) in zip(run_dirs, runs, strict=True):
        if list(meta["joint_names"]) != names:
            raise LogError(f"its joints {meta['joint_names']} are not the first run's {names}",
                           Where(str(d)), "size runs of one robot together")
    path = Path(robot) if robot is not None else _robot_of_run(Path(run_dirs[0]))
    try:
        mech = load_mechanism(path)
    except OSError as exc:
        raise ConfigError(f"cannot read the robot file ({exc.strerror})", Where(str(path)),
                          "give a robot file: --robot FILE") from None
    absent = [n for n in names if n not in {tr.joint for tr in mech.transmissions}]
    if absent:
        raise ConfigError(f"the robot has no transmission on joint(s) {', '.join(absent)} of "
                          "the run", Where(str(path)), "give the robot file the run used")
    return Runs([r for r, _ in runs], names, mech, path,
                1.0 / float(runs[0][1].get("rate_hz") or 1000.0))


def _window(records: np.ndarray, window: tuple[float, float], run_dir) -> np.ndarray:
    """The records whose ``t`` lies in [t0, t1] s: LogError when none does."""
    t0, t1 = window
    t = records["t"]
    inside = records[(t >= t0) & (t <= t1)]
    if not len(inside):
        raise LogError(f"no cycle of the run lies in {t0:g}–{t1:g} s (it runs "
                       f"{float(np.nanmin(t)):.3f}–{float(np.nanmax(t)):.3f} s)",
                       Where(str(run_dir)), "give a window within the run: --window T0 T1")
    return inside


def size_runs(run_dirs: list[str | Path] | Runs, robot: str | Path | None = None,
              window: tuple[float, float] | None = None
              ) -> tuple[dict[str, JointSizing], Path]:
    """Every joint's sizing over the runs together (peaks over all, RMS over all their
    cycles; ``window``: over their cycles in [t0, t1] s), against ``robot``'s drives
    (default: the first run's own copy of its robot file); (sizing by joint, the robot
    file). ``run_dirs`` may be :class:`Runs` read already."""
    runs = run_dirs if isinstance(run_dirs, Runs) else load_runs(run_dirs, robot, window)
    rates = ratings(runs.mech)
    records = np.concatenate(runs.records) if len(runs.records) > 1 else runs.records[0]
    figs = figures(records, runs.names)
    return {n: judge(n, figs[n], rates[n]) for n in runs.names}, runs.path


def _num(x, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else (
        f"{x:.{digits}f}")


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """A text table's lines: each column as wide as its widest cell, two spaces apart."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def table(sizing: dict[str, JointSizing]) -> list[str]:
    """The lines ``exo-rt size`` prints: one row per joint, then the reasons."""
    head = ("joint", "peak τ N·m", "RMS τ N·m", "cont./peak/mom. N·m", "peak i A", "RMS i A",
            "rated/peak A", "peak q̇ rad/s", "rated/max rad/s", "winding °C", "verdict")
    rows = [head]
    for s in sizing.values():
        f, r = s.figures, s.rating
        rows.append((s.joint, _num(f.peak_torque), _num(f.rms_torque),
                     "/".join(_num(x) for x in (r.torque_continuous, r.torque_peak,
                                                r.torque_momentary)),
                     _num(f.peak_current, 2), _num(f.rms_current, 2),
                     f"{_num(r.rated_current, 2)}/{_num(r.peak_current, 1)}",
                     _num(f.peak_speed, 2),
                     f"{_num(r.speed_rated, 2)}/{_num(r.speed_max, 2)}",
                     _num(f.peak_winding), s.verdict))
    lines = aligned(rows)
    for s in sizing.values():
        if s.rating.parts:
            lines.append(f"{s.joint}: {s.rating.parts}")
        for why in s.reasons:
            lines.append(f"{s.joint}: {why}")
    return lines


def main(runs: Runs) -> int:
    """``exo-rt size``: print the table; 0 when every joint is ok, 1 when one is not."""
    sizing, path = size_runs(runs)
    print(f"drives of {path}, {len(runs.records)} run(s), "
          f"{next(iter(sizing.values())).figures.samples} cycles")
    for line in table(sizing):
        print(line)
    return 0 if all(s.verdict == "ok" for s in sizing.values()) else 1
