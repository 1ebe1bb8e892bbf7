"""The shared body of `SuccessExtractionOp` and `FailureExtractionOp`.

For each trajectory of its kind — or for each of its `metadata.segments` — one LLM call (re-asked on a
malformed reply, see `memory_items`) turns the step transcript into 1-3 experience items. The calls run
concurrently (at most `max_concurrency` at a time). Without an LLM each trajectory becomes one raw experience
(`raw_experience`), and the response lists the op in `metadata.no_llm_ops`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

from reme_service.flow.context import FlowContext, Key
from reme_service.flow.op import Op, OpParams
from reme_service.ops.task.memory_items import ask_items, to_memory
from reme_service.ops.task.raw_experience import raw_experience
from reme_service.ops.task.trajectories import Segment, segment_context, segments_of, task_query, trajectory_info
from reme_service.ops.task.transcript import render_transcript
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Trajectory

T = TypeVar("T")


async def gather_limited(calls: Sequence[Awaitable[T]], limit: int) -> list[T]:
    """Await `calls` concurrently, at most `limit` at a time; results in order; the first failure propagates."""
    gate = asyncio.Semaphore(max(1, limit))

    async def one(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(call)) for call in calls]
    except BaseExceptionGroup as group_error:
        raise _first_leaf(group_error) from None
    return [task.result() for task in tasks]


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


class StepExtractionParams(OpParams):
    llm: str = "default"
    max_step_chars: int = 2000
    max_concurrency: int = 4


class BaseStepExtractionOp(Op):
    """Not a flow op itself: subclasses set the prompt file, the trajectories they read and the key they write."""

    Params: ClassVar[type[OpParams]] = StepExtractionParams
    prompts: ClassVar[dict[str, set[str]]] = {"extract": {"query", "transcript", "context"}}
    params: StepExtractionParams

    prompt_file: ClassVar[Path]
    source: ClassVar[Key[list[Trajectory]]]
    target: ClassVar[Key[list[TaskMemory]]]
    success: ClassVar[bool]

    async def run(self, ctx: FlowContext) -> None:
        trajectories = ctx.get(self.source, [])
        if not trajectories:
            ctx[self.target] = []
            return
        llm = ctx.services.llm(self.params.llm)
        if not llm.available:
            ctx.without_llm(self.name)
            ctx[self.target] = [
                raw_experience(t, success=self.success, workspace_id=ctx.workspace_id, language=ctx.language)
                for t in trajectories
            ]
            return
        jobs = [(t, segment) for t in trajectories for segment in segments_of(t)]
        calls = [self._extract(ctx, t, segment) for t, segment in jobs]
        results = await gather_limited(calls, self.params.max_concurrency)
        ctx[self.target] = [memory for memories in results for memory in memories]

    async def _extract(self, ctx: FlowContext, trajectory: Trajectory, segment: Segment) -> list[TaskMemory]:
        prompt = ctx.services.prompts.render(
            self.prompt_file,
            "extract",
            ctx.language,
            query=task_query(trajectory) or "(not stated)",
            transcript=render_transcript(segment.messages, limit=self.params.max_step_chars),
            context=segment_context(trajectory, segment),
        )
        kind = "success" if self.success else "failure"
        items = await ask_items(ctx, self.params.llm, prompt, what=f"{kind} extraction reply")
        author = ctx.services.llm(self.params.llm).model_name
        extra = {**trajectory_info(trajectory), "source": f"{kind}_extraction"}
        return [to_memory(ctx, item, author=author, extra=extra) for item in items]
