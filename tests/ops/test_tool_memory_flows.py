"""The tool-memory flows on the op harness (`reme_service.testing.run_op`, no app) without an LLM: exact keys,
dedup, caps, legacy data, concurrency."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from reme_service.ops.tool.tool_memory_store import tool_memory_id
from reme_service.testing.run_op import FlowCaller, Flows, op_services

pytestmark = pytest.mark.anyio


def record(tool: str, i: int, *, output: str | None = None, success: bool = True) -> dict[str, Any]:
    return {
        "tool_name": tool,
        "input": {"query": f"q{i}", "limit": 10},
        "output": output if output is not None else f"result {i}",
        "success": success,
        "time_cost": 1.5,
        "token_cost": 40,
    }


@asynccontextmanager
async def tool_flows(tmp_path: Path, *overrides: str) -> AsyncIterator[FlowCaller]:
    """The flows alone (no app: `reme_service.testing.run_op`) on the local store in `tmp_path`."""
    async with op_services(tmp_path, "vector_store.default.backend=local", *overrides) as services:
        yield Flows(services)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FlowCaller]:
    async with tool_flows(tmp_path) as flows:
        yield flows


async def add(app: FlowCaller, *records: dict[str, Any], workspace: str = "ws") -> dict[str, Any]:
    result = await app.async_execute(
        name="add_tool_call_result", workspace_id=workspace, tool_call_results=list(records)
    )
    assert result["success"] is True, result
    return result


async def tool_nodes(app: FlowCaller, workspace: str = "ws") -> list[dict[str, Any]]:
    listed = await app.async_execute(name="vector_store", workspace_id=workspace, action="list")
    return [m for m in listed["metadata"]["action_result"] if m["memory_type"] == "tool"]


async def test_add_creates_one_memory_per_tool_under_its_exact_key(app: FlowCaller) -> None:
    result = await add(app, record("web_search", 1), record("web_search_v2", 1), record("search", 1))
    assert result["answer"].startswith("Processed 3 tool(s): 0 updated, 3 newly created, 0 unchanged")
    assert result["metadata"]["no_llm_ops"] == ["ParseToolCallResultOp"]
    assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 3}
    ids = {m["when_to_use"]: m["memory_id"] for m in result["metadata"]["memory_list"]}
    assert ids == {name: tool_memory_id("ws", name) for name in ("web_search", "web_search_v2", "search")}
    # Similar names never resolve to each other, however close their embeddings are.
    await add(app, record("web_search", 2))
    retrieved = await app.async_execute(name="retrieve_tool_memory", workspace_id="ws", tool_names="web_search")
    (memory,) = retrieved["metadata"]["memory_list"]
    assert memory["when_to_use"] == "web_search"
    assert [c["input"]["query"] for c in memory["tool_call_results"]] == ["q1", "q2"]
    assert len(await tool_nodes(app)) == 3


async def test_a_request_that_adds_nothing_rewrites_nothing(app: FlowCaller) -> None:
    first = await add(app, record("calc", 1), record("calc", 1))  # the repeat within the request is skipped
    assert first["metadata"]["deduplication_stats"] == {"total_new": 2, "deduplicated": 1, "added": 1}
    before = (await tool_nodes(app))[0]
    again = await add(app, record("calc", 1))
    assert again["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 0}
    assert again["metadata"]["deduplication_stats"] == {"total_new": 1, "deduplicated": 1, "added": 0}
    assert again["metadata"]["tools"][0]["status"] == "unchanged"
    assert "[Unchanged] calc: 0 call(s) added, 1 duplicate(s) skipped" in again["answer"]
    assert (await tool_nodes(app))[0] == before


async def test_rejected_records_are_reported_and_all_invalid_is_an_error(app: FlowCaller) -> None:
    result = await add(app, record("calc", 1), {"input": {"x": 1}, "output": "ok"}, record("calc", 2, output=" "))
    assert result["metadata"]["validation_stats"] == {"total_input": 3, "valid": 1, "filtered": 2}
    assert result["metadata"]["rejected_calls"] == [
        {"index": 1, "tool_name": "", "reasons": ["tool_name is missing"]},
        {"index": 2, "tool_name": "calc", "reasons": ["output is empty"]},
    ]
    failed = await app.async_execute(
        name="add_tool_call_result", workspace_id="ws", tool_call_results=[{"output": "x"}, {"tool_name": "t"}]
    )
    assert failed["success"] is False
    error = failed["metadata"]["error"]
    assert error["code"] == "invalid_request"
    assert "#0: tool_name is missing" in error["message"] and "#1 (t): output is missing" in error["message"]
    assert [r["index"] for r in error["details"]["rejected_calls"]] == [0, 1]


async def test_history_is_capped_and_totals_still_count_every_call(tmp_path: Path) -> None:
    capped = "flow.add_tool_call_result.flow_content=ParseToolCallResultOp(max_history_tool_call_cnt=5)"
    async with tool_flows(tmp_path, capped) as app:
        await add(app, *(record("calc", i, success=i % 4 != 0) for i in range(12)))
        result = await app.async_execute(name="retrieve_tool_memory", workspace_id="ws", tool_names=["calc"])
    memory = result["metadata"]["memory_list"][0]
    assert [c["input"]["query"] for c in memory["tool_call_results"]] == [f"q{i}" for i in range(7, 12)]
    stats = result["metadata"]["statistics"]["calc"]
    assert stats["total_calls"] == 12 and stats["history_size"] == 5
    assert stats["overall"]["successes"] == 9 and stats["recent"]["calls"] == 5


async def test_legacy_and_duplicate_memories_are_found_merged_and_migrated(app: FlowCaller) -> None:
    def legacy(memory_id: str, queries: list[int]) -> dict[str, Any]:
        calls = [{**record("calc", i), "score": 1.0} for i in queries]
        return {"memory_id": memory_id, "memory_type": "tool", "when_to_use": "calc", "tool_call_results": calls}

    inserted = await app.async_execute(
        name="vector_store",
        workspace_id="ws",
        action="insert",
        memory_dicts=[legacy("old1", [1, 2]), legacy("old2", [2, 3])],
    )
    assert inserted["success"] is True
    found = await app.async_execute(name="retrieve_tool_memory", workspace_id="ws", tool_names="calc")
    (merged,) = found["metadata"]["memory_list"]
    assert [c["input"]["query"] for c in merged["tool_call_results"]] == ["q1", "q2", "q3"]
    result = await add(app, record("calc", 4))
    assert sorted(result["metadata"]["deleted_memory_ids"]) == ["old1", "old2"]
    assert result["metadata"]["update_result"] == {"deleted_count": 2, "inserted_count": 1}
    (node,) = await tool_nodes(app)
    assert node["memory_id"] == tool_memory_id("ws", "calc")
    assert [c["input"]["query"] for c in node["tool_call_results"]] == ["q1", "q2", "q3", "q4"]


async def test_workspaces_keep_separate_memories_for_the_same_tool(app: FlowCaller) -> None:
    await add(app, record("calc", 1), workspace="a")
    await add(app, record("calc", 2), workspace="b")
    for workspace, query in (("a", "q1"), ("b", "q2")):
        found = await app.async_execute(name="retrieve_tool_memory", workspace_id=workspace, tool_names="calc")
        assert [c["input"]["query"] for c in found["metadata"]["memory_list"][0]["tool_call_results"]] == [query]


# each append rewrites the tool's memory with every call so far (the cost grows as the square of the count); 100
# interleaved appends lose calls as surely as 300 once the workspace lock is gone (checked)
CONCURRENT_APPENDS = 100


@pytest.mark.slow
async def test_concurrent_appends_and_summaries_lose_no_call(tmp_path: Path) -> None:
    big = "flow.add_tool_call_result.flow_content=ParseToolCallResultOp(max_history_tool_call_cnt=1000)"
    async with tool_flows(tmp_path, big) as app:
        jobs = [add(app, record("search", i)) for i in range(CONCURRENT_APPENDS)]
        jobs += [
            app.async_execute(name="summary_tool_memory", workspace_id="ws", tool_names="search") for _ in range(5)
        ]
        results = await asyncio.gather(*jobs)
        assert all(r["success"] for r in results[:CONCURRENT_APPENDS])
        # a summary that ran before the first append found no memory: ReMe's success false, code not_found
        assert all(r["success"] or r["metadata"]["error"]["code"] == "not_found" for r in results[CONCURRENT_APPENDS:])
        found = await app.async_execute(name="retrieve_tool_memory", workspace_id="ws", tool_names="search")
    memory = found["metadata"]["memory_list"][0]
    assert len({c["input"]["query"] for c in memory["tool_call_results"]}) == CONCURRENT_APPENDS
    assert found["metadata"]["statistics"]["search"]["total_calls"] == CONCURRENT_APPENDS


async def test_summary_without_llm_writes_a_data_guideline_then_skips_until_new_calls(app: FlowCaller) -> None:
    await add(
        app,
        *(record("search", i) for i in range(3)),
        record("search", 9, output="Error: quota exceeded", success=False),
        record("search", 10, output="Error: quota exceeded", success=False),
    )
    result = await app.async_execute(name="summary_tool_memory", workspace_id="ws", tool_names="search,unknown_tool")
    assert result["success"] is True
    meta = result["metadata"]
    assert meta["no_llm_ops"] == ["SummaryToolMemoryOp"]
    assert (meta["summarized"], meta["skipped"], meta["not_found"]) == (["search"], [], ["unknown_tool"])
    content = meta["memory_list"][0]["content"]
    for section in (
        "## Core Function",
        "## Success Patterns",
        "## Common Issues",
        "## Best Practices",
        "## Statistics",
    ):
        assert section in content
    assert 'Most common failure outputs: "Error: quota exceeded" (2x)' in content
    assert "- **Success Rate**: 60.00%" in content
    assert all(c["is_summarized"] for c in meta["memory_list"][0]["tool_call_results"])
    assert meta["statistics"]["search"]["recent"]["successes"] == 3
    assert result["answer"].startswith("Processed 2 tool(s): 1 summarized, 0 skipped, 1 not found")
    assert "\n---\nTool: search\n## Core Function" in result["answer"]

    again = await app.async_execute(name="summary_tool_memory", workspace_id="ws", tool_names=["search"])
    assert again["metadata"]["skipped"] == ["search"] and again["metadata"]["update_result"]["inserted_count"] == 0
    await add(app, record("search", 11))
    third = await app.async_execute(name="summary_tool_memory", workspace_id="ws", tool_names=["search"])
    assert third["metadata"]["summarized"] == ["search"]
    assert "the last 6 of 6" in third["metadata"]["memory_list"][0]["content"]


async def test_retrieve_answers_with_guidelines_or_statistics_and_reports_unknown_names(app: FlowCaller) -> None:
    await add(app, record("calc", 1), record("search", 1))
    await app.async_execute(name="summary_tool_memory", workspace_id="ws", tool_names="search")
    result = await app.async_execute(name="retrieve_tool_memory", workspace_id="ws", tool_names="search, calc, nope")
    assert result["success"] is True
    answer = result["answer"]
    assert answer.startswith("Retrieved 2 tool memory(ies):\n\nTool: search\n## Core Function")
    assert "\n---\nTool: calc\nNo usage guideline yet (run summary_tool_memory).\n\n## Statistics" in answer
    assert result["metadata"]["not_found"] == ["nope"]
    assert set(result["metadata"]["statistics"]) == {"search", "calc"}
    nothing = await app.async_execute(name="retrieve_tool_memory", workspace_id="empty", tool_names="nope")
    assert nothing["success"] is False and nothing["answer"] == "No matching tool memories found"  # as ReMe 0.2
    assert nothing["metadata"]["memory_list"] == [] and nothing["metadata"]["not_found"] == ["nope"]
    assert nothing["metadata"]["error"]["code"] == "not_found"


async def test_empty_tool_names_fail_validation(app: FlowCaller) -> None:
    empties: tuple[str | list[str], ...] = ("", " , ", [])
    for empty in empties:
        for flow in ("summary_tool_memory", "retrieve_tool_memory"):
            result = await app.async_execute(name=flow, workspace_id="ws", tool_names=empty)
            assert result["success"] is False
            assert result["metadata"]["error"]["code"] == "validation_error"


async def test_mock_search_without_llm_is_seeded_and_feeds_add_tool_call_result(app: FlowCaller) -> None:
    first = await app.async_execute(name="use_mock_search", query="capital of France", seed=3)
    again = await app.async_execute(name="use_mock_search", query="capital of France", seed=3)
    assert first["metadata"]["no_llm_ops"] == ["UseMockSearchOp"]
    call = json.loads(first["answer"])
    assert call == first["metadata"]["tool_call_result"]
    assert {k: v for k, v in call.items() if k not in ("create_time", "time_cost")} == {
        k: v for k, v in json.loads(again["answer"]).items() if k not in ("create_time", "time_cost")
    }
    assert call["tool_name"] in {"search_tool_a", "search_tool_b", "search_tool_c"}
    assert call["input"] == {"query": "capital of France"}
    output = json.loads(call["output"])
    assert set(output) == {"success", "content", "query", "complexity", "is_relevant"}
    assert output["complexity"] == "simple" and call["success"] == output["success"]
    assert call["token_cost"] == len(output["content"]) // 4
    outcomes = set()
    for seed in range(40):
        result = await app.async_execute(name="use_mock_search", query="capital of France", seed=seed)
        outcomes.add(result["metadata"]["mock_search"]["outcome"])
        added = await add(app, result["metadata"]["tool_call_result"])
        assert added["metadata"]["evaluations"][0]["score"] in (0.0, 1.0)
    assert outcomes == {"failure", "irrelevant", "relevant"}
