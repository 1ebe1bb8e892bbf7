"""The ReAct loop shared by `agentic_retrieve` and `react`: ask the LLM with tools, run the calls it makes,
append their results, repeat until it answers without tool calls or `max_steps` LLM calls have been made.

Tool calls of one step run concurrently. Every call gets a tool message back — also an unknown tool name or
arguments that are not a JSON object (as an `Error: ...` text) — because providers reject an assistant tool call
without its result (ReMe 0.2 skipped unknown names). An optional `prepare` step rewrites the message list before
every LLM call (working-memory offloading in `agentic_retrieve`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reme_service.concurrency import run_all
from reme_service.errors import ReMeError
from reme_service.ops.working.agent_tools import AgentTool
from reme_service.ops.working.message_io import simple_dicts
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message, Role, ToolCall

Prepare = Callable[[list[Message]], Awaitable[list[Message]]]


@dataclass
class LoopResult:
    messages: list[Message]
    steps: int
    tool_calls: int
    stopped: str  # "answered" | "max_steps"

    @property
    def answer(self) -> str:
        last = self.messages[-1] if self.messages else None
        return last.text if last is not None and last.role is Role.ASSISTANT else ""

    def report(self) -> dict[str, Any]:
        """What a flow answering with this loop puts in `metadata`: the messages (plain dicts) and the counts."""
        return {
            "messages": simple_dicts(self.messages),
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "stopped": self.stopped,
        }


async def run_tool(tools: Mapping[str, AgentTool], call: ToolCall) -> str:
    tool = tools.get(call.name)
    if tool is None:
        return f"Error: unknown tool {call.name!r}; available tools: {', '.join(tools)}"
    try:
        arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError as exc:
        return f"Error: the arguments of {call.name} are not valid JSON ({exc}); send a JSON object"
    if not isinstance(arguments, dict):
        return f"Error: the arguments of {call.name} must be a JSON object"
    try:
        return await tool.call(arguments)
    except ReMeError as exc:
        if exc.status >= 500:
            raise
        return f"Error: {exc.message}"


async def react_loop(
    llm: LLMClient,
    messages: list[Message],
    tools: Mapping[str, AgentTool],
    *,
    max_steps: int,
    prepare: Prepare | None = None,
) -> LoopResult:
    schemas = [tool.schema() for tool in tools.values()]
    calls_made = 0
    for step in range(1, max_steps + 1):
        if prepare is not None:
            messages = await prepare(messages)
        reply = await llm.chat(messages, tools=schemas)
        calls = [
            call if call.id else call.model_copy(update={"id": f"call_{step}_{i}"})
            for i, call in enumerate(reply.tool_calls)
        ]
        messages = [
            *messages,
            Message(
                role=Role.ASSISTANT, content=reply.text, reasoning_content=reply.reasoning_content, tool_calls=calls
            ),
        ]
        if not calls:
            return LoopResult(messages, step, calls_made, "answered")
        outputs = await run_all([run_tool(tools, call) for call in calls])
        calls_made += len(calls)
        messages += [
            Message(role=Role.TOOL, content=output, tool_call_id=call.id)
            for call, output in zip(calls, outputs, strict=True)
        ]
    return LoopResult(messages, max_steps, calls_made, "max_steps")
