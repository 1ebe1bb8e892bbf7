"""The API key a request presents: `Authorization: Bearer <key>` or `X-API-Key: <key>` (HTTP and MCP alike)."""

from __future__ import annotations

from collections.abc import Iterable

from reme_service.errors import UnauthorizedError


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The key in the headers, None when there is none; 401 for a malformed or ambiguous `Authorization`."""
    bearer: str | None = None
    api_key: str | None = None
    for raw_name, raw_value in headers:
        name = raw_name.lower()
        if name == b"authorization":
            value = raw_value.decode("latin-1").strip()
            scheme, _, token = value.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token or " " in token or bearer is not None:
                raise UnauthorizedError("malformed Authorization header: expected 'Authorization: Bearer <key>'")
            bearer = token
        elif name == b"x-api-key":
            value = raw_value.decode("latin-1").strip()
            if not value or api_key is not None:
                raise UnauthorizedError("malformed X-API-Key header: expected one key")
            api_key = value
    if bearer is not None and api_key is not None and bearer != api_key:
        raise UnauthorizedError("Authorization and X-API-Key carry different keys; send one")
    return bearer or api_key
