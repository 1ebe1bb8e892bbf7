"""StampRecordedOp: sets `recorded_at` (now) on the new personal memories about to be stored and, with a TTL (the
request's `ttl` seconds, else the workspace's `lifecycle.ttl_seconds`; none by default), `expires_at`
(`lifecycle.py`). Memories that already carry `recorded_at` (stored ones written back, e.g. invalidated) keep it.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.personal import fields
from reme_service.ops.personal.lifecycle import stamp_recorded
from reme_service.schema.memory import PersonalMemory


class StampRecordedOp(ServiceOp[OpParams]):
    inputs = (fields.TTL,)
    may_read = (common_keys.MEMORY_LIST,)
    writes = (common_keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        memories = ctx.get(common_keys.MEMORY_LIST, [])
        ttl = ctx.input(fields.TTL)
        if ttl is None:
            ttl = ctx.services.config.lifecycle.for_workspace(ctx.workspace_id).ttl_seconds
        fresh = [m for m in memories if isinstance(m, PersonalMemory) and not m.recorded_at]
        stamp_recorded(fresh, ttl)
        ctx[common_keys.MEMORY_LIST] = memories
