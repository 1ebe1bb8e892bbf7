"""A scriptable OpenAI-compatible server for tests: chat completions (JSON and SSE) and embeddings.

Serve it on loopback (`running()`, or `reme_service.testing.serve.serve_in_thread(fake.app)`) and point the real
`openai` client at it; under pytest, the `fake_openai` fixture of `reme_service.testing.pytest_plugin` is one served
for the session and reset around each test:

```python
fake = FakeOpenAI()
fake.script("first reply", FakeReply(content="second", reasoning="thinking...", tool_calls=[("f", {"x": 1})]))
fake.on("weather", "It is sunny.")          # whenever the last user message mentions "weather"
fake.fail_next(2, status=500)               # the next two requests (any endpoint) fail
with fake.running() as base_url:  # "http://127.0.0.1:PORT/v1", also fake.base_url meanwhile
    client = openai.AsyncOpenAI(api_key="k", base_url=base_url)
```

How a chat reply is chosen, first match wins:

1. a pending fault from `fail_next` / `delay_next` (faults are consumed by requests in arrival order);
2. the next reply queued with `script` (each is used once);
3. the replies queued with `on_op` for the op that made the call (the client's `X-ReMe-Op` header), in order,
   the last one repeating;
4. the first rule added with `on` whose substring occurs in the last user message (or in any message, for rules
   added with `anywhere=True`); rules are never consumed — for tests of a client, not of the service's ops;
5. `default_reply`.

A reply is a plain string (the content), a `FakeReply`, or a callable taking the request's JSON body and returning
either. Every payload is built from the `openai` package's own pydantic types, so the fake follows the protocol
the client parses. Every request, failed or not, is appended to `requests` as `(path, json_body)`.

Embeddings are a deterministic hashed bag of words (`HashEmbeddingClient`) of the requested `dimensions`
(1024 when absent); `shuffle_index`, `vector_count_offset` and `embedding_dimensions` make the reply wrong
on purpose to test a client's checks.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import numpy as np
from openai.types import CreateEmbeddingResponse, Embedding
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageToolCallUnion,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import (
    Choice as ChunkChoice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)
from openai.types.completion_usage import CompletionUsage
from openai.types.create_embedding_response import Usage as EmbeddingUsage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.testing.serve import serve_in_thread

Endpoint = Literal["chat", "embeddings"]

DEFAULT_REPLY = "OK, noted."

_ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


@dataclass(frozen=True)
class FakeReply:
    """One scripted assistant reply.

    `tool_calls` holds `(name, arguments)` pairs; arguments are a dict (sent as JSON) or a ready JSON string.
    `finish_reason` defaults to "tool_calls" when there are tool calls, else "stop".
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: Sequence[tuple[str, dict[str, Any] | str]] = ()
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None


Reply = str | FakeReply | Callable[[dict[str, Any]], "str | FakeReply"]


@dataclass
class _Fault:
    remaining: int
    status: int | None  # None: answer normally after the delay
    message: str
    body: Any
    delay: float
    malformed: bool
    endpoint: Endpoint | None


@dataclass(frozen=True)
class _Rule:
    substring: str
    reply: Reply
    anywhere: bool


