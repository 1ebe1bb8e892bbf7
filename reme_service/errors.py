"""The service's exception tree, with stable codes and HTTP statuses, and the failure envelope built from them.

```
ReMeError                      code "internal_error", 500
├── ConfigError                code "config_error" (start-up only; the service refuses to start)
│   ├── FlowSyntaxError        code "flow_syntax_error"
│   └── FlowDeclarationError   code "flow_declaration_error"
├── InvalidRequestError        code "invalid_request", 400
│   └── RequestValidationError code "validation_error", 422 (the request does not match the flow's schema)
├── UnauthorizedError          code "unauthorized", 401 (no API key, or an unknown or revoked one)
├── ForbiddenError             code "forbidden", 403 (the key may not use this workspace or action)
│   └── CrossOriginError       code "cross_origin" (HTTP edge: a browser request from another site)
├── RateLimitedError           code "rate_limited", 429 (the key's request rate; Retry-After)
├── PathNotAllowedError        code "path_not_allowed", 403
├── NotFoundError              code "not_found", 404
├── ProviderError              code "provider_error", 502
│   ├── LLMError               code "llm_error" (provider down, refused, timed out; or no LLM configured)
│   │   └── LLMReplyError      code "llm_error" (the LLM answered, but not usably, after the re-asks)
│   └── EmbeddingError         code "embedding_error"
├── StoreError                 code "store_unavailable", 503
│   └── DimensionMismatchError code "dimension_mismatch", 400
├── ServiceConnectionError     code "connection_error", 503 (client side: the service could not be reached)
├── MethodNotAllowedError      code "method_not_allowed", 405 (HTTP edge)
├── RequestTimeoutError        code "request_timeout", 408 (HTTP edge: the body stalled)
├── PayloadTooLargeError       code "payload_too_large", 413 (HTTP edge: http.max_body_bytes)
├── HeaderTooLargeError        code "header_too_large", 431 (HTTP edge: http.max_header_bytes)
├── MisdirectedRequestError    code "misdirected_request", 421 (HTTP edge: a Host a loopback service does not answer)
├── OverloadedError            code "overloaded", 503 (HTTP edge: too many requests or connections; Retry-After)
├── HTTPStatusError            any other status the HTTP framework raises; code and status given per instance
└── OpError                    wraps a failure inside a flow; code and status come from its cause

Programming errors, never a client's fault (a 500 if one escapes):
UnknownNameError(KeyError)            a registry has no such name (the message lists the valid ones)
UndeclaredAccessError(RuntimeError)   an op used a request field or context key it did not declare
```

`error_envelope` is the one failure body of every front end (Python API, HTTP, MCP), and
`describe_validation_errors` the one way pydantic's error lists become a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic_core import ValidationError

__all__ = [
    "ConfigError",
    "CrossOriginError",
    "DimensionMismatchError",
    "EmbeddingError",
    "FlowDeclarationError",
    "HTTPStatusError",
    "HeaderTooLargeError",
    "MethodNotAllowedError",
    "MisdirectedRequestError",
    "OverloadedError",
    "PayloadTooLargeError",
    "RequestTimeoutError",
    "FlowSyntaxError",
    "ForbiddenError",
    "RateLimitedError",
    "UnauthorizedError",
    "InvalidRequestError",
    "LLMError",
    "LLMReplyError",
    "NotFoundError",
    "OpError",
    "PathNotAllowedError",
    "ProviderError",
    "ReMeError",
    "RequestValidationError",
    "ServiceConnectionError",
    "StoreError",
    "UndeclaredAccessError",
    "UnknownNameError",
    "describe_validation_errors",
    "error_envelope",
]


class UnknownNameError(KeyError):
    """A name that is not registered; the message lists the valid names."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")

    def __str__(self) -> str:
        return str(self.args[0])


class UndeclaredAccessError(RuntimeError):
    """An op touched a request field or context key it did not declare: a bug in the op, never the client's."""


