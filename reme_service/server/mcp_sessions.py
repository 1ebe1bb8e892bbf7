"""MCP over SSE, with each session bound to the caller that opened it.

The SDK's `SseServerTransport` routes `POST /messages/?session_id=...` to the session by its id alone, and the
session's tool calls run as whoever opened it with `GET /sse` (the caller `AuthGate` set for that request). So:

- a session is bound to its opener's `Caller` the moment its id is known, before the id reaches the client (it is
  read from the `endpoint` event on its way out);
- a message is accepted only from a caller equal to the opener: the same key, still granting the same rights
  (`AuthGate` has just resolved it from the key file). Any other caller, like a session id that does not exist,
  gets 404 `not_found` in the failure envelope: whether a session exists is not told to another key. A revoked
  opener's own key is a 401 at `AuthGate`;
- the session ends once the opener no longer stands (`Access.until_invalid`: revoked, removed, changed, or the key
  file unreadable), within `auth.reload_seconds`: its server task is cancelled and its SSE stream closes.

With checking off every caller is the trusted one, so every session and message matches, as before.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

import anyio
from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from reme_service.auth.access import Access
from reme_service.auth.caller import Caller, caller_now
from reme_service.errors import NotFoundError
from reme_service.server.envelope import request_id_from, send_envelope

_ENDPOINT_SESSION = re.compile(rb"session_id=([0-9a-f]{32})")


class SseSessions:
    """`GET /sse` (`open`) and `POST /messages/` (`post`) over one SDK transport, sessions bound to openers."""

    def __init__(self, server: Server[Any, Any], transport: SseServerTransport, access: Access) -> None:
        self._server = server
        self._transport = transport
        self._access = access
        self._openers: dict[str, Caller] = {}

    async def open(self, scope: Scope, receive: Receive, send: Send) -> None:
        opener = caller_now()
        bound: list[str] = []

        async def send_bound(message: Message) -> None:
            if not bound and message["type"] == "http.response.body":
                found = _ENDPOINT_SESSION.search(message.get("body", b""))
                if found is not None:
                    bound.append(found.group(1).decode())
                    self._openers[bound[0]] = opener
            await send(message)

        try:
            async with (
                self._transport.connect_sse(scope, receive, send_bound) as (read_stream, write_stream),
                anyio.create_task_group() as session,
            ):

                async def end_when_invalid() -> None:
                    await self._access.until_invalid(opener)
                    session.cancel_scope.cancel()  # the server task ends, so does the stream (see the module doc)

                session.start_soon(end_when_invalid)
                await self._server.run(read_stream, write_stream, self._server.create_initialization_options())
                session.cancel_scope.cancel()  # the client went away: stop watching
        finally:
            if bound:
                self._openers.pop(bound[0], None)

    async def post(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _session_id(scope)
        if session_id is not None and self._openers.get(session_id) != caller_now():
            request_id = request_id_from(scope.get("headers", ()))
            await send_envelope(send, NotFoundError("no such MCP session"), request_id)
            return
        await self._transport.handle_post_message(scope, receive, send)


def _session_id(scope: Scope) -> str | None:
    """The session id a message names, as the transport reads it (None when absent or malformed: the transport
    answers those with 400 itself)."""
    value = Request(scope).query_params.get("session_id")  # parsed as the transport parses it (the last one wins)
    if value is None:
        return None
    try:
        return UUID(hex=value).hex
    except ValueError:
        return None
