"""Hybrid retrieval: the BM25 index, its sync with every kind of store write, and the recall op using it."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.base import VectorStore
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.lexical import K1, B, LexicalIndex, fuse, tokenize
from reme_service.stores.params import LocalStoreParams
from reme_service.testing.run_op import FlowCaller, Flows, op_services

pytestmark = pytest.mark.anyio

VOCABULARY = "alpha beta gamma delta paris flight hotel invoice garden coffee painting sunrise camping guitar"
WORDS = VOCABULARY.split(" ")


def test_tokenize_drops_stopwords_and_normalises() -> None:
    assert tokenize("When did Caroline's paintings sell at the Paris show?") == [
        "caroline",
        "painting",
        "sell",
        "paris",
        "show",
    ]
    assert tokenize("class status bus") == ["class", "status", "bus"]  # -ss, -us, short words kept
    assert tokenize("我喜欢咖啡 coffee2") == ["我喜", "喜欢", "欢咖", "咖啡", "coffee2"]


def test_incremental_index_equals_a_rebuilt_one() -> None:
    rng = random.Random(5)
    texts: list[str] = []
    index = LexicalIndex()
    for _ in range(400):
        action = rng.random()
        text = " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))
        if action < 0.5 or not texts:
            index.append(text)
            texts.append(text)
        elif action < 0.75:
            row = rng.randrange(len(texts))
            index.replace(row, texts[row], text)
            texts[row] = text
        else:  # the store's swap-delete: the last row moves into the hole
            row = rng.randrange(len(texts))
            index.remove(row, texts[row], texts[-1])
            last = texts.pop()
            if row < len(texts):
                texts[row] = last
        if rng.random() < 0.1:
            query = " ".join(rng.choices(WORDS, k=3))
            np.testing.assert_allclose(index.scores(query), LexicalIndex.build(texts).scores(query), rtol=1e-5)
    assert index.size == len(texts)


def test_scores_are_the_bm25_formula() -> None:
    texts = ["red apple pie", "green apple", "apple apple tart", "blue sky", ""]
    query = "apple pie sky"
    docs = [tokenize(t) for t in texts]
    average = sum(len(d) for d in docs) / len(docs)
    expected = []
    for doc in docs:
        score = 0.0
        for term in set(tokenize(query)):
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            if df and tf:
                idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(doc) / average))
        expected.append(score)
    np.testing.assert_allclose(LexicalIndex.build(texts).scores(query), expected, rtol=1e-5)
    assert expected[2] > expected[1] > 0 and expected[4] == 0  # tf counts; an empty text scores nothing


def test_fuse_keeps_scores_in_unit_range() -> None:
    cosine = np.array([0.9, 0.1, 0.5], np.float32)
    lexical = np.array([0.0, 4.0, 2.0], np.float32)
    fused = fuse(cosine, lexical, 0.3)
    np.testing.assert_allclose(fused, [0.63, 0.37, 0.5], rtol=1e-6)
    np.testing.assert_array_equal(fuse(cosine, np.zeros(3, np.float32), 0.3), cosine)


async def expected_hybrid(store: VectorStore, workspace: str, query: str, weight: float) -> dict[str, float]:
    """Fused scores computed from scratch over what the store lists (order-independent)."""
    nodes = await store.list_nodes(workspace, with_vectors=True)
    assert all(n.vector is not None for n in nodes)
    vectors = np.stack([np.asarray(n.vector, np.float32) for n in nodes])
    query_vector = (await store.embedder.embed([query]))[0]
    lexical = LexicalIndex.build(n.content for n in nodes).scores(query)
    fused = fuse(np.clip(vectors @ query_vector, 0, 1), lexical, weight)
    return {n.unique_id: float(s) for n, s in zip(nodes, fused, strict=True)}


async def check_in_sync(store: VectorStore, workspace: str, rng: random.Random) -> None:
    for _ in range(5):
        query = " ".join(rng.choices(WORDS, k=2))
        hits = await store.search_hybrid(workspace, query, top_k=5, lexical_weight=0.3)
        expected = await expected_hybrid(store, workspace, query, 0.3)
        best = sorted(expected.values(), reverse=True)[: len(hits)]
        np.testing.assert_allclose([h.score for h in hits], best, rtol=1e-4, atol=1e-6)
        for hit in hits:
            assert hit.score == pytest.approx(expected[hit.node.unique_id], rel=1e-4, abs=1e-6)


def random_nodes(rng: random.Random, count: int, prefix: str = "n") -> list[VectorNode]:
    return [
        VectorNode(unique_id=f"{prefix}{i}", content=" ".join(rng.choices(WORDS, k=rng.randint(2, 6))))
        for i in range(count)
    ]


@pytest.fixture(params=["memory", "local"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    embedder = HashEmbeddingClient(dimensions=64)
    if request.param == "memory":
        instance: VectorStore = MemoryVectorStore(embedder=embedder)
    else:
        instance = LocalVectorStore(
            LocalStoreParams(store_dir=tmp_path / "store", compact_after_records=3), embedder=embedder
        )
    await instance.start()
    yield instance
    await instance.close()


async def test_index_follows_upsert_replace_delete_and_reload(store: VectorStore, tmp_path: Path) -> None:
    rng = random.Random(11)
    await store.upsert("ws", random_nodes(rng, 40))
    await check_in_sync(store, "ws", rng)  # builds the index
    await store.upsert("ws", random_nodes(rng, 10, prefix="n"))  # replaces n0..n9 with new texts
    await store.upsert("ws", random_nodes(rng, 15, prefix="m"))
    await check_in_sync(store, "ws", rng)
    await store.delete_ids("ws", [f"n{i}" for i in range(0, 40, 3)] + ["m14", "missing"])
    await check_in_sync(store, "ws", rng)
    await store.replace_workspace("ws", random_nodes(rng, 25, prefix="r"))
    await check_in_sync(store, "ws", rng)
    await store.copy_workspace("ws", "ws2")
    await check_in_sync(store, "ws2", rng)
    if isinstance(store, LocalVectorStore):  # snapshot + log replay on a fresh instance
        await store.upsert("ws", random_nodes(rng, 5, prefix="late"))
        await store.delete_ids("ws", ["r1", "r2"])
        # read the files as a restart after a crash would (not started: `store` still holds the directory lock)
        reopened = LocalVectorStore(LocalStoreParams(store_dir=store.store_dir), embedder=store.embedder)
        try:
            await check_in_sync(reopened, "ws", rng)
        finally:
            await reopened.close()


async def test_hybrid_search_honours_filters_and_unknown_workspaces(store: VectorStore) -> None:
    nodes = [
        VectorNode(unique_id="a", content="paris flight", metadata={"memory_type": "task"}),
        VectorNode(unique_id="b", content="paris flight tips", metadata={"memory_type": "personal"}),
    ]
    await store.upsert("ws", nodes)
    hits = await store.search_hybrid("ws", "paris", top_k=5, filter={"metadata.memory_type": "task"})
    assert [h.node.unique_id for h in hits] == ["a"]
    assert 0 < hits[0].score <= 1
    assert await store.search_hybrid("nowhere", "paris", top_k=5) == []


# ----- through the flow -----


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FlowCaller]:
    overlay = tmp_path / "vector.yaml"
    overlay.write_text(
        "flow:\n  retrieve_vector_only:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(hybrid=False) >> "
        "RerankMemoryOp(enable_llm_rerank=False) >> RewriteMemoryOp(enable_llm_rewrite=False)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
    )
    async with op_services(tmp_path, f"config={overlay}", "vector_store.default.backend=local") as services:
        yield Flows(services)


async def insert(app: FlowCaller, dicts: list[dict[str, Any]]) -> None:
    result = await app.async_execute(name="vector_store", workspace_id="ws", action="insert", memory_dicts=dicts)
    assert result["success"] is True, result


async def test_hybrid_is_the_default_and_lifts_a_rare_keyword(app: FlowCaller) -> None:
    filler = [{"when_to_use": f"planning the weekly team meeting agenda {i}", "content": f"c{i}"} for i in range(30)]
    target = {"when_to_use": "kubernetes rollout stuck", "content": "check the readiness probe"}
    await insert(app, [*filler, target])
    query = "what to check when a kubernetes rollout in the weekly team meeting agenda planning is stuck"
    hybrid = await app.async_execute(name="retrieve_task_memory", workspace_id="ws", query=query, top_k=1)
    vector = await app.async_execute(name="retrieve_vector_only", workspace_id="ws", query=query, top_k=1)
    assert hybrid["metadata"]["memory_list"][0]["content"] == "check the readiness probe"
    assert vector["metadata"]["memory_list"][0]["content"] != "check the readiness probe"
    assert 0 < hybrid["metadata"]["memory_list"][0]["relevance"] <= 1


async def test_top_k_up_to_50_is_honoured_and_contents_are_deduplicated(app: FlowCaller) -> None:
    await insert(app, [{"when_to_use": f"topic number {i}", "content": f"advice {i}"} for i in range(60)])
    await insert(app, [{"when_to_use": "topic number 1 again", "content": "  Advice 1 "}])  # same content
    result = await app.async_execute(name="retrieve_task_memory", workspace_id="ws", query="topic number", top_k=50)
    memories = result["metadata"]["memory_list"]
    assert len(memories) == 50
    keys = [" ".join(m["content"].lower().split()) for m in memories]
    assert len(set(keys)) == 50
    result = await app.async_execute(name="retrieve_task_memory_simple", workspace_id="ws", query="topic", top_k=12)
    assert len(result["metadata"]["memory_list"]) == 12
