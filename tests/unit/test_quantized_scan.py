"""The int8 first pass of exact search (`inproc/quantized.py`, `WorkspaceState.scan_top`): the same hits and scores as
a full float32 scan, plain and hybrid, through inserts, replaces and deletes (rows moved into holes), with ties; built
only for workspaces big enough and without an approximate index; counted in a workspace's resident size."""

from __future__ import annotations

import numpy as np
import pytest

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.inproc.quantized import BLOCK_ROWS, QuantizedRows
from reme_service.stores.inproc.ranking import dot_rows
from reme_service.stores.inproc.resident import footprint
from reme_service.stores.inproc.workspace import QUANTIZED_FROM, WorkspaceState
from reme_service.stores.lexical import fuse
from reme_service.stores.params import AnnParams, MemoryStoreParams
from reme_service.stores.vectors import as_query
from tests.conditions import until

pytestmark = pytest.mark.anyio

DIM = 384
WS = "scan"
TOPICS = ["deploy", "rollback", "cache", "index", "shard", "replica", "token", "budget", "retry", "timeout"]
WEIGHT = 0.4
BUILD_LIMIT = 30.0  # seconds a background index build may take on a busy machine


def clustered(count: int, seed: int, centres: int = 40) -> np.ndarray:
    """Unit-ish vectors around a few centres, as embeddings of related texts are: many rows score close together."""
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, DIM)).astype(np.float32)
    return (middle[rng.integers(0, centres, count)] + 0.6 * rng.standard_normal((count, DIM))).astype(np.float32)


def nodes(ids: range | list[int], vectors: np.ndarray) -> list[VectorNode]:
    return [
        VectorNode(unique_id=f"n{i}", content=f"{TOPICS[i % 10]} note {i % 97} of {TOPICS[i % 7]}", vector=vector)
        for i, vector in zip(ids, vectors, strict=True)
    ]


def full_scores(state: WorkspaceState, query: np.ndarray, text: str | None) -> dict[str, float]:
    """Every row's score by the float32 scan of every row (no int8 pass), as a search reports it."""
    n = state.size
    scores = dot_rows(state.matrix[:n], query)
    if text is not None:
        scores = fuse(scores, state.lexical_index().scores(text), WEIGHT)
    clipped = np.clip(scores, 0.0, 1.0).tolist()
    return {uid: clipped[row] for uid, row in state.rows.items()}


def assert_ranked_as_full_scan(hits: list[SearchHit], everything: dict[str, float], k: int) -> None:
    """`hits` are the full scan's top k: the same scores, best first, each hit with its own full-scan score; rows
    tied at the k-th score may be any of those tied (two full scans may pick different ones too)."""
    best = sorted(everything.values(), reverse=True)[:k]
    assert [hit.score for hit in hits] == best
    assert all(everything[hit.node.unique_id] == hit.score for hit in hits)
    assert len({hit.node.unique_id for hit in hits}) == len(hits)


async def assert_scans_agree(store: MemoryVectorStore, probes: np.ndarray) -> None:
    state = store._spaces[WorkspaceId(WS)]
    for i, probe in enumerate(probes):
        k = (1, 5, 20)[i % 3]
        query = as_query(probe, WS, DIM)
        plain = await store.search_vector(WS, probe, top_k=k)
        assert_ranked_as_full_scan(plain, full_scores(state, query, None), k)
        text = f"{TOPICS[i % 10]} {TOPICS[(i * 3) % 10]} note {i}"
        hybrid = await store.search_hybrid(WS, text, top_k=k, lexical_weight=WEIGHT, vector=probe)
        assert_ranked_as_full_scan(hybrid, full_scores(state, query, text), k)
    assert state.quantized is not None  # the searches above went through the int8 pass


@pytest.mark.slow
async def test_the_int8_pass_gives_the_full_scans_hits_through_writes() -> None:
    store = MemoryVectorStore(MemoryStoreParams(), embedder=HashEmbeddingClient(dimensions=DIM))
    count = QUANTIZED_FROM + BLOCK_ROWS + 300  # several blocks, the last one partial
    await store.upsert(WS, nodes(range(count), clustered(count, seed=1)))
    probes = clustered(60, seed=2)
    await assert_scans_agree(store, probes)
    rng = np.random.default_rng(3)
    next_id = count
    for round_ in range(3):
        replaced = rng.choice(next_id, 200, replace=False).tolist()
        await store.upsert(WS, nodes(replaced, clustered(200, seed=10 + round_)))  # rows rewritten in place
        gone = rng.choice(next_id, 500, replace=False).tolist()
        await store.delete_ids(WS, [f"n{i}" for i in gone])  # the last rows move into the holes
        await store.upsert(WS, nodes(range(next_id, next_id + 150), clustered(150, seed=20 + round_)))  # appended
        next_id += 150
        await assert_scans_agree(store, probes)
    await store.close()


