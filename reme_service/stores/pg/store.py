"""The PostgreSQL + pgvector backend ("pgvector"): the recommended store for several service processes (or hosts)
sharing one database. psycopg 3 async, connections from a `psycopg_pool.AsyncConnectionPool`.

The store composes collaborators of one concept each: the connections, failures and the shared workspace lock
(`stores/pg/connections.py`), the schema, registry rows and workspace tables (`stores/pg/schema.py`), the reads and
searches PostgreSQL runs (`stores/pg/reads.py`), and the searches of this process's copies of the smaller
workspaces (`stores/pg/copy_search.py`, `stores/pg/replica.py`). It keeps the workspace lifecycle: its writes.

Every write runs in one transaction that first locks the workspace's registry row (its `version` raised, or
`FOR UPDATE`), so writes to a workspace are serialised across processes and readers see a write whole or not at
all. `replace_workspace` fills a new table, points the registry row at it and drops the old one, all in one
transaction. A view made by `joined(then)` runs the caller's `then` in each write's transaction before it commits
(`stores/joined.py`: the history and audit rows of the PostgreSQL state on this database), sent with an upsert's
rows in one round trip (pipeline mode).

Search: a workspace of at most `replica_rows` rows is searched in this process's copy of it, brought up to date
from the registry row's `version` before each search (exact, BM25 fused as the in-process stores fuse it). The
others, and all with `replica_rows: 0`, are searched in PostgreSQL (`stores/pg/reads.py`).

Rows' vectors are written in pgvector's binary form (`stores/pg/vectors.py`); query vectors are sent, and stored
vectors read, in its text form (`'[0.1,0.2]'::vector`) with orjson: PostgreSQL parses them with `strtof` and prints
the shortest text that reads back to the same float32, so vectors round-trip bit for bit.

Availability: a database down at start does not stop the service (`stores/pg/connections.py`); `health()` reports
the reason. `lock(workspace)`: with `shared_lock` (default), a PostgreSQL session advisory lock held on top of the
process's asyncio lock.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray
from psycopg import sql

from reme_service.errors import InvalidRequestError, StoreError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id
from reme_service.stores.base import Filter
from reme_service.stores.filters import Condition
from reme_service.stores.joined import TransactionWork, same_database
from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.conn import Conn
from reme_service.stores.pg.connections import PgConnections, advisory_key
from reme_service.stores.pg.copy_search import CopySearches
from reme_service.stores.pg.filter import PgWhere, pg_where, storable
from reme_service.stores.pg.hybrid import candidate_count, lex_text, query_terms
from reme_service.stores.pg.index import HnswBuilder, pending_tables
from reme_service.stores.pg.reads import PgReads
from reme_service.stores.pg.registry import RegistryCache
from reme_service.stores.pg.replica import KEEP_VERSIONS, Replicas
from reme_service.stores.pg.schema import MAX_HNSW_DIM, PgSchema
from reme_service.stores.pg.terms import CommonTerms
from reme_service.stores.pg.vectors import VectorRows
from reme_service.stores.remote import Prepared, RemoteVectorStore
from reme_service.stores.spaces import EmbeddingSpace, check_space, recorded_space
from reme_service.stores.summary import WorkspaceSummary
from reme_service.stores.vectors import QueryVector, dimension_error

logger = logging.getLogger(__name__)


def _unstorable(value: Any) -> bool:
    """Whether a JSON value holds a string PostgreSQL cannot store (NUL, lone surrogates), key or value."""
    if isinstance(value, str):
        return not storable(value)
    if isinstance(value, dict):
        return any(_unstorable(k) or _unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_unstorable(item) for item in value)
    return False


class PgvectorVectorStore(RemoteVectorStore[PgWhere]):
    backend = "pgvector"

    def __init__(self, params: PgvectorStoreParams, *, embedder: EmbeddingClient) -> None:
        super().__init__(embedder=embedder)
        self.params = params
        self.prefix = params.table_prefix
        self._schema = PgSchema(params, self._next_seq, self._key)
        self._conns = PgConnections(params, prepare=self._schema.prepare, opened=self._pool_opened)
        self.where = self._conns.where
        self._shared = params.shared_lock
        self._builder = HnswBuilder(
            self._conns.connect_direct,
            lambda table: self._key(f"index\x00{table}"),
            m=params.hnsw_m,
            ef_construction=params.hnsw_ef_construction,
            build_mb=params.index_build_mb,
        )
        self._common_terms = CommonTerms(self._conns.connect_direct)
        self._resuming: asyncio.Task[None] | None = None
        self._rows = RegistryCache(self.space)  # registry rows kept between requests (`pg/registry.py`)
        self._reads = PgReads(params, self._conns, self._schema, self._rows, self._common_terms, lambda: self.space)
        self._replicas = Replicas(  # in-process copies of the smaller workspaces, searched here (`pg/replica.py`)
            registry=self._schema.registry,
            deleted=self._schema.deleted,
            max_rows=params.replica_rows,
            budget_bytes=params.replica_mb << 20,
        )
        self._copies = CopySearches(self._replicas, self._rows, self._conns, lambda: self.embedder)
        self._then: TransactionWork | None = None  # run in each write's transaction (`joined`)

    # ----- writes joined by the caller's work (`stores/joined.py`) -----

    def in_database(self, dsn: str, conn_kwargs: Mapping[str, Any]) -> bool:
        return same_database(self.params.conninfo_parts(), (dsn, conn_kwargs))

    def joined(self, then: TransactionWork) -> PgvectorVectorStore:
        """This store (every collaborator shared: pools, caches, locks) with `then` run in each write's
        transaction, after its statements, before the commit."""
        view = copy.copy(self)
        view._then = then
        return view

    async def _run_then(self, conn: Conn, *, pipelined: bool = False) -> None:
        """The joined work, its statements sent at once (pipeline mode: one round trip), or with the write's own
        statements when the caller has opened the pipeline (`pipelined`)."""
        if self._then is None:
            return
        if pipelined:
            await self._then(conn)
            return
        async with conn.pipeline():
            await self._then(conn)

    def _key(self, name: str) -> int:
        """A 64-bit advisory-lock key for `name` under this prefix."""
        return advisory_key(self.prefix, name)

    # ----- connections -----

    async def start(self) -> None:
        try:
            await self._conns.pool()
        except StoreError as exc:
            logger.warning("vector store not available at start (requests get 503 until it is): %s", exc.message)

    def _pool_opened(self) -> None:
        if self.params.index == "hnsw" and self._resuming is None:
            self._resuming = asyncio.create_task(self._resume_builds(), name="hnsw-resume")

    async def _resume_builds(self) -> None:
        """Build the HNSW indexes that a load left to a process which stopped before building them."""
        try:
            tables = await self._conns.run(
                "finding tables without their index",
                lambda conn: pending_tables(conn, self._schema.registry, MAX_HNSW_DIM),
            )
        except StoreError as exc:
            logger.warning("%s", exc.message)
            return
        for table in tables:
            self._builder.schedule(table)

    async def wait_for_indexes(self) -> None:
        """Until the background index builds (and table analyses, `pg/terms.py`) this process started have ended
        (tests, benchmarks)."""
        if self._resuming is not None:
            await asyncio.gather(self._resuming, return_exceptions=True)
        await self._builder.wait()
        await self._common_terms.wait()

    async def health(self) -> dict[str, Any]:
        info: dict[str, Any] = {"backend": self.backend, "index": self.params.index}
        if self._replicas.enabled:
            info["copies"] = self._replicas.described()  # this process's (`pg/replica.py`)
        try:
            await self._conns.run("health check", lambda conn: conn.execute("SELECT 1"))
        except StoreError as exc:
            return {"status": "down", "reason": exc.message, **info}
        return {"status": "ok", **info}

    async def close(self) -> None:
        if self._resuming is not None:
            self._resuming.cancel()
            await asyncio.gather(self._resuming, return_exceptions=True)
        await self._builder.close()
        await self._common_terms.close()
        await self._copies.close()
        await super().close()
        await self._conns.close()

    def lock(self, workspace_id: str) -> AbstractAsyncContextManager[Any]:
        if not self._shared:
            return super().lock(workspace_id)
        return self._conns.hold(workspace_id, self._locks[workspace_id])

    # ----- workspaces and the hooks of RemoteVectorStore -----

    async def exists_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return (
            await self._conns.run("reading a workspace", lambda conn: self._schema.entry(conn, workspace_id))
            is not None
        )

    async def list_workspaces(self) -> list[str]:
        return await self._conns.run("listing workspaces", self._schema.workspace_ids)

    async def create_workspace(self, workspace_id: str) -> None:
        workspace_id = validate_workspace_id(workspace_id)
        await self._conns.write("creating a workspace", lambda conn: self._schema.register(conn, workspace_id))

    def _translate(self, conditions: Iterable[Condition]) -> PgWhere:
        return pg_where(conditions)

    async def _stored_dim(self, workspace_id: WorkspaceId) -> int | None:
        entry = await self._conns.run("reading a workspace", lambda conn: self._schema.entry(conn, workspace_id))
        return None if entry is None else entry.dim

    async def _stored_space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        entry = await self._conns.run("reading a workspace", lambda conn: self._schema.entry(conn, workspace_id))
        return None if entry is None else entry.space

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        """One registry read (the base reads the dimension and the space apart)."""
        workspace_id = validate_workspace_id(workspace_id)
        entry = await self._conns.run("reading a workspace", lambda conn: self._schema.entry(conn, workspace_id))
        return None if entry is None or entry.dim is None else recorded_space(entry.space, entry.dim)

    def _check_batch(self, batch: Prepared) -> None:
        for uid, content, metadata in zip(batch.ids, batch.contents, batch.metadatas, strict=True):
            if not storable(uid) or not storable(content) or _unstorable(metadata):
                raise InvalidRequestError(
                    f"node {uid[:80]!r}: PostgreSQL cannot store a NUL character (or a lone surrogate) in an id, "
                    "a content or metadata",
                    details={"field": "nodes"},
                )

    async def _scan(self, workspace_id: WorkspaceId, native: PgWhere, *, with_vectors: bool) -> list[VectorNode]:
        return await self._reads.scan(workspace_id, native, with_vectors=with_vectors)

    async def _fetch(self, workspace_id: WorkspaceId, ids: list[str]) -> list[VectorNode]:
        return await self._reads.fetch(workspace_id, ids)

    async def _search_native(
        self, workspace_id: WorkspaceId, query: NDArray[np.float32], top_k: int, native: PgWhere
    ) -> list[SearchHit]:
        return await self._reads.search_native(workspace_id, query, top_k, native)

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        """One aggregate in PostgreSQL (`PgReads.summarize`), whatever the workspace's size."""
        workspace_id = validate_workspace_id(workspace_id)
        return await self._reads.summarize(workspace_id)

    # ----- searches -----

    async def search(
        self, workspace_id: str, query: str, *, top_k: int, filter: Filter | None = None, exact: bool = False
    ) -> list[SearchHit]:
        """As the base does it (an unknown workspace answers [] without embedding the query; one of another space is
        refused before), with the registry row read once, or not at all when kept, instead of three times."""
        workspace_id = validate_workspace_id(workspace_id)
        if not await self._reads.holds_vectors(workspace_id):
            return []
        vectors = await self.embedder.embed([query])
        return await self.search_vector(workspace_id, vectors[0], top_k=top_k, filter=filter, exact=exact)

    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        *,
        top_k: int,
        filter: Filter | None = None,
        exact: bool = False,
    ) -> list[SearchHit]:
        """As the base does it, but the dimension check and the search share one connection (two round trips
        fewer); filters SQL cannot express exactly take the base's path (candidates ranked here). `exact` ranks every
        matching row in SQL (the HNSW index is not used)."""
        workspace_id = validate_workspace_id(workspace_id)
        plan, native = self._plan(filter, workspace_id)
        if top_k <= 0:
            return []
        impossible = plan.impossible or native.impossible
        if self._copies.copied(workspace_id):
            hits = await self._copies.search(workspace_id, vector, top_k, filter, exact, impossible)
            if hits is not None:
                return hits
        if not native.exact:
            return await super().search_vector(workspace_id, vector, top_k=top_k, filter=filter)
        return await self._reads.search_vector(
            workspace_id, vector, top_k, native, plan.predicate, impossible=impossible, exact=exact
        )

    async def search_hybrid(
        self,
        workspace_id: str,
        query: str,
        *,
        top_k: int,
        filter: Filter | None = None,
        lexical_weight: float = 0.3,
        exact: bool = False,
        vector: QueryVector | None = None,
    ) -> list[SearchHit]:
        """Nearest vectors and best full-text matches, fused as the in-process stores fuse cosine and BM25
        (`pg/hybrid.py`). Filters SQL cannot express exactly, and queries without index terms, search by vector
        (`vector`, when given, is the query embedded already)."""
        workspace_id = validate_workspace_id(workspace_id)
        plan, native = self._plan(filter, workspace_id)
        if top_k > 0 and lexical_weight > 0 and self._copies.copied(workspace_id):
            if vector is None:
                if not await self._reads.holds_vectors(workspace_id):
                    return []
                vector = (await self.embedder.embed([query]))[0]
            impossible = plan.impossible or native.impossible
            weight = lexical_weight
            hits = await self._copies.search(workspace_id, vector, top_k, filter, exact, impossible, query, weight)
            if hits is not None:
                return hits
        terms = query_terms(query)
        if top_k <= 0 or not terms or not native.exact or lexical_weight <= 0:
            if vector is not None:
                return await self.search_vector(workspace_id, vector, top_k=top_k, filter=filter, exact=exact)
            return await self.search(workspace_id, query, top_k=top_k, filter=filter, exact=exact)
        if plan.impossible or native.impossible or not await self._reads.holds_vectors(workspace_id):
            return []
        if vector is None:
            vector = (await self.embedder.embed([query]))[0]
        return await self._reads.search_hybrid(
            workspace_id, vector, terms, native, plan.predicate,
            top_k=top_k, candidates=candidate_count(top_k), weight=lexical_weight,
        )  # fmt: skip

    # ----- writes: the workspace lifecycle -----

    async def _insert(self, conn: Conn, table: str, batch: Prepared, version: int) -> None:
        """Insert or replace the batch's rows (new ids get the next listing positions, in batch order), written at
        `version` (`pg/replica.py`)."""
        statement = sql.SQL(
            "INSERT INTO {} (id, content, metadata, embedding, lex, ver) "
            "SELECT u.id, u.content, u.metadata::jsonb, u.embedding, to_tsvector('simple', u.lex), {v} "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %b, %s::text[]) "
            "WITH ORDINALITY AS u(id, content, metadata, embedding, lex, n) "
            "ORDER BY u.n "
            "ON CONFLICT (id) DO UPDATE SET content = EXCLUDED.content, metadata = EXCLUDED.metadata, "
            "embedding = EXCLUDED.embedding, lex = EXCLUDED.lex, ver = EXCLUDED.ver"
        ).format(sql.Identifier(table), v=sql.Literal(int(version)))
        size = self.params.batch_size
        for start in range(0, len(batch), size):
            end = start + size
            await conn.execute(
                statement,
                [
                    batch.ids[start:end],
                    batch.contents[start:end],
                    [orjson.dumps(m).decode() for m in batch.metadatas[start:end]],
                    VectorRows(batch.vectors[start:end]),  # binary (`pg/vectors.py`)
                    [lex_text(content) for content in batch.contents[start:end]],
                ],
            )

    async def _commit_upsert(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        new_dim = batch.dim
        assert new_dim is not None

        deferred: list[str] = []

        async def work(conn: Conn) -> int:
            (table, dim, space), version = await self._schema.register(conn, workspace_id)
            if space != self.space:  # checked again under the row lock: another process may have written since
                if dim is not None:
                    check_space(workspace_id, recorded_space(space, dim), self.space, "write to")
                await self._schema.set_space(conn, workspace_id, self.space.to_json())
            if dim is None:
                await self._schema.create_table(conn, table, new_dim)
                await self._insert(conn, table, batch, version)
                if await self._schema.index_table(conn, table, new_dim, len(batch)):
                    deferred.append(table)
                await self._schema.set_dim(conn, workspace_id, new_dim)
                await self._run_then(conn)
                return len(batch)
            if dim != new_dim:  # another process fixed the dimension since `prepare` read it
                raise dimension_error(workspace_id, dim, new_dim, "a vector of the batch")
            if self._then is None:
                await self._insert(conn, table, batch, version)
                return len(batch)
            async with conn.pipeline():  # the rows and the joined work in one round trip
                await self._insert(conn, table, batch, version)
                await self._run_then(conn, pipelined=True)
            return len(batch)

        written = await self._conns.write("writing nodes", work)
        self._build_later(deferred)
        return written

    def _build_later(self, tables: list[str]) -> None:
        """Build the HNSW index of tables committed without it (a transaction may have been retried: the last)."""
        if tables:
            self._builder.schedule(tables[-1])

    async def _commit_delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        ids = [uid for uid in ids if storable(uid)]
        if not ids:
            return 0

        async def work(conn: Conn) -> int:
            # the registry row locked and its version raised; deletions older than `KEEP_VERSIONS` versions may go
            bump = sql.SQL(
                "UPDATE {} SET version = version + 1, trimmed = GREATEST(trimmed, version + 1 - %s) "
                "WHERE workspace_id = %s RETURNING tbl, dim, version"
            ).format(self._schema.registry)
            row = await (await conn.execute(bump, [KEEP_VERSIONS, workspace_id])).fetchone()
            if row is None or row[1] is None:
                return 0
            tbl, version = str(row[0]), int(row[2])
            table = sql.Identifier(tbl)
            # the rows go; their ids are logged for the copies of other processes (`pg/replica.py`)
            delete = sql.SQL(
                "WITH gone AS (DELETE FROM {t} WHERE id = ANY(%(ids)s) RETURNING id), "
                "logged AS (INSERT INTO {d} (tbl, id, ver) SELECT %(tbl)s, id, %(v)s FROM gone), "
                "trimmed AS (DELETE FROM {d} WHERE tbl = %(tbl)s AND ver <= %(old)s) "
                "SELECT count(*) FROM gone"
            ).format(t=table, d=self._schema.deleted)
            params = {"ids": ids, "tbl": tbl, "v": version, "old": version - KEEP_VERSIONS}
            counted = await (await conn.execute(delete, params)).fetchone()
            deleted = int(counted[0]) if counted is not None else 0
            left = await (await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(table))).fetchone()
            if left is not None and not left[0]:  # empty again: its next vectors choose the dimension
                await self._schema.drop_table(conn, tbl)
                await self._schema.set_dim(conn, workspace_id, None, self._schema.table_name(workspace_id))
            await self._run_then(conn)
            return deleted

        try:
            return await self._conns.write("deleting nodes", work)
        finally:
            self._rows.forget(workspace_id)  # (another process's reader finds a dropped table out: `read_table`)

    async def _commit_replace(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        deferred: list[str] = []

        async def work(conn: Conn) -> int:
            (old, _, _), version = await self._schema.register(conn, workspace_id)
            await self._schema.set_space(conn, workspace_id, self.space.to_json())
            fresh = self._schema.table_name(workspace_id)
            if batch.ids:
                assert batch.dim is not None
                await self._schema.create_table(conn, fresh, batch.dim)
                await self._insert(conn, fresh, batch, version)
                if await self._schema.index_table(conn, fresh, batch.dim, len(batch)):
                    deferred.append(fresh)
            await self._schema.set_dim(conn, workspace_id, batch.dim if batch.ids else None, fresh)
            await self._schema.drop_table(conn, old)
            await self._run_then(conn)
            return len(batch)

        try:
            written = await self._conns.write("replacing a workspace", work)
        finally:
            self._rows.forget(workspace_id)
            self._replicas.forget(workspace_id)
        self._build_later(deferred)
        return written

    async def _commit_drop(self, workspace_id: WorkspaceId) -> bool:
        async def work(conn: Conn) -> bool:
            entry = await self._schema.entry(conn, workspace_id, for_update=True)
            if entry is None:
                return False
            await self._schema.unregister(conn, workspace_id)
            await self._schema.drop_table(conn, entry[0])
            await self._run_then(conn)
            return True

        try:
            return await self._conns.write("dropping a workspace", work)
        finally:
            self._rows.forget(workspace_id)
            self._replicas.forget(workspace_id)
