"""Ask an LLM for output in a contract (JSON, a line format) and re-ask when the reply does not follow it.

Transport failures are retried by the client itself; this layer retries replies that arrived but cannot be
parsed. After `attempts` unusable replies it raises `LLMReplyError` (an `LLMError`, 502) quoting the last
one — malformed output is never silently accepted and never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reme_service.errors import LLMReplyError
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message

T = TypeVar("T")


async def chat_parsed(
    llm: LLMClient,
    messages: Sequence[Message],
    parse: Callable[[str], T | None],
    *,
    attempts: int = 3,
    what: str = "reply",
    **settings: Any,
) -> T:
    """Call the LLM until `parse(reply_text)` returns something other than None (at most `attempts` calls).

    Raises `LLMReplyError` when no reply parses, and lets the client's own `LLMError` (provider down) through.
    """
    last = ""
    for _ in range(max(1, attempts)):
        reply = await llm.chat(messages, **settings)
        last = reply.text
        parsed = parse(last)
        if parsed is not None:
            return parsed
    raise LLMReplyError(
        f"the LLM's {what} did not follow the expected format after {attempts} attempts; last reply: {last[:300]!r}",
        details={"attempts": attempts},
    )
