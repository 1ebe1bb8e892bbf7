"""UpdateVectorStoreOp: write the flow's results — upsert `MEMORY_LIST`, delete `DELETED_MEMORY_IDS`.

Order makes the update safe: the upsert (which embeds) runs first, so a failed embedding deletes nothing;
ids that were re-inserted are not deleted. A memory whose `when_to_use` did not change keeps its stored
vector (no embedding call). Writes `metadata.update_result = {"deleted_count", "inserted_count"}`.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.stores.base import VectorStore


class UpdateVectorStoreParams(OpParams):
    store: str = "default"
    lock: bool = True


class UpdateVectorStoreOp(ServiceOp[UpdateVectorStoreParams]):
    may_read = (keys.MEMORY_LIST, keys.DELETED_MEMORY_IDS, keys.EMBEDDED)

    async def run(self, ctx: ServiceContext) -> None:
        store = ctx.store(self.params.store)
        if self.params.lock:
            async with store.lock(ctx.workspace_id):
                result = await self._apply(ctx, store)
        else:
            result = await self._apply(ctx, store)
        ctx.response.metadata["update_result"] = result

    async def _apply(self, ctx: ServiceContext, store: VectorStore) -> dict[str, int]:
        workspace = ctx.workspace_id
        memories = ctx.get(keys.MEMORY_LIST, [])
        nodes = []
        for memory in memories:
            memory.workspace_id = workspace
            nodes.append(memory.to_vector_node())
        if nodes:
            existing = {n.unique_id: n for n in await store.get(workspace, [n.unique_id for n in nodes])}
            embedded = ctx.get(keys.EMBEDDED, {}).get(self.params.store, {})
            for node in nodes:
                old = existing.get(node.unique_id)
                if old is not None and old.content == node.content and old.vector is not None:
                    node.vector = old.vector
                elif (vector := embedded.get(node.content)) is not None:
                    node.vector = vector  # embedded earlier in this request (dedup), by this store's embedder
            await store.upsert(workspace, nodes)
        written = {n.unique_id for n in nodes}
        to_delete = [i for i in ctx.get(keys.DELETED_MEMORY_IDS, []) if i not in written]
        deleted = await store.delete_ids(workspace, to_delete) if to_delete else 0
        return {"deleted_count": deleted, "inserted_count": len(nodes)}
