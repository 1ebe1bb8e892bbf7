"""MergeMemoryOp: the simple retrieval answer — a header, one line per memory, and a closing hint."""

from __future__ import annotations

from typing import ClassVar

from reme_service.flow import keys
from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op, OpParams
from reme_service.prompts.loader import prompt_file_for

PROMPTS = prompt_file_for(__file__)


class MergeMemoryOp(Op):
    Params: ClassVar[type[OpParams]] = OpParams
    prompts: ClassVar[dict[str, set[str]]] = {"merge_header": set(), "merge_footer": set()}

    async def run(self, ctx: FlowContext) -> None:
        memories = ctx.get(keys.MEMORY_LIST, [])
        ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in memories]
        lines = [f"- {m.when_to_use} {m.content}" for m in memories if m.content]
        if not lines:
            ctx.response.answer = ""
            return
        render = ctx.services.prompts.render
        header = render(PROMPTS, "merge_header", ctx.language).strip()
        footer = render(PROMPTS, "merge_footer", ctx.language).strip()
        ctx.response.answer = "\n".join([header, *lines, footer])
