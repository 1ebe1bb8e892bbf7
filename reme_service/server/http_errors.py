"""How FastAPI's own failures reach the client: in the envelope (400 malformed JSON, 404 unknown path or flow,
405 wrong method, any other HTTPException), except schema errors, which keep FastAPI's 422 `detail` list
(DESIGN §6) with every echoed `input` cut to a short excerpt. Also the error responses the OpenAPI document
lists for every flow endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from reme_service.errors import (
    HTTPStatusError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    ReMeError,
    error_envelope,
)
from reme_service.flow.context import FlowResponse
from reme_service.server.envelope import request_id_from

INPUT_EXCERPT = 200  # characters of an invalid input's JSON echoed back in a 422
MAX_DETAIL_ITEMS = 50  # field errors listed in one 422

_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    429: "rate_limited",
    503: "unavailable",
}

FLOW_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": FlowResponse, "description": "invalid value, or a malformed JSON body (the error envelope)"},
    401: {"model": FlowResponse, "description": "no API key where one is required, or an unknown or revoked key"},
    403: {
        "model": FlowResponse,
        "description": "the API key does not cover the workspace or the action (`forbidden`), or a path outside the "
        "allowed roots (`path_not_allowed`)",
    },
    408: {"model": FlowResponse, "description": "the request body stalled longer than http.body_timeout"},
    413: {"model": FlowResponse, "description": "the request body is larger than http.max_body_bytes"},
    429: {"model": FlowResponse, "description": "the API key's rate limit (`auth.rate_limit`); with Retry-After"},
    500: {"model": FlowResponse, "description": "unexpected failure, logged with the request id"},
    502: {"model": FlowResponse, "description": "the LLM or embedding provider failed after its retries"},
    503: {
        "model": FlowResponse,
        "description": "store unavailable, or the server is overloaded (code `overloaded`, with Retry-After)",
    },
}


def error_response(
    error: ReMeError, request: Request, headers: Mapping[str, str] | None = None, *, request_id: str | None = None
) -> Response:
    """The failure envelope of `error` as a response, with the request's id (`x-request-id`, or `request_id` when
    the caller already chose it, e.g. for a log line) and any `headers`."""
    request_id = request_id or request_id_from(request.scope.get("headers", ()))
    return Response(
        orjson.dumps(error_envelope(error, request_id)),
        status_code=error.status,
        media_type="application/json",
        headers={**(headers or {}), "x-request-id": request_id},
    )


def excerpt(value: Any, width: int = INPUT_EXCERPT) -> Any:
    """`value` itself when short; a longer string is cut to `width` characters + '…', any other value becomes the
    first `width` characters of its JSON + '…'. Bytes (a body FastAPI could not parse) are shown as text."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value[: width * 4]).decode("utf-8", "replace") + ("…" if len(value) > width * 4 else "")
    if isinstance(value, str):
        return value if len(value) <= width else value[:width] + "…"
    try:
        text = orjson.dumps(value, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # an integer past 64 bits (inside an extra key) that orjson cannot write: shown as text
        text = json.dumps(value, default=repr, ensure_ascii=False)
        return text if len(text) <= width else text[:width] + "…"
    return value if len(text) <= width else text[:width] + "…"


def short_detail(errors: Iterable[Any]) -> list[Any]:
    """FastAPI's 422 `detail` list with each `input` (and `ctx` value) shortened and at most MAX_DETAIL_ITEMS items."""
    detail = []
    for item in list(errors)[:MAX_DETAIL_ITEMS]:
        if isinstance(item, Mapping):
            item = dict(item)
            if "input" in item:
                item["input"] = excerpt(item["input"])
            if isinstance(item.get("ctx"), Mapping):
                item["ctx"] = {key: excerpt(value) for key, value in item["ctx"].items()}
        detail.append(item)
    return detail


def no_route(method: str, path: str, flows: Iterable[str]) -> NotFoundError:
    """The 404 of a path no route serves (a POST of one name: an unknown flow, the flows listed)."""
    name = path.strip("/")
    if method == "POST" and name and "/" not in name:
        return NotFoundError(f"unknown flow {name!r}; available: {', '.join(sorted(flows))}")
    return NotFoundError(f"no route {method} {path}; flows are POST /<flow>, health is GET /health")


def wrong_method(method: str, path: str, allowed: str) -> MethodNotAllowedError:
    """The 405 of a served path asked with a method it does not take (`allowed`: the `Allow` header's value)."""
    return MethodNotAllowedError(f"method {method} not allowed on {path}; use {allowed or 'another method'}")


def install_error_handlers(api: FastAPI, flow_names: Iterable[str]) -> None:
    flows = sorted(flow_names)

    @api.exception_handler(RequestValidationError)
    async def validation_handler(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        bad_json = next((e for e in errors if isinstance(e, Mapping) and e.get("type") == "json_invalid"), None)
        if bad_json is not None:
            where = bad_json.get("loc", ("body", "?"))[-1]
            reason = (bad_json.get("ctx") or {}).get("error", "JSON decode error")
            return error_response(InvalidRequestError(f"malformed JSON body at character {where}: {reason}"), request)
        body = orjson.dumps({"detail": short_detail(errors)}, default=repr, option=orjson.OPT_NON_STR_KEYS)
        return Response(body, status_code=422, media_type="application/json")

    @api.exception_handler(StarletteHTTPException)
    async def http_exception_handler(request: Request, exc: StarletteHTTPException) -> Response:
        path = request.url.path
        if exc.status_code == 404:
            return error_response(no_route(request.method, path, flows), request)
        if exc.status_code == 405:
            allowed = _allowed_methods(api, request) or (exc.headers or {}).get("Allow", "")
            headers = {**(exc.headers or {}), "Allow": allowed} if allowed else exc.headers
            return error_response(wrong_method(request.method, path, allowed), request, headers)
        code = _CODES.get(exc.status_code, "internal_error" if exc.status_code >= 500 else "invalid_request")
        error = HTTPStatusError(str(exc.detail), status=exc.status_code, code=code)
        return error_response(error, request, exc.headers)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _allowed_methods(api: FastAPI, request: Request) -> str:
    return allowed_methods(api.router.routes, request.scope)


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """Every method some route serves at `scope`'s path, as an `Allow` value (each asked of the routes as a request
    with that method would be): Starlette names only the first route whose path matches, and
    `GET /workspaces/{id}/memories/{mid}` hid its PATCH and DELETE."""
    allowed = []
    for method in _METHODS:
        asked = {**scope, "method": method}
        if any(route.matches(asked)[0] is Match.FULL for route in routes):
            allowed.append(method)
    return ", ".join(allowed)
