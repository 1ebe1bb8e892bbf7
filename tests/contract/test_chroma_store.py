"""The Chroma backend against the store contract — a real `chroma run` server and the embedded persistent client —
plus what is Chroma's own: lossless metadata, collection names, foreign dimensions, an unreachable server."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_service.errors import DimensionMismatchError, PayloadTooLargeError, StoreError
from reme_service.ops.vector_store.reembed import reembed_workspace
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.base import VectorStore
from reme_service.stores.chroma.client import close_async_http_client
from reme_service.stores.chroma.store import ChromaVectorStore
from reme_service.stores.names import chroma_collection_name
from reme_service.stores.params import ChromaStoreParams
from reme_service.stores.remote_filter import MAX_RECORD_LEAVES
from reme_service.stores.spaces import EmbeddingSpaceConflictError, space_of
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import (
    CORPUS,
    WS,
    CountingEmbedder,
    corpus_nodes,
    ids,
    make_node,
    unit_vector,
)
from tests.fakes.chroma_server import ChromaServer, chroma_server, free_port, running_chroma  # noqa: F401

pytestmark = pytest.mark.anyio


async def _drop_all(store: ChromaVectorStore) -> None:
    for workspace in await store.list_workspaces():
        await store.delete_workspace(workspace)


class TestChromaServerStore(ContractTests):
    MID_WRITE = ("_write", False)  # inside the commit, under the write lock, before the records are sent

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, chroma_server: ChromaServer) -> AsyncIterator[ChromaVectorStore]:  # noqa: F811
        store = ChromaVectorStore(
            ChromaStoreParams(
                host=chroma_server.host, port=chroma_server.port, collection_prefix=f"t{secrets.token_hex(4)}-"
            ),
            embedder=embedder,
        )
        await store.start()
        yield store
        await _drop_all(store)
        await store.close()


class TestChromaEmbeddedStore(ContractTests):
    MID_WRITE = TestChromaServerStore.MID_WRITE

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, tmp_path: Path) -> AsyncIterator[ChromaVectorStore]:
        store = ChromaVectorStore(ChromaStoreParams(store_dir=tmp_path / "chroma"), embedder=embedder)
        await store.start()
        yield store
        await store.close()


TOOL_CALLS = [
    {"tool_name": "web_search", "input": {"q": "asyncio", "k": 10}, "output": "found 10", "success": True,
     "time_cost": 2.5, "token_cost": 150, "score": None, "metadata": {"nested": {"deep": [1, {"x": None}]}}},
    {"tool_name": "web_search", "input": {}, "output": "é ✓ 中文", "success": False, "time_cost": 0},
]  # fmt: skip


class RemoteStoreChecks:
    """What the server-side backends must add to the contract: metadata that Chroma/Elasticsearch cannot hold
    natively comes back unchanged, and filters they cannot express exactly still answer exactly."""

    async def test_nested_metadata_and_tool_call_results_round_trip(self, store: VectorStore) -> None:
        metadata = {
            "memory_type": "tool",
            "tool_call_results": TOOL_CALLS,
            "metadata": {"freq": 3, "big": 2**60, "ratio": 0.25, "flag": False, "none": None, "empty": {}},
            "dotted.key": {"a": 1},
            "long": "x" * 9_000,
            "list": [1, "two", None],
        }
        await store.upsert(WS, [make_node("t", "tool memory", **metadata)])
        (got,) = await store.get(WS, ["t"])
        assert got.metadata == metadata
        (listed,) = await store.list_nodes(WS)
        assert listed.metadata == metadata
        # a replacement drops keys the new version lacks (Chroma merges metadata on upsert)
        await store.upsert(WS, [make_node("t", "tool memory", memory_type="tool")])
        (got,) = await store.get(WS, ["t"])
        assert got.metadata == {"memory_type": "tool"}
        assert await store.list_nodes(WS, filter={"metadata.metadata.freq": 3}) == []

    async def test_filters_the_backend_cannot_express(self, store: VectorStore) -> None:
        nodes = [
            make_node("a", "alpha text", when="2024-01-05", n=None, big=2**60, flag=True, name="x" * 9_000),
            make_node("b", "beta text", when="2024-02-10", n=1, big=2**60 + 1, flag=False, name="short"),
            make_node("c", "gamma text", when="2023-12-31", n=1.0, flag=1),
        ]
        await store.upsert(WS, nodes)

        async def found(filter: dict[str, Any]) -> set[str]:
            hits = await store.search_vector(WS, unit_vector(9), top_k=10, filter=filter)
            listed = await store.list_nodes(WS, filter=filter)
            assert {hit.node.unique_id for hit in hits} == set(ids(listed))
            return set(ids(listed))

        assert await found({"metadata.when": {"gte": "2024-01-01", "lt": "2024-02-01"}}) == {"a"}
        assert await found({"content": "beta text"}) == {"b"}
        assert await found({"metadata.n": None}) == {"a"}
        assert await found({"metadata.n": {"ne": None}}) == {"b", "c"}
        assert await found({"metadata.n": 1}) == {"b", "c"}
        assert await found({"metadata.n": {"in": [None, 1]}}) == {"a", "b", "c"}
        assert await found({"metadata.big": 2**60 + 1}) == {"b"}
        assert await found({"metadata.big": {"gt": 2**60}}) == {"b"}
        assert await found({"metadata.flag": True}) == {"a"}
        assert await found({"metadata.flag": 1}) == {"c"}
        assert await found({"metadata.flag": {"nin": [True, 1]}}) == {"b"}
        assert await found({"metadata.name": "x" * 9_000}) == {"a"}
        assert await found({"metadata.name": {"ne": "x" * 9_000}}) == {"b", "c"}
        assert await found({"unique_id": {"gte": "b"}}) == {"b", "c"}
        assert await found({"workspace_id": WS, "unique_id": ["a", 7]}) == {"a"}
        assert await found({"workspace_id": "elsewhere"}) == set()
        assert await found({"metadata": {"ne": 1}}) == {"a", "b", "c"}
        assert await found({"unique_id": {"in": []}}) == set()

    async def test_odd_workspace_ids_map_to_distinct_names(self, store: VectorStore) -> None:
        odd = ["My.WS_1", "my.ws_1", "-x-", "..a", "_", "A" * 128, "a" * 128]
        for i, workspace in enumerate(odd):
            await store.upsert(workspace, [make_node(f"n{i}")])
        assert set(odd) <= set(await store.list_workspaces())
        for i, workspace in enumerate(odd):
            assert ids(await store.list_nodes(workspace)) == [f"n{i}"]
        assert await store.delete_workspace("my.ws_1")
        assert await store.exists_workspace("My.WS_1") and not await store.exists_workspace("my.ws_1")


class TestChromaServerExtras(RemoteStoreChecks):
    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    async def store(self, chroma_server: ChromaServer) -> AsyncIterator[ChromaVectorStore]:  # noqa: F811
        store = ChromaVectorStore(
            ChromaStoreParams(
                host=chroma_server.host, port=chroma_server.port, collection_prefix=f"t{secrets.token_hex(4)}-"
            ),
            embedder=CountingEmbedder(),
        )
        yield store
        await _drop_all(store)
        await store.close()


class TestChromaEmbeddedExtras(RemoteStoreChecks):
    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[ChromaVectorStore]:
        store = ChromaVectorStore(ChromaStoreParams(store_dir=tmp_path / "chroma"), embedder=CountingEmbedder())
        yield store
        await store.close()


async def test_collection_names_are_chroma_names(chroma_server: ChromaServer) -> None:  # noqa: F811
    import chromadb

    store = ChromaVectorStore(
        ChromaStoreParams(host=chroma_server.host, port=chroma_server.port), embedder=CountingEmbedder()
    )
    client = await chromadb.AsyncHttpClient(host=chroma_server.host, port=chroma_server.port)
    try:
        await store.upsert("My.ws_1", [make_node("a")])
        collection = await client.get_collection(chroma_collection_name(WorkspaceId("My.ws_1")))
        assert collection.name == "reme-My_dws_u1_e" and collection.metadata["reme_workspace_id"] == "My.ws_1"
        assert (await collection.get(ids=["a"]))["documents"] == ["text of a"]
        # replace_workspace leaves no staging or trash collection behind
        await store.replace_workspace("My.ws_1", [make_node("b")])
        names = [c.name for c in await client.list_collections()]
        assert [n for n in names if n.startswith("reme-My_dws_u1")] == ["reme-My_dws_u1_e"]
    finally:
        await store.delete_workspace("My.ws_1")
        await store.close()
        await close_async_http_client(client)


async def test_a_memory_with_more_metadata_values_than_chroma_can_index_is_refused(
    chroma_server: ChromaServer,  # noqa: F811
) -> None:
    """A record of ~5,500 keys fails Chroma's compaction and every later write to its collection with it. So a memory
    of more than MAX_RECORD_LEAVES values is a 413 before anything is sent; at the limit it is stored, and so is its
    update to as many other keys (the old ones are sent as None: twice the limit, still under Chroma's)."""
    store = ChromaVectorStore(
        ChromaStoreParams(host=chroma_server.host, port=chroma_server.port), embedder=CountingEmbedder()
    )
    wide: dict[str, Any] = {f"k{i}": i for i in range(MAX_RECORD_LEAVES)}
    other: dict[str, Any] = {f"other{i}": i for i in range(MAX_RECORD_LEAVES)}
    try:
        await store.upsert("wide", [make_node("before")])
        with pytest.raises(PayloadTooLargeError) as caught:
            await store.upsert("wide", [make_node("ok"), make_node("big", **wide, one_more=1)])
        assert caught.value.status == 413 and "'big'" in caught.value.message
        with pytest.raises(PayloadTooLargeError):
            await store.replace_workspace("wide", [make_node("big", **wide, one_more=1)])
        assert await store.list_ids("wide") == ["before"]  # nothing of either write
        await store.upsert("wide", [make_node("at", **wide)])
        await store.upsert("wide", [make_node("at", **other)])
        await store.upsert("wide", [make_node("after")])  # the collection still takes writes
        (at,) = await store.get("wide", ["at"])
        assert len(at.metadata) == MAX_RECORD_LEAVES and "other0" in at.metadata and "k0" not in at.metadata
        assert sorted(await store.list_ids("wide")) == ["after", "at", "before"]
    finally:
        await store.delete_workspace("wide")
        await store.close()


async def test_foreign_collection_dimension_is_400_at_first_write(chroma_server: ChromaServer) -> None:  # noqa: F811
    import chromadb

    client = await chromadb.AsyncHttpClient(host=chroma_server.host, port=chroma_server.port)
    name = chroma_collection_name(WorkspaceId("foreign"), "f-")
    collection = await client.create_collection(name, embedding_function=None)
    await collection.add(ids=["old"], embeddings=np.array([[1.0, 0.0, 0.0]], np.float32))
    store = ChromaVectorStore(
        ChromaStoreParams(host=chroma_server.host, port=chroma_server.port, collection_prefix="f-"),
        embedder=CountingEmbedder(),
    )
    try:
        with pytest.raises(DimensionMismatchError) as caught:
            await store.upsert("foreign", [make_node("new", "embedded at 64 dimensions")])
        assert caught.value.status == 400
        assert "dimension 64" in caught.value.message and "dimension 3" in caught.value.message
        (hit,) = await store.search_vector("foreign", [0.0, 1.0, 0.0], top_k=1)  # an l2 collection reads too
        assert hit.node.unique_id == "old" and hit.score == pytest.approx(0.0, abs=1e-6)
    finally:
        await client.delete_collection(name)
        await store.close()
        await close_async_http_client(client)


async def test_unreachable_server_then_recovery(tmp_path: Path) -> None:
    port = free_port()
    store = ChromaVectorStore(ChromaStoreParams(host="127.0.0.1", port=port, timeout=5), embedder=CountingEmbedder())
    try:
        await store.start()  # does not raise
        health = await store.health()
        assert health["status"] == "down" and f"127.0.0.1:{port}" in health["reason"]
        with pytest.raises(StoreError) as caught:
            await store.upsert(WS, [make_node("a")])
        assert caught.value.status == 503 and "unreachable" in caught.value.message
        with running_chroma(tmp_path / "late", port):
            assert (await store.health())["status"] == "ok"
            await store.upsert(WS, [make_node("a")])
            assert ids(await store.list_nodes(WS)) == ["a"]
        with pytest.raises(StoreError, match="unreachable"):  # gone again: 503, not a crash
            await store.list_nodes(WS)
        assert (await store.health())["status"] == "down"
    finally:
        await store.close()


async def test_embedded_store_persists_across_reopen(tmp_path: Path) -> None:
    first = ChromaVectorStore(ChromaStoreParams(store_dir=tmp_path / "c"), embedder=CountingEmbedder())
    await first.upsert(WS, corpus_nodes())
    await first.close()
    second = ChromaVectorStore(ChromaStoreParams(store_dir=tmp_path / "c"), embedder=CountingEmbedder())
    try:
        assert ids(await second.list_nodes(WS)) == [uid for uid, *_ in CORPUS]
        assert (await second.search(WS, CORPUS[2][1], top_k=1))[0].node.unique_id == "yaml"
    finally:
        await second.close()


async def test_an_older_collection_takes_the_space_at_its_first_write(chroma_server: ChromaServer) -> None:  # noqa: F811
    import chromadb

    client = await chromadb.AsyncHttpClient(host=chroma_server.host, port=chroma_server.port)
    name = chroma_collection_name(WorkspaceId("older"), "o-")
    collection = await client.create_collection(name, embedding_function=None, metadata={"reme_workspace_id": "older"})
    await collection.add(ids=["old"], embeddings=[unit_vector(1).tolist()], documents=["written before spaces"])
    params = ChromaStoreParams(host=chroma_server.host, port=chroma_server.port, collection_prefix="o-")
    store, reopened = (
        ChromaVectorStore(params, embedder=CountingEmbedder()),
        ChromaVectorStore(params, embedder=CountingEmbedder()),
    )
    try:
        assert await store.workspace_space("older") is None
        assert await store.upsert("older", [make_node("new")]) == 1
        assert await reopened.workspace_space("older") == space_of(store.embedder)
    finally:
        await client.delete_collection(name)
        await store.close()
        await reopened.close()
        await close_async_http_client(client)


async def test_a_reembed_by_another_process_is_seen(chroma_server: ChromaServer) -> None:  # noqa: F811
    """Two processes on one server, both restarted with a new embedder: B's cached collection still says the old
    space when A re-embeds the workspace; B's next write reads the collection again instead of refusing."""
    params = ChromaStoreParams(host=chroma_server.host, port=chroma_server.port, collection_prefix="r-")
    before = ChromaVectorStore(params, embedder=CountingEmbedder())
    await before.upsert(WS, corpus_nodes())
    await before.close()
    a = ChromaVectorStore(params, embedder=CountingEmbedder(model_name="new-model"))
    b = ChromaVectorStore(params, embedder=CountingEmbedder(model_name="new-model"))
    try:
        with pytest.raises(EmbeddingSpaceConflictError):
            await b.upsert(WS, [make_node("b1")])
        await reembed_workspace(a, WS)
        assert await b.upsert(WS, [make_node("b1")]) == 1
        assert (await b.search(WS, CORPUS[2][1], top_k=1))[0].node.unique_id == "yaml"
    finally:
        await _drop_all(a)
        await a.close()
        await b.close()
