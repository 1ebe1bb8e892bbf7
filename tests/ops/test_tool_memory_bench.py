"""The tool-memory benchmark script end to end against the fake OpenAI server (a handful of queries)."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.fakes.openai_server import FakeOpenAI, FakeReply
from tests.fakes.serve import serve_in_thread


def load_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (registered in sys.modules for the test only: its dataclasses need that)."""
    path = REPO_ROOT / "cookbook" / "bench" / "tool_memory_bench.py"
    spec = importlib.util.spec_from_file_location("tool_memory_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def level_of(query: str) -> str:
    if query.startswith(("Compare", "Analyse", "Evaluate")):
        return "complex"
    if query.startswith(("What is", "Give a one-line", "When did")):
        return "simple"
    return "medium"


def select(body: dict[str, Any]) -> FakeReply:
    """Without tool information the fake always takes tool A; with it, the tool suited to the query."""
    prompt = body["messages"][-1]["content"]
    query = prompt.strip().splitlines()[-1]
    tool = {"simple": "search_tool_a", "medium": "search_tool_b", "complex": "search_tool_c"}[level_of(query)]
    return FakeReply(tool_calls=[(tool if "Tool Information" in prompt else "search_tool_a", {"query": query})])


def classify(body: dict[str, Any]) -> str:
    query = body["messages"][-1]["content"].split("Query: ", 1)[1].splitlines()[0]
    return level_of(query)


def judge(body: dict[str, Any]) -> str:
    relevant = '"is_relevant": true' in body["messages"][-1]["content"]
    return json.dumps({"summary": "a search", "evaluation": "fake", "score": 1 if relevant else 0})


def test_bench_runs_the_protocol_against_an_openai_compatible_llm(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench(monkeypatch)
    fake = FakeOpenAI()
    fake.on("exactly one of the search tools", select)
    fake.on("Rate how complex", classify)
    fake.on("Play the role of a search engine", "A relevant result.")
    fake.on("misunderstood the request", "Something unrelated.")
    fake.on("reviewing one call", judge)
    fake.on("maintain the usage guide", "```txt\n## Core Function\nMock search.\n```")
    with serve_in_thread(fake.app) as base_url:
        argv = ["--base-url", f"{base_url}/v1", "--api-key", "k", "--model", "fake-model"]
        figures = bench.main([*argv, "--epochs", "1", "--train-per-level", "2", "--test-per-level", "1"])
    for phase, scored in (("train", 6), ("test_without_memory", 3), ("test_with_memory", 3)):
        assert figures[phase]["scored_calls"] == scored and figures[phase]["unknown_scores"] == 0
        assert 0.0 <= figures[phase]["mean"] <= 1.0
    assert figures["test_without_memory"]["best_tool_rate"] == pytest.approx(1 / 3)
    assert figures["test_with_memory"]["best_tool_rate"] == 1.0
    chats = [body["messages"][-1]["content"] for body in fake.requests_to("chat")]
    assert sum("maintain the usage guide" in c for c in chats) == 1  # only search_tool_a was used in training
    with_memory = [c for c in chats if "exactly one of the search tools" in c and "Tool Information" in c]
    assert len(with_memory) == 3 and all(
        "Tool: search_tool_a\n## Core Function\nMock search." in c for c in with_memory
    )
    assert all(body.get("model") == "fake-model" for body in fake.requests_to("chat"))
    out = capsys.readouterr().out
    assert "test_with_memory" in out and "with memory vs without:" in out
