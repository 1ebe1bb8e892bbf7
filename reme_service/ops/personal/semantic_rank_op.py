"""SemanticRankOp: let the LLM rate the candidates' relevance when there are many; sort by relevance.

Only when `enable_ranker` is on and there are more than `output_memory_max_count` candidates is the LLM asked
(the default flow leaves it off, to keep the user-facing path fast). Reply contract: lines
`Score: <n> | <0.0-1.0>`; a reply with no such line is re-asked, then fails the request (502). A listed score
replaces the candidate's `relevance` (its similarity); unlisted candidates keep theirs. Without an LLM the
candidates stay ranked by similarity.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal.line_format import parse_rankings
from reme_service.ops.personal.op import PersonalOp
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import BaseMemory
from reme_service.schema.messages import Message, Role


class SemanticRankParams(OpParams):
    enable_ranker: bool = True
    output_memory_max_count: int = 10
    llm: str = "default"


class SemanticRankOp(PersonalOp[SemanticRankParams]):
    prompts = {"semantic_rank": {"query", "count", "memories"}}
    reads = (common_keys.QUERY,)
    may_read = (common_keys.MEMORY_LIST,)
    writes = (common_keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        memories = ctx.get(common_keys.MEMORY_LIST, [])
        if self.params.enable_ranker and len(memories) > self.params.output_memory_max_count:
            llm = ctx.services.llm(self.params.llm)
            if llm.available:
                await self._rank(ctx, memories)
            else:
                ctx.without_llm(self.name)
        memories.sort(key=lambda m: m.relevance or 0.0, reverse=True)
        ctx[common_keys.MEMORY_LIST] = memories

    async def _rank(self, ctx: ServiceContext, memories: list[BaseMemory]) -> None:
        lines = "\n".join(f"{i}. {m.content}" for i, m in enumerate(memories, 1))
        prompt = self.render(ctx, "semantic_rank", query=ctx[common_keys.QUERY], count=len(memories), memories=lines)
        scores = await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            lambda reply: parse_rankings(reply, len(memories)),
            what="relevance scores",
        )
        for index, score in scores.items():
            memories[index - 1].relevance = score
