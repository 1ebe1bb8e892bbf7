"""The `none` LLM backend: no model is configured, so ops take their no-LLM path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reme_service.errors import LLMError
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message


class NoLLM(LLMClient):
    """Stands in when no LLM is configured: `available` is False and `chat` always raises `LLMError`."""

    backend = "none"
    model_name = ""
    available = False

    async def chat(
        self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None, **settings: Any
    ) -> Message:
        raise LLMError("no LLM is configured: set FLOW_LLM_API_KEY / FLOW_LLM_BASE_URL or llm.default.backend")
