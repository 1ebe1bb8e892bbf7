"""Answers of the HTTP edge: a JSON body (`json_response`), and the failure envelope for errors answered before (or
instead of) a flow, as ASGI messages (`send_envelope`) or raw HTTP/1.1 bytes, always in the documented shape
`{"answer": "", "success": false, "metadata": {"error": ...}}`."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from http import HTTPStatus

import orjson
from fastapi.responses import Response
from starlette.types import Send

from reme_service.errors import ReMeError, error_envelope

Headers = list[tuple[bytes, bytes]]


def json_response(
    body: object, status: int = 200, *, request_id: str | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    """`body` as JSON (orjson), with the request's id in `x-request-id` when given."""
    extra = {**(headers or {}), **({"x-request-id": request_id} if request_id else {})}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=extra or None)


def request_id_from(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The client's `x-request-id` (printable, ≤ 64 characters) or a fresh one."""
    return request_id_of(headers)[0]


def request_id_of(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, bool]:
    """`request_id_from(headers)`, and whether the headers hold an `x-request-id` at all (valid or not)."""
    present = False
    for name, value in headers:
        if name.lower() == b"x-request-id":
            present = True
            given = value.decode("latin-1")[:64]
            if given and given.isprintable():
                return given, True
    return uuid.uuid4().hex[:16], present


def declares_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request's head announces a body (`Content-Length` above 0, or any `Transfer-Encoding`): a refusal
    that leaves it unread closes the connection (`connection: close`) rather than read it to find the next request."""
    for name, value in headers:
        name = name.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


def envelope_response(
    error: ReMeError, request_id: str, *, retry_after: int | None = None, close: bool = False
) -> tuple[int, Headers, bytes]:
    """Status, headers and body of the failure envelope for `error`."""
    body = orjson.dumps(error_envelope(error, request_id))
    headers: Headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode("latin-1", "replace")),
    ]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    if close:
        headers.append((b"connection", b"close"))
    return error.status, headers, body


async def send_envelope(
    send: Send,
    error: ReMeError,
    request_id: str,
    *,
    retry_after: int | None = None,
    close: bool = False,
    extra: Headers | None = None,
) -> None:
    """Answer an ASGI request with the failure envelope for `error` (`envelope_response`; `extra` headers too)."""
    status, headers, body = envelope_response(error, request_id, retry_after=retry_after, close=close)
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *(extra or [])]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def raw_response(error: ReMeError, *, retry_after: int | None = None, extra: Mapping[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 response (with `connection: close`) for answering below the ASGI layer."""
    status, headers, body = envelope_response(error, uuid.uuid4().hex[:16], retry_after=retry_after, close=True)
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    lines = [f"HTTP/1.1 {status} {phrase}".encode()]
    lines += [name + b": " + value for name, value in headers]
    lines += [f"{name}: {value}".encode() for name, value in (extra or {}).items()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
