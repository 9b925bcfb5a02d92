"""The cycle log's file format (``cycles.exolog``): a self-describing header (magic, header
length, JSON with the record's columns and the run's metadata) then fixed-size float64
records, one per cycle, their columns declared once (:data:`ROW`: the cycle writes its
record by these names, :mod:`exo_rt.record.mcap_log` and the recording read them). Readable
with numpy alone (:func:`read_cycle_log`); a truncated last record (a killed writer) is
dropped. The records reach the file through the recording process
(:mod:`exo_rt.record.recording`, :mod:`exo_rt.record.writer`); the CAN traffic goes to a
python-can log (``.blf`` default, ``.asc``/``.log``) beside it.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from exo_rt.errors import LogError, Where

MAGIC = b"EXOLOG01"


# the cycle log's row: one float64 per value, one row per cycle — each column's name and its
# width: a fixed count of values (1, or SOLES for the foot-sole sensors) or one per joint
# (JOINTS). Declared once: the cycle writes its record
# by these names (exo_rt.cycle.step), the cycle log's header, MCAP's topics and the
# recording's rings are laid out from them (cycle_columns)
JOINTS = -1
SOLES = 4  # the board's first foot-sole sensors recorded each cycle (two feet, heel and toe)
ROW = (
    ("t", 1),  # s: k·dt
    ("cycle", 1),  # the cycle's index k
    ("state", 1),  # exo_rt.cycle.states
    ("cause", 1),  # the safety cause in SAFE (safety.CAUSES), 0 in any other state
    ("q", JOINTS),  # rad, measured
    ("qd", JOINTS),  # rad/s, estimated
    ("q_ref", JOINTS),  # rad, the reference
    ("current", JOINTS),  # A, measured
    ("command", JOINTS),  # A, commanded
    ("torque", JOINTS),  # N·m, the commanded joint torque
    ("flags", JOINTS),  # the drives' flags (exo_rt.bus.flags)
    ("overrun_streak", 1),  # consecutive late cycles
    ("board", 1),  # the board's word (1: e-stop, 2: link lost, 4: motor power off)
    ("wake_us", 1),  # µs: the previous cycle's wake latency
    ("compute_us", 1),  # µs: the previous cycle's compute time
    ("overruns", 1),  # overruns so far
    ("sample_t", 1),  # s: when the drives sampled this cycle's feedback
    ("qd_ref", JOINTS),  # rad/s, the reference's velocity
    ("phase", 1),  # strides: the gait phase (RUN)
    ("stride", 1),  # stride boundaries crossed in the segment
    ("gait_phase", 1),  # the wearer's gait phase, as estimated (exo_rt.control.phase_estimate)
    ("stride_hz", 1),  # Hz: the wearer's stride frequency, as estimated
    ("walking", 1),  # 1 while the estimate holds the wearer walking
    ("heels", 1),  # heel strikes the estimate has taken
    ("level", JOINTS),  # the assistance level applied, 0–1
    ("winding", JOINTS),  # °C: the motor winding's temperature (model)
    ("derate", JOINTS),  # the current limit's factor for it, 0–1
    ("drive_temp", JOINTS),  # °C: the drive's own reading (NaN where none)
    # the board's foot-sole sensors as the cycle read them (its decoder's state: what the
    # stance-load feedforward takes, exo_rt.cycle.step.soles) — so that a controller replay
    # gives the controller what the run had
    ("sole_frames", 1),  # PRESSURE frames the board link had decoded
    ("sole_sensors", 1),  # sensors in the latest one
    ("soles", SOLES),  # N: its first SOLES values (0 beyond sole_sensors)
)


def column_start(name: str) -> tuple[int, int]:
    """Where the column ``name`` of :data:`ROW` starts, as (a, b): at a + b·n for n joints
    (integer constants the compiled cycle computes its record's places from)."""
    a = b = 0
    for col, width in ROW:
        if col == name:
            return a, b
        a, b = (a, b + 1) if width == JOINTS else (a + width, b)
    raise KeyError(f"the cycle log's row has no column {name!r}")


def row_columns(n: int) -> dict[str, tuple[int, int]]:
    """Column slices ``(first, end)`` of one cycle's row for n joints, by name."""
    cols: dict[str, tuple[int, int]] = {}
    o = 0
    for name, width in ROW:
        w = n if width == JOINTS else width
        cols[name] = (o, o + w)
        o += w
    return cols


def row_width(columns: dict[str, tuple[int, int]]) -> int:
    """The float64 values of one row laid out by ``columns`` (:func:`row_columns`, or a log's
    header read back)."""
    return max(b for _, b in columns.values())


def cycle_columns(n: int) -> dict[str, tuple[int, int]]:
    """Column slices of one cycle's record (float64) for n joints (:data:`ROW`)."""
    return row_columns(n)


def columns_dtype(cols: dict[str, tuple[int, int]]) -> np.dtype:
    """A structured view of the float64 records: scalar or sub-array fields by name."""
    width = row_width(cols)
    return np.dtype({"names": list(cols),
                     "formats": ["<f8" if b - a == 1 else ("<f8", (b - a,))
                                 for a, b in cols.values()],
                     "offsets": [8 * a for a, _ in cols.values()], "itemsize": 8 * width})


HEADER_RESERVE = 8192  # bytes of JSON, padded with spaces: the metadata can grow in place


def _header(columns: dict[str, tuple[int, int]], meta: dict) -> bytes:
    header = json.dumps({"columns": columns, "meta": meta}).encode()
    return header + b" " * max(0, HEADER_RESERVE - len(header))


def write_header(path: Path, columns: dict[str, tuple[int, int]], meta: dict) -> None:
    """Create the cycle log with its header (magic, header length, JSON columns + metadata,
    padded to a fixed size); the recording process appends the records. OSError (e.g. a full
    disk) goes to the caller."""
    header = _header(columns, meta)
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)


