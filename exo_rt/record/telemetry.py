"""Live telemetry: a run watched in Foxglove while it happens (``exo-rt run --live``).

The recording process (:mod:`exo_rt.record.writer`) serves the Foxglove WebSocket protocol
through the Foxglove SDK (its server is native code, on its own threads): every ``every``-th
cycle record (``LIVE_HZ`` a second at most, 200 by default: 1 in 5 at 1 kHz) on /joints,
/state, /timing and /assistance (the gait-phase estimate, assistance level and winding
temperatures; a record with those columns), each encoded only while a client subscribes to
it, every state change on /events and every session event on /activity (within a second:
the control process hands them over once a second) — the same JSON messages as ``run.mcap``
(:mod:`exo_rt.record.mcap_log`). The control thread does nothing for it: it
copies its record into shared memory as it always does, and the decimation, encoding and
sending happen in the recording process.

Nothing opens the door: the server binds 127.0.0.1 unless told otherwise, advertises no
capability at all — no client publish, no parameters, no services (a client that tries gets a
status error and nothing else happens) — and no command of exo-rt takes a setpoint or a gain
from the network. Serving another address needs ``--live-remote`` and prints a warning.
"""

from __future__ import annotations

import ipaddress
import json

import numpy as np

from exo_rt.errors import ConfigError
from exo_rt.record.mcap_log import ASSIST, RowEncoder, log_cycles, log_time_origin, schemas

LIVE_HZ = 200.0
DEFAULT_PORT = 8765
LIVE_TOPICS = ("/joints", "/state", "/timing", ASSIST, "/events", "/activity")


def parse_live(spec: str, remote: bool = False) -> tuple[str, int]:
    """``[HOST:]PORT`` → (host, port); host 127.0.0.1 by default. ConfigError for a bad spec,
    or for an address other than loopback without ``remote``."""
    host, sep, port = spec.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
        if not 0 <= p <= 65535:
            raise ValueError
    except ValueError:
        raise ConfigError(f"cannot read --live '{spec}'", None,
                          "write PORT or HOST:PORT, e.g. --live 8765") from None
    if not is_loopback(host) and not remote:
        raise ConfigError(f"--live on {host} would let anyone on that network watch the "
                          "session", None, "serve on 127.0.0.1 (the default), or add "
                                           "--live-remote to confirm")
    return host, p


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remote_warning(host: str, port: int) -> str:
    return (f"WARNING: live telemetry on {host}:{port} is not loopback: anyone who can reach "
            "this address can watch the session (read only: the server accepts no publish, "
            "parameter or service call)")


