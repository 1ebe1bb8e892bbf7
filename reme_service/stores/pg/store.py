"""The PostgreSQL + pgvector backend ("pgvector"): the recommended store for several service processes (or hosts)
sharing one database. psycopg 3 async, connections from a `psycopg_pool.AsyncConnectionPool`.

Layout, under `table_prefix` (default `reme_`):

* `<prefix>workspaces` (the registry): one row per workspace: its id as given, the table holding its nodes
  (`tbl`), the dimension of its vectors (`dim`, NULL while it holds none: an empty workspace takes the dimension
  of its first vectors; the table is made then) and their embedding space (`space`, JSON text, `stores/spaces.py`;
  the column is added to an older registry at start, and an older row takes the space of its next write).
* `<prefix>n<hash>_<generation>`: a workspace's nodes: `id` (primary key), `seq` (listing order: from the sequence
  `<prefix>seq` when an id is first written, kept when it is replaced), `content`, `metadata` (jsonb) and
  `embedding vector(dim)` (unit vectors: inner product = cosine), with an HNSW index (`vector_ip_ops`) when
  `index: hnsw`.

Every write runs in one transaction that first locks the workspace's registry row (its `version` raised, or
`FOR UPDATE`), so writes to a workspace are serialised across processes and readers see a write whole or not at
all. `replace_workspace` fills a new table, points the registry row at it and drops the old one, all in one
transaction.

Search: a workspace of at most `replica_rows` rows is searched in this process's copy of it, brought up to date
from the registry row's `version` before each search (`pg_replica.py`: exact, BM25 fused as the in-process stores
fuse it). The others, and all with `replica_rows: 0`, are searched in PostgreSQL: `ORDER BY embedding <#> q
LIMIT k` (negative inner product; score `max(cos, 0)`). Unfiltered searches use the HNSW index (approximate;
`ef_search`, raised to `top_k`, with pgvector's strict-order iterative scan so `k` rows come back whenever the
workspace has them); filtered searches and `index: exact` rank every matching row (exact). Filters become SQL
(`stores/pg/filter.py`), every value a bound parameter and every name an `sql.Identifier`.

Vectors travel as pgvector's text form (`'[0.1,0.2]'::vector`), written and read with orjson: PostgreSQL parses
them with `strtof` and prints the shortest text that reads back to the same float32, so vectors round-trip bit
for bit, and no type OID needs registering on each pooled connection (the `pgvector` package's adapter would).

Availability: a database down at start does not stop the service. The pool is made on first use after a direct
connection succeeded (that probe fails at once with libpq's reason when the server refuses); a connection failure
later drops the pool, so requests fail fast with 503 while the server is down and the next request after it is
back connects again. `health()` reports the reason.

`lock(workspace)`: with `shared_lock` (default), a PostgreSQL session advisory lock on a connection of a separate
small pool, held for the section on top of the process's asyncio lock: a process that dies releases it with its
session, and a waiter gives up after `lock_wait` s (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, TypeVar

import numpy as np
import orjson
import psycopg
from numpy.typing import NDArray
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from reme_service.errors import DimensionMismatchError, InvalidRequestError, StoreError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode, trusted_hit, trusted_node
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.stores.base import Filter
from reme_service.stores.filters import Condition
from reme_service.stores.inproc.packed import compile_stored_filter
from reme_service.stores.inproc.search import run_search
from reme_service.stores.inproc.workspace import WorkspaceState
from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.conn import Conn
from reme_service.stores.pg.filter import PgWhere, pg_where, storable
from reme_service.stores.pg.heads import HeadReads
from reme_service.stores.pg.hybrid import HybridQuery, any_of, candidate_count, hybrid_statement, lex_text, query_terms
from reme_service.stores.pg.index import HnswBuilder, cancel_builds, hnsw_statement, pending_tables
from reme_service.stores.pg.registry import Entry, RegistryCache
from reme_service.stores.pg.replica import KEEP_VERSIONS, Head, Moved, Replicas
from reme_service.stores.pg.terms import CommonTerms
from reme_service.stores.pg.vectors import VectorOids, VectorRows, register_vector_rows, vector_oids
from reme_service.stores.remote import Prepared, RemoteVectorStore
from reme_service.stores.spaces import EmbeddingSpace, check_space, parse_space, recorded_space
from reme_service.stores.summary import WorkspaceSummary
from reme_service.stores.vectors import QueryVector, as_query, dimension_error

logger = logging.getLogger(__name__)

T = TypeVar("T")
MAX_EF_SEARCH = 1_000  # pgvector's limit of hnsw.ef_search
MAX_HNSW_DIM = 2_000  # pgvector's limit for an HNSW index on `vector`


#: a workspace table's summary (`summarize`): per memory type (`str(metadata.get("memory_type", "task"))` in SQL:
#: a JSON null is Python's "None"), the count and the latest `time_modified` in code point order
_SUMMARY = sql.SQL(
    "SELECT CASE WHEN jsonb_typeof(metadata) = 'object' AND metadata ? 'memory_type' "
    "THEN coalesce(metadata ->> 'memory_type', 'None') ELSE 'task' END AS kind, count(*), "
    "max(CASE WHEN jsonb_typeof(metadata) = 'object' AND metadata ? 'time_modified' "
    "THEN coalesce(metadata ->> 'time_modified', 'None') END COLLATE \"C\") "
    "FROM {} GROUP BY 1"
)


def _vector_text(vector: NDArray[np.float32]) -> str:
    return orjson.dumps(vector, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _parse_vector(text: str) -> NDArray[np.float32]:
    return np.asarray(orjson.loads(text), dtype=np.float32)


def _unstorable(value: Any) -> bool:
    """Whether a JSON value holds a string PostgreSQL cannot store (NUL, lone surrogates), key or value."""
    if isinstance(value, str):
        return not storable(value)
    if isinstance(value, dict):
        return any(_unstorable(k) or _unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_unstorable(item) for item in value)
    return False


def _unit(score: Any) -> float:
    """A score clipped to [0, 1]."""
    return min(max(float(score), 0.0), 1.0)


def _connection_lost(exc: psycopg.Error) -> bool:
    """Whether the error means the connection (or the server) is gone, rather than one statement failing: client-side
    errors carry no SQLSTATE; class 08 is a connection exception; 57P01-57P03 a server shutting down or starting."""
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class _Unsent(Exception):
    """A write's connection broke before its transaction began: nothing of it reached the database."""

    def __init__(self, error: psycopg.Error) -> None:
        super().__init__(str(error))
        self.error = error


