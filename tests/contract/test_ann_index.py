"""The approximate index of big in-process workspaces (`stores/inproc/ann.py`): kept in step with inserts, replaces and
deletes (also those made while a background build runs), answers as exact search does when its search is wide
enough, saved with the local store's snapshot and trusted again only when it matches it, and crash-safe (kill -9)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np
import pytest

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.inproc.ann import AnnIndex
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.inproc.workspace import INLINE_ROWS, WorkspaceState
from reme_service.stores.params import AnnParams, LocalStoreParams, MemoryStoreParams
from tests.conditions import until
from tests.contract import local_store_writer as writer

pytestmark = pytest.mark.anyio

DIM = 32
WS = "big"
BUILD_LIMIT = 30.0  # seconds a background index build may take on a busy machine
WIDE = AnnParams(min_rows=1, expansion_search=1024)  # a search this wide finds the true neighbours of small data


def nodes(start: int, count: int, seed: int) -> list[VectorNode]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return [
        VectorNode(unique_id=f"n{i}", content=f"memory {i} about topic {i % 17}", vector=vectors[i - start],
                   metadata={"kind": ("a", "b", "c")[i % 3], "i": i})
        for i in range(start, start + count)
    ]  # fmt: skip


def queries(count: int, seed: int = 99, dim: int = DIM) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)


def assert_index_follows_rows(state: WorkspaceState) -> None:
    """Every row has exactly one graph entry, mapped both ways, holding (quantised) that row's vector."""
    ann = state.ann
    assert ann is not None
    size = state.size
    assert ann.count == size and len(ann) == size
    keys = ann.row_keys[:size]
    assert (ann.key_rows[keys.astype(np.int64)] == np.arange(size)).all()
    assert np.asarray(ann.index.contains(keys)).all()
    if size:
        stored = np.asarray(ann.index.get(keys, dtype="f32")).reshape(size, -1)
        np.testing.assert_allclose(stored, state.matrix[:size], atol=0.02)


def assert_agrees(fast: list[SearchHit], everything: list[SearchHit], top_k: int) -> None:
    """`fast` (the index's top k) against `everything` (exact search, deeper than k): every hit with its exact
    score, in exact order, and the exact top k's scores but for at most one neighbour the graph did not reach (an
    HNSW graph under inserts, replaces and deletes does not promise every neighbour, however wide the search)."""
    exact_score = {h.node.unique_id: h.score for h in everything}
    assert [h.score for h in fast] == [exact_score.get(h.node.unique_id) for h in fast]
    assert [h.score for h in fast] == sorted((h.score for h in fast), reverse=True)
    assert len(fast) == min(top_k, len(everything))
    # by score, not id: memories of equal vectors (equal texts, hash embedder) tie, and either may come back
    missed = Counter(h.score for h in everything[:top_k]) - Counter(h.score for h in fast)
    assert sum(missed.values()) <= 1


async def assert_answers_as_exact(
    store: MemoryVectorStore, workspace: str, probes: np.ndarray, top_k: int = 10
) -> None:
    """The index's answers (unfiltered, filtered, hybrid) are exact search's: every hit with its exact score, in
    exact order, and the top k the exact top k but for at most one neighbour the graph did not reach (an HNSW graph
    under concurrent inserts, replaces and deletes does not promise every neighbour, however wide the search; a
    wrong row mapping or a stale vector gives wrong scores, which this catches)."""

    wide = 4 * top_k  # the exact ranking this deep holds every hit the index may give
    for i, probe in enumerate(probes):
        flt = {"metadata.kind": "b"} if i % 2 else None
        fast = await store.search_vector(workspace, probe, top_k=top_k, filter=flt)
        assert_agrees(fast, await store.search_vector(workspace, probe, top_k=wide, filter=flt, exact=True), top_k)
    text = "memory about topic 5"
    fast = await store.search_hybrid(workspace, text, top_k=top_k)
    assert_agrees(fast, await store.search_hybrid(workspace, text, top_k=wide, exact=True), top_k)


