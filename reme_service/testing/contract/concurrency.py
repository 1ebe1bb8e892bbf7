"""Concurrency: concurrent writers and readers see whole operations, writes to a workspace run in order, and a
cancelled writer's write completes.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    DIM,
    WS,
    ContractBase,
    HeldCall,
    ids,
    make_node,
    unit_vector,
)


class ConcurrencyContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

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
