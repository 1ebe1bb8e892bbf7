"""The Elasticsearch backend against the store contract, plus its own behaviour (hybrid search, listing past
10,000, aliases swapped atomically, foreign dimensions, an unreachable cluster).

Which Elasticsearch: a real cluster when `REME_TEST_ES_URL` is set (e.g. http://127.0.0.1:9200); otherwise the
Elasticsearch-protocol test server of `tests/fakes/es_server.py` on loopback. `test_which_elasticsearch` says which
(it is skipped, with the reason, when the test server was used).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest

from reme_service.errors import DimensionMismatchError, InvalidRequestError, PayloadTooLargeError, StoreError
from reme_service.ops.vector_store.reembed import reembed_workspace
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.es.store import ElasticsearchVectorStore
from reme_service.stores.names import es_lock_index_name
from reme_service.stores.params import ElasticsearchStoreParams
from reme_service.stores.remote_filter import MAX_RECORD_LEAVES
from reme_service.stores.spaces import EmbeddingSpaceConflictError, space_of
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import (
    CORPUS,
    DIM,
    WS,
    CountingEmbedder,
    corpus_nodes,
    ids,
    make_node,
    unit_vector,
)
from reme_service.testing.serve import serve_in_thread
from tests.contract.test_chroma_store import RemoteStoreChecks
from tests.fakes.chroma_server import free_port
from tests.fakes.es_server import FakeElasticsearch, serve_at

pytestmark = pytest.mark.anyio

REAL_URL = os.environ.get("REME_TEST_ES_URL", "").strip()


@pytest.fixture(scope="module")
def es_url() -> Iterator[str]:
    if REAL_URL:
        yield REAL_URL
        return
    with serve_in_thread(FakeElasticsearch().app) as url:
        yield url


async def _drop_all(store: ElasticsearchVectorStore) -> None:
    for workspace in await store.list_workspaces():
        await store.delete_workspace(workspace)
    await store.es.options(ignore_status=404).indices.delete(index=es_lock_index_name(store.prefix))


def make_store(embedder: CountingEmbedder, url: str, **options: Any) -> ElasticsearchVectorStore:
    return ElasticsearchVectorStore(
        ElasticsearchStoreParams(hosts=[url], index_prefix=f"t{secrets.token_hex(4)}-", **options), embedder=embedder
    )


class TestElasticsearchStore(ContractTests):
    MID_WRITE = ("_bulk", True)  # the first of six bulk requests (500 documents each) is written

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, es_url: str) -> AsyncIterator[ElasticsearchVectorStore]:
        store = make_store(embedder, es_url)
        await store.start()
        yield store
        await _drop_all(store)
        await store.close()


def test_which_elasticsearch() -> None:
    if not REAL_URL:
        pytest.skip(
            "the Elasticsearch tests ran against the protocol test server (tests/fakes/es_server.py), not a real "
            "cluster: set REME_TEST_ES_URL=http://host:9200 to run them against one"
        )


class TestElasticsearchExtras(RemoteStoreChecks):
    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    async def store(self, es_url: str) -> AsyncIterator[ElasticsearchVectorStore]:
        store = make_store(CountingEmbedder(), es_url)
        yield store
        await _drop_all(store)
        await store.close()


@pytest.fixture
async def store(es_url: str) -> AsyncIterator[ElasticsearchVectorStore]:
    store = make_store(CountingEmbedder(), es_url)
    yield store
    await _drop_all(store)
    await store.close()


async def test_listing_is_not_capped_at_10000(store: ElasticsearchVectorStore) -> None:
    count = 10_050
    vectors = np.random.default_rng(3).standard_normal((count, DIM)).astype(np.float32)
    await store.upsert(WS, [make_node(f"n{i:05d}", vector=vectors[i], i=i) for i in range(count)])
    listed = await store.list_nodes(WS)
    assert len(listed) == count and ids(listed) == [f"n{i:05d}" for i in range(count)]
    odd = await store.list_nodes(WS, filter={"metadata.i": {"gte": 5}}, with_vectors=True)
    assert len(odd) == count - 5 and odd[0].unique_id == "n00005"
    np.testing.assert_array_equal(odd[0].vector, vectors[5] / np.linalg.norm(vectors[5]))


async def test_a_memory_with_more_metadata_values_than_can_be_indexed_is_refused(
    store: ElasticsearchVectorStore,
) -> None:
    """Each metadata value is a nested document, and Elasticsearch refuses a document of more than 10,000 (a store
    error, a 503, after part of a bulk may have landed): more than MAX_RECORD_LEAVES is a 413 before anything is
    sent, by upsert and by replace; at the limit the memory is stored."""
    wide: dict[str, Any] = {f"k{i}": i for i in range(MAX_RECORD_LEAVES)}
    await store.upsert(WS, [make_node("before")])
    with pytest.raises(PayloadTooLargeError) as caught:
        await store.upsert(WS, [make_node("ok"), make_node("big", one_more=1, **wide)])
    assert caught.value.status == 413 and "Elasticsearch" in caught.value.message
    with pytest.raises(PayloadTooLargeError):
        await store.replace_workspace(WS, [make_node("big", one_more=1, **wide)])
    assert ids(await store.list_nodes(WS)) == ["before"]
    await store.upsert(WS, [make_node("at", **wide)])
    assert sorted(ids(await store.list_nodes(WS))) == ["at", "before"]


async def test_small_pages_read_one_snapshot(es_url: str) -> None:
    store = make_store(CountingEmbedder(), es_url, list_page_size=7)
    try:
        await store.upsert(WS, [make_node(f"n{i:02d}", vector=unit_vector(i)) for i in range(50)])
        assert ids(await store.list_nodes(WS)) == [f"n{i:02d}" for i in range(50)]
        assert len(await store.list_nodes(WS, filter={"unique_id": {"lt": "n07"}})) == 7  # exactly one page
    finally:
        await _drop_all(store)
        await store.close()


async def test_hybrid_search_fuses_bm25_and_knn(es_url: str) -> None:
    embedder = CountingEmbedder()
    store = make_store(embedder, es_url, hybrid=True)
    try:
        await store.upsert(WS, corpus_nodes())
        hits = await store.search(WS, CORPUS[1][1], top_k=3)
        assert hits[0].node.unique_id == "retry" and hits[0].score == pytest.approx(1.0)
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
        # a word only BM25 can match ranks its document above vector-only neighbours
        hits = await store.search(WS, "Miso", top_k=2, filter={"metadata.memory_type": "personal"})
        assert hits[0].node.unique_id == "cat" and {h.node.unique_id for h in hits} <= {"cat", "coffee"}
        assert await store.search("nowhere", "Miso", top_k=2) == []
        # search_hybrid on the query vector given fuses the same way, without embedding the query
        (vector,) = await CountingEmbedder().embed(["Miso"])
        calls = embedder.calls
        personal = {"metadata.memory_type": "personal"}
        given = await store.search_hybrid(WS, "Miso", top_k=2, filter=personal, vector=vector)
        assert [h.node.unique_id for h in given] == [h.node.unique_id for h in hits]
        assert embedder.calls == calls
    finally:
        await _drop_all(store)
        await store.close()


async def test_replace_swaps_the_alias_atomically(store: ElasticsearchVectorStore) -> None:
    await store.upsert(WS, corpus_nodes())
    alias = store._alias(WorkspaceId(WS))
    before = set((await store.es.indices.get_alias(name=alias)).body)
    await store.replace_workspace(WS, [make_node("x", "new x")])
    after = set((await store.es.indices.get_alias(name=alias)).body)
    assert len(after) == 1 and not after & before
    assert not await store.es.indices.exists(index=",".join(before))  # the old index is gone
    assert ids(await store.list_nodes(WS)) == ["x"]
    assert await store.list_workspaces() == [WS]


async def test_foreign_index_dimension_is_400_at_first_write(es_url: str) -> None:
    small = make_store(CountingEmbedder(dimensions=32), es_url)
    big = ElasticsearchVectorStore(
        ElasticsearchStoreParams(hosts=[es_url], index_prefix=small.prefix), embedder=CountingEmbedder()
    )
    try:
        await small.create_workspace(WS)  # mapping dims 32, from that embedder
        with pytest.raises(DimensionMismatchError) as caught:
            await big.upsert(WS, [make_node("a", "embedded at 64")])
        assert caught.value.status == 400
        assert "dimension 64" in caught.value.message and "dimension 32" in caught.value.message
        assert await small.list_nodes(WS) == []
    finally:
        await _drop_all(small)
        await small.close()
        await big.close()


async def test_zero_vector_is_refused_before_writing(store: ElasticsearchVectorStore) -> None:
    with pytest.raises(InvalidRequestError, match="all-zero vector"):
        await store.upsert(WS, [make_node("z", vector=np.zeros(DIM, np.float32))])
    assert await store.list_nodes(WS) == []


async def test_unreachable_cluster_then_recovery() -> None:
    port = free_port()
    store = make_store(CountingEmbedder(), f"http://127.0.0.1:{port}", max_retries=0)
    try:
        await store.start()
        health = await store.health()
        assert health["status"] == "down" and "unreachable" in health["reason"]
        with pytest.raises(StoreError) as caught:
            await store.upsert(WS, [make_node("a")])
        assert caught.value.status == 503 and f"127.0.0.1:{port}" in caught.value.message
        with serve_at(FakeElasticsearch().app, port):
            assert (await store.health())["status"] == "ok"
            await store.upsert(WS, [make_node("a")])
            assert ids(await store.list_nodes(WS)) == ["a"]
    finally:
        await store.close()


async def test_older_indices_adopt_the_space_and_a_reembed_elsewhere_is_seen(es_url: str) -> None:
    """An index from before spaces takes the store's at its first write; a process whose cached space is stale
    (another one re-embedded the workspace) reads the mapping again instead of refusing."""
    prefix = f"t{secrets.token_hex(4)}-"
    params = ElasticsearchStoreParams(hosts=[es_url], index_prefix=prefix)
    older = ElasticsearchVectorStore(params, embedder=CountingEmbedder())
    await older.upsert(WS, corpus_nodes())
    await older.es.indices.put_mapping(
        index=older._alias(WorkspaceId(WS)), meta={"reme_workspace_id": WS}
    )  # no space: older
    upgraded = ElasticsearchVectorStore(params, embedder=CountingEmbedder())  # the old embedder, this version
    a = ElasticsearchVectorStore(params, embedder=CountingEmbedder(model_name="new-model"))
    b = ElasticsearchVectorStore(params, embedder=CountingEmbedder(model_name="new-model"))
    try:
        assert await upgraded.workspace_space(WS) is None
        await upgraded.upsert(WS, [make_node("adopted")])
        assert await a.workspace_space(WS) == space_of(upgraded.embedder)
        with pytest.raises(EmbeddingSpaceConflictError):
            await b.upsert(WS, [make_node("b1")])  # b now caches the old space
        await reembed_workspace(a, WS)
        assert await b.upsert(WS, [make_node("b1")]) == 1
        assert await b.workspace_space(WS) == space_of(b.embedder)
    finally:
        await _drop_all(a)
        for store in (older, upgraded, a, b):
            await store.close()
