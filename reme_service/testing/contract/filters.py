"""The filter grammar (`stores/filters.py`) in searches and listings alike; unknown operators are a 400."""

from __future__ import annotations

from typing import Any

import pytest

from reme_service.errors import InvalidRequestError
from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    WS,
    ContractBase,
    corpus_nodes,
    ids,
    unit_vector,
)


class FilterContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

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
