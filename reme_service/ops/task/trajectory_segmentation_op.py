"""TrajectorySegmentationOp: split long trajectories into logical segments before extraction (custom flows).

For each targeted trajectory (`segment_target`: all, success or failure) with at least `min_steps` messages
and no `metadata.segments` yet, the LLM reads the numbered steps and answers
`{"segment_points": [k, ...]}` — the 1-based step numbers that end a segment. The messages are cut there and
stored, as lists of message dicts, in `metadata.segments`, which the extraction ops then work through one by
one. Malformed replies are re-asked, then the request fails (502). Without an LLM nothing is segmented and
the op is listed in `metadata.no_llm_ops`. Use after `TrajectoryPreprocessOp`.
"""

from __future__ import annotations

from typing import Literal

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.task import fields, keys as task_keys
from reme_service.ops.task.trajectories import request_trajectories
from reme_service.providers.llm.json_extract import extract_json
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.messages import Message, Role, Trajectory

STEP_CHARS = 300


class TrajectorySegmentationParams(OpParams):
    segment_target: Literal["all", "success", "failure"] = "all"
    min_steps: int = 4
    llm: str = "default"
    max_concurrency: int = 4


def parse_points(reply: str, count: int) -> list[int] | None:
    """Sorted, unique segment end points within 1..count-1 (the end of the run is implied), or None."""
    data = extract_json(reply)
    if isinstance(data, dict):
        data = data.get("segment_points")
    if not isinstance(data, list):
        return None
    points: set[int] = set()
    for item in data:
        if isinstance(item, bool) or not isinstance(item, int | float) or int(item) != item:
            return None
        if 1 <= int(item) < count:
            points.add(int(item))
    return sorted(points)


def cut(messages: list[Message], points: list[int]) -> list[list[Message]]:
    bounds = [0, *points, len(messages)]
    return [messages[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


class TrajectorySegmentationOp(ServiceOp[TrajectorySegmentationParams]):
    prompts = {"segment": {"steps", "count"}}
    inputs = (fields.TRAJECTORIES,)
    may_read = (task_keys.ALL_TRAJECTORIES, task_keys.SUCCESS_TRAJECTORIES, task_keys.FAILURE_TRAJECTORIES)

    async def run(self, ctx: ServiceContext) -> None:
        key = {
            "all": task_keys.ALL_TRAJECTORIES,
            "success": task_keys.SUCCESS_TRAJECTORIES,
            "failure": task_keys.FAILURE_TRAJECTORIES,
        }[self.params.segment_target]
        pool = ctx[key] if key in ctx else request_trajectories(ctx)
        todo = [t for t in pool if len(t.messages) >= max(2, self.params.min_steps) and not t.metadata.get("segments")]
        if not todo:
            return
        if not ctx.services.llm(self.params.llm).available:
            ctx.without_llm(self.name)
            return
        await run_all([self._segment(ctx, t) for t in todo], limit=self.params.max_concurrency)

    async def _segment(self, ctx: ServiceContext, trajectory: Trajectory) -> None:
        messages = list(trajectory.messages)
        steps = "\n".join(
            f"Step {i} ({m.role.value}): {' '.join(m.text.split())[:STEP_CHARS]}" for i, m in enumerate(messages, 1)
        )
        prompt = self.render(ctx, "segment", steps=steps, count=len(messages))
        points = await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            lambda reply: parse_points(reply, len(messages)),
            what="segmentation reply",
        )
        trajectory.metadata["segments"] = [
            [m.model_dump(mode="json", exclude_defaults=True) for m in part] for part in cut(messages, points)
        ]
