"""RewriteMemoryOp: write the answer — the memories as numbered text, or an LLM-adapted guidance text.

LLM reply contract: ```json {"rewritten_context": "..."}```; a reply that is not JSON is used as the text
itself; an empty reply is an `LLMError`.
"""

from __future__ import annotations

from typing import ClassVar

from reme_service.errors import LLMError
from reme_service.flow import keys
from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op, OpParams
from reme_service.ops.task.transcript import recent_lines
from reme_service.prompts.loader import prompt_file_for
from reme_service.providers.llm.json_extract import extract_json
from reme_service.schema.memory import BaseMemory
from reme_service.schema.messages import Message

PROMPTS = prompt_file_for(__file__)


class RewriteMemoryParams(OpParams):
    enable_llm_rewrite: bool = True
    llm: str = "default"


def format_memories(memories: list[BaseMemory]) -> str:
    """ReMe's plain answer format: `Memory i :` blocks with `When to use` and `Content` lines."""
    return "\n".join(
        f"Memory {i} :\n When to use: {m.when_to_use}\n Content: {m.content}\n" for i, m in enumerate(memories, 1)
    )


class RewriteMemoryOp(Op):
    Params: ClassVar[type[OpParams]] = RewriteMemoryParams
    prompts: ClassVar[dict[str, set[str]]] = {"rewrite": {"query", "recent", "memories"}}
    params: RewriteMemoryParams

    async def run(self, ctx: FlowContext) -> None:
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
        ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in memories]

    async def _rewrite(self, ctx: FlowContext, formatted: str) -> str:
        messages = [Message.model_validate(m) for m in ctx.field("messages", [])]
        recent = recent_lines(messages, count=3, limit=300) if messages else "(none)"
        prompt = ctx.services.prompts.render(
            PROMPTS, "rewrite", ctx.language, query=ctx[keys.QUERY], recent=recent, memories=formatted
        )
        reply = await ctx.services.llm(self.params.llm).chat([Message(role="user", content=prompt)])
        data = extract_json(reply.text)
        if isinstance(data, dict) and isinstance(data.get("rewritten_context"), str):
            text = data["rewritten_context"].strip()
        else:
            text = reply.text.strip()
        if not text:
            raise LLMError("rewrite reply is empty")
        return text
