"""ParseToolCallResultOp: check, judge and append tool-call records to each tool's memory (`add_tool_call_result`).

1. Each record of `tool_call_results` is checked (`call_records.py`); rejected ones are listed with their
   reasons in `metadata.rejected_calls`. When none is left the request fails with 400, listing every reason.
2. The accepted calls are judged (`judging.py`): by the LLM when one is configured — at most
   `max_concurrent_evaluations` at a time, calls already stored are not judged again — otherwise by the
   documented heuristic (`metadata.no_llm_ops` says so). A call whose judgement failed is kept with a null
   score; `metadata.unscored_calls` and `metadata.warnings` say which and why.
3. Under the workspace lock, each tool's memory is found by its exact key (`tool_memory_store.py`), the calls
   whose `call_hash` it already holds (or that repeat within the request) are skipped, the rest appended,
   the history capped at `max_history_tool_call_cnt` (running totals keep the overall statistics), and only
   memories that changed are written.

The judging runs before the lock is taken, so a slow LLM never holds other requests up; the read, append
and write run inside it, so concurrent requests never lose each other's calls. This is also why the flow
does not end with `UpdateVectorStoreOp`: a write in a later op would leave a gap between read and write.

Metadata (ReMe's keys first): `memory_list`, `deleted_memory_ids`, `update_result`, `validation_stats`,
`deduplication_stats`, then `tools` (per tool: status, counts, statistics), `evaluation_stats`, and when
relevant `rejected_calls`, `unscored_calls`, `warnings`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import Field

from reme_service.errors import InvalidRequestError
from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.tool.call_records import check_calls
from reme_service.ops.tool.judging import LLM_UNAVAILABLE, Verdict, heuristic_verdict, judge_with_llm
from reme_service.ops.tool.statistics import record_calls, tool_statistics
from reme_service.ops.tool.tool_memory_store import (
    CommitResult,
    StoredTool,
    load_tool_memories,
    new_tool_memory,
    update_tool_memories,
)
from reme_service.schema.memory import ToolCallResult, now_str

# Declared `items: object`, not `ToolCallResult`: each record is checked here (`call_records.py`) so that one
# bad record is reported with its reasons while the others are still recorded.
TOOL_CALL_RESULTS: Input[list[dict[str, Any]]] = Input("tool_call_results", list[dict[str, Any]], factory=list)


class ParseToolCallResultParams(OpParams):
    ignored = MappingProxyType(
        {"evaluation_sleep_interval": "ReMe paused between LLM evaluations; max_concurrent_evaluations bounds them"}
    )

    llm: str = "default"
    store: str = "default"
    enable_llm_evaluation: bool = True
    max_concurrent_evaluations: int = Field(default=4, ge=1)
    evaluation_attempts: int = Field(default=2, ge=1, description="LLM replies asked for before a score is unknown")
    max_history_tool_call_cnt: int = Field(default=100, ge=1)
    recent_call_count: int = Field(default=20, ge=1, description="window of the statistics in the response")
    max_prompt_chars: int = Field(default=2000, ge=100, description="input and output are cut to this in prompts")
    evaluation_sleep_interval: float | None = Field(default=None, ge=0, description="ReMe's; ignored")


@dataclass(frozen=True)
class _Appended:
    commit: CommitResult
    #: per tool: {"status": created | updated | unchanged, "added": n, "deduplicated": n}
    outcomes: dict[str, dict[str, Any]]
    #: the calls that were stored
    calls: list[ToolCallResult]


def _first_of_each_hash(calls: list[ToolCallResult]) -> list[ToolCallResult]:
    """The calls to judge: a repeat within the request is skipped when appending, so it is not judged."""
    unique: list[ToolCallResult] = []
    hashes: set[str] = set()
    for call in calls:
        if call.call_hash not in hashes:
            hashes.add(call.call_hash)
            unique.append(call)
    return unique


def _clip(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


class ParseToolCallResultOp(ServiceOp[ParseToolCallResultParams]):
    prompts = {"evaluate": {"tool_name", "success", "time_cost", "token_cost", "input", "output"}}
    inputs = (TOOL_CALL_RESULTS,)

    async def run(self, ctx: ServiceContext) -> None:
        raws = ctx.input(TOOL_CALL_RESULTS)
        if not raws:
            raise InvalidRequestError("tool_call_results is empty: send at least one tool call record")
        calls, rejected = check_calls(raws)
        meta = ctx.response.metadata
        meta["validation_stats"] = {"total_input": len(raws), "valid": len(calls), "filtered": len(rejected)}
        if rejected:
            meta["rejected_calls"] = [r.to_dict() for r in rejected]
        if not calls:
            reasons = " | ".join(r.describe() for r in rejected)
            raise InvalidRequestError(
                f"all {len(raws)} tool call record(s) were invalid: {reasons}",
                details={"rejected_calls": [r.to_dict() for r in rejected]},
            )
        names = list(dict.fromkeys(call.tool_name for call in calls))
        unique = _first_of_each_hash(calls)
        unknown = await self._judge(ctx, names, unique)
        appended = await self._append(ctx, names, calls)
        stored = {id(call) for call in appended.calls}
        meta["evaluations"] = [
            {
                "tool_name": call.tool_name,
                "call_hash": call.call_hash,
                "score": call.score,
                "evaluated_by": call.metadata.get("evaluated_by", "none"),
                "stored": id(call) in stored,
            }
            for call in unique
        ]
        self._report(ctx, appended, unknown, total_input=len(raws), rejected_count=len(rejected))

    # -- judging ----------------------------------------------------------------------------------------

    async def _judge(self, ctx: ServiceContext, names: list[str], unique: list[ToolCallResult]) -> dict[str, Verdict]:
        """Fill each distinct call's score, summary and evaluation; returns the verdicts with an unknown score."""
        llm = ctx.services.llm(self.params.llm)
        if not (self.params.enable_llm_evaluation and llm.available):
            if self.params.enable_llm_evaluation:
                ctx.without_llm(self.name)
            for call in unique:
                heuristic_verdict(call).apply(call)
            ctx.response.metadata["evaluation_stats"] = {"judge": "heuristic", "judged": len(unique)}
            return {}
        store = ctx.store(self.params.store)
        stored = await load_tool_memories(store, ctx.workspace_id, names)
        known = {c.call_hash for item in stored.values() for c in item.memory.tool_call_results}
        fresh = [call for call in unique if call.call_hash not in known]
        verdicts = await judge_with_llm(
            llm,
            fresh,
            self._prompt_for(ctx),
            max_concurrent=self.params.max_concurrent_evaluations,
            attempts=self.params.evaluation_attempts,
        )
        for call, verdict in zip(fresh, verdicts, strict=True):
            verdict.apply(call)
        for call in unique:
            if call.call_hash in known:  # a duplicate: skipped when appending, unless evicted meanwhile
                Verdict(None, "", "Not evaluated: the call was already recorded.", "none", "already_recorded").apply(
                    call
                )
        ctx.response.metadata["evaluation_stats"] = {
            "judge": "llm",
            "judged": len(fresh),
            "scored": sum(1 for v in verdicts if v.score is not None),
            "unknown_score": sum(1 for v in verdicts if v.score is None),
            "already_recorded": len(unique) - len(fresh),
        }
        return {call.call_hash: v for call, v in zip(fresh, verdicts, strict=True) if v.reason}

    def _prompt_for(self, ctx: ServiceContext) -> Callable[[ToolCallResult], str]:
        limit = self.params.max_prompt_chars

        def render(call: ToolCallResult) -> str:
            return self.render(
                ctx,
                "evaluate",
                tool_name=call.tool_name,
                success=str(call.success).lower(),
                time_cost=call.time_cost,
                token_cost=call.token_cost,
                input=_clip(call.input, limit),
                output=_clip(call.output, limit),
            )

        return render

    # -- appending --------------------------------------------------------------------------------------

    async def _append(self, ctx: ServiceContext, names: list[str], calls: list[ToolCallResult]) -> _Appended:
        by_tool: dict[str, list[ToolCallResult]] = {name: [] for name in names}
        for call in calls:
            by_tool[call.tool_name].append(call)
        workspace = ctx.workspace_id
        cap = self.params.max_history_tool_call_cnt
        outcomes: dict[str, dict[str, Any]] = {}
        appended: list[ToolCallResult] = []

        def append(name: str, stored: StoredTool | None) -> StoredTool | None:
            item = stored or new_tool_memory(workspace, name)
            seen = {c.call_hash or c.compute_hash() for c in item.memory.tool_call_results}
            added = []
            for call in by_tool[name]:
                if call.call_hash not in seen:
                    seen.add(call.call_hash)
                    added.append(call)
            status = "created" if stored is None else "updated" if added else "unchanged"
            outcomes[name] = {"status": status, "added": len(added), "deduplicated": len(by_tool[name]) - len(added)}
            if not added:
                return None
            record_calls(item.memory, added, max_history=cap)
            item.memory.time_modified = now_str()
            appended.extend(added)
            return item

        store = ctx.store(self.params.store)
        commit = await update_tool_memories(store, workspace, names, append)
        return _Appended(commit, outcomes, appended)

    # -- the response -----------------------------------------------------------------------------------

    def _report(
        self,
        ctx: ServiceContext,
        appended: _Appended,
        reasons: dict[str, Verdict],
        *,
        total_input: int,
        rejected_count: int,
    ) -> None:
        meta = ctx.response.metadata
        commit, outcomes = appended.commit, appended.outcomes
        memories = [commit.memories[name] for name in outcomes if name in commit.memories]
        meta["memory_list"] = [m.model_dump(mode="json") for m in memories]
        meta["deleted_memory_ids"] = commit.deleted_memory_ids
        meta["update_result"] = commit.update_result
        added = sum(o["added"] for o in outcomes.values())
        duplicates = sum(o["deduplicated"] for o in outcomes.values())
        meta["deduplication_stats"] = {"total_new": added + duplicates, "deduplicated": duplicates, "added": added}
        tools = []
        for name, outcome in outcomes.items():
            memory = commit.memories.get(name)
            stats = tool_statistics(memory, self.params.recent_call_count) if memory is not None else None
            memory_id = memory.memory_id if memory is not None else ""
            tools.append({"tool_name": name, **outcome, "memory_id": memory_id, "statistics": stats})
        meta["tools"] = tools
        unscored = [
            {"tool_name": c.tool_name, "call_hash": c.call_hash, "reason": reasons[c.call_hash].reason}
            for c in appended.calls
            if c.score is None and c.call_hash in reasons
        ]
        warnings = []
        if unscored:
            meta["unscored_calls"] = unscored
            down = [u for u in unscored if u["reason"] == LLM_UNAVAILABLE]
            if down:
                detail = reasons[down[0]["call_hash"]].evaluation
                warnings.append(f"{len(down)} call(s) stored with an unknown score: the LLM was unavailable. {detail}")
            if len(down) < len(unscored):
                warnings.append(
                    f"{len(unscored) - len(down)} call(s) stored with an unknown score: "
                    "the LLM's judgement could not be parsed."
                )
            meta["warnings"] = warnings
        ctx.response.answer = self._answer(tools, total_input, rejected_count, added, duplicates, warnings)

    @staticmethod
    def _answer(
        tools: list[dict[str, Any]], total_input: int, rejected: int, added: int, duplicates: int, warnings: list[str]
    ) -> str:
        counts = {
            status: sum(1 for t in tools if t["status"] == status) for status in ("created", "updated", "unchanged")
        }
        lines = [
            f"Processed {len(tools)} tool(s): {counts['updated']} updated, {counts['created']} newly created, "
            f"{counts['unchanged']} unchanged"
        ]
        labels = {"created": "New", "updated": "Updated", "unchanged": "Unchanged"}
        for tool in tools:
            line = f"[{labels[tool['status']]}] {tool['tool_name']}: {tool['added']} call(s) added"
            if tool["deduplicated"]:
                line += f", {tool['deduplicated']} duplicate(s) skipped"
            stats = tool["statistics"]
            if stats is not None:
                recent = stats["recent"]
                score = "unknown" if recent["avg_score"] is None else f"{recent['avg_score']:.2f}"
                line += (
                    f"; total calls: {stats['total_calls']}; recent calls: {recent['successes']}/{recent['calls']} "
                    f"successful, avg score: {score}"
                )
            lines.append(line)
        lines.append(f"Validation: {total_input} input, {total_input - rejected} valid, {rejected} rejected")
        lines.append(f"Deduplication: {added + duplicates} new, {added} added, {duplicates} duplicate(s)")
        lines.extend(f"Warning: {w}" for w in warnings)
        return "\n".join(lines)
