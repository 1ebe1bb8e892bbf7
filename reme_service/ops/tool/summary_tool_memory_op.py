"""SummaryToolMemoryOp: write a usage guideline for each named tool with unsummarised recent calls.

`tool_names` is a comma-separated string or a list. For each name the tool's memory is found by its exact key;
names without one are reported in `metadata.not_found`. A tool is summarised when one of its last
`recent_call_count` calls is not yet marked `is_summarized`; the others are `skipped` and not rewritten.

The guideline comes from the LLM (sections Core Function, Success Patterns, Common Issues, Best Practices;
reply contract: the text in a ```txt block, else the whole reply; an empty reply is asked again and then
fails the request with 502 — nothing is written) or, without an LLM, from the data (`data_guideline.py`).
The stored `content` is the guideline, a blank line, and the statistics block (`statistics.py`), computed
when the memory is written. The summarised calls are marked `is_summarized`.

The guidelines are generated before the workspace lock is taken; the write re-reads each memory under the
lock and changes only its `content` and those calls' flags, so calls appended meanwhile are kept.

Metadata: `memory_list` (summarised and skipped memories), `deleted_memory_ids`, `update_result`,
`statistics` (per tool, the shape of `tool_statistics`), `summarized`, `skipped`, `not_found`.
"""

from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import Any

from pydantic import Field

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.tool import fields
from reme_service.ops.tool.data_guideline import data_guideline
from reme_service.ops.tool.no_memory import no_memory
from reme_service.ops.tool.statistics import CallTotals, statistics_block, tool_statistics
from reme_service.ops.tool.tool_memory_store import StoredTool, load_tool_memories, update_tool_memories
from reme_service.providers.llm.base import LLMClient
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import ToolCallResult, now_str
from reme_service.schema.messages import Message, Role