class PgvectorVectorStore(RemoteVectorStore[PgWhere]):
    backend = "pgvector"

    def __init__(self, params: PgvectorStoreParams, *, embedder: EmbeddingClient) -> None:
        super().__init__(embedder=embedder)
        self.params = params
        self.prefix = params.table_prefix
        self._dsn, self._conn_kwargs = params.conninfo_parts()
        self.where = self._describe()
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._lock_pool: AsyncConnectionPool[Conn] | None = None
        self._connecting = asyncio.Lock()
        self._closing: set[asyncio.Task[Any]] = set()
        self._shared = params.shared_lock
        self._lock_wait_ms = f"{max(1, int(params.lock_wait * 1000))}ms"
        self._builder = HnswBuilder(
            self._connect_direct,
            lambda table: self._key(f"index\x00{table}"),
            m=params.hnsw_m,
            ef_construction=params.hnsw_ef_construction,
            build_mb=params.index_build_mb,
        )
        self._common_terms = CommonTerms(self._connect_direct)
        self._resuming: asyncio.Task[None] | None = None
        self._oids: VectorOids | None = None  # of `vector` and `vector[]` in the database, read once
        self._rows = RegistryCache(self.space)  # registry rows kept between requests (`pg_registry.py`)
        self._space_text = (embedder, self.space.to_json())  # the embedder's space as the registry records it
        self._replicas = Replicas(  # in-process copies of the smaller workspaces, searched here (`pg_replica.py`)
            registry=self._registry,
            deleted=self._name("deleted"),
            max_rows=params.replica_rows,
            budget_bytes=params.replica_mb << 20,
        )
        # the registry rows searches of the copies read, several workspaces' in one statement (`pg_heads.py`)
        self._heads: HeadReads[Head] = HeadReads(self._read_heads)

    def _describe(self) -> str:
        """Where the database is, for messages (never the password)."""
        try:
            info = psycopg.conninfo.conninfo_to_dict(self._dsn, **self._conn_kwargs)
        except psycopg.Error as exc:
            raise ValueError(f"invalid dsn: {exc}") from exc
        host, port, db = info.get("host", "localhost"), info.get("port", 5432), info.get("dbname", "")
        return f"postgresql at {host}:{port}/{db}"

    def _name(self, suffix: str) -> sql.Identifier:
        return sql.Identifier(f"{self.prefix}{suffix}")

    @property
    def _registry(self) -> sql.Identifier:
        return self._name("workspaces")

    # ----- connections -----

    async def start(self) -> None:
        try:
            await self._get_pool()
        except StoreError as exc:
            logger.warning("vector store not available at start (requests get 503 until it is): %s", exc.message)

    async def _connect_direct(self) -> Conn:
        try:
            async with asyncio.timeout(self.params.timeout):
                return await AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=max(1, int(self.params.timeout)), **self._conn_kwargs
                )
        except TimeoutError as exc:
            raise StoreError(f"{self.where} did not answer within {self.params.timeout:g} s") from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.where} is unreachable: {type(exc).__name__}: {str(exc).strip()[:300]}") from exc

    async def _get_pool(self) -> AsyncConnectionPool[Conn]:
        """The pool, made (after a probe connection that also prepares the schema) when there is none."""
        if self._pool is not None:
            return self._pool
        async with self._connecting:
            if self._pool is None:
                probe = await self._connect_direct()
                try:
                    await self._guarded("preparing the schema", self._prepare_schema(probe))
                finally:
                    await probe.close()
                self._pool = await self._new_pool(self.params.pool_size, "reme-pgvector")
                if self.params.index == "hnsw" and self._resuming is None:
                    self._resuming = asyncio.create_task(self._resume_builds(), name="hnsw-resume")
            return self._pool

    async def _resume_builds(self) -> None:
        """Build the HNSW indexes that a load left to a process which stopped before building them."""
        try:
            tables = await self._run(
                "finding tables without their index", lambda conn: pending_tables(conn, self._registry, MAX_HNSW_DIM)
            )
        except StoreError as exc:
            logger.warning("%s", exc.message)
            return
        for table in tables:
            self._builder.schedule(table)

    async def wait_for_indexes(self) -> None:
        """Until the background index builds (and table analyses, `pg_terms.py`) this process started have ended
        (tests, benchmarks)."""
        if self._resuming is not None:
            await asyncio.gather(self._resuming, return_exceptions=True)
        await self._builder.wait()
        await self._common_terms.wait()

    async def _new_pool(
        self, size: int, name: str, reset: Callable[[Conn], Awaitable[None]] | None = None, *, check: bool = False
    ) -> Any:
        """A pool of autocommit connections. Its connections are checked before each use (a round trip) only with
        `check`: the request pool's are not, `_run` retries on a connection found broken instead."""
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=size,
            open=False,
            name=name,
            timeout=self.params.timeout,
            reconnect_timeout=self.params.timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self.params.timeout)), **self._conn_kwargs},
            check=AsyncConnectionPool.check_connection if check else None,
            configure=self._configure,
            reset=reset,
        )
        await pool.open(wait=False)
        return pool

    async def _configure(self, conn: Conn) -> None:
        """Each new connection: HNSW scans look at `ef_search` candidates and return rows in exact distance order
        until the LIMIT is met (pgvector's strict-order iterative scan), so `k` rows come back whenever there are
        `k` (placeholders until the extension's library loads, which then takes them); and a statement waits at most
        `lock_wait` for a lock — a table, a row, a workspace's advisory lock — then fails (503)."""
        await conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', 'strict_order', false), "
            "set_config('lock_timeout', %s, false)",
            [str(self.params.ef_search), self._lock_wait_ms],
        )
        if self._oids is None:
            self._oids = await vector_oids(conn)
        register_vector_rows(conn, self._oids)

    def _drop_pools(self) -> None:
        """Forget the pools after a connection failure (closed in the background): the next request probes."""
        for pool in (self._pool, self._lock_pool):
            if pool is not None:
                task = asyncio.ensure_future(pool.close(timeout=1.0))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self._pool = self._lock_pool = None

    async def _guarded(self, action: str, call: Awaitable[T]) -> T:
        """Await `call`; database failures become StoreError (503) naming the action and the reason."""
        try:
            return await call
        except psycopg.Error as exc:
            raise self._failure(action, exc) from exc

    def _failure(self, action: str, exc: psycopg.Error) -> StoreError:
        """The StoreError for a database failure; a lost connection also drops the pools (the next request probes)."""
        reason = str(exc).strip()[:300]
        if _connection_lost(exc):
            self._drop_pools()
            return StoreError(f"{self.where} is unreachable ({action}): {type(exc).__name__}: {reason}")
        return StoreError(f"{self.where}: {action} failed: {type(exc).__name__}: {reason}")

    async def _run(self, action: str, work: Callable[[Conn], Awaitable[T]], *, retry: bool = True) -> T:
        """`work` on a pooled connection (autocommit); database failures become StoreError (503).

        Pooled connections are not checked before use (that was a round trip per request). A connection found
        broken — the server restarted, or ended the session, since its last use — drops the pools, and `work` runs
        once more on a new connection (after a probe) when that cannot repeat a change: with `retry` (reads) or
        when the failure came before the transaction began (`_Unsent`, writes)."""
        for attempt in (0, 1):
            pool = await self._get_pool()
            try:
                async with pool.connection() as conn:
                    return await work(conn)
            except PoolTimeout as exc:
                raise await self._pool_timeout(action) from exc
            except _Unsent as unsent:
                if attempt == 1:
                    raise self._failure(action, unsent.error) from unsent.error
                self._drop_pools()
            except psycopg.Error as exc:
                if not retry or attempt == 1 or not _connection_lost(exc):
                    raise self._failure(action, exc) from exc
                self._drop_pools()
        raise AssertionError("unreachable")

    async def _pool_timeout(self, action: str) -> StoreError:
        """No pooled connection in time: the server is down (then the pools go, and the reason is told) or busy."""
        try:
            probe = await self._connect_direct()
        except StoreError as down:
            self._drop_pools()
            return down
        await probe.close()
        return StoreError(f"{self.where}: no free connection within {self.params.timeout:g} s ({action})")

    async def _write(self, action: str, work: Callable[[Conn], Awaitable[T]]) -> T:
        """`work` in one transaction (which waits at most `lock_wait` for a lock: `_configure`)."""

        async def transaction(conn: Conn) -> T:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    await stack.enter_async_context(conn.transaction())  # BEGIN: nothing is changed yet
                except psycopg.Error as exc:
                    if _connection_lost(exc):
                        raise _Unsent(exc) from exc
                    raise
                return await work(conn)
            raise AssertionError("unreachable")  # (for mypy: the stack does not swallow exceptions)

        return await self._run(action, transaction, retry=False)

    async def _prepare_schema(self, conn: Conn) -> None:
        async with conn.transaction():
            # one process at a time: concurrent CREATE ... IF NOT EXISTS can collide in the catalogs
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._key("schema")])
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} "
                    "(workspace_id text PRIMARY KEY, tbl text NOT NULL UNIQUE, dim integer)"
                ).format(self._registry)
            )
            await conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS space text").format(self._registry))
            await conn.execute(sql.SQL("CREATE SEQUENCE IF NOT EXISTS {}").format(self._name("seq")))
            await self._prepare_change_log(conn)

    async def _prepare_change_log(self, conn: Conn) -> None:
        """What the in-process copies catch up from (`pg_replica.py`): the registry's change counter and trimmed
        mark, the deleted ids, and each row's version — added to the tables of an older store, whose rows count as
        written at version 0."""
        for column in ("version", "trimmed"):
            add = sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} bigint NOT NULL DEFAULT 0")
            await conn.execute(add.format(self._registry, sql.Identifier(column)))
        deleted = self._name("deleted")
        await conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (tbl text NOT NULL, id text NOT NULL, ver bigint NOT NULL)").format(
                deleted
            )
        )
        await conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (tbl, ver)").format(self._name("deleted_v"), deleted)
        )
        older = sql.SQL(
            "SELECT tbl FROM {} WHERE to_regclass(quote_ident(tbl)) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
            "pg_attribute WHERE attrelid = to_regclass(quote_ident(tbl)) AND attname = 'ver' AND NOT attisdropped)"
        ).format(self._registry)
        for (table,) in await (await conn.execute(older)).fetchall():
            ident = sql.Identifier(table)
            await conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN ver bigint NOT NULL DEFAULT 0").format(ident))
            await conn.execute(sql.SQL("CREATE INDEX {} ON {} (ver)").format(sql.Identifier(f"{table}_c"), ident))

    def _key(self, name: str) -> int:
        """A 64-bit advisory-lock key for `name` under this prefix."""
        digest = hashlib.sha256(f"reme-pgvector\x00{self.prefix}\x00{name}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    async def health(self) -> dict[str, Any]:
        info: dict[str, Any] = {"backend": self.backend, "index": self.params.index}
        if self._replicas.enabled:
            info["copies"] = self._replicas.described()  # this process's (`pg_replica.py`)
        try:
            await self._run("health check", lambda conn: conn.execute("SELECT 1"))
        except StoreError as exc:
            return {"status": "down", "reason": exc.message, **info}
        return {"status": "ok", **info}

    async def close(self) -> None:
        if self._resuming is not None:
            self._resuming.cancel()
            await asyncio.gather(self._resuming, return_exceptions=True)
        await self._builder.close()
        await self._common_terms.close()
        await self._heads.close()
        await super().close()
        for pool in (self._pool, self._lock_pool):
            if pool is not None:
                await pool.close()
        self._pool = self._lock_pool = None
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    # ----- the shared lock -----

    def lock(self, workspace_id: str) -> AbstractAsyncContextManager[Any]:
        if not self._shared:
            return super().lock(workspace_id)
        return self._hold(workspace_id, self._locks[workspace_id])

    async def _get_lock_pool(self) -> AsyncConnectionPool[Conn]:
        await self._get_pool()
        if self._lock_pool is None:
            async with self._connecting:
                if self._lock_pool is None:

                    async def unlock_all(conn: Conn) -> None:  # a connection returned never keeps a lock
                        await conn.execute("SELECT pg_advisory_unlock_all()")

                    self._lock_pool = await self._new_pool(
                        self.params.pool_size, "reme-pgvector-locks", unlock_all, check=True
                    )
        assert self._lock_pool is not None
        return self._lock_pool

    @contextlib.asynccontextmanager
    async def _hold(self, workspace_id: str, local: asyncio.Lock) -> AsyncIterator[None]:
        """The process's asyncio lock of the workspace, then PostgreSQL's advisory lock on a dedicated connection
        (released when the section ends, or by the server when the session ends)."""
        key = self._key(f"workspace\x00{workspace_id}")
        async with local:
            pool = await self._get_lock_pool()
            try:
                async with pool.connection() as conn:
                    await self._take(conn, key, workspace_id)
                    try:
                        yield
                    finally:
                        release = asyncio.ensure_future(conn.execute("SELECT pg_advisory_unlock(%s)", [key]))
                        with contextlib.suppress(psycopg.Error):  # a broken session released it already
                            await asyncio.shield(release)
            except PoolTimeout as exc:
                raise await self._pool_timeout(f"locking workspace {workspace_id!r}") from exc
            except psycopg.Error as exc:
                raise self._failure(f"locking workspace {workspace_id!r}", exc) from exc

    async def _take(self, conn: Conn, key: int, workspace_id: str) -> None:
        try:  # gives up after `lock_wait` (the connection's lock_timeout, `_configure`)
            await conn.execute("SELECT pg_advisory_lock(%s)", [key])
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreError(
                f"workspace {workspace_id!r} stayed locked by another service process for "
                f"{self.params.lock_wait:g} s ({self.where})",
                details={"workspace_id": workspace_id},
            ) from exc

    # ----- workspaces -----

    async def _entry(self, conn: Conn, workspace_id: str, *, for_update: bool = False) -> Entry | None:
        query = sql.SQL("SELECT tbl, dim, space FROM {} WHERE workspace_id = %s").format(self._registry)
        if for_update:
            query = sql.SQL("{} FOR UPDATE").format(query)
        row = await (await conn.execute(query, [workspace_id])).fetchone()
        return None if row is None else Entry(str(row[0]), row[1], parse_space(row[2]))

    async def _vector_entry(self, conn: Conn, workspace_id: str, *, search: bool) -> Entry | None:
        """The workspace's registry row when it holds vectors, else None; for a `search`, refused (409) when those
        vectors are of another embedding space."""
        entry = await self._entry(conn, workspace_id)
        if entry is None or entry.dim is None:
            return None
        if search:
            check_space(workspace_id, recorded_space(entry.space, entry.dim), self.space, "search")
        return entry

    async def exists_workspace(self, workspace_id: str) -> bool:
        validate_workspace_id(workspace_id)
        return await self._run("reading a workspace", lambda conn: self._entry(conn, workspace_id)) is not None

    async def list_workspaces(self) -> list[str]:
        async def read(conn: Conn) -> list[str]:
            query = sql.SQL("SELECT workspace_id FROM {} ORDER BY workspace_id").format(self._registry)
            cursor = await conn.execute(query)
            return [str(row[0]) for row in await cursor.fetchall()]

        return await self._run("listing workspaces", read)

    async def create_workspace(self, workspace_id: str) -> None:
        validate_workspace_id(workspace_id)
        await self._write("creating a workspace", lambda conn: self._register(conn, workspace_id))

    async def _register(self, conn: Conn, workspace_id: str) -> tuple[Entry, int]:
        """The workspace's registry row (inserted when missing), locked for this transaction, and the version this
        transaction writes: the row's change counter, raised (`pg_replica.py`)."""
        statement = sql.SQL(
            "INSERT INTO {r} AS r (workspace_id, tbl) VALUES (%s, %s) ON CONFLICT (workspace_id) "
            "DO UPDATE SET version = r.version + 1 RETURNING tbl, dim, space, version"
        ).format(r=self._registry)
        row = await (await conn.execute(statement, [workspace_id, self._table_name(workspace_id)])).fetchone()
        assert row is not None
        return Entry(str(row[0]), row[1], parse_space(row[2])), int(row[3])

    def _table_name(self, workspace_id: str) -> str:
        digest = hashlib.sha256(workspace_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"{self.prefix}n{digest}_{np.base_repr(self._next_seq(), 36).lower()}"

    async def _create_table(self, conn: Conn, table: str, dim: int) -> None:
        """A new workspace table, its primary key only: `_index_table` adds the other indexes after the first rows
        (bulk builds are faster than growing an index row by row)."""
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {t} (id text PRIMARY KEY, seq bigint NOT NULL DEFAULT nextval({s}), "
                "content text NOT NULL, metadata jsonb NOT NULL, embedding vector({d}) NOT NULL, "
                "lex tsvector NOT NULL, ver bigint NOT NULL DEFAULT 0)"
            ).format(t=sql.Identifier(table), s=sql.Literal(f"{self.prefix}seq"), d=sql.Literal(int(dim)))
        )

    async def _index_table(self, conn: Conn, table: str, dim: int, rows: int) -> bool:
        """The indexes of a table just filled with its first `rows` rows: the listing order, the rows' versions
        (`pg_replica.py`), the full-text side of hybrid search (`pg_hybrid.py`) and the HNSW index — built here, or,
        above `index_background_rows`, after the commit by `HnswBuilder` (then True: the caller schedules it)."""
        ident = sql.Identifier(table)
        await conn.execute(sql.SQL("CREATE INDEX {} ON {} (seq)").format(sql.Identifier(f"{table}_s"), ident))
        await conn.execute(sql.SQL("CREATE INDEX {} ON {} (ver)").format(sql.Identifier(f"{table}_c"), ident))
        # no pending list: entries go straight into the index, so a search never scans a list of recent rows
        gin = sql.SQL("CREATE INDEX {} ON {} USING gin (lex) WITH (fastupdate = off)")
        await conn.execute(gin.format(sql.Identifier(f"{table}_l"), ident))
        if self.params.index != "hnsw":
            return False
        if dim > MAX_HNSW_DIM:
            logger.warning(
                "no HNSW index for %d-dimensional vectors (pgvector indexes at most %d): searches scan every row",
                dim,
                MAX_HNSW_DIM,
            )
            return False
        if rows > self.params.index_background_rows:
            return True
        # for this transaction only (every write is one): room for the whole graph while it is built
        await conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", [f"{self.params.index_build_mb}MB"])
        await conn.execute(
            hnsw_statement(table, m=self.params.hnsw_m, ef_construction=self.params.hnsw_ef_construction,
                           concurrently=False)
        )  # fmt: skip
        return False

    async def _drop_table(self, conn: Conn, table: str) -> None:
        await cancel_builds(conn, table)  # else the DROP would wait for a graph about to be thrown away
        await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        await conn.execute(sql.SQL("DELETE FROM {} WHERE tbl = %s").format(self._name("deleted")), [table])

    async def _read_table(
        self,
        action: str,
        workspace_id: str,
        read: Callable[[Conn, str, int], Awaitable[T]],
        empty: T,
        *,
        search: bool = False,
    ) -> T:
        """`read(conn, table, dim)` on the workspace's table; `empty` for an unknown workspace or one with no
        vectors. The registry row kept by this process is used when there is one (`pg_registry.py`), else read (and
        kept when it may be). A table dropped since the row was read or kept (a replace, a delete, in any process)
        makes the row be read again; so does a dimension that does not fit a kept row. A `search` is refused (409)
        when the workspace's vectors are of another embedding space (a kept row is of this store's space)."""

        async def work(conn: Conn) -> T:
            entry = self._rows.get(workspace_id)
            kept = entry is not None
            for attempt in range(4):  # the kept row, then up to three reads of a registry changing meanwhile
                if entry is None:
                    entry = await self._vector_entry(conn, workspace_id, search=search)
                    if entry is None:
                        return empty
                assert entry.dim is not None
                try:
                    result = await read(conn, entry.tbl, entry.dim)
                except psycopg.errors.UndefinedTable:
                    self._rows.forget(workspace_id)
                    if attempt == 3:
                        raise
                except DimensionMismatchError:
                    if not kept:
                        raise
                    self._rows.forget(workspace_id)
                else:
                    if not kept:
                        self._rows.remember(workspace_id, entry)
                    return result
                entry, kept = None, False
            raise AssertionError("unreachable")

        return await self._run(action, work)

    # ----- the hooks of RemoteVectorStore -----

    def _translate(self, conditions: Iterable[Condition]) -> PgWhere:
        return pg_where(conditions)

    async def _stored_dim(self, workspace_id: str) -> int | None:
        entry = await self._run("reading a workspace", lambda conn: self._entry(conn, workspace_id))
        return None if entry is None else entry[1]

    async def _stored_space(self, workspace_id: str) -> EmbeddingSpace | None:
        entry = await self._run("reading a workspace", lambda conn: self._entry(conn, workspace_id))
        return None if entry is None else entry.space

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        """One registry read (the base reads the dimension and the space apart)."""
        validate_workspace_id(workspace_id)
        entry = await self._run("reading a workspace", lambda conn: self._entry(conn, workspace_id))
        return None if entry is None or entry.dim is None else recorded_space(entry.space, entry.dim)

    def _check_batch(self, batch: Prepared) -> None:
        for uid, content, metadata in zip(batch.ids, batch.contents, batch.metadatas, strict=True):
            if not storable(uid) or not storable(content) or _unstorable(metadata):
                raise InvalidRequestError(
                    f"node {uid[:80]!r}: PostgreSQL cannot store a NUL character (or a lone surrogate) in an id, "
                    "a content or metadata",
                    details={"field": "nodes"},
                )

    def _node(self, workspace_id: str, row: Sequence[Any], *, with_vector: bool) -> VectorNode:
        metadata = orjson.loads(row[2])
        vector = _parse_vector(row[3]) if with_vector else None
        return trusted_node(row[0], workspace_id, row[1], metadata if isinstance(metadata, dict) else {}, vector)

    async def _scan(self, workspace_id: str, native: PgWhere, *, with_vectors: bool) -> list[VectorNode]:
        columns = sql.SQL("id, content, metadata::text{}").format(sql.SQL(", embedding::text" if with_vectors else ""))
        where = native.where or sql.SQL("TRUE")

        async def read(conn: Conn, table_name: str, dim: int) -> list[VectorNode]:
            table = sql.Identifier(table_name)
            query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY seq").format(columns, table, where)
            rows = await (await conn.execute(query, native.params)).fetchall()
            return [self._node(workspace_id, row, with_vector=with_vectors) for row in rows]

        return await self._read_table("listing nodes", workspace_id, read, [])

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        """One aggregate in PostgreSQL (`_SUMMARY`): the rows grouped by their type, each group's count and latest
        time; three rows come back whatever the workspace's size (a sequential scan of the table, read where it
        lies: at 1M memories ~1 s of the server's time and nothing of this process's memory). It answers as the
        default for metadata whose `memory_type` and `time_modified` are strings (all the service writes), null or
        missing; times compare in the "C" collation, code point order like Python's."""
        validate_workspace_id(workspace_id)

        async def read(conn: Conn, table_name: str, dim: int) -> WorkspaceSummary:
            query = _SUMMARY.format(sql.Identifier(table_name))
            rows = await (await conn.execute(query)).fetchall()
            counts = {str(kind): int(count) for kind, count, _ in rows}
            latest = max((str(modified) for _, _, modified in rows if modified is not None), default="")
            return WorkspaceSummary(sum(counts.values()), counts, latest or None)

        return await self._read_table("summarizing a workspace", workspace_id, read, WorkspaceSummary())

    async def _holds_vectors(self, workspace_id: str) -> bool:
        """Whether the workspace holds vectors: yes when its registry row is kept (a stale one is found out by the
        search), else one registry read (the row is kept when it may be)."""
        if self._rows.get(workspace_id) is not None:
            return True
        # the space is checked here, before the query is embedded
        entry = await self._run("reading a workspace", lambda conn: self._vector_entry(conn, workspace_id, search=True))
        if entry is None:
            return False
        self._rows.remember(workspace_id, entry)
        return True

    async def search(
        self, workspace_id: str, query: str, *, top_k: int, filter: Filter | None = None, exact: bool = False
    ) -> list[SearchHit]:
        """As the base does it (an unknown workspace answers [] without embedding the query; one of another space is
        refused before), with the registry row read once, or not at all when kept, instead of three times."""
        validate_workspace_id(workspace_id)
        if not await self._holds_vectors(workspace_id):
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
        validate_workspace_id(workspace_id)
        plan, native = self._plan(filter, workspace_id)
        if top_k <= 0:
            return []
        if self._copied(workspace_id):
            impossible = plan.impossible or native.impossible
            hits = await self._search_copy(workspace_id, vector, top_k, filter, exact, impossible)
            if hits is not None:
                return hits
        if not native.exact:
            return await super().search_vector(workspace_id, vector, top_k=top_k, filter=filter)

        async def read(conn: Conn, table_name: str, dim: int) -> list[SearchHit]:
            table = sql.Identifier(table_name)
            query = as_query(vector, workspace_id, dim)
            if plan.impossible or native.impossible:
                return []
            hits = await self._search_rows(conn, workspace_id, table, query, top_k, native, exact=exact)
            return [hit for hit in hits if plan.predicate is None or plan.predicate(hit.node)]

        return await self._read_table("searching", workspace_id, read, [], search=True)

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
        (`pg_hybrid.py`). Filters SQL cannot express exactly, and queries without index terms, search by vector
        (`vector`, when given, is the query embedded already)."""
        validate_workspace_id(workspace_id)
        plan, native = self._plan(filter, workspace_id)
        if top_k > 0 and lexical_weight > 0 and self._copied(workspace_id):
            if vector is None:
                if not await self._holds_vectors(workspace_id):
                    return []
                vector = (await self.embedder.embed([query]))[0]
            impossible = plan.impossible or native.impossible
            weight = lexical_weight
            hits = await self._search_copy(workspace_id, vector, top_k, filter, exact, impossible, query, weight)
            if hits is not None:
                return hits
        terms = query_terms(query)
        if top_k <= 0 or not terms or not native.exact or lexical_weight <= 0:
            if vector is not None:
                return await self.search_vector(workspace_id, vector, top_k=top_k, filter=filter, exact=exact)
            return await self.search(workspace_id, query, top_k=top_k, filter=filter, exact=exact)
        if plan.impossible or native.impossible or not await self._holds_vectors(workspace_id):
            return []
        if vector is None:
            vector = (await self.embedder.embed([query]))[0]
        candidates = candidate_count(top_k)

        async def read(conn: Conn, table_name: str, dim: int) -> list[SearchHit]:
            common = await self._common_terms.of(conn, table_name)
            searched = [term for term in terms if term not in common]
            spec = HybridQuery(
                vector=_vector_text(as_query(vector, workspace_id, dim)),
                ranked=any_of(terms),
                searched=any_of(searched),
                candidates=candidates,
                top_k=top_k,
                weight=lexical_weight,
            )
            statement = hybrid_statement(table_name, native.where, spec)
            params = {**native.params, **spec.params()}
            if self.params.index == "hnsw" and candidates > self.params.ef_search:
                async with conn.transaction():
                    ef = str(min(candidates, MAX_EF_SEARCH))
                    await conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", [ef])
                    rows = await (await conn.execute(statement, params)).fetchall()
            else:  # (each pooled connection has ef_search set already)
                rows = await (await conn.execute(statement, params)).fetchall()
            hits = [
                trusted_hit(self._node(workspace_id, row, with_vector=False), _unit(np.float32(row[3]))) for row in rows
            ]
            return [hit for hit in hits if plan.predicate is None or plan.predicate(hit.node)]

        return await self._read_table("searching", workspace_id, read, [], search=True)

    # ----- searches of the in-process copies (`pg_replica.py`) -----

    def _copied(self, workspace_id: str) -> bool:
        """Whether the workspace is searched in this process's copy of it (unless found too big for one now)."""
        if not self._replicas.enabled:
            return False
        entry = self._rows.get(workspace_id)
        return entry is None or not self._replicas.searched_here(entry.tbl)

    async def _search_copy(
        self,
        workspace_id: str,
        vector: QueryVector,
        top_k: int,
        filter: Filter | None,
        exact: bool,
        impossible: bool,
        text: str | None = None,
        weight: float = 0.0,
    ) -> list[SearchHit] | None:
        """The search (hybrid with `text`) on this process's up-to-date copy of the workspace, as the in-memory store
        runs it; None when the workspace is searched in PostgreSQL (more rows than `replica_rows`)."""
        predicate = compile_stored_filter(filter)
        holds, state = await self._copy(workspace_id)
        if not holds:
            return []
        if state is None:
            return None
        assert state.dim is not None
        query = as_query(vector, workspace_id, state.dim)
        if impossible:
            return []
        hits = await run_search(state, query, top_k, predicate, exact, text=text, weight=weight)
        self._replicas.searched(workspace_id, state)
        return hits

    def _recorded_space(self) -> str:
        """The store's embedding space as the registry records it (made again only for another embedder)."""
        embedder, text = self._space_text
        if embedder is not self.embedder:
            self._space_text = (self.embedder, text := self.space.to_json())
        return text

    async def _read_heads(self, workspace_ids: list[str]) -> dict[str, Head]:
        return await self._run("searching", lambda conn: self._replicas.heads(conn, workspace_ids))

    async def _copy(self, workspace_id: str) -> tuple[bool, WorkspaceState | None]:
        """Whether the workspace holds vectors, and its copy brought up to date (None: search it in PostgreSQL). A
        workspace of another embedding space is refused (409). The registry row comes from a read shared with the
        searches that asked at the same time (`pg_heads.py`); a connection is taken only to bring the copy up to
        date."""
        replicas = self._replicas
        for _ in range(3):  # a workspace replaced while its copy catches up is read again
            head = await self._heads.get(workspace_id)
            if head is None or head.dim is None:
                replicas.forget(workspace_id)
                return False, None
            if head.space != self._recorded_space():
                space = recorded_space(parse_space(head.space), head.dim)
                check_space(workspace_id, space, self.space, "search")
            state = replicas.up_to_date(workspace_id, head)
            if state is not None or replicas.searched_here(head.tbl):
                return True, state
            try:
                catch_up = partial(replicas.current, workspace_id=workspace_id, head=head)
                return True, await self._run("searching", catch_up)
            except Moved:
                continue
        return True, None  # replaced again and again: PostgreSQL answers this one

    async def _search_native(
        self, workspace_id: str, query: NDArray[np.float32], top_k: int, native: PgWhere
    ) -> list[SearchHit]:
        async def read(conn: Conn, table_name: str, dim: int) -> list[SearchHit]:
            table = sql.Identifier(table_name)
            return await self._search_rows(conn, workspace_id, table, query, top_k, native)

        return await self._read_table("searching", workspace_id, read, [], search=True)

    async def _search_rows(
        self,
        conn: Conn,
        workspace_id: str,
        table: sql.Identifier,
        query: NDArray[np.float32],
        top_k: int,
        native: PgWhere,
        *,
        exact: bool = False,
    ) -> list[SearchHit]:
        approximate = not exact and self.params.index == "hnsw" and native.where is None and top_k <= MAX_EF_SEARCH
        params = {**native.params, "q": _vector_text(query)}
        if approximate:  # the form pgvector's HNSW index answers
            order = sql.SQL("embedding <#> %(q)s::vector")
        else:  # an expression no index matches: every matching row is ranked (exact), ties by listing order
            order = sql.SQL("(embedding <#> %(q)s::vector) + 0, seq")
        # the best ids first (a scan computes only distances), then the rows of those few
        text = sql.SQL(
            "SELECT t.id, t.content, t.metadata::text, best.d FROM "
            "(SELECT id, seq, embedding <#> %(q)s::vector AS d FROM {t} WHERE {w} ORDER BY {o} LIMIT {k}) best "
            "JOIN {t} t ON t.id = best.id ORDER BY best.d, best.seq"
        ).format(t=table, w=native.where or sql.SQL("TRUE"), o=order, k=sql.Literal(int(top_k)))  # literal: pg_hybrid
        ef = max(self.params.ef_search, top_k)
        if approximate and ef != self.params.ef_search:  # (each pooled connection has ef_search set already)
            async with conn.transaction():
                await conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef)])
                rows = await (await conn.execute(text, params)).fetchall()
        else:
            rows = await (await conn.execute(text, params)).fetchall()
        return [trusted_hit(self._node(workspace_id, row, with_vector=False), _unit(-float(row[3]))) for row in rows]

    async def _fetch(self, workspace_id: str, ids: list[str]) -> list[VectorNode]:
        ids = [uid for uid in ids if storable(uid)]
        if not ids:
            return []

        async def read(conn: Conn, table_name: str, dim: int) -> list[VectorNode]:
            table = sql.Identifier(table_name)
            query = sql.SQL("SELECT id, content, metadata::text, embedding::text FROM {} WHERE id = ANY(%s)").format(
                table
            )
            rows = await (await conn.execute(query, [ids])).fetchall()
            return [self._node(workspace_id, row, with_vector=True) for row in rows]

        return await self._read_table("reading nodes", workspace_id, read, [])

    async def _insert(self, conn: Conn, table: str, batch: Prepared, version: int) -> None:
        """Insert or replace the batch's rows (new ids get the next listing positions, in batch order), written at
        `version` (`pg_replica.py`)."""
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
                    VectorRows(batch.vectors[start:end]),  # binary (`pg_vectors.py`)
                    [lex_text(content) for content in batch.contents[start:end]],
                ],
            )

    async def _commit_upsert(self, workspace_id: str, batch: Prepared) -> int:
        new_dim = batch.dim
        assert new_dim is not None

        deferred: list[str] = []

        async def work(conn: Conn) -> int:
            (table, dim, space), version = await self._register(conn, workspace_id)
            if space != self.space:  # checked again under the row lock: another process may have written since
                if dim is not None:
                    check_space(workspace_id, recorded_space(space, dim), self.space, "write to")
                await self._set_space(conn, workspace_id)
            if dim is None:
                await self._create_table(conn, table, new_dim)
                await self._insert(conn, table, batch, version)
                if await self._index_table(conn, table, new_dim, len(batch)):
                    deferred.append(table)
                await self._set_dim(conn, workspace_id, new_dim)
                return len(batch)
            if dim != new_dim:  # another process fixed the dimension since `prepare` read it
                raise dimension_error(workspace_id, dim, new_dim, "a vector of the batch")
            await self._insert(conn, table, batch, version)
            return len(batch)

        written = await self._write("writing nodes", work)
        self._build_later(deferred)
        return written

    def _build_later(self, tables: list[str]) -> None:
        """Build the HNSW index of tables committed without it (a transaction may have been retried: the last)."""
        if tables:
            self._builder.schedule(tables[-1])

    async def _set_space(self, conn: Conn, workspace_id: str) -> None:
        """Record the store's embedding space for the workspace (in the caller's transaction)."""
        query = sql.SQL("UPDATE {} SET space = %s WHERE workspace_id = %s").format(self._registry)
        await conn.execute(query, [self.space.to_json(), workspace_id])

    async def _set_dim(self, conn: Conn, workspace_id: str, dim: int | None, table: str | None = None) -> None:
        if table is None:
            await conn.execute(
                sql.SQL("UPDATE {} SET dim = %s WHERE workspace_id = %s").format(self._registry), [dim, workspace_id]
            )
        else:
            await conn.execute(
                sql.SQL("UPDATE {} SET dim = %s, tbl = %s WHERE workspace_id = %s").format(self._registry),
                [dim, table, workspace_id],
            )

    async def _commit_delete(self, workspace_id: str, ids: list[str]) -> int:
        ids = [uid for uid in ids if storable(uid)]
        if not ids:
            return 0

        async def work(conn: Conn) -> int:
            # the registry row locked and its version raised; deletions older than `KEEP_VERSIONS` versions may go
            bump = sql.SQL(
                "UPDATE {} SET version = version + 1, trimmed = GREATEST(trimmed, version + 1 - %s) "
                "WHERE workspace_id = %s RETURNING tbl, dim, version"
            ).format(self._registry)
            row = await (await conn.execute(bump, [KEEP_VERSIONS, workspace_id])).fetchone()
            if row is None or row[1] is None:
                return 0
            tbl, version = str(row[0]), int(row[2])
            table = sql.Identifier(tbl)
            # the rows go; their ids are logged for the copies of other processes (`pg_replica.py`)
            delete = sql.SQL(
                "WITH gone AS (DELETE FROM {t} WHERE id = ANY(%(ids)s) RETURNING id), "
                "logged AS (INSERT INTO {d} (tbl, id, ver) SELECT %(tbl)s, id, %(v)s FROM gone), "
                "trimmed AS (DELETE FROM {d} WHERE tbl = %(tbl)s AND ver <= %(old)s) "
                "SELECT count(*) FROM gone"
            ).format(t=table, d=self._name("deleted"))
            params = {"ids": ids, "tbl": tbl, "v": version, "old": version - KEEP_VERSIONS}
            counted = await (await conn.execute(delete, params)).fetchone()
            deleted = int(counted[0]) if counted is not None else 0
            left = await (await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(table))).fetchone()
            if left is not None and not left[0]:  # empty again: its next vectors choose the dimension
                await self._drop_table(conn, tbl)
                await self._set_dim(conn, workspace_id, None, self._table_name(workspace_id))
            return deleted

        try:
            return await self._write("deleting nodes", work)
        finally:
            self._rows.forget(workspace_id)  # (another process's reader finds the dropped table out: `_read_table`)

    async def _commit_replace(self, workspace_id: str, batch: Prepared) -> int:
        deferred: list[str] = []

        async def work(conn: Conn) -> int:
            (old, _, _), version = await self._register(conn, workspace_id)
            await self._set_space(conn, workspace_id)
            fresh = self._table_name(workspace_id)
            if batch.ids:
                assert batch.dim is not None
                await self._create_table(conn, fresh, batch.dim)
                await self._insert(conn, fresh, batch, version)
                if await self._index_table(conn, fresh, batch.dim, len(batch)):
                    deferred.append(fresh)
            await self._set_dim(conn, workspace_id, batch.dim if batch.ids else None, fresh)
            await self._drop_table(conn, old)
            return len(batch)

        try:
            written = await self._write("replacing a workspace", work)
        finally:
            self._rows.forget(workspace_id)
            self._replicas.forget(workspace_id)
        self._build_later(deferred)
        return written

    async def _commit_drop(self, workspace_id: str) -> bool:
        async def work(conn: Conn) -> bool:
            entry = await self._entry(conn, workspace_id, for_update=True)
            if entry is None:
                return False
            await conn.execute(sql.SQL("DELETE FROM {} WHERE workspace_id = %s").format(self._registry), [workspace_id])
            await self._drop_table(conn, entry[0])
            return True

        try:
            return await self._write("dropping a workspace", work)
        finally:
            self._rows.forget(workspace_id)
            self._replicas.forget(workspace_id)
