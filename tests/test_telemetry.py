"""Live telemetry (Foxglove WebSocket) and the run's MCAP file.

One lockstep run of the default config with ``--live``: a WebSocket client speaking Foxglove's
protocol (the ``websockets`` package, nothing of exo-rt's) connects while it runs, subscribes
to /joints, /events and /assistance, decodes every message and also tries to publish, set a
parameter and call a service. Then ``run.mcap`` is read back with the ``mcap`` package's reader
(independent of the Foxglove SDK that wrote it) and compared with the cycle log and the CAN log
value for value.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import can
import numpy as np
import pytest

from exo_rt.record.recorder import read_cycle_log

websockets = pytest.importorskip("websockets.sync.client")
mcap_reader = pytest.importorskip("mcap.reader")

ROOT = Path(__file__).resolve().parents[1]
DURATION = 4.0
SUBPROTOCOL = "foxglove.sdk.v1"


def _client(url: str, got: dict) -> None:
    """Foxglove's protocol by hand: serverInfo, advertise, subscribe, then binary messages
    (opcode 1, subscription id u32, log time u64, payload)."""
    with websockets.connect(url, subprotocols=[SUBPROTOCOL], open_timeout=10,
                            max_size=None) as ws:
        got["info"] = json.loads(ws.recv(timeout=10))
        channels = {}
        while not {"/joints", "/assistance"} <= channels.keys():
            m = json.loads(ws.recv(timeout=10))
            if m.get("op") == "advertise":
                channels.update({c["topic"]: c for c in m["channels"]})
        got["channels"] = channels
        ws.send(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": 1, "channelId": channels["/joints"]["id"]},
            {"id": 2, "channelId": channels["/events"]["id"]},
            {"id": 3, "channelId": channels["/assistance"]["id"]}]}))
        # what a client must not be able to do: publish, set a parameter, call a service
        ws.send(json.dumps({"op": "advertise", "channels": [
            {"id": 7, "topic": "/joints/command", "encoding": "json", "schemaName": "x"}]}))
        ws.send(b"\x01" + struct.pack("<I", 7) + b'{"kp": 1e6}')
        ws.send(json.dumps({"op": "setParameters", "parameters": [{"name": "kp", "value": 1e6}]}))
        ws.send(b"\x02" + struct.pack("<III", 1, 1, 4) + b"json{}")
        got["joints"], got["events"], got["assistance"], got["status"] = [], [], [], []
        by_sub = {1: "joints", 2: "events", 3: "assistance"}
        try:
            while True:
                m = ws.recv(timeout=20)
                if isinstance(m, bytes):
                    op, sub, _ns = struct.unpack_from("<BIQ", m)
                    assert op == 1
                    got[by_sub[sub]].append(json.loads(m[13:]))
                else:
                    msg = json.loads(m)
                    if msg.get("op") in ("status", "serviceCallFailure"):
                        got["status"].append(msg)
        except Exception as exc:  # the run ended: the server closed the connection
            got["end"] = repr(exc)


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("live") / "run"
    proc = subprocess.Popen([sys.executable, "-m", "exo_rt", "run", "--duration", str(DURATION),
                             "--config", str(ROOT / "configs" / "exo_leg.yaml"),  # test stand
                             "--out", str(out), "--live", "127.0.0.1:0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    url: list[str] = []

    def drain():
        for line in proc.stderr:
            lines.append(line)
            if "live telemetry on ws://" in line and not url:
                url.append(line.split("live telemetry on ", 1)[1].split()[0])

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    end = time.monotonic() + 120
    while not url and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.01)
    assert url, "".join(lines)
    got: dict = {"url": url[0]}
    _client(url[0], got)
    stdout, _ = proc.communicate(timeout=120)
    reader.join(5)
    assert proc.returncode == 0, stdout + "".join(lines)
    got["stdout"] = stdout
    return out, got


@pytest.mark.slow
def test_live_stream_is_decoded_at_100_hz_or_more_of_simulated_time(live_run):
    out, got = live_run
    msgs = got["joints"]
    assert len(msgs) >= 100, got.get("end")
    t = np.array([m["t"] for m in msgs])
    span = t[-1] - t[0]
    assert span > 1.0 and len(msgs) / span >= 100.0, (len(msgs), span)
    assert np.all(np.diff(t) > 0)
    records, meta = read_cycle_log(out / "cycles.exolog")
    names = meta["joint_names"]
    for m in msgs:  # every value is the cycle log's, exactly
        r = records[int(m["cycle"])]
        assert m["t"] == r["t"]
        for f in ("q", "qd", "q_ref", "current", "command", "torque"):
            assert [m[f][n] for n in names] == r[f].tolist(), f
    assert any(e["state"] == "RUN" for e in got["events"]) or got["events"] == []
    assert "live telemetry on ws://127.0.0.1:" in got["stdout"]  # the set-up line


def test_live_assistance_carries_the_estimate_level_and_windings_of_the_record(live_run):
    """/assistance live: the same decimation as /joints (1 in 5 at 1 kHz), every value the
    cycle log's, exactly."""
    out, got = live_run
    msgs = got["assistance"]
    assert len(msgs) >= 100, got.get("end")
    cycles = np.array([m["cycle"] for m in msgs])
    assert np.all(cycles % 5 == 0) and np.all(np.diff(cycles) > 0)
    records, meta = read_cycle_log(out / "cycles.exolog")
    names = meta["joint_names"]
    for m in msgs:
        r = records[int(m["cycle"])]
        assert m["t"] == r["t"]
        _same_assistance(m, r, names)
    # the run walks: the estimate moved, its phase stays a fraction of a stride
    assert {m["heels"] for m in msgs} != {0.0}
    assert all(0.0 <= m["gait_phase"] < 1.0 for m in msgs)


