"""HTTP clients for the service: `ReMeClient` (blocking) and `AsyncReMeClient` (asyncio), both on httpx.

```python
from reme_service.client import ReMeClient

with ReMeClient("http://127.0.0.1:8002", workspace_id="my_agent") as reme:
    reme.vector_store("load", path="docs/library/agent_basics.jsonl")
    hits = reme.retrieve_task_memory("paginate through an API", top_k=3)
    print(hits.answer, hits.memory_list)
```

Every flow is `call(flow, **fields)`; the flows of ReMe 0.2 (and ours) also have a typed method that names their
fields, and any other flow the server offers is reachable as an attribute (`reme.some_new_flow(...)`), so a flow
added on the server needs no client change. Fields left as `None` are not sent, so the server's defaults apply.

A failure raises the service's own exception type (`reme_service.errors`), chosen by the envelope's `code` and
carrying the server's `status`, `message` and `request_id`; a request-schema error (HTTP 422) raises
`RequestValidationError` with one line per bad field. Connection failures (nothing was sent) are retried with
exponential backoff and then raise `ServiceConnectionError`; a request that reached the server is never resent,
except when the server answered 503 `overloaded` (it refused the request before running it): then the client waits
the `Retry-After` the server gave (at most 30 s) and sends it again, up to `retries` times.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from reme_service.client_flows import FlowMethods
from reme_service.errors import (
    ConfigError,
    DimensionMismatchError,
    EmbeddingError,
    FlowDeclarationError,
    FlowSyntaxError,
    ForbiddenError,
    HeaderTooLargeError,
    InvalidRequestError,
    LLMError,
    MethodNotAllowedError,
    NotFoundError,
    OverloadedError,
    PathNotAllowedError,
    PayloadTooLargeError,
    ProviderError,
    RateLimitedError,
    ReMeError,
    RequestTimeoutError,
    RequestValidationError,
    ServiceConnectionError,
    StoreError,
    UnauthorizedError,
    describe_validation_errors,
)

DEFAULT_BASE_URL = "http://127.0.0.1:8002"
T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)


ERROR_TYPES: dict[str, type[ReMeError]] = {
    cls.code: cls
    for cls in (
        ReMeError,
        ConfigError,
        FlowSyntaxError,
        InvalidRequestError,
        RequestValidationError,
        PathNotAllowedError,
        NotFoundError,
        ProviderError,
        LLMError,
        EmbeddingError,
        StoreError,
        DimensionMismatchError,
        FlowDeclarationError,
        MethodNotAllowedError,
        RequestTimeoutError,
        PayloadTooLargeError,
        HeaderTooLargeError,
        OverloadedError,
        UnauthorizedError,
        ForbiddenError,
        RateLimitedError,
    )
}
_BY_STATUS: dict[int, type[ReMeError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    408: RequestTimeoutError,
    413: PayloadTooLargeError,
    422: RequestValidationError,
    429: RateLimitedError,
    431: HeaderTooLargeError,
    502: ProviderError,
    503: StoreError,
}
MAX_RETRY_AFTER = 30.0  # longest `Retry-After` the client honours before giving up on an overloaded server


class FlowResult(BaseModel):
    """A successful flow response: ReMe's envelope plus the request id the server assigned."""

    model_config = ConfigDict(extra="allow")

    answer: Any = ""
    success: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)
    request_id: str = ""

    @property
    def memory_list(self) -> list[dict[str, Any]]:
        """`metadata.memory_list` (retrieval and summary flows), or an empty list."""
        return list(self.metadata.get("memory_list") or [])

    @property
    def job_id(self) -> str | None:
        """The job a call with `"async": True` was accepted as (`metadata.job_id`; then `wait_job`), else None."""
        job_id = self.metadata.get("job_id")
        return str(job_id) if job_id else None


class JobProgress(BaseModel):
    """How far a running job is: `done` of `total` rows (`total` None while unknown)."""

    done: int = 0
    total: int | None = None
    unit: str = "rows"


