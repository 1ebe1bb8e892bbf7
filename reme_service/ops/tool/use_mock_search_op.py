"""UseMockSearchOp: pick one of the mock search tools for a query, run it, and return the call record.

The flow `use_mock_search` drives ReMe's tool-memory benchmark (`cookbook/bench/tool_memory_bench.py`).
With an LLM: the LLM picks a tool by function calling (the request `query` may carry tool guidelines
before the question), the chosen tool's query is classified (one word: simple, medium, complex), the
seeded draw of `mock_search_tools.py` decides failure / off-topic / relevant, and the LLM writes the
result text. Without an LLM: the tool is drawn at random (seeded by the query), the complexity comes from
`classify_heuristic` and the text from templates; `metadata.no_llm_ops` says so.

`answer` is the JSON text of the `ToolCallResult` (ReMe's format), ready to send to `add_tool_call_result`:
`tool_name`, `input = {"query": ...}`, `output` = JSON `{success, content, query, complexity, is_relevant}`,
`token_cost = len(content) // 4`, `success`, `time_cost` (seconds spent in the tool). No tool chosen gives a
failed record with `tool_name` "None". `metadata.tool_call_result` holds the same record as an object and
`metadata.mock_search` the complexity, the outcome and how the tool was selected.
"""

from __future__ import annotations

import json
import random
import time

from reme_service.errors import InvalidRequestError
from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.ops.common import fields
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.tool.mock_search_tools import (
    FAILURE_TEXT,
    LENGTH_WORDS,
    LOW_RELEVANCE_PREFIX,
    MOCK_SEARCH_TOOLS,
    Complexity,
    MockSearchTool,
    Outcome,
    call_rng,
    classify_heuristic,
    draw_outcome,
    parse_complexity,
    template_content,
    tool_named,
)
from reme_service.providers.llm.base import LLMClient
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import ToolCallResult, now_str
from reme_service.schema.messages import Message, Role

SEED: Input[int] = Input("seed", int, default=0)


class UseMockSearchParams(OpParams):
    llm: str = "default"
    enable_llm: bool = True
    seed: int = 0


def _text_or_none(reply: str) -> str | None:
    return reply.strip() or None


class UseMockSearchOp(ServiceOp[UseMockSearchParams]):
    prompts = {
        "select": {"query"},
        "classify": {"query"},
        "generate": {"query", "words"},
        "unrelated": {"topic", "words"},
    }
    inputs = (fields.QUERY, SEED)

    async def run(self, ctx: ServiceContext) -> None:
        query = ctx.input(fields.QUERY).strip()
        if not query:
            raise InvalidRequestError("query must not be empty")
        request_seed = ctx.input(SEED)
        llm = ctx.services.llm(self.params.llm)
        use_llm = self.params.enable_llm and llm.available
        if not use_llm and self.params.enable_llm:
            ctx.without_llm(self.name)
        if use_llm:
            tool, tool_query = await self._select(ctx, llm, query)
        else:
            pick = random.Random(f"{self.params.seed}:{request_seed}:select:{query}")  # noqa: S311 - simulation
            tool, tool_query = pick.choice(MOCK_SEARCH_TOOLS), query
        info: dict[str, object] = {"selected_by": "llm" if use_llm else "random"}
        if tool is None:
            record = ToolCallResult(
                create_time=now_str(),
                tool_name="None",
                input={"query": query},
                output=json.dumps({"success": False, "content": "no tool was selected", "query": query}),
                token_cost=0,
                success=False,
            )
        else:
            started = time.perf_counter()
            complexity = await self._classify(ctx, llm, tool_query) if use_llm else classify_heuristic(tool_query)
            outcome = draw_outcome(tool, complexity, call_rng(self.params.seed, request_seed, tool, tool_query))
            if use_llm:
                content = await self._content(ctx, llm, tool, tool_query, outcome)
            else:
                content = template_content(tool, tool_query, outcome)
            payload = {
                "success": outcome.kind != "failure",
                "content": content,
                "query": tool_query,
                "complexity": complexity,
                "is_relevant": outcome.kind == "relevant",
            }
            record = ToolCallResult(
                create_time=now_str(),
                tool_name=tool.name,
                input={"query": tool_query},
                output=json.dumps(payload, ensure_ascii=False),
                token_cost=len(content) // 4,
                success=outcome.kind != "failure",
                time_cost=round(time.perf_counter() - started, 3),
            )
            info.update(complexity=complexity, outcome=outcome.kind)
        record.call_hash = record.compute_hash()
        ctx.response.answer = record.model_dump_json()
        ctx.response.metadata["tool_call_result"] = record.model_dump(mode="json")
        ctx.response.metadata["mock_search"] = info

    async def _select(self, ctx: ServiceContext, llm: LLMClient, query: str) -> tuple[MockSearchTool | None, str]:
        prompt = self.render(ctx, "select", query=query)
        reply = await llm.chat([Message(role=Role.USER, content=prompt)], tools=[t.schema() for t in MOCK_SEARCH_TOOLS])
        for call in reply.tool_calls:
            tool = tool_named(call.name)
            if tool is None:
                continue
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = {}
            given = arguments.get("query") if isinstance(arguments, dict) else None
            return tool, given.strip() if isinstance(given, str) and given.strip() else query
        return None, query

    async def _classify(self, ctx: ServiceContext, llm: LLMClient, query: str) -> Complexity:
        prompt = self.render(ctx, "classify", query=query)
        reply = await llm.chat([Message(role=Role.USER, content=prompt)])
        return parse_complexity(reply.text)

    async def _content(
        self, ctx: ServiceContext, llm: LLMClient, tool: MockSearchTool, query: str, outcome: Outcome
    ) -> str:
        if outcome.kind == "failure":
            return FAILURE_TEXT
        words = LENGTH_WORDS[tool.length]
        if outcome.kind == "irrelevant":
            prompt = self.render(ctx, "unrelated", topic=outcome.topic, words=words)
        else:
            prompt = self.render(ctx, "generate", query=query, words=words)
        text = await chat_parsed(llm, [Message(role=Role.USER, content=prompt)], _text_or_none, what="search result")
        return LOW_RELEVANCE_PREFIX + text if outcome.kind == "irrelevant" else text
