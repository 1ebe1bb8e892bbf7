"""A deterministic hashed bag-of-words embedder for tests and benchmarks (no model, no network).

Each lower-cased word token adds `1 + log(tf)` to one signed bucket chosen by a BLAKE2 hash; rows are
L2-normalised. Texts that share words are close; the same text always gives the same vector.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from reme_service.providers.embedding.base import EmbeddingClient, normalise_rows

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=200_000)
def _bucket(token: str, dimensions: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
    return digest % dimensions, (1.0 if (digest >> 63) & 1 else -1.0)


class HashEmbeddingClient(EmbeddingClient):
    backend = "hash"

    def __init__(self, *, dimensions: int = 384, model_name: str = "hash-bow") -> None:
        if dimensions < 8:
            raise ValueError("hash embedder needs at least 8 dimensions")
        self._dimensions = dimensions
        self.model_name = model_name

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = Counter(_TOKEN_RE.findall(text.lower()))
            for token, tf in counts.items():
                index, sign = _bucket(token, self._dimensions)
                out[row, index] += sign * (1.0 + np.log(tf))
        return normalise_rows(out)

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        # Cheap enough (~5 µs per short text) to run inline for small batches; large ones go to a thread.
        if len(texts) <= 64:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, list(texts))