class JobView(BaseModel):
    """`GET /jobs/{job_id}`: the job's status, its progress while it runs (a `vector_store` load run as a job) and,
    once finished, `result`, the envelope the call would have answered."""

    model_config = ConfigDict(extra="allow")

    job_id: str
    status: str
    flow: str = ""
    workspace_id: str = ""
    http_status: int | None = None
    result: dict[str, Any] | None = None
    progress: JobProgress | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")


#: what `wait_job` calls with each answer while the job runs (and once with the finished job)
ProgressCallback = Callable[[JobView], None]


def _make_error(cls: type[ReMeError], message: str, status: int, code: str, details: dict[str, Any]) -> ReMeError:
    error = cls(message, details=details)
    error.status = status  # the server's values win over the class defaults
    error.code = code
    return error


def _validation_message(detail: list[Any]) -> str:
    """One line per bad field of FastAPI's 422 `detail` list: `field.path: message`."""
    return describe_validation_errors(detail, prefix="request validation failed: ", skip_root="body", no_loc="(body)")


def error_from_response(response: httpx.Response) -> ReMeError:
    """The typed exception for a failed response (any non-2xx, or a 2xx whose envelope says `success: false`)."""
    status = response.status_code
    request_id = response.headers.get("x-request-id", "")
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail"), list):
        details = {"errors": body["detail"], "request_id": request_id}
        return _make_error(
            RequestValidationError, _validation_message(body["detail"]), status, "validation_error", details
        )
    error = body.get("metadata", {}).get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code", "internal_error"))
        cls = ERROR_TYPES.get(code) or _BY_STATUS.get(status, ReMeError)
        details = {**(error.get("details") or {}), "request_id": error.get("request_id", request_id)}
        return _make_error(cls, str(error.get("message", "")), status, code, details)
    # Not the service's envelope (a proxy in front of it): keep the status and text.
    text = response.text.strip()[:500] or response.reason_phrase
    return _make_error(ReMeError, f"HTTP {status}: {text}", status, "http_error", {"request_id": request_id})


def _job_view(response: httpx.Response) -> JobView:
    if response.status_code != 200:
        raise error_from_response(response)
    return JobView.model_validate(response.json())


def _job_path(job_id: str, wait: float) -> str:
    return f"/jobs/{quote(job_id, safe='')}?wait={wait:g}"


def _result(response: httpx.Response) -> FlowResult:
    if response.status_code not in (200, 202):  # 202: accepted as a job (`FlowResult.job_id`)
        raise error_from_response(response)
    try:
        body = response.json()
    except ValueError:
        raise error_from_response(response) from None
    if not isinstance(body, dict) or body.get("success") is not True:
        raise error_from_response(response)
    return FlowResult(**body, request_id=response.headers.get("x-request-id", ""))


def request_body(fields: Mapping[str, Any], workspace_id: str) -> dict[str, Any]:
    """The JSON body: `None` fields dropped, pydantic models (Message, Trajectory, ...) turned into JSON values."""
    body = {key: value for key, value in fields.items() if value is not None}
    if workspace_id and not body.get("workspace_id"):
        body["workspace_id"] = workspace_id
    jsonable: dict[str, Any] = to_jsonable_python(body)
    return jsonable


# `vector_store` actions that may run for minutes (a 10,000-memory library embedded by the local model: ~1 min on
# 2 cores; 100k: ~10 min); they get `load_timeout` instead of `timeout`.
LONG_ACTIONS = frozenset({"load", "dump", "copy"})

# httpx raises these before any byte of the request is sent, so retrying cannot run a flow twice.
_RETRYABLE = (httpx.ConnectError, httpx.ConnectTimeout)


def _connection_error(base_url: str, attempts: int, exc: Exception) -> ServiceConnectionError:
    return ServiceConnectionError(
        f"cannot reach the memory service at {base_url} after {attempts} attempt(s): {exc}",
        details={"base_url": base_url, "attempts": attempts},
    )


