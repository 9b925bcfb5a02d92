"""A run's record: its folder (claimed for this run alone), the recording process, the
guide, the live viewer's wait, the events (appended to ``events.jsonl`` by the recording
process as the run goes, :mod:`exo_rt.record.events`; rewritten whole at the end) and the
summary written at the end — whatever else failed (a full disk, a read-only folder: the run
goes on unrecorded, and says so).

The controller's report step; nothing here is on the cycle's path (the cycle writes into
the recording's shared-memory rings, :mod:`exo_rt.record.rings`).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from exo_rt.cycle import safety
from exo_rt.cycle.states import STATES
from exo_rt.record import events as events_file
from exo_rt.record import runfolder
from exo_rt.record.mcap_log import ACTIVITY_EVENTS as SESSION_EVENTS
from exo_rt.runtime.buses import BusSet
from exo_rt.runtime.config import TopConfig
from exo_rt.runtime.options import RunOptions
from exo_rt.sim import world_truth


@dataclass(frozen=True)
class RecordingStart:
    """What a run's recording starts from: its ``top`` config, its ``options``
    (:class:`~exo_rt.runtime.options.RunOptions`: the status line, live telemetry), its
    ``bus_spec``, ``duration`` (s), ``start_pose`` (rad; None: the default) and
    ``injections`` (as recorded in its metadata), its ``bus_set`` (their clock, a world's
    truth), whether it runs on the wall clock (``realtime``), the CAN log's ``can_format``,
    the helper processes' ``cpus``, and the run's ``setup_lines`` (appended to)."""

    top: TopConfig
    options: RunOptions
    bus_spec: str | dict
    duration: float
    start_pose: list[float] | None
    injections: tuple
    bus_set: BusSet
    realtime: bool
    can_format: str
    cpus: set[int]
    setup_lines: list[str]


class RunRecord:
    """The run folder ``out_dir`` (None: nothing recorded) of one controller run."""

    def __init__(self, out_dir: Path | None, events: list[dict]) -> None:
        self.out_dir = out_dir
        self.events = events
        self.recording = None
        self.error: str | None = None  # why this run is not recorded (from its start)
        self.folder = None
        self.frame_epoch = 0.0
        self.session = None  # the run's session: its part of the summary

    def start(self, run: RecordingStart, session=None):
        """Claim the folder (a live run's: refused here, before any bring-up) and start the
        recording process of the ``run`` (its joints, buses, clock, options); returns the
        recording (None: not recording). The ``session``'s events follow the run's into
        run.mcap's ``/activity``, and its summary the run's."""
        self.session = session
        if self.out_dir is None:
            return None
        top = run.top
        meta = {"joint_names": list(top.robot.joint_names), "rate_hz": top.rate_hz,
                "config": str(top.path), "config_sha256": top.sha256,
                "controller": str(top.controller.source), "law": top.controller.law,
                "bus": run.bus_spec, "duration_s": run.duration, "start_pose": run.start_pose,
                "injections": [[i.kind, i.joint, i.t, i.duration] for i in run.injections],
                "injections_from": "RUN",  # their t: s from the start of RUN
                "states": list(STATES), "causes": list(safety.CAUSES), "wall_boot": time.time()}
        from exo_rt.record.recording import Recording

        self.folder = folder = runfolder.claim(self.out_dir)
        folder.take_over()  # an earlier run's files there: removed, this run replaces them
        if folder.error is not None:  # a full disk, a read-only folder: the run goes on
            self.not_recording(folder.error)
            return None
        # lockstep: every CAN frame stamped on one clock, the simulated time from this epoch
        lockstep, o = not run.realtime, run.options
        self.frame_epoch = meta["wall_boot"] - (run.bus_set.clock() if lockstep else 0.0)
        # a world run's truth (the simulation's pelvis, ground reactions, seat): its own ring
        truth = world_truth.layout(top, run.bus_set)
        try:
            self.recording = rec = Recording(
                self.out_dir, top.robot.nq, meta, can_format=run.can_format,
                channels=[b.channel for b in top.buses], lockstep=lockstep,
                status=o.status, cpus=run.cpus, live=o.live, live_remote=o.live_remote,
                truth=truth)
        except OSError as exc:  # e.g. a full disk: the run goes on, unrecorded
            self.not_recording(runfolder.describe(exc, exc.filename or self.out_dir))
            return None
        if rec.truth is not None:  # the simulation hands its rows over from now on
            world_truth.attach(run.bus_set, rec.truth, self.frame_epoch)
        rec.follow(self.events)
        run.setup_lines.append(f"recording process {rec.process.pid}: {rec.process.placement}")
        if rec.live_url:
            run.setup_lines.append(f"live telemetry on {rec.live_url}")
        return rec

    def tap(self, drives, lockstep: bool, clock) -> None:
        """Every bus's frames, both ways, into the recording's CAN log (lockstep: stamped on
        the simulated clock from the run's epoch)."""
        rec = self.recording
        if rec is None:
            return
        for i, d in enumerate(drives):
            rec.tap(d.bus, i, *((clock, self.frame_epoch) if lockstep else ()))
            d.port.tap = rec.frames
            d.port.channel_index = i

    def not_recording(self, why: str) -> None:
        """The run folder cannot be written at the start: one line now, an event, and the
        run goes on unrecorded (the wearer's safety does not depend on the disk)."""
        self.error = why
        self.events.append({"cycle": 0, "t": 0.0, "event": "recording_stopped", "error": why})
        print(f"exo-rt: not recording this run: {why} — the run goes on unrecorded",
              file=sys.stderr, flush=True)

    def write_guide(self) -> None:
        """The run folder's README.md (each file, what it holds, how to open it)."""
        if self.out_dir is None:
            return
        from exo_rt.record import guide

        try:
            guide.write(self.out_dir)
        except OSError as exc:  # a full disk: the run goes on (the recording says so too)
            self.events.append({"event": "guide_error", "error": str(exc)})

    def wait_for_viewer(self, seconds: float) -> None:
        """``--live-wait S``: before any drive is enabled, wait up to S s for a Foxglove
        client to subscribe (the recording process serves it and says when one does)."""
        rec = self.recording
        if not seconds or rec is None or not rec.live_url:
            return
        from exo_rt.record.rings import CLIENTS

        print(f"live: waiting up to {seconds:g} s for a Foxglove client on "
              f"{rec.live_url} (Open connection → Foxglove WebSocket; --live-wait 0: start "
              "at once)", file=sys.stderr, flush=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end and not rec.records.header[CLIENTS]:
            time.sleep(0.02)  # (nothing enabled yet, no motor power: nothing to watch)
        watched = bool(rec.records.header[CLIENTS])
        self.events.append({"cycle": 0, "event": "live", "client": watched})
        print("live: client connected, starting" if watched else
              f"live: no client after {seconds:g} s, starting anyway",
              file=sys.stderr, flush=True)

    def close(self, drives) -> None:
        """The taps off; the recording drained and closed (its events kept)."""
        if self.recording is None:
            return
        for d in drives:
            d.port.tap = None
        self.recording.close()
        self.events.extend(self.recording.events)

    def summary_part(self) -> dict:
        """What the summary says of the recording: counts, and what stopped or failed."""
        out: dict = {}
        rec = self.recording
        if rec is not None:
            out = {"records": rec.report.get("records", 0), "frames": rec.report.get("frames", 0),
                   "records_lost": rec.report.get("records_lost", 0),
                   "stopped_at_s": rec.stopped_at}
        if self.error is not None:
            out.update(recorded=False, error=self.error)
        stop = next((e for e in self.events if e.get("event") == "recording_stopped"), None)
        if stop is not None and self.error is None:
            out["stopped"] = {"t": stop.get("t"), "error": stop.get("error")}
        errors = [e["error"] for e in self.events if e.get("event") == "recording_error"]
        if errors:
            out["errors"] = errors
        return out

    def write(self, summary: dict) -> Path | None:
        """The run's events (the whole list, without the recording's marks), then its
        summary (with what failed: the recording, a file; ``recording.events``: the lines of
        events.jsonl, which replay checks), each written whole or not at all; then the folder
        is let go. Nothing here raises: a file the disk does not take is said on stderr, with
        the events it would have held. The summary gains the session's part
        (:func:`exo_rt.record.activity.summary`)."""
        if self.session is not None:
            from exo_rt.record import activity

            summary["session"] = activity.summary(self.session)
        out_dir = self.out_dir
        if out_dir is None:
            return None
        not_written: list[str] = []
        for name in ("events.jsonl", "summary.json"):
            if name == "events.jsonl":
                text = b"".join(events_file.line(e) for e in self.events)
            else:
                if not_written:
                    summary["files_not_written"] = list(not_written)
                text = json.dumps(summary, indent=2) + "\n"
            try:
                runfolder.write_atomic(out_dir / name, text)
            except OSError as exc:
                not_written.append(runfolder.describe(exc, out_dir / name))
                continue
            if name == "events.jsonl" and isinstance(summary.get("recording"), dict):
                summary["recording"]["events"] = len(self.events)
        if self.folder is not None:
            self.folder.release()
        if not_written:
            summary["files_not_written"] = not_written
            events_lost = not_written[0].startswith(f"cannot write {out_dir / 'events.jsonl'}")
            # the run's own events (faults, the recording stopped …) before the session's
            # (requests and answers: many, and in events.jsonl's place they would hide those)
            ev = [e for e in self.events if e.get("event") != "state"]
            shown = ([e for e in ev if e.get("event") not in SESSION_EVENTS]
                     + [e for e in ev if e.get("event") in SESSION_EVENTS])[:10]
            print(f"exo-rt: {'; '.join(not_written)}" + (
                " — the run's events:" if events_lost and shown
                else " (the events are in events.jsonl)"), file=sys.stderr)
            for e in shown if events_lost else ():
                print(f"  {json.dumps(e)}", file=sys.stderr)
        return out_dir
