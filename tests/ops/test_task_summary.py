"""The summary_task_memory pipeline op by op, through ReMeApp with a fake OpenAI server on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from reme_service.app import ReMeApp
from tests.fakes.openai_server import FakeOpenAI
from tests.ops.task_helpers import (
    FAILURE,
    HARD,
    SOFT,
    SUCCESS,
    VALIDATE,
    fenced,
    item,
    make_app,
    prompts_with,
    stored,
    trajectory,
    verdict,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(fake: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    """The reset fake server alone (tests/ops/conftest.py); these tests take its URL from `fake_server`."""
    return fake[0]


@pytest.fixture
async def app(fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI) -> AsyncIterator[ReMeApp]:
    async with make_app(fake_server[1]) as application:
        yield application


async def test_full_pipeline_stores_exactly_what_it_answers(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.on(SUCCESS, fenced([item("when booking a flight", "compare fares first")]))
    fake.on(FAILURE, fenced([item("when a payment API times out", "retry once, then report the failure")]))
    fake.on(SOFT, fenced([item("when choosing between fare sources", "query the cheapest source last")]))
    fake.on(VALIDATE, verdict(score=0.85))
    result = await app.async_execute(
        name="summary_task_memory",
        workspace_id="ws",
        trajectories=[trajectory("book a flight to Paris", 1.0), trajectory("pay the invoice", 0.0)],
    )
    assert result["success"] is True, result
    memories = result["metadata"]["memory_list"]
    assert {m["when_to_use"] for m in memories} == {
        "when booking a flight",
        "when a payment API times out",
        "when choosing between fare sources",
    }
    assert json.loads(result["answer"]) == memories
    assert all(m["score"] == 0.85 and m["author"] == "qwen3-30b-a3b-instruct-2507" for m in memories)
    success = next(m for m in memories if m["when_to_use"] == "when booking a flight")
    assert success["metadata"]["source"] == "success_extraction"
    assert success["metadata"]["tags"] == ["t"] and success["metadata"]["trajectory_score"] == 1.0
    assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 3}
    assert sorted(m["memory_id"] for m in await stored(app)) == sorted(m["memory_id"] for m in memories)
    assert len(prompts_with(fake, VALIDATE)) == 3
    soft = prompts_with(fake, SOFT)[0]
    assert "(score 1.00)" in soft and "(score 0.00)" in soft
    assert "no_llm_ops" not in result["metadata"]


async def test_unparseable_validation_reply_is_re_asked_then_rejects(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.on(SUCCESS, fenced([item("when booking a flight", "compare fares first")]))
    fake.on(VALIDATE, "Looks good to me!")
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("book a flight", 1.0)]
    )
    assert result["success"] is True
    assert result["metadata"]["memory_list"] == [] and json.loads(result["answer"]) == []
    (rejected,) = result["metadata"]["rejected_memories"]
    assert rejected["when_to_use"] == "when booking a flight"
    assert "no usable validation reply after 3 attempts" in rejected["reason"]
    assert "Looks good to me!" in rejected["reason"]
    assert len(prompts_with(fake, VALIDATE)) == 3
    assert await stored(app) == []


async def test_empty_validation_reply_rejects_instead_of_accepting(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.on(SUCCESS, fenced([item("when booking a flight", "compare fares first")]))
    fake.on(VALIDATE, "")  # ReMe read an empty reply as "valid, score 0.5"
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("book a flight", 1.0)]
    )
    assert result["success"] is True
    assert result["metadata"]["memory_list"] == []
    (rejected,) = result["metadata"]["rejected_memories"]
    assert rejected["reason"].startswith("the validation reply was empty")
    assert await stored(app) == []


async def test_validation_rejects_invalid_and_low_scores(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.on(SUCCESS, fenced([item("when a", "do a"), item("when b", "do b"), item("when c", "do c")]))
    replies = {"do a": verdict(True, 0.9), "do b": verdict(False, 0.9), "do c": verdict(True, 0.2)}

    def judge(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        return next(reply for key, reply in replies.items() if key in text)

    fake.on(VALIDATE, judge)
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    assert [m["content"] for m in result["metadata"]["memory_list"]] == ["do a"]
    reasons = {r["content"]: r["reason"] for r in result["metadata"]["rejected_memories"]}
    assert reasons["do b"].startswith("judged invalid")
    assert reasons["do c"].startswith("score 0.20 below 0.5")


async def test_malformed_extraction_is_retried_then_502_and_nothing_stored(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.on(SUCCESS, "I think the agent did well.")
    fake.on(VALIDATE, verdict())
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    assert result["success"] is False
    error = result["metadata"]["error"]
    assert error["code"] == "llm_error" and "SuccessExtractionOp" in error["message"]
    assert "after 3 attempts" in error["message"]
    assert len(prompts_with(fake, SUCCESS)) == 3
    assert await stored(app) == []


async def test_an_item_breaking_the_contract_is_re_asked(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.script(fenced([item("when a", "do a"), {"when_to_use": "no body"}]))
    fake.on(SUCCESS, fenced([item("when a", "do a")]))
    fake.on(VALIDATE, verdict())
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    assert [m["content"] for m in result["metadata"]["memory_list"]] == ["do a"]
    assert len(prompts_with(fake, SUCCESS)) == 2


async def test_failure_segments_are_each_extracted_with_their_context(app: ReMeApp, fake: FakeOpenAI) -> None:
    fake.on(FAILURE, lambda body: fenced([item("when " + body["messages"][-1]["content"][-40:], "lesson")]))
    fake.on(VALIDATE, verdict())
    run = trajectory("pay the invoice", 0.0, steps=3)
    messages = run["messages"]
    run["metadata"]["segments"] = [messages[1:3], messages[3:5]]
    result = await app.async_execute(
        name="summary_task_memory",
        workspace_id="ws",
        trajectories=[run],
    )
    assert result["success"] is True, result
    prompts = prompts_with(fake, FAILURE)
    assert len(prompts) == 2
    second = next(p for p in prompts if "result 1" in p and "step.0 role=assistant content=step 1" in p)
    assert "Before: assistant: step 0" in second and "After: assistant: step 2" in second


async def test_malformed_segments_are_400(app: ReMeApp, fake: FakeOpenAI) -> None:
    run = trajectory("task", 0.0)
    run["metadata"]["segments"] = "not a list"
    result = await app.async_execute(name="summary_task_memory", workspace_id="ws", trajectories=[run])
    assert result["success"] is False
    assert result["metadata"]["error"]["code"] == "invalid_request"
    assert "trajectories[0].metadata.segments" in result["metadata"]["error"]["message"]


async def test_dedup_against_stored_memories_and_the_batch_with_one_embedding_call(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI
) -> None:
    async with make_app(fake_server[1], embed_via_fake=True) as app:
        inserted = await app.async_execute(
            name="vector_store",
            workspace_id="ws",
            action="insert",
            memory_dicts=[{"when_to_use": "when booking a flight ticket online", "content": "old advice"}],
        )
        existing_id = inserted["metadata"]["action_result"]["memory_ids"][0]
        fake.on(
            SUCCESS,
            fenced(
                [
                    item("when booking a flight ticket online", "new advice"),
                    item("when renaming a database column safely", "add, backfill, then drop"),
                    item("when renaming a database column safely", "same situation again"),
                    item("when the weather is cold outside", "wear a coat"),
                ]
            ),
        )
        fake.on(VALIDATE, verdict())
        embeds_before = len(fake.requests_to("embeddings"))
        result = await app.async_execute(
            name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
        )
        assert result["success"] is True, result
        kept = result["metadata"]["memory_list"]
        assert [m["content"] for m in kept] == ["add, backfill, then drop", "wear a coat"]
        assert json.loads(result["answer"]) == kept
        dupes = {d["content"]: d for d in result["metadata"]["duplicate_memories"]}
        assert dupes["new advice"]["duplicate_of"] == existing_id
        assert dupes["same situation again"]["duplicate_of"] == kept[0]["memory_id"]
        assert all(d["similarity"] > 0.5 for d in dupes.values())
        embed_calls = fake.requests_to("embeddings")[embeds_before:]
        # one call embeds the 4 candidates for dedup; the store update reuses the vectors of the 2 kept ones
        assert [len(body["input"]) for body in embed_calls] == [4]
        assert len(await stored(app)) == 3


async def test_hard_comparison_pairs_similar_success_and_failure(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tmp_path: Path
) -> None:
    overlay = tmp_path / "hard.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> (SuccessExtractionOp() | "
        "FailureExtractionOp() | ComparativeExtractionOp(enable_soft_comparison=False, "
        "enable_similarity_comparison=True, similarity_threshold=0.95)) >> MemoryValidationOp() >> "
        "UpdateVectorStoreOp()\n"
    )
    async with make_app(fake_server[1], f"config={overlay}") as app:
        fake.on(SUCCESS, fenced([]))
        fake.on(FAILURE, fenced([]))
        fake.on(HARD, fenced([item("when paying an invoice", "check the balance first")]))
        fake.on(VALIDATE, verdict())
        result = await app.async_execute(
            name="summary_task_memory",
            workspace_id="ws",
            trajectories=[
                trajectory("pay the invoice for march", 1.0),
                trajectory("pay the invoice for april", 0.0),
                trajectory("water the garden plants", 0.0),
            ],
        )
        assert result["success"] is True, result
        (prompt,) = prompts_with(fake, HARD)
        assert "pay the invoice for march" in prompt and "pay the invoice for april" in prompt
        assert "garden" not in prompt
        assert [m["metadata"]["source"] for m in result["metadata"]["memory_list"]] == ["similarity_comparison"]


async def test_chinese_prompts_with_language_zh(fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI) -> None:
    async with make_app(fake_server[1], "language=zh") as app:
        fake.on("成功完成了任务", fenced([item("预订机票时", "先比较价格")]))
        fake.on("你负责审核", verdict())
        result = await app.async_execute(
            name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("订一张机票", 1.0)]
        )
        assert result["success"] is True, result
        assert [m["content"] for m in result["metadata"]["memory_list"]] == ["先比较价格"]


async def test_without_an_llm_one_raw_experience_per_trajectory() -> None:
    async with ReMeApp("vector_store.default.backend=memory", "embedding_model.default.backend=hash", env={}) as app:
        result = await app.async_execute(
            name="summary_task_memory",
            workspace_id="ws",
            trajectories=[trajectory("book a flight to Paris", 1.0), trajectory("water the garden plants", 0.0)],
        )
        assert result["success"] is True, result
        assert set(result["metadata"]["no_llm_ops"]) == {
            "SuccessExtractionOp",
            "FailureExtractionOp",
            "ComparativeExtractionOp",
            "MemoryValidationOp",
        }
        memories = result["metadata"]["memory_list"]
        assert [m["when_to_use"] for m in memories] == ["book a flight to Paris", "water the garden plants"]
        success, failure = memories
        assert success["content"].startswith("Outcome: succeeded (score 1.00)\nKey steps:\n")
        assert '- search({"q": "0"}) -> result 0' in success["content"]
        assert success["content"].endswith("Final answer: done")
        assert failure["content"].startswith("Outcome: failed (score 0.00)")
        assert success["metadata"]["source"] == "no_llm" and success["metadata"]["tools_used"] == ["search"]
        assert len(await stored(app)) == 2
