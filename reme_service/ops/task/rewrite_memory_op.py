"""RewriteMemoryOp: write the answer — the memories as numbered text, or an LLM-adapted guidance text.

LLM reply contract: ```json {"rewritten_context": "..."}```; a reply that is not JSON is used as the text
itself; an empty reply is an `LLMReplyError` (502).
"""

from __future__ import annotations

from collections.abc import Sequence

from reme_service.errors import LLMReplyError
from reme_service.flow.op import OpParams
from reme_service.ops.common import fields, keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.transcript import recent_lines
from reme_service.providers.llm.json_extract import extract_json
from reme_service.schema.memory import BaseMemory
from reme_service.schema.messages import Message, Role


class RewriteMemoryParams(OpParams):
    enable_llm_rewrite: bool = True
    llm: str = "default"


def format_memories(memories: Sequence[BaseMemory]) -> str:
    """ReMe's plain answer format: `Memory i :` blocks with `When to use` and `Content` lines."""
    return "\n".join(
        f"Memory {i} :\n When to use: {m.when_to_use}\n Content: {m.content}\n" for i, m in enumerate(memories, 1)
    )


class RewriteMemoryOp(ServiceOp[RewriteMemoryParams]):
    prompts = {"rewrite": {"query", "recent", "memories"}}
    inputs = (fields.MESSAGES,)
    reads = (keys.QUERY,)
    may_read = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        memories = ctx.get(keys.MEMORY_LIST, [])
        if not memories:
            ctx.response.answer = ""
            ctx.response.metadata.setdefault("memory_list", [])
            return
        text = format_memories(memories)
        if self.params.enable_llm_rewrite:
            llm = ctx.services.llm(self.params.llm)
            if llm.available:
                text = await self._rewrite(ctx, text)
            else:
                ctx.without_llm(self.name)
        ctx.response.answer = text
        ctx.publish_memories(memories)

    async def _rewrite(self, ctx: ServiceContext, formatted: str) -> str:
        messages = ctx.input(fields.MESSAGES)
        recent = recent_lines(messages, count=3, limit=300) if messages else "(none)"
        prompt = self.render(ctx, "rewrite", query=ctx[keys.QUERY], recent=recent, memories=formatted)
        reply = await ctx.services.llm(self.params.llm).chat([Message(role=Role.USER, content=prompt)])
        data = extract_json(reply.text)
        rewritten = data.get("rewritten_context") if isinstance(data, dict) else None
        text = rewritten.strip() if isinstance(rewritten, str) else reply.text.strip()
        if not text:
            raise LLMReplyError("rewrite reply is empty")
        return text
