"""The cycle log's file format (``cycles.exolog``): a self-describing header (magic, header
length, JSON with the record's columns and the run's metadata) then fixed-size float64
records, one per cycle. Readable with numpy alone (:func:`read_cycle_log`); a truncated last
record (a killed writer) is dropped. The records reach the file through the recording process
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


def cycle_columns(n: int) -> dict[str, tuple[int, int]]:
    """Column slices of one cycle's record (float64) for n joints."""
    cols: dict[str, tuple[int, int]] = {}
    o = 0
    for name, width in (("t", 1), ("cycle", 1), ("state", 1), ("cause", 1), ("q", n),
                        ("qd", n), ("q_ref", n), ("current", n), ("command", n),
                        ("torque", n), ("flags", n), ("overrun_streak", 1), ("board", 1),
                        ("wake_us", 1), ("compute_us", 1), ("overruns", 1), ("sample_t", 1),
                        ("qd_ref", n), ("phase", 1), ("stride", 1), ("gait_phase", 1),
                        ("stride_hz", 1), ("walking", 1), ("heels", 1), ("level", n),
                        ("winding", n), ("derate", n), ("drive_temp", n)):
        cols[name] = (o, o + width)
        o += width
    return cols


def columns_dtype(cols: dict[str, tuple[int, int]]) -> np.dtype:
    """A structured view of the float64 records: scalar or sub-array fields by name."""
    width = max(b for _, b in cols.values())
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
