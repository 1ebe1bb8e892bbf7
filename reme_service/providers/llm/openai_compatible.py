"""Chat through any OpenAI-compatible endpoint (OpenAI, DashScope, vLLM, Ollama, ...).

`OpenAICompatibleLLM.chat` always streams and folds the chunks into one assistant `Message`: content deltas are
concatenated, `reasoning_content` is read from the deltas' extra fields (DeepSeek / Qwen style), and tool-call
argument fragments are concatenated per tool-call index.

The openai SDK's own retries are switched off (`max_retries=0`); `call_with_retries` below retries instead, and is
shared with the OpenAI-compatible embedding client:

* retried, with exponential backoff and jitter: HTTP 408, 429 and 5xx, timeouts, connection errors, malformed
  or empty replies, error events inside a stream;
* not retried: any other 4xx (bad request, authentication, unknown model, ...);
* the final error is the caller's `ProviderError` subclass (`LLMError`, `EmbeddingError`), whose message carries
  the HTTP status and the provider's own error message.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx
import openai
from openai.types.chat import ChatCompletionChunk

from reme_service.errors import LLMError, ProviderError
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message, Role, ToolCall

__all__ = ["OpenAICompatibleLLM", "RetryableReply", "backoff_delay", "call_with_retries"]

T = TypeVar("T")

BACKOFF_CAP = 8.0
"""The longest wait between two attempts, in seconds."""

_RETRY_STATUSES = frozenset({408, 429})
# Request settings that are options of the openai call rather than fields of the JSON body.
_CALL_OPTIONS = ("extra_headers", "extra_query", "timeout")
# Body fields the client sets itself; callers cannot override them.
_RESERVED = ("messages", "stream", "stream_options", "tools")


class RetryableReply(Exception):
    """Raised inside an attempt when the reply is unusable (empty, malformed) and worth asking again."""


def backoff_delay(attempt: int, backoff: float, *, cap: float = BACKOFF_CAP) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): `backoff * 2**(attempt-1)`, capped,
    with "equal jitter" (a uniformly random value between half of it and all of it)."""
    base = min(cap, backoff * (2 ** (attempt - 1)))
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
    request_timeout: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> T:
    """Await `attempt()` up to `max_retries + 1` times (see the module docstring for what is retried).

    A `ProviderError` raised by `attempt` itself passes through untouched and is not retried. Any other
    openai / transport failure becomes `error_cls("<what> failed ...: <reason>")`; exceptions the client does not
    know (programming errors) propagate as they are. `request_timeout` only words the timeout message.
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
                raise error_cls(f"{what} failed after {tries}: {reason}", details=info) from exc
            delay = backoff_delay(number, backoff)
            hint = _retry_after(exc)
            if hint is not None:
                delay = max(delay, min(hint, BACKOFF_CAP))
            await anyio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns or raises


@dataclass
class _PartialToolCall:
    index: int
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Aggregate:
    """Folds streamed chunks of choice 0 into one assistant message."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, _PartialToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str = ""
    usage: dict[str, Any] | None = None

    def add(self, chunk: ChatCompletionChunk) -> None:
        # The SDK builds chunks without validation, so fields a lax server leaves out may be missing: use getattr.
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage.model_dump(exclude_none=True)
        for choice in getattr(chunk, "choices", None) or []:
            if (getattr(choice, "index", 0) or 0) != 0:
                continue
            finish_reason = getattr(choice, "finish_reason", None)
            if finish_reason:
                self.finish_reason = finish_reason
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            content = getattr(delta, "content", None)
            if isinstance(content, str) and content:
                self.content.append(content)
            extra = delta.model_extra or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
            for fragment in getattr(delta, "tool_calls", None) or []:
                self._add_tool_fragment(fragment)

    def _add_tool_fragment(self, fragment: Any) -> None:
        index = getattr(fragment, "index", None)
        fragment_id = getattr(fragment, "id", None)
        if index is None:  # some servers omit it: a new id opens a new call, otherwise continue the last one
            known = [tc.index for tc in self.tool_calls.values() if fragment_id and tc.id == fragment_id]
            if known:
                index = known[0]
            elif fragment_id or not self.tool_calls:
                index = len(self.tool_calls)
            else:
                index = max(self.tool_calls)
        call = self.tool_calls.setdefault(index, _PartialToolCall(index=index))
        if fragment_id:
            call.id = fragment_id
        function = getattr(fragment, "function", None)
        name = getattr(function, "name", None)
        arguments = getattr(function, "arguments", None)
        if name and name != call.name:
            # Most servers send the name once; a few stream it in pieces.
            call.name = name if not call.name else call.name + name
        if isinstance(arguments, str) and arguments:
            call.arguments.append(arguments)

    @property
    def empty(self) -> bool:
        return not "".join(self.content).strip() and not self.tool_calls

    def message(self) -> Message:
        tool_calls = [
            ToolCall(index=tc.index, id=tc.id or f"call_{tc.index}", name=tc.name, arguments="".join(tc.arguments))
            for tc in sorted(self.tool_calls.values(), key=lambda tc: tc.index)
        ]
        metadata: dict[str, Any] = {"model": self.model, "finish_reason": self.finish_reason}
        if self.usage is not None:
            metadata["usage"] = self.usage
        return Message(
            role=Role.ASSISTANT,
            content="".join(self.content),
            reasoning_content="".join(self.reasoning),
            tool_calls=tool_calls,
            metadata=metadata,
        )


