"""DeleteMemoryOp: `delete_task_memory` — prune task memories that are used often but rarely help.

Deletes every task memory with `freq >= freq_threshold` and `utility / freq < utility_threshold`, reading the
counters from the stored inner metadata (where `record_task_memory` keeps them). Listing and deleting happen
under the workspace lock, so a concurrent record cannot slip in between. `freq_threshold` below 1 is a 400
(it would select memories never used, and divide by zero).

Response: `deleted_memory_ids`, `update_result = {"deleted_count": n, "inserted_count": 0}`.
"""

from __future__ import annotations

from reme_service.errors import InvalidRequestError
from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.task.counters import counter
from reme_service.schema.memory import memory_from_node

FREQ_THRESHOLD: Input[int] = Input("freq_threshold", int, default=0)
UTILITY_THRESHOLD: Input[float] = Input("utility_threshold", float, default=0.0)


class DeleteMemoryParams(OpParams):
    store: str = "default"


class DeleteMemoryOp(ServiceOp[DeleteMemoryParams]):
    inputs = (FREQ_THRESHOLD, UTILITY_THRESHOLD)

    async def run(self, ctx: ServiceContext) -> None:
        freq_threshold = ctx.input(FREQ_THRESHOLD)
        if freq_threshold < 1:
            raise InvalidRequestError(
                f"freq_threshold must be at least 1 (got {freq_threshold})", details={"field": "freq_threshold"}
            )
        utility_threshold = ctx.input(UTILITY_THRESHOLD)
        store = ctx.store(self.params.store)
        async with store.lock(ctx.workspace_id):
            doomed: list[str] = []
            for node in await store.list_nodes(ctx.workspace_id, filter={"metadata.memory_type": "task"}):
                metadata = memory_from_node(node).metadata
                freq = counter(metadata, "freq")
                if freq >= freq_threshold and counter(metadata, "utility") / freq < utility_threshold:
                    doomed.append(node.unique_id)
            deleted = await store.delete_ids(ctx.workspace_id, doomed) if doomed else 0
        ctx.response.answer = f"deleted {deleted} task memories"
        ctx.response.metadata["deleted_memory_ids"] = doomed
        ctx.response.metadata["update_result"] = {"deleted_count": deleted, "inserted_count": 0}
