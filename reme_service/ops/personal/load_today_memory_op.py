"""LoadTodayMemoryOp: reload the user's stored observations from the days the new messages were said.

"Today" is the day of each incoming message (its own time, so a conversation from last May is checked against
what was stored about last May, and a live conversation against today). The store is listed with a filter on
kind, user and day (`metadata.memory_type`, `metadata.target`, `metadata.metadata.msg_date`), so other users'
memories and other memory kinds are never loaded. At most `max_count` memories are reloaded (the newest);
memories already marked invalid are left out; output key `TODAY_MEMORIES`, checked for contradictions and
repetitions by ContraRepeatOp.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.memories import OBSERVATION, newest_first, personal_filter, user_name
from reme_service.schema.memory import PersonalMemory, memory_from_node


class LoadTodayMemoryParams(OpParams):
    max_count: int = 200
    store: str = "default"


class LoadTodayMemoryOp(ServiceOp[LoadTodayMemoryParams]):
    inputs = (fields.USER_NAME,)
    may_read = (keys.STATEMENTS,)
    writes = (keys.TODAY_MEMORIES,)

    async def run(self, ctx: ServiceContext) -> None:
        days = sorted({s.time.strftime("%Y-%m-%d") for s in ctx.get(keys.STATEMENTS, [])})
        memories: list[PersonalMemory] = []
        if days:
            store = ctx.store(self.params.store)
            flt = personal_filter(user_name(ctx), kind=OBSERVATION, msg_date=days)
            nodes = await store.list_nodes(ctx.workspace_id, filter=flt)
            # an invalidated memory was contradicted already: it is not judged again
            memories = [m for m in map(memory_from_node, nodes) if isinstance(m, PersonalMemory) and not m.valid_to]
            memories = newest_first(memories)[: self.params.max_count]
        ctx[keys.TODAY_MEMORIES] = memories