class _ClientBase(Generic[H]):
    """What the blocking and the asyncio client share: their settings, their httpx client, reading replies."""

    _http_type: type[H]
    """The httpx client class built when none is injected (`httpx.Client` or `httpx.AsyncClient`)."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        workspace_id: str = "",
        timeout: float = 120.0,
        load_timeout: float = 1800.0,
        retries: int = 3,
        backoff: float = 0.2,
        headers: Mapping[str, str] | None = None,
        http_client: H | None = None,
        api_key: str | None = None,
    ) -> None:
        """`api_key` (default: the `REME_API_KEY` environment variable) is sent as `Authorization: Bearer`."""
        if retries < 0:
            raise ValueError("retries must be >= 0")
        key = api_key if api_key is not None else os.environ.get("REME_API_KEY", "")
        headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})}
        self.base_url = base_url.rstrip("/")
        self.workspace_id = workspace_id
        self.retries = retries
        self.backoff = backoff
        self.load_timeout = load_timeout
        self._owns_http = http_client is None
        self._http: H = http_client or self._http_type(timeout=timeout, headers=headers)
        if http_client is not None:
            http_client.headers.update(headers)

    def _flow_request(self, flow: str, fields: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """`(method, path, body)` of the request that runs `flow` with these fields."""
        return "POST", f"/{flow}", request_body(fields, self.workspace_id)

    def _timeout(self, path: str, body: Any) -> float | Any:
        """`load_timeout` for the long `vector_store` actions (`LONG_ACTIONS`), else the client's own timeout."""
        if path == "/vector_store" and isinstance(body, dict) and body.get("action") in LONG_ACTIONS:
            return self.load_timeout
        return httpx.USE_CLIENT_DEFAULT

    @staticmethod
    def _health_result(response: httpx.Response) -> dict[str, Any]:
        """The body of a `GET /health` reply, or the service's error when it is not a 200."""
        if response.status_code != 200:
            raise error_from_response(response)
        return dict(response.json())

    def _delay(self, attempt: int) -> float:
        return self.backoff * 2.0**attempt

    def _overload_delay(self, response: httpx.Response, attempt: int) -> float | None:
        """How long to wait before sending again when the server answered `overloaded` (it did not run the request,
        so any flow may be retried), or None: not overloaded, no retries left, or a `Retry-After` too long. A key's
        rate limit (429 `rate_limited`) is waited out the same way: that request did not run either."""
        if response.status_code not in (429, 503) or attempt >= self.retries:
            return None
        try:
            code = response.json()["metadata"]["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return None
        if code not in (OverloadedError.code, RateLimitedError.code):
            return None
        try:
            wait = float(response.headers.get("retry-after", ""))
        except ValueError:
            wait = self._delay(attempt)
        return wait if 0 <= wait <= MAX_RETRY_AFTER else None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # Any flow the server offers without a typed method here: `client.new_flow(**fields)`.
        if name.startswith("_"):
            raise AttributeError(name)

        def flow_method(**fields: Any) -> Any:
            return self.call(name, **fields)

        flow_method.__name__ = name
        return flow_method


class ReMeClient(_ClientBase[httpx.Client], FlowMethods[FlowResult]):
    """Blocking client. Use as a context manager or call `close()`.

    Arguments: `base_url`, `workspace_id` (sent when a call names none), `timeout` in seconds (default 120),
    `load_timeout` for the `vector_store` actions load, dump and copy (default 1800: a large library takes
    minutes to embed), `retries` and `backoff` of connection failures, `headers` of every request, and
    `http_client` (injected: the caller's, not closed here; the per-request timeouts still apply).
    """

    _http_type = httpx.Client

    def _send(self, method: str, path: str, json: Any = None) -> httpx.Response:
        for attempt in range(self.retries + 1):
            try:
                timeout = self._timeout(path, json)
                response = self._http.request(method, f"{self.base_url}{path}", json=json, timeout=timeout)
            except _RETRYABLE as exc:
                if attempt == self.retries:
                    raise _connection_error(self.base_url, attempt + 1, exc) from exc
                time.sleep(self._delay(attempt))
                continue
            wait = self._overload_delay(response, attempt)
            if wait is None:
                return response
            time.sleep(wait)
        raise AssertionError("unreachable")

    def call(self, flow: str, /, **fields: Any) -> FlowResult:
        """Run `flow` with these request fields; raises a `ReMeError` subclass when it fails."""
        return _result(self._send(*self._flow_request(flow, fields)))

    def request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        """Any other route (`/workspaces/...`, `/jobs/...`) with this client's key, retries and timeouts; the
        response as it came (`error_from_response(response)` is its typed error)."""
        return self._send(method, path, json)

    def job(self, job_id: str, *, wait: float = 0) -> JobView:
        """The job now, or once finished within `wait` seconds (≤ 60, the server's long poll)."""
        return _job_view(self._send("GET", _job_path(job_id, wait)))

    def wait_job(self, job_id: str, *, progress: ProgressCallback | None = None, poll: float = 1.0) -> JobView:
        """Wait until the job has finished and return it, calling `progress(job)` after each look (every `poll`
        seconds at most): `job.progress` is rows done/total while a load runs."""
        while True:
            job = self.job(job_id, wait=poll)
            if progress is not None:
                progress(job)
            if job.finished:
                return job

    def health(self) -> dict[str, Any]:
        """`GET /health`: status of the store and providers, and the list of flows."""
        return self._health_result(self._send("GET", "/health"))

    def flows(self) -> list[str]:
        """The names of the flows the server offers."""
        return list(self.health().get("flows", []))

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> ReMeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncReMeClient(_ClientBase[httpx.AsyncClient], FlowMethods[Awaitable[FlowResult]]):
    """asyncio client. Use as an async context manager or await `aclose()`; arguments as `ReMeClient`'s."""

    _http_type = httpx.AsyncClient

    async def _send(self, method: str, path: str, json: Any = None) -> httpx.Response:
        for attempt in range(self.retries + 1):
            try:
                timeout = self._timeout(path, json)
                response = await self._http.request(method, f"{self.base_url}{path}", json=json, timeout=timeout)
            except _RETRYABLE as exc:
                if attempt == self.retries:
                    raise _connection_error(self.base_url, attempt + 1, exc) from exc
                await asyncio.sleep(self._delay(attempt))
                continue
            wait = self._overload_delay(response, attempt)
            if wait is None:
                return response
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    def call(self, flow: str, /, **fields: Any) -> Awaitable[FlowResult]:
        """Run `flow` with these request fields (await the result); raises a `ReMeError` subclass on failure."""
        return self._call(flow, fields)

    async def _call(self, flow: str, fields: dict[str, Any]) -> FlowResult:
        return _result(await self._send(*self._flow_request(flow, fields)))

    async def request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        """Any other route (`/workspaces/...`, `/jobs/...`) with this client's key, retries and timeouts; the
        response as it came (`error_from_response(response)` is its typed error)."""
        return await self._send(method, path, json)

    async def job(self, job_id: str, *, wait: float = 0) -> JobView:
        """The job now, or once finished within `wait` seconds (≤ 60, the server's long poll)."""
        return _job_view(await self._send("GET", _job_path(job_id, wait)))

    async def wait_job(self, job_id: str, *, progress: ProgressCallback | None = None, poll: float = 1.0) -> JobView:
        """Wait until the job has finished and return it, calling `progress(job)` after each look (every `poll`
        seconds at most): `job.progress` is rows done/total while a load runs."""
        while True:
            job = await self.job(job_id, wait=poll)
            if progress is not None:
                progress(job)
            if job.finished:
                return job

    async def health(self) -> dict[str, Any]:
        """`GET /health`: status of the store and providers, and the list of flows."""
        return self._health_result(await self._send("GET", "/health"))

    async def flows(self) -> list[str]:
        """The names of the flows the server offers."""
        return list((await self.health()).get("flows", []))

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncReMeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "DEFAULT_BASE_URL",
    "ERROR_TYPES",
    "AsyncReMeClient",
    "FlowResult",
    "ReMeClient",
    "RequestValidationError",
    "ServiceConnectionError",
    "error_from_response",
    "request_body",
]
