"""The memory backend against the store contract."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from reme_service.schema import vector_node
from reme_service.stores.base import VectorStore
from reme_service.stores.inproc import packed, workspace
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.params import AnnParams, MemoryStoreParams
from reme_service.stores.summary import Tally, WorkspaceSummary
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import WS, CountingEmbedder, make_node, unit_vector

pytestmark = pytest.mark.anyio


class TestMemoryStore(ContractTests):
    MID_WRITE = ("_apply_upsert", False)  # the (no-op) persistence has logged the batch; RAM does not hold it yet

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder) -> AsyncIterator[MemoryVectorStore]:
        store = MemoryVectorStore(embedder=embedder)
        await store.start()
        yield store
        await store.close()


class TestMemoryStoreWithIndex(ContractTests):
    """The whole contract again with the approximate index on for every workspace (`ann.min_rows` 1)."""

    MID_WRITE = ("_apply_upsert", False)

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder) -> AsyncIterator[MemoryVectorStore]:
        store = MemoryVectorStore(MemoryStoreParams(ann=AnnParams(min_rows=1)), embedder=embedder)
        await store.start()
        yield store
        await store.close()


class TestInProcessSummary:
    """`summarize` of the in-process stores: counted from the stored metadata, never by making nodes, and counted
    once: the writes keep the tally up to date (`WorkspaceState.summarize`)."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[MemoryVectorStore]:
        store = MemoryVectorStore(embedder=CountingEmbedder())
        await store.start()
        yield store
        await store.close()

    @pytest.fixture
    def counted(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
        """How many nodes were made (`export_node`, `trusted_node`), times the base's default ran, and full counts."""
        calls = {"nodes": 0, "default": 0, "counts": 0}

        def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return original(*args, **kwargs)

            return wrapper

        monkeypatch.setattr(workspace, "export_node", counting("nodes", packed.export_node))
        monkeypatch.setattr(packed, "trusted_node", counting("nodes", vector_node.trusted_node))
        monkeypatch.setattr(VectorStore, "summarize", counting("default", VectorStore.summarize))
        monkeypatch.setattr(Tally, "of", classmethod(counting("counts", Tally.of.__func__)))  # type: ignore[attr-defined]
        return calls

    async def test_no_node_is_made_and_the_tally_is_kept(
        self, store: MemoryVectorStore, counted: dict[str, int]
    ) -> None:
        count = 3_000  # past OFF_LOOP_ITEMS: the first count runs in a worker thread
        nodes = [
            make_node(f"m{i:05d}", vector=unit_vector(i), memory_type=("task", "tool")[i % 2],
                      time_modified=f"2025-01-01 00:00:{i % 50:02d}")
            for i in range(count)
        ]  # fmt: skip
        await store.upsert(WS, nodes)
        counted.update(nodes=0, default=0, counts=0)
        assert await store.summarize(WS) == WorkspaceSummary(count, {"task": 1500, "tool": 1500}, "2025-01-01 00:00:49")
        assert counted == {"nodes": 0, "default": 0, "counts": 1}
        await store.upsert(WS, [make_node("m00000", vector=unit_vector(1), memory_type="personal",
                                          time_modified="2025-01-02 00:00:00")])  # fmt: skip
        await store.delete_ids(WS, ["m00001", "m00003"])
        summary = await store.summarize(WS)
        assert summary == WorkspaceSummary(
            count - 2, {"task": 1499, "tool": 1498, "personal": 1}, "2025-01-02 00:00:00"
        )
        assert counted == {"nodes": 0, "default": 0, "counts": 1}  # kept up to date by the writes, not counted again
        latest = make_node("m00000", vector=unit_vector(1), memory_type="personal", time_modified="2025-01-03 00:00:00")
        await store.upsert(WS, [latest])  # the latest memory updated: its old time goes, a newer one comes
        assert (await store.summarize(WS)).last_modified == "2025-01-03 00:00:00"
        assert counted == {"nodes": 0, "default": 0, "counts": 1}
        await store.delete_ids(WS, ["m00000"])  # the latest goes: counted afresh, still without a node
        assert (await store.summarize(WS)).last_modified == "2025-01-01 00:00:49"
        assert counted == {"nodes": 0, "default": 0, "counts": 2}