class LiveServer:
    """A Foxglove WebSocket server with the run's live channels (its own context)."""

    def __init__(self, host: str, port: int, columns: dict[str, tuple[int, int]], meta: dict,
                 live_hz: float = LIVE_HZ, scene=None) -> None:
        import foxglove

        foxglove.set_log_level("ERROR")  # a misbehaving client must not scribble on the status
        self.enc = RowEncoder(columns, meta)
        self.meta = meta
        rate = float(meta.get("rate_hz", 1000.0))
        self.every = max(1, int(round(rate / live_hz)))
        self.ctx = foxglove.Context()
        self.server = foxglove.start_server(
            name="exo-rt", host=host, port=port, context=self.ctx,
            capabilities=[],  # read only: no client publish, parameters, services, time
            services=None, supported_encodings=None)
        self.host, self.port = host, self.server.port
        all_schemas = schemas(self.enc.names)
        topics = [t for t in LIVE_TOPICS if t != ASSIST or self.enc.assist_idx]
        self.channels = {t: foxglove.Channel(t, schema=all_schemas[t], message_encoding="json",
                                             context=self.ctx) for t in topics}
        self.scene = None  # the 3D scene: /tf with every record sent, /scene at 50 Hz
        if scene is not None:
            from exo_rt.record import scene as sc

            self.scene = sc.SceneLog(scene, columns, meta, scene_every_s=sc.LIVE_SCENE_EVERY_S)
            self.channels |= sc.channels(self.ctx)
        self.t0_ns: int | None = None
        self.sent = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    def watched(self) -> bool:
        """A client is subscribed to the joints' channel (someone is watching)."""
        return bool(self.channels["/joints"].has_sinks())

    def set_origin(self, meta: dict) -> None:
        self.meta = meta
        self.t0_ns = int(round(log_time_origin(meta) * 1e9))

    def rows(self, rows: np.ndarray) -> None:
        """Publish the records of this batch whose cycle is a multiple of ``every`` on the
        per-cycle topics a client subscribes to, and every state change."""
        if not len(rows):
            return
        if self.t0_ns is None:
            self.set_origin(self.meta)
        enc, ch = self.enc, self.channels
        cyc = rows[:, 1]
        pick = np.flatnonzero(np.nan_to_num(cyc) % self.every == 0)
        # a topic nobody subscribes to: nothing to encode
        watched = [(ch[t].base.log, encode) for t, encode in enc.per_cycle
                   if ch[t].has_sinks()] if len(pick) else []
        if watched:
            picked = rows[pick]
            log_cycles(watched, picked, [self.t0_ns + (int(round(t * 1e9)) if t == t else 0)
                                         for t in picked[:, 0].tolist()])
            self.sent += len(pick)
        if self.scene is not None and len(pick):
            tf, scene = ch["/tf"].has_sinks(), ch["/scene"].has_sinks()
            urdf = ch["/robot_description"].has_sinks()
            if tf or scene or urdf:
                picked = rows[pick]
                times = np.nan_to_num(picked[:, 0] * 1e9).round().astype(np.int64) + self.t0_ns
                self.scene.rows(picked, times, self._log, tf=tf, dynamic=scene,
                                static=scene or urdf)
        for i, body in enc.events(rows):
            t = rows[i, 0]
            ch["/events"].base.log(body.encode(),
                                   self.t0_ns + (int(round(t * 1e9)) if t == t else 0))

    def _log(self, topic: str, body: bytes, ns: int) -> None:
        self.channels[topic].base.log(body, ns)

    def activity(self, messages) -> None:
        """The session's events (t, JSON bytes), each at its cycle's time."""
        if self.t0_ns is None:
            self.set_origin(self.meta)
        log = self.channels["/activity"].base.log
        for t, body in messages:
            log(body, self.t0_ns + (int(round(t * 1e9)) if t == t else 0))

    def close(self) -> None:
        self.server.stop()