async def test_many_equal_scores_are_ranked_as_the_full_scan_ranks_them() -> None:
    """Every row repeated many times: far more rows tie at the k-th score than the top k holds."""
    store = MemoryVectorStore(MemoryStoreParams(), embedder=HashEmbeddingClient(dimensions=DIM))
    count = QUANTIZED_FROM + 500
    distinct = clustered(30, seed=4)
    await store.upsert(WS, nodes(range(count), distinct[np.arange(count) % 30]))
    state = store._spaces[WorkspaceId(WS)]
    for probe in clustered(20, seed=5):
        query = as_query(probe, WS, DIM)
        assert_ranked_as_full_scan(await store.search_vector(WS, probe, top_k=50), full_scores(state, query, None), 50)
    assert state.quantized is not None
    await store.close()


async def test_the_copy_is_built_only_where_it_pays_and_is_counted() -> None:
    store = MemoryVectorStore(MemoryStoreParams(), embedder=HashEmbeddingClient(dimensions=DIM))
    await store.upsert("small", nodes(range(QUANTIZED_FROM - 1), clustered(QUANTIZED_FROM - 1, seed=6)))
    await store.search_vector("small", clustered(1, seed=7)[0], top_k=3)
    assert store._spaces[WorkspaceId("small")].quantized is None  # a float32 scan of this few rows is cheap enough

    await store.upsert(WS, nodes(range(QUANTIZED_FROM), clustered(QUANTIZED_FROM, seed=6)))
    state = store._spaces[WorkspaceId(WS)]
    before = footprint(state)
    await store.search_vector(WS, clustered(1, seed=7)[0], top_k=3)
    quantized = state.quantized
    assert quantized is not None
    assert footprint(state) == before + quantized.nbytes()
    assert quantized.nbytes() >= QUANTIZED_FROM * DIM  # a byte per dimension, at least
    await store.close()


async def test_an_approximate_index_replaces_the_copy() -> None:
    store = MemoryVectorStore(
        MemoryStoreParams(ann=AnnParams(min_rows=QUANTIZED_FROM + 10)), embedder=HashEmbeddingClient(dimensions=DIM)
    )
    await store.upsert(WS, nodes(range(QUANTIZED_FROM), clustered(QUANTIZED_FROM, seed=8)))
    state = store._spaces[WorkspaceId(WS)]
    await store.search_vector(WS, clustered(1, seed=9)[0], top_k=3)
    assert state.quantized is not None
    await store.upsert(WS, nodes(range(QUANTIZED_FROM, QUANTIZED_FROM + 10), clustered(10, seed=10)))
    await until(lambda: state.ann is not None, limit=BUILD_LIMIT)  # built in the background
    assert state.quantized is None and state.quantized_rows() is None  # the index holds its own int8 copy


async def test_no_copy_is_made_while_an_index_is_being_built() -> None:
    store = MemoryVectorStore(MemoryStoreParams(), embedder=HashEmbeddingClient(dimensions=DIM))
    await store.upsert(WS, nodes(range(QUANTIZED_FROM), clustered(QUANTIZED_FROM, seed=8)))
    state = store._spaces[WorkspaceId(WS)]
    state.ann_dirty = set()  # what the store sets while a background build runs (`_build_ann`)
    await store.search_vector(WS, clustered(1, seed=9)[0], top_k=3)
    assert state.quantized is None
    state.ann_dirty = None
    await store.search_vector(WS, clustered(1, seed=9)[0], top_k=3)
    assert state.quantized is not None
    await store.close()


def int8_exact(count: int, step: float, seed: int) -> np.ndarray:
    """Rows that int8 holds exactly (each has a code of 127, so its step is `step`), of norm ~1: the row and query
    error terms are 0 and only the float32 rounding of the two scans is left for the bound to cover. The codes are
    large and of one sign, so dot products need all of float32's 24 bits and round."""
    codes = np.random.default_rng(seed).integers(64, 128, (count, DIM))
    codes[:, 0] = 127
    return (codes * step).astype(np.float32)


def test_the_bound_covers_the_error_of_every_row() -> None:
    """Against the float32 scan and exact arithmetic alike, on rows and queries of three kinds, so that each term of
    the bound is needed: unit vectors (the row's and the query's error), rows and queries that int8 holds exactly but
    for the float32 rounding of the scans (`ROUNDING`), a zero row and a one-dimension row."""
    rows = np.concatenate([clustered(2 * BLOCK_ROWS, seed=11), np.sign(clustered(BLOCK_ROWS // 2, seed=12))])
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[0] = 0.0
    rows[1] = np.eye(DIM, dtype=np.float32)[0]
    rows = np.concatenate([rows, int8_exact(BLOCK_ROWS, 3 * 2**-13, seed=13)])
    quantized = QuantizedRows.of(rows, len(rows))
    probes = np.concatenate([clustered(20, seed=14), np.sign(clustered(10, seed=15))])
    probes = np.concatenate([probes / np.linalg.norm(probes, axis=1, keepdims=True), int8_exact(20, 5 * 2**-13, 16)])
    for query in probes.astype(np.float32):
        approx, slack = quantized.scores(query, len(rows))
        exact = rows.astype(np.float64) @ query.astype(np.float64)
        for truth in (exact, dot_rows(rows, query).astype(np.float64)):
            assert (np.abs(approx - truth) <= slack).all()
        assert slack.max() < 0.05  # and it is tight enough to leave few candidates
