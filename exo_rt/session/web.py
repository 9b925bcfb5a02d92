"""The therapist's web console, its end in the control process: a request source and a sink
of answers and status, like the console's keys and status line, for the page served by a
process of its own (:mod:`exo_rt.web`, docs/console-web.md).

The two processes talk over one Unix socket (``SOCK_SEQPACKET``: whole messages, in order)
in a folder only this user may open; the web process connects to it. Each message is one JSON
object. What the control process gets — a page's request (``req``, with the page's id), the
controlling page's heartbeat (``alive``), who controls (``control``), what the web process
did on its own that the run records (``note``: pairing, a page refused) — is read by a daemon
thread into bounded queues; :meth:`WebConsole.poll` turns at most ``REQUESTS_PER_POLL`` of
them a cycle into requests of source ``web`` (the page's id in ``client``) without ever
blocking, and the session answers them as any other source's. What it sends — every answer
(to whichever source), the machine's status when it changes, a tick of numbers every
``TICK_CYCLES`` — is sent without blocking from the control thread (a full socket drops the
message and counts it: the next status or tick says it all again).

The page's heartbeat: a page that controls sends one every 0.25 s; the web process relays it.
A walk during which a page controlled, and no controlling page has been heard for more than
``SILENCE_S`` (the page closed, the network gone, the web process gone), is stopped at the
end of its stride — a STOP of source ``web`` from the page last heard, noted why — as when the
crutch goes silent: not SAFE. The web page never reaches GO (the wearer's, on the crutch),
nor the E-stop (the board's): it shows their state.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass

from exo_rt.session.roles import Sink, Source
from exo_rt.web.channel import ASKABLE, MESSAGE_BYTES, SILENCE_S
from firmware_bridge import requests as rq
from firmware_bridge.requests import Request

EMPTY: tuple = ()
TICK_CYCLES = 100  # the numbers (time, progress, strides, windings, E-stop) every 0.1 s
REQUESTS_PER_POLL = 4  # a cycle takes at most this many of the pages' requests
MAX_WAITING = 64  # the most requests waiting to be polled; more are dropped (said)
MAX_NOTES = 256  # the most notes waiting to be recorded
ESTOP_WHERE = ("the red E-stop button wired to the exoskeleton's embedded board, within the "
               "wearer's and the therapist's reach — never on this page")

__all__ = ["WebConsole", "WebLink", "SILENCE_S", "TICK_CYCLES", "ASKABLE"]


class WebLink:
    """The control process's end of the channel: a listening ``SOCK_SEQPACKET`` Unix socket
    at :attr:`path`, in a new folder only this user may open (mode 0700); one peer (the web
    process) is accepted. Messages in are parsed in a daemon thread (:attr:`requests`,
    :attr:`notes`; :attr:`heard` the controlling page's last heartbeat, monotonic s);
    :meth:`send` never blocks."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="exo-rt-web-")  # (0700: this user only)
        self.path = os.path.join(self.dir, "control.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.conn: socket.socket | None = None
        self.requests: collections.deque[dict] = collections.deque()
        self.notes: collections.deque[dict] = collections.deque()
        self.controller: str | None = None  # the page that controls now (its id)
        self.heard = -float("inf")  # monotonic s: a controlling page last heard
        self.lost: str | None = None  # why the web process cannot be heard any more
        self.dropped = 0  # messages not sent (a full socket), requests not queued
        self.sent = 0
        self._thread = threading.Thread(target=self._read, name="exo-rt web link",
                                        daemon=True)
        self._thread.start()

    def _read(self) -> None:
        why = "the web process closed its end"
        try:
            conn, _ = self.listener.accept()
            self.conn = conn
            while True:
                data = conn.recv(MESSAGE_BYTES)
                if not data:
                    break
                try:
                    msg = json.loads(data)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    self._take(msg)
        except OSError as exc:
            if self.listener.fileno() != -1:
                why = f"the channel failed ({exc.__class__.__name__}: {exc})"
        self.lost = why

    def _take(self, msg: dict) -> None:
        """One message from the web process, in the reading thread."""
        t = msg.get("t")
        if t == "alive":
            if msg.get("client") is not None and msg.get("client") == self.controller:
                self.heard = time.monotonic()
        elif t == "control":
            self.controller = msg.get("client")
            if self.controller is not None:
                self.heard = time.monotonic()
            self._note(msg)
        elif t == "req":
            if len(self.requests) < MAX_WAITING:
                self.requests.append(msg)
            else:
                self.dropped += 1
        elif t == "note":
            self._note(msg)

    def _note(self, msg: dict) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(msg)

    def send(self, obj) -> bool:
        """One message to the web process, never blocking: False (counted in
        :attr:`dropped`) when it is not connected or its socket is full."""
        conn = self.conn
        if conn is None:
            return False
        try:
            conn.send(json.dumps(obj, separators=(",", ":")).encode(), socket.MSG_DONTWAIT)
        except OSError:  # (BlockingIOError: full; a peer gone: the reader says why)
            self.dropped += 1
            return False
        self.sent += 1
        return True

    def wait_connected(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while self.conn is None and self.lost is None and time.monotonic() < end:
            time.sleep(0.005)
        return self.conn is not None

    def close(self) -> None:
        for s in (self.conn, self.listener):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        self._thread.join(1.0)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass(frozen=True)
class WebRun:
    """What the web console sees of its run: the ``cycle`` (:class:`exo_rt.cycle.step.Cycle`:
    its windings and derating, ``s["state"]`` the run's state, ``s["cause"]`` a SAFE's
    cause), the ``robot`` (its name, joints), the period ``dt`` (s), the run's ``duration``
    (s), ``k0`` (the cycle each state began: the run's own dict, filled as it goes), the
    ``board`` (:class:`exo_rt.runtime.rig.Board`: its e-stop, power, link); where the page
    is served (``where``: an :class:`exo_rt.web.address.WebAddress`, or its ``[HOST:]PORT``
    text), the helper processes' ``cpus`` and the run's ``setup_lines`` (appended to)."""

    cycle: object
    robot: object
    dt: float
    duration: float
    k0: dict
    board: object
    where: object
    cpus: set
    setup_lines: list


class WebConsole(Source, Sink):
    """The web console on a session: a source (:meth:`poll`: the pages' requests, a STOP
    when the controlling page went silent during a walk) and a sink (:meth:`answer`,
    :meth:`show`: every answer and the machine's status to the web process). ``run``: what
    it sees of the run (:class:`WebRun`); ``link``: a :class:`WebLink`;
    ``events``: the run's events (a page's pairing, hand-over, refusal is recorded there,
    ``"event": "web"``); ``helper``: the web process (stopped at :meth:`close`)."""

    def __init__(self, run: WebRun, machine, link: WebLink, events: list, *, helper=None,
                 url: str = "", code: str = "") -> None:
        self.run, self.machine, self.link, self.events = run, machine, link, events
        self.helper, self.url, self.code = helper, url, code
        self._tick_at = 0
        self._rids: dict[int, tuple[str, int]] = {}  # id(request) → (client, the page's rid)
        self._watch = False  # a page controlled during this walk: its silence stops it
        self._silent_stop: str | None = None  # this walk was stopped for it (said)
        self._stride = (None, None, None)  # (speed, step length) → stride length m
        self.session = None  # set by the session's maker: the request just answered
        from exo_rt.cycle.layout import V_DERATE

        c = run.cycle
        self._winding, self._derate = c.winding, c.v[V_DERATE]
        self._lost_link = False
        self._controller_seen: str | None = None  # the last page that took control

    # -- the first message: what does not change during the run
    def hello(self) -> dict:
        m, run = self.machine, self.run
        w, acts = m.wearer, m.activities
        th = run.cycle.thermal
        joints = list(run.robot.joint_names)
        return {"t": "hello", "code": self.code, "robot": run.robot.name,
                "joints": joints, "legs": [leg or "leg" for leg in acts.legs],
                "leg_names": list(acts.legs),
                "motions": [{"name": x.name, "kind": x.kind, "start": x.start, "end": x.end,
                             "hold_go": bool(x.hold_go), "stoppable": bool(x.stoppable)}
                            for x in acts.motions],
                "speed": {"min": w.speed.min, "max": w.speed.max, "default": w.speed.default,
                          "presets": list(w.speed.presets)},
                "step_length": {"min": w.step_length.min, "max": w.step_length.max},
                "warning_C": [float(x) for x in th["warning"]],
                "limit_C": [float(x) for x in th["limit"]],
                "duration": run.duration,
                "board": run.board.present, "estop_where": ESTOP_WHERE,
                "silence_s": SILENCE_S}

    # -- a source
    def poll(self, k: int):
        link, out = self.link, None
        if link.notes:
            self._notes(k)
        reqs = link.requests
        for _ in range(REQUESTS_PER_POLL):
            if not reqs:
                break
            req = self._request(reqs.popleft(), k)
            if req is not None:
                out = out or []
                out.append(req)
        m = self.machine
        walking = m.motion is not None and m.motion.kind == "walk" and not m.stop_asked
        if walking:
            if link.controller is not None:
                self._watch = True
            if self._watch and self._silent_stop is None:
                silent = time.monotonic() - link.heard
                if silent > SILENCE_S:
                    who = link.controller or self._last_controller()
                    self._silent_stop = (f"page {who} silent {1e3 * silent:.0f} ms" if who else
                                         f"no page controls ({1e3 * silent:.0f} ms)")
                    out = out or []
                    out.append(Request(rq.STOP, rq.WEB, k, note=self._silent_stop,
                                       client=who))
        elif m.motion is None:
            self._watch = False
            self._silent_stop = None
        if link.lost is not None and not self._lost_link:
            self._lost_link = True
            self._event(k, {"what": "channel_lost", "why": link.lost})
        if k >= self._tick_at:
            self._tick_at = k + TICK_CYCLES
            link.send(self.tick(k))
        return out or EMPTY

    def _last_controller(self) -> str | None:
        return self._controller_seen

    def _notes(self, k: int) -> None:
        notes = self.link.notes
        while notes:
            msg = notes.popleft()
            if msg.get("t") == "control":
                if msg.get("client") is not None:
                    self._controller_seen = msg["client"]
                ev = {"what": "control", "client": msg.get("client"),
                      "why": msg.get("why", "")}
            else:
                ev = {k2: v for k2, v in msg.items() if k2 != "t"}
            self._event(k, ev)

    def _event(self, k: int, ev: dict) -> None:
        out = {"cycle": k, "t": round(k * self.run.dt, 6), "event": "web"}
        out.update(ev)
        self.events.append(out)

    def _request(self, msg: dict, k: int) -> Request | None:
        kind = rq.BY_NAME.get(str(msg.get("kind")))
        client = str(msg.get("client"))
        if kind is None or rq.KINDS[kind] not in ASKABLE:  # (the web process refuses them
            return None  # first: a message that still brings one is not heard)
        value = msg.get("value")
        legs = msg.get("legs")
        try:
            value = float(value) if value is not None else None
            legs = tuple(str(x) for x in legs) if legs else None
        except (TypeError, ValueError):
            value, legs = float("nan"), None
        motion = msg.get("motion")
        req = Request(kind, rq.WEB, k, motion=str(motion) if motion is not None else None,
                      value=value, legs=legs, client=client)
        if msg.get("rid") is not None:
            if len(self._rids) > 4 * MAX_WAITING:
                self._rids.clear()
            self._rids[id(req)] = (client, msg["rid"])
        return req

    # -- a sink
    def answer(self, ans, k: int) -> None:
        """Every answer, to whichever source, to the pages (the request it answers with it:
        the session's log holds it, appended just before its sinks are told)."""
        out = {"t": "answer", "k": k, "time": self._time(k)}
        out.update(ans.as_dict())
        log = self.session.log if self.session is not None else ()
        if log and log[-1][2] is ans and log[-1][1] is not None:
            req = log[-1][1]
            out.update({"source": rq.SOURCES[req.source]})
            if req.client is not None:
                out["client"] = req.client
            if req.note is not None:
                out["note"] = req.note
            if req.value is not None:
                out["value"] = req.value
            if req.legs is not None:
                out["legs"] = list(req.legs)
            rid = self._rids.pop(id(req), None)
            if rid is not None:
                out["rid"] = rid[1]
        self.link.send(out)

    def show(self, machine, k: int) -> None:
        self.link.send(self.status(k))

    def _time(self, k: int) -> float:
        from exo_rt.cycle.states import RUN

        return round((k - self.run.k0.get(RUN, k)) * self.run.dt, 3)

    def status(self, k: int) -> dict:
        """What the page shows of the machine (sent when it changes)."""
        m = self.machine
        motion, seg = m.motion, m.seg
        needs = {}
        for name in m.possible():
            x = m.activities.motion(name)
            if x is not None and x.hold_go:
                needs[name] = "GO held on the crutch"
            elif x is not None and x.needs_confirm:
                needs[name] = "then CONFIRM"
        key = (m.speed, m.step_length)
        if self._stride[:2] != key:
            try:
                stride = float(m.gaits(m.speed, m.step_length)[2])
            except ValueError:
                stride = None
            self._stride = (*key, stride)
        stride = self._stride[2]
        step = m.step_length if m.step_length is not None else (
            stride / 2.0 if stride is not None else None)
        return {"t": "status", "k": k, "time": self._time(k), "posture": m.posture,
                "motion": motion.name if motion is not None else None,
                "kind": motion.kind if motion is not None else None,
                "hold": bool(motion is not None and motion.hold_go),
                "stopping": bool(motion is not None and m.stop_asked),
                "possible": m.possible(), "needs": needs, "selected": m.selected_motion(),
                "strides": m.steps, "speed": m.speed, "step_length": step,
                "stride": stride, "levels": {(leg or "leg"): v for leg, v in m.levels.items()},
                "go": m.go_held, "go_block": bool(m.go_block and motion is None),
                "pending": m.home_pending.name if m.home_pending is not None else None,
                "ended": m.ended, "silent_stop": self._silent_stop,
                "duration": self.run.duration,
                "progress": _progress(seg, motion)}

    def tick(self, k: int) -> dict:
        """The numbers that change every cycle, every ``TICK_CYCLES``: the session's time,
        the controller's state (and SAFE's cause), a move's progress, strides, the windings'
        temperatures (°C) and derating factors, the E-stop and motor power, the inputs
        lost."""
        from exo_rt.cycle.safety import CAUSES
        from exo_rt.cycle.states import STATES

        run, m = self.run, self.machine
        state = STATES[int(run.cycle.s["state"])]
        board = run.board
        lost = []
        sess = self.session
        console = sess.console if sess is not None and sess.console in sess.sources else None
        buttons = sess.buttons if sess is not None and sess.buttons in sess.sources else None
        if console is not None and console.source.lost is not None:
            lost.append(f"the console's keys are lost ({console.source.lost})")
        if buttons is not None and buttons.lost:
            lost.append("the crutch's buttons are silent: the walk stops at the end of its "
                        "stride")
        if self._silent_stop:
            lost.append(f"{self._silent_stop}: the walk stops at the end of its stride")
        return {"t": "tick", "k": k, "time": self._time(k), "state": state,
                "cause": CAUSES[int(run.cycle.s["cause"])] if state == "SAFE" else None,
                "progress": _progress(m.seg, m.motion), "strides": m.steps,
                "winding_C": [round(float(x), 2) for x in self._winding],
                "derate": [round(float(x), 4) for x in self._derate],
                "estop": bool(board.estop) if board.present else None,
                "power": bool(board.motor_power) if board.present else None,
                "board_lost": bool(board.link_lost) if board.present else None,
                "lost": lost, "dropped": self.link.dropped}

    def close(self) -> None:
        """The run is over: the pages told, the web process stopped, the channel gone."""
        self.link.send({"t": "end", "why": "the run is over"})
        if self.helper is not None:
            self.helper.stop(5.0)
        self.link.close()


def _progress(seg, motion) -> float | None:
    if motion is None or motion.kind == "walk" or seg["seg_duration"] <= 0:
        return None
    return round(min(float(seg["seg_tau"] / seg["seg_duration"]), 1.0), 4)


def start(run: WebRun, sess) -> WebConsole:
    """The web console of a run (served where ``run.where`` says) on its session ``sess``:
    the channel opened, the web process
    started (SCHED_OTHER on the helper CPUs, as the recording), its pairing code
    made and printed on this terminal with the page's address (and the certificate's
    fingerprint under TLS). BusError when the web process does not start."""
    import secrets
    import sys

    from exo_rt.errors import BusError
    from exo_rt.processes import Helper
    from exo_rt.web.address import WebAddress, parse_web

    where = run.where
    addr = where if isinstance(where, WebAddress) else parse_web(str(where))
    link = WebLink()
    code = f"{secrets.randbelow(10 ** 6):06d}"
    try:
        helper = Helper("web console", "exo_rt.web", ["--channel", link.path, *addr.args()],
                        cpus=run.cpus, ready_timeout=30.0)
    except BusError:
        link.close()
        raise
    url = helper.ready_line.split()[-1]
    if not link.wait_connected(5.0):
        helper.stop(2.0)
        link.close()
        raise BusError("the web console's process did not connect to the run", None,
                       "run with --debug to see its error, or leave --web out")
    page = WebConsole(run, sess.machine, link, sess.events, helper=helper, url=url, code=code)
    page.session = sess
    link.send(page.hello())
    run.setup_lines.append(f"web console process {helper.pid}: {helper.placement}")
    line = (f"web console: {url} — pairing code {code[:3]} {code[3:]} (type it on the page: "
            "the first page paired controls, others watch)")
    if addr.fingerprint:
        line += f"; TLS certificate SHA-256 {addr.fingerprint}"
    print(line, file=sys.stderr, flush=True)
    return page
