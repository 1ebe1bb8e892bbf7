"""Run the HTTP service with uvicorn: the edge protocol (`protocol.EdgeHttpProtocol`), the `http.*` limits and a
graceful SIGTERM (stop accepting, let in-flight requests finish within `http.shutdown_timeout`, stop the app —
which flushes and closes the stores — and exit 0)."""

from __future__ import annotations

import asyncio
import errno
import gc
import signal
import socket
from types import FrameType

import uvicorn

from reme_service.app import ReMeApp
from reme_service.errors import ConfigError
from reme_service.server.http import create_http_app
from reme_service.server.protocol import EdgeHttpProtocol

GC_THRESHOLD = 10_000  # allocations between first-generation collections (CPython's default: 700)


class _GracefulServer(uvicorn.Server):
    """uvicorn re-raises a caught SIGTERM after its graceful shutdown, so the process dies by the signal (-15).
    A completed graceful shutdown is a clean exit: SIGTERM is not re-raised."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if sig == signal.SIGTERM and sig in self._captured_signals:
            self._captured_signals.remove(sig)


def uvicorn_config(app: ReMeApp, *, manage_lifecycle: bool = True) -> uvicorn.Config:
    http = app.config.http
    protocol = EdgeHttpProtocol.configured(
        header_timeout=http.header_timeout,
        max_header_bytes=http.max_header_bytes,
        max_connections=http.max_connections,
        retry_after=http.retry_after,
    )
    return uvicorn.Config(
        create_http_app(app, manage_lifecycle=manage_lifecycle),
        host=http.host,
        port=http.port,
        http=protocol,
        timeout_keep_alive=http.timeout_keep_alive,  # type: ignore[arg-type]  # uvicorn takes float seconds too
        limit_concurrency=None,  # uvicorn's limit counts idle connections and answers plain text; EdgeGuard limits
        timeout_graceful_shutdown=http.shutdown_timeout,  # type: ignore[arg-type]
        access_log=False,  # the service logs each request itself (`observer.py`): request id, flow, duration
        log_config=None,  # keep the service's logging (`observe/logs.py`), text or JSON
        log_level=app.config.log_level.lower(),
    )


def listen(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """The listening socket, bound before anything says "serving": a taken port or an unknown host is a
    `ConfigError` naming the address, the cause and the fix (the CLI prints it as one line, exit 2)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"http.host {host!r} is not an address of this machine ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:  # one socket per worker on the same port: the kernel spreads new connections over them
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        taken = exc.errno == errno.EADDRINUSE
        hint = "stop the other service or choose another http.port" if taken else "check http.host"
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; {hint}") from None
    sock.set_inheritable(True)
    return sock


def run_http(app: ReMeApp, sock: socket.socket | None = None) -> None:
    """Serve until SIGINT/SIGTERM (on `sock` when given: see `listen`); returns after the graceful shutdown.

    The app starts before the server does, in the same event loop, so a start that fails (a store locked by another
    process, a model that cannot load) raises its `ReMeError` here, for the CLI to print as one line, rather than
    as a lifespan traceback of uvicorn's."""
    # The service holds many long-lived objects (every resident memory's node): CPython's default first GC threshold
    # (700 allocations) runs collections so often that walking them dominates bulk reads — an export of 50k memories
    # ran at ~55k/s, ~72k/s with this threshold (or with GC off). Garbage cycles are still collected.
    gc.set_threshold(GC_THRESHOLD, 10, 10)
    server = _GracefulServer(uvicorn_config(app, manage_lifecycle=False))

    async def serve() -> None:
        await app.start()
        try:
            await server.serve(sockets=[sock] if sock is not None else None)
        finally:
            await app.stop()

    # uvicorn's own loop choice (uvloop when installed, as `uvicorn.run` would pick)
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(serve())
    if not server.started:  # as uvicorn.run: the server did not start
        raise SystemExit(3)
