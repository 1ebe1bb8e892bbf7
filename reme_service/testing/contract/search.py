"""Vector search: the exact text first, scores `max(cos, 0)` best first, `top_k`, exact under filters."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from reme_service.stores.base import Filter, VectorStore
from reme_service.testing.contract.support import (
    CORPUS,
    DIM,
    WS,
    ContractBase,
    corpus_nodes,
    make_node,
    unit_vector,
)


class SearchContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

    async def test_search_puts_the_exact_text_first(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        for uid, text, _, _ in CORPUS:
            hits = await store.search(WS, text, top_k=3)
            assert hits[0].node.unique_id == uid
            assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    async def test_search_scores_are_ordered_in_unit_range_and_top_k_honoured(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        await store.upsert(WS, [make_node(f"r{i}", vector=unit_vector(100 + i)) for i in range(40)])
        for top_k in (1, 3, 10, 46, 100):
            hits = await store.search_vector(WS, unit_vector(7), top_k=top_k)
            assert len(hits) == min(top_k, 46)
            scores = [hit.score for hit in hits]
            assert scores == sorted(scores, reverse=True)
            assert all(0.0 <= score <= 1.0 for score in scores)
            assert all(hit.node.vector is None for hit in hits)
        opposite = await store.search_vector(WS, -unit_vector(100), top_k=46)
        assert opposite[-1].node.unique_id == "r0" and opposite[-1].score == 0.0
        assert await store.search_vector(WS, unit_vector(7), top_k=0) == []

    async def test_filtered_search_equals_brute_force(self, store: VectorStore) -> None:
        count = 3_000
        vectors = np.random.default_rng(7).standard_normal((count, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        nodes = [make_node(f"n{i}", vector=vectors[i], group=i % 500, half=i % 2) for i in range(count)]
        await store.upsert(WS, nodes)
        cases: list[tuple[Filter, Callable[[int], bool]]] = [
            ({"metadata.half": 0}, lambda i: i % 2 == 0),  # broad: found among the best rows
            ({"metadata.group": 7}, lambda i: i % 500 == 7),  # selective: 6 rows, fewer than top_k
            ({"metadata.group": {"lt": 30}, "metadata.half": 1}, lambda i: i % 500 < 30 and i % 2 == 1),
        ]
        for seed, (filter, keep) in enumerate(cases):
            query = unit_vector(1_000 + seed)
            scores = vectors @ query
            expected = sorted((i for i in range(count) if keep(i)), key=lambda i: -scores[i])[:10]
            hits = await store.search_vector(WS, query, top_k=10, filter=filter)
            assert [hit.node.unique_id for hit in hits] == [f"n{i}" for i in expected]
            for hit, i in zip(hits, expected, strict=True):
                assert hit.score == pytest.approx(max(float(scores[i]), 0.0), abs=1e-5)
