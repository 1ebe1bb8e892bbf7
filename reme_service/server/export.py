"""A workspace export as a point-in-time snapshot (`GET /workspaces/{id}/export`, `server/manage.py`).

The export reads the workspace under `store.lock(workspace)`, the lock every write of the service takes (inserts,
deletes, PATCH, imports and loads, the flows' read-modify-writes), so what it reads is the workspace between two
writes: an outcome of some serial order of them. Under the lock it lists the ids, then fetches the memories
`EXPORT_BATCH` at a time and encodes them as library lines (`library_io.memory_line`, `dump`'s format) into a
`SpooledTemporaryFile`, each batch in a worker thread: in memory up to `SPOOL_BYTES`, then an anonymous file in the
temporary directory (`TMPDIR`), so the server holds one batch of nodes rather than the workspace. The lock is
released once the last line is written, before the response starts; the file is then streamed `READ_CHUNK` bytes
at a time, however slowly the client reads, while writes go on. A workspace deleted while the export waited for the
lock is a 404, and any failure of the store is the usual error envelope: nothing has been sent yet.

`SnapshotResponse` closes the file when the response ends, whether it was read to its end, the client went away
(Starlette then stops iterating without closing the iterator) or the request was cancelled; a snapshot that fails
halfway is closed once its last write has left its thread.

What the lock means, backend by backend (`stores/base.py`): on memory, local, embedded Chroma and Qdrant it is the
process's asyncio lock, and the store belongs to that one process (local takes a file lock on its directory), so
the snapshot is consistent. Chroma in server mode and Elasticsearch (with `shared_lock`, their default) extend it to
every service process by a lease record (`shared_lock.py`, renewed while the snapshot runs), pgvector by an
advisory lock: consistent across processes too. With `shared_lock` turned off on a shared server, the lock excludes
the writers of this process only: another process's write can land in the middle of the snapshot, as it can in
the middle of any read-modify-write then. Writers wait for the snapshot (about a second per 100,000 memories on
the in-process stores; cookbook/bench/export_snapshot.py), not for the client's download.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from tempfile import SpooledTemporaryFile
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from reme_service.ops.vector_store.library_io import memory_line
from reme_service.schema.memory import memory_from_node
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.base import VectorStore, consume_exception

EXPORT_BATCH = 1000  # memories fetched and encoded at a time while the snapshot is taken
SPOOL_BYTES = 4 * 1024 * 1024  # a snapshot larger than this goes to a temporary file
READ_CHUNK = 256 * 1024  # bytes of the snapshot sent per chunk of the response

Spool = SpooledTemporaryFile[bytes]


async def snapshot_library(store: VectorStore, workspace_id: str) -> Spool:
    """The workspace as library lines, read under its lock, in a spooled file positioned at its start (the caller
    closes it). `NotFoundError` when the workspace no longer exists once the lock is ours."""
    spool: Spool = SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b")  # noqa: SIM115 - outlives this call
    writing: asyncio.Future[None] | None = None
    try:
        async with store.lock(workspace_id):
            await store.require_workspace(workspace_id)
            ids = await store.list_ids(workspace_id)
            for start in range(0, len(ids), EXPORT_BATCH):
                nodes = await store.get(workspace_id, ids[start : start + EXPORT_BATCH])
                # shielded: a cancelled export leaves the thread's write running, and closes the spool after it
                writing = asyncio.ensure_future(asyncio.to_thread(_write_lines, spool, nodes))
                await asyncio.shield(writing)
        spool.seek(0)
    except BaseException:
        _close_when_written(spool, writing)
        raise
    return spool


def _write_lines(spool: Spool, nodes: Sequence[VectorNode]) -> None:
    spool.write(b"".join(memory_line(memory_from_node(node)) for node in nodes))


def _close_when_written(spool: Spool, writing: asyncio.Future[None] | None) -> None:
    """Close the spool now, or, when a write is still running in its thread (the writes are shielded: a cancelled
    snapshot leaves its write running), once it is done: a spool closed under a write could leave the file that
    write rolls over to open."""
    if writing is None or writing.done():
        spool.close()
        return
    writing.add_done_callback(consume_exception)
    writing.add_done_callback(lambda _: spool.close())


async def _chunks(spool: Spool) -> AsyncIterator[bytes]:
    while chunk := await asyncio.to_thread(spool.read, READ_CHUNK):
        yield chunk


class SnapshotResponse(StreamingResponse):
    """A snapshot streamed from its spooled file, closed when the response ends, however it ends."""

    def __init__(self, spool: Spool, **kwargs: Any) -> None:
        super().__init__(_chunks(spool), **kwargs)
        self.spool = spool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.spool.close()
