"""RecallVectorStoreOp: search the workspace for the query and turn the hits into memories.

With `hybrid` (the default) the store ranks by cosine similarity fused with a BM25 score over the same texts
(`VectorStore.search_hybrid`; `lexical_weight` is the BM25 share): on LoCoMo it lifts evidence hit@5 from 0.47
to 0.64 with the MiniLM embedder (`cookbook/bench/locomo_recall.py`). Backends without a lexical index answer
with plain vector search. `hybrid=False` is ReMe's pure vector search.

Each memory keeps its stored `score`; the search score goes into `relevance`. Candidates are deduplicated:
a later hit whose `content` repeats an earlier one's (ignoring case and whitespace) is dropped. `top_k` comes
from the request (1-50); `exact` (request) makes a big workspace rank every memory instead of asking its
approximate index.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import fields, keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.schema.memory import BaseMemory, memory_from_node

MAX_TOP_K = 50


class RecallVectorStoreParams(OpParams):
    top_k: int | None = None
    threshold_score: float | None = None
    store: str = "default"
    memory_type: str | None = None
    hybrid: bool = True
    lexical_weight: float = 0.3


def _content_key(text: str) -> str:
    return " ".join(text.split()).casefold()


class RecallVectorStoreOp(ServiceOp[RecallVectorStoreParams]):
    inputs = (fields.TOP_K,)
    may_input = (fields.EXACT,)  # flows that do not declare `exact` search the default way
    reads = (keys.QUERY,)
    writes = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        query = ctx[keys.QUERY]
        top_k = ctx.input(fields.TOP_K)
        if top_k is None:
            top_k = params.top_k or 3
        top_k = max(1, min(top_k, MAX_TOP_K))
        flt = {"metadata.memory_type": params.memory_type} if params.memory_type else None
        store = ctx.services.store(params.store)
        # Over-fetch a little so dropping repeated contents still leaves top_k items.
        fetch = min(top_k * 2, MAX_TOP_K * 2)
        exact = ctx.input(fields.EXACT)
        if params.hybrid:
            hits = await store.search_hybrid(
                ctx.workspace_id, query, top_k=fetch, filter=flt, lexical_weight=params.lexical_weight, exact=exact
            )
        else:
            hits = await store.search(ctx.workspace_id, query, top_k=fetch, filter=flt, exact=exact)
        seen: set[str] = set()
        memories: list[BaseMemory] = []
        for hit in hits:
            if params.threshold_score is not None and hit.score < params.threshold_score:
                continue
            memory = memory_from_node(hit.node)
            key = _content_key(memory.content)
            if key in seen:
                continue
            seen.add(key)
            memory.relevance = round(hit.score, 6)
            memories.append(memory)
            if len(memories) >= top_k:
                break
        ctx[keys.MEMORY_LIST] = memories
        ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in memories]
