"""Finding and writing tool memories by exact key — never by vector similarity.

One `ToolMemory` per (workspace, tool name). Its id is derived from both (`tool_memory_id`), so a lookup is
one `get` by id. A tool memory written under another id — by ReMe (random ids), loaded from a library
file, or copied from another workspace — is found by a filtered listing (`metadata.memory_type == "tool"`
and `content` — the embedded `when_to_use` — equal to the tool name), which runs only when the id lookup
misses. Several such memories for one tool (ReMe's duplicate-creating lookup bug) are read as one, their
histories merged without duplicate calls. The next write stores the memory under the derived id and deletes
the old ids, so the listing is needed once.

`update_tool_memories` runs a whole read-modify-write under `store.lock(workspace)`; `load_tool_memories` and
`write_tool_memories` alone do not lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from reme_service.ops.tool.statistics import TOTALS_KEY
from reme_service.schema.memory import ToolMemory, memory_from_node
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.base import VectorStore


def tool_memory_id(workspace_id: str, tool_name: str) -> str:
    """The id of a tool's memory in a workspace: 32 hex characters, like the other memory ids."""
    key = f"tool-memory\n{workspace_id}\n{tool_name}".encode()
    return hashlib.md5(key, usedforsecurity=False).hexdigest()


@dataclass
class StoredTool:
    """A tool's memory as read from the store, with what a write needs to replace it cleanly."""

    memory: ToolMemory
    vector: NDArray[np.float32] | None = None
    #: ids other than the derived one that hold (part of) this tool's memory; a write deletes them
    legacy_ids: list[str] = field(default_factory=list)


def _as_tool_memory(node: VectorNode) -> ToolMemory | None:
    memory = memory_from_node(node)
    return memory if isinstance(memory, ToolMemory) else None


def _merge(nodes: Sequence[VectorNode]) -> StoredTool | None:
    """One view of several memories of the same tool: the latest-modified one's guideline, every distinct call."""
    memories = [m for m in (_as_tool_memory(n) for n in nodes) if m is not None]
    if not memories:
        return None
    vector = next((n.vector for n in nodes if n.vector is not None), None)
    ids = [m.memory_id for m in memories]
    if len(memories) == 1:
        return StoredTool(memories[0], vector, ids)
    base = max(memories, key=lambda m: m.time_modified).model_copy(deep=True)
    seen: set[str] = set()
    calls = []
    for memory in memories:
        for call in memory.tool_call_results:
            key = call.call_hash or call.compute_hash()
            if key not in seen:
                seen.add(key)
                calls.append(call)
    base.tool_call_results = calls
    base.metadata = {k: v for k, v in base.metadata.items() if k != TOTALS_KEY}  # recomputed from the history
    return StoredTool(base, vector, ids)


async def load_tool_memories(store: VectorStore, workspace_id: str, names: Sequence[str]) -> dict[str, StoredTool]:
    """The stored memories of the named tools (names without one are absent from the result)."""
    if not names:
        return {}
    ids = {name: tool_memory_id(workspace_id, name) for name in names}
    by_id = {node.unique_id: node for node in await store.get(workspace_id, list(ids.values()))}
    found: dict[str, StoredTool] = {}
    for name, memory_id in ids.items():
        node = by_id.get(memory_id)
        memory = _as_tool_memory(node) if node is not None else None
        if node is not None and memory is not None:
            found[name] = StoredTool(memory, node.vector)
    missing = [name for name in names if name not in found]
    if missing:
        tool_filter = {"metadata.memory_type": "tool", "content": {"in": missing}}
        grouped: dict[str, list[VectorNode]] = {}
        for node in await store.list_nodes(workspace_id, filter=tool_filter, with_vectors=True):
            grouped.setdefault(node.content, []).append(node)
        for name, nodes in grouped.items():
            merged = _merge(nodes)
            if merged is not None:
                found[name] = merged
    return {name: found[name] for name in names if name in found}


def new_tool_memory(workspace_id: str, tool_name: str) -> StoredTool:
    memory = ToolMemory(
        workspace_id=workspace_id, memory_id=tool_memory_id(workspace_id, tool_name), when_to_use=tool_name
    )
    return StoredTool(memory)


async def write_tool_memories(store: VectorStore, workspace_id: str, items: Sequence[StoredTool]) -> dict[str, int]:
    """Upsert the memories under their derived ids (reusing stored vectors), then delete superseded ids.

    Returns ReMe's `update_result` shape: `{"deleted_count", "inserted_count"}`. The upsert runs first, so a
    failure deletes nothing.
    """
    nodes = []
    for item in items:
        memory = item.memory
        memory.workspace_id = workspace_id
        memory.memory_id = tool_memory_id(workspace_id, memory.when_to_use)
        node = memory.to_vector_node()
        node.vector = item.vector
        nodes.append(node)
    if nodes:
        await store.upsert(workspace_id, nodes)
    written = {node.unique_id for node in nodes}
    stale = [i for item in items for i in item.legacy_ids if i not in written]
    deleted = await store.delete_ids(workspace_id, stale) if stale else 0
    for item in items:
        item.legacy_ids = []
    return {"deleted_count": deleted, "inserted_count": len(nodes)}


@dataclass
class CommitResult:
    """What `update_tool_memories` did: each tool's memory afterwards (absent when it has none), the ids it
    deleted, ReMe's `update_result`, and the names whose memory was written."""

    memories: dict[str, ToolMemory]
    deleted_memory_ids: list[str]
    update_result: dict[str, int]
    written: list[str]


#: `mutate(name, stored)` changes a tool's memory (or creates one) and returns it, or returns None to leave it.
Mutation = Callable[[str, StoredTool | None], StoredTool | None]


async def update_tool_memories(
    store: VectorStore, workspace_id: str, names: Sequence[str], mutate: Mutation
) -> CommitResult:
    """Read the named tools' memories, apply `mutate`, and write what changed — all under the workspace lock,
    so concurrent requests (appends, summaries, vector_store actions) never overwrite each other's changes.
    `mutate` must be quick and must not await: it runs inside the critical section."""
    async with store.lock(workspace_id):
        stored = await load_tool_memories(store, workspace_id, names)
        changed: list[StoredTool] = []
        memories: dict[str, ToolMemory] = {}
        for name in names:
            item = mutate(name, stored.get(name))
            if item is not None:
                changed.append(item)
            current = item or stored.get(name)
            if current is not None:
                memories[name] = current.memory
        deleted_ids = [
            i for item in changed for i in item.legacy_ids if i != tool_memory_id(workspace_id, item.memory.when_to_use)
        ]
        update_result = await write_tool_memories(store, workspace_id, changed)
    return CommitResult(memories, deleted_ids, update_result, [item.memory.when_to_use for item in changed])
