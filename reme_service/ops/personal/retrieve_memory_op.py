"""RetrieveMemoryOp: the personal memories most similar to the query — candidates for fusion.

The search is filtered to personal memories (`metadata.memory_type`) of the requested user
(`metadata.target`, when `user_name` was sent), so other users' memories and other memory kinds never appear.
It fetches `max(recall_top_k, top_k)` candidates, drops later ones repeating an earlier one's user and content, and
puts the similarity in `relevance` (the stored `score` is left alone). Memories that do not hold at the request's
`as_of`, or now (`VALIDITY`: invalidated, expired or not yet valid; `lifecycle.py`), are dropped, so twice as many
candidates are fetched when validity is checked. Output `MEMORY_LIST`, and the query's vector (`QUERY_VECTOR`) and
how it ranked (`QUERY_LEXICAL_WEIGHT`) for later searches. An unknown workspace gives no candidates and no
embedding call.

With `hybrid` (the default) the similarity is the store's cosine fused with BM25 over the memories' texts
(`search_hybrid`, stemmed terms, the task recall's `lexical_weight`), as `RecallVectorStoreOp` ranks task memories:
on LoCoMo (`cookbook/bench/locomo_personal.py`) evidence hit@5 0.639 → 0.682. The query is embedded once, here, and
handed to the store's search (and, as `QUERY_VECTOR`, to FuseRerankOp's time search): one embedding call per
request with a remote embedder. `hybrid=False` is the plain cosine search.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import fields as common_fields, keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.search import ranked_search
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.lifecycle import Validity
from reme_service.ops.personal.memories import personal_filter
from reme_service.schema.memory import BaseMemory, memory_from_node
from reme_service.schema.vector_node import SearchHit

MAX_RECALL = 200
# the BM25 share of the fused search: 0.3 for personal memories (0.4 for task memories, `RecallVectorStoreOp`),
# chosen by leave-one-conversation-out cross-validation on LoCoMo (`cookbook/bench/locomo_personal_cv.py`)
PERSONAL_LEXICAL_WEIGHT = 0.3


def hits_to_memories(
    hits: list[SearchHit], threshold: float | None = None, *, validity: Validity | None = None
) -> list[BaseMemory]:
    """Memories from search hits, best first, with `relevance` set; a user's repeated contents dropped, and, with
    `validity`, those it does not keep."""
    seen: set[tuple[str, str]] = set()
    memories: list[BaseMemory] = []
    for hit in hits:
        if threshold is not None and hit.score < threshold:
            continue
        memory = memory_from_node(hit.node)
        if validity is not None and not validity.keeps(memory):
            continue
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
    hybrid: bool = True
    lexical_weight: float = PERSONAL_LEXICAL_WEIGHT


class RetrieveMemoryOp(ServiceOp[RetrieveMemoryParams]):
    inputs = (fields.TOP_K,)
    may_input = (common_fields.EXACT,)
    reads = (common_keys.QUERY,)
    may_read = (keys.TARGET, keys.VALIDITY)
    writes = (keys.QUERY_VECTOR, keys.QUERY_LEXICAL_WEIGHT, common_keys.MEMORY_LIST)

    async def run(self, ctx: ServiceContext) -> None:
        top_k = ctx.input(fields.TOP_K)
        validity = ctx.get(keys.VALIDITY, None)
        count = max(1, min(max(self.params.recall_top_k, top_k) * (1 if validity is None else 2), MAX_RECALL))
        store = ctx.store(self.params.store)
        if not await store.exists_workspace(ctx.workspace_id):
            ctx[keys.QUERY_VECTOR] = None
            ctx[keys.QUERY_LEXICAL_WEIGHT] = None
            ctx[common_keys.MEMORY_LIST] = []
            return
        flt = personal_filter(ctx.get(keys.TARGET, None))
        query = ctx[common_keys.QUERY]
        exact = ctx.input(common_fields.EXACT)
        vector = (await ctx.services.store_embedder(self.params.store).embed([query]))[0]
        ctx[keys.QUERY_VECTOR] = vector  # FuseRerankOp searches again without embedding the query again
        ctx[keys.QUERY_LEXICAL_WEIGHT] = self.params.lexical_weight if self.params.hybrid else None  # and alike
        weight = self.params.lexical_weight if self.params.hybrid else None
        hits = await ranked_search(
            store, ctx.workspace_id, query, top_k=count, filter=flt, exact=exact, vector=vector, lexical_weight=weight
        )
        ctx[common_keys.MEMORY_LIST] = hits_to_memories(hits, self.params.threshold_score, validity=validity)
