"""The pgvector store's per-process copies of its smaller workspaces, searched in process ("replicas").

With the service and PostgreSQL on the same cores, PostgreSQL's own work for a search (the HNSW scan, the full-text
side and the fusion: ~0.6 ms of CPU at 10k memories) takes the cores the service processes would use: two workers
gave only ~1.15x the requests of one (docs/scaling.md). So each process keeps a copy of every workspace it searches
that has at most `replica_rows` rows — its nodes, their vectors and BM25 over their contents, in the in-memory
store's `WorkspaceState` — and searches it as the in-process stores do (exact; cosine fused with BM25). PostgreSQL
stays the only place anything is written; a copy is brought up to date before each search:

* Every write transaction raises the workspace's change counter (`version` in the registry row, under the row lock
  that serialises the workspace's writers), and every row it writes carries that version (`ver`, indexed). A
  delete also leaves the ids it removed, with its version, in `<prefix>deleted`.
* A search reads the registry row (`head`: one indexed read, which also gives the table, the dimension and the
  space, so a search reads nothing else). A copy of that table at that version is searched as it is. Otherwise one
  statement — one snapshot — reads the version again, the ids deleted since the copy's version and the rows
  written since; they are applied under the copy's exclusive gate in one step (deletions first: an id deleted and
  written again since is present), so a search never sees half of a change. A copy of another table (the
  workspace was replaced, or emptied and written again) is loaded again whole.
* Deleted ids are kept for the last `KEEP_VERSIONS` versions (the registry's `trimmed`: deletions at or below it
  may be gone); a copy older than that is loaded again whole.

A search thus sees every write committed before it began, in any process, as a search in PostgreSQL would; only
this module changes a copy. Searches of a stale copy wait for one update between them (a lock per workspace). A
workspace of more than `replica_rows` rows is searched in PostgreSQL; its table is remembered as too big until the
workspace moves to another table. The copies of one process take at most about `replica_mb` (least recently
searched dropped first; `ResidentSet`'s estimate).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import orjson
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from reme_service.stores.inproc.packed import StoredNode
from reme_service.stores.inproc.resident import ResidentSet
from reme_service.stores.inproc.workspace import INLINE_ROWS, Batch, WorkspaceState
from reme_service.stores.pg.conn import Conn
from reme_service.stores.spaces import parse_space

logger = logging.getLogger(__name__)

KEEP_VERSIONS = 1_000  # the deletions of this many versions stay readable for copies to catch up with
_HEAD, _DELETED, _WRITTEN = 0, 1, 2  # the kinds of the rows of a catch-up statement
FETCH_ROWS = 5_000  # rows per round trip when a whole table is copied


class Head(NamedTuple):
    """A workspace's registry row as a search reads it."""

    tbl: str
    dim: int | None
    space: str | None  # the embedding space as recorded (JSON text)
    version: int


@dataclass(slots=True)
class _Copy:
    tbl: str
    version: int
    state: WorkspaceState


class _Changes(NamedTuple):
    """What a catch-up (or load) statement read, in one snapshot."""

    tbl: str | None  # the registry's table then (None: the workspace was gone)
    version: int
    trimmed: int
    deleted: list[str]
    nodes: list[StoredNode]
    vectors: NDArray[np.float32]


class Moved(Exception):
    """The workspace moved to another table (or went) after its registry row was read: read it again."""


