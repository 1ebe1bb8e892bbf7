"""Every backend's writes, reported to the request's audit trail (`audit.trail.current_trail`).

`VectorStore.__init_subclass__` wraps the write methods a backend defines (`upsert`, `delete_ids`,
`replace_workspace`, `delete_workspace`) once, when the class is created; a new backend is audited without doing
anything. Outside a request (no trail) the wrappers only call through. Inside one, they first look up which of the
ids exist (to tell added from changed, and to report only ids a delete really removed), run the write, then add
to the trail. The nodes that lookup returns are the before-values of the memories' history (`history/entry.py`):
when the trail keeps history, the wrapper adds an entry per memory written or deleted, and marks deleted memories
(or a dropped or replaced workspace) for scrubbing. An update that sets a memory's `valid_to` is an INVALIDATE.
A write that calls another write of the same store (a backend's `replace_workspace` built on `upsert`,
the base `copy_workspace`) is reported once, by the outermost call.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from reme_service.audit.trail import AuditTrail, current_trail
from reme_service.auth.caller import current_caller
from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.history.entry import VALID_TO, HistoryEntry, written
from reme_service.stores.vectors import latest_by_id

if TYPE_CHECKING:
    from reme_service.schema.vector_node import VectorNode
    from reme_service.stores.base import VectorStore

AUDITED_WRITES = ("upsert", "delete_ids", "replace_workspace", "delete_workspace")

_inside: ContextVar[bool] = ContextVar("_inside_audited_write", default=False)

Method = Callable[..., Awaitable[Any]]


@contextlib.contextmanager
def vectors_only() -> Iterator[None]:
    """The writes in the block change vectors, not memories (a re-embedding writes every memory back with new
    vectors): they are not reported — no history entries, no change events, nothing scrubbed."""
    token = _inside.set(True)
    try:
        yield
    finally:
        _inside.reset(token)


def inside_audited_write() -> bool:
    """True inside `vectors_only` or inside an audited write (a write another write makes)."""
    return _inside.get()


async def _existing(store: VectorStore, workspace_id: str, ids: Sequence[str]) -> dict[str, VectorNode]:
    if not ids:
        return {}
    return {node.unique_id: node for node in await store.get(workspace_id, list(ids))}


def _common(trail: AuditTrail) -> dict[str, Any]:
    caller = current_caller.get()
    return {"request_id": trail.request_id, "flow": trail.flow, "key_id": caller.key_id if caller else None}


def _upserted(trail: AuditTrail, workspace_id: str, nodes: Sequence[VectorNode], before: dict[str, VectorNode]) -> None:
    """History entries (when kept) and invalidations of an upsert. An id the batch repeats is one write, of its
    last version, as the stores apply it (`stores/vectors.latest_by_id`): one entry, not one per repeat."""
    nodes = latest_by_id(nodes)
    if trail.keeps_history:
        common = _common(trail)
        entries = [e for node in nodes if (e := written(before.get(node.unique_id), node, **common)) is not None]
        trail.recorded(workspace_id, entries)
        invalidated = [e.memory_id for e in entries if e.event == "INVALIDATE"]
    else:
        invalidated = [
            node.unique_id
            for node in nodes
            if (old := before.get(node.unique_id)) is not None
            and node.metadata.get(VALID_TO)
            and not old.metadata.get(VALID_TO)
        ]
    trail.invalidated_ids(workspace_id, invalidated)


def _deleted(trail: AuditTrail, workspace_id: str, ids: list[str], *, whole_workspace: bool = False) -> None:
    if trail.keeps_history:
        common = _common(trail)
        entries = [HistoryEntry(event="DELETE", memory_id=i, **common) for i in ids]
        trail.recorded(workspace_id, entries, scrub=ids, scrub_all=whole_workspace)


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
                before = await _existing(self, workspace_id, ids) if name == "upsert" else {}
                # a replace drops every memory the workspace held (their history is scrubbed), then adds the new ones
                replaced = await self.list_ids(workspace_id) if name != "upsert" and trail.keeps_history else None
                result = await method(self, workspace_id, *args, **kwargs)
                added = [i for i in ids if i not in before]
                trail.wrote(workspace_id, added=added, changed=[i for i in ids if i in before])
                if replaced is not None:
                    _deleted(trail, workspace_id, replaced, whole_workspace=True)
                # a write's history entries: ~20 µs a node (a library load), so many are made in a worker thread
                await off_loop_if(len(nodes) > OFF_LOOP_ITEMS, _upserted, trail, workspace_id, nodes, before)
            elif name == "delete_ids":
                asked: Sequence[str] = args[0] if args else kwargs["ids"]
                before = await _existing(self, workspace_id, asked)
                result = await method(self, workspace_id, *args, **kwargs)
                gone = [i for i in dict.fromkeys(asked) if i in before]  # a repeated id is deleted once
                trail.deleted_ids(workspace_id, gone)
                _deleted(trail, workspace_id, gone)
            else:  # delete_workspace
                held = await self.list_ids(workspace_id)
                result = await method(self, workspace_id, *args, **kwargs)
                if result:
                    trail.dropped_workspace(workspace_id, len(held))
                    _deleted(trail, workspace_id, held, whole_workspace=True)
            return result
        finally:
            _inside.reset(token)

    wrapper.__audited__ = True  # type: ignore[attr-defined]
    return wrapper


def wrap_own_methods(cls: type, names: Sequence[str], marker: str, wrap: Callable[[str, Method], Method]) -> None:
    """Replace each of `names` that `cls` itself defines by `wrap(name, method)` (inherited ones are wrapped where
    they are defined; abstract ones and those already carrying `marker` are left)."""
    for name in names:
        method = cls.__dict__.get(name)
        if method is None or getattr(method, "__isabstractmethod__", False) or getattr(method, marker, False):
            continue
        setattr(cls, name, wrap(name, method))


def audit_writes(cls: type) -> None:
    """Wrap the write methods `cls` itself defines (inherited ones are wrapped where they are defined)."""
    wrap_own_methods(cls, AUDITED_WRITES, "__audited__", _audited)
