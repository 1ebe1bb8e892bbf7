"""Every backend's writes, reported to the request's audit trail (`context_vars.current_trail`).

`VectorStore.__init_subclass__` wraps the write methods a backend defines (`upsert`, `delete_ids`,
`replace_workspace`, `delete_workspace`) once, when the class is created; a new backend is audited without doing
anything. Outside a request (no trail) the wrappers only call through. Inside one, they first look up which of the
ids exist (to tell added from changed, and to report only ids a delete really removed), run the write, then add
to the trail. A write that calls another write of the same store (a backend's `replace_workspace` built on
`upsert`, the base `copy_workspace`) is reported once, by the outermost call.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from reme_service.context_vars import current_trail

if TYPE_CHECKING:
    from reme_service.schema.vector_node import VectorNode
    from reme_service.stores.base import VectorStore

AUDITED_WRITES = ("upsert", "delete_ids", "replace_workspace", "delete_workspace")

_inside: ContextVar[bool] = ContextVar("_inside_audited_write", default=False)

Method = Callable[..., Awaitable[Any]]


async def _existing(store: VectorStore, workspace_id: str, ids: Sequence[str]) -> set[str]:
    if not ids:
        return set()
    return {node.unique_id for node in await store.get(workspace_id, list(ids))}


def _audited(name: str, method: Method) -> Method:
    @functools.wraps(method)
    async def wrapper(self: VectorStore, workspace_id: str, *args: Any, **kwargs: Any) -> Any:
        trail = current_trail.get()
        if trail is None or _inside.get():
            return await method(self, workspace_id, *args, **kwargs)
        token = _inside.set(True)
        try:
            if name in ("upsert", "replace_workspace"):
                nodes: Sequence[VectorNode] = args[0] if args else kwargs["nodes"]
                ids = [node.unique_id for node in nodes]
                before = await _existing(self, workspace_id, ids) if name == "upsert" else set()
                result = await method(self, workspace_id, *args, **kwargs)
                added = [i for i in ids if i not in before]
                trail.wrote(workspace_id, added=added, changed=[i for i in ids if i in before])
            elif name == "delete_ids":
                asked: Sequence[str] = args[0] if args else kwargs["ids"]
                before = await _existing(self, workspace_id, asked)
                result = await method(self, workspace_id, *args, **kwargs)
                trail.deleted_ids(workspace_id, [i for i in asked if i in before])
            else:  # delete_workspace
                held = len(await self.list_nodes(workspace_id))
                result = await method(self, workspace_id, *args, **kwargs)
                if result:
                    trail.dropped_workspace(workspace_id, held)
            return result
        finally:
            _inside.reset(token)

    wrapper.__audited__ = True  # type: ignore[attr-defined]
    return wrapper


def audit_writes(cls: type) -> None:
    """Wrap the write methods `cls` itself defines (inherited ones are wrapped where they are defined)."""
    for name in AUDITED_WRITES:
        method = cls.__dict__.get(name)
        if method is None or getattr(method, "__isabstractmethod__", False) or getattr(method, "__audited__", False):
            continue
        setattr(cls, name, _audited(name, method))
