"""Chat through any OpenAI-compatible endpoint (OpenAI, DashScope, vLLM, Ollama, ...).

`OpenAICompatibleLLM.chat` always streams and folds the chunks into one assistant `Message`: content deltas are
concatenated, `reasoning_content` is read from the deltas' extra fields (DeepSeek / Qwen style), and tool-call
argument fragments are concatenated per tool-call index.

Retries (which failures are retried, with what backoff, and the error raised at the end) are
`reme_service.providers.retry`'s, shared with the OpenAI-compatible embedding client; `RetryableReply`,
`backoff_delay`, `call_with_retries` and `describe_failure` stay importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from openai.types.chat import ChatCompletionChunk

from reme_service.errors import LLMError, LLMReplyError
from reme_service.flow.current_op import current_op
from reme_service.providers.llm.base import LLMClient
from reme_service.providers.retry import (
    OpenAIRetryingClient,
    RetryableReply,
    backoff_delay,
    call_with_retries,
    describe_failure,
)
from reme_service.schema.messages import Message, Role, ToolCall

__all__ = ["OpenAICompatibleLLM", "RetryableReply", "backoff_delay", "call_with_retries", "describe_failure"]

# Request settings that are options of the openai call rather than fields of the JSON body.
_CALL_OPTIONS = ("extra_headers", "extra_query", "timeout")
OP_HEADER = "X-ReMe-Op"  # the op that makes the call (see reme_service/flow/current_op.py)
# Body fields the client sets itself; callers cannot override them.
_RESERVED = ("messages", "stream", "stream_options", "tools")


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


class OpenAICompatibleLLM(OpenAIRetryingClient, LLMClient):
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
        self.model_name = model_name
        self.params: dict[str, Any] = dict(params or {})
        self._init_openai_client(api_key, base_url, max_retries, timeout, backoff, http_client)

    async def chat(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        **settings: Any,
    ) -> Message:
        request = self._request(messages, tools, settings)
        return await self._with_retries(
            lambda: self._chat_once(request),
            error_cls=LLMError,
            reply_error_cls=LLMReplyError,
            what=f"LLM call to model '{request['model']}'",
            model=request["model"],
        )

    async def health(self) -> dict[str, Any]:
        return {**await self.reachability(), "backend": self.backend, "model": self.model_name}

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
        if op := current_op.get():  # which step asks (flow/current_op.py): for gateways, cost attribution and tests
            request["extra_headers"] = {OP_HEADER: op, **(request.get("extra_headers") or {})}
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
