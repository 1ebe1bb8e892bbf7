"""TrajectoryPreprocessOp: validate the request's trajectories and split them by score.

`score >= success_threshold` is a success, anything lower a failure. An empty `trajectories` list, a trajectory
without messages or malformed `metadata.segments` is a 400 (wrong types are already a 422 from the schema).
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.task import fields, keys as task_keys
from reme_service.ops.task.trajectories import request_trajectories


class TrajectoryPreprocessParams(OpParams):
    success_threshold: float = 1.0


class TrajectoryPreprocessOp(ServiceOp[TrajectoryPreprocessParams]):
    inputs = (fields.TRAJECTORIES,)
    writes = (task_keys.ALL_TRAJECTORIES, task_keys.SUCCESS_TRAJECTORIES, task_keys.FAILURE_TRAJECTORIES)

    async def run(self, ctx: ServiceContext) -> None:
        trajectories = request_trajectories(ctx)
        threshold = self.params.success_threshold
        ctx[task_keys.ALL_TRAJECTORIES] = trajectories
        ctx[task_keys.SUCCESS_TRAJECTORIES] = [t for t in trajectories if t.score >= threshold]
        ctx[task_keys.FAILURE_TRAJECTORIES] = [t for t in trajectories if t.score < threshold]
