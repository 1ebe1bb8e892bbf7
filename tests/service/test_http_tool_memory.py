"""Tool memory over real HTTP with the fake OpenAI server: the LLM judge, its failures, guidelines, bad input."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from reme_service.testing.openai_server import FakeOpenAI, FakeReply
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

JUDGE = "ParseToolCallResultOp"  # judges each new call (add_tool_call_result)
GUIDE = "SummaryToolMemoryOp"  # writes the usage guide (summary_tool_memory)
CALLS = [
    {
        "tool_name": "web_search",
        "input": {"query": "Python asyncio tutorial", "max_results": 10},
        "output": "Found 10 relevant results about asyncio",
        "token_cost": 150,
        "success": True,
        "time_cost": 2.3,
    },
    {
        "tool_name": "web_search",
        "input": {"query": "asyncio gather", "max_results": 10},
        "output": "No results found",
        "success": True,
        "time_cost": 1.0,
    },
]


def judge(body: dict[str, Any]) -> str:
    """The verdict on the call in the prompt (calls are judged concurrently, so by the call's data, not by order)."""
    prompt = body["messages"][-1]["content"]
    useful = "No results found" not in prompt
    verdict = {"summary": "searched the web", "evaluation": "Judged by the fake.", "score": 1 if useful else 0}
    return f"```json\n{json.dumps(verdict)}\n```"


def add(client: httpx.Client, calls: list[dict[str, Any]], workspace: str = "ws") -> httpx.Response:
    return client.post("/add_tool_call_result", json={"workspace_id": workspace, "tool_call_results": calls})


def stored_calls(client: httpx.Client, tool: str = "web_search") -> list[dict[str, Any]]:
    r = client.post("/retrieve_tool_memory", json={"workspace_id": "ws", "tool_names": tool})
    return r.json()["metadata"]["memory_list"][0]["tool_call_results"]


def test_llm_judges_each_new_call_once(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op(JUDGE, judge)
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        r = add(client, CALLS)
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True
        assert [e["score"] for e in body["metadata"]["evaluations"]] == [1.0, 0.0]
        assert body["metadata"]["evaluation_stats"] == {
            "judge": "llm", "judged": 2, "scored": 2, "unknown_score": 0, "already_recorded": 0
        }  # fmt: skip
        assert "no_llm_ops" not in body["metadata"] and "warnings" not in body["metadata"]
        calls = stored_calls(client)
        assert [(c["score"], c["summary"], c["metadata"]["evaluated_by"]) for c in calls] == [
            (1.0, "searched the web", "llm"),
            (0.0, "searched the web", "llm"),
        ]
        prompts = [body["messages"][-1]["content"] for body in fake.requests_to("chat")]  # judged concurrently
        assert any("Python asyncio tutorial" in p and "Tool: web_search" in p for p in prompts)
        assert len(fake.requests_to("chat")) == 2
        again = add(client, CALLS[:1]).json()
        assert len(fake.requests_to("chat")) == 2  # a call already recorded is not judged again
        assert again["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 0}


def test_unparseable_judgement_keeps_the_call_with_an_unknown_score(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op(JUDGE, "Looks fine to me!")
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        r = add(client, CALLS[:1])
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True
        assert len(fake.requests_to("chat")) == 2  # asked again once, then given up
        assert body["metadata"]["unscored_calls"] == [
            {"tool_name": "web_search", "call_hash": body["metadata"]["evaluations"][0]["call_hash"],
             "reason": "unparseable_judgement"}
        ]  # fmt: skip
        assert body["metadata"]["warnings"] == [
            "1 call(s) stored with an unknown score: the LLM's judgement could not be parsed."
        ]
        assert "Warning: 1 call(s) stored with an unknown score" in body["answer"]
        (call,) = stored_calls(client)
        assert call["score"] is None and call["evaluation"].startswith(
            "Not evaluated: its judgement could not be parsed"
        )
        stats = body["metadata"]["tools"][0]["statistics"]
        assert stats["recent"]["scored_calls"] == 0 and stats["recent"]["avg_score"] is None


def test_llm_down_still_stores_every_call_and_says_so(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.fail_next(100, status=500, endpoint="chat")
    one_at_a_time = "flow.add_tool_call_result.flow_content=ParseToolCallResultOp(max_concurrent_evaluations=1)"
    with serve("llm.default.max_retries=1", one_at_a_time, env={"FLOW_LLM_BASE_URL": url}) as client:
        calls = [*CALLS, {**CALLS[0], "tool_name": "calc", "output": "42"}]
        r = add(client, calls)
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True
        assert body["metadata"]["update_result"]["inserted_count"] == 2
        assert [u["reason"] for u in body["metadata"]["unscored_calls"]] == ["llm_unavailable"] * 3
        (warning,) = body["metadata"]["warnings"]
        assert warning.startswith("3 call(s) stored with an unknown score: the LLM was unavailable.")
        assert "HTTP 500" in warning
        assert len(fake.requests_to("chat")) == 2  # one call tried (and retried); the others were not sent
        assert [c["score"] for c in stored_calls(client)] == [None, None]
        assert stored_calls(client, "calc")[0]["score"] is None


def test_bad_input_is_rejected_with_reasons(serve: ServeFn) -> None:
    with serve() as client:
        assert client.post("/add_tool_call_result", json={"workspace_id": "ws"}).status_code == 422
        assert add(client, []).status_code == 422
        r = add(client, [{"input": {"q": 1}, "output": "x"}, {"tool_name": "calc", "output": ""}])
        assert r.status_code == 400
        body = r.json()
        assert body["success"] is False and body["answer"] == ""
        message = body["metadata"]["error"]["message"]
        assert "all 2 tool call record(s) were invalid" in message
        assert "#0: tool_name is missing" in message and "#1 (calc): output is empty" in message
        partly = add(client, [CALLS[0], {"tool_name": "calc"}]).json()
        assert partly["success"] is True
        assert partly["metadata"]["rejected_calls"] == [
            {"index": 1, "tool_name": "calc", "reasons": ["output is missing"]}
        ]
        for flow in ("summary_tool_memory", "retrieve_tool_memory"):
            assert client.post(f"/{flow}", json={"workspace_id": "ws"}).status_code == 422
            for empty in ("", " , ", [], [" "], 7):
                r = client.post(f"/{flow}", json={"workspace_id": "ws", "tool_names": empty})
                assert r.status_code == 422, (flow, empty)
            ok = client.post(f"/{flow}", json={"workspace_id": "ws", "tool_names": ["web_search", "calc"]})
            assert ok.status_code == 200 and ok.json()["success"] is True
        detail = client.post("/retrieve_tool_memory", json={"tool_names": ""}).json()["detail"][0]
        assert detail["loc"] == ["body", "tool_names"] and "at least one tool name" in detail["msg"]


def test_summary_with_llm_stores_guideline_and_statistics(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op(JUDGE, judge)
    guideline = "## Core Function\nSearches the web.\n## Best Practices\nKeep max_results at 10."
    fake.on_op(GUIDE, f"Here is the guide:\n```txt\n{guideline}\n```")
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        add(client, CALLS)
        r = client.post("/summary_tool_memory", json={"workspace_id": "ws", "tool_names": "web_search,missing"})
        assert r.status_code == 200
        body = r.json()
        assert body["metadata"]["summarized"] == ["web_search"] and body["metadata"]["not_found"] == ["missing"]
        memory = body["metadata"]["memory_list"][0]
        assert memory["content"].startswith(guideline + "\n\n## Statistics\n- **Success Rate**: 100.00%\n")
        assert "- **Average Score**: 0.500" in memory["content"]
        assert memory["author"] == "qwen3-30b-a3b-instruct-2507"
        assert all(c["is_summarized"] for c in memory["tool_call_results"])
        prompt = fake.requests_to("chat")[-1]["messages"][-1]["content"]
        assert "### Call #2" in prompt and "asyncio gather" in prompt and "- Score: 0" in prompt
        retrieved = client.post("/retrieve_tool_memory", json={"workspace_id": "ws", "tool_names": ["web_search"]})
        assert retrieved.json()["answer"] == f"Retrieved 1 tool memory(ies):\n\nTool: web_search\n{memory['content']}"


def test_summary_llm_failure_is_502_and_writes_nothing(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op(JUDGE, judge)
    fake.on_op(GUIDE, "```txt\n```")
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        add(client, CALLS)
        r = client.post("/summary_tool_memory", json={"workspace_id": "ws", "tool_names": "web_search"})
        assert r.status_code == 502
        assert r.json()["success"] is False and r.json()["metadata"]["error"]["code"] == "llm_error"
        calls = stored_calls(client)
        assert not any(c["is_summarized"] for c in calls)
        retrieved = client.post("/retrieve_tool_memory", json={"workspace_id": "ws", "tool_names": "web_search"})
        assert retrieved.json()["metadata"]["memory_list"][0]["content"] == ""


def test_mock_search_lets_the_llm_pick_a_tool(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op(
        "UseMockSearchOp",  # its calls in order: pick a tool, rate the query's complexity, write the result
        FakeReply(tool_calls=[("search_tool_c", {"query": "deep question"})]),
        "complex",
        "A long and detailed report.",
    )
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        r = client.post("/use_mock_search", json={"query": "Why did the Roman Empire fall?", "seed": 1})
        assert r.status_code == 200
        body = r.json()
        call = json.loads(body["answer"])
        assert call["tool_name"] == "search_tool_c" and call["input"] == {"query": "deep question"}
        output = json.loads(call["output"])
        assert output["complexity"] == "complex" and output["query"] == "deep question"
        assert body["metadata"]["mock_search"]["selected_by"] == "llm"
        expected = {
            "relevant": "A long and detailed report.",
            "irrelevant": "[Low Relevance Result] A long and detailed report.",
            "failure": "Search backend overloaded: the request could not be served right now. Please try again later.",
        }
        outcome = body["metadata"]["mock_search"]["outcome"]  # the seeded draw
        assert output["content"] == expected[outcome]
        assert fake.ops == ["UseMockSearchOp"] * (2 if outcome == "failure" else 3)
        first = fake.requests_to("chat")[0]
        assert [t["function"]["name"] for t in first["tools"]] == ["search_tool_a", "search_tool_b", "search_tool_c"]
        assert re.search(r"Best suited for complex queries", json.dumps(first["tools"]))
        fake.reset()
        fake.on_op("UseMockSearchOp", "I would rather answer myself.")
        none = client.post("/use_mock_search", json={"query": "anything"}).json()
        assert json.loads(none["answer"])["tool_name"] == "None" and json.loads(none["answer"])["success"] is False
