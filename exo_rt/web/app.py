"""The web console's ASGI application (Starlette): the page and its assets from the package
(``exo_rt/web/static``: nothing loaded from elsewhere), and one WebSocket (``/ws``) per page
on the :class:`~exo_rt.web.hub.Hub`.

Every response forbids framing and caching and allows scripts, styles, images and WebSocket
connections from this origin only (Content-Security-Policy); a WebSocket whose ``Origin`` is
not this server's own is refused (another site open in the tablet's browser cannot drive the
exoskeleton).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from exo_rt.web.hub import Hub

STATIC = Path(__file__).resolve().parent / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Headers:
    """Adds :data:`HEADERS` to every HTTP response."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()
                         if k.lower().encode() not in have]
                message = dict(message, headers=[*message.get("headers", []), *extra])
            await send(message)

        return await self.app(scope, receive, with_headers)


def _origin_ok(ws: WebSocket) -> bool:
    """The page's ``Origin`` is this server (scheme and host as the page asked for it)."""
    origin = ws.headers.get("origin")
    host = ws.headers.get("host")
    if origin is None:  # (not a browser: a tool on this machine)
        return True
    scheme = "https" if ws.url.scheme == "wss" else "http"
    return origin == f"{scheme}://{host}"


def make_app(hub: Hub) -> Starlette:
    """The application on ``hub``."""

    async def index(request):
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def health(request):
        return Response("ok" if hub.ended is None else f"ended: {hub.ended}",
                        media_type="text/plain")

    async def pages(ws: WebSocket):
        if not _origin_ok(ws):
            await ws.close(code=1008)
            return
        await ws.accept()
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
        page = hub.connect(peer)

        async def sender():
            while True:
                text = await page.outbox.get()
                if text is None:
                    break
                await ws.send_text(text)

        out = asyncio.create_task(sender())
        try:
            while not page.closed:
                text = await ws.receive_text()
                await hub.receive(page, text)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            await hub.disconnect(page)
            out.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await out
            with contextlib.suppress(Exception):
                await ws.close()

    routes = [Route("/", index), Route("/health", health),
              WebSocketRoute("/ws", pages),
              Mount("/static", StaticFiles(directory=STATIC), name="static")]
    return Starlette(routes=routes, middleware=[Middleware(_Headers)])
