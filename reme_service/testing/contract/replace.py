"""`replace_workspace` (atomic: embeds first, swaps last) and `copy_workspace` (vectors reused)."""

from __future__ import annotations

import numpy as np
import pytest

from reme_service.errors import DimensionMismatchError, EmbeddingError
from reme_service.stores.base import VectorStore
from reme_service.testing.contract.support import (
    CORPUS,
    WS,
    ContractBase,
    CountingEmbedder,
    corpus_nodes,
    ids,
    make_node,
    unit_vector,
)


class ReplaceCopyContract(ContractBase):
    """The tests of this capability (module docstring); a subclass provides the `store` fixture."""

    async def test_replace_workspace(self, store: VectorStore) -> None:
        await store.upsert(WS, corpus_nodes())
        assert await store.replace_workspace(WS, [make_node("x", "new x"), make_node("y", "new y")]) == 2
        assert ids(await store.list_nodes(WS)) == ["x", "y"]
        assert (await store.search(WS, "new y", top_k=1))[0].node.unique_id == "y"
        assert await store.replace_workspace("brand-new", [make_node("z")]) == 1
        assert ids(await store.list_nodes("brand-new")) == ["z"]

    async def test_replace_workspace_is_atomic(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        await store.upsert(WS, corpus_nodes())
        before = await store.list_nodes(WS, with_vectors=True)
        bad_batch = [make_node("x", "embedded"), make_node("y", vector=unit_vector(1, dim=16))]
        with pytest.raises(DimensionMismatchError):
            await store.replace_workspace(WS, bad_batch)
        embedder.fail = True
        with pytest.raises(EmbeddingError):
            await store.replace_workspace(WS, [make_node("x", "needs embedding")])
        embedder.fail = False
        after = await store.list_nodes(WS, with_vectors=True)
        assert ids(after) == ids(before)
        for old, new in zip(before, after, strict=True):
            np.testing.assert_array_equal(old.vector, new.vector)
        assert (await store.search(WS, CORPUS[1][1], top_k=1))[0].node.unique_id == "retry"

    async def test_copy_workspace_reuses_vectors(self, store: VectorStore, embedder: CountingEmbedder) -> None:
        await store.upsert(WS, corpus_nodes())
        calls = embedder.calls
        assert await store.copy_workspace(WS, "copy") == len(CORPUS)
        assert embedder.calls == calls
        source = await store.list_nodes(WS, with_vectors=True)
        copied = await store.list_nodes("copy", with_vectors=True)
        assert ids(copied) == ids(source)
        for a, b in zip(source, copied, strict=True):
            np.testing.assert_array_equal(a.vector, b.vector)
            assert b.workspace_id == "copy" and a.metadata == b.metadata
        assert await store.copy_workspace("nothing-here", "copy2") == 0
        assert await store.exists_workspace("copy2")
