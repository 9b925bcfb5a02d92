"""Shared-memory rings that carry a run's records from the control process to the recording
process (:mod:`exo_rt.record.writer`).

The control thread must never wait on a disk, hold a lock across a write, or build a Python
object per frame. It copies each cycle's record (one row of float64) and each CAN frame
(24 bytes) into a ring in ``multiprocessing.shared_memory`` and advances the ring's head; the
recording process, another process with its own interpreter and GIL, drains from its own tail.

Layout of a ring block: 8 int64 header words, then ``capacity`` fixed-size slots.

    header[0] head      slots produced (written by the producer after the slot)
    header[1] tail      slots consumed (written by the consumer)
    header[2] closed    1 once the producer has finished (the consumer drains and exits)
    header[3] lost      slots the producer dropped because the ring was full
    header[4] capacity
    header[5] slot size (bytes)
    header[6] clients   live-telemetry clients watching (records ring; written by the
                        consumer: 1 while a Foxglove client is subscribed, ``--live-wait``)

One producer, one consumer: each header word has one writer. The head is stored after the slot
(an aligned 8-byte store, in program order on x86 and — through the interpreter's own
barriers between the two statements — in practice on ARM); a consumer reads slots below the
head only.
"""

from __future__ import annotations

import errno
import resource
import struct
import time
from multiprocessing import resource_tracker, shared_memory

import numpy as np

HEAD, TAIL, CLOSED, LOST, CAPACITY, SLOT, CLIENTS = range(7)
HEADER_BYTES = 64

# one CAN frame: timestamp (s), arbitration id, flags (1 rx, 2 extended, 4 error frame),
# data length, bus index, data (8 bytes)
FRAME = struct.Struct("<dIBBBx8s")
RX, EXTENDED, ERROR = 1, 2, 4


CREATED: set[str] = set()  # blocks this process created (and so owns): this
# module's rings and exo_rt.sim.lead's rows


def untrack(shm: shared_memory.SharedMemory) -> None:
    """Python < 3.13 registers an attached block with this process's resource tracker, which
    would unlink it when this process ends; only the creating process may do that."""
    if shm._name in CREATED:
        return
    try:
        resource_tracker.unregister(shm._name, "shared_memory")
    except (AttributeError, KeyError, ValueError):
        pass


def prepare_attach() -> None:
    """Start this process's resource tracker now (Python < 3.13: attaching a block registers
    it there, starting the tracker — a process of its own — on the first attach), so that a
    real-time loop that attaches a ring later (the simulation's, told the recording's truth
    ring while it serves SYNCs) spends ≈ 0.15 ms on it, not ≈ 0.5 ms."""
    try:
        resource_tracker.ensure_running()
    except (AttributeError, OSError):
        pass


def check_size_limit(size: int) -> None:
    """OSError (EFBIG) when the file-size limit (``ulimit -f``, which shared memory obeys too)
    is below ``size``: refused here, because Python's shared_memory, failing in its
    ``ftruncate``, unregisters a block it never registered and its resource tracker prints a
    traceback."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and size > limit:
        raise OSError(errno.EFBIG, f"File too large: a shared-memory ring of {size} bytes, "
                                   f"over the file-size limit of {limit} bytes (ulimit -f)")


class _Ring:
    """A block of shared memory: header words and ``capacity`` slots of ``slot`` bytes."""

    def __init__(self, capacity: int | None = None, slot: int | None = None,
                 name: str | None = None, extra: int = 0) -> None:
        if name is None:
            size = HEADER_BYTES + capacity * slot + extra
            check_size_limit(size)
            self.shm = shared_memory.SharedMemory(create=True, size=size)
            CREATED.add(self.shm._name)
            self.header = np.ndarray((8,), np.int64, self.shm.buf)
            self.header[:] = 0
            self.header[CAPACITY] = capacity
            self.header[SLOT] = slot
            self.owner = True
        else:
            self.shm = shared_memory.SharedMemory(name=name)
            untrack(self.shm)  # the creator owns (and unlinks) the block, not this process
            self.header = np.ndarray((8,), np.int64, self.shm.buf)
            self.owner = False
        self.name = self.shm.name
        self.capacity = int(self.header[CAPACITY])
        self.slot = int(self.header[SLOT])

    @property
    def head(self) -> int:
        """Slots produced: the header's own word (compiled producers advance it too)."""
        return int(self.header[HEAD])

    @head.setter
    def head(self, value: int) -> None:
        self.header[HEAD] = value

    def free(self) -> int:
        return self.capacity - (self.head - int(self.header[TAIL]))

    def close(self) -> None:
        """Mark the ring finished (producer): the consumer drains what is left and stops."""
        self.header[CLOSED] = 1

    def release(self) -> None:
        """Drop this process's mapping (and, for the creator, the block itself)."""
        self.header = None
        for attr in ("rows", "raw", "slots"):
            if hasattr(self, attr):
                setattr(self, attr, None)
        try:
            self.shm.close()
            if self.owner:
                self.shm.unlink()
        except (FileNotFoundError, BufferError):
            pass