async def test_the_index_follows_inserts_replaces_and_deletes() -> None:
    store = MemoryVectorStore(MemoryStoreParams(ann=WIDE), embedder=HashEmbeddingClient(dimensions=DIM))
    rng = np.random.default_rng(1)
    await store.upsert(WS, nodes(0, 400, seed=1))
    state = store._spaces[WorkspaceId(WS)]
    assert state.ann is not None  # small: built at once
    probes = queries(12)
    next_id = 400
    for round_ in range(4):
        await store.upsert(WS, nodes(next_id, 60, seed=10 + round_))  # new rows
        next_id += 60
        replaced = rng.choice(next_id, 40, replace=False)
        fresh = nodes(0, next_id, seed=50 + round_)
        await store.upsert(WS, [fresh[i] for i in replaced])  # rows replaced in place
        await store.delete_ids(WS, [f"n{i}" for i in rng.choice(next_id, 70, replace=False)])  # holes filled by moves
        assert_index_follows_rows(state)
        await assert_answers_as_exact(store, WS, probes)
    await store.close()


async def test_a_background_build_catches_up_with_the_writes_made_during_it(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()
    build = AnnIndex.build

    def held_build(*args: Any) -> AnnIndex | None:  # the real build, once the test has written during it
        started.set()
        release.wait(30)
        return build(*args)

    monkeypatch.setattr(AnnIndex, "build", staticmethod(held_build))
    params = AnnParams(min_rows=INLINE_ROWS, expansion_search=1024)
    store = MemoryVectorStore(MemoryStoreParams(ann=params), embedder=HashEmbeddingClient(dimensions=DIM))
    total = INLINE_ROWS + 200
    await store.upsert(WS, nodes(0, total, seed=2))
    state = store._spaces[WorkspaceId(WS)]
    await anyio.to_thread.run_sync(started.wait, 30)
    assert state.ann is None  # building: searches are exact meanwhile
    await assert_answers_as_exact(store, WS, queries(2))
    await store.upsert(WS, nodes(total, 50, seed=3))
    await store.upsert(WS, nodes(0, 30, seed=4))  # replaced rows
    await store.delete_ids(WS, [f"n{i}" for i in range(5, total, 97)])
    release.set()
    await until(lambda: state.ann is not None, limit=BUILD_LIMIT)
    assert state.ann_dirty is None
    assert_index_follows_rows(state)
    await assert_answers_as_exact(store, WS, queries(6))
    await store.close()


def local_store(path: Path, ann: AnnParams = WIDE, **options: Any) -> LocalVectorStore:
    return LocalVectorStore(
        LocalStoreParams(store_dir=path, ann=ann, **options), embedder=HashEmbeddingClient(dimensions=DIM)
    )


async def _reopened_state(path: Path, ann: AnnParams) -> tuple[LocalVectorStore, WorkspaceState]:
    store = local_store(path, ann)
    await store.start()
    await store.list_ids(WS)  # loads the workspace
    return store, store._spaces[WorkspaceId(WS)]


async def test_the_index_file_is_reloaded_only_when_it_matches_the_snapshot(tmp_path: Path) -> None:
    # above INLINE_ROWS an index that is not loaded is rebuilt in the background: at first use it is absent
    ann = AnnParams(min_rows=INLINE_ROWS, expansion_search=1024)
    store = local_store(tmp_path, ann)
    await store.start()
    await store.replace_workspace(WS, nodes(0, INLINE_ROWS + 100, seed=5))
    first = store._spaces[WorkspaceId(WS)]
    await until(lambda: first.ann is not None and (tmp_path / f"{WS}.ann").exists(), limit=BUILD_LIMIT)
    await store.upsert(WS, nodes(50, 10, seed=6))  # in the log only: replayed onto the reloaded index
    await store.delete_ids(WS, ["n3", "n4"])
    await store.compact(WS)
    stale = (tmp_path / f"{WS}.ann").read_bytes()
    await store.upsert(WS, nodes(70, 5, seed=7))
    await store.close()  # compacts: a new snapshot, and the index saved with its stamp

    store, state = await _reopened_state(tmp_path, ann)
    assert state.ann is not None  # loaded with the snapshot, the log applied to it
    assert_index_follows_rows(state)
    await assert_answers_as_exact(store, WS, queries(6))
    await store.upsert(WS, nodes(80, 5, seed=8))  # logged, not compacted
    crash(store)

    index_file = tmp_path / f"{WS}.ann"
    corruptions: list[Callable[[bytes], bytes]] = [
        lambda _: stale,  # the index of an older snapshot
        lambda data: data[:-100] + bytes(100),  # a zeroed tail
        lambda data: data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 1]) + data[len(data) // 2 + 1 :],
    ]
    for corrupt in corruptions:
        index_file.write_bytes(corrupt(index_file.read_bytes()))
        store, state = await _reopened_state(tmp_path, ann)
        assert state.ann is None, "an index that does not match the snapshot was trusted"
        await assert_answers_as_exact(store, WS, queries(2))  # exact until the rebuild is ready
        await until(partial(lambda state: state.ann is not None, state), limit=BUILD_LIMIT)
        assert_index_follows_rows(state)
        await assert_answers_as_exact(store, WS, queries(4))
        # the rebuilt index is saved
        await until(partial(lambda store: not store._write_lock(WS).locked(), store), limit=BUILD_LIMIT)
        crash(store)


