"""The summary_task_memory pipeline op by op, on the op harness (`reme_service.testing.run_op`) with a scripted LLM
(replies per op, in order)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reme_service.app import ReMeApp
from reme_service.testing.openai_server import FakeOpenAI
from reme_service.testing.run_op import FlowCaller
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.ops.task_helpers import fenced, item, make_app, make_wire_app, prompts_of, stored, trajectory, verdict

pytestmark = pytest.mark.anyio

# Sentences of the two comparison templates (both sent by ComparativeExtractionOp): asserted on, never routed by.
SOFT = "ended with different scores"
HARD = "closely related tasks"


@pytest.fixture
async def app(llm: ScriptedLLM) -> AsyncIterator[FlowCaller]:
    async with make_app(llm) as application:
        yield application


async def test_full_pipeline_stores_exactly_what_it_answers(app: FlowCaller, llm: ScriptedLLM) -> None:
    llm.on("SuccessExtractionOp", fenced([item("when booking a flight", "compare fares first")]))
    llm.on("FailureExtractionOp", fenced([item("when a payment API times out", "retry once, then report the failure")]))
    soft_reply = fenced([item("when choosing between fare sources", "query the cheapest source last")])
    llm.on("ComparativeExtractionOp", soft_reply)
    llm.on("MemoryValidationOp", verdict(score=0.85))
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
    assert all(m["score"] == 0.85 and m["author"] == llm.model_name for m in memories)
    success = next(m for m in memories if m["when_to_use"] == "when booking a flight")
    assert success["metadata"]["source"] == "success_extraction"
    assert success["metadata"]["tags"] == ["t"] and success["metadata"]["trajectory_score"] == 1.0
    assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 3}
    assert sorted(m["memory_id"] for m in await stored(app)) == sorted(m["memory_id"] for m in memories)
    assert len(llm.calls_of("MemoryValidationOp")) == 3
    (soft,) = prompts_of(llm, "ComparativeExtractionOp")
    assert SOFT in soft and "(score 1.00)" in soft and "(score 0.00)" in soft
    assert "no_llm_ops" not in result["metadata"]


async def test_unparseable_validation_reply_is_re_asked_then_rejects(app: FlowCaller, llm: ScriptedLLM) -> None:
    llm.on("SuccessExtractionOp", fenced([item("when booking a flight", "compare fares first")]))
    llm.on("MemoryValidationOp", "Looks good to me!")
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("book a flight", 1.0)]
    )
    assert result["success"] is True
    assert result["metadata"]["memory_list"] == [] and json.loads(result["answer"]) == []
    (rejected,) = result["metadata"]["rejected_memories"]
    assert rejected["when_to_use"] == "when booking a flight"
    assert "no usable validation reply after 3 attempts" in rejected["reason"]
    assert "Looks good to me!" in rejected["reason"]
    assert len(llm.calls_of("MemoryValidationOp")) == 3
    assert await stored(app) == []


async def test_empty_validation_reply_rejects_instead_of_accepting(fake_openai: FakeOpenAI) -> None:
    """On the fake server: an empty reply is the OpenAI client's failure (`LLMError` from `RetryableReply`), and
    how it surfaces is the point. The replies are queued in the pipeline's order, not chosen by prompt."""
    fake_openai.script(
        fenced([item("when booking a flight", "compare fares first")]), ""
    )  # extraction, then validation
    async with make_wire_app(fake_openai.base_url) as app:
        result = await app.async_execute(
            name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("book a flight", 1.0)]
        )
        assert result["success"] is True
        assert result["metadata"]["memory_list"] == []
        (rejected,) = result["metadata"]["rejected_memories"]
        assert rejected["reason"].startswith("the validation reply was empty")  # ReMe read it as "valid, score 0.5"
        extraction, validation = (body["messages"][-1]["content"] for body in fake_openai.requests_to("chat"))
        assert "book a flight" in extraction and "compare fares first" in validation
        assert await stored(app) == []