def _wait_for_room(ring: _Ring) -> None:
    """Lockstep: wait until the consumer has made room — while it is alive."""
    checks = 0
    while ring.head - int(ring.header[TAIL]) >= ring.capacity and not ring.header[CLOSED]:
        time.sleep(1e-4)
        checks += 1
        if checks % 100 == 0 and not ring.consumer_alive():
            return


class RecordRing(_Ring):
    """Fixed-width float64 cycle records. The producer fills the row :meth:`slot_index` names
    in place (the cycle kernel writes its record straight into shared memory) and calls
    :meth:`commit`. A full ring (the consumer a whole ring behind) hands out a spare row that
    is never published, and counts the record lost — or, with ``block_when_full`` (lockstep
    runs, which are not real time), waits for the consumer."""

    def __init__(self, capacity: int | None = None, width: int | None = None,
                 name: str | None = None, block_when_full: bool = False,
                 consumer_alive=lambda: True) -> None:
        # one spare row past the ring: where a record goes when the ring is full
        super().__init__(None if capacity is None else capacity,
                         None if width is None else 8 * width, name,
                         extra=0 if width is None else 8 * width)
        self.width = self.slot // 8
        self.rows = np.ndarray((self.capacity + 1, self.width), np.float64, self.shm.buf,
                               offset=HEADER_BYTES)
        self.block_when_full = block_when_full
        self.consumer_alive = consumer_alive  # a dead consumer never makes the producer wait
        self._spare = False

    def slot_index(self) -> int:
        """The row the next record goes to."""
        if self.head - int(self.header[TAIL]) >= self.capacity:
            if self.block_when_full:
                _wait_for_room(self)
            if self.head - int(self.header[TAIL]) >= self.capacity:
                self._spare = True
                return self.capacity
        self._spare = False
        return self.head % self.capacity

    def commit(self) -> None:
        """The row from :meth:`slot_index` is written: publish it (or count it lost)."""
        if self._spare:
            self.header[LOST] += 1
            return
        self.header[HEAD] += 1  # after the slot

    def put(self, row: np.ndarray) -> None:
        """Copy one record in and publish it."""
        self.rows[self.slot_index()] = row
        self.commit()

    def take(self, limit: int | None = None) -> np.ndarray:
        """(Consumer) a copy of the records produced since the last take, oldest first."""
        head, tail = int(self.header[HEAD]), int(self.header[TAIL])
        if limit is not None:
            head = min(head, tail + limit)
        if head <= tail:
            return self.rows[:0].copy()
        idx = np.arange(tail, head) % self.capacity
        out = self.rows[idx]  # fancy indexing copies
        self.header[TAIL] = head
        return out


