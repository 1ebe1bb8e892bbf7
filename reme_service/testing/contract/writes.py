"""Upsert by id and get: replacement in place, last duplicate wins, vectors given are kept, the others embedded in one
batch, unit length, the workspace's dimension, copies out.
"""

from __future__ import annotations

import numpy as np
import pytest

from reme_service.errors import DimensionMismatchError
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    CORPUS,
    DIM,
    WS,
    ContractBase,
    CountingEmbedder,
    corpus_nodes,
    ids,
    make_node,
    unit_vector,
)


class UpsertGetContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

    async def test_upsert_then_get_in_the_order_asked(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        got = await store.get(WS, ["sql", "missing", "deploy"])
        assert ids(got) == ["sql", "deploy"]
        assert got[1].content == CORPUS[0][1]
        assert got[1].metadata == {"memory_type": "task", "metadata": {"freq": 3}, "tags": ["a", "deploy"]}
        assert got[1].workspace_id == WS
        assert await store.get(WS, []) == []

    async def test_upsert_replaces_by_id_and_keeps_the_position(self, store: VectorStore) -> None:
        await store.upsert(WS, [make_node("a", "alpha"), make_node("b", "beta"), make_node("c", "gamma")])
        assert await store.upsert(WS, [make_node("b", "new beta", version=2)]) == 1
        nodes = await store.list_nodes(WS)
        assert ids(nodes) == ["a", "b", "c"]
        assert nodes[1].content == "new beta" and nodes[1].metadata == {"version": 2}
        hits = await store.search(WS, "new beta", top_k=1)
        assert hits[0].node.unique_id == "b" and hits[0].score > 0.99

    async def test_duplicate_ids_in_one_batch_last_wins(self, store: VectorStore) -> None:
        await store.upsert(WS, [make_node("a", "first"), make_node("b"), make_node("a", "second")])
        nodes = await store.list_nodes(WS)
        assert ids(nodes) == ["a", "b"]
        assert nodes[0].content == "second"

    async def test_given_vectors_are_stored_not_re_embedded(
        self, store: VectorStore, embedder: CountingEmbedder
    ) -> None:
        vector = unit_vector(1)
        await store.upsert(WS, [make_node("v", "some text", vector=vector)])
        assert embedder.calls == 0
        (got,) = await store.get(WS, ["v"])
        assert got.vector is not None and got.vector.dtype == np.float32
        np.testing.assert_array_equal(got.vector, vector)
        (listed,) = await store.list_nodes(WS, with_vectors=True)
        np.testing.assert_array_equal(listed.vector, vector)

    async def test_nodes_without_vectors_are_embedded_in_one_batch(
        self, store: VectorStore, embedder: CountingEmbedder
    ) -> None:
        await store.upsert(WS, corpus_nodes() + [make_node("given", vector=unit_vector(2))])
        assert (embedder.calls, embedder.texts) == (1, len(CORPUS))
        (got,) = await store.get(WS, ["deploy"])
        assert got.vector is not None
        expected = (await HashEmbeddingClient(dimensions=DIM).embed([CORPUS[0][1]]))[0]
        np.testing.assert_allclose(got.vector, expected, atol=1e-6)

    async def test_vectors_are_normalised_on_insert(self, store: VectorStore) -> None:
        await store.upsert(WS, [make_node("long", vector=unit_vector(3) * 7.5)])
        (got,) = await store.get(WS, ["long"])
        assert got.vector is not None
        assert abs(float(np.linalg.norm(got.vector)) - 1.0) < 1e-5
        hits = await store.search_vector(WS, unit_vector(3) * 0.2, top_k=1)
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    async def test_dimension_mismatch(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        with pytest.raises(DimensionMismatchError) as caught:
            await store.upsert(WS, [make_node("short", vector=unit_vector(1, dim=32))])
        assert "32" in caught.value.message and "64" in caught.value.message
        assert caught.value.status == 400
        with pytest.raises(DimensionMismatchError):
            await store.search_vector(WS, unit_vector(1, dim=32), top_k=3)
        # the first vector fixes a new workspace's dimension
        await store.upsert("w32", [make_node("a", vector=unit_vector(1, dim=32))])
        with pytest.raises(DimensionMismatchError, match="64"):
            await store.upsert("w32", [make_node("b", "embedded at 64")])
        assert ids(await store.list_nodes("w32")) == ["a"]
        assert len(await store.list_nodes(WS)) == len(CORPUS)

    async def test_returned_nodes_are_copies(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        (got,) = await store.get(WS, ["deploy"])
        got.metadata["metadata"]["freq"] = 999
        got.content = "changed"
        listed = await store.list_nodes(WS, filter={"unique_id": "deploy"})
        listed[0].metadata["memory_type"] = "changed"
        (again,) = await store.get(WS, ["deploy"])
        assert again.content == CORPUS[0][1]
        assert again.metadata["metadata"]["freq"] == 3 and again.metadata["memory_type"] == "task"
