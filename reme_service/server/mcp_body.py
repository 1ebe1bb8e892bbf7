"""`StrictJsonBody`: MCP messages posted over HTTP are read as the flow endpoints read their bodies.

The MCP SDK parses a posted JSON-RPC message itself, and its parser takes what JSON has not: `NaN`, `Infinity` and
numbers past a double (`1e400`). The SDK then hands the tool `null` in their place, so a `vector_store insert`
with `"metadata": {"x": NaN}` stored null and answered success. Each POST body is therefore first read by
`server/body.parse_json`, the parser of the flow endpoints; what it refuses is a JSON-RPC parse error (HTTP 400,
code -32700, as the SDK answers malformed JSON), and nothing reaches a tool.

Mounted on the HTTP service the body has been read already (`EdgeGuard`, `scope[BODY_KEY]`); served alone
(`backend=mcp`) it is read here and handed on.
"""

from __future__ import annotations

import orjson
from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from reme_service.server.body import parse_json
from reme_service.server.guard import BODY_KEY, replay

PARSE_ERROR = -32700  # JSON-RPC 2.0: invalid JSON was received


class StrictJsonBody:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = scope.get(BODY_KEY)
        if body is None:
            read = await _read_body(receive)
            if read is None:  # the client went away
                return
            body, receive = read, replay([{"type": "http.request", "body": read, "more_body": False}], receive)
        if body.strip():  # an empty body is the SDK's to answer
            try:
                parse_json(body)
            except RequestValidationError as exc:
                await _parse_error(send, _reason(exc))
                return
        await self.app(scope, receive, send)


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _reason(exc: RequestValidationError) -> str:
    errors = exc.errors()
    first = errors[0] if errors else {}
    return str(first.get("ctx", {}).get("error") or first.get("msg") or "invalid JSON")


async def _parse_error(send: Send, reason: str) -> None:
    error = {"code": PARSE_ERROR, "message": f"Parse error: {reason}"}
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
