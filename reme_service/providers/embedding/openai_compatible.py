"""Embeddings through any OpenAI-compatible `/embeddings` endpoint (OpenAI, DashScope `text-embedding-v4`, vLLM, ...).

Texts are split into batches of `max_batch_size` (DashScope accepts at most 10 per request), and the batches are
sent concurrently, at most `max_concurrency` at a time. Each reply is put back in input order by its `index`
fields and checked: the number of vectors and every vector's size must match, otherwise `EmbeddingError`
(not retried: a misconfigured model does not fix itself). Transport failures are retried like the LLM's
(see `reme_service.providers.retry.call_with_retries`).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from reme_service.concurrency import run_all
from reme_service.errors import EmbeddingError
from reme_service.providers.embedding.base import EmbeddingClient, normalise_rows
from reme_service.providers.retry import OpenAIRetryingClient


class OpenAICompatibleEmbedding(OpenAIRetryingClient, EmbeddingClient):
    """`embed` returns L2-normalised float32 rows in input order; `embed([])` makes no request.

    An injected `http_client` belongs to the caller and is not closed by `close()`.
    """

    backend = "openai_compatible"

    def __init__(
        self,
        *,
        model_name: str = "text-embedding-v4",
        dimensions: int = 1024,
        api_key: str | None = None,
        base_url: str | None = None,
        max_batch_size: int = 10,
        max_concurrency: int = 4,
        max_retries: int = 3,
        timeout: float = 60.0,
        backoff: float = 0.5,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.model_name = model_name
        self._dimensions = dimensions
        self.max_batch_size = max_batch_size
        self.max_concurrency = max_concurrency
        self._init_openai_client(api_key, base_url, max_retries, timeout, backoff, http_client)

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def health(self) -> dict[str, Any]:
        return {**await super().health(), **await self.reachability()}

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        batches = [texts[i : i + self.max_batch_size] for i in range(0, len(texts), self.max_batch_size)]
        # one failed batch (or our cancellation) cancels the others before the error is reported
        parts = await run_all((self._embed_batch(batch) for batch in batches), limit=self.max_concurrency)
        return normalise_rows(np.concatenate(parts, axis=0))

    async def _embed_batch(self, batch: list[str]) -> NDArray[np.float32]:
        return await self._with_retries(
            lambda: self._request(batch),
            error_cls=EmbeddingError,
            what=f"embedding call to model '{self.model_name}'",
            model=self.model_name,
        )

    async def _request(self, batch: list[str]) -> NDArray[np.float32]:
        response = await self._client.embeddings.create(
            model=self.model_name,
            input=batch,
            dimensions=self._dimensions,
            encoding_format="float",
        )
        return self._check(response.data, expected=len(batch))

    def _check(self, data: Sequence[Any], *, expected: int) -> NDArray[np.float32]:
        details: dict[str, Any] = {"backend": self.backend, "model": self.model_name}
        if len(data) != expected:
            raise EmbeddingError(
                f"embedding model '{self.model_name}' returned the wrong number of vectors: "
                f"expected {expected}, got {len(data)}",
                details={**details, "expected": expected, "got": len(data)},
            )
        indexes = [getattr(item, "index", None) for item in data]
        int_indexes = [i for i in indexes if isinstance(i, int)]
        if len(int_indexes) == len(indexes):
            if sorted(int_indexes) != list(range(expected)):
                raise EmbeddingError(
                    f"embedding model '{self.model_name}' returned indexes {indexes}, expected 0..{expected - 1}",
                    details=details,
                )
            data = sorted(data, key=lambda item: item.index)
        rows = [_vector(getattr(item, "embedding", None)) for item in data]
        for row in rows:
            if row.shape != (self._dimensions,):
                got = row.shape[0] if row.ndim == 1 else row.shape
                raise EmbeddingError(
                    f"embedding model '{self.model_name}' returned vectors of the wrong dimension: "
                    f"expected {self._dimensions}, got {got}",
                    details={**details, "expected": self._dimensions, "got": got},
                )
        return np.stack(rows).astype(np.float32, copy=False)


def _vector(value: Any) -> NDArray[np.float32]:
    """One embedding as float32: a list of floats, or the base64 of little-endian float32 some servers send."""
    if isinstance(value, str):
        try:
            return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
        except ValueError as exc:
            raise EmbeddingError(f"an embedding is neither a list of floats nor base64: {exc}") from exc
    if value is None:
        raise EmbeddingError("an item of the embedding reply has no 'embedding'")
    return np.asarray(value, dtype=np.float32)
