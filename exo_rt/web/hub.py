"""The web process's core, apart from the web framework: the pages connected, who controls,
pairing, the heartbeat, and the channel to the control process (:mod:`exo_rt.session.web`
is its other end).

- Every page watches: it gets the run's description, the machine's status, a tick of numbers
  every 0.1 s, every answer, the alarms.
- **One controller at a time.** A page that types the pairing code (printed on the PC's
  terminal) is paired; the first paired page controls. Others paired watch, read only — a
  request from a page that does not control is refused here, with the reason, and never
  reaches the run — and may take control only once the controller hands it over or is gone
  (closed, or silent for more than ``SILENCE_S``). Wrong codes are refused; after
  ``MAX_WRONG`` wrong codes in ``WRONG_WINDOW_S`` pairing is locked for ``LOCK_S``.
- **Heartbeat.** A page sends ``alive`` every 0.25 s; the controlling page's is relayed to the
  run, which stops a walk at the end of its stride once no controlling page has been heard
  for more than ``SILENCE_S`` (:class:`exo_rt.session.web.WebConsole`). Here, a controller
  silent that long loses control (said to every page, recorded).
- **Requests.** The controller's requests go to the run with the page's id and its request
  id; the answer comes back to every page. GO and its release are refused here (the wearer's,
  on the crutch). At most ``IN_FLIGHT`` of a page's requests wait for their answers.

Everything a page did that the run should keep — paired, a wrong code, control taken,
handed over or lost, a request refused here — is sent to the run as a note and recorded in
its events (``"event": "web"``).
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import itertools
import json
import secrets
import socket
import time

from exo_rt.web.alarms import alarms
from exo_rt.web.channel import ASKABLE, MESSAGE_BYTES, SILENCE_S

MAX_WRONG = 5  # wrong pairing codes …
WRONG_WINDOW_S = 60.0  # … within this long lock pairing …
LOCK_S = 30.0  # … for this long
IN_FLIGHT = 8  # a page's requests waiting for their answers, at most
ANSWERS_KEPT = 12  # the last answers a page is shown when it connects
RELAY_S = 0.1  # s: the controller's heartbeat relayed to the run at most this often
OUTBOX = 256  # messages waiting for a slow page, at most (then it is closed)
MESSAGE_CHARS = 4096  # the longest message a page may send


class Page:
    """One page connected: its id, where from, whether paired, when last heard (monotonic
    s), its outgoing queue, its requests in flight."""

    def __init__(self, cid: str, peer: str) -> None:
        self.id, self.peer = cid, peer
        self.paired = False
        self.heard = time.monotonic()
        self.outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self.in_flight: set = set()
        self.closed = False


class Hub:
    """The pages and the run's channel (a connected ``SOCK_SEQPACKET`` socket, or None in
    tests that play the run themselves through :meth:`from_run`)."""

    def __init__(self, channel: socket.socket | None = None, *, code: str | None = None,
                 clock=time.monotonic) -> None:
        self.channel = channel
        self.code = code  # the pairing code (from the run's hello)
        self.clock = clock
        self.pages: dict[str, Page] = {}
        self.controller: str | None = None
        self.config: dict | None = None
        self.status: dict | None = None
        self.tick: dict | None = None
        self.answers: collections.deque[dict] = collections.deque(maxlen=ANSWERS_KEPT)
        self.ended: str | None = None  # the run is over (or not heard): why
        self.alarms: list[dict] = []
        self.wrong: collections.deque[float] = collections.deque()
        self.locked_until = -float("inf")
        self._ids = itertools.count(1)
        self._relayed = -float("inf")
        self.sent_to_run: list[dict] = []  # (tests without a channel: what was sent)
        self.ready = asyncio.Event()  # the run's hello came

    # ------------------------------------------------------------------ the run's channel
    async def _to_run(self, msg: dict) -> None:
        if self.channel is None:
            self.sent_to_run.append(msg)
            return
        data = json.dumps(msg, separators=(",", ":")).encode()
        try:
            await asyncio.get_running_loop().sock_sendall(self.channel, data)
        except OSError as exc:
            self._lost(f"the channel failed ({exc.__class__.__name__})")

    async def read_run(self) -> None:
        """The run's messages until its end (the channel closed: the run is over)."""
        loop = asyncio.get_running_loop()
        why = "the run is over"
        try:
            while True:
                data = await loop.sock_recv(self.channel, MESSAGE_BYTES)
                if not data:
                    break
                try:
                    msg = json.loads(data)
                except ValueError:
                    continue
                self.from_run(msg)
        except OSError as exc:
            why = f"the channel failed ({exc.__class__.__name__})"
        self._lost(why)

    def _lost(self, why: str) -> None:
        if self.ended is None:
            self.ended = why
            self._alarms()
            self.broadcast({"t": "end", "why": why, "alarms": self.alarms})

    def from_run(self, msg: dict) -> None:
        """One message of the run: its hello, a status, a tick, an answer, its end."""
        t = msg.get("t")
        if t == "hello":
            self.code = str(msg.pop("code", self.code))
            self.config = msg
            self.ready.set()
            self.broadcast({"t": "config", "config": msg})
            return
        if t == "status":
            self.status = msg
        elif t == "tick":
            self.tick = msg
        elif t == "answer":
            self.answers.append(msg)
            page = self.pages.get(msg.get("client") or "")
            if page is not None and msg.get("rid") is not None:
                page.in_flight.discard(msg["rid"])
        elif t == "end":
            self.ended = msg.get("why", "the run is over")
        self._alarms()
        if t in ("status", "tick", "end"):
            msg = dict(msg, alarms=self.alarms)
        self.broadcast(msg)

    def _alarms(self) -> None:
        lost = self.ended if self.ended and self.ended != "the run is over" else None
        self.alarms = alarms(self.config, self.status, self.tick, lost)

    # ------------------------------------------------------------------ pages
    def connect(self, peer: str) -> Page:
        """A new page: it watches; told everything known so far."""
        page = Page(f"page{next(self._ids)}-{secrets.token_hex(2)}", peer)
        self.pages[page.id] = page
        self.send(page, self.welcome(page))
        return page

    def welcome(self, page: Page) -> dict:
        return {"t": "welcome", "client": page.id, "role": self.role(page),
                "controller": self.controller, "config": self.config, "status": self.status,
                "tick": self.tick, "answers": list(self.answers), "alarms": self.alarms,
                "ended": self.ended, "silence_s": SILENCE_S}

    def role(self, page: Page) -> str:
        if self.controller == page.id:
            return "controller"
        return "watcher" if page.paired else "unpaired"

    async def disconnect(self, page: Page) -> None:
        page.closed = True
        self.pages.pop(page.id, None)
        page.outbox.put_nowait(None)
        if self.controller == page.id:
            await self._release(page, "page closed")

    def send(self, page: Page, msg: dict | str) -> None:
        if page.closed:
            return
        if page.outbox.qsize() >= OUTBOX:  # (a page that does not read: closed)
            page.closed = True
            page.outbox.put_nowait(None)
            return
        page.outbox.put_nowait(msg if isinstance(msg, str) else json.dumps(msg))

    def broadcast(self, msg: dict) -> None:
        text = json.dumps(msg)
        for page in list(self.pages.values()):
            self.send(page, text)

    def _roles(self) -> None:
        for page in list(self.pages.values()):
            self.send(page, {"t": "role", "role": self.role(page),
                             "controller": self.controller})

    async def _note(self, what: str, page: Page | None, **more) -> None:
        msg = {"t": "note", "what": what}
        if page is not None:
            msg["client"] = page.id
        msg.update(more)
        await self._to_run(msg)

    # ------------------------------------------------------------------ a page's messages
    async def receive(self, page: Page, text: str) -> None:
        """One message from a page (anything it sends is also its heartbeat)."""
        now = self.clock()
        page.heard = now
        if page.id == self.controller and now - self._relayed >= RELAY_S:
            self._relayed = now
            await self._to_run({"t": "alive", "client": page.id})
        if len(text) > MESSAGE_CHARS:
            self.send(page, {"t": "refused", "what": "message", "why": "too long"})
            return
        try:
            msg = json.loads(text)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            self.send(page, {"t": "refused", "what": "message", "why": "not a JSON object"})
            return
        t = msg.get("t")
        if t == "alive":
            return
        if t == "pair":
            await self._pair(page, str(msg.get("code", "")))
        elif t == "take":
            await self._take(page)
        elif t == "hand_over":
            if self.controller == page.id:
                await self._release(page, "handed over")
            else:
                self.send(page, {"t": "refused", "what": "hand_over",
                                 "why": "this page does not control"})
        elif t == "ask":
            await self._ask(page, msg)
        else:
            self.send(page, {"t": "refused", "what": str(t)[:32], "why": "unknown message"})

    async def _pair(self, page: Page, code: str) -> None:
        now = self.clock()
        while self.wrong and now - self.wrong[0] > WRONG_WINDOW_S:
            self.wrong.popleft()
        if now < self.locked_until:
            why = (f"pairing locked for {self.locked_until - now:.0f} s more: too many wrong "
                   "codes")
            self.send(page, {"t": "refused", "what": "pair", "why": why})
            await self._note("pair_refused", page, why=why, peer=page.peer)
            return
        if self.code is None or not hmac.compare_digest(code.replace(" ", ""), self.code):
            self.wrong.append(now)
            why = "wrong pairing code: type the code printed on the PC's terminal"
            if len(self.wrong) >= MAX_WRONG:
                self.locked_until = now + LOCK_S
                why += f" (pairing locked {LOCK_S:g} s: {MAX_WRONG} wrong codes)"
            self.send(page, {"t": "refused", "what": "pair", "why": why})
            await self._note("wrong_code", page, peer=page.peer)
            return
        page.paired = True
        await self._note("paired", page, peer=page.peer)
        if self.controller is None:
            await self._control(page, "paired first")
        else:
            self.send(page, {"t": "role", "role": "watcher", "controller": self.controller,
                             "why": f"page {self.controller} controls: this page watches "
                                    "until it hands over or is gone"})

    async def _take(self, page: Page) -> None:
        if not page.paired:
            why = "pair first: type the code printed on the PC's terminal"
        elif self.controller == page.id:
            why = "this page controls already"
        elif self.controller is not None:
            why = (f"page {self.controller} controls: it must hand over first (or be gone: "
                   f"closed, or silent {SILENCE_S:g} s)")
        else:
            await self._control(page, "taken")
            return
        self.send(page, {"t": "refused", "what": "take", "why": why})

    async def _control(self, page: Page, why: str) -> None:
        self.controller = page.id
        self._relayed = self.clock()
        await self._to_run({"t": "control", "client": page.id, "why": why})
        self._roles()

    async def _release(self, page: Page, why: str) -> None:
        if self.controller != page.id:
            return
        self.controller = None
        await self._to_run({"t": "control", "client": None, "why": f"{page.id} {why}"})
        self.broadcast({"t": "notice", "text": f"page {page.id} no longer controls ({why}): "
                                               "a walk stops at the end of its stride unless "
                                               f"a page takes control within {SILENCE_S:g} s"})
        self._roles()

    async def _ask(self, page: Page, msg: dict) -> None:
        rid = msg.get("rid")
        kind = str(msg.get("kind", ""))
        why = None
        if self.controller != page.id:
            why = ("read only: this page watches" + (f" (page {self.controller} controls)"
                                                     if self.controller else
                                                     " (pair, then take control)"))
        elif kind in ("go", "go_release"):
            why = "GO is the wearer's: the crutch's button"
        elif kind not in ASKABLE:
            why = f"no request '{kind[:32]}'"
        elif self.ended is not None:
            why = f"the run is over ({self.ended})"
        elif len(page.in_flight) >= IN_FLIGHT:
            why = f"{IN_FLIGHT} requests of this page wait for their answers"
        if why is not None:
            self.send(page, {"t": "refused", "what": "ask", "rid": rid, "kind": kind[:32],
                             "why": why})
            await self._note("refused", page, request=kind[:32], why=why)
            return
        out = {"t": "req", "client": page.id, "rid": rid, "kind": kind}
        for key in ("motion", "value", "legs"):
            if msg.get(key) is not None:
                out[key] = msg[key]
        if rid is not None:
            page.in_flight.add(rid)
        await self._to_run(out)

    # ------------------------------------------------------------------ the heartbeat
    async def watch(self, period: float = 0.1) -> None:
        """Every ``period`` s: a controller silent more than ``SILENCE_S`` loses control."""
        while True:
            await asyncio.sleep(period)
            await self.check_silence()

    async def check_silence(self) -> None:
        page = self.pages.get(self.controller or "")
        if page is not None:
            silent = self.clock() - page.heard
            if silent > SILENCE_S:
                await self._release(page, f"silent {1e3 * silent:.0f} ms")
