"""ComparativeExtractionOp: learn from the difference between better and worse runs.

* Soft comparison (`enable_soft_comparison`, on in the default flow): with two or more trajectories, the
  highest- and the lowest-scoring one (stable order, so ties keep request order) are contrasted in one LLM
  call when their scores differ; 1-2 insights.
* Hard comparison (`enable_similarity_comparison`, off by default): up to `max_similarity_sequences` success
  and failure step sequences are embedded in one call; success/failure pairs whose cosine similarity exceeds
  `similarity_threshold` are compared, the `max_similarity_pairs` most similar first, one LLM call each.

Reads `all_trajectories`, `success_trajectories`, `failure_trajectories`; writes `comparative_task_memories`.
Without an LLM nothing is compared and the op is listed in `metadata.no_llm_ops` when it had work to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.transcript import render_transcript
from reme_service.ops.task import keys as task_keys
from reme_service.ops.task.memory_items import ask_items, to_memory
from reme_service.ops.task.trajectories import task_query
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Trajectory

EMBED_CHARS = 4000


class ComparativeExtractionParams(OpParams):
    enable_soft_comparison: bool = True
    enable_similarity_comparison: bool = False
    similarity_threshold: float = 0.3
    max_similarity_sequences: int = 5
    max_similarity_pairs: int = 3
    llm: str = "default"
    store: str = "default"
    max_step_chars: int = 2000
    max_concurrency: int = 4


class ComparativeExtractionOp(ServiceOp[ComparativeExtractionParams]):
    prompts = {
        "soft_compare": {"query", "higher_score", "higher_steps", "lower_score", "lower_steps"},
        "hard_compare": {"success_query", "success_steps", "failure_query", "failure_steps"},
    }
    may_read = (task_keys.ALL_TRAJECTORIES, task_keys.SUCCESS_TRAJECTORIES, task_keys.FAILURE_TRAJECTORIES)
    writes = (task_keys.COMPARATIVE_MEMORIES,)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        soft = self._soft_pair(ctx.get(task_keys.ALL_TRAJECTORIES, [])) if params.enable_soft_comparison else None
        successes = ctx.get(task_keys.SUCCESS_TRAJECTORIES, [])[: params.max_similarity_sequences]
        failures = ctx.get(task_keys.FAILURE_TRAJECTORIES, [])[: params.max_similarity_sequences]
        hard_wanted = params.enable_similarity_comparison and successes and failures
        ctx[task_keys.COMPARATIVE_MEMORIES] = []
        if soft is None and not hard_wanted:
            return
        if not ctx.services.llm(params.llm).available:
            ctx.without_llm(self.name)
            return
        calls = []
        if soft is not None:
            calls.append(self._compare_soft(ctx, *soft))
        if hard_wanted:
            for success, failure in await self._similar_pairs(ctx, successes, failures):
                calls.append(self._compare_hard(ctx, success, failure))
        results = await run_all(calls, limit=params.max_concurrency)
        ctx[task_keys.COMPARATIVE_MEMORIES] = [m for memories in results for m in memories]

    @staticmethod
    def _soft_pair(trajectories: list[Trajectory]) -> tuple[Trajectory, Trajectory] | None:
        if len(trajectories) < 2:
            return None
        ranked = sorted(trajectories, key=lambda t: -t.score)
        higher, lower = ranked[0], ranked[-1]
        return (higher, lower) if higher.score > lower.score else None

    def _steps(self, trajectory: Trajectory) -> str:
        return render_transcript(trajectory.messages, limit=self.params.max_step_chars)

    async def _compare_soft(self, ctx: ServiceContext, higher: Trajectory, lower: Trajectory) -> list[TaskMemory]:
        prompt = self.render(
            ctx,
            "soft_compare",
            query=task_query(higher) or task_query(lower) or "(not stated)",
            higher_score=f"{higher.score:.2f}",
            higher_steps=self._steps(higher),
            lower_score=f"{lower.score:.2f}",
            lower_steps=self._steps(lower),
        )
        extra = {
            "source": "soft_comparison",
            "task_ids": [higher.task_id, lower.task_id],
            "scores": [higher.score, lower.score],
        }
        return await self._ask(ctx, prompt, extra)

    async def _compare_hard(self, ctx: ServiceContext, success: Trajectory, failure: Trajectory) -> list[TaskMemory]:
        prompt = self.render(
            ctx,
            "hard_compare",
            success_query=task_query(success) or "(not stated)",
            success_steps=self._steps(success),
            failure_query=task_query(failure) or "(not stated)",
            failure_steps=self._steps(failure),
        )
        extra = {
            "source": "similarity_comparison",
            "task_ids": [success.task_id, failure.task_id],
            "scores": [success.score, failure.score],
        }
        return await self._ask(ctx, prompt, extra)

    async def _ask(self, ctx: ServiceContext, prompt: str, extra: Mapping[str, object]) -> list[TaskMemory]:
        items = await ask_items(ctx, self.params.llm, prompt, what="comparison reply")
        author = ctx.services.llm(self.params.llm).model_name
        return [to_memory(ctx, item, author=author, extra=extra) for item in items]

    async def _similar_pairs(
        self, ctx: ServiceContext, successes: list[Trajectory], failures: list[Trajectory]
    ) -> list[tuple[Trajectory, Trajectory]]:
        """The most similar success/failure pairs above the threshold, most similar first (one embedding call)."""
        texts = [f"{task_query(t)}\n{self._steps(t)}"[:EMBED_CHARS] for t in [*successes, *failures]]
        vectors = await ctx.services.store_embedder(self.params.store).embed(texts)
        similarity = vectors[: len(successes)] @ vectors[len(successes) :].T
        pairs = [
            (float(similarity[i, j]), i, j)
            for i in range(len(successes))
            for j in range(len(failures))
            if similarity[i, j] > self.params.similarity_threshold
        ]
        pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
        return [(successes[i], failures[j]) for _, i, j in pairs[: self.params.max_similarity_pairs]]
