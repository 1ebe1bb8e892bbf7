"""Deleting by id: the count of those that existed."""

from __future__ import annotations

from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    WS,
    ContractBase,
    corpus_nodes,
    ids,
)


class DeleteContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

    async def test_delete_ids_returns_the_count_deleted(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        assert await store.delete_ids(WS, ["deploy", "cat", "missing", "cat"]) == 2
        assert await store.delete_ids(WS, ["deploy"]) == 0
        assert await store.delete_ids(WS, []) == 0
        assert await store.delete_ids("never-created", ["x"]) == 0
        assert ids(await store.list_nodes(WS)) == ["retry", "yaml", "coffee", "sql"]
        assert await store.get(WS, ["deploy", "cat"]) == []
