"""Search tools the `react` flow can be given (`ReactSearchOp(search_tool=...)`).

A search tool is an `AgentTool` built per request from the context. `SEARCH_TOOLS` maps the configurable names
to their factories; adding a backend (a web search API, an intranet index) means adding one class and one entry.

* `vector_store` — semantic search over the memories stored in the request's workspace (task, personal and tool
  memories alike), offline with the configured embedder. Each hit shows its relevance, when to use it and its
  content.

ReMe 0.2's `react` used DashScope web search, which needs a key and the network; it is not built in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from reme_service.ops.common.context import ServiceContext
from reme_service.ops.working.agent_tools import AgentTool, arg_int, arg_str
from reme_service.schema.memory import memory_from_node
from reme_service.stores.base import VectorStore


class VectorStoreSearchTool(AgentTool):
    name = "search_memory"
    description = (
        "Semantic search over the stored memories (past experiences, facts about the user, tool usage notes). "
        "Returns the closest memories with their relevance; call it again with other wording to widen the search."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for, in a few words or a sentence"},
            "top_k": {"type": "integer", "description": "how many memories to return (1-20, default 5)"},
        },
        "required": ["query"],
    }

    def __init__(self, store: VectorStore, workspace_id: str, top_k: int) -> None:
        self.store = store
        self.workspace_id = workspace_id
        self.top_k = top_k

    async def call(self, arguments: dict[str, Any]) -> str:
        query = arg_str(arguments, "query")
        top_k = arg_int(arguments, "top_k", self.top_k, minimum=1, maximum=20)
        hits = await self.store.search(self.workspace_id, query, top_k=top_k)
        if not hits:
            return f"No stored memory matches {query!r}."
        lines = []
        for number, hit in enumerate(hits, 1):
            memory = memory_from_node(hit.node)
            lines.append(
                f"[{number}] relevance {hit.score:.2f}; when to use: {memory.when_to_use}\n    {memory.content}"
            )
        return "\n".join(lines)


def _vector_store_tool(ctx: ServiceContext, store: str, top_k: int) -> AgentTool:
    return VectorStoreSearchTool(ctx.store(store), ctx.workspace_id, top_k)


SearchToolFactory = Callable[[ServiceContext, str, int], AgentTool]

SEARCH_TOOLS: Mapping[str, SearchToolFactory] = MappingProxyType({"vector_store": _vector_store_tool})
