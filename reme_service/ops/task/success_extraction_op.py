"""SuccessExtractionOp: distil reusable step-level patterns from successful trajectories (or their segments).

Reads `success_trajectories`, writes `success_task_memories`. See `step_extraction` for the mechanics and
`success_extraction_prompt.yaml` for the output contract.
"""

from __future__ import annotations

from reme_service.ops.task import keys as task_keys
from reme_service.ops.task.step_extraction import BaseStepExtractionOp


class SuccessExtractionOp(BaseStepExtractionOp):
    source = task_keys.SUCCESS_TRAJECTORIES
    target = task_keys.SUCCESS_MEMORIES
    success = True
    may_read = (source,)
    writes = (target,)
