"""ReactSearchOp: a ReAct agent with one pluggable search tool (`react`).

Inputs: `query` and/or `messages` (the query becomes the last user message). The model gets a role prompt
(current time, the tool, how to work) and the search tool named by the op parameter `search_tool` (see
`search_tools.py`), and loops as in `react_loop.py` for at most `max_steps` LLM calls. `answer` is the final
assistant text; `metadata.messages` the whole transcript, with `steps`, `tool_calls` and `stopped`.

The default search tool is `vector_store` (the request workspace's memories): ReMe 0.2's `react` searched the web
with DashScope and needed its key; here it works with an LLM alone, and ReMe's name `SimpleReactOp()` is this op
(`ops/reme_names.py`). With `search_tool=''` or no LLM, the request is refused with 400 saying what to configure.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, field_validator

from reme_service.errors import InvalidRequestError
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.working.agentic_retrieve_op import CONVERSATION_INPUTS, conversation, require_llm
from reme_service.ops.working.react_loop import react_loop
from reme_service.ops.working.search_tools import SEARCH_TOOLS
from reme_service.schema.messages import Message, Role


class ReactSearchParams(OpParams):
    llm: str = "default"
    # ReMe's react searched the web (DashScope); its stand-in here is the workspace's own memories
    search_tool: str = Field(default="vector_store", description=f"one of: {', '.join(SEARCH_TOOLS)}; empty = none")
    store: str = "default"
    top_k: int = Field(default=5, ge=1, le=20, description="default hits per search")
    max_steps: int = Field(default=20, ge=1, le=100, description="most LLM calls per request")

    @field_validator("search_tool")
    @classmethod
    def _known(cls, value: str) -> str:
        if value and value not in SEARCH_TOOLS:
            raise ValueError(f"unknown search_tool {value!r}; available: {', '.join(SEARCH_TOOLS)}")
        return value


class ReactSearchOp(ServiceOp[ReactSearchParams]):
    prompts = {"system": {"now", "tools"}}
    inputs = CONVERSATION_INPUTS

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        if not params.search_tool:
            raise InvalidRequestError(
                f"the {ctx.flow_name} flow has no search tool configured; give its op one, e.g. "
                f"flow.{ctx.flow_name}.flow_content=\"ReactSearchOp(search_tool='vector_store')\" "
                f"(available: {', '.join(SEARCH_TOOLS)})"
            )
        require_llm(ctx, params.llm)
        tool = SEARCH_TOOLS[params.search_tool](ctx, params.store, params.top_k)
        prompt = self.render(ctx, "system", now=datetime.now().strftime("%Y-%m-%d %H:%M:%S"), tools=tool.name)
        messages = [Message(role=Role.SYSTEM, content=prompt), *conversation(ctx)]
        llm = ctx.services.llm(params.llm)
        result = await react_loop(llm, messages, {tool.name: tool}, max_steps=params.max_steps)
        ctx.response.answer = result.answer
        ctx.response.metadata.update(result.report())
