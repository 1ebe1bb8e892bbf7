"""Embedding spaces: recorded with the vectors, another one refused (409) until the workspace is reembedded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reme_service.ops.vector_store.reembed import reembed_workspace
from reme_service.stores.base import VectorStore
from reme_service.stores.spaces import EmbeddingSpaceConflictError, space_of
from reme_service.testing.contract.support import (
    CORPUS,
    DIM,
    WS,
    ContractBase,
    CountingEmbedder,
    HeldCall,
    corpus_nodes,
    ids,
    make_node,
    unit_vector,
)


class EmbeddingSpaceContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

    async def test_the_embedding_space_is_recorded(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        assert await store.workspace_space(WS) is None
        await store.upsert(WS, corpus_nodes())
        assert await store.workspace_space(WS) == space_of(embedder)
        await store.replace_workspace("replaced", [make_node("x")])
        assert await store.workspace_space("replaced") == space_of(embedder)
        await store.upsert("given", [make_node("g", vector=unit_vector(1, dim=16))])  # not the embedder's vectors
        assert await store.workspace_space("given") is None

    @pytest.mark.parametrize("other", [{"model_name": "another-model"}, {"dimensions": DIM // 2}])
    async def test_another_embedding_space_is_refused_until_reembedded(
        self, store: VectorStore, other: dict[str, Any]
    ) -> None:
        await store.upsert(WS, corpus_nodes())
        await store.upsert("untouched", [make_node("u")])
        store.embedder = CountingEmbedder(**other)  # the service restarted with another embedder
        refusals = [
            store.upsert(WS, [make_node("new")]),
            store.search(WS, "docker", top_k=2),
            store.search_hybrid(WS, "docker", top_k=2),
            store.search_vector(WS, unit_vector(1, dim=store.embedder.dimensions), top_k=2),
            store.copy_workspace(WS, "copied"),
        ]
        for refused in refusals:
            with pytest.raises(EmbeddingSpaceConflictError) as caught:
                await refused
            assert caught.value.status == 409 and caught.value.code == "conflict"
            assert f"hash/hash-bow ({DIM} dimensions)" in caught.value.message  # the workspace's space
            assert space_of(store.embedder).label() in caught.value.message  # and the service's
        assert not await store.exists_workspace("copied") or await store.list_nodes("copied") == []
        assert ids(await store.get(WS, ["deploy", "retry"])) == ["deploy", "retry"]  # reading and deleting work
        assert await store.delete_ids(WS, ["sql"]) == 1
        result = await reembed_workspace(store, WS)
        assert result["size"] == len(CORPUS) - 1 and result["to_space"] == space_of(store.embedder).model_dump()
        assert result["from_space"]["dimensions"] == DIM
        assert await store.workspace_space(WS) == space_of(store.embedder)
        assert (await store.search(WS, CORPUS[1][1], top_k=1))[0].node.unique_id == "retry"
        assert await store.upsert(WS, [make_node("new")]) == 1
        with pytest.raises(EmbeddingSpaceConflictError):  # another workspace keeps its space until reembedded
            await store.upsert("untouched", [make_node("v")])

    async def test_an_empty_workspace_takes_the_current_space(self, store: VectorStore) -> None:
        await store.create_workspace(WS)
        store.embedder = CountingEmbedder(model_name="another-model")
        assert await store.upsert(WS, [make_node("a")]) == 1
        assert await store.workspace_space(WS) == space_of(store.embedder)

    async def test_reembed_keeps_writes_made_during_it_and_searches_answer(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())  # in the current space: its writes and searches go on meanwhile
        held = HeldCall(store.embedder, "embed", after=False)  # the next call: re-embedding the whole workspace
        running = asyncio.create_task(reembed_workspace(store, WS))
        await held.reached.wait()
        assert (await store.search(WS, CORPUS[0][1], top_k=1))[0].node.unique_id == "deploy"
        await store.upsert(WS, [make_node("late", "a memory written during the reembed")])
        await store.upsert(WS, [make_node("cat", "the user has a dog called Rex")])  # changed text
        await store.delete_ids(WS, ["coffee"])
        swap = HeldCall(store, "replace_workspace", after=False)
        held.release.set()
        await swap.reached.wait()  # caught up, about to swap
        acquired = asyncio.Event()

        async def writer() -> None:
            async with store.lock(WS):  # as every writer of the service does
                acquired.set()
                await store.upsert(WS, [make_node("last", "written while the swap was pending")])

        writing = asyncio.create_task(writer())
        with pytest.raises(TimeoutError):  # the reembed holds the workspace's lock from its catch-up to its swap
            await asyncio.wait_for(acquired.wait(), 0.3)
        swap.release.set()
        result = await running
        await writing
        assert result["size"] == len(CORPUS) and result["caught_up"] == 2  # "late" and the changed "cat"
        assert sorted(ids(await store.list_nodes(WS))) == sorted(
            [uid for uid, *_ in CORPUS if uid != "coffee"] + ["late", "last"]
        )
        assert (await store.search(WS, "a memory written during the reembed", top_k=1))[0].node.unique_id == "late"
        assert (await store.search(WS, "dog called Rex", top_k=1))[0].node.unique_id == "cat"
