"""SimpleSummaryOp: one LLM reflection per trajectory, at most two memories each (`summary_task_memory_simple`).

A trajectory with `score >= success_score_threshold` (0.9, as in ReMe) is summarised as a success, any other
as a failure. Reply contract: a ```json list of `{"when_to_use": "...", "memory": "..."}` (an empty list when
nothing is worth keeping); malformed replies are re-asked, then the request fails (502) with nothing stored.
Without an LLM each trajectory becomes one raw experience (`raw_experience`) and the op is listed in
`metadata.no_llm_ops`. Writes `memory_list` (context and response) and `answer` (their JSON list).
"""

from __future__ import annotations

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common import keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.transcript import render_transcript
from reme_service.ops.task import fields, keys as task_keys
from reme_service.ops.task.memory_items import ask_items, to_memory
from reme_service.ops.task.memory_validation_op import publish
from reme_service.ops.task.raw_experience import raw_experience
from reme_service.ops.task.trajectories import request_trajectories, task_query, trajectory_info
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Trajectory


class SimpleSummaryParams(OpParams):
    success_score_threshold: float = 0.9
    llm: str = "default"
    max_step_chars: int = 2000
    max_concurrency: int = 4


class SimpleSummaryOp(ServiceOp[SimpleSummaryParams]):
    prompts = {"summarize": {"query", "transcript", "result"}}
    inputs = (fields.TRAJECTORIES,)
    may_read = (task_keys.ALL_TRAJECTORIES,)
    writes = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        trajectories = request_trajectories(ctx)
        threshold = self.params.success_score_threshold
        if not ctx.services.llm(self.params.llm).available:
            ctx.without_llm(self.name)
            publish(
                ctx,
                [
                    raw_experience(
                        t, success=t.score >= threshold, workspace_id=ctx.workspace_id, language=ctx.language
                    )
                    for t in trajectories
                ],
            )
            return
        results = await run_all([self._summarise(ctx, t) for t in trajectories], limit=self.params.max_concurrency)
        publish(ctx, [m for memories in results for m in memories])

    async def _summarise(self, ctx: ServiceContext, trajectory: Trajectory) -> list[TaskMemory]:
        success = trajectory.score >= self.params.success_score_threshold
        result = "success" if success else "failure"
        prompt = self.render(
            ctx,
            "summarize",
            query=task_query(trajectory) or "(not stated)",
            transcript=render_transcript(trajectory.messages, limit=self.params.max_step_chars),
            result=result if ctx.language != "zh" else ("成功" if success else "失败"),
        )
        items = await ask_items(
            ctx, self.params.llm, prompt, what="simple summary reply", body_keys=("memory", "experience")
        )
        author = ctx.services.llm(self.params.llm).model_name
        extra = {**trajectory_info(trajectory), "source": "simple_summary", "outcome": result}
        return [to_memory(ctx, item, author=author, extra=extra) for item in items]