def _same_assistance(m: dict, r, names) -> None:
    """An /assistance message holds the record's values, bit for bit (null: NaN)."""
    for f in ("gait_phase", "stride_hz", "walking", "heels"):
        assert np.array_equal(_num(m[f]), r[f], equal_nan=True), f
    for f in ("level", "winding", "derate", "drive_temp"):
        assert set(m[f]) == set(names), f
        assert np.array_equal([_num(m[f][x]) for x in names], r[f], equal_nan=True), f


def test_live_server_is_read_only(live_run):
    out, got = live_run
    assert got["info"]["capabilities"] == []  # no clientPublish, parameters, services, time
    said = " ".join(s["message"] for s in got["status"])
    assert "clientPublish" in said and "parameters" in said, said
    assert "does not support services" in said, said
    assert all(s.get("level", 2) == 2 for s in got["status"])  # errors, every one
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_state"] == "SHUTDOWN" and not summary["faults"]


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp* shows them) listening on ``port``."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            addr, p = f[1].rsplit(":", 1)
            if int(p, 16) == port and f[3] == "0A":  # LISTEN
                found.append(addr)
    return found


def test_live_server_binds_loopback_only_by_default():
    from exo_rt.record.recorder import cycle_columns
    from exo_rt.record.telemetry import LiveServer, parse_live

    host, port = parse_live("0")
    assert host == "127.0.0.1"
    srv = LiveServer(host, port, cycle_columns(2), {"joint_names": ["hip", "knee"]})
    try:
        found = _listening(srv.port)
        if Path("/proc/net/tcp").exists():
            assert found == ["0100007F"], found  # 127.0.0.1 only, on no other address
        import socket

        with socket.create_connection(("127.0.0.1", srv.port), timeout=2):
            pass
    finally:
        srv.close()


def test_other_addresses_need_an_explicit_option():
    from exo_rt.errors import ConfigError
    from exo_rt.record.telemetry import parse_live, remote_warning

    assert parse_live("8765") == ("127.0.0.1", 8765)
    assert parse_live("localhost:9000") == ("localhost", 9000)
    assert parse_live("[::1]:9000") == ("::1", 9000)
    for spec in ("0.0.0.0:8765", "192.168.1.5:8765", "[::]:8765", "example.org:80"):
        with pytest.raises(ConfigError, match="--live-remote"):
            parse_live(spec)
    assert parse_live("0.0.0.0:8765", remote=True) == ("0.0.0.0", 8765)
    assert "WARNING" in remote_warning("0.0.0.0", 8765)
    res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", "0.1",
                          "--live", "0.0.0.0:8765"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "--live-remote" in res.stderr and "Traceback" not in res.stderr


# --------------------------------------------------------------------------- run.mcap
def _read_mcap(path: Path):
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        reader = make_reader(f, validate_crcs=True)
        summary = reader.get_summary()
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
        by_topic: dict[str, list] = {}
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            assert channel.message_encoding == "json" and schema.encoding == "jsonschema"
            by_topic.setdefault(channel.topic, []).append((message.log_time,
                                                           json.loads(message.data)))
    return summary, meta, by_topic


def _num(x):
    return np.nan if x is None else x


