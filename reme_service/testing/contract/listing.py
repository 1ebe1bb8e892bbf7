"""Listing: every node in insertion order, without cap; ids sorted."""

from __future__ import annotations

import numpy as np

from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    WS,
    ContractBase,
    ids,
    make_node,
    unit_vector,
)


class ListingContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

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
