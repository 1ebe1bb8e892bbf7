"""AgenticRetrieveOp: a ReAct agent that answers from its own offloaded working memory (`agentic_retrieve`).

Before every LLM call the message list is offloaded exactly as `summary_working_memory` would (same request
knobs, same files, written atomically inside the working-memory root); the LLM gets the tools `Grep` and
`ReadFile` (see `agent_tools.py`) to pull details back from those files. The loop ends when the model answers
without tool calls or after `max_steps` LLM calls. `answer` is the final assistant text; `metadata` holds the
final message list (`messages`), `steps`, `tool_calls`, `stopped` ("answered" or "max_steps") and the files written.

An agent loop has no meaningful no-LLM path: without an LLM the request is refused with 400 and says so.
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from reme_service.errors import InvalidRequestError
from reme_service.ops.common import fields as common_fields
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.working import fields
from reme_service.ops.working.agent_tools import AgentTool, GrepTool, ReadFileTool
from reme_service.ops.working.message_offload_op import MessageOffloadOp
from reme_service.ops.working.offload import DiskView, OffloadParams, llm_snapshotter, offload, read_request
from reme_service.ops.working.react_loop import react_loop
from reme_service.schema.messages import Message, Role

#: what `conversation` reads; an op calling it declares these
CONVERSATION_INPUTS = (common_fields.MESSAGES, common_fields.QUERY)


class AgenticRetrieveParams(OffloadParams):
    max_steps: int = Field(default=20, ge=1, le=100, description="most LLM calls per request")


def conversation(ctx: ServiceContext) -> list[Message]:
    """The request's messages, plus `query` as a last user message when given; 400 when both are empty."""
    messages = ctx.input(common_fields.MESSAGES).copy()  # the request's own list stays as sent
    query = ctx.input(common_fields.QUERY).strip()
    if query:
        messages.append(Message(role=Role.USER, content=query))
    if not any(m.role is not Role.SYSTEM for m in messages):
        raise InvalidRequestError("nothing to answer: send messages (or a query)")
    return messages


def require_llm(ctx: ServiceContext, name: str) -> None:
    if not ctx.services.llm(name).available:
        raise InvalidRequestError(
            f"the {ctx.flow_name} flow runs an agent loop and needs an LLM; none is configured "
            f"(set FLOW_LLM_BASE_URL / FLOW_LLM_API_KEY, or llm.{name}.backend)"
        )


class AgenticRetrieveOp(ServiceOp[AgenticRetrieveParams]):
    prompts = {"system": set()}
    inputs = (*CONVERSATION_INPUTS, *fields.OFFLOAD_INPUTS)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        require_llm(ctx, params.llm)
        root = ctx.working_files
        request = read_request(ctx, root)
        system = Message(role=Role.SYSTEM, content=self.render(ctx, "system"))
        messages = [system, *conversation(ctx)]
        # the snapshots use the compression prompt of summary_working_memory, so both offload alike
        snapshot = llm_snapshotter(ctx, params, MessageOffloadOp.prompt_file)
        disk = DiskView(root)
        written: list[str] = []

        async def prepare(current: list[Message]) -> list[Message]:
            outcome = await offload(current, request, params.counter, snapshot, disk)
            if outcome.files:
                written.extend(await asyncio.to_thread(root.write, outcome.files, ctx.trail))
            return outcome.messages

        grep = GrepTool(root, ctx.services.regex_lane)
        tools: dict[str, AgentTool] = {tool.name: tool for tool in (grep, ReadFileTool(root))}
        llm = ctx.services.llm(params.llm)
        result = await react_loop(llm, messages, tools, max_steps=params.max_steps, prepare=prepare)
        ctx.response.answer = result.answer
        ctx.response.metadata.update(result.report(), written_files=list(dict.fromkeys(written)))
