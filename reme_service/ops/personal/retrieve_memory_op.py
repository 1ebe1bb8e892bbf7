"""RetrieveMemoryOp: the personal memories most similar to the query — candidates for fusion.

The search is filtered to personal memories (`metadata.memory_type`) of the requested user
(`metadata.target`, when `user_name` was sent), so other users' memories and other memory kinds never appear.
It fetches `max(recall_top_k, top_k)` candidates, drops later ones repeating an earlier one's user and content, and
puts the similarity in `relevance` (the stored `score` is left alone). Output `MEMORY_LIST`, and the query's
vector (`QUERY_VECTOR`) for later searches. An unknown workspace gives no candidates and no embedding call.
"""

from __future__ import annotations

from typing import ClassVar

from reme_service.flow import keys as flow_keys
from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op, OpParams
from reme_service.ops.personal import keys
from reme_service.ops.personal.memories import personal_filter
from reme_service.schema.memory import BaseMemory, memory_from_node
from reme_service.schema.vector_node import SearchHit

MAX_RECALL = 200


def hits_to_memories(hits: list[SearchHit], threshold: float | None = None) -> list[BaseMemory]:
    """Memories from search hits, best first, with `relevance` set; a user's repeated contents dropped."""
    seen: set[tuple[str, str]] = set()
    memories: list[BaseMemory] = []
    for hit in hits:
        if threshold is not None and hit.score < threshold:
            continue
        memory = memory_from_node(hit.node)
        key = (getattr(memory, "target", ""), memory.content.strip())
        if key in seen:
            continue
        seen.add(key)
        memory.relevance = round(hit.score, 6)
        memories.append(memory)
    return memories


class RetrieveMemoryParams(OpParams):
    recall_top_k: int = 20
    threshold_score: float | None = None
    store: str = "default"


class RetrieveMemoryOp(Op):
    Params: ClassVar[type[OpParams]] = RetrieveMemoryParams
    params: RetrieveMemoryParams

    async def run(self, ctx: FlowContext) -> None:
        top_k = int(ctx.field("top_k", 3))
        count = max(1, min(max(self.params.recall_top_k, top_k), MAX_RECALL))
        store = ctx.services.store(self.params.store)
        if not await store.exists_workspace(ctx.workspace_id):
            ctx[keys.QUERY_VECTOR] = None
            ctx[flow_keys.MEMORY_LIST] = []
            return
        vector = (await store.embedder.embed([ctx[flow_keys.QUERY]]))[0]
        ctx[keys.QUERY_VECTOR] = vector  # FuseRerankOp searches again without embedding the query again
        flt = personal_filter(ctx.get(keys.TARGET, None))
        hits = await store.search_vector(ctx.workspace_id, vector, top_k=count, filter=flt)
        ctx[flow_keys.MEMORY_LIST] = hits_to_memories(hits, self.params.threshold_score)
