"""Retries shared by the OpenAI-compatible LLM and embedding clients, and the `AsyncOpenAI` client they both build.

The openai SDK's own retries are switched off (`max_retries=0`); `call_with_retries` retries instead:

* retried, with exponential backoff and jitter: HTTP 408, 429 and 5xx, timeouts, connection errors, malformed
  or empty replies, error events inside a stream;
* not retried: any other 4xx (bad request, authentication, unknown model, ...);
* the final error is the caller's `ProviderError` subclass (`LLMError`, `EmbeddingError`), whose message carries
  the HTTP status and the provider's own error message; when the last attempt failed on an unusable reply
  (`RetryableReply`) it is the caller's `reply_error_cls` instead (`LLMReplyError` for the LLM).
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx
import openai

from reme_service.errors import ProviderError

__all__ = [
    "BACKOFF_CAP",
    "OpenAIRetryingClient",
    "RetryableReply",
    "backoff_delay",
    "call_with_retries",
    "describe_failure",
]

T = TypeVar("T")

BACKOFF_CAP = 8.0
"""The longest wait between two attempts, in seconds."""

_RETRY_STATUSES = frozenset({408, 429})


class RetryableReply(Exception):
    """Raised inside an attempt when the reply is unusable (empty, malformed) and worth asking again.

    An internal signal of the retry loop: callers outside the provider see `reply_error_cls` (e.g. `LLMReplyError`).
    """


def backoff_delay(attempt: int, backoff: float, *, cap: float = BACKOFF_CAP) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): `backoff * 2**(attempt-1)`, capped,
    with "equal jitter" (a uniformly random value between half of it and all of it)."""
    base = min(cap, backoff * 2.0 ** (attempt - 1))
    return base / 2 + random.uniform(0, base / 2)


def _provider_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        for key in ("message", "msg", "detail", "error"):
            value = body.get(key)
            if value:
                return value if isinstance(value, str) else str(value)
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _retry_after(exc: BaseException) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    try:
        return float(exc.response.headers.get("retry-after", ""))
    except ValueError:
        return None