class Replicas:
    """The copies of one store in one process (module docstring)."""

    def __init__(self, *, registry: sql.Identifier, deleted: sql.Identifier, max_rows: int, budget_bytes: int) -> None:
        self.max_rows = max_rows
        self._registry = registry
        self._deleted = deleted
        self._copies: dict[str, _Copy] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._too_big: set[str] = set()  # tables found to have more than `max_rows` rows
        self._resident: ResidentSet[str] = ResidentSet(budget_bytes)
        self._heads = sql.SQL(
            "SELECT workspace_id, tbl, dim, space, version FROM {} WHERE workspace_id = ANY(%s)"
        ).format(registry)

    @property
    def enabled(self) -> bool:
        return self.max_rows > 0

    def searched_here(self, tbl: str) -> bool:
        """Whether the workspace now in `tbl` is searched in PostgreSQL (it has too many rows for a copy)."""
        return tbl in self._too_big

    def __len__(self) -> int:
        return len(self._copies)

    def described(self) -> dict[str, Any]:
        """For `/health`: how many copies this process holds and their estimated size in bytes."""
        return {"workspaces": len(self._copies), "bytes": self._resident.total}

    async def heads(self, conn: Conn, workspace_ids: list[str]) -> dict[str, Head]:
        """The registry rows of those of `workspace_ids` that exist, in one statement (`pg_heads.HeadReads`)."""
        rows = await (await conn.execute(self._heads, [workspace_ids])).fetchall()
        return {row[0]: Head(row[1], row[2], row[3], row[4]) for row in rows}

    def up_to_date(self, workspace_id: str, head: Head) -> WorkspaceState | None:
        """The copy of the workspace if it is at `head`'s version or later (then it counts as the most recently
        searched); None when it must be brought up to date (`current`), or is searched in PostgreSQL."""
        copy = self._fresh(workspace_id, head)
        return None if copy is None else copy.state

    def _fresh(self, workspace_id: str, head: Head) -> _Copy | None:
        copy = self._copies.get(workspace_id)
        if copy is not None and copy.tbl == head.tbl and copy.version >= head.version:
            self._resident.touch(workspace_id, copy.state)
            return copy
        return None

    def forget(self, workspace_id: str) -> None:
        self._copies.pop(workspace_id, None)
        self._resident.forget(workspace_id)

    async def current(self, conn: Conn, workspace_id: str, head: Head) -> WorkspaceState | None:
        """The copy of the workspace whose registry row is `head` (which holds vectors), brought up to `head`'s
        version at least; None when the workspace has more than `max_rows` rows (search it in PostgreSQL). Raises
        `Moved` when the workspace left `head.tbl` meanwhile. (The store asks `up_to_date` first.)"""
        if self.searched_here(head.tbl):
            return None
        async with self._locks.setdefault(workspace_id, asyncio.Lock()):
            copy = await self._catch_up(conn, workspace_id, head)
        return None if copy is None else copy.state

    async def _catch_up(self, conn: Conn, workspace_id: str, head: Head) -> _Copy | None:
        """Under the workspace's lock: the copy at `head`'s version or later (a search that waited for another's
        update finds it done)."""
        fresh = self._fresh(workspace_id, head)
        if fresh is not None:
            return fresh
        copy = self._copies.get(workspace_id)
        if copy is not None and copy.tbl == head.tbl:
            changes = await self._read(conn, workspace_id, head.tbl, copy.version)
            if copy.version >= changes.trimmed:  # else deletions it needs may be gone
                await _apply(copy.state, changes)
                copy.version = changes.version
                if copy.state.size > self.max_rows:  # grown past the copies' limit: PostgreSQL searches it now
                    self.forget(workspace_id)
                    self._too_big.add(head.tbl)
                    return None
                self._keep(workspace_id, copy)
                return copy
        return await self._load(conn, workspace_id, head)

    async def _load(self, conn: Conn, workspace_id: str, head: Head) -> _Copy | None:
        """A new copy of the workspace's table (None when it has too many rows)."""
        self.forget(workspace_id)
        assert head.dim is not None
        table = sql.Identifier(head.tbl)
        limit = sql.Literal(self.max_rows + 1)
        count_rows = sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} LIMIT {}) r").format(table, limit)
        try:
            row = await (await conn.execute(count_rows)).fetchone()
        except psycopg.errors.UndefinedTable as exc:
            raise Moved from exc
        if row is None or row[0] > self.max_rows:
            self._too_big.add(head.tbl)
            return None
        started = time.perf_counter()
        changes = await self._read(conn, workspace_id, head.tbl, None)
        vectors = changes.vectors if changes.nodes else np.empty((0, head.dim), np.float32)
        batch = Batch(changes.nodes, vectors, head.dim, parse_space(head.space))
        build = partial(WorkspaceState.build, batch)
        state = build() if len(batch.nodes) < INLINE_ROWS else await asyncio.to_thread(build)
        copy = _Copy(head.tbl, changes.version, state)
        self._keep(workspace_id, copy)
        if len(batch.nodes) >= INLINE_ROWS:
            logger.info(
                "copied workspace %r for in-process search: %d rows in %.2f s",
                workspace_id, len(batch.nodes), time.perf_counter() - started,
            )  # fmt: skip
        return copy

    def searched(self, workspace_id: str, state: WorkspaceState) -> None:
        """A search of `state` ended: count what it may have built (its int8 copy, BM25 index, kept scores), if the
        copy still holds that state."""
        copy = self._copies.get(workspace_id)
        if copy is not None and copy.state is state:
            self._keep(workspace_id, copy)

    def _keep(self, workspace_id: str, copy: _Copy) -> None:
        """Hold the copy and count it (again: another workspace's copy may have pushed it out while it caught up);
        past the budget, drop the least recently searched others."""
        self._copies[workspace_id] = copy
        self._resident.touch(workspace_id, copy.state)
        if not self._resident.over_budget():
            return
        for other in self._resident.oldest_first():
            if not self._resident.over_budget():
                break
            if other != workspace_id:
                self.forget(other)

    async def _read(self, conn: Conn, workspace_id: str, tbl: str, since: int | None) -> _Changes:
        """In one statement (one snapshot): the registry's table, version and trimmed mark, then — since version
        `since` — the ids deleted and the rows written, in listing order; with `since` None, every row. Raises
        `Moved` when the workspace is no longer in `tbl`."""
        table = sql.Identifier(tbl)
        parts = [
            sql.SQL(
                "SELECT {h}, version, tbl, NULL::text, NULL::text, NULL::bytea, trimmed FROM {r} "
                "WHERE workspace_id = %(w)s"
            ).format(h=sql.Literal(_HEAD), r=self._registry)
        ]
        if since is not None:
            parts.append(
                sql.SQL("SELECT {k}, ver, id, NULL, NULL, NULL, 0 FROM {d} WHERE tbl = %(t)s AND ver > %(v)s").format(
                    k=sql.Literal(_DELETED), d=self._deleted
                )
            )
        parts.append(
            sql.SQL(
                "SELECT {k}, ver, id, content, metadata::text, vector_send(embedding), seq FROM {t} WHERE ver > %(v)s"
            ).format(k=sql.Literal(_WRITTEN), t=table)
        )
        statement = sql.SQL("{} ORDER BY 1, 7").format(sql.SQL(" UNION ALL ").join(parts))
        params = {"w": workspace_id, "t": tbl, "v": -1 if since is None else since}
        try:
            if since is None:  # a whole table: fetched in batches, so the event loop is never held for long
                rows = await _fetch_batched(conn, statement, params)
            else:
                rows = await (await conn.execute(statement, params, binary=True)).fetchall()
        except psycopg.errors.UndefinedTable as exc:  # dropped since: the workspace was replaced, emptied or deleted
            raise Moved from exc
        decode = partial(_changes, rows, workspace_id)
        changes = decode() if len(rows) < INLINE_ROWS else await asyncio.to_thread(decode)
        if changes.tbl != tbl:
            raise Moved
        return changes


