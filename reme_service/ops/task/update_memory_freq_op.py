"""UpdateMemoryFreqOp: `record_task_memory` — count a use of each memory, atomically, on the stored copy.

The request's `memory_dicts` (the `memory_list` a retrieval returned) only say *which* memories were used:
their `memory_id`s. Under the workspace lock the op reads each stored task memory, adds 1 to `freq` (and to
`utility` when `update_utility` is true) in its inner metadata, and writes it back with its stored vector
(no embedding) in one upsert. The client's counters, score and other fields are ignored, so stale copies and
concurrent records lose nothing. A memory listed twice in one request counts once.

This one op replaces ReMe's `UpdateMemoryFreqOp >> UpdateMemoryUtilityOp >> UpdateVectorStoreOp`: a lock
cannot span ops, and ReMe's split is what lost increments.

Response: `memory_list` (the updated memories as stored), `not_found_memory_ids` (ids with no stored task
memory), `update_result = {"deleted_count": 0, "inserted_count": n, "updated_count": n}`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reme_service.errors import InvalidRequestError
from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.task.counters import counter
from reme_service.schema.memory import TaskMemory, memory_from_node
from reme_service.schema.vector_node import VectorNode

MEMORY_DICTS: Input[list[dict[str, Any]]] = Input("memory_dicts", list[dict[str, Any]], factory=list)
UPDATE_UTILITY: Input[bool] = Input("update_utility", bool, default=False)


class UpdateMemoryFreqParams(OpParams):
    store: str = "default"
    update_utility: bool | None = None  # None: the request's `update_utility`


def requested_ids(dicts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The distinct `memory_id`s of `memory_dicts`, in order; 400 for an entry without one."""
    ids: list[str] = []
    for index, item in enumerate(dicts):
        memory_id = item.get("memory_id")
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidRequestError(
                f"memory_dicts[{index}] has no memory_id (send the memories a retrieval returned)",
                details={"field": f"memory_dicts[{index}].memory_id"},
            )
        ids.append(memory_id.strip())
    return list(dict.fromkeys(ids))


class UpdateMemoryFreqOp(ServiceOp[UpdateMemoryFreqParams]):
    inputs = (MEMORY_DICTS, UPDATE_UTILITY)

    async def run(self, ctx: ServiceContext) -> None:
        dicts = ctx.input(MEMORY_DICTS)
        ids = requested_ids(dicts)
        utility = self.params.update_utility
        if utility is None:
            utility = ctx.input(UPDATE_UTILITY)
        store = ctx.store(self.params.store)
        updated: list[TaskMemory] = []
        if ids:
            async with store.lock(ctx.workspace_id):
                nodes: list[VectorNode] = []
                for node in await store.get(ctx.workspace_id, ids):
                    memory = memory_from_node(node)
                    if not isinstance(memory, TaskMemory):
                        continue
                    memory.metadata["freq"] = counter(memory.metadata, "freq") + 1
                    if utility:
                        memory.metadata["utility"] = counter(memory.metadata, "utility") + 1
                    fresh = memory.to_vector_node()
                    fresh.vector = node.vector
                    nodes.append(fresh)
                    updated.append(memory)
                if nodes:
                    await store.upsert(ctx.workspace_id, nodes)
        found = {m.memory_id for m in updated}
        missing = [i for i in ids if i not in found]
        ctx.response.answer = f"recorded a use of {len(updated)} task memories" + (
            f"; {len(missing)} not found" if missing else ""
        )
        ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in updated]
        ctx.response.metadata["not_found_memory_ids"] = missing
        # ReMe 0.2 deletes and re-inserts each memory and lists their ids here; this service updates them in place
        # (same ids, nothing deleted), so the list is empty, but present for clients that read it
        ctx.response.metadata["deleted_memory_ids"] = []
        count = len(updated)
        ctx.response.metadata["update_result"] = {"deleted_count": 0, "inserted_count": count, "updated_count": count}
