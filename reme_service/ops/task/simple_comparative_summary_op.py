"""SimpleComparativeSummaryOp: compare the best and the worst run of each task (custom flows).

Trajectories are grouped by `task_id` (those without one are left out); in each group of two or more whose
best score beats its worst, the two runs go to the LLM in one call, which answers with a ```json list of
`{"when_to_use": "...", "experience": "..."}`. Malformed replies are re-asked, then the request fails (502).

Writes `comparative_task_memories`, so it can stand in for `ComparativeExtractionOp` in the summary flow;
`MemoryValidationOp` then judges and publishes them. Without an LLM nothing is compared and the op is listed
in `metadata.no_llm_ops`.
"""

from __future__ import annotations

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.transcript import render_transcript
from reme_service.ops.task import fields, keys as task_keys
from reme_service.ops.task.memory_items import ask_items, to_memory
from reme_service.ops.task.trajectories import request_trajectories, task_query
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Trajectory


class SimpleComparativeSummaryParams(OpParams):
    llm: str = "default"
    max_step_chars: int = 2000
    max_concurrency: int = 4


def best_and_worst(trajectories: list[Trajectory]) -> list[tuple[Trajectory, Trajectory]]:
    """Per task id (in first-seen order), the best and the worst run when their scores differ."""
    groups: dict[str, list[Trajectory]] = {}
    for trajectory in trajectories:
        if trajectory.task_id:
            groups.setdefault(trajectory.task_id, []).append(trajectory)
    pairs = []
    for group in groups.values():
        if len(group) >= 2:
            ranked = sorted(group, key=lambda t: -t.score)
            if ranked[0].score > ranked[-1].score:
                pairs.append((ranked[0], ranked[-1]))
    return pairs


class SimpleComparativeSummaryOp(ServiceOp[SimpleComparativeSummaryParams]):
    prompts = {"compare": {"query", "better_score", "better_steps", "worse_score", "worse_steps"}}
    inputs = (fields.TRAJECTORIES,)
    may_read = (task_keys.ALL_TRAJECTORIES,)
    writes = (task_keys.COMPARATIVE_MEMORIES,)

    async def run(self, ctx: ServiceContext) -> None:
        pairs = best_and_worst(request_trajectories(ctx))
        ctx[task_keys.COMPARATIVE_MEMORIES] = []
        if not pairs:
            return
        if not ctx.services.llm(self.params.llm).available:
            ctx.without_llm(self.name)
            return
        results = await run_all([self._compare(ctx, *pair) for pair in pairs], limit=self.params.max_concurrency)
        ctx[task_keys.COMPARATIVE_MEMORIES] = [m for memories in results for m in memories]

    async def _compare(self, ctx: ServiceContext, better: Trajectory, worse: Trajectory) -> list[TaskMemory]:
        limit = self.params.max_step_chars
        prompt = self.render(
            ctx,
            "compare",
            query=task_query(better) or task_query(worse) or "(not stated)",
            better_score=f"{better.score:.2f}",
            better_steps=render_transcript(better.messages, limit=limit),
            worse_score=f"{worse.score:.2f}",
            worse_steps=render_transcript(worse.messages, limit=limit),
        )
        items = await ask_items(ctx, self.params.llm, prompt, what="comparative summary reply")
        author = ctx.services.llm(self.params.llm).model_name
        extra = {"source": "simple_comparison", "task_id": better.task_id, "scores": [better.score, worse.score]}
        return [to_memory(ctx, item, author=author, extra=extra) for item in items]