@pytest.mark.slow
def test_run_mcap_reads_back_with_mcaps_reader_value_for_value(live_run):
    out, _ = live_run
    summary, meta, by_topic = _read_mcap(out / "run.mcap")
    records, log_meta = read_cycle_log(out / "cycles.exolog")
    n = len(records)
    topics = {c.topic for c in summary.channels.values()}
    assert topics == {"/joints", "/state", "/timing", "/assistance", "/can", "/events",
                      "/activity", "/robot_description", "/tf", "/scene"}  # (the 3D scene)
    counts = {summary.channels[cid].topic: k
              for cid, k in summary.statistics.channel_message_counts.items()}
    assert counts["/joints"] == counts["/state"] == counts["/timing"] == counts["/tf"] == n
    assert counts["/assistance"] == n
    names = log_meta["joint_names"]
    joints, state, timing, assist = (by_topic[t] for t in ("/joints", "/state", "/timing",
                                                            "/assistance"))
    for k in range(n):
        r = records[k]
        j, s, tm, a = joints[k][1], state[k][1], timing[k][1], assist[k][1]
        assert a["t"] == r["t"] and a["cycle"] == k and assist[k][0] == joints[k][0]
        _same_assistance(a, r, names)
        assert j["t"] == r["t"] and j["cycle"] == r["cycle"] == k
        for f in ("q", "qd", "q_ref", "current", "command", "torque", "flags", "qd_ref"):
            assert np.array_equal([_num(j[f][x]) for x in names], r[f], equal_nan=True), (k, f)
        assert (s["phase"], s["stride"]) == (r["phase"], r["stride"])
        assert s["state_code"] == r["state"] and s["state"] == log_meta["states"][int(r["state"])]
        assert s["cause_code"] == r["cause"] and s["board"] == r["board"]
        assert s["overrun_streak"] == r["overrun_streak"]
        assert (tm["wake_us"], tm["compute_us"], tm["overruns"]) == (
            r["wake_us"], r["compute_us"], r["overruns"])
    # CAN frames: the BLF log's, frame for frame
    frames = list(can.LogReader(str(out / "can.blf")))
    mframes = [m for _, m in by_topic["/can"]]
    assert counts["/can"] == len(frames) == len(mframes) > 0
    for f, m in zip(frames, mframes, strict=True):
        assert m["id"] == f.arbitration_id and bytes(m["data"]) == bytes(f.data)
        assert m["rx"] == f.is_rx
        if m["t"] > 1e8:  # wall time (bring-up); the lockstep loop's frames carry run time
            assert abs(m["t"] - f.timestamp) < 1e-5
    # events: every state change of the cycle log, in order
    states = records["state"]
    changes = [0] + [int(i) + 1 for i in np.flatnonzero(np.diff(states))]
    ev = [m for _, m in by_topic["/events"]]
    assert [e["cycle"] for e in ev] == changes
    assert ev[-1]["state"] == "SHUTDOWN" or ev[-1]["state"] == log_meta["states"][int(states[-1])]
    # well-formed from end to end: a streaming pass over every record, CRCs checked
    from mcap.records import Footer, Message
    from mcap.stream_reader import StreamReader

    with open(out / "run.mcap", "rb") as f:
        records_ = list(StreamReader(f, validate_crcs=True).records)
    assert isinstance(records_[-1], Footer)
    assert sum(isinstance(r, Message) for r in records_) == sum(counts.values())
    # the run's metadata
    info = json.loads(meta["exo-rt"]["meta"])
    assert info["joint_names"] == names and info["wall_start"] == log_meta["wall_start"]
    assert json.loads(meta["exo-rt"]["messages"])["/joints"] == n
    assert json.loads(meta["exo-rt"]["messages"])["/assistance"] == n
    # /assistance's schema: its fields, per joint where the record has n columns
    schema = next(json.loads(summary.schemas[c.schema_id].data)
                  for c in summary.channels.values() if c.topic == "/assistance")
    props = schema["properties"]
    assert set(props) == {"t", "cycle", "gait_phase", "stride_hz", "walking", "heels", "level",
                          "winding", "derate", "drive_temp"}
    assert set(props["winding"]["properties"]) == set(names)


