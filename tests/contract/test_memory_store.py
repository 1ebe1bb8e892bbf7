"""The memory backend against the store contract."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reme_service.stores.memory import MemoryVectorStore
from reme_service.stores.params import AnnParams, MemoryStoreParams
from tests.contract.store_contract import CountingEmbedder, StoreContract

pytestmark = pytest.mark.anyio


class TestMemoryStore(StoreContract):
    MID_WRITE = ("_log_upsert", True)  # the (empty) log hook has run; the nodes are not in RAM yet

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder) -> AsyncIterator[MemoryVectorStore]:
        store = MemoryVectorStore(embedder=embedder)
        await store.start()
        yield store
        await store.close()


class TestMemoryStoreWithIndex(StoreContract):
    """The whole contract again with the approximate index on for every workspace (`ann.min_rows` 1)."""

    MID_WRITE = ("_log_upsert", True)

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder) -> AsyncIterator[MemoryVectorStore]:
        store = MemoryVectorStore(MemoryStoreParams(ann=AnnParams(min_rows=1)), embedder=embedder)
        await store.start()
        yield store
        await store.close()
