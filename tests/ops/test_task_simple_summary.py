"""summary_task_memory_simple, and the ops registered for custom flows (segmentation, simple comparison)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reme_service.app import ReMeApp
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.ops.task_helpers import fenced, item, make_app, prompts_of, stored, trajectory, verdict

pytestmark = pytest.mark.anyio


def reflection(when: str, memory: str) -> str:
    return fenced([{"when_to_use": when, "memory": memory}])


async def test_simple_summary_uses_the_0_9_threshold_and_stores_the_memories(llm: ScriptedLLM) -> None:
    llm.on("SimpleSummaryOp", reflection("when 0", "advice 0"), reflection("when 1", "advice 1"))
    async with make_app(llm) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple",
            workspace_id="ws",
            trajectories=[trajectory("first task", 0.95), trajectory("second task", 0.5)],
        )
        assert result["success"] is True, result
        memories = result["metadata"]["memory_list"]
        # The runs are summarised concurrently: read which reply (by call order) went to which run.
        prompts = prompts_of(llm, "SimpleSummaryOp")
        asked = [next(task for task in ("first task", "second task") if task in p) for p in prompts]
        assert sorted(asked) == ["first task", "second task"]
        for task, prompt in zip(asked, prompts, strict=True):  # 0.95 is a success, 0.5 a failure
            assert ("Result: success" if task == "first task" else "Result: failure") in prompt
        first, second = asked.index("first task"), asked.index("second task")
        assert [(m["when_to_use"], m["content"]) for m in memories] == [
            (f"when {first}", f"advice {first}"),
            (f"when {second}", f"advice {second}"),
        ]
        assert json.loads(result["answer"]) == memories
        assert [m["metadata"]["outcome"] for m in memories] == ["success", "failure"]
        assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 2}
        assert len(await stored(app)) == 2


async def test_simple_summary_empty_list_stores_nothing(llm: ScriptedLLM) -> None:
    llm.on("SimpleSummaryOp", "```json\n[]\n```")
    async with make_app(llm) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
        )
        assert result["success"] is True
        assert result["answer"] == "[]" and result["metadata"]["memory_list"] == []


async def test_simple_summary_malformed_reply_fails_after_retries(llm: ScriptedLLM) -> None:
    llm.on("SimpleSummaryOp", '```json\n[{"when_to_use": "x"}]\n```')  # no memory text
    async with make_app(llm) as app:
        result = await app.async_execute(
            name="summary_task_memory_simple", workspace_id="ws", trajectories=[trajectory("task", 1.0)]
        )
        assert result["success"] is False
        assert result["metadata"]["error"]["code"] == "llm_error"
        assert len(llm.calls_of("SimpleSummaryOp")) == 3
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


async def test_segmentation_feeds_segments_to_extraction(llm: ScriptedLLM, tmp_path: Path) -> None:
    overlay = tmp_path / "seg.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> "
        "TrajectorySegmentationOp(segment_target='failure') >> (SuccessExtractionOp() | FailureExtractionOp()) "
        ">> MemoryValidationOp() >> UpdateVectorStoreOp()\n"
    )
    llm.on("TrajectorySegmentationOp", '```json\n{"segment_points": [3, 3, 99]}\n```')
    llm.on("FailureExtractionOp", fenced([item("when x", "lesson")]))
    llm.on("SuccessExtractionOp", fenced([item("when y", "pattern")]))
    llm.on("MemoryValidationOp", verdict())
    async with make_app(llm, f"config={overlay}") as app:
        result = await app.async_execute(
            name="summary_task_memory",
            workspace_id="ws",
            trajectories=[trajectory("failing task", 0.0, steps=3), trajectory("good task", 1.0, steps=3)],
        )
        assert result["success"] is True, result
        (segmented,) = prompts_of(llm, "TrajectorySegmentationOp")  # only the failure was targeted
        assert "8 numbered steps" in segmented
        failure_prompts = prompts_of(llm, "FailureExtractionOp")
        assert len(failure_prompts) == 2  # steps 1-3 and 4-8
        assert any("Before:" not in p and "After: assistant: step 1" in p for p in failure_prompts)
        assert len(llm.calls_of("SuccessExtractionOp")) == 1


async def test_segmentation_unparseable_reply_is_502(llm: ScriptedLLM, tmp_path: Path) -> None:
    overlay = tmp_path / "seg.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> TrajectorySegmentationOp() "
        ">> FailureExtractionOp() >> MemoryValidationOp() >> UpdateVectorStoreOp()\n"
    )
    llm.on("TrajectorySegmentationOp", "somewhere in the middle")
    async with make_app(llm, f"config={overlay}") as app:
        result = await app.async_execute(
            name="summary_task_memory", workspace_id="ws", trajectories=[trajectory("task", 0.0, steps=3)]
        )
        assert result["success"] is False
        assert "TrajectorySegmentationOp" in result["metadata"]["error"]["message"]


async def test_simple_comparative_summary_compares_best_and_worst_per_task(llm: ScriptedLLM, tmp_path: Path) -> None:
    overlay = tmp_path / "cmp.yaml"
    overlay.write_text(
        "flow:\n  summary_task_memory:\n    flow_content: TrajectoryPreprocessOp() >> SimpleComparativeSummaryOp() "
        ">> MemoryValidationOp() >> UpdateVectorStoreOp()\n"
    )
    llm.on("SimpleComparativeSummaryOp", fenced([{"when_to_use": "when paying", "experience": "check the amount"}]))
    llm.on("MemoryValidationOp", verdict())
    async with make_app(llm, f"config={overlay}") as app:
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
        (prompt,) = prompts_of(llm, "SimpleComparativeSummaryOp")
        assert "(score 0.90)" in prompt and "(score 0.20)" in prompt
        (memory,) = result["metadata"]["memory_list"]
        assert memory["metadata"]["source"] == "simple_comparison" and memory["metadata"]["task_id"] == "a"
