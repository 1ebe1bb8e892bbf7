"""Context keys of the task-memory family (the shared ones live in `reme_service.ops.common.keys`)."""

from __future__ import annotations

from reme_service.flow.context import Key
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Trajectory

ALL_TRAJECTORIES: Key[list[Trajectory]] = Key("all_trajectories")
SUCCESS_TRAJECTORIES: Key[list[Trajectory]] = Key("success_trajectories")
FAILURE_TRAJECTORIES: Key[list[Trajectory]] = Key("failure_trajectories")

SUCCESS_MEMORIES: Key[list[TaskMemory]] = Key("success_task_memories")
FAILURE_MEMORIES: Key[list[TaskMemory]] = Key("failure_task_memories")
COMPARATIVE_MEMORIES: Key[list[TaskMemory]] = Key("comparative_task_memories")
