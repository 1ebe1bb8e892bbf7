"""MergeMemoryOp: the simple retrieval answer — a header, one line per memory, and a closing hint."""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp


class MergeMemoryOp(ServiceOp[OpParams]):
    prompts = {"merge_header": set(), "merge_footer": set()}
    may_read = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        memories = ctx.get(keys.MEMORY_LIST, [])
        ctx.publish_memories(memories)
        lines = [f"- {m.when_to_use} {m.content}" for m in memories if m.content]
        if not lines:
            ctx.response.answer = ""
            return
        header = self.render(ctx, "merge_header").strip()
        footer = self.render(ctx, "merge_footer").strip()
        ctx.response.answer = "\n".join([header, *lines, footer])
