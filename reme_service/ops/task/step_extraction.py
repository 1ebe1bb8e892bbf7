"""The shared body of `SuccessExtractionOp` and `FailureExtractionOp`.

For each trajectory of its kind — or for each of its `metadata.segments` — one LLM call (re-asked on a
malformed reply, see `memory_items`) turns the step transcript into 1-3 experience items. The calls run
concurrently (at most `max_concurrency` at a time). Without an LLM each trajectory becomes one raw experience
(`raw_experience`), and the response lists the op in `metadata.no_llm_ops`.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from reme_service.concurrency import run_all
from reme_service.flow.context import Key
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.transcript import render_transcript
from reme_service.ops.task.memory_items import ask_items, to_memory
from reme_service.ops.task.raw_experience import raw_experience
from reme_service.ops.task.trajectories import Segment, segment_context, segments_of, task_query, trajectory_info
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Trajectory

T = TypeVar("T")


class StepExtractionParams(OpParams):
    llm: str = "default"
    max_step_chars: int = 2000
    max_concurrency: int = 4


class BaseStepExtractionOp(ServiceOp[StepExtractionParams]):
    """Not a flow op itself: a subclass names the trajectories it reads (`source`, also in its `may_read`) and the
    key it writes (`target`, also in its `writes`); its prompt file follows from its module."""

    prompts = {"extract": {"query", "transcript", "context"}}

    source: ClassVar[Key[list[Trajectory]]]
    target: ClassVar[Key[list[TaskMemory]]]
    success: ClassVar[bool]

    async def run(self, ctx: ServiceContext) -> None:
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
        results = await run_all(calls, limit=self.params.max_concurrency)
        ctx[self.target] = [memory for memories in results for memory in memories]

    async def _extract(self, ctx: ServiceContext, trajectory: Trajectory, segment: Segment) -> list[TaskMemory]:
        prompt = self.render(
            ctx,
            "extract",
            query=task_query(trajectory) or "(not stated)",
            transcript=render_transcript(segment.messages, limit=self.params.max_step_chars),
            context=segment_context(trajectory, segment),
        )
        kind = "success" if self.success else "failure"
        items = await ask_items(ctx, self.params.llm, prompt, what=f"{kind} extraction reply")
        author = ctx.services.llm(self.params.llm).model_name
        extra = {**trajectory_info(trajectory), "source": f"{kind}_extraction"}
        return [to_memory(ctx, item, author=author, extra=extra) for item in items]
