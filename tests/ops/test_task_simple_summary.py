"""summary_task_memory_simple, and the ops registered for custom flows (segmentation, simple comparison)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reme_service.app import ReMeApp
from tests.fakes.openai_server import FakeOpenAI
from tests.ops.task_helpers import (
    FAILURE,
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

REFLECT = "Reflect on it"
SEGMENT = "Split the run into segments"
COMPARE = "attempted twice"


@pytest.fixture
def fake(fake: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    """The reset fake server alone (tests/ops/conftest.py); these tests take its URL from `fake_server`."""
    return fake[0]


async def test_simple_summary_uses_the_0_9_threshold_and_stores_the_memories(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI
) -> None:
    def reply(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        result = "success" if "Result: success" in text else "failure"
        return fenced([{"when_to_use": f"when {result}", "memory": f"{result} advice"}])

    fake.on(REFLECT, reply)
    async with make_app(fake_server[1]) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple",
            workspace_id="ws",
            trajectories=[trajectory("first task", 0.95), trajectory("second task", 0.5)],
        )
        assert result["success"] is True, result
        memories = result["metadata"]["memory_list"]
        assert [(m["when_to_use"], m["content"]) for m in memories] == [
            ("when success", "success advice"),
            ("when failure", "failure advice"),
        ]
        assert json.loads(result["answer"]) == memories
        assert memories[0]["metadata"]["outcome"] == "success"
        assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 2}
        assert len(await stored(app)) == 2


async def test_simple_summary_empty_list_stores_nothing(fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI) -> None:
    fake.on(REFLECT, "```json\n[]\n```")
    async with make_app(fake_server[1]) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
        )
        assert result["success"] is True
        assert result["answer"] == "[]" and result["metadata"]["memory_list"] == []


async def test_simple_summary_malformed_reply_fails_after_retries(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI
) -> None:
    fake.on(REFLECT, '```json\n[{"when_to_use": "x"}]\n```')  # no memory text
    async with make_app(fake_server[1]) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
        )
        assert result["success"] is False
        assert result["metadata"]["error"]["code"] == "llm_error"
        assert len(prompts_with(fake, REFLECT)) == 3
        assert await stored(app) == []


async def test_simple_summary_without_an_llm() -> None:
    async with ReMeApp("vector_store.default.backend=memory", "embedding_model.default.backend=hash", env={}) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple", workspace_id="ws", trajectories=[trajectory("sort the list", 0.95)]
        )
        assert result["metadata"]["no_llm_ops"] == ["SimpleSummaryOp"]
        (memory,) = result["metadata"]["memory_list"]
        assert memory["when_to_use"] == "sort the list"
        assert memory["content"].startswith("Outcome: succeeded (score 0.95)")


async def test_segmentation_feeds_segments_to_extraction(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tmp_path: Path
) -> None:
    overlay = tmp_path / "seg.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> "
        "TrajectorySegmentationOp(segment_target='failure') >> (SuccessExtractionOp() | FailureExtractionOp()) "
        ">> MemoryValidationOp() >> UpdateVectorStoreOp()\n"
    )
    fake.on(SEGMENT, '```json\n{"segment_points": [3, 3, 99]}\n```')
    fake.on(FAILURE, fenced([item("when x", "lesson")]))
    fake.on(SUCCESS, fenced([item("when y", "pattern")]))
    fake.on(VALIDATE, verdict())
    async with make_app(fake_server[1], f"config={overlay}") as app:
        result = await app.async_execute(
            name="summary_task_memory",
            workspace_id="ws",
            trajectories=[trajectory("failing task", 0.0, steps=3), trajectory("good task", 1.0, steps=3)],
        )
        assert result["success"] is True, result
        assert len(prompts_with(fake, SEGMENT)) == 1  # only the failure was targeted
        failure_prompts = prompts_with(fake, FAILURE)
        assert len(failure_prompts) == 2  # steps 1-3 and 4-8
        assert any("Before:" not in p and "After: assistant: step 1" in p for p in failure_prompts)
        assert len(prompts_with(fake, SUCCESS)) == 1


async def test_segmentation_unparseable_reply_is_502(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tmp_path: Path
) -> None:
    overlay = tmp_path / "seg.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> TrajectorySegmentationOp() "
        ">> FailureExtractionOp() >> MemoryValidationOp() >> UpdateVectorStoreOp()\n"
    )
    fake.on(SEGMENT, "somewhere in the middle")
    async with make_app(fake_server[1], f"config={overlay}") as app:
        result = await app.async_execute(
            name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 0.0, steps=3)]
        )
        assert result["success"] is False
        assert "TrajectorySegmentationOp" in result["metadata"]["error"]["message"]


async def test_simple_comparative_summary_compares_best_and_worst_per_task(
    fake_server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tmp_path: Path
) -> None:
    overlay = tmp_path / "cmp.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> SimpleComparativeSummaryOp() "
        ">> MemoryValidationOp() >> UpdateVectorStoreOp()\n"
    )
    fake.on(COMPARE, fenced([{"when_to_use": "when paying", "experience": "check the amount"}]))
    fake.on(VALIDATE, verdict())
    async with make_app(fake_server[1], f"config={overlay}") as app:
        result = await app.async_execute(
            name="summary_task_memory",
            workspace_id="ws",
            trajectories=[
                trajectory("pay", 0.2, task_id="a"),
                trajectory("pay", 0.9, task_id="a"),
                trajectory("pay", 0.5, task_id="a"),
                trajectory("other", 1.0, task_id="b"),
                trajectory("same", 0.5, task_id="c"),
                trajectory("same", 0.5, task_id="c"),
            ],
        )
        assert result["success"] is True, result
        (prompt,) = prompts_with(fake, COMPARE)
        assert "(score 0.90)" in prompt and "(score 0.20)" in prompt
        (memory,) = result["metadata"]["memory_list"]
        assert memory["metadata"]["source"] == "simple_comparison" and memory["metadata"]["task_id"] == "a"
