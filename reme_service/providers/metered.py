"""`MeteredLLM` and `MeteredEmbedder`: an LLM or embedding client whose calls are counted and timed.

The app wraps every client it builds (`app.py`, with the client's `metrics.Meter`); the wrapper answers the whole
contract (`chat` or `embed`, `start`, `close`, `health` and the descriptive attributes) by calling through to the
client it holds, `chat` and `embed` measured (`observe/metered.measured`). A client built directly (tests, scripts)
is simply not measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reme_service.observe.metered import measured
from reme_service.observe.metrics import Meter
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message


class MeteredLLM(LLMClient):
    def __init__(self, inner: LLMClient, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter
        self.backend = inner.backend
        self.model_name = inner.model_name
        self.available = inner.available

    async def chat(
        self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None, **settings: Any
    ) -> Message:
        return await measured(self.meter, "chat", self.inner.chat(messages, tools=tools, **settings))

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def health(self) -> dict[str, Any]:
        return await self.inner.health()


class MeteredEmbedder(EmbeddingClient):
    def __init__(self, inner: EmbeddingClient, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter
        self.backend = inner.backend
        self.model_name = inner.model_name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return await measured(self.meter, "embed", self.inner.embed(texts))

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def health(self) -> dict[str, Any]:
        return await self.inner.health()
