"""An in-process LLM double for op tests: replies are scripted per op, never chosen by matching prompt text.

The flow runner records which op is running (`reme_service.flow.current_op`, exact under `|` because each
branch runs in its own task), so a test says *which step* answers what:

```python
llm = ScriptedLLM().on("SuccessExtractionOp", fenced([item(...)])).on("MemoryValidationOp", verdict(True))
async with ReMeApp(..., llm_clients={"default": llm}) as app: ...
assert llm.calls_of("MemoryValidationOp")[0].prompt  # what the op sent, to assert on its data
```

A reply is a string, a `Message` (e.g. with tool calls), an exception to raise (e.g. `LLMError(...)` for a
provider failure), or a function of the messages returning one of those. Replies queued for an op are used in
order; the last one repeats. An op that calls with nothing scripted fails the test with a clear message.
It implements the real `LLMClient` contract, so the ops under test run unchanged; the transport (the OpenAI
client, retries, streaming) has its own tests against the protocol server in `openai_server.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reme_service.flow.current_op import current_op
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message, Role

Reply = str | Message | BaseException | Callable[[Sequence[Message]], "str | Message | BaseException"]


@dataclass(frozen=True)
class Call:
    """One chat call: the op that made it and what it sent."""

    op: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...]

    @property
    def prompt(self) -> str:
        """The text of the last message (the rendered prompt, for most ops)."""
        return self.messages[-1].text if self.messages else ""


class ScriptedLLM(LLMClient):
    backend = "scripted"
    model_name = "scripted"

    def __init__(self) -> None:
        self._replies: dict[str, list[Reply]] = {}
        self.calls: list[Call] = []

    def on(self, op: str, *replies: Reply) -> ScriptedLLM:
        """Queue replies for the op named `op` (its class name, e.g. `"RerankMemoryOp"`)."""
        if not replies:
            raise ValueError("give at least one reply")
        self._replies.setdefault(op, []).extend(replies)
        return self

    def calls_of(self, op: str) -> list[Call]:
        return [call for call in self.calls if call.op == op]

    def reset(self) -> None:
        self._replies.clear()
        self.calls.clear()

    async def chat(
        self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None, **settings: Any
    ) -> Message:
        op = current_op.get() or "<outside any op>"
        self.calls.append(Call(op, tuple(messages), tuple(tools or ())))
        queue = self._replies.get(op)
        if not queue:
            raise AssertionError(f"ScriptedLLM: {op} called the LLM but the test scripted no reply for it")
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(messages)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Message):
            return reply
        return Message(role=Role.ASSISTANT, content=reply)