class ReMeError(Exception):
    """Base of every error the service raises on purpose."""

    code: str = "internal_error"
    status: int = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class ConfigError(ReMeError):
    """The configuration is invalid; raised while the app starts."""

    code = "config_error"


class FlowSyntaxError(ConfigError):
    """A flow expression does not parse or names an unknown op."""

    code = "flow_syntax_error"


class FlowDeclarationError(ConfigError):
    """A flow does not give an op what it declares it reads (a request field or a context key)."""

    code = "flow_declaration_error"


class InvalidRequestError(ReMeError):
    """A request value is well-typed but not acceptable (unknown action, empty query, bad workspace id)."""

    code = "invalid_request"
    status = 400


class RequestValidationError(InvalidRequestError):
    """The request does not match the flow's schema (a wrong type, a missing or unknown field).

    `details["errors"]` holds the field errors as a list (pydantic's `errors()`, or FastAPI's 422 `detail` list
    on the client). A subclass of `InvalidRequestError`, so "bad request" handlers catch it too.
    """

    code = "validation_error"
    status = 422


class UnauthorizedError(ReMeError):
    """No API key where one is required, or a key the service does not know (malformed, unknown, revoked)."""

    code = "unauthorized"
    status = 401


class ForbiddenError(ReMeError):
    """The API key is valid but may not touch the request's workspace, or not with this action."""

    code = "forbidden"
    status = 403


class CrossOriginError(ForbiddenError):
    """A browser request on behalf of a page from another origin than the service's own or `http.cors_origins`
    (`server/origin_guard.py`): refused before it is read."""

    code = "cross_origin"


class RateLimitedError(ReMeError):
    """The API key sent requests faster than its rate limit; `retry_after` seconds until the next one is allowed."""

    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: int = 1, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.retry_after = retry_after


class PathNotAllowedError(ReMeError):
    """A file path resolves outside the configured roots."""

    code = "path_not_allowed"
    status = 403


class NotFoundError(ReMeError):
    """A named thing (flow, file) does not exist."""

    code = "not_found"
    status = 404


class ConflictError(ReMeError):
    """The request contradicts what is already there (an idempotency key reused with another body)."""

    code = "conflict"
    status = 409


class ProviderError(ReMeError):
    """An LLM or embedding provider failed after its retries."""

    code = "provider_error"
    status = 502


class LLMError(ProviderError):
    """An LLM call failed: the provider is unreachable, refused or timed out after the client's retries, or no
    LLM is configured. `LLMReplyError` is the subclass for a reply that arrived but cannot be used."""

    code = "llm_error"


class LLMReplyError(LLMError):
    """The LLM answered, but the reply is unusable (empty, or not in the requested format) after the re-asks.

    On the wire it is an `LLMError` (code "llm_error", 502); the type lets a caller that can do without the
    answer (reject one candidate, say) tell a bad reply from a provider that is down.
    """


class EmbeddingError(ProviderError):
    code = "embedding_error"


class StoreError(ReMeError):
    """The vector store is unreachable or failed."""

    code = "store_unavailable"
    status = 503


class DimensionMismatchError(StoreError):
    """A vector's dimension differs from the workspace's."""

    code = "dimension_mismatch"
    status = 400


class ServiceConnectionError(ReMeError):
    """The service could not be reached (refused, unresolvable or timed out while connecting), after the retries.

    Raised by the HTTP client (`reme_service.client`), never by the service itself.
    """

    code = "connection_error"
    status = 503


class MethodNotAllowedError(ReMeError):
    code = "method_not_allowed"
    status = 405


class RequestTimeoutError(ReMeError):
    code = "request_timeout"
    status = 408


class PayloadTooLargeError(ReMeError):
    code = "payload_too_large"
    status = 413


class HeaderTooLargeError(ReMeError):
    code = "header_too_large"
    status = 431


class MisdirectedRequestError(ReMeError):
    """A Host header a service on loopback does not answer to (DNS-rebinding protection, `http.allowed_hosts`)."""

    code = "misdirected_request"
    status = 421


