"""Workspaces: create, exist, delete, list; validated ids; reads of an unknown workspace are empty."""

from __future__ import annotations

import pytest

from reme_service.errors import InvalidRequestError
from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    CORPUS,
    DIM,
    WS,
    ContractBase,
    CountingEmbedder,
    corpus_nodes,
    ids,
    make_node,
    unit_vector,
)


class WorkspaceContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

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

    async def test_unknown_workspace_reads_are_empty(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        assert await store.search("nowhere", "anything", top_k=5) == []
        assert embedder.calls == 0
        assert await store.search_vector("nowhere", unit_vector(0), top_k=5) == []
        assert await store.list_nodes("nowhere") == []
        assert await store.get("nowhere", ["a"]) == []
        await store.create_workspace("empty")
        assert await store.search("empty", "anything", top_k=5) == []
        assert await store.list_nodes("empty", with_vectors=True) == []
