"""TrajectoryPreprocessOp: validate the request's trajectories and split them by score.

`score >= success_threshold` is a success, anything lower a failure. An empty `trajectories` list, a trajectory
without messages or malformed `metadata.segments` is a 400 (wrong types are already a 422 from the schema).
"""

from __future__ import annotations

from typing import ClassVar

from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op, OpParams
from reme_service.ops.task import keys as task_keys
from reme_service.ops.task.trajectories import request_trajectories


class TrajectoryPreprocessParams(OpParams):
    success_threshold: float = 1.0


class TrajectoryPreprocessOp(Op):
    Params: ClassVar[type[OpParams]] = TrajectoryPreprocessParams
    params: TrajectoryPreprocessParams

    async def run(self, ctx: FlowContext) -> None:
        trajectories = request_trajectories(ctx)
        threshold = self.params.success_threshold
        ctx[task_keys.ALL_TRAJECTORIES] = trajectories
        ctx[task_keys.SUCCESS_TRAJECTORIES] = [t for t in trajectories if t.score >= threshold]
        ctx[task_keys.FAILURE_TRAJECTORIES] = [t for t in trajectories if t.score < threshold]
