"""A replay's own MCAP (``replay-<mode>.mcap`` in the run folder): what the replay computed,
with the same 3D scene as the run's run.mcap, so that the recorded run and its replay can be
watched side by side (docs/replay.md, "The replay's MCAP").

The file has run.mcap's channels (:class:`exo_rt.record.mcap_log.McapLog`: ``/joints``,
``/state``, ``/timing``, ``/assistance``, ``/events``) and its scene (:mod:`exo_rt.record.scene`:
``/robot_description``, ``/tf`` every cycle, ``/scene``), made from the replay's records — for
a plant replay the recorded records with ``q`` the plant's prediction, so the replayed joints
drive ``/tf`` — at the run's own log times (the same origin, the run's ``wall_start``): the
two files open at the same instant show the same cycle. Its ``exo-rt`` metadata record is
run.mcap's, plus ``replay`` (the mode, the run folder, what the file's ``q`` is).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

BATCH = 4096  # records per batch handed to the writer (as exo-rt export --mcap does)


def columns_of(records: np.ndarray) -> dict[str, tuple[int, int]]:
    """The (first, end) float64 columns of a structured record array's fields (the cycle
    log's layout, :func:`exo_rt.record.recorder.columns_dtype` read back)."""
    out = {}
    for name, (dtype, offset) in records.dtype.fields.items():
        width = int(np.prod(dtype.shape)) if dtype.shape else 1
        out[name] = (offset // 8, offset // 8 + width)
    return out


def float_rows(records: np.ndarray) -> np.ndarray:
    """A structured record array as float64 rows (n, width): a copy, C-contiguous."""
    width = records.dtype.itemsize // 8
    return np.frombuffer(np.ascontiguousarray(records).tobytes(), np.float64).reshape(
        len(records), width).copy()


def scene_of(run_dir: Path, meta: dict, config: Path):
    """The replay's 3D scene: the robot file of the top config the replay loaded (the run's
    own copy, or ``--config``), the seat the run's metadata names. (scene, None), or
    (None, why) where it cannot be drawn — the file is then written without the scene."""
    from exo_rt.record.scene import scene_for_run

    try:
        return scene_for_run(None, dict(meta, config=str(config))), None
    except Exception as exc:  # a robot the scene cannot draw (a closed chain): no scene
        return None, f"{run_dir}: the replay's MCAP has no 3D scene ({exc})"


def write(run_dir: Path, mode: str, rows: np.ndarray, columns: dict, meta: dict,
          config: Path) -> tuple[Path, list[str]]:
    """``replay-<mode>.mcap`` in ``run_dir`` from the replay's float64 ``rows`` (one per
    cycle, ``columns`` their layout) and the run's ``meta`` (its ``replay`` entry says what
    the rows are): written whole or not at all (a temporary file beside it, renamed; a link
    planted there is replaced, never followed). Returns the path and notes for the user (no
    scene). OSError (a full disk …) goes to the caller, the temporary file removed."""
    from exo_rt.record.mcap_log import McapLog
    from exo_rt.record.runfolder import replacing_path

    run_dir = Path(run_dir)
    path = run_dir / f"replay-{mode}.mcap"
    scene, why = scene_of(run_dir, meta, config)
    notes = [why] if why else []
    with replacing_path(path) as tmp:
        log = McapLog(tmp, columns, meta, scene=scene, segment_s=math.inf)
        try:
            log.set_origin(meta)
            for a in range(0, len(rows), BATCH):
                log.rows(rows[a:a + BATCH])
        finally:
            log.close(meta)
        if log.error is not None:
            raise log.error
    return path, notes