def describe_failure(exc: Exception, *, timeout: float | None = None) -> tuple[bool, str, int | None]:
    """`(retryable, reason, http_status)` for an exception raised by one attempt."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRY_STATUSES or status >= 500
        return retryable, f"HTTP {status}: {_provider_message(exc)}", status
    if isinstance(exc, openai.APITimeoutError):
        after = f" after {timeout:g} s" if timeout is not None else ""
        return True, f"the request timed out{after}", None
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f": {type(cause).__name__}: {cause}" if cause is not None else ""
        return True, f"connection error{detail}", None
    if isinstance(exc, openai.APIResponseValidationError):
        return False, f"invalid response: {exc.message}", exc.status_code
    if isinstance(exc, openai.APIError):  # e.g. an error event inside a stream
        return True, f"provider error: {exc.message}", None
    if isinstance(exc, RetryableReply):
        return True, str(exc), None
    if isinstance(exc, ValueError):  # a body or SSE line that is not JSON
        return True, f"malformed response: {exc}", None
    if isinstance(exc, OSError | httpx.TransportError):
        return True, f"connection error: {type(exc).__name__}: {exc}", None
    return False, f"{type(exc).__name__}: {exc}", None


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    backoff: float,
    error_cls: type[ProviderError],
    what: str,
    reply_error_cls: type[ProviderError] | None = None,
    request_timeout: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> T:
    """Await `attempt()` up to `max_retries + 1` times (see the module docstring for what is retried).

    A `ProviderError` raised by `attempt` itself passes through untouched and is not retried. Any other
    openai / transport failure becomes `error_cls("<what> failed ...: <reason>")`, or `reply_error_cls` (default:
    `error_cls`) when the last failure was a `RetryableReply`; exceptions the client does not know (programming
    errors) propagate as they are. `request_timeout` only words the timeout message.
    """
    attempts = max_retries + 1
    for number in range(1, attempts + 1):
        try:
            return await attempt()
        except ProviderError:
            raise
        except (openai.OpenAIError, RetryableReply, ValueError, OSError, httpx.TransportError) as exc:
            retryable, reason, status = describe_failure(exc, timeout=request_timeout)
            info = {**(details or {}), "attempts": number}
            if status is not None:
                info["status"] = status
            if not retryable:
                raise error_cls(f"{what} failed: {reason}", details=info) from exc
            if number == attempts:
                tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
                final_cls = reply_error_cls if reply_error_cls and isinstance(exc, RetryableReply) else error_cls
                raise final_cls(f"{what} failed after {tries}: {reason}", details=info) from exc
            delay = backoff_delay(number, backoff)
            hint = _retry_after(exc)
            if hint is not None:
                delay = max(delay, min(hint, BACKOFF_CAP))
            await anyio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns or raises


PROBE_SECONDS = 30.0
PROBE_TIMEOUT = 3.0


@dataclass(frozen=True, slots=True)
class _Reach:
    at: float
    status: str
    reason: str = ""


class OpenAIRetryingClient:
    """Mixin for a provider client on `openai.AsyncOpenAI`: the retry settings, the client, and `close()`.

    An injected `http_client` belongs to the caller and is not closed by `close()`.
    """

    backend: str
    base_url: str | None
    max_retries: int
    timeout: float
    backoff: float

    def _init_openai_client(
        self,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        timeout: float,
        backoff: float,
        http_client: httpx.AsyncClient | None,
    ) -> None:
        """Check and keep the retry settings, and build the `AsyncOpenAI` client with the SDK's retries off."""
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if backoff < 0:
            raise ValueError("backoff must be >= 0")
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self._owns_http_client = http_client is None
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "EMPTY",
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            # The SDK annotates `http_client` as its bundled `httpx2.AsyncClient`, yet its constructor checks for and
            # accepts a plain `httpx.AsyncClient` too (`is_legacy_httpx_async_client`); only the annotation is narrow.
            http_client=http_client,  # type: ignore[arg-type]
        )

    async def _with_retries(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        error_cls: type[ProviderError],
        what: str,
        model: str,
        reply_error_cls: type[ProviderError] | None = None,
    ) -> T:
        """`call_with_retries` with this client's settings; the error details name the backend, model and URL."""
        try:
            result = await call_with_retries(
                attempt,
                max_retries=self.max_retries,
                backoff=self.backoff,
                error_cls=error_cls,
                reply_error_cls=reply_error_cls,
                what=what,
                request_timeout=self.timeout,
                details={"backend": self.backend, "model": model, "base_url": self.base_url},
            )
        except ProviderError as exc:
            if reply_error_cls is None or not isinstance(exc, reply_error_cls):  # it answered, just not usably
                self._reach = _Reach(time.monotonic(), "unreachable", exc.message)
            raise
        self._reach = _Reach(time.monotonic(), "ok")
        return result

    async def reachability(self) -> dict[str, Any]:
        """`{"status": "ok"}`, or `unreachable` / `down` with the reason: from the last call when it is recent,
        else from a probe (`GET /models`, at most every `PROBE_SECONDS`, `PROBE_TIMEOUT` seconds at most)."""
        reach = getattr(self, "_reach", None)
        if reach is None or time.monotonic() - reach.at > PROBE_SECONDS:
            reach = self._reach = await self._probe()
        return {"status": reach.status, **({"reason": reach.reason} if reach.reason else {})}

    async def _probe(self) -> _Reach:
        try:
            await self._client.with_options(timeout=PROBE_TIMEOUT, max_retries=0).models.list()
        except openai.AuthenticationError:
            return _Reach(time.monotonic(), "down", f"{self.base_url or 'the provider'} refused the API key")
        except openai.APIStatusError:
            pass  # it answers HTTP: reachable (servers without a /models route say 404)
        except (openai.APIConnectionError, httpx.HTTPError) as exc:
            reason = describe_failure(exc, timeout=PROBE_TIMEOUT)[1]
            return _Reach(time.monotonic(), "unreachable", f"{self.base_url or 'the provider'}: {reason}")
        return _Reach(time.monotonic(), "ok")

    async def close(self) -> None:
        if self._owns_http_client:
            await self._client.close()