async def test_validation_rejects_invalid_and_low_scores(app: FlowCaller, llm: ScriptedLLM) -> None:
    llm.on("SuccessExtractionOp", fenced([item("when a", "do a"), item("when b", "do b"), item("when c", "do c")]))
    llm.on("MemoryValidationOp", verdict(True, 0.9), verdict(False, 0.9), verdict(True, 0.2))
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    # The memories are judged concurrently: read which one each verdict (by call order) was about.
    reviewed = [next(c for c in ("do a", "do b", "do c") if c in p) for p in prompts_of(llm, "MemoryValidationOp")]
    assert sorted(reviewed) == ["do a", "do b", "do c"]
    valid, invalid, low = reviewed
    assert [m["content"] for m in result["metadata"]["memory_list"]] == [valid]
    reasons = {r["content"]: r["reason"] for r in result["metadata"]["rejected_memories"]}
    assert reasons[invalid].startswith("judged invalid")
    assert reasons[low].startswith("score 0.20 below 0.5")


async def test_malformed_extraction_is_retried_then_502_and_nothing_stored(app: FlowCaller, llm: ScriptedLLM) -> None:
    llm.on("SuccessExtractionOp", "I think the agent did well.")
    llm.on("MemoryValidationOp", verdict())
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    assert result["success"] is False
    error = result["metadata"]["error"]
    assert error["code"] == "llm_error" and "SuccessExtractionOp" in error["message"]
    assert "after 3 attempts" in error["message"]
    assert len(llm.calls_of("SuccessExtractionOp")) == 3
    assert await stored(app) == []


async def test_an_item_breaking_the_contract_is_re_asked(app: FlowCaller, llm: ScriptedLLM) -> None:
    llm.on(
        "SuccessExtractionOp",
        fenced([item("when a", "do a"), {"when_to_use": "no body"}]),
        fenced([item("when a", "do a")]),
    )
    llm.on("MemoryValidationOp", verdict())
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    assert [m["content"] for m in result["metadata"]["memory_list"]] == ["do a"]
    assert len(llm.calls_of("SuccessExtractionOp")) == 2


async def test_failure_segments_are_each_extracted_with_their_context(app: FlowCaller, llm: ScriptedLLM) -> None:
    llm.on(
        "FailureExtractionOp",
        fenced([item("when the invoice page will not load", "reload once, then report")]),
        fenced([item("when the payment form rejects the card", "check the expiry date")]),
    )
    llm.on("MemoryValidationOp", verdict())
    run = trajectory("pay the invoice", 0.0, steps=3)
    messages = run["messages"]
    run["metadata"]["segments"] = [messages[1:3], messages[3:5]]
    result = await app.async_execute(
        name="summary_task_memory",
        workspace_id="ws",
        trajectories=[run],
    )
    assert result["success"] is True, result
    prompts = prompts_of(llm, "FailureExtractionOp")
    assert len(prompts) == 2
    second = next(p for p in prompts if "result 1" in p and "step.0 role=assistant content=step 1" in p)
    assert "Before: assistant: step 0" in second and "After: assistant: step 2" in second


async def test_malformed_segments_are_400(app: FlowCaller, llm: ScriptedLLM) -> None:
    run = trajectory("task", 0.0)
    run["metadata"]["segments"] = "not a list"
    result = await app.async_execute(name="summary_task_memory", workspace_id="ws", trajectories=[run])
    assert result["success"] is False
    assert result["metadata"]["error"]["code"] == "invalid_request"
    assert "trajectories[0].metadata.segments" in result["metadata"]["error"]["message"]


