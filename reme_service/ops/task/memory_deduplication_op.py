"""MemoryDeduplicationOp: drop new task memories that repeat an existing one or an earlier one of the batch.

A memory is compared through its `when_to_use` embedding — the text the store embeds — so the workspace's
stored vectors are used as they are: each candidate is embedded once (one batched call for the whole batch)
and looked up with one vector search over the workspace's task memories, then compared with the memories
of the batch already kept (a matrix product). A candidate whose best cosine similarity exceeds
`similarity_threshold` is dropped and listed in `metadata.duplicate_memories` with what it duplicates.

ReMe 0.2 embedded `when_to_use + content` for every pair (O(n²) embedding calls) and, through a wrong
attribute name, never compared against the stored memories at all.

Writes `memory_list` (context and response) and `answer`, so the answer lists exactly what is stored, and
`embedded` (the candidates' vectors), which `UpdateVectorStoreOp` reuses instead of embedding them again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reme_service.flow.op import OpParams
from reme_service.ops.common import keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.task.memory_validation_op import publish
from reme_service.schema.memory import TaskMemory


class MemoryDeduplicationParams(OpParams):
    similarity_threshold: float = 0.5
    store: str = "default"


class MemoryDeduplicationOp(ServiceOp[MemoryDeduplicationParams]):
    may_read = (keys.MEMORY_LIST, keys.EMBEDDED)
    writes = (keys.MEMORY_LIST, keys.EMBEDDED)

    async def run(self, ctx: ServiceContext) -> None:
        memories = [m for m in ctx.get(keys.MEMORY_LIST, []) if isinstance(m, TaskMemory)]
        if not memories:
            publish(ctx, [])
            return
        store = ctx.store(self.params.store)
        vectors = await ctx.services.store_embedder(self.params.store).embed([m.when_to_use for m in memories])
        embedded = ctx.get(keys.EMBEDDED, {})
        embedded.setdefault(self.params.store, {}).update((m.when_to_use, vectors[i]) for i, m in enumerate(memories))
        ctx[keys.EMBEDDED] = embedded  # UpdateVectorStoreOp stores the kept memories with these vectors
        threshold = self.params.similarity_threshold
        task_only = {"metadata.memory_type": "task"}
        exists = await store.exists_workspace(ctx.workspace_id)
        kept: list[TaskMemory] = []
        kept_rows: list[int] = []
        duplicates: list[dict[str, Any]] = []
        for row, memory in enumerate(memories):
            best: tuple[float, str] = (-1.0, "")
            if exists:
                hits = await store.search_vector(ctx.workspace_id, vectors[row], top_k=1, filter=task_only)
                if hits:
                    best = (hits[0].score, hits[0].node.unique_id)
            if kept_rows:
                similarity = vectors[kept_rows] @ vectors[row]
                index = int(np.argmax(similarity))
                if float(similarity[index]) > best[0]:
                    best = (float(similarity[index]), kept[index].memory_id)
            if best[0] > threshold:
                duplicates.append(
                    {
                        "when_to_use": memory.when_to_use,
                        "content": memory.content,
                        "duplicate_of": best[1],
                        "similarity": round(best[0], 4),
                    }
                )
                continue
            kept.append(memory)
            kept_rows.append(row)
        if duplicates:
            ctx.response.metadata["duplicate_memories"] = duplicates
        publish(ctx, kept)
