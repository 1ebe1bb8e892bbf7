"""The HTTP/1.1 connection protocol uvicorn runs for `reme`: uvicorn's httptools protocol plus connection hygiene.

uvicorn alone keeps a connection that never sends a request open forever (its keep-alive timer starts only after
a first response), and its `limit_concurrency` counts open connections, so a few hundred idle sockets make it
answer 503 to everyone. This subclass adds, per connection:

- a **head timeout**: a request head (request line + headers) must be complete within `header_timeout` seconds of
  the connection opening, or of its first byte on a kept-alive connection; otherwise the connection is closed;
- a **head size limit**: a head longer than `max_header_bytes` bytes is answered 431 and closed, before the parser
  sees it: whether it arrives in pieces (counted as they come) or whole in one read (measured to its blank line);
- a **connection cap**: past `max_connections` open connections, a new one evicts the connection that has been
  waiting longest for a request head (idle keep-alive or half-sent head); when every connection is busy the new
  one gets 503 `overloaded` and is closed. Idle sockets therefore never starve clients that send requests.

Requests in flight are limited separately, in the ASGI layer (`reme_service.server.guard`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from reme_service.errors import HeaderTooLargeError, OverloadedError
from reme_service.server.envelope import raw_response

logger = logging.getLogger("reme_service.http")


class EdgeHttpProtocol(HttpToolsProtocol):
    """Configure with `EdgeHttpProtocol.configured(...)`, which returns a subclass to pass as uvicorn's `http=`."""

    header_timeout: ClassVar[float] = 10.0
    max_header_bytes: ClassVar[int] = 64 * 1024
    max_connections: ClassVar[int | None] = None
    retry_after: ClassVar[int] = 1

    @classmethod
    def configured(
        cls, *, header_timeout: float, max_header_bytes: int, max_connections: int | None, retry_after: int
    ) -> type[EdgeHttpProtocol]:
        return type(
            "ConfiguredEdgeHttpProtocol",
            (cls,),
            {
                "header_timeout": header_timeout,
                "max_header_bytes": max_header_bytes,
                "max_connections": max_connections,
                "retry_after": retry_after,
            },
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_tail = b""  # the last bytes of the head read so far: a blank line split across reads is found
        self._head_pending = False
        self.waiting_since: float | None = None  # monotonic time since which no request head is in progress

    # -- connection lifecycle ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting_since = time.monotonic()
        self._start_head()
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self.waiting_since = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._head_pending and self._between_requests():
            self._start_head()
        if self._head_pending and self._head_too_large(data):
            if not self.transport.is_closing():
                self._cancel_head_timer()
                message = f"request head larger than {self.max_header_bytes} bytes"
                self.transport.write(raw_response(HeaderTooLargeError(message)))
                self.transport.close()
            return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._head_pending = False
        self.waiting_since = None
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.pipeline and not self.transport.is_closing():
            self.waiting_since = time.monotonic()  # idle keep-alive: uvicorn's keep-alive timer closes it

    def _head_too_large(self, data: bytes) -> bool:
        """Count the head's bytes in `data` (up to the blank line that ends it, when `data` holds it) and say whether
        the head is over the limit. Checked before the parser runs: a head that arrives whole in one read would
        otherwise be complete, and the request under way, before its size was looked at."""
        seen = self._head_tail + data
        end = _head_end(seen)
        if end is None:
            self._head_bytes += len(data)
            self._head_tail = seen[-3:]
        else:
            self._head_bytes += end - len(self._head_tail)
            self._head_tail = b""
        return self._head_bytes > self.max_header_bytes

    # -- head timeout --------------------------------------------------------------------------------------

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _start_head(self) -> None:
        self._head_pending = True
        self._head_bytes = 0
        self._head_tail = b""
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._head_pending and not self.transport.is_closing():
            logger.debug("closing %s: no complete request head within %ss", self.client, self.header_timeout)
            self.transport.close()

    # -- connection cap --------------------------------------------------------------------------------------

    def _make_room(self) -> None:
        """Over the cap: close the connection waiting longest for a request head, or else this new one."""
        waiting = [
            conn
            for conn in self.connections
            if isinstance(conn, EdgeHttpProtocol) and conn is not self and conn.waiting_since is not None
        ]
        if waiting:
            oldest = min(waiting, key=lambda conn: conn.waiting_since or 0.0)
            logger.debug("connection cap %d reached: closing idle %s", self.max_connections, oldest.client)
            oldest.transport.close()
            return
        logger.warning("connection cap %d reached and every connection is busy: refusing", self.max_connections)
        error = OverloadedError("the server is at its connection limit; retry shortly")
        self._cancel_head_timer()
        self.transport.write(raw_response(error, retry_after=self.retry_after))
        self.transport.close()


def _head_end(data: bytes) -> int | None:
    """Where the request head in `data` ends (just past its blank line, CRLF or bare LF), or None."""
    ends = [at + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (at := data.find(mark)) >= 0]
    return min(ends) if ends else None
