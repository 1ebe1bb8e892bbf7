"""Background HNSW builds for the pgvector store.

Building pgvector's HNSW graph is the slow part of a library load (100,000 384-d rows: about a minute on two cores,
against seconds to insert them). A table that gets more than `index_background_rows` rows in one write is committed
without its HNSW index; `HnswBuilder` then builds it with `CREATE INDEX CONCURRENTLY` on a connection of its own,
which lets reads and writes go on. Until the index is valid, PostgreSQL's planner ranks every row: searches are
exact meanwhile, never missing.

Across processes: a build holds a session advisory lock on its table, so two service processes never build the same
index; one that finds the lock taken leaves the build to its holder. A build that dies with its process leaves no
index, or an INVALID one: `pending_tables` finds such tables when a store starts, and the build drops the invalid
index before it starts again. Dropping a table (replace, delete, emptied) first cancels any build of it, in any
process (`cancel_builds`), so a drop never waits for a graph it is about to throw away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import psycopg
from psycopg import sql

from reme_service.concurrency import OnePerKey
from reme_service.stores.pg.conn import Conn

logger = logging.getLogger(__name__)


# the index of table t is named t_v; `state` is NULL (none), true (valid) or false (invalid: a build that died)
_INDEX_STATE = (
    "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
    "WHERE c.relname = %s AND pg_table_is_visible(c.oid)"
)


def index_name(table: str) -> str:
    return f"{table}_v"


def hnsw_statement(table: str, *, m: int, ef_construction: int, concurrently: bool) -> sql.Composed:
    """`CREATE INDEX` of table's HNSW index (inner product over normalised vectors = cosine)."""
    verb = "CREATE INDEX CONCURRENTLY IF NOT EXISTS" if concurrently else "CREATE INDEX"
    return sql.SQL(verb + " {} ON {} USING hnsw (embedding vector_ip_ops) WITH (m = {}, ef_construction = {})").format(
        sql.Identifier(index_name(table)), sql.Identifier(table), sql.Literal(m), sql.Literal(ef_construction)
    )


async def cancel_builds(conn: Conn, table: str) -> None:
    """Cancel every `CREATE INDEX` running on `table`, in any session (this one's role may cancel its own)."""
    await conn.execute(
        "SELECT pg_cancel_backend(pid) FROM pg_stat_progress_create_index WHERE relid = to_regclass(%s)",
        [sql.Identifier(table).as_string(conn)],
    )


async def pending_tables(conn: Conn, registry: sql.Identifier, max_dim: int) -> list[str]:
    """The workspace tables that hold rows but have no valid HNSW index."""
    query = sql.SQL(
        "SELECT r.tbl FROM {} r WHERE r.dim IS NOT NULL AND r.dim <= %s AND NOT EXISTS ("
        "SELECT 1 FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "WHERE c.relname = r.tbl || '_v' AND pg_table_is_visible(c.oid) AND i.indisvalid)"
    ).format(registry)
    cursor = await conn.execute(query, [max_dim])
    return [str(row[0]) for row in await cursor.fetchall()]


class HnswBuilder:
    """Runs at most one background build per table in this process (module docstring)."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Conn]],
        lock_key: Callable[[str], int],
        *,
        m: int,
        ef_construction: int,
        build_mb: int,
    ) -> None:
        self._connect = connect
        self._lock_key = lock_key
        self._m = m
        self._ef_construction = ef_construction
        self._build_mb = build_mb
        self._builds: OnePerKey[str] = OnePerKey("hnsw-build")

    def schedule(self, table: str) -> None:
        """Build `table`'s index in the background unless this process builds it already."""
        self._builds.start(table, lambda: self._build(table))

    async def wait(self) -> None:
        """Until every build this process runs has ended (tests, benchmarks)."""
        await self._builds.wait()

    async def close(self) -> None:
        await self._builds.close()

    async def _build(self, table: str) -> None:
        try:
            conn = await self._connect()
        except Exception as exc:  # noqa: BLE001 - the store is down: the next start finds the table again
            logger.warning("HNSW index of %s not built: no connection: %s", table, exc)
            return
        try:
            await self._build_on(conn, table)
        except psycopg.errors.QueryCanceled:
            logger.info("HNSW index build of %s cancelled (the table is being dropped)", table)
        except psycopg.errors.UndefinedTable:
            logger.info("HNSW index of %s not built: the table was dropped", table)
        except psycopg.Error as exc:
            logger.warning("HNSW index build of %s failed (searches stay exact): %s", table, str(exc).strip()[:300])
        finally:
            await conn.close()  # also ends the session's advisory lock

    async def _build_on(self, conn: Conn, table: str) -> None:
        taken = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", [self._lock_key(table)])).fetchone()
        if taken is None or not taken[0]:
            return  # another process builds it
        state = await (await conn.execute(_INDEX_STATE, [index_name(table)])).fetchone()
        if state is not None and state[0]:
            return  # built meanwhile
        if state is not None:  # an invalid index left by a build that died
            drop = sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(index_name(table)))
            await conn.execute(drop)
        await conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", [f"{self._build_mb}MB"])
        started = time.perf_counter()
        logger.info("building the HNSW index of %s in the background", table)
        statement = hnsw_statement(table, m=self._m, ef_construction=self._ef_construction, concurrently=True)
        await conn.execute(statement)
        logger.info("HNSW index of %s built in %.1f s", table, time.perf_counter() - started)
