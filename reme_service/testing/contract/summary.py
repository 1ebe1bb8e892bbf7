"""`summarize`: answers as the base's default (counting `list_nodes`) through every change."""

from __future__ import annotations

from typing import Any

from reme_service.schema.vector_node import VectorNode
from reme_service.stores.base import VectorStore
from reme_service.stores.summary import WorkspaceSummary
from reme_service.testing.contract.support import (
    WS,
    ContractBase,
    make_node,
    unit_vector,
)


class SummaryContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

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
