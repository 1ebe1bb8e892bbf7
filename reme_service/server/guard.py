"""`EdgeGuard`: the ASGI middleware in front of every route. It decides what a request may take from its head,
then reads the body itself, so that

- nothing is read before it is authorised: `AuthGate` (outside) has answered a request without a valid key; here a
  path no route serves (404) or a method its route does not take (405) is answered from the head
  (`route_check`), and a body announced to a path that takes none (health, metrics, docs, the UI's files: at most
  `OPEN_BODY_BYTES`) is 413 — each with `connection: close`, the body unread;
- a body longer than `max_body_bytes` is answered 413 — at once when `Content-Length` says so, or as soon as a
  chunked body has streamed past the limit — and is never held in memory whole;
- the bodies buffered at once, over every connection, stay within `body_budget_bytes`: a body that would take the
  total past it (by its `Content-Length`, or as its bytes arrive) is 503 `overloaded` with `Retry-After`, instead
  of the process growing;
- a body that stalls (no bytes for `body_timeout` seconds while the server waits for more) is answered 408, and so
  is one that trickles: past its first `body_timeout` seconds a body must have averaged `body_min_rate` bytes a
  second (the edge protocol, `protocol.py`, also evicts the slowest uploads when the connection cap is reached);
- each key holds at most its share (`auth/shares.py`, `auth.per_key`) of requests under way — counted from the
  head, uploads included, so one key's slow uploads take only its own share — and of long polls
  (`GET /jobs/{id}?wait=`), MCP streams (`GET /sse`) and event streams (`GET /events`); past it, 429 with
  `Retry-After`;
- at most `limit_concurrency` requests are processed at once: beyond that the answer is 503 `overloaded` with
  `Retry-After`. Only requests count, never idle connections; a request counts from the moment its body is
  complete, so slow uploads cannot take the slots of requests that are ready. Health probes and metric scrapes
  (`GET` of `UNCOUNTED_PATHS`) neither count nor are refused: a full service is alive, and says so. Nor do the
  requests that last as long as their client (streams and long polls): they are bounded by their per-key shares
  and, over all keys, by the connection cap (and `events.max_streams`).

Every answer is the failure envelope, with `connection: close` when the rest of the body is left unread. A request
it lets through gets its body both replayed to `receive` and, whole, in `scope[BODY_KEY]`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reme_service.auth.shares import KeyShares, ShareKind, key_of_caller
from reme_service.errors import (
    InvalidRequestError,
    OverloadedError,
    PayloadTooLargeError,
    RateLimitedError,
    ReMeError,
    RequestTimeoutError,
)
from reme_service.server.auth_gate import is_open_path
from reme_service.server.envelope import Headers, declares_body, request_id_from, send_envelope
from reme_service.server.route_check import route_refusal

logger = logging.getLogger("reme_service.http")

BODY_KEY = "reme.body"  # the scope key of the request body the guard has read
UNCOUNTED_PATHS = frozenset({"/health", "/health/live", "/health/ready", "/metrics"})
STREAM_PATHS = frozenset({"/sse", "/sse/"})  # MCP over SSE: a stream per session
OPEN_BODY_BYTES = 4096  # the body a request to an open path (or OPTIONS) may carry


@dataclass(frozen=True)
class EdgeLimits:
    max_body_bytes: int = 32 * 1024 * 1024
    body_timeout: float = 30.0
    body_min_rate: float | None = 8192.0  # bytes/s a body must average after its first body_timeout seconds
    limit_concurrency: int | None = 256
    body_budget_bytes: int | None = 128 * 1024 * 1024  # bodies buffered at once, every connection
    retry_after: int = 1


def request_kind(method: str, path: str, query: bytes) -> ShareKind | None:
    """The share a request takes: None for the uncounted probes (`UNCOUNTED_PATHS`), `events`, `streams`,
    `long_polls` (`GET /jobs/{id}` with a `wait` above 0), else `requests`."""
    if method in ("GET", "HEAD"):
        if path in UNCOUNTED_PATHS:
            return None
        if path == "/events":
            return "events"
        if path in STREAM_PATHS:
            return "streams"
        if path.startswith("/jobs/") and b"wait" in query:
            waits = parse_qs(query.decode("latin-1")).get("wait", [])
            try:
                if waits and float(waits[-1]) > 0:
                    return "long_polls"
            except ValueError:
                pass  # the route answers 422
    return "requests"


class _Rejected(Exception):
    def __init__(
        self, error: ReMeError, *, close: bool, retry_after: int | None = None, extra: Headers | None = None
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.close = close
        self.retry_after = retry_after
        self.extra = extra


class EdgeGuard:
    def __init__(
        self,
        app: ASGIApp,
        limits: EdgeLimits,
        routes: Sequence[BaseRoute] = (),
        flows: Iterable[str] = (),
        shares: KeyShares | None = None,
    ) -> None:
        self.app = app
        self.limits = limits
        self.routes = routes  # the app's routes (checked before a body is read); empty: not checked
        self.flows = sorted(flows)
        self.shares = shares
        self.in_flight = 0
        self.buffered = 0  # body bytes held by the requests under way

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        kind = request_kind(method, path, scope.get("query_string", b""))
        release: Callable[[], None] | None = None
        taken = [0]  # body bytes this request holds of the budget
        try:
            try:
                self._check_route(scope)
                open_path = method == "OPTIONS" or is_open_path(path) or kind is None
                limit = OPEN_BODY_BYTES if open_path else self.limits.max_body_bytes
                declared = self._check_declared_length(scope, limit)
                if kind is None:  # a probe: never counted, never refused for load, and no body
                    if declares_body(scope.get("headers", ())):
                        raise _Rejected(self._too_large(OPEN_BODY_BYTES), close=True)
                    await self.app(scope, receive, send)
                    return
                if self.shares is not None and not open_path:
                    release = self.shares.acquire(kind, key_of_caller())
                counted = kind == "requests"
                if counted:
                    self._check_capacity()
                self._check_budget(declared)
                body = await self._read_body(receive, limit, taken)
                if body is None:  # the client went away while sending
                    return
                if counted:
                    self._check_capacity()
            except _Rejected as rejected:
                await self._answer(scope, send, rejected)
                return
            except RateLimitedError as error:  # the key holds its share (429)
                close = declares_body(scope.get("headers", ()))
                await self._answer(scope, send, _Rejected(error, close=close, retry_after=error.retry_after))
                return
            # the whole body, for the flow endpoints (`http.py`), which so skip re-reading it through `receive`
            scope[BODY_KEY] = body[0].get("body", b"") if len(body) == 1 else b"".join(m.get("body", b"") for m in body)
            self.in_flight += counted
            try:
                await self.app(scope, replay(body, receive), send)
            finally:
                self.in_flight -= counted
        finally:
            self.buffered -= taken[0]
            if release is not None:
                release()

    def _check_route(self, scope: Scope) -> None:
        if not self.routes:
            return
        refusal = route_refusal(self.routes, scope, self.flows)
        if refusal is not None:
            error, extra = refusal
            raise _Rejected(error, close=declares_body(scope.get("headers", ())), extra=extra)

    def _check_capacity(self) -> None:
        limit = self.limits.limit_concurrency
        if limit is not None and self.in_flight >= limit:
            logger.warning("overloaded: %d requests in flight (limit %d)", self.in_flight, limit)
            error = OverloadedError(f"the server is busy ({limit} requests in flight); retry shortly")
            raise _Rejected(error, close=True, retry_after=self.limits.retry_after)

    def _check_budget(self, more: int) -> None:
        """Refuse (503) a body that would take the bytes buffered past `body_budget_bytes`."""
        budget = self.limits.body_budget_bytes
        if budget is not None and more > 0 and self.buffered + more > budget:
            logger.warning("body budget: %d bytes buffered, %d more refused (budget %d)", self.buffered, more, budget)
            error = OverloadedError(
                f"the server is holding {budget} bytes of request bodies (http.body_budget_bytes); retry shortly"
            )
            raise _Rejected(error, close=True, retry_after=self.limits.retry_after)

    def _check_declared_length(self, scope: Scope, limit: int) -> int:
        """The body's `Content-Length` (0 when absent); 413 when over `limit`."""
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    raise _Rejected(InvalidRequestError("invalid Content-Length"), close=True) from None
                if declared > limit:
                    raise _Rejected(self._too_large(limit), close=True)
                return declared
        return 0

    def _too_large(self, limit: int) -> ReMeError:
        if limit < self.limits.max_body_bytes:
            return PayloadTooLargeError(f"this path takes a request body of at most {limit} bytes")
        return PayloadTooLargeError(f"request body larger than http.max_body_bytes ({self.limits.max_body_bytes})")

    async def _read_body(self, receive: Receive, limit: int, taken: list[int]) -> list[Message] | None:
        """The body's messages, each counted against the budget as it arrives (`taken[0]`: the bytes counted)."""
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
            chunk = len(message.get("body", b""))
            size += chunk
            if size > limit:
                raise _Rejected(self._too_large(limit), close=True)
            if chunk:
                self._check_budget(chunk)
                self.buffered += chunk
                taken[0] += chunk
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
        await send_envelope(
            send,
            rejected.error,
            request_id,
            retry_after=rejected.retry_after,
            close=rejected.close,
            extra=rejected.extra,
        )


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out the buffered body messages first, then defers to the server's (disconnects)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
