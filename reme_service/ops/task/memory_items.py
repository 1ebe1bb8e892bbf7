"""Parse the experience items task-summary prompts ask for, and turn them into `TaskMemory` objects.

Item contract (every extraction prompt): a JSON list of objects, each with a non-empty `when_to_use` (ReMe's
older name `condition` is accepted) and a non-empty `experience` (or `memory`, for the simple summary), plus
optional `tags`, `confidence`, `step_type`, `tools_used`. A reply that is not such a list — or holds an item
that breaks the contract — is unusable as a whole and is re-asked (`chat_parsed`), never half-accepted. An
empty list is a valid answer ("nothing worth keeping").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reme_service.ops.common.context import ServiceContext
from reme_service.providers.llm.json_extract import extract_json
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Message, Role

Item = dict[str, Any]


def _text(item: Item, *names: str) -> str:
    for name in names:
        value = item.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def item_parser(body_keys: tuple[str, ...] = ("experience",)) -> Callable[[str], list[Item] | None]:
    """A parser for `chat_parsed`: the reply's items, normalised to `when_to_use` + `experience`, or None."""

    def parse(reply: str) -> list[Item] | None:
        data = extract_json(reply)
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) == 1:
                data = lists[0]
            elif _text(data, "when_to_use", "condition") and _text(data, *body_keys):
                data = [data]
        if not isinstance(data, list):
            return None
        items: list[Item] = []
        for raw in data:
            if not isinstance(raw, dict):
                return None
            when, body = _text(raw, "when_to_use", "condition"), _text(raw, *body_keys)
            if not when or not body:
                return None
            items.append({**raw, "when_to_use": when, "experience": body})
        return items

    return parse


async def ask_items(
    ctx: ServiceContext, llm_name: str, prompt: str, *, what: str, body_keys: tuple[str, ...] = ("experience",)
) -> list[Item]:
    """One LLM call (re-asked on a malformed reply) that returns experience items."""
    llm = ctx.services.llm(llm_name)
    return await chat_parsed(llm, [Message(role=Role.USER, content=prompt)], item_parser(body_keys), what=what)


def confidence_of(item: Item) -> float | None:
    value = item.get("confidence")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0.0, min(1.0, float(value)))
    return None


def to_memory(ctx: ServiceContext, item: Item, *, author: str, extra: Mapping[str, Any]) -> TaskMemory:
    """A task memory from one parsed item; the item itself is kept in the memory's metadata (as ReMe does)."""
    metadata = {**item, **extra}
    return TaskMemory(
        workspace_id=ctx.workspace_id,
        when_to_use=item["when_to_use"],
        content=item["experience"],
        author=author,
        metadata=metadata,
    )