async def _fetch_batched(conn: Conn, statement: sql.Composed, params: dict[str, Any]) -> list[Any]:
    """The rows of `statement` through a server-side cursor, `FETCH_ROWS` at a time (one snapshot: the cursor's);
    making 100k rows' objects at once held the loop ~150 ms."""
    rows: list[Any] = []
    async with conn.transaction():
        cursor = conn.cursor(name="reme_copy", binary=True)
        try:
            await cursor.execute(statement, params)
            while batch := await cursor.fetchmany(FETCH_ROWS):
                rows.extend(batch)
        finally:
            await cursor.close()
    return rows


def _changes(rows: Sequence[Sequence[Any]], workspace_id: str) -> _Changes:
    tbl: str | None = None
    version = trimmed = 0
    deleted: list[str] = []
    nodes: list[StoredNode] = []
    vectors: list[NDArray[np.float32]] = []
    for kind, ver, uid, content, metadata, binary, seq in rows:
        if kind == _HEAD:
            tbl, version, trimmed = uid, ver, seq
        elif kind == _DELETED:
            deleted.append(uid)
        else:
            decoded = orjson.loads(metadata)
            nodes.append(StoredNode.encode(uid, workspace_id, content, decoded if isinstance(decoded, dict) else {}))
            vectors.append(np.frombuffer(binary, ">f4", offset=4))  # pgvector's binary form: int16 dim, int16 0
    matrix = np.vstack(vectors).astype(np.float32) if vectors else np.empty((0, 0), np.float32)
    return _Changes(tbl, version, trimmed, deleted, nodes, matrix)


async def _apply(state: WorkspaceState, changes: _Changes) -> None:
    """The deletions, then the rows written, in one exclusive step (module docstring)."""
    if not changes.deleted and not changes.nodes:
        return
    dim = state.dim if state.dim is not None else changes.vectors.shape[1]

    def apply() -> None:
        state.apply_delete(changes.deleted)
        if changes.nodes:
            needed = state.size + state.count_new(node.unique_id for node in changes.nodes)
            state.apply_upsert(changes.nodes, changes.vectors, dim=dim, matrix=state.grown(needed, dim))

    small = len(changes.nodes) + len(changes.deleted) < INLINE_ROWS and state.size < INLINE_ROWS
    await state.gate.run_exclusive(apply, inline=small)
    if state.nodes.should_compress():
        await state.gate.run_exclusive(state.nodes.compress, inline=False)
