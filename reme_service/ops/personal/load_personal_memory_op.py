"""LoadPersonalMemoryOp: what a reflection works on — the user's unreflected observations and insights.

Observations no reflection has consumed yet (`metadata.reflected` not true) are taken oldest first, at most
`max_observations` per reflection, so reflection moves through the history in order and newer information is
merged last; the rest wait for the next run (`metadata.reflection.remaining` says how many). All the user's
insights are loaded. Both listings are filtered by user and kind; memories marked invalid (`valid_to`) are left
out. Output keys `UNREFLECTED` and `INSIGHTS`.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.memories import INSIGHT, OBSERVATION, personal_filter, user_name
from reme_service.schema.memory import PersonalMemory, memory_from_node
from reme_service.stores.base import Filter, VectorStore


class LoadPersonalMemoryParams(OpParams):
    max_observations: int = 50
    store: str = "default"


async def load_personal(store: VectorStore, workspace: str, flt: Filter) -> list[PersonalMemory]:
    nodes = await store.list_nodes(workspace, filter=flt)
    return [m for m in map(memory_from_node, nodes) if isinstance(m, PersonalMemory) and not m.valid_to]


class LoadPersonalMemoryOp(ServiceOp[LoadPersonalMemoryParams]):
    inputs = (fields.USER_NAME,)
    writes = (keys.UNREFLECTED, keys.INSIGHTS)

    async def run(self, ctx: ServiceContext) -> None:
        store = ctx.store(self.params.store)
        target = user_name(ctx)
        pending = await load_personal(
            store, ctx.workspace_id, personal_filter(target, kind=OBSERVATION, reflected={"ne": True})
        )
        pending.sort(key=lambda m: m.time_created)
        window = pending[: self.params.max_observations]
        ctx[keys.UNREFLECTED] = window
        ctx[keys.INSIGHTS] = await load_personal(store, ctx.workspace_id, personal_filter(target, kind=INSIGHT))
        ctx.response.metadata["reflection"] = {
            "user_name": target,
            "observations": len(window),
            "remaining": len(pending) - len(window),
            "insights": len(ctx[keys.INSIGHTS]),
        }