class FakeOpenAI:
    """The fake server's state and its Starlette `app`. See the module docstring for the rules."""

    def __init__(
        self,
        *,
        default_reply: Reply = DEFAULT_REPLY,
        model: str = "fake-model",
        chunk_chars: int = 4,
        default_dimensions: int = 1024,
        shuffle_index: bool = False,
        vector_count_offset: int = 0,
        embedding_dimensions: int | None = None,
    ) -> None:
        self._settings: dict[str, Any] = {
            "default_reply": default_reply,
            "model": model,
            "chunk_chars": max(1, chunk_chars),
            "default_dimensions": default_dimensions,
            "shuffle_index": shuffle_index,
            "vector_count_offset": vector_count_offset,
            "embedding_dimensions": embedding_dimensions,
        }
        self.default_reply: Reply = default_reply
        self.model = model
        self.chunk_chars = max(1, chunk_chars)
        self.default_dimensions = default_dimensions
        #: return `data[]` in reverse order (with correct `index` fields)
        self.shuffle_index = shuffle_index
        #: add (>0, repeating the last vector) or drop (<0) vectors from every embeddings reply
        self.vector_count_offset = vector_count_offset
        #: when set, vectors have this size whatever the request asks for
        self.embedding_dimensions = embedding_dimensions
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._rules: list[_Rule] = []
        self._op_replies: dict[str, list[Reply]] = {}
        self.ops: list[str] = []  # the `X-ReMe-Op` header of every chat request, in arrival order
        self._faults: list[_Fault] = []
        self._ids = itertools.count(1)
        self._base_url: str | None = None
        # `hold_embeddings`: requests past `_held_after` wait for `_gate` (None: none wait)
        self._gate: threading.Event | None = None
        self._held_after = 0
        self._embedding_requests = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/embeddings", self._embeddings, methods=["POST"]),
            ]
        )

    @contextmanager
    def running(self) -> Iterator[str]:
        """Serve the fake on a free loopback port for the length of the `with` block; yields its OpenAI base URL
        (`http://127.0.0.1:PORT/v1`), which `base_url` also answers meanwhile."""
        with serve_in_thread(self.app) as url:
            self._base_url = f"{url}/v1"
            try:
                yield self._base_url
            finally:
                self._base_url = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL while `running()`; a `RuntimeError` otherwise."""
        if self._base_url is None:
            raise RuntimeError("the fake OpenAI server is not running (serve it with `with fake.running():`)")
        return self._base_url

    # ------------------------------------------------------------------ scripting

    def script(self, *replies: Reply) -> FakeOpenAI:
        """Queue replies; each answers one chat request, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def on_op(self, op: str, *replies: Reply) -> FakeOpenAI:
        """Answer the chat calls the service's op `op` makes (its `X-ReMe-Op` header) with `replies`, in order;
        the last one repeats."""
        with self._lock:
            self._op_replies.setdefault(op, []).extend(replies)
        return self

    def on(self, substring: str, reply: Reply, *, anywhere: bool = False) -> FakeOpenAI:
        """Answer with `reply` whenever the last user message (any message if `anywhere`) contains `substring`."""
        with self._lock:
            self._rules.append(_Rule(substring, reply, anywhere))
        return self

    def fail_next(
        self,
        n: int = 1,
        *,
        status: int = 500,
        message: str | None = None,
        body: Any = None,
        delay: float = 0.0,
        malformed: bool = False,
        endpoint: Endpoint | None = None,
    ) -> FakeOpenAI:
        """Make the next `n` requests (to `endpoint`, or to any endpoint) fail.

        After waiting `delay` seconds the request gets HTTP `status` with `body` (a dict is sent as JSON, a string
        verbatim) or, by default, an OpenAI-style `{"error": {"message", "type", "code"}}`. With `malformed=True`
        the answer is instead an HTTP 200 whose JSON (or SSE data line) is cut short.
        """
        text = message or f"fake provider failure (HTTP {status})"
        with self._lock:
            self._faults.append(_Fault(n, status, text, body, delay, malformed, endpoint))
        return self

    def delay_next(self, n: int = 1, *, seconds: float, endpoint: Endpoint | None = None) -> FakeOpenAI:
        """Make the next `n` requests wait `seconds` before answering normally (to test client timeouts)."""
        with self._lock:
            self._faults.append(_Fault(n, None, "", None, seconds, False, endpoint))
        return self

    def hold_embeddings(self, after: int) -> threading.Event:
        """Embedding requests after the first `after` wait (off the server's loop) until the returned event is set:
        a test sees a long embedding run half done, on a condition instead of a clock."""
        gate = threading.Event()
        with self._lock:
            self._gate, self._held_after, self._embedding_requests = gate, after, 0
        return gate

    def reset(self) -> None:
        """Return to the state right after construction: no queued replies, rules, faults or logged requests, and
        the constructor's settings (so one served instance can be shared by several tests)."""
        with self._lock:
            for name, value in self._settings.items():
                setattr(self, name, value)
            self._queue.clear()
            self._rules.clear()
            self._op_replies.clear()
            self.ops.clear()
            self._faults.clear()
            self.requests.clear()
            if self._gate is not None:
                self._gate.set()  # nothing stays held past its test
            self._gate, self._held_after, self._embedding_requests = None, 0, 0

    def requests_to(self, endpoint: Endpoint) -> list[dict[str, Any]]:
        """The JSON bodies of the requests made to one endpoint."""
        suffix = "/chat/completions" if endpoint == "chat" else "/embeddings"
        return [body for path, body in self.requests if path.endswith(suffix)]

    # ------------------------------------------------------------------ plumbing

    def _take_fault(self, endpoint: Endpoint) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.endpoint in (None, endpoint) and fault.remaining > 0:
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _choose_reply(self, body: dict[str, Any], op: str) -> FakeReply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        texts = [_message_text(m) for m in messages]
        last_user = next((_message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
        with self._lock:
            self.ops.append(op)
            queued = self._op_replies.get(op)
            if self._queue:
                reply = self._queue.popleft()
            elif queued:
                reply = queued.pop(0) if len(queued) > 1 else queued[0]
            else:
                reply = next(
                    (
                        rule.reply
                        for rule in self._rules
                        if (any(rule.substring in t for t in texts) if rule.anywhere else rule.substring in last_user)
                    ),
                    self.default_reply,
                )
        if callable(reply):
            reply = reply(body)
        return FakeReply(content=reply) if isinstance(reply, str) else reply

    async def _read(self, request: Request) -> tuple[dict[str, Any] | None, Response | None]:
        raw = await request.body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        logged = body if isinstance(body, dict) else {"_raw": raw.decode(errors="replace")}
        self.requests.append((request.url.path, logged))
        if not isinstance(body, dict):
            return None, _error_response(400, "request body is not a JSON object")
        return body, None

    async def _apply_fault(self, request: Request, endpoint: Endpoint, *, stream: bool) -> Response | None:
        fault = self._take_fault(endpoint)
        if fault is None:
            return None
        await _sleep_unless_disconnected(request, fault.delay)
        if fault.malformed:
            if stream:
                return StreamingResponse(_broken_stream(), media_type="text/event-stream")
            return Response('{"id": "broken", "data": [', media_type="application/json")
        if fault.status is None:
            return None
        if fault.body is not None:
            if isinstance(fault.body, str):
                return Response(fault.body, status_code=fault.status, media_type="text/plain")
            return JSONResponse(fault.body, status_code=fault.status)
        return _error_response(fault.status, fault.message)

    # ------------------------------------------------------------------ chat

    async def _chat(self, request: Request) -> Response:
        body, error = await self._read(request)
        if body is None:
            return error or _error_response(400, "bad request")
        stream = bool(body.get("stream"))
        failure = await self._apply_fault(request, "chat", stream=stream)
        if failure is not None:
            return failure
        if not body.get("messages"):
            return _error_response(400, "'messages' is required")
        reply = self._choose_reply(body, request.headers.get("x-reme-op", ""))
        model = str(body.get("model") or self.model)
        completion_id = f"chatcmpl-fake-{next(self._ids)}"
        usage = _usage(body, reply)
        if not stream:
            completion = self._completion(reply, completion_id=completion_id, model=model, usage=usage)
            return JSONResponse(completion.model_dump(mode="json", exclude_none=True))
        options = body.get("stream_options") or {}
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        chunks = self._chunks(reply, completion_id=completion_id, model=model, usage=usage if include_usage else None)
        return StreamingResponse(_sse(chunks), media_type="text/event-stream")

    def _completion(
        self, reply: FakeReply, *, completion_id: str, model: str, usage: CompletionUsage
    ) -> ChatCompletion:
        tool_calls: list[ChatCompletionMessageToolCallUnion] = [
            ChatCompletionMessageFunctionToolCall(
                id=f"call_{completion_id[-6:]}_{i}",
                type="function",
                function=Function(name=name, arguments=_arguments(args)),
            )
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        extra: dict[str, Any] = {"reasoning_content": reply.reasoning} if reply.reasoning else {}
        message = ChatCompletionMessage(
            role="assistant", content=reply.content or None, tool_calls=tool_calls or None, **extra
        )
        return ChatCompletion(
            id=completion_id,
            object="chat.completion",
            created=int(time.time()),
            model=model,
            choices=[Choice(index=0, finish_reason=_finish_reason(reply), message=message)],
            usage=usage,
        )

    def _chunks(
        self, reply: FakeReply, *, completion_id: str, model: str, usage: CompletionUsage | None
    ) -> list[ChatCompletionChunk]:
        created = int(time.time())

        def chunk(delta: ChoiceDelta, finish_reason: Any = None) -> ChatCompletionChunk:
            choice = ChunkChoice(index=0, delta=delta, finish_reason=finish_reason)
            return ChatCompletionChunk(
                id=completion_id, object="chat.completion.chunk", created=created, model=model, choices=[choice]
            )

        out = [chunk(ChoiceDelta(role="assistant", content=""))]
        out += [
            chunk(ChoiceDelta.model_validate({"reasoning_content": part}))
            for part in _pieces(reply.reasoning, self.chunk_chars)
        ]
        out += [chunk(ChoiceDelta(content=part)) for part in _pieces(reply.content, self.chunk_chars)]
        for i, (name, args) in enumerate(reply.tool_calls):
            head = ChoiceDeltaToolCall(
                index=i,
                id=f"call_{completion_id[-6:]}_{i}",
                type="function",
                function=ChoiceDeltaToolCallFunction(name=name, arguments=""),
            )
            out.append(chunk(ChoiceDelta(tool_calls=[head])))
            for part in _pieces(_arguments(args), self.chunk_chars):
                fragment = ChoiceDeltaToolCall(index=i, function=ChoiceDeltaToolCallFunction(arguments=part))
                out.append(chunk(ChoiceDelta(tool_calls=[fragment])))
        out.append(chunk(ChoiceDelta(), _finish_reason(reply)))
        if usage is not None:
            out.append(
                ChatCompletionChunk(
                    id=completion_id,
                    object="chat.completion.chunk",
                    created=created,
                    model=model,
                    choices=[],
                    usage=usage,
                )
            )
        return out

    # ------------------------------------------------------------------ embeddings

    async def _embeddings(self, request: Request) -> Response:
        body, error = await self._read(request)
        if body is None:
            return error or _error_response(400, "bad request")
        failure = await self._apply_fault(request, "embeddings", stream=False)
        if failure is not None:
            return failure
        with self._lock:
            self._embedding_requests += 1
            gate = self._gate if self._embedding_requests > self._held_after else None
        if gate is not None:
            await anyio.to_thread.run_sync(gate.wait)
        raw_input = body.get("input")
        if raw_input is None or raw_input == [] or raw_input == "":
            return _error_response(400, "'input' must be a non-empty string or list")
        items = raw_input if isinstance(raw_input, list) else [raw_input]
        texts = [item if isinstance(item, str) else json.dumps(item) for item in items]
        dims = self.embedding_dimensions or int(body.get("dimensions") or self.default_dimensions)
        matrix = HashEmbeddingClient(dimensions=max(dims, 8)).embed_sync(texts)[:, :dims]
        rows = list(matrix)
        if self.vector_count_offset < 0:
            rows = rows[: max(0, len(rows) + self.vector_count_offset)]
        elif rows:
            rows += [rows[-1]] * self.vector_count_offset
        data = [Embedding(index=i, object="embedding", embedding=row.tolist()) for i, row in enumerate(rows)]
        if self.shuffle_index:
            data.reverse()
        tokens = sum(len(t.split()) for t in texts)
        response = CreateEmbeddingResponse(
            object="list",
            model=str(body.get("model") or self.model),
            data=data,
            usage=EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens),
        )
        payload = response.model_dump(mode="json", exclude_none=True)
        if body.get("encoding_format") == "base64":
            # The typed model only knows float lists; the wire format also allows little-endian float32 base64.
            for item in payload["data"]:
                packed = np.asarray(item["embedding"], dtype="<f4").tobytes()
                item["embedding"] = base64.b64encode(packed).decode()
        return JSONResponse(payload)


# ---------------------------------------------------------------------- helpers


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


def _arguments(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _finish_reason(reply: FakeReply) -> Literal["stop", "length", "tool_calls", "content_filter"]:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(body: dict[str, Any], reply: FakeReply) -> CompletionUsage:
    prompt = sum(len(_message_text(m).split()) for m in body.get("messages") or [] if isinstance(m, dict))
    completion = len(reply.content.split()) + len(reply.reasoning.split()) + len(reply.tool_calls)
    return CompletionUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def _error_response(status: int, message: str) -> JSONResponse:
    kind, code = _ERROR_KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error", str(status)))
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


async def _sse(chunks: list[ChatCompletionChunk]) -> AsyncIterator[str]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk.model_dump(mode='json', exclude_none=True), ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"


async def _broken_stream() -> AsyncIterator[str]:
    yield 'data: {"id": "chatcmpl-broken", "choices": [{"delta": {"content": "cut\n\n'
    yield "data: [DONE]\n\n"


async def _sleep_unless_disconnected(request: Request, seconds: float) -> None:
    """Wait `seconds`, returning early once the client has gone (so server shutdown never waits on it)."""
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        if await request.is_disconnected():
            return
        await anyio.sleep(min(0.02, remaining))