class OpenAICompatibleLLM(LLMClient):
    """Chat completion against an OpenAI-compatible `/chat/completions` endpoint, always streamed.

    `params` are request fields sent verbatim with every call (e.g. `{"temperature": 0.2}`); per-call `settings`
    given to `chat` override them. Both are sent as JSON body fields, so provider-specific ones
    (`enable_thinking`, `top_k`, ...) pass through; `model` among them overrides `model_name` for that call.
    An injected `http_client` belongs to the caller and is not closed by `close()`.
    """

    backend = "openai_compatible"

    def __init__(
        self,
        *,
        model_name: str,
        api_key: str | None = None,
        base_url: str | None = None,
        params: dict[str, Any] | None = None,
        max_retries: int = 3,
        timeout: float = 60.0,
        backoff: float = 0.5,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if backoff < 0:
            raise ValueError("backoff must be >= 0")
        self.model_name = model_name
        self.base_url = base_url
        self.params: dict[str, Any] = dict(params or {})
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self._owns_http_client = http_client is None
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "EMPTY",
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )

    async def chat(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        **settings: Any,
    ) -> Message:
        request = self._request(messages, tools, settings)
        return await call_with_retries(
            lambda: self._chat_once(request),
            max_retries=self.max_retries,
            backoff=self.backoff,
            error_cls=LLMError,
            what=f"LLM call to model '{request['model']}'",
            request_timeout=self.timeout,
            details={"backend": self.backend, "model": request["model"], "base_url": self.base_url},
        )

    def _request(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        settings: Mapping[str, Any],
    ) -> dict[str, Any]:
        body: dict[str, Any] = {**self.params, **settings}
        body.update(body.pop("extra_body", None) or {})
        model = str(body.pop("model", None) or self.model_name)
        for key in _RESERVED:
            body.pop(key, None)
        request: dict[str, Any] = {key: body.pop(key) for key in _CALL_OPTIONS if key in body}
        request.update(
            model=model,
            messages=[m.to_openai() if isinstance(m, Message) else dict(m) for m in messages],
            stream=True,
            stream_options={"include_usage": True},
        )
        if tools:
            request["tools"] = list(tools)
        if body:
            request["extra_body"] = body
        return request

    async def _chat_once(self, request: dict[str, Any]) -> Message:
        stream = await self._client.chat.completions.create(**request)
        aggregate = _Aggregate()
        try:
            async for chunk in stream:
                aggregate.add(chunk)
        finally:
            await stream.close()
        if aggregate.empty:
            raise RetryableReply("empty reply: the provider sent no content and no tool calls")
        return aggregate.message()

    async def close(self) -> None:
        if self._owns_http_client:
            await self._client.close()
