"""Messages in and out of the working-memory flows: request dicts → `Message`, `Message` → ReMe's simple dicts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from reme_service.schema.messages import Message


def parse_messages(raw: Iterable[Any]) -> list[Message]:
    """The request's `messages` (already validated by the request model, dumped to dicts) as `Message`s."""
    return [item if isinstance(item, Message) else Message.model_validate(item) for item in raw]


def simple_dict(message: Message) -> dict[str, Any]:
    """ReMe 0.2's answer shape: the OpenAI form (`role`, `content`, `tool_calls`, `tool_call_id`, `name` when
    present) plus `reasoning_content`. Content blocks are kept as blocks."""
    out = message.to_openai()
    out["content"] = message.content if message.content is not None else ""
    out["reasoning_content"] = message.reasoning_content
    return out


def simple_dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [simple_dict(m) for m in messages]