_TXT_BLOCK = re.compile(r"```[ \t]*(?:txt|text|markdown|md)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


class SummaryToolMemoryParams(OpParams):
    ignored = MappingProxyType(
        {"summary_sleep_interval": "ReMe paused between LLM summaries; here max_concurrent_summaries bounds them"}
    )

    llm: str = "default"
    store: str = "default"
    enable_llm_summary: bool = True
    recent_call_count: int = Field(default=20, ge=1)
    max_concurrent_summaries: int = Field(default=4, ge=1)
    summary_attempts: int = Field(default=2, ge=1)
    max_call_chars: int = Field(default=300, ge=50, description="input and output previews are cut to this")
    summary_sleep_interval: float | None = Field(default=None, ge=0, description="ReMe's; ignored")


def parse_guideline(reply: str) -> str | None:
    """The guideline text: the first ```txt block (or the whole reply); None when empty."""
    match = _TXT_BLOCK.search(reply)
    text = (match.group(1) if match else reply).strip()
    return text or None


def _preview(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def render_calls(calls: list[ToolCallResult], limit: int) -> str:
    blocks = []
    for i, call in enumerate(calls, 1):
        score = "unknown" if call.score is None else f"{call.score:g}"
        blocks.append(
            f"### Call #{i}\n- Input: {_preview(call.input, limit)}\n- Output: {_preview(call.output, limit)}\n"
            f"- Summary: {call.summary or '-'}\n- Evaluation: {call.evaluation or '-'}\n- Score: {score}\n"
            f"- Success: {str(call.success).lower()}\n- Time Cost: {call.time_cost:.3f}s\n"
            f"- Token Cost: {call.token_cost}"
        )
    return "\n\n".join(blocks)


class SummaryToolMemoryOp(ServiceOp[SummaryToolMemoryParams]):
    prompts = {"summarize": {"tool_name", "call_count", "calls", "statistics"}}
    inputs = (fields.TOOL_NAMES,)

    async def run(self, ctx: ServiceContext) -> None:
        names = ctx.input(fields.TOOL_NAMES)
        recent = self.params.recent_call_count
        store = ctx.store(self.params.store)
        stored = await load_tool_memories(store, ctx.workspace_id, names)
        due = {
            name: item.memory.tool_call_results[-recent:]
            for name, item in stored.items()
            if any(not call.is_summarized for call in item.memory.tool_call_results[-recent:])
        }
        guidelines = await self._guidelines(ctx, due)
        author = self._author(ctx) if due else ""

        def apply(name: str, item: StoredTool | None) -> StoredTool | None:
            if item is None or name not in guidelines:
                return None
            memory = item.memory
            done = {call.call_hash for call in due[name]}
            for call in memory.tool_call_results:
                if call.call_hash in done:
                    call.is_summarized = True
            memory.content = f"{guidelines[name]}\n\n{statistics_block(tool_statistics(memory, recent))}"
            memory.time_modified = now_str()
            memory.author = author
            return item

        commit = await update_tool_memories(store, ctx.workspace_id, list(due), apply)
        memories = {name: commit.memories.get(name, item.memory) for name, item in stored.items()}
        summarized = [name for name in names if name in commit.written]
        skipped = [name for name in names if name in stored and name not in commit.written]
        not_found = [name for name in names if name not in memories]
        meta = ctx.response.metadata
        meta["memory_list"] = [memories[name].model_dump(mode="json") for name in names if name in memories]
        meta["deleted_memory_ids"] = commit.deleted_memory_ids
        meta["update_result"] = commit.update_result
        meta["statistics"] = {name: tool_statistics(memories[name], recent) for name in names if name in memories}
        meta.update(summarized=summarized, skipped=skipped, not_found=not_found)
        lines = [
            f"Processed {len(names)} tool(s): {len(summarized)} summarized, {len(skipped)} skipped, "
            f"{len(not_found)} not found"
        ]
        if not_found:
            lines.append("No memory for: " + ", ".join(not_found))
        parts = ["\n".join(lines), *(f"Tool: {name}\n{memories[name].content}" for name in summarized)]
        ctx.response.answer = "\n---\n".join(parts)
        if names and len(not_found) == len(names):
            no_memory(ctx, names)

    def _author(self, ctx: ServiceContext) -> str:
        llm = ctx.services.llm(self.params.llm)
        return llm.model_name if self.params.enable_llm_summary and llm.available else ""

    async def _guidelines(self, ctx: ServiceContext, due: dict[str, list[ToolCallResult]]) -> dict[str, str]:
        if not due:
            return {}
        llm = ctx.services.llm(self.params.llm)
        if not (self.params.enable_llm_summary and llm.available):
            if self.params.enable_llm_summary:
                ctx.without_llm(self.name)
            return {name: data_guideline(name, calls) for name, calls in due.items()}
        # the first failure (e.g. an LLMError, 502) fails the request
        texts = await run_all(
            (self._llm_guideline(ctx, llm, name, calls) for name, calls in due.items()),
            limit=self.params.max_concurrent_summaries,
        )
        return dict(zip(due, texts, strict=True))

    async def _llm_guideline(self, ctx: ServiceContext, llm: LLMClient, name: str, calls: list[ToolCallResult]) -> str:
        window = CallTotals.of(calls).window()
        figures = (
            f"{window['calls']} calls, {window['successes']} without technical error, "
            f"average score {window['avg_score'] if window['avg_score'] is not None else 'unknown'}, "
            f"average time {window['avg_time_cost']}s, average tokens {window['avg_token_cost']}"
        )
        prompt = self.render(
            ctx,
            "summarize",
            tool_name=name,
            call_count=len(calls),
            calls=render_calls(calls, self.params.max_call_chars),
            statistics=figures,
        )
        return await chat_parsed(
            llm,
            [Message(role=Role.USER, content=prompt)],
            parse_guideline,
            attempts=self.params.summary_attempts,
            what=f"usage guideline for {name!r}",
        )
