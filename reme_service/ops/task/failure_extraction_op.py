"""FailureExtractionOp: turn failed trajectories (or their segments) into lessons that prevent the failure.

Reads `failure_trajectories`, writes `failure_task_memories`. Unlike ReMe 0.2, the `metadata.segments` of a
failed trajectory are honoured too. See `step_extraction` for the mechanics.
"""

from __future__ import annotations

from reme_service.ops.task import keys as task_keys
from reme_service.ops.task.step_extraction import BaseStepExtractionOp


class FailureExtractionOp(BaseStepExtractionOp):
    source = task_keys.FAILURE_TRAJECTORIES
    target = task_keys.FAILURE_MEMORIES
    success = False
    may_read = (source,)
    writes = (target,)
