"""RerankMemoryOp: optionally let the LLM reorder the recalled memories, filter by score, keep `top_k`.

LLM reply contract: a JSON object `{"ranked_indices": [...], "reasoning": "..."}` (or a bare list). Listed
valid indices come first, each once; unlisted ones follow in their original order. An unparseable reply
is an `LLMReplyError` (502) after the client's retries have already run, never a silent fallback.
"""

from __future__ import annotations

from reme_service.errors import LLMReplyError
from reme_service.flow.op import OpParams
from reme_service.ops.common import fields, keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.providers.llm.json_extract import extract_json
from reme_service.schema.memory import BaseMemory
from reme_service.schema.messages import Message, Role


class RerankMemoryParams(OpParams):
    enable_llm_rerank: bool = True
    enable_score_filter: bool = False
    min_score_threshold: float = 0.3
    top_k: int | None = None  # None: the request's top_k (ReMe cut every answer to 5)
    llm: str = "default"


def parse_ranking(reply: str, count: int) -> list[int] | None:
    """Indices from the reply, deduplicated and range-checked; None when the reply has no ranking."""
    data = extract_json(reply)
    if isinstance(data, dict):
        data = data.get("ranked_indices")
    if not isinstance(data, list):
        return None
    order: list[int] = []
    for item in data:
        if isinstance(item, int | float) and int(item) == item and 0 <= int(item) < count and int(item) not in order:
            order.append(int(item))
    return order


def apply_ranking(memories: list[BaseMemory], order: list[int]) -> list[BaseMemory]:
    rest = [m for i, m in enumerate(memories) if i not in set(order)]
    return [memories[i] for i in order] + rest


class RerankMemoryOp(ServiceOp[RerankMemoryParams]):
    prompts = {"rerank": {"query", "candidates", "count"}}
    inputs = (fields.TOP_K,)
    reads = (keys.QUERY,)
    may_read = (keys.MEMORY_LIST,)
    writes = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        memories = ctx.get(keys.MEMORY_LIST, [])
        if not memories:
            return
        if params.enable_llm_rerank:
            llm = ctx.services.llm(params.llm)
            if llm.available:
                memories = await self._llm_rerank(ctx, memories)
            else:
                ctx.without_llm(self.name)
        if params.enable_score_filter:
            memories = [m for m in memories if self._quality(m) >= params.min_score_threshold]
        limit = params.top_k if params.top_k is not None else ctx.input(fields.TOP_K)
        if limit is not None:
            memories = memories[:limit]
        ctx[keys.MEMORY_LIST] = memories
        ctx.publish_memories(memories)

    @staticmethod
    def _quality(memory: BaseMemory) -> float:
        confidence = memory.metadata.get("confidence", 0.5)
        confidence = float(confidence) if isinstance(confidence, int | float) else 0.5
        relevance = memory.relevance if memory.relevance is not None else 0.5
        return (confidence + relevance) / 2

    async def _llm_rerank(self, ctx: ServiceContext, memories: list[BaseMemory]) -> list[BaseMemory]:
        candidates = "\n---\n".join(
            f"Candidate {i}\nCondition: {m.when_to_use}\nExperience: {m.content}" for i, m in enumerate(memories)
        )
        prompt = self.render(ctx, "rerank", query=ctx[keys.QUERY], candidates=candidates, count=len(memories))
        reply = await ctx.services.llm(self.params.llm).chat([Message(role=Role.USER, content=prompt)])
        order = parse_ranking(reply.text, len(memories))
        if order is None:
            raise LLMReplyError(f"rerank reply has no 'ranked_indices' list: {reply.text[:200]!r}")
        return apply_ranking(memories, order)