async def test_dedup_against_stored_memories_and_the_batch_with_one_embedding_call(
    llm: ScriptedLLM, fake_openai: FakeOpenAI
) -> None:
    """The embeddings go through the fake server (to count the embedding calls); the LLM is scripted."""
    async with make_app(llm, embed_url=fake_openai.base_url) as app:
        inserted = await app.async_execute(
            name="vector_store",
            workspace_id="ws",
            action="insert",
            memory_dicts=[{"when_to_use": "when booking a flight ticket online", "content": "old advice"}],
        )
        existing_id = inserted["metadata"]["action_result"]["memory_ids"][0]
        llm.on(
            "SuccessExtractionOp",
            fenced(
                [
                    item("when booking a flight ticket online", "new advice"),
                    item("when renaming a database column safely", "add, backfill, then drop"),
                    item("when renaming a database column safely", "same situation again"),
                    item("when the weather is cold outside", "wear a coat"),
                ]
            ),
        )
        llm.on("MemoryValidationOp", verdict())
        embeds_before = len(fake_openai.requests_to("embeddings"))
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
        embed_calls = fake_openai.requests_to("embeddings")[embeds_before:]
        # one call embeds the 4 candidates for dedup; the store update reuses the vectors of the 2 kept ones
        assert [len(body["input"]) for body in embed_calls] == [4]
        assert len(await stored(app)) == 3


async def test_hard_comparison_pairs_similar_success_and_failure(llm: ScriptedLLM, tmp_path: Path) -> None:
    overlay = tmp_path / "hard.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> (SuccessExtractionOp() | "
        "FailureExtractionOp() | ComparativeExtractionOp(enable_soft_comparison=False, "
        "enable_similarity_comparison=True, similarity_threshold=0.95)) >> MemoryValidationOp() >> "
        "UpdateVectorStoreOp()\n"
    )
    async with make_app(llm, f"config={overlay}") as app:
        llm.on("SuccessExtractionOp", fenced([]))
        llm.on("FailureExtractionOp", fenced([]))
        llm.on("ComparativeExtractionOp", fenced([item("when paying an invoice", "check the balance first")]))
        llm.on("MemoryValidationOp", verdict())
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
        (prompt,) = prompts_of(llm, "ComparativeExtractionOp")
        assert HARD in prompt and SOFT not in prompt
        assert "pay the invoice for march" in prompt and "pay the invoice for april" in prompt
        assert "garden" not in prompt
        assert [m["metadata"]["source"] for m in result["metadata"]["memory_list"]] == ["similarity_comparison"]


async def test_chinese_prompts_with_language_zh(llm: ScriptedLLM) -> None:
    async with make_app(llm, "language=zh") as app:
        llm.on("SuccessExtractionOp", fenced([item("预订机票时", "先比较价格")]))
        llm.on("MemoryValidationOp", verdict())
        result = await app.async_execute(
            name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("订一张机票", 1.0)]
        )
        assert result["success"] is True, result
        assert [m["content"] for m in result["metadata"]["memory_list"]] == ["先比较价格"]
        (extraction,) = prompts_of(llm, "SuccessExtractionOp")  # the Chinese templates were used
        assert "成功完成了任务" in extraction and "订一张机票" in extraction
        (validation,) = prompts_of(llm, "MemoryValidationOp")
        assert "你负责审核" in validation and "先比较价格" in validation


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


async def test_a_reply_with_a_missing_comma_and_bracket_is_mended_without_asking_again(
    app: FlowCaller, llm: ScriptedLLM
) -> None:
    broken = '```json\n[{"when_to_use": "when booking" "experience": "compare prices first", "confidence": 0.8}\n```'
    llm.on("SuccessExtractionOp", broken)
    llm.on("MemoryValidationOp", "{'is_valid': True, 'score': 0.9, 'feedback': 'fine'}")  # Python-style quotes
    result = await app.async_execute(
        name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
    )
    assert result["success"] is True, result
    assert [m["content"] for m in result["metadata"]["memory_list"]] == ["compare prices first"]
    assert len(llm.calls_of("SuccessExtractionOp")) == 1  # mended, not re-asked
    assert len(llm.calls_of("MemoryValidationOp")) == 1
