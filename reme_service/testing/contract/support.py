"""What every part of the store contract shares: the corpus, node and vector makers, the counting embedder, the
hold that pauses a write part-way, and `ContractBase`, the base of every capability's test class.

A store's test class provides a `store` fixture: the store under test, started, built with the `embedder` fixture
(a `CountingEmbedder`, the hash embedder at `DIM` dimensions), and closed after the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from reme_service.errors import EmbeddingError
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode

DIM = 64
WS = "contract-ws"

CORPUS = [
    ("deploy", "deploy the service with docker compose on a single host", "task", 3),
    ("retry", "retry failed http requests with exponential backoff and jitter", "task", 7),
    ("yaml", "parse yaml configuration files safely without executing tags", "task", 1),
    ("coffee", "the user prefers black coffee in the morning", "personal", 12),
    ("cat", "the user has a cat called Miso who likes tuna", "personal", 5),
    ("sql", "write parameterised sql queries to avoid injection", "tool", 9),
]


class CountingEmbedder(HashEmbeddingClient):
    """The hash embedder, counting its calls; set `fail` to make it raise like a provider outage."""

    def __init__(self, *, dimensions: int = DIM, model_name: str = "hash-bow") -> None:
        super().__init__(dimensions=dimensions, model_name=model_name)
        self.calls = 0
        self.texts = 0
        self.fail = False

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        if self.fail:
            raise EmbeddingError("embedding provider is down (test)")
        return await super().embed(texts)


class HeldCall:
    """Holds the first call of one method of one object part-way until `release` is set; `reached` is set when
    it is held. `after=True` holds once the real call has returned, `after=False` before it starts. Later calls
    pass straight through. This lets a test act while a write is known to be in progress, without sleeping."""

    def __init__(self, owner: object, name: str, *, after: bool) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        original: Callable[..., Awaitable[Any]] = getattr(owner, name)

        async def held(*args: Any, **kwargs: Any) -> Any:
            if self.reached.is_set():
                return await original(*args, **kwargs)
            result = await original(*args, **kwargs) if after else None
            self.reached.set()
            await self.release.wait()
            return result if after else await original(*args, **kwargs)

        setattr(owner, name, held)


def make_node(uid: str, content: str = "", *, vector: Any = None, **metadata: Any) -> VectorNode:
    return VectorNode(unique_id=uid, content=content or f"text of {uid}", vector=vector, metadata=metadata)


def unit_vector(seed: int, dim: int = DIM) -> NDArray[np.float32]:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def corpus_nodes() -> list[VectorNode]:
    return [
        make_node(uid, text, memory_type=kind, metadata={"freq": freq}, tags=["a", uid])
        for uid, text, kind, freq in CORPUS
    ]


def ids(nodes: Sequence[VectorNode]) -> list[str]:
    return [node.unique_id for node in nodes]


def hit_ids(hits: Sequence[SearchHit]) -> list[str]:
    return [hit.node.unique_id for hit in hits]


class ContractBase:
    """The fixtures and settings every capability's tests use. A subclass provides the `store` fixture."""

    pytestmark = [pytest.mark.anyio]

    #: A method of the store that an upsert's commit awaits, and whether to hold the commit just after that call
    #: returns (True) or just before it starts (False): a point where the write has begun but not finished. The
    #: default fits a store built on `TemplateVectorStore` (`stores/base.py`), whose upserts commit in `_write`.
    MID_WRITE: ClassVar[tuple[str, bool]] = ("_write", False)

    @pytest.fixture
    def embedder(self) -> CountingEmbedder:
        return CountingEmbedder()
