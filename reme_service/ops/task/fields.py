"""Request fields of the task-memory family that more than one op reads (the shared ones are in
`reme_service.ops.common.fields`)."""

from __future__ import annotations

from reme_service.flow.context import Input
from reme_service.schema.messages import Trajectory

TRAJECTORIES: Input[list[Trajectory]] = Input("trajectories", list[Trajectory], factory=list)
