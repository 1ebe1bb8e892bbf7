"""SemanticRankOp: let the LLM rate the candidates' relevance when there are many; sort by relevance.

Only when `enable_ranker` is on and there are more than `output_memory_max_count` candidates is the LLM asked
(the default flow leaves it off, to keep the user-facing path fast). Reply contract: lines
`Score: <n> | <0.0-1.0>`; a reply with no such line is re-asked, then fails the request (502). A listed score
replaces the candidate's `relevance` (its similarity); unlisted candidates keep theirs. Without an LLM the
candidates stay ranked by similarity.
"""

from __future__ import annotations

from typing import ClassVar

from reme_service.flow import keys as flow_keys
from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op, OpParams
from reme_service.ops.personal.line_format import parse_rankings
from reme_service.ops.personal.memories import language
from reme_service.prompts.loader import prompt_file_for
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import BaseMemory
from reme_service.schema.messages import Message

PROMPTS = prompt_file_for(__file__)


class SemanticRankParams(OpParams):
    enable_ranker: bool = True
    output_memory_max_count: int = 10
    llm: str = "default"


class SemanticRankOp(Op):
    Params: ClassVar[type[OpParams]] = SemanticRankParams
    prompts: ClassVar[dict[str, set[str]]] = {"semantic_rank": {"query", "count", "memories"}}
    params: SemanticRankParams

    async def run(self, ctx: FlowContext) -> None:
        memories = ctx.get(flow_keys.MEMORY_LIST, [])
        if self.params.enable_ranker and len(memories) > self.params.output_memory_max_count:
            llm = ctx.services.llm(self.params.llm)
            if llm.available:
                await self._rank(ctx, memories)
            else:
                ctx.without_llm(self.name)
        memories.sort(key=lambda m: m.relevance or 0.0, reverse=True)
        ctx[flow_keys.MEMORY_LIST] = memories

    async def _rank(self, ctx: FlowContext, memories: list[BaseMemory]) -> None:
        lines = "\n".join(f"{i}. {m.content}" for i, m in enumerate(memories, 1))
        prompt = ctx.services.prompts.render(
            PROMPTS, "semantic_rank", language(ctx), query=ctx[flow_keys.QUERY], count=len(memories), memories=lines
        )
        scores = await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role="user", content=prompt)],
            lambda reply: parse_rankings(reply, len(memories)),
            what="relevance scores",
        )
        for index, score in scores.items():
            memories[index - 1].relevance = score