# ----------------------------------------------------------------------------- layout
def layout(joint_names) -> str:
    """A Foxglove layout (JSON) for these joints: per joint, position against reference, and
    current; torques; the state machine, the safety cause and the session's posture; the
    gait's phase and strides; the wearer's estimated gait phase, stride frequency, walking and
    the assistance level; the windings' temperatures and the current limit's derating; timing;
    the session's last event (/activity) and the state changes (/events); a 3D panel with
    the robot (its URDF on /robot_description, moved by /tf), the floor, the centre of mass
    and the ground reactions (/scene) between the plots."""
    import foxglove.layouts as fl

    def plot(title, series, y_label=None, right=None, right_series=(), right_range=(None, None)):
        """Series (path, label) on the left axis; ``right_series`` on a right one labelled
        ``right`` (its range fixed where given)."""
        axis = fl.PlotSecondaryAxis(id="right", label=right, min=right_range[0],
                                    max=right_range[1])
        return fl.PlotPanel(title=title, config=fl.PlotConfig(
            paths=[fl.PlotSeries(value=v, label=lab) for v, lab in series]
            + [fl.PlotSeries(value=v, label=lab, y_axis_id="right") for v, lab in right_series],
            y_axis_label=y_label, secondary_axes=[axis] if right else None))

    def key(n):  # a message path names a field plainly, or quoted
        return n if n.isidentifier() else json.dumps(n)

    rows = []
    for n in joint_names:
        rows.append(fl.SplitItem(content=fl.SplitContainer(direction="row", items=[
            fl.SplitItem(content=plot(f"{n}: position (rad)", [
                (f"/joints.q.{key(n)}", "q"), (f"/joints.q_ref.{key(n)}", "q_ref")])),
            fl.SplitItem(content=plot(f"{n}: current (A)", [
                (f"/joints.current.{key(n)}", "measured"),
                (f"/joints.command.{key(n)}", "command")])),
        ])))
    left = fl.SplitContainer(direction="column", items=rows + [fl.SplitItem(content=plot(
        "torque (N·m)", [(f"/joints.torque.{key(n)}", n) for n in joint_names]))])
    right = fl.SplitContainer(direction="column", items=[
        fl.SplitItem(content=fl.StateTransitionsPanel(
            title="state", config=fl.StateTransitionsConfig(paths=[
                fl.StateTransitionsSeries(value="/state.state", label="state"),
                fl.StateTransitionsSeries(value="/state.cause", label="safety cause"),
                fl.StateTransitionsSeries(value='/activity{event=="activity"}.posture',
                                          label="posture"),
                fl.StateTransitionsSeries(value='/activity{event=="request"}.answer',
                                          label="answer")]))),
        fl.SplitItem(content=plot("gait: phase and strides (strides)", [
            ("/state.phase", "phase"), ("/state.stride", "strides")])),
        fl.SplitItem(content=plot(
            "the wearer's gait: estimated phase (strides), walking, level; stride frequency", [
                (f"{ASSIST}.gait_phase", "phase"), (f"{ASSIST}.walking", "walking")]
            + [(f"{ASSIST}.level.{key(n)}", f"level {n}") for n in joint_names], "0–1",
            right="stride frequency (Hz)",
            right_series=[(f"{ASSIST}.stride_hz", "stride frequency")])),
        fl.SplitItem(content=plot(
            "windings (°C) and current-limit derating", [
                (f"{ASSIST}.winding.{key(n)}", f"winding {n}") for n in joint_names], "°C",
            right="derate (0–1)", right_range=(0.0, 1.05),
            right_series=[(f"{ASSIST}.derate.{key(n)}", f"derate {n}") for n in joint_names])),
        fl.SplitItem(content=plot("timing (µs)", [("/timing.compute_us", "compute"),
                                                  ("/timing.wake_us", "wake")])),
        fl.SplitItem(content=fl.TablePanel(
            title="session (the last event)", config=fl.TableConfig(topic_path="/activity"))),
        fl.SplitItem(content=fl.RawMessagesPanel(
            title="events", config=fl.RawMessagesConfig(topic_path="/events"))),
    ])
    root = fl.SplitContainer(direction="row", items=[
        fl.SplitItem(proportion=2, content=left),
        fl.SplitItem(proportion=1.6, content=three_d(fl)),
        fl.SplitItem(proportion=1, content=right)])
    return json.dumps(json.loads(fl.Layout(content=root).to_json()), indent=1) + "\n"


def three_d(fl):
    """The 3D panel: the robot from /robot_description moved by /tf, and /scene's entities
    (floor, seat, centre of mass, contact points and ground-reaction arrows), seen from the
    wearer's left in the world frame."""
    urdf = fl.BaseRendererUrdfLayerSettings(
        visible=True, instance_id="exo-rt-urdf", layer_id="foxglove.Urdf", label="exo-rt robot",
        source_type="topic", topic="/robot_description", display_mode="visual")
    grid = fl.BaseRendererGridLayerSettings(
        visible=True, instance_id="exo-rt-grid", layer_id="foxglove.Grid", frame_id="world",
        size=4.0, divisions=8)
    return fl.ThreeDeePanel(title="3D: the leg, the floor, centre of mass and ground reactions",
                            config=fl.ThreeDeeConfig(
        layers={"exo-rt-urdf": urdf, "exo-rt-grid": grid},
        follow_tf="world", follow_mode="follow-none",
        camera_state=fl.ThreeDeeCameraState(distance=3.2, perspective=True, phi=70.0,
                                             theta_offset=90.0, target=(0.0, 0.0, 0.6))))
