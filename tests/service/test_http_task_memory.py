"""Task-memory writes over real HTTP: summary (LLM and no-LLM), record, delete, bad input, the agent example."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from reme_service.testing.openai_server import FakeOpenAI
from tests.conftest import REPO_ROOT
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service


def fenced(value: Any) -> str:
    return f"```json\n{json.dumps(value)}\n```"


def item(when: str, experience: str) -> dict[str, Any]:
    return {"when_to_use": when, "experience": experience, "tags": [], "confidence": 0.9}


def trajectory(task: str, score: float) -> dict[str, Any]:
    return {
        "task_id": task,
        "messages": [
            {"role": "user", "content": task},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "1", "function": {"name": "run", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "1", "content": "ok"},
            {"role": "assistant", "content": "finished"},
        ],
        "score": score,
        "metadata": {"query": task},
    }


def listed(client: httpx.Client, workspace: str = "ws") -> list[dict[str, Any]]:
    return client.post("/vector_store", json={"workspace_id": workspace, "action": "list"}).json()["metadata"][
        "action_result"
    ]


def script_summary(fake: FakeOpenAI) -> None:
    fake.on_op("SuccessExtractionOp", fenced([item("when booking a flight", "compare fares before paying")]))
    fake.on_op("FailureExtractionOp", fenced([item("when a payment is declined", "check the card limit first")]))
    fake.on_op(
        "ComparativeExtractionOp", fenced([item("when a task has a payment step", "confirm the amount before paying")])
    )
    fake.on_op("MemoryValidationOp", fenced({"is_valid": True, "score": 0.8, "feedback": "ok", "recommendations": ""}))


def test_summary_with_an_llm_stores_the_answered_memories(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    script_summary(fake)
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        r = client.post(
            "/summary_task_memory",
            json={"workspace_id": "ws", "trajectories": [trajectory("book a flight", 1.0), trajectory("pay", 0.0)]},
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["success"] is True
        stored_ids = {m["memory_id"] for m in json.loads(body["answer"])}
        assert stored_ids == {m["memory_id"] for m in body["metadata"]["memory_list"]}
        assert stored_ids == {m["memory_id"] for m in listed(client)}
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "booking a flight"})
        assert r.json()["metadata"]["memory_list"][0]["content"] == "compare fares before paying"


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"trajectories": [{"messages": "hello", "score": 1.0}]}, ["body", "trajectories", 0, "messages"]),
        (
            {"trajectories": [{"messages": [{"role": "user", "content": "x"}], "score": "high"}]},
            ["body", "trajectories", 0, "score"],
        ),
        (
            {"trajectories": [{"messages": [{"role": "robot", "content": "x"}], "score": 1}]},
            ["body", "trajectories", 0, "messages", 0, "role"],
        ),
        ({"trajectories": "not a list"}, ["body", "trajectories"]),
        ({}, ["body", "trajectories"]),
    ],
)
def test_malformed_trajectories_are_422_naming_the_field(serve: ServeFn, payload: dict[str, Any], loc: list) -> None:
    with serve() as client:
        for flow in ("summary_task_memory", "summary_task_memory_simple"):
            r = client.post(f"/{flow}", json={"workspace_id": "ws", **payload})
            assert r.status_code == 422, (flow, r.text)
            assert r.json()["detail"][0]["loc"] == loc


def test_empty_trajectories_or_messages_are_400(serve: ServeFn) -> None:
    with serve() as client:
        for flow in ("summary_task_memory", "summary_task_memory_simple"):
            r = client.post(f"/{flow}", json={"workspace_id": "ws", "trajectories": []})
            assert r.status_code == 400
            assert r.json()["metadata"]["error"]["details"]["field"] == "trajectories"
            r = client.post(f"/{flow}", json={"workspace_id": "ws", "trajectories": [{"messages": [], "score": 1}]})
            assert r.status_code == 400
            assert "trajectories[0] has no messages" in r.json()["metadata"]["error"]["message"]


def test_llm_down_during_summary_is_502_and_nothing_is_stored(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    script_summary(fake)
    with serve("llm.default.max_retries=1", env={"FLOW_LLM_BASE_URL": url}) as client:
        fake.fail_next(50, status=503, message="model overloaded", endpoint="chat")
        r = client.post("/summary_task_memory", json={"workspace_id": "ws", "trajectories": [trajectory("t", 1.0)]})
        assert r.status_code == 502
        body = r.json()
        assert body["success"] is False and "model overloaded" in body["metadata"]["error"]["message"]
        assert listed(client) == []
        fake.reset()
        # Extraction succeeds, then the provider dies during validation: still nothing stored.

        def extraction_then_outage(_body: dict[str, Any]) -> str:
            fake.fail_next(50, status=500, message="validation crashed", endpoint="chat")
            return fenced([item("when x", "y")])

        fake.on_op("SuccessExtractionOp", extraction_then_outage)
        r = client.post("/summary_task_memory", json={"workspace_id": "ws", "trajectories": [trajectory("t", 1.0)]})
        assert r.status_code == 502
        error = r.json()["metadata"]["error"]
        assert "validation crashed" in error["message"] and "MemoryValidationOp" in error["message"]
        assert listed(client) == []


def test_summary_without_an_llm_says_so_and_retrieval_finds_it(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post(
            "/summary_task_memory",
            json={"workspace_id": "ws", "trajectories": [trajectory("rename the database column", 1.0)]},
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert "SuccessExtractionOp" in body["metadata"]["no_llm_ops"]
        assert "MemoryValidationOp" in body["metadata"]["no_llm_ops"]
        (memory,) = body["metadata"]["memory_list"]
        assert memory["when_to_use"] == "rename the database column"
        assert "- run({}) -> ok" in memory["content"]
        r = client.post(
            "/summary_task_memory_simple", json={"workspace_id": "ws2", "trajectories": [trajectory("x", 0)]}
        )
        assert r.json()["metadata"]["no_llm_ops"] == ["SimpleSummaryOp"]
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "rename a column"})
        assert r.json()["metadata"]["memory_list"][0]["memory_id"] == memory["memory_id"]
        assert "no_llm_ops" not in r.json()["metadata"]


def test_record_unknown_ids_is_200_listing_them(serve: ServeFn) -> None:
    with serve() as client:
        client.post(
            "/vector_store",
            json={
                "workspace_id": "ws",
                "action": "insert",
                "memory_dicts": [{"memory_id": "known", "when_to_use": "a"}],
            },
        )
        r = client.post(
            "/record_task_memory",
            json={
                "workspace_id": "ws",
                "memory_dicts": [{"memory_id": "known"}, {"memory_id": "ghost"}],
                "update_utility": False,
            },
        )
        assert r.status_code == 200
        assert r.json()["metadata"]["not_found_memory_ids"] == ["ghost"]
        assert r.json()["metadata"]["memory_list"][0]["metadata"] == {"freq": 1}


def test_record_and_delete_field_errors(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/record_task_memory", json={"workspace_id": "ws", "memory_dicts": [{}]})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "update_utility"]
        r = client.post(
            "/record_task_memory", json={"workspace_id": "ws", "memory_dicts": ["x"], "update_utility": True}
        )
        assert r.status_code == 422
        r = client.post(
            "/record_task_memory", json={"workspace_id": "ws", "memory_dicts": [{}], "update_utility": True}
        )
        assert r.status_code == 400
        r = client.post("/delete_task_memory", json={"workspace_id": "ws", "freq_threshold": 0, "utility_threshold": 1})
        assert r.status_code == 400 and r.json()["metadata"]["error"]["details"]["field"] == "freq_threshold"
        r = client.post("/delete_task_memory", json={"workspace_id": "ws", "freq_threshold": 1})
        assert r.status_code == 422


def test_parallel_records_over_http_lose_no_increment(serve: ServeFn) -> None:
    with serve() as client:
        dicts = [{"memory_id": f"m{i}", "when_to_use": f"task number {i}", "content": f"c{i}"} for i in range(3)]
        client.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": dicts})
        retrieved = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "task number"}).json()
        memory_list = retrieved["metadata"]["memory_list"]
        assert len(memory_list) == 3

        async def fire(count: int) -> list[int]:
            async with httpx.AsyncClient(base_url=str(client.base_url), timeout=60) as aclient:
                calls = [
                    aclient.post(
                        "/record_task_memory",
                        json={"workspace_id": "ws", "memory_dicts": memory_list, "update_utility": n % 3 == 0},
                    )
                    for n in range(count)
                ]
                return [r.status_code for r in await asyncio.gather(*calls)]

        assert asyncio.run(fire(60)) == [200] * 60
        stored = {m["memory_id"]: m for m in listed(client)}
        assert {mid: m["metadata"] for mid, m in stored.items()} == {
            f"m{i}": {"freq": 60, "utility": 20} for i in range(3)
        }
        r = client.post(
            "/delete_task_memory", json={"workspace_id": "ws", "freq_threshold": 60, "utility_threshold": 0.5}
        )
        assert sorted(r.json()["metadata"]["deleted_memory_ids"]) == ["m0", "m1", "m2"]
        assert listed(client) == []


def test_agent_loop_example_runs_against_the_fake_llm(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    script_summary(fake)
    # the agent's own LLM (its calls carry no X-ReMe-Op header): right for one task, wrong for the others
    fake.on_op("", "30")
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        result = subprocess.run(
            [
                sys.executable,
                str(REPO_ROOT / "cookbook" / "task_agent_loop.py"),
                f"--base-url={client.base_url}",
                f"--llm-base-url={url}",
                "--llm-api-key=test",
                "--rounds=2",
                "--prune-every=4",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO_ROOT,
        )
        assert result.returncode == 0, result.stderr
        assert "round 1: 1/6 tasks solved" in result.stdout
        assert "round 2: 1/6 tasks solved" in result.stdout
        memories = listed(client, "agent_loop_demo")
        assert memories, "the loop stored no memories"
        assert any(m["metadata"].get("freq", 0) >= 1 for m in memories)  # round 2 recorded what it retrieved
        agent_calls = [
            b for b in fake.requests_to("chat") if b["messages"][0]["content"].startswith("You are a careful")
        ]
        assert len(agent_calls) == 12  # 6 tasks x 2 rounds
        assert "Some related experience" in agent_calls[-1]["messages"][1]["content"]


@pytest.mark.parametrize("value", [0, 1, "true", "yes", 1.0])
def test_booleans_are_strict(serve: ServeFn, value: object) -> None:
    """ReMe's clients send JSON booleans; `"update_utility": 0` and the like are refused, not read as false (D22)."""
    memory = {"memory_id": "ghost"}  # unknown ids are skipped: a well-typed request answers 200
    with serve() as client:
        body = {"workspace_id": "ws", "memory_dicts": [memory], "update_utility": value}
        refused = client.post("/record_task_memory", json=body)
        assert refused.status_code == 422 and "update_utility" in refused.text, refused.text
        assert client.post("/record_task_memory", json={**body, "update_utility": True}).status_code == 200
        job = client.post("/vector_store", json={"workspace_id": "ws", "action": "list", "async": value})
        assert job.status_code == 422 and "async" in job.text, job.text
