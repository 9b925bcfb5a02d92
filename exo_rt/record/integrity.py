"""Is a run's record whole? The checks replay and reports make before they use a cycle log
(docs/replay.md, "Damaged logs").

A log is *damaged* — :class:`~exo_rt.errors.LogError` naming the file, what is wrong and at
which record (and cycle) — when it

- holds no records;
- holds another number of records than the run's ``summary.json`` says it recorded (cut, or
  grown), or ends in a partial record although the run finished;
- has a gap in its cycle counter (record i must be cycle i), or time going backwards;
- holds a value that is not finite where the controller did not record a fault (a
  measurement that was NaN and made the controller go SAFE is a faithful record: ``q``,
  ``qd``, ``current`` in SAFE records), a state or cause that is not one of the run's, or a
  number of magnitude above :data:`LIMIT` (no joint angle, velocity, current, torque or time
  is that large: an exponent bit flipped).

These checks catch a cut, grown, gapped or bit-flipped log; a flipped low mantissa bit changes
a value by less than any measurement's noise and is not caught (the log has no checksum).

A run folder without ``summary.json`` is a run that did not finish (its process was killed,
its PC lost power): its records are used as they are, and every user says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.errors import LogError, Where

LIMIT = 1e9  # largest magnitude a recorded value may have (rad, rad/s, A, N·m, s, µs, flags)
MEASURED = ("q", "qd", "current")  # may be non-finite in SAFE records (what the sensor said)
MAYBE_NONE = ("drive_temp",)  # NaN by design: a drive whose protocol reports no temperature
FIX = "the file was cut or changed after the run: nothing was replayed; use an intact copy"


@dataclass
class RunStatus:
    """What the run folder says about its record: whether the run finished (summary.json),
    how many records it says it wrote, and notes for the user (one line each)."""

    finished: bool
    expected: int | None
    summary: dict | None
    notes: list[str] = field(default_factory=list)


def _json(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LogError(f"damaged: {path.name} cannot be read ({exc})", Where(str(path)),
                       "restore the run folder from a copy") from None
    if not isinstance(doc, dict):
        raise LogError(f"damaged: {path.name} is not a JSON object", Where(str(path)),
                       "restore the run folder from a copy")
    return doc


def run_status(run_dir: Path) -> RunStatus:
    """summary.json (finished) and the number of records it says were written."""
    run_dir = Path(run_dir)
    summary = _json(run_dir / "summary.json")
    if summary is None:
        return RunStatus(False, None, None)
    rec = summary.get("recording")
    n = rec.get("records") if isinstance(rec, dict) else summary.get("cycles")
    status = RunStatus(True, int(n) if isinstance(n, int | float) else None, summary)
    if isinstance(rec, dict):  # the recording ended before the run (it died, a full disk)
        stop = rec.get("stopped_at_s")
        if stop is None and isinstance(rec.get("stopped"), dict):
            stop = rec["stopped"].get("t")
        if stop is not None:
            status.notes.append(f"{run_dir}: the recording stopped at t = {stop} s, before "
                                "the run ended (summary.json): its log holds the run up to "
                                "there")
            if not status.expected:  # the recording process gone: no count of its own
                status.expected = None
    return status


def _at(records: np.ndarray, i: int) -> str:
    c = float(records["cycle"][i])
    return f"record {i} (cycle {int(c)})" if np.isfinite(c) and abs(c) < LIMIT \
        else f"record {i}"


def _damaged(path: Path, what: str) -> LogError:
    return LogError(f"damaged log: {what}", Where(str(path)), FIX)


def check(records: np.ndarray, meta: dict, path: Path, run_dir: Path | None = None) -> RunStatus:
    """Check the records of ``path`` (a cycle log or run.mcap, read with their metadata)
    against themselves and their run folder; LogError when damaged, else the run's status
    (with a note when it did not finish)."""
    path = Path(path)
    status = run_status(Path(run_dir) if run_dir is not None else path.parent)
    n = len(records)
    if n == 0:
        raise _damaged(path, "it holds no records" + (
            f" where summary.json says {status.expected}" if status.expected else ""))
    _check_columns(records, meta, path)  # a gap or a bad value, named where it is, first
    if status.finished and status.expected is not None and n != status.expected:
        if n < status.expected:
            raise _damaged(path, f"it holds {n} records where summary.json says "
                                 f"{status.expected}: it ends after {_at(records, n - 1)}")
        raise _damaged(path, f"it holds {n} records where summary.json says "
                             f"{status.expected}: {_at(records, status.expected)} and "
                             "after are extra")
    cut = int(meta.get("truncated_bytes", 0) or 0)
    if cut and status.finished:
        raise _damaged(path, f"it ends in a partial record ({cut} bytes) after "
                             f"{_at(records, n - 1)} although the run finished")
    if not status.finished:
        t = float(records["t"][-1])
        states = meta.get("states") or []
        s = int(records["state"][-1])
        status.notes.append(
            f"{path.parent}: the run did not finish (no summary.json): {n} records up to "
            f"t = {t:.3f} s, last state {states[s] if 0 <= s < len(states) else s}"
            + (f", a partial last record ({cut} bytes) dropped" if cut else ""))
    return status


def read_records(run_dir: Path) -> tuple[np.ndarray, dict, Path]:
    """(records, metadata, file) of a run folder: its cycle log, else its run.mcap (the same
    records, e.g. a run shared as MCAP alone). Not yet checked: :func:`check`."""
    from exo_rt.record.recorder import read_cycle_log

    run_dir = Path(run_dir)
    path = run_dir / "cycles.exolog"
    if path.exists():
        records, meta = read_cycle_log(path)
    elif (run_dir / "run.mcap").exists():
        from exo_rt.record.mcap_log import read_mcap

        path = run_dir / "run.mcap"
        records, meta = read_mcap(path)
    else:
        raise LogError("no cycle log in this folder", Where(str(run_dir)),
                       "give a run folder written by `exo-rt run` (it holds cycles.exolog "
                       "or run.mcap)")
    return records, meta, path


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_columns(records: np.ndarray, meta: dict, path: Path) -> None:
    names = meta.get("joint_names") or []
    n = len(records)
    cycle = records["cycle"]
    want = np.arange(n, dtype=float)
    if not np.array_equal(cycle, want):
        i = _first(cycle != want)
        if i == 0:
            raise _damaged(path, f"record 0 is cycle {cycle[0]:g}, not 0 (the start is "
                                 "missing, or the counter is damaged)")
        raise _damaged(path, f"the cycle counter jumps from {cycle[i - 1]:g} to {cycle[i]:g} "
                             f"at record {i}")
    for name, labels in (("state", meta.get("states")), ("cause", meta.get("causes"))):
        col = records[name]
        top = len(labels) if labels else LIMIT
        bad = ~(np.isfinite(col) & (col >= 0) & (col < top) & (col == np.round(col)))
        if bad.any():
            i = _first(bad)
            raise _damaged(path, f"{name} {col[i]:g} at {_at(records, i)} is not one of the "
                                 f"run's {len(labels) if labels else ''} {name}s")
    safe_code = (meta.get("states") or []).index("SAFE") if "SAFE" in (meta.get("states") or
                                                                      []) else -1
    safe = records["state"] == safe_code
    for name in records.dtype.names:
        col = records[name]
        flat = col.reshape(n, -1)
        finite = np.isfinite(flat)
        if name in MEASURED:
            finite |= safe[:, None]
        if name in MAYBE_NONE:
            finite |= np.isnan(flat)
        if not finite.all():
            i, j = np.argwhere(~finite)[0]
            raise _damaged(path, f"{_label(name, j, flat.shape[1], names)} is "
                                 f"{flat[i, j]:g} at {_at(records, int(i))} (not a number, "
                                 "and the controller recorded no fault there)")
        big = np.isfinite(flat) & (np.abs(flat) > LIMIT)
        if big.any():
            i, j = np.argwhere(big)[0]
            raise _damaged(path, f"{_label(name, j, flat.shape[1], names)} is "
                                 f"{flat[i, j]:.3g} at {_at(records, int(i))} (beyond "
                                 f"±{LIMIT:g}: not a recorded value)")
    t = records["t"]
    if n > 1 and (np.diff(t) < 0).any():
        i = _first(np.diff(t) < 0) + 1
        raise _damaged(path, f"time goes back from {t[i - 1]:.6g} to {t[i]:.6g} s at "
                             f"{_at(records, i)}")


def _label(name: str, j: int, width: int, joints: list[str]) -> str:
    if width == 1:
        return name
    return f"{name}[{joints[j]}]" if j < len(joints) else f"{name}[{j}]"
