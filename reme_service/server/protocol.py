"""The HTTP/1.1 connection protocol uvicorn runs for `reme`: uvicorn's httptools protocol plus connection hygiene.

uvicorn alone keeps a connection that never sends a request open forever (its keep-alive timer starts only after
a first response), and its `limit_concurrency` counts open connections, so a few hundred idle sockets make it
answer 503 to everyone. This subclass adds, per connection:

- a **head timeout**: a request head (request line + headers) must be complete within `header_timeout` seconds of
  the connection opening, or of its first byte on a kept-alive connection; otherwise the connection is closed;
- a **head size limit**: a head longer than `max_header_bytes` bytes is answered 431 and closed, before the parser
  sees it: whether it arrives in pieces (counted as they come) or whole in one read (measured to its blank line);
  a pipelined head (one sent while an earlier request on the connection is under way) is measured when complete
  and counted while it comes, and a request's head, chunk-size lines and trailers together may take
  `max_header_bytes` plus `CHUNK_FRAMING` bytes a chunk, so no part of a request but its body grows without bound;
- **refusals after the answers owed**: a malformed request (the parser's error) is answered 400 in the JSON
  envelope, not uvicorn's plain text; a refusal (400 or 431) on a connection with requests still under way is
  written, and the connection closed, only after their answers, so a request that ran is never left unanswered;
  meanwhile nothing more is read from the connection;
- **no body read after the answer**: a request answered before its body was all read (a refusal from its head:
  401, 404, 405, 413, 429, ...) ends its connection with the answer, rather than the rest of the body being read
  and thrown away to find the next request;
- **streams end at a stop**: a graceful stop closes the streams under way (`GET /events`, MCP `GET /sse`), which
  would otherwise hold it for `http.shutdown_timeout`; other requests under way finish first;
- a **connection cap**: past `max_connections` open connections, a new one evicts the connection that has been
  waiting longest for a request head (idle keep-alive or half-sent head); when there is none, the slowest upload
  (a request whose body is still arriving: least bytes a second, then the oldest) is answered 408 and closed; only
  when every connection has a complete request under way does the new one get 503 `overloaded`. Idle sockets and
  trickled bodies therefore never starve clients that send requests.

Requests in flight are limited separately, in the ASGI layer (`reme_service.server.guard`).

`HttpToolsProtocol` is not part of uvicorn's public API: its callbacks and attributes (`cycle`, `flow`, `pipeline`,
`connections`, ...) may change in any release. pyproject.toml pins uvicorn to the minor this class is tested
with (`SUPPORTED_UVICORN`), and `EdgeHttpProtocol.configured` — called once as the server starts — refuses any
other installed version with a `ConfigError` naming the supported range, rather than serving with hygiene that may
have silently stopped working. (Falling back to uvicorn's own protocol would drop the head timeout, the size limit
and the connection cap that `http.*` promises, so the server does not start instead.)
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from reme_service.errors import (
    ConfigError,
    HeaderTooLargeError,
    InvalidRequestError,
    OverloadedError,
    ReMeError,
    RequestTimeoutError,
)
from reme_service.server.envelope import raw_response
from reme_service.server.guard import STREAM_PATHS

logger = logging.getLogger("reme_service.http")

ENDLESS_PATHS = frozenset({"/events", *STREAM_PATHS})  # answers that last as long as their reader


UPLOAD_RATE_SECONDS = 1.0  # an upload's rate is measured over at least this (a fresh one is not judged by one read)
CHUNK_FRAMING = 32  # bytes of a chunk-size line and its CRLFs that are not counted against the head limit

SUPPORTED_UVICORN = ((0, 54), (0, 55))  # [lowest, first unsupported) (major, minor); pyproject.toml pins the same
SUPPORTED_UVICORN_SPEC = ">=0.54,<0.55"
UVICORN_HOOKS = (  # the `HttpToolsProtocol` methods `EdgeHttpProtocol` overrides and calls with `super()`
    "connection_made",
    "connection_lost",
    "data_received",
    "send_400_response",
    "on_message_begin",
    "on_header",
    "on_body",
    "on_headers_complete",
    "on_message_complete",
    "on_response_complete",
    "shutdown",
)


def require_supported_uvicorn(version: str | None = None, base: type = HttpToolsProtocol) -> None:
    """Raise `ConfigError` unless `version` (default: the installed uvicorn's) is in `SUPPORTED_UVICORN` and
    `base` (uvicorn's `HttpToolsProtocol`) still has every hook this module extends. A pre-release or local version
    counts as its release ("0.54.1rc1" as 0.54); a version that does not start with `major.minor` is refused."""
    version = uvicorn.__version__ if version is None else version
    match = re.match(r"(\d+)\.(\d+)", version)
    low, high = SUPPORTED_UVICORN
    if match is None or not low <= (int(match[1]), int(match[2])) < high:
        raise ConfigError(
            f"uvicorn {version} is installed, but the HTTP edge (reme_service/server/protocol.py) extends uvicorn's "
            f"private httptools protocol and supports only uvicorn{SUPPORTED_UVICORN_SPEC}: "
            f"pip install 'uvicorn[standard]{SUPPORTED_UVICORN_SPEC}'"
        )
    missing = [name for name in UVICORN_HOOKS if not callable(getattr(base, name, None))]
    if missing:
        raise ConfigError(
            f"uvicorn {version}'s HttpToolsProtocol lacks {', '.join(missing)}, which the HTTP edge "
            f"(reme_service/server/protocol.py) extends: install uvicorn[standard]{SUPPORTED_UVICORN_SPEC}"
        )


class _Refused(Exception):
    """Raised from a parser callback to stop the parser; uvicorn then calls `send_400_response`."""


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
        """A subclass with these limits; first checks the installed uvicorn (`require_supported_uvicorn`)."""
        require_supported_uvicorn()
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
        self._answers_owed = 0  # requests whose head is complete and whose response is not
        self._refusal: bytes | None = None  # the answer to write, then close, once no answer is owed
        self._refusing: ReMeError | None = None  # why a callback stopped the parser
        self._message_open = False  # between a request's first byte and the end of its body
        self._overhead = 0  # bytes of the open request that are not body: head, chunk-size lines, trailers
        self._chunks = 0  # chunks of the open request
        self._trailer_bytes = 0  # trailer lines of the open request, as the parser passed them on
        self._read_body = 0  # body bytes the parser passed on from the current read
        self.body_since: float | None = None  # monotonic time the open request's head completed, its body to come
        self.body_bytes = 0  # body bytes of that request received so far

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

    def shutdown(self) -> None:
        """A graceful stop lets every request under way finish, but a stream that has begun answering (`GET
        /events`, MCP `GET /sse`) finishes only with its reader, and would hold the stop for the whole
        `http.shutdown_timeout`: it is closed now, as if its reader had gone (the handler sees a disconnect; an SSE
        reader reconnects, to another worker or node)."""
        cycle = self.cycle
        if (
            cycle is not None
            and cycle.response_started
            and not cycle.response_complete
            and cycle.scope["path"] in ENDLESS_PATHS
        ):
            self.transport.close()
            return
        super().shutdown()

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None or self.transport.is_closing():
            return  # refused: nothing more is read from this client
        if not self._head_pending and self._between_requests():
            self._start_head()
        if self._head_pending and self._head_too_large(data):
            self._refuse(self._head_error())
            return
        self._read_body = 0
        super().data_received(data)
        if self._message_open and not self.transport.is_closing():
            self._overhead += len(data) - self._read_body
            if self._overhead > self.max_header_bytes + CHUNK_FRAMING * self._chunks:
                message = f"request head and trailers larger than {self.max_header_bytes} bytes"
                self._refuse(HeaderTooLargeError(message), now=self._under_way())

    def send_400_response(self, msg: str) -> None:
        """The parser failed (or a callback stopped it): answer in the envelope, after the answers owed."""
        error = self._refusing or InvalidRequestError(f"malformed HTTP request ({msg.rstrip('.').lower()})")
        self._refuse(error, now=self._under_way())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._message_open = True
        self._overhead = self._chunks = self._trailer_bytes = 0
        if not self._head_pending:  # a pipelined request: its head is timed and counted from here
            self._start_head()

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._head_pending:  # after the head: a trailer (counted here too, as a request read whole in one
            self._trailer_bytes += len(name) + len(value) + 4  # read is complete before `data_received` counts)
            if self._trailer_bytes > self.max_header_bytes:
                self._refusing = HeaderTooLargeError(f"request trailers larger than {self.max_header_bytes} bytes")
                raise _Refused(self._refusing.message)
        super().on_header(name, value)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_body(self, body: bytes) -> None:
        self._read_body += len(body)
        self.body_bytes += len(body)
        super().on_body(body)

    def on_headers_complete(self) -> None:
        # what the callbacks passed on of the head (never more than its bytes): a pipelined head that arrived whole
        # after another request in one read was not measured before the parser ran
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers) + 16
        if size > self.max_header_bytes:
            self._refusing = self._head_error()
            raise _Refused(self._refusing.message)  # no request is started for it
        self._head_pending = False
        self.waiting_since = None
        self._cancel_head_timer()
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:
            self._answers_owed += 1
        self.body_since = time.monotonic()  # until the message completes (at once for a request without a body)
        self.body_bytes = 0

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._message_open = False  # (its counts are reset when the next request begins)
        self.body_since = None

    def on_response_complete(self) -> None:
        self._answers_owed = max(self._answers_owed - 1, 0)
        super().on_response_complete()
        if self._refusal is not None and self._answers_owed == 0 and not self.transport.is_closing():
            self.transport.write(self._refusal)
            self.transport.close()
        elif self._under_way() and self.cycle is not None and self.cycle.response_complete:
            if not self.transport.is_closing():  # answered with its body unread: not read to find the next request
                self.transport.close()
        elif not self.pipeline and not self.transport.is_closing():
            self.waiting_since = time.monotonic()  # idle keep-alive: uvicorn's keep-alive timer closes it

    def _under_way(self) -> bool:
        """Whether the open request's head is complete: it runs, and a refusal of it cannot wait for its answer,
        which needs the rest of its body."""
        return self._message_open and not self._head_pending

    def _head_error(self) -> HeaderTooLargeError:
        return HeaderTooLargeError(f"request head larger than {self.max_header_bytes} bytes")

    def _refuse(self, error: ReMeError, *, now: bool = False) -> None:
        """Answer `error` and close: at once when no answer is owed on this connection (or `now`: the refused request
        is itself under way and cannot finish), else after the last owed one (`on_response_complete`)."""
        self._cancel_head_timer()
        if self._refusal is not None or self.transport.is_closing():
            return
        response = raw_response(error)
        if now or self._answers_owed == 0:
            self.transport.write(response)
            self.transport.close()
            return
        self._refusal = response
        self.flow.pause_reading()

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

    def uploading(self) -> bool:
        """Whether a request's head is complete and its body still arriving, with nothing answered yet."""
        cycle = self.cycle
        return (
            self.body_since is not None
            and self._message_open
            and cycle is not None
            and not cycle.response_started
            and not self.transport.is_closing()
        )

    def upload_rate(self, now: float) -> float:
        """Body bytes a second the open request has sent (over at least its first second)."""
        return self.body_bytes / max(now - (self.body_since or now), UPLOAD_RATE_SECONDS)

    def evict(self, error: ReMeError) -> None:
        """Answer the open request `error` (its body unread) and close: the request is dropped (its handler sees
        the client gone)."""
        self._cancel_head_timer()
        self.transport.write(raw_response(error))
        self.transport.close()

    def _make_room(self) -> None:
        """Over the cap: close the connection waiting longest for a request head, or else the slowest upload, or
        else this new one."""
        others = [conn for conn in self.connections if isinstance(conn, EdgeHttpProtocol) and conn is not self]
        waiting = [conn for conn in others if conn.waiting_since is not None]
        if waiting:
            oldest = min(waiting, key=lambda conn: conn.waiting_since or 0.0)
            logger.debug("connection cap %d reached: closing idle %s", self.max_connections, oldest.client)
            oldest.transport.close()
            return
        uploading = [conn for conn in others if conn.uploading()]
        if uploading:
            now = time.monotonic()
            slowest = min(uploading, key=lambda conn: (conn.upload_rate(now), conn.body_since or 0.0))
            logger.info(
                "connection cap %d reached: evicting the slowest upload %s", self.max_connections, slowest.client
            )
            slowest.evict(
                RequestTimeoutError(
                    f"request body too slow ({slowest.upload_rate(now):.0f} bytes/s): its connection was closed "
                    f"for a new one at the connection cap (http.max_connections {self.max_connections})"
                )
            )
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
