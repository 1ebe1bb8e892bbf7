"""`vector_store action=reembed`: move a workspace to the store's current embedding space.

1. Outside any lock, list the workspace's memories and embed every text with the store's embedder (the long part):
   the workspace keeps answering as before meanwhile — searches from its old vectors (or, when those are of another
   space, with the 409 they got before), writes as usual.
2. Under the workspace's lock (`store.lock`, which every writer takes), list it again: a memory whose text is
   unchanged takes its new vector, one written or changed since step 1 is embedded now, one deleted since is gone.
3. `replace_workspace` installs the new set with the store's space, atomically: a crash or a failure anywhere
   before leaves the workspace as it was (nothing is written until the swap, so nothing is left to clean up). The
   memories are the same ones: the swap is not reported as their deletion and re-creation (no history entries,
   no change events: it is written through `GuardedStore.vectors_only`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reme_service.schema.vector_node import VectorNode
from reme_service.storage.guarded import GuardedStore
from reme_service.stores.base import VectorStore
from reme_service.stores.vectors import embed_checked

logger = logging.getLogger("reme_service.library")


async def reembed_workspace(store: VectorStore, workspace_id: str) -> dict[str, Any]:
    """Re-embed every memory of the workspace with `store.embedder` and swap the result in; the answer says how
    many memories it holds, how many were embedded again at the swap, and the spaces before and after."""
    started = time.perf_counter()
    if not await store.exists_workspace(workspace_id):
        return {"size": 0, "caught_up": 0, "from_space": None, "to_space": store.space.model_dump()}
    before = await store.workspace_space(workspace_id)
    nodes = await store.list_nodes(workspace_id)
    vectors = await _embed(store, workspace_id, [node.content for node in nodes])
    built = {node.unique_id: (node.content, vectors[row]) for row, node in enumerate(nodes)}
    del nodes
    async with store.lock(workspace_id):
        current = await store.list_nodes(workspace_id)
        stale = [node for node in current if not _unchanged(built, node)]
        fresh = await _embed(store, workspace_id, [node.content for node in stale])
        late = {node.unique_id: fresh[row] for row, node in enumerate(stale)}
        for node in current:
            node.vector = late[node.unique_id] if node.unique_id in late else built[node.unique_id][1]
        # the same memories: no history entries, no change events (a bare backend records nothing anyway)
        quiet = store.vectors_only() if isinstance(store, GuardedStore) else store
        size = await quiet.replace_workspace(workspace_id, current)
    seconds = time.perf_counter() - started
    logger.info("re-embedded %d memories of %s in %.1f s (%d at the swap)", size, workspace_id, seconds, len(stale))
    return {
        "size": size,
        "caught_up": len(stale),
        "from_space": before.model_dump() if before is not None else None,
        "to_space": store.space.model_dump(),
    }


def _unchanged(built: dict[str, tuple[str, NDArray[np.float32]]], node: VectorNode) -> bool:
    known = built.get(node.unique_id)
    return known is not None and known[0] == node.content


async def _embed(store: VectorStore, workspace_id: str, texts: list[str]) -> NDArray[np.float32]:
    """The texts' vectors from the store's embedder, checked to be one per text of its dimension."""
    dim = store.embedder.dimensions
    if not texts:
        return np.empty((0, dim), np.float32)
    return await embed_checked(store.embedder, workspace_id, texts, dim)
