"""RetrieveToolMemoryOp: the memories of the named tools, found by exact key (`retrieve_tool_memory`).

`tool_names` is a comma-separated string or a list. The `answer` is what an agent reads before choosing or
calling a tool: `Retrieved N tool memory(ies):`, then per tool `Tool: <name>` and its guideline, separated
by `---` lines. A tool never summarised has no guideline yet; its entry shows the statistics block instead.
When no name has a memory the answer is empty (nothing to inject into a prompt) and `success` stays true,
as for any read that finds nothing.

Metadata: `memory_list` (the full memories, call histories included), `statistics` (per tool, the shape of
`tool_statistics`), `not_found` (names without a memory).
"""

from __future__ import annotations

from pydantic import Field

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.tool import fields
from reme_service.ops.tool.no_memory import no_memory
from reme_service.ops.tool.statistics import statistics_block, tool_statistics
from reme_service.ops.tool.tool_memory_store import load_tool_memories


class RetrieveToolMemoryParams(OpParams):
    store: str = "default"
    recent_call_count: int = Field(default=20, ge=1, description="window of the statistics")


class RetrieveToolMemoryOp(ServiceOp[RetrieveToolMemoryParams]):
    inputs = (fields.TOOL_NAMES,)

    async def run(self, ctx: ServiceContext) -> None:
        names = ctx.input(fields.TOOL_NAMES)
        recent = self.params.recent_call_count
        stored = await load_tool_memories(ctx.store(self.params.store), ctx.workspace_id, names)
        found = [name for name in names if name in stored]
        memories = {name: stored[name].memory for name in found}
        statistics = {name: tool_statistics(memories[name], recent) for name in found}
        meta = ctx.response.metadata
        meta["memory_list"] = [memories[name].model_dump(mode="json") for name in found]
        meta["statistics"] = statistics
        meta["not_found"] = [name for name in names if name not in stored]
        if not found:  # as ReMe 0.2: HTTP 200 with success false, which its clients check before memory_list[0]
            no_memory(ctx, names)
            return
        sections = []
        for name in found:
            guideline = memories[name].content.strip()
            if not guideline:
                guideline = "No usage guideline yet (run summary_tool_memory).\n\n" + statistics_block(statistics[name])
            sections.append(f"Tool: {name}\n{guideline}")
        ctx.response.answer = f"Retrieved {len(found)} tool memory(ies):\n\n" + "\n---\n".join(sections)
