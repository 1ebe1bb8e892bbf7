"""The LLM-client contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from reme_service.schema.messages import Message


class LLMClient(ABC):
    """Chat completion. `chat` returns one aggregated assistant message (content, reasoning_content,
    tool_calls) or, after the client's retries, raises `LLMError` (a 502). It never returns an empty message
    in place of an error: a provider that keeps answering with nothing raises `LLMReplyError`, the `LLMError`
    subclass for "the LLM answered, but not usably", while an unreachable or failing provider raises plain
    `LLMError`. `available` is False for the `none` backend: ops then take their no-LLM path.
    """

    backend: str = "abstract"
    model_name: str = ""
    available: bool = True

    @abstractmethod
    async def chat(
        self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None, **settings: Any
    ) -> Message: ...

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open clients."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    async def health(self) -> dict[str, Any]:
        return {"status": "ok" if self.available else "disabled", "backend": self.backend, "model": self.model_name}