def update_header(path: Path, columns: dict[str, tuple[int, int]], meta: dict) -> bool:
    """Rewrite the header's metadata in place (same length; records may already follow).
    False if it no longer fits the reserved size."""
    header = _header(columns, meta)
    with open(path, "r+b") as f:
        f.seek(8)
        (hlen,) = struct.unpack("<Q", f.read(8))
        if len(header) != hlen:
            return False
        f.write(header)
    return True


def read_header(path: str | Path) -> tuple[dict[str, tuple[int, int]], dict]:
    """(columns, metadata) of a cycle log's header."""
    with open(path, "rb") as f:
        raw = f.read(16)
        (hlen,) = struct.unpack("<Q", raw[8:16])
        header = json.loads(f.read(hlen))
    return {k: (int(v[0]), int(v[1])) for k, v in header["columns"].items()}, header["meta"]


def read_cycle_log(path: str | Path) -> tuple[np.ndarray, dict]:
    """(records, metadata) of a cycle log; a truncated last record is dropped. LogError (with
    the byte offset) for a file that is not a cycle log or whose header is damaged."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LogError(f"cannot read the cycle log ({exc.strerror})", Where(str(path)),
                       "check the run folder") from None
    if raw[:8] != MAGIC:
        raise LogError("not a cycle log (bad magic at byte offset 0)", Where(str(path)),
                       "give the run folder's cycles.exolog")
    if len(raw) < 16:
        raise LogError("the header is truncated at byte offset 8", Where(str(path)),
                       "the file was cut before its header was written")
    (hlen,) = struct.unpack("<Q", raw[8:16])
    try:
        header = json.loads(raw[16 : 16 + hlen])
        cols = {k: (int(v[0]), int(v[1])) for k, v in header["columns"].items()}
        dtype = columns_dtype(cols)
    except (ValueError, KeyError, TypeError, IndexError):
        raise LogError(f"the header (byte offset 16, {hlen} bytes) is damaged",
                       Where(str(path)), "the file is corrupt; keep the CAN log") from None
    body = raw[16 + hlen :]
    whole = len(body) // dtype.itemsize
    records = np.frombuffer(body[: whole * dtype.itemsize], dtype=dtype)
    meta = header.get("meta", {})
    meta["truncated_bytes"] = len(body) - whole * dtype.itemsize
    return records, meta
