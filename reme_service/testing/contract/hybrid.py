"""Hybrid search given the query's vector: no embedding call, the same answer as embedding it."""

from __future__ import annotations

import pytest

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    CORPUS,
    DIM,
    WS,
    ContractBase,
    CountingEmbedder,
    corpus_nodes,
    hit_ids,
)


class HybridContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

    async def test_hybrid_search_on_a_query_vector_given_embeds_nothing(
        self, store: VectorStore, embedder: CountingEmbedder
    ) -> None:
        await store.upsert(WS, corpus_nodes())
        query = "retry failed requests with backoff"
        embedded, cat = await HashEmbeddingClient(dimensions=DIM).embed([query, CORPUS[4][1]])
        calls = embedder.calls
        given = await store.search_hybrid(WS, query, top_k=3, vector=embedded)
        assert embedder.calls == calls  # the vector given is the query's: no embedding call
        own = await store.search_hybrid(WS, query, top_k=3)
        assert embedder.calls == calls + 1
        assert hit_ids(given) == hit_ids(own) and hit_ids(given)[0] == "retry"
        assert [h.score for h in given] == pytest.approx([h.score for h in own], abs=1e-5)
        # the vector is what is searched with: words that match nothing, the vector of another memory's text
        assert hit_ids(await store.search_hybrid(WS, "zzqx wvuy", top_k=1, vector=cat)) == ["cat"]
        filtered = await store.search_hybrid(WS, query, top_k=3, vector=cat, filter={"metadata.memory_type": "task"})
        assert filtered and {hit.node.metadata["memory_type"] for hit in filtered} == {"task"}
        assert await store.search_hybrid("nowhere", query, top_k=2, vector=embedded) == []
        assert embedder.calls == calls + 1