class FrameRing(_Ring):
    """CAN frames as 24-byte slots (:data:`FRAME`)."""

    def __init__(self, capacity: int | None = None, name: str | None = None,
                 block_when_full: bool = False, consumer_alive=lambda: True) -> None:
        super().__init__(capacity, FRAME.size, name)
        self.raw = self.shm.buf
        # the slots as bytes, for compiled producers (exo_rt.bus.fastio.tap)
        self.slots = np.ndarray((self.capacity * FRAME.size,), np.uint8, self.shm.buf,
                                offset=HEADER_BYTES)
        self.block_when_full = block_when_full
        self.consumer_alive = consumer_alive
        self._pack = FRAME.pack_into

    def put(self, timestamp: float, arbitration_id: int, data: bytes, rx: bool,
            extended: bool = False, error: bool = False, bus: int = 0) -> None:
        """Copy one frame in (no allocation beyond the arguments) and publish it."""
        if self.head - int(self.header[TAIL]) >= self.capacity:
            if self.block_when_full:
                _wait_for_room(self)
            if self.head - int(self.header[TAIL]) >= self.capacity:
                self.header[LOST] += 1
                return
        flags = (RX if rx else 0) | (EXTENDED if extended else 0) | (ERROR if error else 0)
        self._pack(self.raw, HEADER_BYTES + (self.head % self.capacity) * FRAME.size,
                   timestamp, arbitration_id, flags, len(data), bus, data)
        self.header[HEAD] += 1  # after the slot

    def take(self, limit: int | None = None) -> list[tuple]:
        """(Consumer) the frames produced since the last take, at most ``limit``, oldest first:
        (t, id, flags, dlc, bus, data)."""
        head, tail = int(self.header[HEAD]), int(self.header[TAIL])
        if limit is not None:
            head = min(head, tail + limit)
        out = [FRAME.unpack_from(self.raw, HEADER_BYTES + (i % self.capacity) * FRAME.size)
               for i in range(tail, head)]
        self.header[TAIL] = head
        return out


# one short message: its time (s), its length, then UTF-8 bytes (a session event's JSON)
MESSAGE_HEAD = struct.Struct("<dI")
MESSAGE_SLOT = 1024  # bytes a slot holds, its head included


class MessageRing(_Ring):
    """Short messages (a time stamp and up to ``MESSAGE_SLOT`` − 12 bytes each): the rare
    events of a run that are not cycle records — the session's requests, answers and
    transitions, which go to run.mcap's ``/activity``. A message too long for a slot is
    refused (:meth:`put` returns False); a full ring counts it lost — or, with
    ``block_when_full`` (lockstep), waits for the consumer."""

    def __init__(self, capacity: int | None = None, name: str | None = None,
                 block_when_full: bool = False, consumer_alive=lambda: True) -> None:
        super().__init__(capacity, MESSAGE_SLOT, name)
        self.raw = self.shm.buf
        self.block_when_full = block_when_full
        self.consumer_alive = consumer_alive

    def put(self, t: float, data: bytes) -> bool:
        """Copy one message in and publish it; False: longer than a slot holds (not sent)."""
        if len(data) > MESSAGE_SLOT - MESSAGE_HEAD.size:
            return False
        if self.head - int(self.header[TAIL]) >= self.capacity:
            if self.block_when_full:
                _wait_for_room(self)
            if self.head - int(self.header[TAIL]) >= self.capacity:
                self.header[LOST] += 1
                return True
        at = HEADER_BYTES + (self.head % self.capacity) * MESSAGE_SLOT
        MESSAGE_HEAD.pack_into(self.raw, at, t, len(data))
        self.raw[at + MESSAGE_HEAD.size: at + MESSAGE_HEAD.size + len(data)] = data
        self.header[HEAD] += 1  # after the slot
        return True

    def take(self, limit: int | None = None) -> list[tuple[float, bytes]]:
        """(Consumer) the messages produced since the last take, oldest first: (t, bytes)."""
        head, tail = int(self.header[HEAD]), int(self.header[TAIL])
        if limit is not None:
            head = min(head, tail + limit)
        out = []
        for i in range(tail, head):
            at = HEADER_BYTES + (i % self.capacity) * MESSAGE_SLOT
            t, n = MESSAGE_HEAD.unpack_from(self.raw, at)
            out.append((t, bytes(self.raw[at + MESSAGE_HEAD.size: at + MESSAGE_HEAD.size + n])))
        self.header[TAIL] = head
        return out
