"""Recording a run: every CAN frame and one fixed-size record per cycle, written off the
control thread (DESIGN §7).

- CAN traffic: each frame the host sends or receives is appended (a deque append, ~0.1 µs) to
  a queue; a background thread writes them with python-can's writers (``.blf`` default,
  ``.asc``/``.log`` selectable), readable by python-can's ``LogReader``, candump tools, CANalyzer.
- Cycle log (``cycles.exolog``): a self-describing header (magic, header length, JSON with the
  numpy dtype and the run's metadata) then fixed-size records. The control thread copies its
  arrays into a preallocated ring buffer; the writer thread appends whole records and flushes
  every 50 ms, so a kill -9 loses at most ~100 ms and leaves a readable file. Readable with
  numpy alone (:func:`read_cycle_log`).
- A full disk (or any write error) becomes an event; the controller goes on.
"""

from __future__ import annotations

import collections
import json
import struct
import threading
import time
from pathlib import Path

import can
import numpy as np

from exo_rt.errors import LogError, Where

MAGIC = b"EXOLOG01"
FLUSH_S = 0.05


def cycle_columns(n: int) -> dict[str, tuple[int, int]]:
    """Column slices of one cycle's record (float64) for n joints."""
    cols: dict[str, tuple[int, int]] = {}
    o = 0
    for name, width in (("t", 1), ("cycle", 1), ("state", 1), ("cause", 1), ("q", n),
                        ("qd", n), ("q_ref", n), ("current", n), ("command", n),
                        ("torque", n), ("flags", n), ("overrun_streak", 1), ("board", 1),
                        ("wake_us", 1), ("compute_us", 1)):
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


class _Background:
    """A writer thread that calls ``_drain`` every FLUSH_S and once more when stopped."""

    def _start(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_S):
            self._drain()
        self._drain()

    def _finish(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


class CycleLog(_Background):
    """Ring buffer of cycle records + a writer thread appending them to ``path``.

    The control thread fills one float64 record (:attr:`record`, whose slices it may use as its
    own working arrays) and calls :meth:`commit`: one row copy into the ring.
    """

    def __init__(self, path: Path, n_joints: int, meta: dict, capacity: int = 4096) -> None:
        self.path = Path(path)
        self.columns = cycle_columns(n_joints)
        self.width = max(b for _, b in self.columns.values())
        self.record = np.zeros(self.width)
        self.ring = np.zeros((capacity, self.width))
        self.capacity = capacity
        self.head = 0  # records produced (control thread)
        self.tail = 0  # records written (writer thread)
        self.lost = 0
        self.events: list[dict] = []
        header = json.dumps({"columns": self.columns, "meta": meta}).encode()
        self._file = open(self.path, "wb")  # noqa: SIM115 (kept open by the writer thread)
        try:
            self._file.write(MAGIC + struct.pack("<Q", len(header)) + header)
            self._file.flush()
        except OSError as exc:  # a full disk already: the run goes on, unrecorded
            self.events.append({"event": "recording_error", "error": str(exc)})
        self._start("exo-cycle-log")

    def view(self, name: str) -> np.ndarray:
        a, b = self.columns[name]
        return self.record[a:b]

    def commit(self) -> None:
        """Copy the record into the ring (the writer thread takes it from there)."""
        if self.head - self.tail >= self.capacity:  # the writer fell a whole ring behind
            self.lost += 1
            self.tail += 1
        self.ring[self.head % self.capacity] = self.record
        self.head += 1

    def _drain(self) -> None:
        head = self.head
        while self.tail < head:
            start = self.tail % self.capacity
            count = min(head - self.tail, self.capacity - start)
            chunk = self.ring[start : start + count].tobytes()
            try:
                self._file.write(chunk)
            except OSError as exc:  # full disk & co: an event, not a crash
                self.events.append({"event": "recording_error", "error": str(exc),
                                    "records_lost": head - self.tail})
                self.tail = head
                return
            self.tail += count
        try:
            self._file.flush()
        except OSError as exc:
            self.events.append({"event": "recording_error", "error": str(exc)})

    def close(self) -> None:
        self._finish()
        try:
            self._file.close()
        except OSError:
            pass

class CanRecorder(_Background):
    """Every frame sent and received on a set of buses, written by a background thread."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.queue: collections.deque = collections.deque()
        self.count = 0
        self.error: str | None = None
        self._writer = can.Logger(str(self.path))
        self._start("exo-can-log")

    def attach(self, bus: can.BusABC) -> None:
        """Record what ``bus`` sends and receives (wraps its send and recv)."""
        send, recv, q = bus.send, bus.recv, self.queue

        def send_recorded(msg, timeout=None):
            send(msg, timeout)
            if msg.timestamp == 0.0:
                msg.timestamp = time.time()
            msg.channel = msg.channel or bus.channel_info.replace(" ", "_")
            q.append(msg)

        def recv_recorded(timeout=None):
            msg = recv(timeout)
            if msg is not None:
                msg.is_rx = True
                q.append(msg)
            return msg

        bus.send = send_recorded
        bus.recv = recv_recorded

    def _drain(self) -> None:
        q = self.queue
        while q:
            msg = q.popleft()
            try:
                self._writer.on_message_received(msg)
                self.count += 1
            except (OSError, ValueError) as exc:
                self.error = str(exc)

    def close(self) -> None:
        self._finish()
        self._writer.stop()


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
