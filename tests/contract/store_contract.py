"""The behaviour every `VectorStore` backend must show (see `reme_service/stores/base.py`).

`StoreContract` is not collected itself: a backend's test module subclasses it and provides a `store` fixture
built with the `embedder` fixture (a counting `HashEmbeddingClient(dimensions=64)`), and names in `MID_WRITE` the
point where its upsert can be held part-way through a commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from reme_service.errors import DimensionMismatchError, EmbeddingError, InvalidRequestError
from reme_service.ops.vector_store.reembed import reembed_workspace
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.stores.base import Filter, VectorStore
from reme_service.stores.spaces import EmbeddingSpaceConflictError, space_of
from reme_service.stores.summary import WorkspaceSummary

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


class StoreContract:
    """Contract tests; subclasses provide the `store` fixture."""

    pytestmark = [pytest.mark.anyio]

    # A method of the store that an upsert's commit awaits, and whether to hold the commit just after that call
    # returns (True) or just before it starts (False): a point where the write has begun but not finished.
    MID_WRITE: ClassVar[tuple[str, bool]]

    @pytest.fixture
    def embedder(self) -> CountingEmbedder:
        return CountingEmbedder()

    # ----- workspaces -----

    async def test_workspace_crud(self, store: VectorStore) -> None:
        assert not await store.exists_workspace("w1")
        await store.create_workspace("w1")
        await store.create_workspace("w1")  # idempotent
        await store.create_workspace("w2")
        assert await store.exists_workspace("w1")
        assert {"w1", "w2"} <= set(await store.list_workspaces())
        assert await store.delete_workspace("w1") is True
        assert await store.delete_workspace("w1") is False
        assert not await store.exists_workspace("w1")
        assert "w1" not in await store.list_workspaces()
        assert await store.list_nodes("w2") == []

    async def test_upsert_creates_workspace_and_delete_workspace_drops_nodes(self, store: VectorStore) -> None:
        assert await store.upsert(WS, corpus_nodes()) == len(CORPUS)
        assert await store.exists_workspace(WS)
        assert await store.delete_workspace(WS)
        assert await store.list_nodes(WS) == []
        await store.upsert(WS, [make_node("fresh")])
        assert ids(await store.list_nodes(WS)) == ["fresh"]

    @pytest.mark.parametrize("bad", ["../x", "", "a/b", "a\\b", "..", ".", "x" * 257, "ws\n", "nul\x00"])
    async def test_invalid_workspace_ids_are_rejected(self, store: VectorStore, bad: str) -> None:
        calls = [
            store.create_workspace(bad),
            store.exists_workspace(bad),
            store.delete_workspace(bad),
            store.upsert(bad, [make_node("n")]),
            store.delete_ids(bad, ["n"]),
            store.get(bad, ["n"]),
            store.search_vector(bad, unit_vector(0), top_k=3),
            store.list_nodes(bad),
            store.replace_workspace(bad, []),
        ]
        for call in calls:
            with pytest.raises(InvalidRequestError):
                await call
        assert "x" * 257 not in await store.list_workspaces()

    async def test_any_printable_id_is_a_workspace_of_its_own(self, store: VectorStore) -> None:
        """ReMe accepted e-mail addresses and names in any script; ids differing in case are different workspaces,
        and a 256-character id (whose backend name is a hash) is listed by its own id."""
        names = ["alice@example.com", "张三", "John Smith", "Alice", "alice", "长" * 256]
        for index, workspace in enumerate(names):
            await store.upsert(workspace, [make_node(f"n{index}", vector=unit_vector(index % DIM))])
        for index, workspace in enumerate(names):
            assert ids(await store.list_nodes(workspace)) == [f"n{index}"], workspace
            assert await store.exists_workspace(workspace)
        assert set(names) <= set(await store.list_workspaces())
        assert await store.delete_workspace("Alice") is True
        assert ids(await store.list_nodes("alice")) == ["n4"] and not await store.exists_workspace("Alice")

    # ----- upsert, get, delete -----

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

    async def test_delete_ids_returns_the_count_deleted(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        assert await store.delete_ids(WS, ["deploy", "cat", "missing", "cat"]) == 2
        assert await store.delete_ids(WS, ["deploy"]) == 0
        assert await store.delete_ids(WS, []) == 0
        assert await store.delete_ids("never-created", ["x"]) == 0
        assert ids(await store.list_nodes(WS)) == ["retry", "yaml", "coffee", "sql"]
        assert await store.get(WS, ["deploy", "cat"]) == []

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

    # ----- search -----

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

    async def test_filters(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        query = unit_vector(5)

        async def found(filter: dict[str, Any]) -> set[str]:
            hits = await store.search_vector(WS, query, top_k=100, filter=filter)
            listed = await store.list_nodes(WS, filter=filter)
            assert {hit.node.unique_id for hit in hits} == set(ids(listed))
            return set(ids(listed))

        assert await found({"metadata.memory_type": "personal"}) == {"coffee", "cat"}
        assert await found({"metadata.metadata.freq": {"gte": 5, "lt": 12}}) == {"retry", "cat", "sql"}
        assert await found({"metadata.memory_type": ["tool", "personal"]}) == {"coffee", "cat", "sql"}
        assert await found({"unique_id": "yaml"}) == {"yaml"}
        assert await found({"unique_id": {"in": ["yaml", "sql", "nope"]}}) == {"yaml", "sql"}
        assert await found({"metadata.memory_type": "task", "metadata.metadata.freq": {"gt": 2}}) == {
            "deploy",
            "retry",
        }
        assert await found({"metadata.missing": {"ne": "x"}}) == set(ids(corpus_nodes()))
        assert await found({"metadata.missing": "x"}) == set()
        with pytest.raises(InvalidRequestError):
            await store.search_vector(WS, query, top_k=3, filter={"unique_id": {"like": "y%"}})
        with pytest.raises(InvalidRequestError):
            await store.list_nodes(WS, filter={"unique_id": {"like": "y%"}})

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

    async def test_unknown_workspace_reads_are_empty(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        assert await store.search("nowhere", "anything", top_k=5) == []
        assert embedder.calls == 0
        assert await store.search_vector("nowhere", unit_vector(0), top_k=5) == []
        assert await store.list_nodes("nowhere") == []
        assert await store.get("nowhere", ["a"]) == []
        await store.create_workspace("empty")
        assert await store.search("empty", "anything", top_k=5) == []
        assert await store.list_nodes("empty", with_vectors=True) == []

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

    # ----- listing -----

    async def test_list_ids_are_sorted_and_follow_every_change(self, store: VectorStore) -> None:
        assert await store.list_ids(WS) == []
        await store.upsert(WS, [make_node(uid, vector=unit_vector(i)) for i, uid in enumerate(["c", "a", "b"])])
        assert await store.list_ids(WS) == ["a", "b", "c"]
        await store.delete_ids(WS, ["b"])
        assert await store.list_ids(WS) == ["a", "c"]  # asked again after a change: not a stale order
        await store.upsert(
            WS, [make_node("0", vector=unit_vector(7)), make_node("a", "changed", vector=unit_vector(8))]
        )
        assert await store.list_ids(WS) == ["0", "a", "c"]

    # ----- summaries -----

    @staticmethod
    async def assert_summary_as_listed(store: VectorStore, workspace_id: str = WS) -> WorkspaceSummary:
        """The backend's `summarize` answers as the base's default, which counts the nodes `list_nodes` makes."""
        summary = await store.summarize(workspace_id)
        assert summary == await VectorStore.summarize(store, workspace_id)
        assert summary.size == len(await store.list_ids(workspace_id))
        return summary

    async def test_summary_of_an_unknown_or_emptied_workspace_is_empty(self, store: VectorStore) -> None:
        assert await store.summarize("no-such-workspace") == WorkspaceSummary(0, {}, None)
        await store.create_workspace(WS)
        assert await store.summarize(WS) == WorkspaceSummary(0, {}, None)
        await store.upsert(WS, [make_node("a", vector=unit_vector(1), memory_type="tool", time_modified="t")])
        assert await self.assert_summary_as_listed(store) == WorkspaceSummary(1, {"tool": 1}, "t")
        await store.delete_ids(WS, ["a"])
        assert await self.assert_summary_as_listed(store) == WorkspaceSummary(0, {}, None)

    async def test_summary_counts_types_and_the_latest_time_through_every_change(self, store: VectorStore) -> None:
        def node(uid: str, seed: int, **metadata: Any) -> VectorNode:
            return make_node(uid, vector=unit_vector(seed), **metadata)

        await store.upsert(
            WS,
            [
                node("t1", 1, memory_type="task", time_modified="2025-01-02 10:00:00"),
                node("t2", 2, time_modified="2025-01-03 09:00:00"),  # no memory_type: a task memory
                node("p1", 3, memory_type="personal", time_modified="2025-01-05 08:00:00"),
                node("p2", 4, memory_type="personal"),  # no time
                node("x1", 5, memory_type="tool", time_modified="2025-01-04 00:00:00", metadata={"memory_type": "z"}),
                node("n1", 6, memory_type="note", time_modified="2025-01-01 00:00:00"),  # a type of its own
            ],
        )
        summary = await self.assert_summary_as_listed(store)
        assert summary == WorkspaceSummary(6, {"task": 2, "personal": 2, "tool": 1, "note": 1}, "2025-01-05 08:00:00")
        await store.delete_ids(WS, ["p1"])  # the latest goes
        assert (await self.assert_summary_as_listed(store)).last_modified == "2025-01-04 00:00:00"
        await store.upsert(WS, [node("x1", 7, memory_type="task", time_modified="2025-01-04 00:00:00")])  # retyped
        assert (await self.assert_summary_as_listed(store)).counts == {"task": 3, "personal": 1, "note": 1}
        await store.upsert(WS, [node("x1", 8, memory_type="task", time_modified="2025-01-06 00:00:00")])  # updated
        assert (await self.assert_summary_as_listed(store)).last_modified == "2025-01-06 00:00:00"
        await store.upsert(WS, [node("x1", 9, memory_type="tool")])  # the latest loses its time
        summary = await self.assert_summary_as_listed(store)
        assert summary.last_modified == "2025-01-03 09:00:00"
        assert summary.counts == {"task": 2, "personal": 1, "tool": 1, "note": 1}
        await store.upsert(WS, [node("new", 10, memory_type="personal", time_modified="2025-02-01 00:00:00")])
        await store.delete_ids(WS, ["t1", "t2", "n1"])
        summary = await self.assert_summary_as_listed(store)
        assert summary == WorkspaceSummary(3, {"personal": 2, "tool": 1}, "2025-02-01 00:00:00")
        await store.delete_ids(WS, ["new"])
        assert (await self.assert_summary_as_listed(store)).last_modified is None  # no memory left has a time
        await store.replace_workspace(WS, [node("r", 11, memory_type="tool", time_modified="2024-12-31 23:59:59")])
        assert await self.assert_summary_as_listed(store) == WorkspaceSummary(1, {"tool": 1}, "2024-12-31 23:59:59")

    async def test_summary_of_a_large_workspace(self, store: VectorStore) -> None:
        count = 2_500  # past OFF_LOOP_ITEMS: counted in a worker thread by the in-process stores
        kinds = ("task", "personal", "tool")
        nodes = [
            make_node(
                f"m{i:05d}",
                vector=unit_vector(i),
                **({"memory_type": kinds[i % 3]} if i % 7 else {}),
                **({"time_modified": f"2025-01-01 00:{i // 60 % 60:02d}:{i % 60:02d}"} if i % 5 else {}),
            )
            for i in range(count)
        ]
        for start in range(0, count, 1000):
            await store.upsert(WS, nodes[start : start + 1000])
        summary = await self.assert_summary_as_listed(store)
        assert summary.size == count and sum(summary.counts.values()) == count
        await store.delete_ids(WS, [f"m{i:05d}" for i in range(0, count, 3)])
        await store.upsert(WS, [make_node("m00001", vector=unit_vector(1), memory_type="tool")])
        await self.assert_summary_as_listed(store)

    async def test_list_keeps_insertion_order_without_cap(self, store: VectorStore) -> None:
        count = 3_000
        nodes = [make_node(f"n{i:05d}", vector=unit_vector(i), i=i) for i in range(count)]
        for start in range(0, count, 700):
            await store.upsert(WS, nodes[start : start + 700])
        listed = await store.list_nodes(WS)
        assert ids(listed) == ids(nodes)
        assert all(node.vector is None for node in listed)
        # swap-with-last deletions must not disturb the order
        doomed = [f"n{i:05d}" for i in range(0, count, 3)]
        assert await store.delete_ids(WS, doomed) == len(doomed)
        await store.upsert(WS, [make_node("n00001", "updated", vector=unit_vector(1), i=1), make_node("tail")])
        expected = [uid for uid in ids(nodes) if uid not in set(doomed)] + ["tail"]
        listed = await store.list_nodes(WS, with_vectors=True)
        assert ids(listed) == expected
        assert listed[0].content == "updated"
        for node in listed[:-1]:
            np.testing.assert_array_equal(node.vector, unit_vector(node.metadata["i"]))
        hits = await store.search_vector(WS, unit_vector(1), top_k=1, filter={"metadata.i": {"lt": 10}})
        assert hits[0].node.unique_id == "n00001"

    # ----- replace and copy -----

    async def test_replace_workspace(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        assert await store.replace_workspace(WS, [make_node("x", "new x"), make_node("y", "new y")]) == 2
        assert ids(await store.list_nodes(WS)) == ["x", "y"]
        assert (await store.search(WS, "new y", top_k=1))[0].node.unique_id == "y"
        assert await store.replace_workspace("brand-new", [make_node("z")]) == 1
        assert ids(await store.list_nodes("brand-new")) == ["z"]

    async def test_replace_workspace_is_atomic(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        await store.upsert(WS, corpus_nodes())
        before = await store.list_nodes(WS, with_vectors=True)
        bad_batch = [make_node("x", "embedded"), make_node("y", vector=unit_vector(1, dim=16))]
        with pytest.raises(DimensionMismatchError):
            await store.replace_workspace(WS, bad_batch)
        embedder.fail = True
        with pytest.raises(EmbeddingError):
            await store.replace_workspace(WS, [make_node("x", "needs embedding")])
        embedder.fail = False
        after = await store.list_nodes(WS, with_vectors=True)
        assert ids(after) == ids(before)
        for old, new in zip(before, after, strict=True):
            np.testing.assert_array_equal(old.vector, new.vector)
        assert (await store.search(WS, CORPUS[1][1], top_k=1))[0].node.unique_id == "retry"

    async def test_copy_workspace_reuses_vectors(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        await store.upsert(WS, corpus_nodes())
        calls = embedder.calls
        assert await store.copy_workspace(WS, "copy") == len(CORPUS)
        assert embedder.calls == calls
        source = await store.list_nodes(WS, with_vectors=True)
        copied = await store.list_nodes("copy", with_vectors=True)
        assert ids(copied) == ids(source)
        for a, b in zip(source, copied, strict=True):
            np.testing.assert_array_equal(a.vector, b.vector)
            assert b.workspace_id == "copy" and a.metadata == b.metadata
        assert await store.copy_workspace("nothing-here", "copy2") == 0
        assert await store.exists_workspace("copy2")

    # ----- embedding spaces and reembed -----

    async def test_the_embedding_space_is_recorded(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        assert await store.workspace_space(WS) is None
        await store.upsert(WS, corpus_nodes())
        assert await store.workspace_space(WS) == space_of(embedder)
        await store.replace_workspace("replaced", [make_node("x")])
        assert await store.workspace_space("replaced") == space_of(embedder)
        await store.upsert("given", [make_node("g", vector=unit_vector(1, dim=16))])  # not the embedder's vectors
        assert await store.workspace_space("given") is None

    @pytest.mark.parametrize("other", [{"model_name": "another-model"}, {"dimensions": DIM // 2}])
    async def test_another_embedding_space_is_refused_until_reembedded(
        self, store: VectorStore, other: dict[str, Any]
    ) -> None:
        await store.upsert(WS, corpus_nodes())
        await store.upsert("untouched", [make_node("u")])
        store.embedder = CountingEmbedder(**other)  # the service restarted with another embedder
        refusals = [
            store.upsert(WS, [make_node("new")]),
            store.search(WS, "docker", top_k=2),
            store.search_hybrid(WS, "docker", top_k=2),
            store.search_vector(WS, unit_vector(1, dim=store.embedder.dimensions), top_k=2),
            store.copy_workspace(WS, "copied"),
        ]
        for refused in refusals:
            with pytest.raises(EmbeddingSpaceConflictError) as caught:
                await refused
            assert caught.value.status == 409 and caught.value.code == "conflict"
            assert f"hash/hash-bow ({DIM} dimensions)" in caught.value.message  # the workspace's space
            assert space_of(store.embedder).label() in caught.value.message  # and the service's
        assert not await store.exists_workspace("copied") or await store.list_nodes("copied") == []
        assert ids(await store.get(WS, ["deploy", "retry"])) == ["deploy", "retry"]  # reading and deleting work
        assert await store.delete_ids(WS, ["sql"]) == 1
        result = await reembed_workspace(store, WS)
        assert result["size"] == len(CORPUS) - 1 and result["to_space"] == space_of(store.embedder).model_dump()
        assert result["from_space"]["dimensions"] == DIM
        assert await store.workspace_space(WS) == space_of(store.embedder)
        assert (await store.search(WS, CORPUS[1][1], top_k=1))[0].node.unique_id == "retry"
        assert await store.upsert(WS, [make_node("new")]) == 1
        with pytest.raises(EmbeddingSpaceConflictError):  # another workspace keeps its space until reembedded
            await store.upsert("untouched", [make_node("v")])

    async def test_an_empty_workspace_takes_the_current_space(self, store: VectorStore) -> None:
        await store.create_workspace(WS)
        store.embedder = CountingEmbedder(model_name="another-model")
        assert await store.upsert(WS, [make_node("a")]) == 1
        assert await store.workspace_space(WS) == space_of(store.embedder)

    async def test_reembed_keeps_writes_made_during_it_and_searches_answer(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())  # in the current space: its writes and searches go on meanwhile
        held = HeldCall(store.embedder, "embed", after=False)  # the next call: re-embedding the whole workspace
        running = asyncio.create_task(reembed_workspace(store, WS))
        await held.reached.wait()
        assert (await store.search(WS, CORPUS[0][1], top_k=1))[0].node.unique_id == "deploy"
        await store.upsert(WS, [make_node("late", "a memory written during the reembed")])
        await store.upsert(WS, [make_node("cat", "the user has a dog called Rex")])  # changed text
        await store.delete_ids(WS, ["coffee"])
        swap = HeldCall(store, "replace_workspace", after=False)
        held.release.set()
        await swap.reached.wait()  # caught up, about to swap
        acquired = asyncio.Event()

        async def writer() -> None:
            async with store.lock(WS):  # as every writer of the service does
                acquired.set()
                await store.upsert(WS, [make_node("last", "written while the swap was pending")])

        writing = asyncio.create_task(writer())
        with pytest.raises(TimeoutError):  # the reembed holds the workspace's lock from its catch-up to its swap
            await asyncio.wait_for(acquired.wait(), 0.3)
        swap.release.set()
        result = await running
        await writing
        assert result["size"] == len(CORPUS) and result["caught_up"] == 2  # "late" and the changed "cat"
        assert sorted(ids(await store.list_nodes(WS))) == sorted(
            [uid for uid, *_ in CORPUS if uid != "coffee"] + ["late", "last"]
        )
        assert (await store.search(WS, "a memory written during the reembed", top_k=1))[0].node.unique_id == "late"
        assert (await store.search(WS, "dog called Rex", top_k=1))[0].node.unique_id == "cat"

    # ----- concurrency -----

    async def test_concurrent_writers(self, store: VectorStore) -> None:
        await store.upsert(WS, [make_node(f"old{i}", vector=unit_vector(i)) for i in range(100)])
        upserts = [store.upsert(WS, [make_node(f"new{i}", f"node number {i}")]) for i in range(50)]
        deletes = [store.delete_ids(WS, [f"old{i}", f"old{i + 50}"]) for i in range(0, 50, 2)]
        searches = [store.search_vector(WS, unit_vector(i), top_k=5) for i in range(20)]
        results = await asyncio.gather(*upserts, *deletes, *searches)
        assert results[:50] == [1] * 50
        assert results[50:75] == [2] * 25
        kept = {f"old{i}" for i in range(1, 100, 2)}
        assert set(ids(await store.list_nodes(WS))) == kept | {f"new{i}" for i in range(50)}

    async def test_concurrent_reads_and_writes_on_a_large_workspace(self, store: VectorStore) -> None:
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((2_500, DIM)).astype(np.float32)
        await store.upsert(WS, [make_node(f"n{i}", vector=vectors[i], i=i) for i in range(2_500)])

        async def churn(round_: int) -> None:
            await store.delete_ids(WS, [f"n{i}" for i in range(round_, 2_500, 40)])
            await store.upsert(WS, [make_node(f"n{i}", vector=vectors[i], i=i) for i in range(round_, 2_500, 40)])

        async def read() -> None:
            for hit in await store.search_vector(WS, vectors[3], top_k=3, filter={"metadata.i": {"gte": 0}}):
                assert 0.0 <= hit.score <= 1.0
            # every churn round may have deleted its 63 nodes before any round re-inserts them (writes to a
            # workspace are serialised in arrival order); a listing never shows a node twice nor a lost node
            assert len(await store.list_nodes(WS)) in range(2_500 - 8 * 63, 2_501)

        await asyncio.gather(*(churn(r) for r in range(8)), *(read() for _ in range(16)))
        assert len(await store.list_nodes(WS)) == 2_500
        hits = await store.search_vector(WS, vectors[3], top_k=1)
        assert hits[0].node.unique_id == "n3" and hits[0].score == pytest.approx(1.0, abs=1e-5)

    async def test_cancelled_writer_still_completes(self, store: VectorStore) -> None:
        """A caller cancelled while its write is being committed gets CancelledError, and the write completes
        anyway: never half-applied, never applied in one place (a log, a backend) and missing in another."""
        await store.upsert(WS, [make_node("before", vector=unit_vector(0))])
        nodes = [make_node(f"c{i}", vector=unit_vector(i)) for i in range(3_000)]
        name, after = self.MID_WRITE
        hold = HeldCall(store, name, after=after)
        task = asyncio.ensure_future(store.upsert(WS, nodes))
        reached = asyncio.ensure_future(hold.reached.wait())
        done, _ = await asyncio.wait({task, reached}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert reached in done, f"the upsert never reached {name!r} part-way through its commit"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        hold.release.set()
        await store.upsert(WS, [make_node("after")])  # writes to a workspace run in order: after the held one
        assert ids(await store.list_nodes(WS)) == ["before", *(node.unique_id for node in nodes), "after"]
        hits = await store.search_vector(WS, unit_vector(2_999), top_k=1, filter={"unique_id": {"ne": "before"}})
        assert hits[0].node.unique_id == "c2999" and hits[0].score == pytest.approx(1.0, abs=1e-5)
