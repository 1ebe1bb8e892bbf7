"""The tool-memory benchmark script end to end, its service's LLM a scripted double (a handful of queries)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest

from reme_service.app import ReMeApp
from reme_service.schema.messages import Message, Role, ToolCall
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.conftest import REPO_ROOT

GUIDE = "## Core Function\nMock search."


def load_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (registered in sys.modules for the test only: its dataclasses need that)."""
    path = REPO_ROOT / "cookbook" / "bench" / "tool_memory_bench.py"
    spec = importlib.util.spec_from_file_location("tool_memory_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def simulated_model(bench: ModuleType, llm: ScriptedLLM) -> tuple[Any, Any]:
    """Replies for the two ops that ask the LLM about the bench's queries: a model that answers from the data.

    The replies are routed by op (the double); within UseMockSearchOp, the tool-selection call is the one that
    offers tools. What the simulated model answers depends on the data it is given, as a real model's would: the
    query (one of the bench's own queries, whose complexity the test knows), whether the prompt carries the
    tool guide the summary wrote (`GUIDE`: then it picks the tool suited to the query, else always tool A), and
    whether the judged record says its result was relevant.
    """
    levels = {
        query: level
        for per_level in (2, 3)  # --train-per-level 2 and, for the test queries, 2 + --test-per-level 1
        for level, queries in bench.make_queries(per_level, seed=0).items()
        for query in queries
    }

    def search(messages: Sequence[Message]) -> Message | str:
        call = llm.calls[-1]  # this very call: the double records it before asking for the reply
        queries = [query for query in levels if query in call.prompt]
        assert len(queries) <= 1, queries
        if call.tools:
            (query,) = queries
            tool = bench.BEST_TOOL[levels[query]] if GUIDE in call.prompt else "search_tool_a"
            return Message(
                role=Role.ASSISTANT, tool_calls=[ToolCall(id="c1", name=tool, arguments=json.dumps({"query": query}))]
            )
        # the complexity rating, or the search result (the rating parses the level word out of it)
        return f"A {levels[queries[0]]} search result." if queries else "Something unrelated."

    def judge(messages: Sequence[Message]) -> str:
        relevant = '"is_relevant": true' in messages[-1].text
        return json.dumps({"summary": "a search", "evaluation": "fake", "score": 1 if relevant else 0})

    return search, judge


def test_bench_runs_the_protocol_against_an_llm(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench(monkeypatch)
    llm = ScriptedLLM()
    search, judge = simulated_model(bench, llm)
    llm.on("UseMockSearchOp", search).on("ParseToolCallResultOp", judge)
    llm.on("SummaryToolMemoryOp", f"```txt\n{GUIDE}\n```")
    apps: list[ReMeApp] = []

    def app_on_the_scripted_llm(*args: str, **kwargs: Any) -> ReMeApp:
        apps.append(ReMeApp(*args, **kwargs, llm_clients={"default": llm}))
        return apps[-1]

    monkeypatch.setattr(bench, "ReMeApp", app_on_the_scripted_llm)
    argv = ["--base-url", "http://llm.invalid/v1", "--api-key", "k", "--model", "fake-model"]
    figures = bench.main([*argv, "--epochs", "1", "--train-per-level", "2", "--test-per-level", "1"])
    for phase, scored in (("train", 6), ("test_without_memory", 3), ("test_with_memory", 3)):
        assert figures[phase]["scored_calls"] == scored and figures[phase]["unknown_scores"] == 0
        assert 0.0 <= figures[phase]["mean"] <= 1.0
    assert figures["test_without_memory"]["best_tool_rate"] == pytest.approx(1 / 3)
    assert figures["test_with_memory"]["best_tool_rate"] == 1.0
    (summary,) = llm.calls_of("SummaryToolMemoryOp")  # only search_tool_a was used in training
    assert "search_tool_a" in summary.prompt
    selections = [call.prompt for call in llm.calls_of("UseMockSearchOp") if call.tools]
    assert len(selections) == 12
    with_memory = [prompt for prompt in selections if "Tool Information" in prompt]
    assert with_memory == selections[-3:] and all(f"Tool: search_tool_a\n{GUIDE}" in p for p in with_memory)
    assert len(llm.calls_of("ParseToolCallResultOp")) == 12
    # the script's connection options reach the service (the wire itself is the OpenAI client's tests' business)
    (app,) = apps
    assert app.config.llm["default"].model_name == "fake-model"
    assert app.env["FLOW_LLM_BASE_URL"] == "http://llm.invalid/v1" and app.env["FLOW_LLM_API_KEY"] == "k"
    out = capsys.readouterr().out
    assert "test_with_memory" in out and "with memory vs without:" in out


# ReMe's tool bench (cookbook/tool_memory/run_reme_tool_bench.py) builds its "with memory" prompt by passing the
# retrieved tool memory through str.format(); a guideline with a brace made every such query fail (0 of 60).
REME_WITH_MEMORY_TEMPLATE = "Tool Information\n{memory}\nMust select one tool to answer\nQuery\n{query}"


@pytest.mark.anyio
async def test_no_llm_guidelines_survive_remes_format_and_count_with_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    bench = load_bench(monkeypatch)
    queries = [q for per_level in bench.make_queries(1, seed=0).values() for q in per_level]
    records = [
        {
            "tool_name": "search_tool_a",
            "input": {"query": query, "options": {"depth": n % 2, "filters": ["news"]}},
            "output": '{"error": "timeout"}' if n % 3 == 0 else f"results for {query}",
            "success": n % 3 != 0,
            "time_cost": 1.0,
            "token_cost": 10,
        }
        for n, query in enumerate(queries * 2)
    ]
    args = (f"data_dir={tmp_path}", "embedding_model.default.backend=hash", "vector_store.default.backend=memory")
    async with ReMeApp(*args, env={}) as app:  # no LLM: the guideline is written from the data
        ws = {"workspace_id": "bench_memory"}
        added = await app.async_execute("add_tool_call_result", **ws, tool_call_results=records)
        assert added["success"] is True, added
        summary = await app.async_execute("summary_tool_memory", **ws, tool_names="search_tool_a")
        assert summary["success"] is True, summary
        retrieved = await app.async_execute("retrieve_tool_memory", **ws, tool_names="search_tool_a")
    memory = retrieved["answer"]
    assert "search_tool_a" in memory and "## Best Practices" in memory
    assert memory.format() == memory  # no brace: nothing raises, nothing doubled is undone
    with_memory = 0
    for query in queries:
        try:
            prompt = REME_WITH_MEMORY_TEMPLATE.format(memory=memory, query=query).format()  # as ReMe's bench does
        except (KeyError, IndexError, ValueError):
            continue
        with_memory += query in prompt
    assert with_memory == len(queries) > 0
