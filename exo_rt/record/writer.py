"""The recording process: drains the control process's rings to disk and shows live status.

Started by :class:`exo_rt.record.recording.Recording` (``python -m exo_rt.record.writer``) in its
own process, with its own interpreter and GIL, so that nothing in the control process packs a
log file or holds the GIL for long. Every ``FLUSH_S`` it takes what the rings hold:

- cycle records → appended to ``cycles.exolog`` (whose header the control process wrote);
- CAN frames → python-can's writer for the run's format (``.blf`` default, ``.asc``, ``.log``);
- both → ``run.mcap`` (typed JSON channels, :mod:`exo_rt.record.mcap_log`), through the
  Foxglove SDK's native writer, with ``foxglove-layout.json`` beside it, and the 3D scene made
  from the records (:mod:`exo_rt.record.scene`: the URDF, the links' transforms every cycle,
  the floor, the centre of mass, the ground reactions a world run records);
- a world run's truth (a fourth ring, written by the simulation: the pelvis, the feet's
  ground reactions, the seat) → joined to the records for run.mcap's scene and ``/world``
  and for live telemetry (:mod:`exo_rt.record.world_log`), never to the cycle log;
- the run's events (a third ring, of short messages) → appended to ``events.jsonl`` (before
  the cycle records taken with them; :mod:`exo_rt.record.events`), the session's to
  run.mcap's ``/activity`` too;
- with ``--live HOST:PORT``, every 5th record (200 Hz at 1 kHz) and every state change to a
  Foxglove WebSocket server (:mod:`exo_rt.record.telemetry`; read only, loopback by default);
- once a second, a status line (state, time, compute and wake p99 over the last second,
  overruns, worst tracking error) on stderr — rewritten in place on a terminal.

All of it costs the control thread nothing beyond its one record copy into shared memory.

What a crash can lose: at least every ``SYNC_S`` (of wall-clock time, and of run time: a
lockstep run is faster than real time), and at each mark of the events (every
:data:`~exo_rt.record.events.HAND_OVER_S` of run time), the cycle log, ``events.jsonl`` and
the CAN log are flushed and fsynced together and run.mcap's open chunk is closed and fsynced
— a power loss loses at most that much, and :func:`exo_rt.record.runfolder.recover` makes the
cut run.mcap whole again.

It stops when the control process closes the rings (after draining them), or when the control
process has died (its parent pid changes): then it drains what was handed over — at most the
cycle in flight is lost — and closes a readable file. At the end it writes ``recording.json``
(records and frames written, records lost, errors) and hands the same report to the control
process on its standard output (a line ``report {…}``: it arrives when the disk does not take
the file).

A write error on any file of the run (a full disk, a file-size limit, a read-only or
unwritable folder: ENOSPC, EFBIG, EROFS, EACCES …) stops the recording at once and whole: one
line on stderr, the files closed where they are (each readable up to there), nothing more
written; the rings are still drained (the control loop never waits for the disk, and never
sees the error), the status line and live telemetry go on. The report says when and why.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import time
from pathlib import Path

import can
import numpy as np

from exo_rt.processes import ARGS_ON_STDIN
from exo_rt.record import events as ev_file
from exo_rt.record.rings import (
    CLIENTS,
    CLOSED,
    ERROR,
    EXTENDED,
    LOST,
    RX,
    FrameRing,
    MessageRing,
    RecordRing,
)
from exo_rt.record.runfolder import describe, write_atomic

FLUSH_S = 0.02
# the most a drain takes of each ring at once (≈ 4 s of cycles, ≈ 3 s of a leg's frames):
# the writer's memory is bounded whatever its lag, and it still catches up (it drains again
# at once while a ring holds more)
ROWS_PER_DRAIN = 4096
FRAMES_PER_DRAIN = 16384
SYNC_S = 0.5  # flush + fsync of every file at least this often (wall clock and run time)


class Writer:
    def __init__(self, records: str, frames: str, out: Path, can_format: str,
                 channels: list[str], parent: int, status: bool, live: str | None = None,
                 live_remote: bool = False, mcap: bool = True,
                 messages: str | None = None, truth: str | None = None) -> None:
        self.rows = RecordRing(name=records)
        self.frames = FrameRing(name=frames)
        self.notes = MessageRing(name=messages) if messages else None  # the run's events
        self.assembler = ev_file.Assembler()
        self.events_fd: int | None = None  # events.jsonl, appended as the events come
        self.out = out
        self.parent = parent
        self.status = status
        self.channels = channels
        self.errors: list[str] = []
        self.rows_written = 0
        self.frames_written = 0
        self.last_t = 0.0  # t of the last record written to the cycle log
        self.stopped: dict | None = None  # a write error stopped the recording: when, why
        self.log = self.can = self.mcap = None
        self.mcap_messages: dict | None = None
        from exo_rt.record.recorder import read_header

        self.columns, self.meta = read_header(out / "cycles.exolog")
        self._window: list[np.ndarray] = []
        self._next_status = time.monotonic() + 1.0
        self._status_t, self._status_wall = 0.0, 0.0  # the last status line's t and wall time
        self._next_sync = time.monotonic() + SYNC_S
        self._sync_t = SYNC_S  # run time (s) of the next sync
        self._started = False  # the header's final metadata (where t = 0 is) read
        path = out / "cycles.exolog"
        try:
            self.log = open(path, "ab")  # noqa: SIM115 (closed in finish)
            if self.notes is not None:  # this run's alone (never through a planted link)
                path = out / "events.jsonl"
                self.events_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                                         | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            path = out / f"can{can_format}"
            self.can = can.Logger(str(path))
        except OSError as exc:
            self._stop(exc, path)
        self.scene = self._scene()  # the 3D scene (exo_rt.record.scene), or None
        self.world = self._world(truth)  # a world run's truth (exo_rt.record.world_log)
        if mcap and self.stopped is None:
            try:
                from exo_rt.record.mcap_log import McapLog

                self.mcap = McapLog(out / "run.mcap", self.columns, self.meta, channels,
                                    scene=self.scene, world=self.world)
            except OSError as exc:
                self._stop(exc, out / "run.mcap")
            except Exception as exc:  # no foxglove-sdk: the cycle log goes on
                self.errors.append(f"MCAP: {exc}")
        if self.stopped is None:
            try:
                from exo_rt.record.telemetry import layout

                write_atomic(out / "foxglove-layout.json",
                             layout(self.meta.get("joint_names", [])))
            except OSError as exc:
                self._stop(exc, out / "foxglove-layout.json")
            except Exception as exc:
                self.errors.append(f"Foxglove layout: {exc}")
        self.live = None
        if live is not None:  # errors go to the caller: asked for, it must be there
            from exo_rt.record.telemetry import LiveServer, parse_live

            host, port = parse_live(live, live_remote)
            columns, meta = (self.columns, self.meta) if self.world is None else \
                self.world.extend(self.columns, self.meta)  # (the scene's columns after)
            self.live = LiveServer(host, port, columns, meta, scene=self.scene)
        self.cpu0 = time.process_time()

    def _scene(self):
        """The run's 3D scene from its robot file; None (and a note in the report) where it
        cannot be drawn, or with ``EXO_RT_SCENE=0`` in the environment (to measure its cost,
        tools/bench_scene.py)."""
        if os.environ.get("EXO_RT_SCENE", "1") == "0":
            return None
        try:
            from exo_rt.record.scene import scene_for_run

            return scene_for_run(self.out, self.meta)
        except Exception as exc:  # the recording goes on without the scene
            self.errors.append(f"3D scene: {exc}")
            return None

    def _world(self, ring: str | None):
        """A world run's truth from the simulation's ring (its layout in the header), or
        None (and a note in the report) where there is none or it cannot be read."""
        if ring is None or "world" not in self.meta:
            return None
        try:
            from exo_rt.record.world_log import WorldLog

            return WorldLog(RecordRing(name=ring), self.meta, self.scene)
        except Exception as exc:  # the recording goes on without it
            self.errors.append(f"world truth: {exc}")
            return None

    def parent_alive(self) -> bool:
        return os.getppid() == self.parent

    def _start(self) -> None:
        """At the first record: the header now holds where the loop started (wall clock)."""
        self._started = True
        try:
            from exo_rt.record.recorder import read_header

            _, self.meta = read_header(self.out / "cycles.exolog")
        except (OSError, ValueError) as exc:
            self.errors.append(f"cycle log header: {exc}")
        if self.world is not None:
            self.world.set_origin(self.meta)
        for name in ("mcap", "live"):
            if getattr(self, name) is not None:
                self._sink(name, getattr(self, name).set_origin, self.meta)

    def _sink(self, name: str, call, *args) -> None:
        """MCAP and live telemetry: a failure is noted once and that sink stops (a write
        error of run.mcap stops the whole recording)."""
        try:
            call(*args)
        except Exception as exc:
            self.errors.append(f"{name}: {exc}")
            if name == "mcap":
                self.mcap_messages = dict(self.mcap.messages)
            setattr(self, name, None)
        if name == "mcap" and self.mcap is not None and self.mcap.error is not None:
            self._stop(self.mcap.error, self.mcap.path)

    def _stop(self, exc: OSError, path) -> None:
        """A write error: the recording stops here, whole (one line on stderr); the rings are
        still drained, the status line and live telemetry go on."""
        if self.stopped is not None:
            return
        what = describe(exc, path)
        self.stopped = {"t": round(self.last_t, 6), "error": what,
                        "errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))}
        line = (f"exo-rt: recording stopped at t = {self.last_t:.3f} s: {what} — the run goes "
                "on unrecorded; its files hold it up to there (run.mcap made whole by exo-rt "
                "recover, or when read)")
        try:
            # on a line of its own below a status line (this one's, or the console's)
            sys.stderr.write(("\n" if sys.stderr.isatty() else "") + line + "\n")
            sys.stderr.flush()
        except OSError:
            pass
        self._close_files()

    def _close_files(self) -> None:
        """Close the cycle log, the CAN log and run.mcap, quietly (after a write error each
        is left as far as it got; a file the error did not touch may still close whole)."""
        for f in (self.log, self.can):
            if f is None:
                continue
            try:
                f.close() if f is self.log else f.stop()
            except Exception:  # the full disk again: the file stays as it is
                pass
        self.log = self.can = None
        self._close_events()
        if self.mcap is not None:
            self.mcap_messages = dict(self.mcap.messages)
            try:
                self.mcap.close(self.meta)
            except Exception:
                pass
            self.mcap = None

    def _close_events(self) -> None:
        if self.events_fd is not None:
            try:
                os.close(self.events_fd)
            except OSError:
                pass
            self.events_fd = None

    def _events(self, notes) -> None:
        """The run's events taken from the ring: their lines appended to events.jsonl (one
        write), the session's to run.mcap's and live telemetry's ``/activity``."""
        lines, activity = self.assembler.add(notes)
        if lines and self.events_fd is not None:
            try:
                view = memoryview(lines)
                while view:
                    view = view[os.write(self.events_fd, view):]
            except OSError as exc:
                self._stop(exc, self.out / "events.jsonl")
        if activity and self.mcap is not None:
            self._sink("mcap", self.mcap.activity, activity)
        if activity and self.live is not None:
            self._sink("live", self.live.activity, activity)

    def _sync(self) -> None:
        """Flush and fsync every file, close run.mcap's open chunk: what a power loss can
        lose ends here."""
        path = self.out / "cycles.exolog"
        try:
            if self.log is not None:
                os.fsync(self.log.fileno())
            if self.events_fd is not None:
                path = self.out / "events.jsonl"
                os.fsync(self.events_fd)
            if self.can is not None:
                path = self.can.file.name
                if hasattr(self.can, "_flush"):  # python-can's BLF writer: the open container
                    self.can._flush()
                self.can.file.flush()
                os.fsync(self.can.file.fileno())
        except OSError as exc:
            self._stop(exc, path)
            return
        if self.mcap is not None:
            self._sink("mcap", self.mcap.flush)

    def drain(self) -> bool:
        """Write what the rings hold, a bounded batch of each (:data:`ROWS_PER_DRAIN`,
        :data:`FRAMES_PER_DRAIN`): the process's memory does not grow with how far behind it
        fell (a held-up writer once took 8 s of frames as one list). True: more is waiting."""
        rows = self.rows.take(ROWS_PER_DRAIN)
        # the events handed over before these records were published, written before them:
        # a crash never leaves a record whose cycle's events are missing
        notes = self.notes.take() if self.notes is not None else ()
        if len(rows) and not self._started:
            self._start()
        if notes:
            self._events(notes)
        if len(rows):
            if self.log is not None:
                try:
                    self.log.write(rows.tobytes())
                    self.log.flush()
                    self.rows_written += len(rows)
                    self.last_t = float(rows[-1, 0])
                except OSError as exc:
                    self._stop(exc, self.out / "cycles.exolog")
            if self.status:
                self._window.append(rows)
            if self.world is not None:  # the world's truth after each record's columns
                rows = self.world.join(rows)
            if self.mcap is not None:
                self._sink("mcap", self.mcap.rows, rows)
            if self.live is not None:
                self._sink("live", self.live.rows, rows)
        if self.live is not None:  # for --live-wait: someone watching yet?
            self.rows.header[CLIENTS] = int(self.live.watched())
        frames = self.frames.take(FRAMES_PER_DRAIN)
        more = len(rows) == ROWS_PER_DRAIN or len(frames) == FRAMES_PER_DRAIN
        if frames and self.mcap is not None:
            self._sink("mcap", self.mcap.frames, frames)
        for t, arb, flags, dlc, bus, data in frames:
            if self.can is None:
                break
            msg = can.Message(timestamp=t, arbitration_id=arb, data=data[:dlc],
                              is_extended_id=bool(flags & EXTENDED),
                              is_error_frame=bool(flags & ERROR), is_rx=bool(flags & RX),
                              channel=self.channels[bus] if bus < len(self.channels) else bus,
                              check=False)
            try:
                self.can.on_message_received(msg)
                self.frames_written += 1
            except OSError as exc:
                self._stop(exc, self.can.file.name)
            except ValueError as exc:
                if len(self.errors) < 10:
                    self.errors.append(f"CAN log: {exc}")
        now = time.monotonic()
        if self.stopped is None and (now >= self._next_sync or self.last_t >= self._sync_t
                                     or self.assembler.marks):
            self._next_sync = now + SYNC_S
            self._sync_t = self.last_t + SYNC_S
            self._sync()
        return more

    def show_status(self) -> None:
        now = time.monotonic()
        if not self.status or now < self._next_status or not self._window:
            return
        self._next_status = now + 1.0
        rows = np.concatenate(self._window)
        self._window.clear()
        c = self.columns
        last = rows[-1]
        states = self.meta.get("states", [])
        state = int(last[c["state"][0]])
        q = rows[:, c["q"][0]: c["q"][1]]
        qr = rows[:, c["q_ref"][0]: c["q_ref"][1]]
        running = rows[:, c["state"][0]] == states.index("RUN") if "RUN" in states else None
        err = 0.0
        if running is not None and running.any():
            err = float(np.degrees(np.nanmax(np.abs(qr[running] - q[running]))))
        head = (f"{states[state] if state < len(states) else state:<9} cycle "
                f"{int(last[c['cycle'][0]]):7d}  t {last[0]:7.2f} s")
        if self.meta.get("bus") in ("sim", "replay"):  # lockstep: simulated time, no deadlines
            pace = (last[0] - self._status_t) / max(now - self._status_wall, 1e-9) \
                if self._status_wall else float("nan")
            line = f"{head}  simulated, {pace:5.1f}× real time  worst error {err:5.2f}°"
        else:  # real time: the loop's own figures over the last second
            comp = np.percentile(rows[:, c["compute_us"][0]], 99)
            wake = np.percentile(rows[:, c["wake_us"][0]], 99)
            line = (f"{head}  compute p99 {comp:6.1f} µs  wake p99 {wake:6.1f} µs  overruns "
                    f"{int(last[c['overruns'][0]])}  worst error {err:5.2f}°")
        self._status_t, self._status_wall = float(last[0]), now
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finished(self) -> bool:
        return bool(self.rows.header[CLOSED]) and bool(self.frames.header[CLOSED]) and (
            self.notes is None or bool(self.notes.header[CLOSED]))

    def finish(self, reason: str) -> None:
        while self.drain():
            pass
        if self.log is not None:
            try:
                os.fsync(self.log.fileno())
                self.log.close()
                self.log = None
            except OSError as exc:
                self._stop(exc, self.out / "cycles.exolog")
        if self.events_fd is not None:
            try:
                os.fsync(self.events_fd)
            except OSError as exc:
                self._stop(exc, self.out / "events.jsonl")
            self._close_events()
        if self.can is not None:
            try:
                self.can.stop()
                self.can = None
            except OSError as exc:
                self._stop(exc, self.can.file.name)
            except ValueError as exc:
                self.errors.append(f"CAN log: {exc}")
        if self.mcap is not None:
            try:
                from exo_rt.record.recorder import read_header

                _, meta = read_header(self.out / "cycles.exolog")
                self.mcap.close(meta)
                self.mcap_messages = self.mcap.messages
                if self.mcap.error is not None:
                    self._stop(self.mcap.error, self.mcap.path)
            except Exception as exc:
                self.errors.append(f"mcap: {exc}")
        report = {"records": self.rows_written, "frames": self.frames_written,
                  "records_lost": int(self.rows.header[LOST]),
                  "frames_lost": int(self.frames.header[LOST]),
                  "messages_lost": int(self.notes.header[LOST]) if self.notes else 0,
                  "last_t": self.last_t, "ended": reason, "errors": self.errors}
        if self.stopped is not None:
            report["stopped"] = self.stopped
        if self.mcap_messages is not None:
            # run.mcap's messages per topic: its /events are the state changes inside the
            # recorded cycles — not events.jsonl, the controller's every event of the run
            # (BOOT and CONFIGURE before the first record, SHUTDOWN after the last, faults …)
            report["mcap_messages"] = self.mcap_messages
        if self.live is not None:
            report["live"] = {"url": self.live.url, "records_sent": self.live.sent,
                              "every": self.live.every}
            self.live.close()
        # CPU of this process (all its threads: the SDK's too) since it was ready
        report["cpu_s"] = round(time.process_time() - self.cpu0, 4)
        try:  # whole or not at all (after a full disk, likely not)
            write_atomic(self.out / "recording.json", json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            report["errors"].append(describe(exc, self.out / "recording.json"))
        try:  # the control process reads it here (when the file could not be written too)
            os.write(sys.stdout.fileno(), ("report " + json.dumps(report) + "\n").encode())
        except (OSError, ValueError):
            pass  # the control process is gone
        if self.status and sys.stderr.isatty():
            sys.stderr.write("\r\033[K")  # the status line cleared: the run's lines follow
            sys.stderr.flush()
        self.rows.release()
        self.frames.release()
        if self.notes is not None:
            self.notes.release()
        if self.world is not None:
            self.world.ring.release()

    def run(self) -> str:
        while True:
            done = self.finished()
            more = self.drain()
            while more and not done:  # behind: catch up before the next look
                more = self.drain()
            self.show_status()
            if done:
                return "closed"
            if not self.parent_alive():
                return "control process gone"
            time.sleep(FLUSH_S)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == [ARGS_ON_STDIN]:  # started ahead: imports done, the arguments come now
        from exo_rt.model import robot_yaml  # noqa: F401  (the scene's robot file)
        from exo_rt.record import mcap_log, recorder, scene, telemetry  # noqa: F401  (ahead)

        line = sys.stdin.readline()
        if not line:  # not needed after all
            return 0
        argv = json.loads(line)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", required=True)
    ap.add_argument("--frames", required=True)
    ap.add_argument("--messages", default=None, help="the session's events' ring")
    ap.add_argument("--truth", default=None, help="a world run's truth ring (the simulation's)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--can-format", default=".blf")
    ap.add_argument("--channels", default="")
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--status", action="store_true")
    ap.add_argument("--live", metavar="[HOST:]PORT", help="serve live telemetry (Foxglove)")
    ap.add_argument("--live-remote", action="store_true",
                    help="allow --live on an address other than loopback")
    ap.add_argument("--no-mcap", action="store_true", help="do not write run.mcap")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl-C is the controller's safe stop
    try:
        writer = Writer(args.records, args.frames, args.out, args.can_format,
                        args.channels.split(",") if args.channels else [], args.parent,
                        args.status, live=args.live, live_remote=args.live_remote,
                        mcap=not args.no_mcap, messages=args.messages, truth=args.truth)
    except Exception as exc:
        if args.live is None:
            raise
        # the ready line the control process waits for, with the reason (it stops the run)
        print(f"serving no live telemetry: {exc}", flush=True)
        return 3
    if writer.live is not None:
        from exo_rt.record.telemetry import is_loopback, remote_warning

        if not is_loopback(writer.live.host):
            print(remote_warning(writer.live.host, writer.live.port), file=sys.stderr)
        print(f"live telemetry on {writer.live.url} (Foxglove: Open connection → Foxglove "
              f"WebSocket; layout {args.out / 'foxglove-layout.json'})", file=sys.stderr,
              flush=True)
        print(f"serving live telemetry on {writer.live.url}", flush=True)
    else:
        print("ready", flush=True)
    reason = "closed"
    try:
        reason = writer.run()
    finally:
        writer.finish(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