class OverloadedError(ReMeError):
    """The server is at its request or connection limit; answered with `Retry-After`."""

    code = "overloaded"
    status = 503


class HTTPStatusError(ReMeError):
    """A status the HTTP framework raised that has no class of its own (its code and status given here)."""

    def __init__(self, message: str, *, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class OpError(ReMeError):
    """A failure inside a flow, naming the flow and the op; status and code follow the cause."""

    def __init__(self, flow: str, op: str, cause: BaseException) -> None:
        inner = cause.message if isinstance(cause, ReMeError) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"flow '{flow}', op '{op}': {inner}")
        self.flow = flow
        self.op = op
        self.__cause__ = cause
        if isinstance(cause, ReMeError):
            self.code = cause.code
            self.status = cause.status
            self.details = dict(cause.details)
        self.details.update({"flow": flow, "op": op})


def error_envelope(error: ReMeError, request_id: str) -> dict[str, Any]:
    """The failure body shared by the Python API, HTTP and MCP.

    `{"answer": "", "success": false, "metadata": {"error": {"code", "message", ["details",] "request_id"}}}`;
    `details` appears only when the error has some.
    """
    return {"answer": "", "success": False, "metadata": {"error": {**error.to_dict(), "request_id": request_id}}}


def describe_validation_errors(
    errors: ValidationError | Iterable[Any],
    *,
    prefix: str = "",
    line: str = "{loc}: {msg}",
    no_loc: str = "(root)",
    skip_root: str | None = None,
    with_input: bool = False,
    input_width: int = 80,
    limit: int | None = None,
    explain: Callable[[Mapping[str, Any]], str | None] | None = None,
    separator: str = "; ",
) -> str:
    """One message for a list of validation errors: `prefix` + one part per error, joined by `separator`.

    `errors` is a pydantic `ValidationError` or a list in the shape of its `errors()` (FastAPI's 422 `detail`
    list has that shape too); an item that is not a mapping is shown as `str(item)`. Each part is `line` with
    `{loc}` (the location parts joined with dots, or `no_loc` when there are none) and `{msg}` filled in.

    - `skip_root`: a first location part to leave out (FastAPI's `"body"`);
    - `with_input`: append ` (got <input as JSON>)`, cut to `input_width` characters, unless the field is missing;
    - `limit`: describe at most this many errors and end with `(and N more)` for the rest;
    - `explain`: called with each error first; a string it returns replaces the part (e.g. listing the valid
      keys for an `extra_forbidden` error), None keeps the default.

    ```python
    describe_validation_errors(exc, prefix="invalid arguments: ", with_input=True)
    # "invalid arguments: top_k: Input should be a valid integer (got \"many\")"
    ```
    """
    items = list(errors.errors(include_url=False) if isinstance(errors, ValidationError) else errors)
    shown = items if limit is None else items[: max(0, limit)]
    parts = [_describe_one(item, line, no_loc, skip_root, with_input, input_width, explain) for item in shown]
    more = f" (and {len(items) - len(shown)} more)" if len(items) > len(shown) else ""
    return prefix + separator.join(parts) + more


def _describe_one(
    item: Any,
    line: str,
    no_loc: str,
    skip_root: str | None,
    with_input: bool,
    input_width: int,
    explain: Callable[[Mapping[str, Any]], str | None] | None,
) -> str:
    if not isinstance(item, Mapping):
        return str(item)
    if explain is not None:
        special = explain(item)
        if special is not None:
            return special
    loc = [str(part) for part in item.get("loc", ())]
    if skip_root is not None and loc[:1] == [skip_root]:
        loc = loc[1:]
    text = line.format(loc=".".join(loc) or no_loc, msg=item.get("msg", str(item)))
    if with_input and item.get("type") != "missing" and "input" in item:
        shown = json.dumps(item["input"], default=repr, ensure_ascii=False, separators=(",", ":"))
        text += f" (got {shown[:input_width]})"
    return text
