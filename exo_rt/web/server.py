"""The web console's process: ``python -m exo_rt.web --channel PATH [--host H] [--port P]
[--remote] [--cert FILE --key FILE]`` — started by the run (``exo-rt run --web``), never
alone: it connects to the run's channel (:class:`exo_rt.session.web.WebLink`), serves the
page on uvicorn (HTTP/1.1 and WebSocket; TLS with a certificate), prints its ready line
``serving URL`` and ends when the run closes the channel (or on SIGTERM).

It refuses, in one line on standard error (exit 2), to serve on an address other than
loopback without ``--remote`` and TLS — the run refuses it before this, this is the second
lock — or on a port it cannot take.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys

from exo_rt.processes import ARGS_ON_STDIN

END_GRACE_S = 0.5  # s: after the run's end, the pages are told before the server stops


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m exo_rt.web",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--channel", required=True, help="the run's Unix socket")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080, help="0: any free port")
    ap.add_argument("--remote", action="store_true",
                    help="allow an address other than loopback (with TLS only)")
    ap.add_argument("--cert", default=None, help="TLS certificate (PEM)")
    ap.add_argument("--key", default=None, help="TLS key (PEM)")
    return ap.parse_args(argv)


def _refuse(line: str) -> int:
    print(f"exo-rt web console: error: {line}", file=sys.stderr, flush=True)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == [ARGS_ON_STDIN]:  # started ahead: imports done, the arguments come now
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        line = sys.stdin.readline()
        if not line:
            return 0
        argv = json.loads(line)
    args = _args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl-C is the run's safe stop
    from exo_rt.web.address import is_loopback

    if not is_loopback(args.host) and not (args.remote and args.cert and args.key):
        return _refuse(f"{args.host} is not loopback: serving there needs --remote and TLS "
                       "(--cert, --key) — the page would reach the exoskeleton in clear")
    try:
        import uvicorn  # noqa: F401

        from exo_rt.web.app import make_app  # noqa: F401
    except ImportError as exc:
        return _refuse(f"the web console needs its packages ({exc.name} missing) — pip "
                       "install 'exo-rt[web]'")
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        channel.connect(args.channel)
    except OSError as exc:
        return _refuse(f"cannot reach the run's channel {args.channel} ({exc.strerror})")
    channel.setblocking(False)
    try:
        listener = _listen(args.host, args.port)
    except OSError as exc:
        return _refuse(f"cannot serve on {args.host}:{args.port} ({exc.strerror}) — choose "
                       "another port: --web HOST:PORT")
    return asyncio.run(_serve(args, channel, listener))


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket. Made with its protocol named (IPPROTO_TCP), so that asyncio sets
    TCP_NODELAY on every connection it accepts — ``socket.create_server``'s protocol 0 leaves
    Nagle's algorithm on, and an answer written after a status then waits for the page's
    delayed ACK: 40 ms on Linux (measured: p50 41 ms, 0.9 ms with it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


async def _serve(args, channel: socket.socket, listener: socket.socket) -> int:
    import uvicorn

    from exo_rt.web.app import make_app
    from exo_rt.web.hub import Hub

    hub = Hub(channel)
    config = uvicorn.Config(make_app(hub), log_level="error", access_log=False,
                            lifespan="off", ssl_certfile=args.cert, ssl_keyfile=args.key,
                            ws_ping_interval=None, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    run = asyncio.create_task(hub.read_run())
    watch = asyncio.create_task(hub.watch())
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if serving.done():
        return _refuse("the server did not start")
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"serving {'https' if args.cert else 'http'}://{shown}:{port}/", flush=True)
    await asyncio.wait([serving, run], return_when=asyncio.FIRST_COMPLETED)
    if run.done():  # the run is over: the pages told, then the server stops
        await asyncio.sleep(END_GRACE_S)
        server.should_exit = True
    await serving
    watch.cancel()
    run.cancel()
    channel.close()
    return 0
