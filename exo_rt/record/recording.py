"""The control process's side of recording a run: shared-memory rings and the recording
process that drains them (:mod:`exo_rt.record.writer`).

Per cycle the control thread does one record copy (the cycle kernel writes its record straight
into the ring's next row) and, per CAN frame, one 24-byte copy (the bus ports' tap). No Python
object per frame, no lock, no file: a slow or full disk, or a dead recording process, never
reaches the loop. The recording process is checked once a second (a ``waitpid``): when it has
died, :attr:`stopped_at` is the last record time it had written and the run goes on unrecorded.
A write error stops the recording in the recording process (one line there); its report
(:meth:`close`) says when and why, and becomes a ``recording_stopped`` event.

The run's events (state changes, faults, the session's requests, answers, transitions,
strides: a few a second at most) go through a third ring, of short messages: the run's event
list is followed (:meth:`Recording.follow`) and what was added is handed over at the check —
every :data:`~exo_rt.record.events.HAND_OVER_S` of run time, between two cycles — and at the
end, never in the cycle; the recording process appends them to ``events.jsonl`` (each check's
with a mark: :mod:`exo_rt.record.events`) and the session's to run.mcap's ``/activity``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import can

from exo_rt.errors import ConfigError
from exo_rt.processes import Helper
from exo_rt.record import events as ev_file
from exo_rt.record.mcap_log import ACTIVITY_EVENTS
from exo_rt.record.recorder import cycle_columns, row_width, update_header, write_header
from exo_rt.record.rings import MESSAGE_HEAD, MESSAGE_SLOT, FrameRing, MessageRing, RecordRing

RECORD_RING = 1 << 14  # records: 16 s at 1 kHz before a stalled writer loses any
FRAME_RING = 1 << 17  # CAN frames
MESSAGE_RING = 1 << 9  # the run's events handed over at once (a check's, at most)
TRUTH_RING = 1 << 14  # a world run's truth rows from the simulation (one a period)


HAND_PER_CYCLE = 16  # events handed over in one call at most (a cycle's share)

class Recording:
    """Rings + recording process for the run folder ``out``."""

    def __init__(self, out: Path, n_joints: int, meta: dict, *, can_format: str = ".blf",
                 channels: list[str], lockstep: bool, status: bool, cpus: set[int],
                 live: str | None = None, live_remote: bool = False,
                 truth: dict | None = None) -> None:
        """``truth``: a world run's truth layout (:func:`exo_rt.sim.world_truth.layout`): its
        rows come from the simulation through a ring of their own (:attr:`truth`), the
        recording process joins them to the records (:mod:`exo_rt.record.world_log`)."""
        self.out = Path(out)
        self.columns = cycle_columns(n_joints)
        self.width = row_width(self.columns)
        self.events: list[dict] = []
        self.stopped_at: float | None = None
        self.report: dict = {}
        self.meta = dict(meta)
        if truth is not None:  # the world's truth: its layout in the header
            self.meta["world"] = {k: v for k, v in truth.items() if k != "width"}
        try:
            write_header(self.out / "cycles.exolog", self.columns, self.meta)
        except OSError as exc:  # a full disk: no cycle log at all, not a header cut short
            try:
                (self.out / "cycles.exolog").unlink()
            except OSError:
                pass
            raise OSError(exc.errno, exc.strerror, str(self.out / "cycles.exolog")) from None
        self.records = RecordRing(RECORD_RING, self.width, block_when_full=lockstep,
                                  consumer_alive=self._alive)
        try:
            self.frames = FrameRing(FRAME_RING, block_when_full=lockstep,
                                    consumer_alive=self._alive)
        except OSError:
            self.records.release()
            raise
        try:
            self.notes = MessageRing(MESSAGE_RING, block_when_full=lockstep,
                                     consumer_alive=self._alive)
        except OSError:
            self.records.release()
            self.frames.release()
            raise
        self.truth = None  # the world's truth rows (a world run's simulation writes them)
        if truth is not None:
            try:
                self.truth = RecordRing(TRUTH_RING, truth["width"], block_when_full=lockstep,
                                        consumer_alive=self._alive)
            except OSError:
                for ring in (self.records, self.frames, self.notes):
                    ring.release()
                raise
        self._followed: list[dict] = []  # the run's events (the session's go to /activity)
        self._handed = 0  # how many of them were looked at
        self.process = None
        args = ["--records", self.records.name, "--frames", self.frames.name,
                "--messages", self.notes.name,
                "--out", str(self.out), "--can-format", can_format,
                "--channels", ",".join(channels), "--parent", str(os.getpid())]
        if self.truth is not None:
            args += ["--truth", self.truth.name]
        if live is not None:  # live telemetry ([HOST:]PORT), served by the recording process
            args += ["--live", live] + (["--live-remote"] if live_remote else [])
        self.process = Helper("recording", "exo_rt.record.writer",
                              args + (["--status"] if status else []), cpus=cpus,
                              wait=live is not None)  # a live port: known before anything moves
        self.live_url: str | None = None
        self._up = False
        if live is not None:
            self.ready()

    def ready(self) -> None:
        """Wait until the recording process is up (the frames of the bring-up wait in the
        rings meanwhile); a live-telemetry port it could not open ends the run here."""
        if self._up:
            return
        ready = self.process.wait_ready()
        self._up = True
        if ready.startswith("serving live telemetry on "):
            self.live_url = ready.rsplit(" ", 1)[1]
        elif ready.startswith("serving no live telemetry"):  # asked for, it must be there
            self.process.wait(5.0)
            for ring in self._rings():
                ring.release()
            raise ConfigError(ready.split(": ", 1)[-1], None,
                              "choose another --live port, or run without --live")

    def _rings(self) -> list:
        return [self.records, self.frames, self.notes] + (
            [self.truth] if self.truth is not None else [])

    def _alive(self) -> bool:
        return self.process is None or self.process.alive()

    def update_meta(self, **items) -> None:
        """Add to the cycle log's metadata (before the loop: e.g. the posture after enabling)."""
        self.meta.update(items)
        try:
            if not update_header(self.out / "cycles.exolog", self.columns, self.meta):
                self.events.append({"event": "recording_error",
                                    "error": "metadata too long for the header"})
        except OSError as exc:
            self.events.append({"event": "recording_error", "error": str(exc)})

    def follow(self, events: list[dict]) -> None:
        """The run's event list: each event to events.jsonl, the session's to run.mcap's
        ``/activity`` too."""
        self._followed, self._handed = events, 0

    def pending(self) -> bool:
        """Events wait to be handed over (one comparison: the controller asks every cycle)."""
        return len(self._followed) > self._handed

    def hand_over(self, k: int | None = None, t: float = 0.0, limit: int = HAND_PER_CYCLE
                  ) -> None:
        """The events added since the last call, at most ``limit`` of them (a cycle's share:
        a flood of events never makes one cycle long — the controller hands over a share
        every cycle they wait), into the message ring (JSON lines, at their cycle's time;
        :func:`exo_rt.record.events.parts`), then — with ``k``, the cycle that just ended,
        and none left waiting — the mark that every event of cycles ≤ k is handed over. In
        real time a ring without room for an event is never waited for: the rest wait for
        the next call (and no mark goes)."""
        events, ring = self._followed, self.notes
        room = MESSAGE_SLOT - MESSAGE_HEAD.size
        for i in range(self._handed, min(len(events), self._handed + limit)):
            e = events[i]
            pieces = ev_file.parts(e, e.get("event") in ACTIVITY_EVENTS, room)
            if not ring.block_when_full and len(pieces) + 1 > ring.free():
                return
            at = float(e.get("t", 0.0)) if isinstance(e.get("t"), int | float) else 0.0
            for piece in pieces:
                ring.put(at, piece)
            self._handed = i + 1
        if k is not None and self._handed == len(events) and \
                (ring.block_when_full or ring.free() > 0):
            ring.put(t, ev_file.mark(k, t))

    def check(self, t: float) -> bool:
        """(Every :data:`~exo_rt.record.events.HAND_OVER_S` of run time, at the end of the
        cycle at ``t`` s) is the recording process alive? Notes when it stopped. The events
        since the last check are handed over, with their mark."""
        if self.stopped_at is None and not self.process.alive():
            self.stopped_at = t
            self.records.block_when_full = self.frames.block_when_full = False  # never wait
            self.notes.block_when_full = False
            if self.truth is not None:
                self.truth.block_when_full = False
            self.events.append({"t": round(t, 6), "event": "recording_stopped",
                                "exit_code": self.process.proc.returncode})
        self.hand_over(int(round(t * float(self.meta.get("rate_hz", 1000.0)))), t)
        return self.stopped_at is None

    def tap(self, bus: can.BusABC, index: int, clock=None, epoch: float = 0.0) -> None:
        """Record what ``bus`` sends and receives through python-can's own API (bring-up; the
        lockstep loop). Every frame of the CAN log is on one clock: with ``clock`` (the
        lockstep bus's simulated time, s) a frame is stamped ``epoch`` + simulated time, sent
        ones at their sending and received ones at their own (simulated) stamp; without it,
        by its own stamp or the wall clock (real time, where both are the wall clock)."""
        send, recv, ring = bus.send, bus.recv, self.frames

        def send_recorded(msg, timeout=None):
            send(msg, timeout)
            t = epoch + clock() if clock is not None else msg.timestamp or _now()
            ring.put(t, msg.arbitration_id, bytes(msg.data), False,
                     msg.is_extended_id, msg.is_error_frame, index)

        def recv_recorded(timeout=None):
            msg = recv(timeout)
            if msg is not None:  # (a simulated device's reply may carry no time stamp)
                t = epoch + msg.timestamp if clock is not None else msg.timestamp or _now()
                ring.put(t, msg.arbitration_id, bytes(msg.data), True,
                         msg.is_extended_id, msg.is_error_frame, index)
            return msg

        bus.send = send_recorded
        bus.recv = recv_recorded

    def close(self, timeout: float = 60.0) -> None:
        """Close the rings; the recording process drains them, writes its report and ends.
        The report comes on its standard output (``report {…}``; recording.json when that
        line is missing); a write error it met becomes a ``recording_stopped`` event."""
        if self.process.alive():
            self.hand_over(limit=len(self._followed))  # (all that is left)
        for ring in self._rings():
            ring.close()
        proc = self.process.proc
        if self.process.alive():
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        report = None
        if proc.poll() is not None and proc.stdout is not None:
            try:
                for line in proc.stdout.read().splitlines():
                    if line.startswith("report "):
                        report = json.loads(line[len("report "):])
            except (OSError, ValueError):
                report = None
        self.process.stop()
        if report is None:
            try:
                report = json.loads((self.out / "recording.json").read_text())
            except (OSError, ValueError):
                report = {"ended": "recording process died", "errors": []}
        self.report = report
        for err in report.get("errors", []):
            self.events.append({"event": "recording_error", "error": err})
        stop = report.get("stopped")
        if stop is not None:
            if self.stopped_at is None:
                self.stopped_at = stop.get("t")
            self.events.append({"t": stop.get("t"), "event": "recording_stopped",
                                "error": stop.get("error"), "errno": stop.get("errno")})
        for ring in self._rings():
            ring.release()


def _now() -> float:
    import time

    return time.time()