def crash(store: LocalVectorStore) -> None:
    """Leave `store` as a killed process would: nothing flushed or compacted, its directory free for the next."""
    store._closing = True
    store.files.handles.close_all()
    assert store.files._dir_lock is not None
    os.close(store.files._dir_lock)
    store.files._dir_lock = None


def _run_writer_until_killed(store_dir: Path, first: int, wanted_acks: int, stderr_path: Path) -> list[int]:
    """The index variant of the writer (test_local_store's kill -9 test), killed soon after `wanted_acks` acks."""
    pause = np.random.default_rng(wanted_acks).uniform(0.0, 0.01)
    return writer.run_until_killed(store_dir, first, wanted_acks, stderr_path, ["4", "1"], pause)


async def test_kill_9_during_index_updates_loses_nothing_and_the_index_agrees(tmp_path: Path) -> None:
    store_dir, stderr_path = tmp_path / "vs", tmp_path / "writer.stderr"
    next_batch, acked, in_flight = 0, set[int](), set[int]()  # in flight: written or not when the kill came
    for wanted in (11, 7, 9):
        got = await anyio.to_thread.run_sync(_run_writer_until_killed, store_dir, next_batch, wanted, stderr_path)
        assert len(got) >= wanted, f"the writer failed:\n{stderr_path.read_text()}"
        acked |= set(got)
        in_flight.add(max(got) + 1)
        store = LocalVectorStore(
            LocalStoreParams(store_dir=store_dir, ann=AnnParams(min_rows=1, expansion_search=2048)),
            embedder=HashEmbeddingClient(dimensions=writer.DIM),
        )
        present = set(await store.list_ids(writer.WORKSPACE))
        deleted = {uid for b in acked for uid in writer.deleted_ids(b)}
        maybe_deleted = {uid for b in in_flight for uid in writer.deleted_ids(b)}
        for batch in acked:
            for node in writer.batch_nodes(batch):
                uid = node.unique_id
                if uid in deleted:
                    assert uid not in present, f"{uid} was deleted and came back"
                elif uid not in maybe_deleted:
                    assert uid in present, f"acknowledged {uid} was lost"
        state = store._spaces[WorkspaceId(writer.WORKSPACE)]
        assert state.ann is not None
        assert_index_follows_rows(state)
        probes = queries(8, seed=wanted, dim=writer.DIM)
        for probe in probes:
            fast = await store.search_vector(writer.WORKSPACE, probe, top_k=10)
            assert_agrees(fast, await store.search_vector(writer.WORKSPACE, probe, top_k=40, exact=True), 10)
        await store.close()
        next_batch = max(got) + 2
