"""VectorStoreActionOp: the `vector_store` endpoint — list, dump, load, copy, delete, delete_ids, insert, history,
reembed.

`metadata.action_result` is always JSON (a dict or a list of memory dicts), never a Python repr string.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.errors import InvalidRequestError, describe_validation_errors
from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.history.lookup import memory_history
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.vector_store.library_io import library_file, read_library_nodes, write_library
from reme_service.ops.vector_store.reembed import reembed_workspace
from reme_service.schema.memory import BaseMemory, memory_from_dict, memory_from_node
from reme_service.schema.vector_node import VectorNode
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.stores.base import VectorStore
from reme_service.stores.vectors import embed_checked, latest_by_id

ACTIONS = ("list", "dump", "load", "copy", "delete", "delete_ids", "insert", "history", "reembed")

logger = logging.getLogger("reme_service.library")


class VectorStoreActionParams(OpParams):
    store: str = "default"


ACTION: Input[str] = Input("action", str, default="")
PATH: Input[str] = Input("path", str, default="")
SRC_WORKSPACE_ID: Input[str] = Input("src_workspace_id", str, default="")
MEMORY_IDS: Input[list[str] | None] = Input("memory_ids", list[str] | None, default=None)  # [] is not absent
MEMORY_DICTS: Input[list[dict[str, Any]]] = Input("memory_dicts", list[dict[str, Any]], factory=list)
LIMIT: Input[int | None] = Input("limit", int | None, default=None)
OFFSET: Input[int | None] = Input("offset", int | None, default=None)
MEMORY_ID: Input[str] = Input("memory_id", str, default="")

V = TypeVar("V", str, list[str], list[dict[str, Any]])


def _require(ctx: ServiceContext, spec: Input[V]) -> V:
    value = ctx.input(spec)
    if not value:
        action = ctx.input(ACTION)
        raise InvalidRequestError(f"action '{action}' needs '{spec.name}'", details={"field": spec.name})
    return value


class VectorStoreActionOp(ServiceOp[VectorStoreActionParams]):
    inputs = (ACTION, PATH, SRC_WORKSPACE_ID, MEMORY_IDS, MEMORY_DICTS, LIMIT, OFFSET, MEMORY_ID)
    not_found = "load: the memory library file does not exist"

    async def run(self, ctx: ServiceContext) -> None:
        action = ctx.input(ACTION)
        handlers: dict[str, Callable[[ServiceContext, VectorStore], Awaitable[Any]]] = {
            "list": self._list,
            "dump": self._dump,
            "load": self._load,
            "copy": self._copy,
            "delete": self._delete,
            "delete_ids": self._delete_ids,
            "insert": self._insert,
            "history": self._history,
            "reembed": self._reembed,
        }
        handler = handlers.get(action)
        if handler is None:
            raise InvalidRequestError(
                f"unknown action {action!r}; valid actions: {', '.join(ACTIONS)}", details={"field": "action"}
            )
        store = ctx.store(self.params.store)
        ctx.response.answer = ""
        ctx.response.metadata["action_result"] = await handler(ctx, store)

    async def _list(self, ctx: ServiceContext, store: VectorStore) -> list[dict[str, Any]]:
        """Every memory (ReMe, in the store's order), or the `limit` memories after the first `offset` in id order."""
        limit, offset = ctx.input(LIMIT), ctx.input(OFFSET) or 0
        if limit is None and not offset:
            nodes = await store.list_nodes(ctx.workspace_id)
        else:  # a window: fetch only its nodes
            ids = await store.list_ids(ctx.workspace_id)
            window = ids[offset:] if limit is None else ids[offset : offset + limit]
            nodes = await store.get(ctx.workspace_id, window)
            for node in nodes:
                node.vector = None
        return await off_loop_if(len(nodes) > OFF_LOOP_ITEMS, _memory_dicts, nodes)

    async def _dump(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        roots = ctx.library_roots
        target = library_file(roots.resolve(_require(ctx, PATH), write=True), ctx.workspace_id)
        nodes = await store.list_nodes(ctx.workspace_id)
        memories = await off_loop_if(len(nodes) > OFF_LOOP_ITEMS, _memories, nodes)
        await write_library(target, memories)
        return {"size": len(memories), "path": roots.display(target)}

    async def _load(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        roots, asked = ctx.library_roots, _require(ctx, PATH)
        source = library_file(roots.resolve(asked, write=False), ctx.workspace_id)
        started = time.perf_counter()
        check = functools.partial(roots.check_open, client_path=asked)
        nodes = await read_library_nodes(source, ctx.workspace_id, roots.display(source), check)
        if ctx.progress is not None:  # a job: embed here, step by step, so GET /jobs/{id} shows rows done/total
            await embed_reporting(store, ctx.workspace_id, nodes, ctx.progress)
        async with store.lock(ctx.workspace_id):
            size = await store.replace_workspace(ctx.workspace_id, nodes)
        seconds = time.perf_counter() - started
        logger.info("[%s] loaded %d memories into %s in %.1f s", ctx.request_id, size, ctx.workspace_id, seconds)
        return {"size": size}

    async def _copy(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        src = validate_workspace_id(_require(ctx, SRC_WORKSPACE_ID))
        if not await store.exists_workspace(src):  # as ReMe 0.2: nothing to copy is no error; the warning says why
            ctx.response.metadata["warning"] = "the source workspace does not exist; nothing was copied"
            return {"size": 0}
        async with store.lock(ctx.workspace_id):
            return {"size": await store.copy_workspace(src, ctx.workspace_id)}

    async def _delete(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        """Drop the workspace and everything kept of it: its memories in the store (snapshot, log, index), its
        working-memory folder, and its background jobs' requests and results (those waiting or running are
        cancelled). The answer says what was purged."""
        erase_jobs = ctx.services.erase_jobs
        async with store.lock(ctx.workspace_id):
            memories = (await store.summarize(ctx.workspace_id)).size
            deleted = await store.delete_workspace(ctx.workspace_id)
            files = await asyncio.to_thread(ctx.services.working_store().erase_workspace, ctx.workspace_id)
            jobs = await erase_jobs(ctx.workspace_id) if erase_jobs is not None else 0
        purged = {"memories": memories, "working_memory_files": files, "jobs": jobs}
        return {"deleted": deleted, "purged": purged}

    async def _delete_ids(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        ids = ctx.input(MEMORY_IDS)
        if ids is None:
            raise InvalidRequestError("action 'delete_ids' needs 'memory_ids'", details={"field": "memory_ids"})
        if not ids:  # ReMe answers an empty list with success: agents send it after a run that stored nothing
            return {"deleted_count": 0}
        async with store.lock(ctx.workspace_id):
            return {"deleted_count": await store.delete_ids(ctx.workspace_id, ids)}

    async def _insert(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        """Upsert the memories given; the answer names each memory stored once (an id sent twice is stored once)."""
        dicts = _require(ctx, MEMORY_DICTS)
        nodes = await off_loop_if(len(dicts) > OFF_LOOP_ITEMS, _nodes_of, dicts, ctx.workspace_id)
        async with store.lock(ctx.workspace_id):
            await store.upsert(ctx.workspace_id, nodes)
        return {"size": len(nodes), "memory_ids": [n.unique_id for n in nodes]}

    async def _history(self, ctx: ServiceContext, store: VectorStore) -> list[dict[str, Any]]:
        """The memory's history entries, oldest first (404 for a memory with neither history nor existence)."""
        return await memory_history(ctx.services.history, store, ctx.workspace_id, _require(ctx, MEMORY_ID))

    async def _reembed(self, ctx: ServiceContext, store: VectorStore) -> dict[str, Any]:
        """Move the workspace to the store's current embedding space (`reembed.py`; over HTTP always a job)."""
        return await reembed_workspace(ctx.store(self.params.store), ctx.workspace_id)


# Turning many memories into other objects runs in a worker thread (`off_loop_if` above `OFF_LOOP_ITEMS`): 10,000
# memories take ~0.1 s of CPU, 100,000 inserted dicts over a second.


def _memories(nodes: Sequence[VectorNode]) -> list[BaseMemory]:
    return [memory_from_node(n) for n in nodes]


def _memory_dicts(nodes: Sequence[VectorNode]) -> list[dict[str, Any]]:
    return [memory_from_node(n).model_dump(mode="json") for n in nodes]


def _nodes_of(dicts: Sequence[dict[str, Any]], workspace_id: str) -> list[VectorNode]:
    """The nodes of the memories `insert` was given, in `workspace_id`; the first invalid one is a 400 naming it.
    An id given twice is one node, its last version at its first position, as the stores and the history apply a
    batch (`stores/vectors.latest_by_id`)."""
    nodes = []
    for index, data in enumerate(dicts):
        try:
            memory = memory_from_dict(data)
        except ValidationError as exc:
            raise InvalidRequestError(
                describe_validation_errors(exc, prefix=f"memory_dicts[{index}]: ", limit=1),
                details={"field": f"memory_dicts[{index}]"},
            ) from None
        memory.workspace_id = workspace_id
        nodes.append(memory.to_vector_node())
    return latest_by_id(nodes)


#: rows a load run as a job embeds per step, reporting its progress after each (a few seconds with the local model)
PROGRESS_ROWS = 500


async def embed_reporting(
    store: VectorStore, workspace_id: str, nodes: Sequence[VectorNode], report: Callable[[int, int | None], None]
) -> None:
    """Give the nodes without a vector theirs from the store's embedder, `PROGRESS_ROWS` at a time, calling
    `report(done, total)` before the first step and after each (the store then embeds none of them again)."""
    todo = [node for node in nodes if node.vector is None]
    total, done = len(nodes), len(nodes) - len(todo)
    report(done, total)
    for start in range(0, len(todo), PROGRESS_ROWS):
        step = todo[start : start + PROGRESS_ROWS]
        texts = [node.content for node in step]
        vectors = await embed_checked(store.embedder, workspace_id, texts, store.embedder.dimensions)
        for node, vector in zip(step, vectors, strict=True):
            node.vector = vector
        done += len(step)
        report(done, total)