@pytest.mark.slow
def test_replay_reads_run_mcap_and_export_writes_it_for_old_runs(live_run, tmp_path):
    from exo_rt.record.mcap_log import read_mcap
    from exo_rt.runtime.replay import load_run

    out, _ = live_run
    records, _ = read_cycle_log(out / "cycles.exolog")
    # an old run: no run.mcap; export writes one that reads back the same
    old = tmp_path / "old"
    old.mkdir()
    for f in ("cycles.exolog", "can.blf", "summary.json", "config.yaml"):
        (old / f).write_bytes((out / f).read_bytes())
    res = subprocess.run([sys.executable, "-m", "exo_rt", "export", str(old), "--mcap"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(old / "run.mcap")
    again, _ = read_mcap(old / "run.mcap")
    assert np.array_equal(again.tobytes(), records.tobytes())
    res = subprocess.run([sys.executable, "-m", "exo_rt", "export", str(old), "--mcap"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "exists already" in res.stderr
    # a run shared as run.mcap alone: replay reads it
    os.remove(old / "cycles.exolog")
    rec2, meta2, config = load_run(old)
    assert np.array_equal(rec2.tobytes(), records.tobytes()) and config.exists()


@pytest.mark.slow  # about 2 s or more on 2 cores (README)
def test_assistance_is_written_only_for_records_that_have_its_columns(live_run, tmp_path):
    """An older run's record (no estimate, level or thermal columns): export writes no
    /assistance channel and read_mcap gives back its columns alone, bit for bit; a newer one's
    NaN and ±inf go as null and come back NaN (the cycle log is the reference)."""
    from mcap.reader import make_reader

    from exo_rt.record.mcap_log import export_mcap, read_mcap
    from exo_rt.record.recorder import read_header, row_width, write_header

    out, _ = live_run
    columns, meta = read_header(out / "cycles.exolog")
    records, _ = read_cycle_log(out / "cycles.exolog")
    width = row_width(columns)
    rows = np.frombuffer(records.tobytes(), np.float64).reshape(len(records), width).copy()
    new = ("gait_phase", "stride_hz", "walking", "heels", "level", "winding", "derate",
           "drive_temp")
    end = columns["gait_phase"][0]
    assert all(columns[f][0] >= end for f in new) and width > end  # the newest, at the end

    def write(folder: Path, cols: dict, body: np.ndarray) -> None:
        folder.mkdir()
        write_header(folder / "cycles.exolog", cols, meta)
        with open(folder / "cycles.exolog", "ab") as f:
            f.write(np.ascontiguousarray(body).tobytes())

    old_cols = {k: v for k, v in columns.items() if v[0] < end}  # (the later ones too)
    write(tmp_path / "old", old_cols, rows[:, :end])
    export_mcap(tmp_path / "old")
    with open(tmp_path / "old" / "run.mcap", "rb") as f:
        topics = {c.topic for c in make_reader(f).get_summary().channels.values()}
    assert "/assistance" not in topics and {"/joints", "/state", "/timing"} <= topics
    back, _ = read_mcap(tmp_path / "old" / "run.mcap")
    assert back.dtype.names == tuple(old_cols)
    assert back.tobytes() == np.ascontiguousarray(rows[:, :end]).tobytes()

    odd = rows.copy()  # values JSON lacks, in the new columns
    odd[3, columns["gait_phase"][0]] = np.nan
    odd[4, columns["winding"][0] + 1] = np.inf
    odd[5, columns["derate"][0]] = -np.inf
    write(tmp_path / "odd", columns, odd)
    export_mcap(tmp_path / "odd")
    back, _ = read_mcap(tmp_path / "odd" / "run.mcap")
    expect = odd.copy()
    expect[~np.isfinite(expect)] = np.nan
    assert back.tobytes() == expect.tobytes()


def test_the_shipped_layout_is_the_default_runs():
    from exo_rt.record.telemetry import layout
    from exo_rt.resources import layout as shipped_layout
    from exo_rt.runtime.config import load_top

    top = load_top(ROOT / "configs" / "exo_leg.yaml")
    shipped = shipped_layout("exo_leg").read_text()
    generated = layout(top.robot.joint_names)  # what each run writes for its own joints

    def paths(text):
        found = set()

        def walk(x):
            if isinstance(x, dict):
                for k, v in x.items():
                    if k in ("value", "topicPath") and isinstance(v, str):
                        found.add(v)
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)

        walk(json.loads(text))
        return found

    assert paths(shipped) == paths(generated)
    for n in top.robot.joint_names:
        for f in ("q", "q_ref", "current", "command", "torque"):
            assert f"/joints.{f}.{n}" in paths(shipped)
    assert {"/state.state", "/state.cause", "/timing.compute_us", "/events"} <= paths(shipped)
    assert {"/assistance.gait_phase", "/assistance.stride_hz", "/assistance.walking"} <= paths(
        shipped)
    for n in top.robot.joint_names:
        for f in ("level", "winding", "derate"):
            assert f"/assistance.{f}.{n}" in paths(shipped)


@pytest.mark.slow
def test_a_live_port_in_use_stops_the_start(tmp_path):
    """Asked for, the live view must be there: a port in use stops the run before bring-up."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "exo_rt", "run", "--duration", "0.1",
                              "--out", str(tmp_path / "r"), "--live", f"127.0.0.1:{port}"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "choose another --live port" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "r" / "summary.json").exists()
