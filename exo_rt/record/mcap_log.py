"""A run in MCAP (``run.mcap``): the container that Foxglove and PlotJuggler open.

The recording process (:mod:`exo_rt.record.writer`) writes it beside the cycle log, through the
Foxglove SDK's native MCAP writer; ``exo-rt export --mcap`` writes it for older runs; replay
reads it back (:func:`read_mcap`) when a run folder has no cycle log. Channels (JSON messages
with a JSON schema, so any MCAP tool can decode them):

=========== =============== ==========================================================
topic       one message per fields
=========== =============== ==========================================================
/joints     cycle           t, cycle; q, qd, q_ref, current, command, torque, flags,
                            qd_ref — each an object keyed by joint name (Foxglove path
                            ``/joints.q.hip``)
/state      cycle           t, cycle, state (name), state_code, cause (name), cause_code,
                            board, overrun_streak, phase (the gait's, in strides: its
                            whole part counts them), stride (strides counted)
/timing     cycle           t, cycle, wake_us, compute_us, overruns, sample_t
/assistance cycle           t, cycle, gait_phase (the wearer's estimated phase, strides,
                            in [0, 1)), stride_hz (the estimated stride frequency, Hz),
                            walking (0–1), heels (heel strikes the estimate took); level
                            (assistance, 0–1), winding (the motor winding's modelled
                            temperature, °C), derate (the current limit's factor, 0–1),
                            drive_temp (the drive's own reading, °C; null: none), each an
                            object keyed by joint name (``/assistance.winding.hip``)
/can        CAN frame       t, id, dlc, data (bytes), rx, extended, error, bus
/events     state change    t, cycle, event ("state"), state, from, cause
/activity   session event   t, cycle, event (request | finished | activity | script_stalled)
                            and the event's own fields, as in events.jsonl (docs/sessions.md)
/world      cycle           a world run's only: the simulation's truth — pelvis pose, each
                            foot's ground reaction and centre of pressure, the links' true
                            angles (:mod:`exo_rt.record.world_log`); not the cycle log's
=========== =============== ==========================================================

Every value of the cycle log is in exactly one field (numbers as JSON numbers, which
round-trip float64 exactly; NaN and ±inf — not JSON — as null), so :func:`read_mcap` rebuilds
the cycle log's records. Older runs' records lack columns: ``qd_ref``, /state's phase and
stride, /assistance's fields (a record without any of them: no /assistance channel); what a
record lacks is in no message and stays absent when read back. The run's metadata (the cycle
log's header: joint names, rate, config …) is the MCAP metadata record ``exo-rt``. Log times:
the run's wall clock at the loop's start plus the cycle's t; CAN frames at their time stamp
(wall clock during bring-up; a lockstep loop stamps its frames with run time, counted from the
same origin as t). The session's events come from the control process through a ring of their
own (:class:`exo_rt.record.rings.MessageRing`), handed over once a second and at the end, and
are logged at their own cycle's time: rare, they are never on the cycle's path.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from exo_rt.errors import LogError, Where
from exo_rt.record.recorder import row_width
from exo_rt.record.rings import ERROR, EXTENDED, RX
from exo_rt.record.runfolder import METADATA, recover_on_read, segment_path, segments

ASSIST = "/assistance"
TOPICS = ("/joints", "/state", "/timing", ASSIST, "/can", "/events", "/activity")
JOINT_FIELDS = ("q", "qd", "q_ref", "current", "command", "torque", "flags")  # contiguous
QD_REF = "qd_ref"  # per joint too, elsewhere in the record (newer runs only)
# /state's, from the record's columns of that name (newer runs only): the segment's, and the
# board's foot-sole sensors as the cycle read them (SOLES: their values, an array)
STATE_EXTRA = ("phase", "stride", "sole_frames", "sole_sensors")
SOLES = "soles"
# /assistance's (newer runs only): one value a cycle, then per joint
ASSIST_FIELDS = ("gait_phase", "stride_hz", "walking", "heels")
ASSIST_JOINT = ("level", "winding", "derate", "drive_temp")
# the events of events.jsonl that are the session's (exo_rt.session.session): /activity's
ACTIVITY_EVENTS = ("request", "finished", "activity", "script_stalled")
RELATIVE_BELOW_S = 1e8  # a frame time stamp below this (1973) counts from the run's start
NUM = {"type": ["number", "null"]}


def schemas(joint_names) -> dict[str, dict]:
    """JSON schema of each topic for these joints."""
    per_joint = {"type": "object", "properties": {n: NUM for n in joint_names}}
    joints = {"t": NUM, "cycle": NUM} | {f: per_joint
                                         for f in (*JOINT_FIELDS, QD_REF)}
    state = {"t": NUM, "cycle": NUM, "state": {"type": "string"}, "state_code": NUM,
             "cause": {"type": "string"}, "cause_code": NUM, "board": NUM,
             "overrun_streak": NUM} | dict.fromkeys(STATE_EXTRA, NUM) | {
                 SOLES: {"type": "array", "items": NUM}}
    timing = {"t": NUM, "cycle": NUM, "wake_us": NUM, "compute_us": NUM, "overruns": NUM,
              "sample_t": NUM}
    assist = {"t": NUM, "cycle": NUM} | dict.fromkeys(ASSIST_FIELDS, NUM) | dict.fromkeys(
        ASSIST_JOINT, per_joint)
    can = {"t": NUM, "id": {"type": "integer"}, "dlc": {"type": "integer"},
           "data": {"type": "array", "items": {"type": "integer"}}, "rx": {"type": "boolean"},
           "extended": {"type": "boolean"}, "error": {"type": "boolean"},
           "bus": {"type": "string"}}
    events = {"t": NUM, "cycle": NUM, "event": {"type": "string"}, "state": {"type": "string"},
              "from": {"type": "string"}, "cause": {"type": "string"}}
    text, names = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
    activity = {"t": NUM, "cycle": NUM, "event": text, "request": text, "source": text,
                "answer": text, "reason": text, "motion": text, "posture": {"type": ["string",
                                                                                    "null"]},
                "possible": names, "steps": NUM, "value": NUM, "legs": names, "note": text}
    return {topic: {"type": "object", "title": f"exo_rt{topic.replace('/', '.')}",
                    "properties": props}
            for topic, props in zip(TOPICS, (joints, state, timing, assist, can, events, activity),
                                    strict=True)}


def _null(s: str) -> str:
    """NaN and ±inf (printed by %r) as JSON null: values always follow a ':' or '[' or ','."""
    if "nan" in s or "inf" in s:
        for bad in ("-inf", "inf", "nan"):
            for lead in (":", ",", "["):
                s = s.replace(lead + bad, lead + "null")
    return s


def _spans(idx: list[int]) -> list[tuple[int, int]]:
    """Column indices → the (first, end) runs of consecutive ones, in order."""
    out: list[tuple[int, int]] = []
    for i in idx:
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


class RowEncoder:
    """Cycle records (float64 rows, :func:`exo_rt.record.recorder.cycle_columns`) → the JSON
    bodies of /joints, /state, /timing, /assistance and /events. Built once per run: a format
    string per topic, one ``%`` per message (the record's values as one slice where its columns
    are contiguous). :attr:`per_cycle`: (topic, encoder) of each message a cycle makes; an
    encoder prints NaN and ±inf as Python does, :func:`log_cycles` makes them JSON's null (for
    the rare record that has one: the scan is 10 % of the encoding)."""

    def __init__(self, columns: dict[str, tuple[int, int]], meta: dict) -> None:
        self.names = list(meta.get("joint_names", []))
        self.states = list(meta.get("states", []))
        self.causes = list(meta.get("causes", []))
        n = len(self.names)
        self.columns = columns
        self.width = row_width(columns)
        q0 = columns["q"][0]
        if columns["flags"][1] - q0 != len(JOINT_FIELDS) * n:
            raise ValueError("the record's joint columns are not contiguous")
        self.joint_span = (q0, q0 + len(JOINT_FIELDS) * n)
        # the reference's velocity, phase and stride: in the records of newer runs only
        self.qd_ref = columns.get(QD_REF)  # (first, end) column, or None
        self.state_extra = [f for f in STATE_EXTRA if f in columns]
        self.i_extra = [columns[f][0] for f in self.state_extra]
        self.soles = columns.get(SOLES)  # (first, end) column, or None
        soles = "" if self.soles is None else (',"soles":[' + ",".join(
            ["%r"] * (self.soles[1] - self.soles[0])) + "]")
        esc = [json.dumps(x).replace("%", "%%") for x in self.names]
        group = "{" + ",".join(f"{k}:%r" for k in esc) + "}"
        fields = JOINT_FIELDS + ((QD_REF,) if self.qd_ref else ())
        self.joints_fmt = ('{"t":%r,"cycle":%r,' + ",".join(f'"{f}":{group}' for f in fields)
                           + "}")
        self.state_fmt = ('{"t":%r,"cycle":%r,"state":%s,"state_code":%r,"cause":%s,'
                          '"cause_code":%r,"board":%r,"overrun_streak":%r'
                          + "".join(f',"{f}":%r' for f in self.state_extra) + soles + "}")
        self.timing_fmt = ('{"t":%r,"cycle":%r,"wake_us":%r,"compute_us":%r,"overruns":%r,'
                           '"sample_t":%r}')
        # /assistance: the estimate, level and thermal columns the record has (newer runs)
        self.assist_fields = [f for f in ASSIST_FIELDS if f in columns]
        self.assist_joint = [f for f in ASSIST_JOINT if f in columns]
        for f in self.assist_joint:
            if columns[f][1] - columns[f][0] != n:
                raise ValueError(f"the record's column '{f}' is not one per joint")
        self.assist_idx = [columns[f][0] for f in self.assist_fields] + [
            i for f in self.assist_joint for i in range(*columns[f])]
        self.assist_span = _spans(self.assist_idx)
        self.assist_fmt = ('{"t":%r,"cycle":%r' + "".join(f',"{f}":%r' for f in self.assist_fields)
                           + "".join(f',"{f}":{group}' for f in self.assist_joint) + "}")
        self.per_cycle = [("/joints", self.joints), ("/state", self.state),
                          ("/timing", self.timing)] + (
            [(ASSIST, self.assistance)] if self.assist_idx else [])
        c = columns
        self.i_state, self.i_cause = c["state"][0], c["cause"][0]
        self.i_streak, self.i_board = c["overrun_streak"][0], c["board"][0]
        self.i_wake, self.i_compute = c["wake_us"][0], c["compute_us"][0]
        self.i_overruns, self.i_sample = c["overruns"][0], c["sample_t"][0]
        self._state_json = [json.dumps(s) for s in self.states]
        self._cause_json = [json.dumps(s) for s in self.causes]
        self.last_state: int | None = None

    def state_name(self, code: float) -> str:
        k = int(code) if np.isfinite(code) else -1
        return self.states[k] if 0 <= k < len(self.states) else str(k)

    def cause_name(self, code: float) -> str:
        k = int(code) if np.isfinite(code) else -1
        return self.causes[k] if 0 <= k < len(self.causes) else str(k)

    def joints(self, r: list) -> str:
        a, b = self.joint_span
        if self.qd_ref is None:
            return self.joints_fmt % (r[0], r[1], *r[a:b])
        c, d = self.qd_ref
        return self.joints_fmt % (r[0], r[1], *r[a:b], *r[c:d])

    def state(self, r: list) -> str:
        s, c = r[self.i_state], r[self.i_cause]
        k = int(s) if s == s else -1
        sj = self._state_json[k] if 0 <= k < len(self._state_json) else json.dumps(str(k))
        kc = int(c) if c == c else -1
        cj = self._cause_json[kc] if 0 <= kc < len(self._cause_json) else json.dumps(str(kc))
        extra = [r[i] for i in self.i_extra]
        if self.soles is not None:
            extra += r[self.soles[0]:self.soles[1]]
        return self.state_fmt % (r[0], r[1], sj, s, cj, c, r[self.i_board],
                                       r[self.i_streak], *extra)

    def timing(self, r: list) -> str:
        return self.timing_fmt % (r[0], r[1], r[self.i_wake], r[self.i_compute],
                                        r[self.i_overruns], r[self.i_sample])

    def assistance(self, r: list) -> str:
        if len(self.assist_span) == 1:  # the columns of cycle_columns: one slice
            (a, b), = self.assist_span
            return self.assist_fmt % (r[0], r[1], *r[a:b])
        return self.assist_fmt % (r[0], r[1], *[r[i] for i in self.assist_idx])

    def events(self, rows: np.ndarray) -> list[tuple[int, str]]:
        """(row index, JSON) of the state changes in ``rows``, continuing the last batch (the
        first record of the run is one: where the log starts)."""
        if not len(rows):
            return []
        st = rows[:, self.i_state]
        prev = np.empty_like(st)
        prev[0] = np.nan if self.last_state is None else self.last_state
        prev[1:] = st[:-1]
        self.last_state = float(st[-1])
        return [(int(i), self._event(rows[i], prev[i])) for i in np.flatnonzero(st != prev)]

    def _event(self, r: np.ndarray, before: float) -> str:
        return json.dumps({"t": float(r[0]), "cycle": float(r[1]), "event": "state",
                           "state": self.state_name(r[self.i_state]),
                           "from": self.state_name(before) if before == before else "",
                           "cause": self.cause_name(r[self.i_cause])})


def log_cycles(logs, rows: np.ndarray, times_ns: list[int]) -> None:
    """Each record's per-cycle messages: ``logs`` are (a channel's log, an encoder of
    :attr:`RowEncoder.per_cycle`) pairs, ``times_ns`` the records' log times. NaN and ±inf
    become null; a record of finite values only (the rule) skips the scan."""
    finite = np.isfinite(rows).all(axis=1).tolist()
    for r, ns, ok in zip(rows.tolist(), times_ns, finite, strict=True):
        if ok:
            for log, encode in logs:
                log(encode(r).encode(), ns)
        else:
            for log, encode in logs:
                log(_null(encode(r)).encode(), ns)


def frame_json(t: float, arb: int, flags: int, dlc: int, bus: str, data: bytes) -> str:
    data_list = ",".join(map(str, data[:dlc]))
    return (f'{{"t":{t!r},"id":{arb},"dlc":{dlc},"data":[{data_list}],'
            f'"rx":{_BOOL[bool(flags & RX)]},"extended":{_BOOL[bool(flags & EXTENDED)]},'
            f'"error":{_BOOL[bool(flags & ERROR)]},"bus":{json.dumps(bus)}}}')


_BOOL = {True: "true", False: "false"}


def log_time_origin(meta: dict) -> float:
    """Wall-clock time (s) of the cycle log's t = 0."""
    return float(meta.get("wall_start") or meta.get("wall_boot") or 0.0)


