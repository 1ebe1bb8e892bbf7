"""`EdgeGuard`: the ASGI middleware in front of every route. It reads each request body itself, so that

- a body longer than `max_body_bytes` is answered 413 — at once when `Content-Length` says so, or as soon as a
  chunked body has streamed past the limit — and is never held in memory whole;
- a body that stalls (no bytes for `body_timeout` seconds while the server waits for more) is answered 408, and so
  is one that trickles: past its first `body_timeout` seconds a body must have averaged `body_min_rate` bytes a
  second, so a byte every few seconds cannot hold a connection (and its place under the connection cap) for hours;
- at most `limit_concurrency` requests are processed at once: beyond that the answer is 503 `overloaded` with
  `Retry-After`. Only requests count, never idle connections; a request counts from the moment its body is
  complete, so slow uploads cannot take the slots of requests that are ready. Health probes and metric scrapes
  (`GET` of `UNCOUNTED_PATHS`) neither count nor are refused: a full service is alive, and says so. Nor do event
  streams, which last as long as their readers and have their own cap (`events.max_streams`).

Every answer is the failure envelope, with `connection: close` when the rest of the body is left unread. A request
it lets through gets its body both replayed to `receive` and, whole, in `scope[BODY_KEY]`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reme_service.errors import (
    InvalidRequestError,
    OverloadedError,
    PayloadTooLargeError,
    ReMeError,
    RequestTimeoutError,
)
from reme_service.server.envelope import request_id_from, send_envelope

logger = logging.getLogger("reme_service.http")

BODY_KEY = "reme.body"  # the scope key of the request body the guard has read
UNCOUNTED_PATHS = frozenset({"/health", "/health/live", "/health/ready", "/metrics", "/events"})


@dataclass(frozen=True)
class EdgeLimits:
    max_body_bytes: int = 32 * 1024 * 1024
    body_timeout: float = 30.0
    body_min_rate: float | None = 1024.0  # bytes/s a body must average after its first body_timeout seconds
    limit_concurrency: int | None = 256
    retry_after: int = 1


class _Rejected(Exception):
    def __init__(self, error: ReMeError, *, close: bool, retry_after: int | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.close = close
        self.retry_after = retry_after


class EdgeGuard:
    def __init__(self, app: ASGIApp, limits: EdgeLimits) -> None:
        self.app = app
        self.limits = limits
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"] == "GET" and scope["path"] in UNCOUNTED_PATHS):
            await self.app(scope, receive, send)
            return
        try:
            self._check_capacity()
            self._check_declared_length(scope)
            body = await self._read_body(receive)
            if body is None:  # the client went away while sending
                return
            self._check_capacity()
        except _Rejected as rejected:
            await self._answer(scope, send, rejected)
            return
        self.in_flight += 1
        # the whole body, for the flow endpoints (`http.py`), which so skip re-reading it through `receive`
        scope[BODY_KEY] = body[0].get("body", b"") if len(body) == 1 else b"".join(m.get("body", b"") for m in body)
        try:
            await self.app(scope, replay(body, receive), send)
        finally:
            self.in_flight -= 1

    def _check_capacity(self) -> None:
        limit = self.limits.limit_concurrency
        if limit is not None and self.in_flight >= limit:
            logger.warning("overloaded: %d requests in flight (limit %d)", self.in_flight, limit)
            error = OverloadedError(f"the server is busy ({limit} requests in flight); retry shortly")
            raise _Rejected(error, close=True, retry_after=self.limits.retry_after)

    def _check_declared_length(self, scope: Scope) -> None:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    raise _Rejected(InvalidRequestError("invalid Content-Length"), close=True) from None
                if declared > self.limits.max_body_bytes:
                    raise _Rejected(self._too_large(), close=True)

    def _too_large(self) -> ReMeError:
        return PayloadTooLargeError(f"request body larger than http.max_body_bytes ({self.limits.max_body_bytes})")

    async def _read_body(self, receive: Receive) -> list[Message] | None:
        messages: list[Message] = []
        size = 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            wait = self._next_wait(size, loop.time() - started)
            try:
                async with asyncio.timeout(wait):  # a timer, not a task per message
                    message = await receive()
            except TimeoutError:
                raise _Rejected(self._too_slow(wait), close=True) from None
            if message["type"] == "http.disconnect":
                return None
            size += len(message.get("body", b""))
            if size > self.limits.max_body_bytes:
                raise _Rejected(self._too_large(), close=True)
            messages.append(message)
            if not message.get("more_body", False):
                return messages

    def _next_wait(self, size: int, elapsed: float) -> float:
        """Seconds the next body message may take: `body_timeout`, or less when the body's rate allowance (its
        first `body_timeout` seconds, then `body_min_rate` bytes a second for what has arrived) runs out first."""
        timeout = self.limits.body_timeout
        rate = self.limits.body_min_rate
        if rate is None:
            return timeout
        allowance = timeout + size / rate - elapsed
        if allowance <= 0:
            raise _Rejected(self._too_slow(0.0), close=True)
        return min(timeout, allowance)

    def _too_slow(self, wait: float) -> ReMeError:
        timeout = self.limits.body_timeout
        if wait >= timeout:
            return RequestTimeoutError(f"request body stalled for {timeout:g}s (http.body_timeout)")
        return RequestTimeoutError(
            f"request body arrived slower than {self.limits.body_min_rate:g} bytes/s after its first {timeout:g}s "
            "(http.body_min_rate)"
        )

    @staticmethod
    async def _answer(scope: Scope, send: Send, rejected: _Rejected) -> None:
        request_id = request_id_from(scope.get("headers", ()))
        await send_envelope(send, rejected.error, request_id, retry_after=rejected.retry_after, close=rejected.close)


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out the buffered body messages first, then defers to the server's (disconnects)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
