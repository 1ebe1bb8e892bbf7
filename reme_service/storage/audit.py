"""A store write, recorded to its writer's audit trail (`GuardedStore` calls these for the four writes).

Each first looks up which of the ids exist (to tell added from changed, and to report only ids a delete really
removed), runs the write on the backend, then adds to the trail. The nodes that lookup returns are the
before-values of the memories' history (`history/entry.py`): when the trail keeps history, an entry is added per
memory written or deleted, and deleted memories (or a dropped or replaced workspace) are marked for scrubbing. An
update that sets a memory's `valid_to` is an INVALIDATE. The backend's own calls (a `replace_workspace` built on its
`upsert`) happen inside it and are not seen here, so a write is reported once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.history.entry import VALID_TO, HistoryEntry, written
from reme_service.schema.vector_node import VectorNode
from reme_service.storage.writer import Writer
from reme_service.stores.base import VectorStore
from reme_service.stores.vectors import latest_by_id


async def _existing(store: VectorStore, workspace_id: str, ids: Sequence[str]) -> dict[str, VectorNode]:
    if not ids:
        return {}
    return {node.unique_id: node for node in await store.get(workspace_id, list(ids))}


def _common(writer: Writer) -> dict[str, Any]:
    return {"request_id": writer.request_id, "flow": writer.flow, "key_id": writer.key_id}


def _upserted(writer: Writer, workspace_id: str, nodes: Sequence[VectorNode], before: dict[str, VectorNode]) -> None:
    """History entries (when kept) and invalidations of an upsert. An id the batch repeats is one write, of its
    last version, as the stores apply it (`stores/vectors.latest_by_id`): one entry, not one per repeat."""
    trail = writer.trail
    nodes = latest_by_id(nodes)
    if trail.keeps_history:
        common = _common(writer)
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


def _deleted(writer: Writer, workspace_id: str, ids: list[str], *, whole_workspace: bool = False) -> None:
    trail = writer.trail
    if trail.keeps_history:
        common = _common(writer)
        entries = [HistoryEntry(event="DELETE", memory_id=i, **common) for i in ids]
        trail.recorded(workspace_id, entries, scrub=ids, scrub_all=whole_workspace)


async def audited_upsert(
    store: VectorStore,
    writer: Writer,
    workspace_id: str,
    nodes: Sequence[VectorNode],
    write: Callable[[], Awaitable[int]],
    *,
    replace: bool = False,
) -> int:
    """Run `write` (an upsert of `nodes`, or with `replace` a replacement of the workspace by them) and record it."""
    trail = writer.trail
    ids = [node.unique_id for node in nodes]
    before = {} if replace else await _existing(store, workspace_id, ids)
    # a replace drops every memory the workspace held (their history is scrubbed), then adds the new ones
    replaced = await store.list_ids(workspace_id) if replace and trail.keeps_history else None
    result = await write()
    trail.wrote(workspace_id, added=[i for i in ids if i not in before], changed=[i for i in ids if i in before])
    if replaced is not None:
        _deleted(writer, workspace_id, replaced, whole_workspace=True)
    # a write's history entries: ~20 µs a node (a library load), so many are made in a worker thread
    await off_loop_if(len(nodes) > OFF_LOOP_ITEMS, _upserted, writer, workspace_id, nodes, before)
    return result


async def audited_delete_ids(
    store: VectorStore, writer: Writer, workspace_id: str, ids: Sequence[str], write: Callable[[], Awaitable[int]]
) -> int:
    before = await _existing(store, workspace_id, ids)
    result = await write()
    gone = [i for i in dict.fromkeys(ids) if i in before]  # a repeated id is deleted once
    writer.trail.deleted_ids(workspace_id, gone)
    _deleted(writer, workspace_id, gone)
    return result


async def audited_delete_workspace(
    store: VectorStore, writer: Writer, workspace_id: str, write: Callable[[], Awaitable[bool]]
) -> bool:
    held = await store.list_ids(workspace_id)
    result = await write()
    if result:
        writer.trail.dropped_workspace(workspace_id, len(held))
        _deleted(writer, workspace_id, held, whole_workspace=True)
    return result