SEGMENT_S = 600.0  # s of run time in one MCAP file (EXO_RT_MCAP_SEGMENT_S overrides)


def segment_length() -> float:
    """Run time (s) one MCAP file of a run holds: ``SEGMENT_S``, or the environment's
    ``EXO_RT_MCAP_SEGMENT_S`` (a positive number; to test segments without a long run)."""
    try:
        value = float(os.environ.get("EXO_RT_MCAP_SEGMENT_S", SEGMENT_S))
    except ValueError:
        return SEGMENT_S
    return value if value > 0 and math.isfinite(value) else SEGMENT_S


class _GuardedFile:
    """The file under the Foxglove SDK's MCAP writer, which writes through it (Python
    file-like: write, seek, flush). A write error (full disk, file-size limit, read-only) is
    kept here and every later write is dropped: the native writer never sees an error, so it
    neither logs one per message nor panics at close; :class:`McapLog` reads :attr:`error`
    after each batch and the recording stops."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "wb", buffering=0)  # noqa: SIM115 (closed in close)
        self.error: OSError | None = None
        self.pos = 0

    def write(self, data) -> int:
        n = len(data)
        if self.error is None:
            try:
                n = self.f.write(data)
            except OSError as exc:
                self.error = exc
                n = len(data)
        self.pos += n
        return n

    def seek(self, offset: int, whence: int = 0) -> int:
        if self.error is None:
            try:
                self.pos = self.f.seek(offset, whence)
                return self.pos
            except OSError as exc:
                self.error = exc
        if whence == 0:
            self.pos = offset
        elif whence == 1:
            self.pos += offset
        return self.pos

    def flush(self) -> None:
        pass  # the file is unbuffered; :meth:`sync` makes it durable

    def sync(self) -> None:
        """Everything written reaches the disk (fsync)."""
        if self.error is None:
            try:
                os.fsync(self.f.fileno())
            except OSError as exc:
                self.error = exc

    def close(self) -> None:
        try:
            self.f.close()
        except OSError as exc:
            self.error = self.error or exc


class McapLog:
    """``run.mcap`` through the Foxglove SDK's native writer (its own context, so a live
    server in the same process sees none of it).

    Written so that a crash leaves a file a standard MCAP reader reads after
    :func:`exo_rt.record.runfolder.recover`: the metadata record ``exo-rt`` as soon as the
    loop's origin is known (and again, with the message counts, at the end), and the writer
    calls :meth:`flush` at least once a second (the open chunk closed, the file fsynced). A
    write error stops the file at the first one: :attr:`error`."""

    def __init__(self, path: Path, columns: dict[str, tuple[int, int]], meta: dict,
                 channels: list[str] | None = None, segment_s: float | None = None,
                 scene=None, world=None) -> None:
        import foxglove

        self.path = self.first = Path(path)
        self.enc = RowEncoder(columns, meta)
        self.meta = meta
        self.bus_names = list(channels or [])
        self.segment_s = segment_length() if segment_s is None else float(segment_s)
        self.segment = 1  # the file being written: 1 is ``path``, then segment_path(path, k)
        self.ctx = foxglove.Context()
        # every topic, but /assistance only for a record with its columns (not older runs')
        self.topics = [t for t in TOPICS if t != ASSIST or self.enc.assist_idx]
        all_schemas = schemas(self.enc.names)
        self.channels = {topic: foxglove.Channel(topic, schema=all_schemas[topic],
                                                 message_encoding="json", context=self.ctx)
                         for topic in self.topics}
        # a world run's truth (exo_rt.record.world_log.WorldLog): its columns after the
        # record's (rows joined by the writer), for the scene and /world
        self.world = world
        scene_columns, scene_meta = (columns, meta) if world is None else \
            world.extend(columns, meta)
        if world is not None:
            self.channels |= world.channels(self.ctx)
            self.topics += list(world.TOPICS)
        # the 3D scene (exo_rt.record.scene.RobotScene): /robot_description, /tf, /scene
        self.scene = None
        if scene is not None:
            from exo_rt.record import scene as sc

            self.scene = sc.SceneLog(scene, scene_columns, scene_meta)
            self.channels |= sc.channels(self.ctx)
            self.topics += list(sc.SCENE_TOPICS)
        self.t0_ns: int | None = None
        self.messages = dict.fromkeys(self.topics, 0)  # the whole run's, every segment
        self._open(self.path)

    def _open(self, path: Path) -> None:
        """A new file under the native writer (the run folder is the run's alone, claimed by
        :func:`exo_rt.record.runfolder.claim`: a file of an earlier run was removed)."""
        import foxglove
        from foxglove.mcap import MCAPCompression, MCAPWriteOptions

        options = MCAPWriteOptions(compression=MCAPCompression.Zstd, compression_threads=0,
                                   profile="")
        self.path = path
        self.file = _GuardedFile(path)
        self.writer = foxglove.open_mcap(self.file, context=self.ctx, writer_options=options)
        self.in_segment = dict.fromkeys(self.topics, 0)
        self.segment_end = self.segment * self.segment_s  # run time (s) this file ends at

    def _next_segment(self) -> None:
        """Close this file whole (its metadata with its own counts) and go on in the next:
        the native writer keeps what it needs for every chunk it closed (its index) until
        the file is closed: +7 MiB over an hour's file in lockstep (measured: the 8-hour run's
        recording process 1.10 × a 10-minute run's peak) — a file per 10 minutes keeps that
        within what a 10-minute run sees."""
        self._write_metadata(self.meta, counts=self.in_segment)
        self.writer.close()
        self.file.close()
        if self.file.error is not None:
            return  # the recording stops on it (error)
        self.segment += 1
        self._open(segment_path(self.first, self.segment))
        if self.scene is not None:  # the URDF and the static scene again, in this file
            self.scene.restart()
        if self.meta.get("wall_start"):
            self._write_metadata(self.meta, counts=None)

    @property
    def error(self) -> OSError | None:
        """The first write error (the file is cut there), or None."""
        return self.file.error

    def set_origin(self, meta: dict) -> None:
        self.meta = meta
        self.t0_ns = int(round(log_time_origin(meta) * 1e9))
        if meta.get("wall_start"):  # the loop's origin: what a recovered file needs to read
            self._write_metadata(meta, counts=None)

    def _write_metadata(self, meta: dict, counts: dict | None) -> None:
        """The ``exo-rt`` metadata record: the columns, the run's metadata, and — at a file's
        end — its message counts per topic (and which segment of the run it is)."""
        record = {"columns": json.dumps(self.enc.columns), "meta": json.dumps(meta),
                  "segment": str(self.segment)}
        if counts is not None:
            record["messages"] = json.dumps(counts)
        self.writer.write_metadata(METADATA, record)

    def flush(self) -> None:
        """Close the open chunk and make the file durable (the recording process calls it at
        least once a second: what a crash can lose)."""
        self.writer.flush()
        self.file.sync()

    def rows(self, rows: np.ndarray) -> None:
        """A batch of records; one that reaches the segment's end goes on in the next file."""
        while len(rows) and rows[-1, 0] >= self.segment_end and self.file.error is None:
            cut = int(np.searchsorted(rows[:, 0], self.segment_end))  # (t increases)
            self._rows(rows[:cut])
            self._next_segment()
            rows = rows[cut:]
        self._rows(rows)

    def _rows(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        if self.t0_ns is None:
            self.set_origin(self.meta)
        enc, ch, t0 = self.enc, self.channels, self.t0_ns
        times = (rows[:, 0] * 1e9).round()
        times = np.where(np.isfinite(times), times, 0).astype(np.int64) + t0
        log_cycles([(ch[topic].base.log, encode) for topic, encode in enc.per_cycle], rows,
                   times.tolist())
        events = 0
        for i, body in enc.events(rows):
            ch["/events"].base.log(body.encode(), int(times[i]))
            events += 1
        for counts in (self.messages, self.in_segment):
            counts["/events"] += events
            for topic, _ in enc.per_cycle:
                counts[topic] += len(rows)
        if self.world is not None:
            n = self.world.rows(rows, times, self._log)
            self.messages["/world"] += n
            self.in_segment["/world"] += n
        if self.scene is not None:
            before = dict(self.scene.counts)
            self.scene.rows(rows, times, self._log)
            for topic, n in self.scene.counts.items():
                self.messages[topic] += n - before[topic]
                self.in_segment[topic] += n - before[topic]

    def _log(self, topic: str, body: bytes, ns: int) -> None:
        self.channels[topic].base.log(body, ns)

    def frames(self, frames) -> None:
        """(t, id, flags, dlc, bus index, data) tuples, as the frame ring hands them over."""
        log = self.channels["/can"].base.log
        names = self.bus_names
        if self.t0_ns is None:
            self.set_origin(self.meta)
        t0 = self.t0_ns
        for t, arb, flags, dlc, bus, data in frames:
            name = names[bus] if bus < len(names) else str(bus)
            # wall-clock stamps as they are; run-relative ones (a lockstep loop's) from t = 0
            ns = int(t * 1e9) + (t0 if t < RELATIVE_BELOW_S else 0)
            log(frame_json(t, arb, flags, dlc, name, data).encode(), ns)
        self.messages["/can"] += len(frames)
        self.in_segment["/can"] += len(frames)

    def activity(self, messages) -> None:
        """The session's events, as the message ring hands them over: (t, JSON bytes), each
        logged at its cycle's time (it may come up to a second after the cycles around it:
        MCAP readers order by log time)."""
        if not messages:
            return
        if self.t0_ns is None:
            self.set_origin(self.meta)
        log, t0 = self.channels["/activity"].base.log, self.t0_ns
        for t, body in messages:
            log(body, t0 + (int(round(t * 1e9)) if t == t else 0))
        self.messages["/activity"] += len(messages)
        self.in_segment["/activity"] += len(messages)

    def close(self, meta: dict | None = None) -> None:
        """Write the run's metadata and finish the file (its summary and index)."""
        meta = self.meta if meta is None else meta
        try:
            if self.error is None:
                self._write_metadata(meta, counts=self.in_segment)
            self.writer.close()
            self.file.sync()
        finally:
            self.file.close()


# ----------------------------------------------------------------------------- reading
def read_mcap(path: str | Path) -> tuple[np.ndarray, dict]:
    """(records, metadata) of a run.mcap — with the files after it (``run-2.mcap`` …, a run
    longer than 10 minutes) — as :func:`exo_rt.record.recorder.read_cycle_log` gives them for
    the cycle log (a structured array, one record per cycle)."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    from exo_rt.record.recorder import columns_dtype

    path = Path(path)
    # a run's: every segment (run.mcap, run-2.mcap …), each cut short by a crash made whole
    files = segments(path.parent) if path.name == "run.mcap" else [path]
    if path.name == "run.mcap":
        recover_on_read(path.parent)
    by_topic: dict[str, list[dict]] = {"/joints": [], "/state": [], "/timing": [], ASSIST: []}
    info = None
    for file in files:
        try:
            with open(file, "rb") as f:
                reader = make_reader(f)
                for rec in reader.iter_metadata():
                    if rec.name == METADATA and info is None:
                        info = rec.metadata
                for _schema, channel, message in reader.iter_messages(topics=list(by_topic),
                                                                       log_time_order=False):
                    by_topic[channel.topic].append(json.loads(message.data))
        except (OSError, ValueError, KeyError, McapError) as exc:  # (McapError: a run still
            # being written, its last record unfinished)
            raise LogError(f"cannot read the MCAP file ({exc})", Where(str(file)),
                           "the file is damaged or not finished (the cycle log is the "
                           "reference)") from None
    if info is None:
        raise LogError("the MCAP file has no exo-rt metadata record", Where(str(path)),
                       "give a run.mcap written by exo-rt (run or export --mcap)")
    try:
        columns = {k: (int(v[0]), int(v[1])) for k, v in json.loads(info["columns"]).items()}
        meta = json.loads(info["meta"])
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise LogError(f"cannot read the MCAP file's exo-rt metadata ({exc})",
                       Where(str(path)), "give a run.mcap written by exo-rt") from None
    records = rows_from_messages(columns, meta, by_topic)
    return records.view(columns_dtype(columns))[:, 0], meta


def rows_from_messages(columns, meta, by_topic: dict[str, list[dict]]) -> np.ndarray:
    """The float64 records rebuilt from the decoded /joints, /state, /timing and /assistance
    messages (a record's column that no message holds — an older run's MCAP — is NaN)."""
    names = list(meta.get("joint_names", []))
    assist = by_topic.get(ASSIST) or []
    n = min(len(v) for v in (by_topic["/joints"], by_topic["/state"], by_topic["/timing"]))
    if assist:
        n = min(n, len(assist))
    width = row_width(columns)
    out = np.full((n, width), np.nan)

    def num(x):
        return np.nan if x is None else float(x)

    for k in range(n):
        j, s, tm = by_topic["/joints"][k], by_topic["/state"][k], by_topic["/timing"][k]
        row = out[k]
        row[columns["t"][0]] = num(j["t"])
        row[columns["cycle"][0]] = num(j["cycle"])
        for f in JOINT_FIELDS:
            a = columns[f][0]
            row[a:a + len(names)] = [num(j[f][nm]) for nm in names]
        row[columns["state"][0]] = num(s["state_code"])
        row[columns["cause"][0]] = num(s["cause_code"])
        row[columns["board"][0]] = num(s["board"])
        row[columns["overrun_streak"][0]] = num(s["overrun_streak"])
        for f in ("wake_us", "compute_us", "overruns", "sample_t"):
            row[columns[f][0]] = num(tm.get(f))
        if QD_REF in columns:  # (absent from the messages of older runs: NaN)
            a = columns[QD_REF][0]
            ref = j.get(QD_REF) or {}
            row[a:a + len(names)] = [num(ref.get(nm)) for nm in names]
        for f in STATE_EXTRA:
            if f in columns:
                row[columns[f][0]] = num(s.get(f))
        if SOLES in columns and s.get(SOLES) is not None:
            a, b = columns[SOLES]
            row[a:b] = [num(x) for x in s[SOLES][:b - a]]
        if assist:
            m = assist[k]
            for f in ASSIST_FIELDS:
                if f in columns:
                    row[columns[f][0]] = num(m.get(f))
            for f in ASSIST_JOINT:
                if f in columns:
                    a, per = columns[f][0], m.get(f) or {}
                    row[a:a + len(names)] = [num(per.get(nm)) for nm in names]
    return out


def read_activity(path: str | Path) -> list[dict]:
    """The session's events of a run.mcap (its ``/activity`` messages, with the files after
    it) in the order they happened (the order they were written: a message's log time is its
    cycle's, and several share a cycle) — what events.jsonl holds of the session."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    path = Path(path)
    files = segments(path.parent) if path.name == "run.mcap" else [path]
    if path.name == "run.mcap":
        recover_on_read(path.parent)
    out: list[dict] = []
    for file in files:
        try:
            with open(file, "rb") as f:
                for _s, _c, message in make_reader(f).iter_messages(topics=["/activity"],
                                                                    log_time_order=False):
                    out.append(json.loads(message.data))
        except (OSError, ValueError, KeyError, McapError) as exc:  # (McapError: a run still
            # being written, its last record unfinished)
            raise LogError(f"cannot read the MCAP file ({exc})", Where(str(file)),
                           "the file is damaged or not finished (events.jsonl holds the "
                           "same events)") from None
    return out


# ----------------------------------------------------------------------------- export
def export_mcap(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """run.mcap of a recorded run folder (its cycle log and CAN log), for runs recorded
    before exo-rt wrote MCAP — with the run's 3D scene (:mod:`exo_rt.record.scene`, from the
    run's robot file; none where it cannot be drawn), as a run writes it."""
    import can

    from exo_rt.record.recorder import read_cycle_log, read_header

    run_dir = Path(run_dir)
    log = run_dir / "cycles.exolog"
    if not log.exists():
        raise LogError("no cycle log in this folder", Where(str(run_dir)),
                       "give a run folder written by `exo-rt run` (it holds cycles.exolog)")
    out = Path(out) if out is not None else run_dir / "run.mcap"
    if out == run_dir / "run.mcap":
        if recover_on_read(run_dir):  # the run's own, cut short: now whole
            return out
    if out.exists():
        raise LogError(f"{out.name} exists already", Where(str(out)),
                       "delete it first to write it again")
    columns, _ = read_header(log)
    records, meta = read_cycle_log(log)
    meta.pop("truncated_bytes", None)
    width = row_width(columns)
    rows = np.frombuffer(records.tobytes(), np.float64).reshape(len(records), width)
    buses: list[str] = []
    frames = []
    for can_log in sorted(run_dir.glob("can.*")):
        if can_log.suffix not in (".blf", ".asc", ".log"):
            continue
        try:
            for msg in can.LogReader(str(can_log)):
                ch = str(msg.channel if msg.channel is not None else 0)
                if ch not in buses:
                    buses.append(ch)
                flags = (RX if msg.is_rx else 0) | (EXTENDED if msg.is_extended_id else 0) \
                    | (ERROR if msg.is_error_frame else 0)
                frames.append((msg.timestamp, msg.arbitration_id, flags, msg.dlc,
                               buses.index(ch), bytes(msg.data)))
        except (OSError, ValueError, can.CanError) as exc:
            raise LogError(f"cannot read the CAN log ({exc})", Where(str(can_log)),
                           "the file is damaged") from None
        break
    try:
        from exo_rt.record.scene import scene_for_run

        scene = scene_for_run(run_dir, meta)
    except Exception:  # a robot the scene cannot draw, its file gone: the records alone
        scene = None
    m = McapLog(out, columns, meta, buses, scene=scene)
    m.set_origin(meta)
    for a in range(0, len(rows), 4096):
        m.rows(rows[a:a + 4096])
    m.frames(frames)
    m.close(meta)
    return out
