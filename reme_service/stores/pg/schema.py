"""The pgvector store's schema: the registry of workspaces, the change log, and each workspace's table.

Layout, under `table_prefix` (default `reme_`):

* `<prefix>workspaces` (the registry): one row per workspace: its id as given, the table holding its nodes
  (`tbl`), the dimension of its vectors (`dim`, NULL while it holds none: an empty workspace takes the dimension
  of its first vectors; the table is made then) and their embedding space (`space`, JSON text, `stores/spaces.py`;
  the column is added to an older registry at start, and an older row takes the space of its next write); its
  change counter (`version`) and trimmed mark (`trimmed`), which the in-process copies catch up from
  (`stores/pg/replica.py`).
* `<prefix>deleted`: the ids deleted from each table, with the version that deleted them (for the copies).
* `<prefix>n<hash>_<generation>`: a workspace's nodes: `id` (primary key), `seq` (listing order: from the sequence
  `<prefix>seq` when an id is first written, kept when it is replaced), `content`, `metadata` (jsonb),
  `embedding vector(dim)` (unit vectors: inner product = cosine), `lex` (the full-text side of hybrid search) and
  `ver` (the version that wrote the row), with an HNSW index (`vector_ip_ops`) when `index: hnsw`.

Every statement here runs on the caller's connection, in the caller's transaction.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

import numpy as np
from psycopg import sql

from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.conn import Conn
from reme_service.stores.pg.index import cancel_builds, hnsw_statement
from reme_service.stores.pg.registry import Entry
from reme_service.stores.spaces import parse_space

logger = logging.getLogger(__name__)

MAX_HNSW_DIM = 2_000  # pgvector's limit for an HNSW index on `vector`


class PgSchema:
    """The names and the DDL of one store's tables, and the statements on its registry rows. `next_seq` gives the
    generation of a new workspace table (never reused: a table name names one table for its life)."""

    def __init__(self, params: PgvectorStoreParams, next_seq: Callable[[], int], lock_key: Callable[[str], int]):
        self.params = params
        self.prefix = params.table_prefix
        self._next_seq = next_seq
        self._lock_key = lock_key
        self.registry = self.name("workspaces")
        self.deleted = self.name("deleted")

    def name(self, suffix: str) -> sql.Identifier:
        return sql.Identifier(f"{self.prefix}{suffix}")

    async def prepare(self, conn: Conn) -> None:
        """Create what is missing (the extension, the registry, the sequence, the change log)."""
        async with conn.transaction():
            # one process at a time: concurrent CREATE ... IF NOT EXISTS can collide in the catalogs
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._lock_key("schema")])
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} "
                    "(workspace_id text PRIMARY KEY, tbl text NOT NULL UNIQUE, dim integer)"
                ).format(self.registry)
            )
            await conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS space text").format(self.registry))
            await conn.execute(sql.SQL("CREATE SEQUENCE IF NOT EXISTS {}").format(self.name("seq")))
            await self._prepare_change_log(conn)

    async def _prepare_change_log(self, conn: Conn) -> None:
        """What the in-process copies catch up from (`pg/replica.py`): the registry's change counter and trimmed
        mark, the deleted ids, and each row's version — added to the tables of an older store, whose rows count as
        written at version 0."""
        for column in ("version", "trimmed"):
            add = sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} bigint NOT NULL DEFAULT 0")
            await conn.execute(add.format(self.registry, sql.Identifier(column)))
        deleted = self.deleted
        await conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (tbl text NOT NULL, id text NOT NULL, ver bigint NOT NULL)").format(
                deleted
            )
        )
        await conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (tbl, ver)").format(self.name("deleted_v"), deleted)
        )
        older = sql.SQL(
            "SELECT tbl FROM {} WHERE to_regclass(quote_ident(tbl)) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
            "pg_attribute WHERE attrelid = to_regclass(quote_ident(tbl)) AND attname = 'ver' AND NOT attisdropped)"
        ).format(self.registry)
        for (table,) in await (await conn.execute(older)).fetchall():
            ident = sql.Identifier(table)
            await conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN ver bigint NOT NULL DEFAULT 0").format(ident))
            await conn.execute(sql.SQL("CREATE INDEX {} ON {} (ver)").format(sql.Identifier(f"{table}_c"), ident))

    # ----- registry rows -----

    async def entry(self, conn: Conn, workspace_id: str, *, for_update: bool = False) -> Entry | None:
        query = sql.SQL("SELECT tbl, dim, space FROM {} WHERE workspace_id = %s").format(self.registry)
        if for_update:
            query = sql.SQL("{} FOR UPDATE").format(query)
        row = await (await conn.execute(query, [workspace_id])).fetchone()
        return None if row is None else Entry(str(row[0]), row[1], parse_space(row[2]))

    async def workspace_ids(self, conn: Conn) -> list[str]:
        query = sql.SQL("SELECT workspace_id FROM {} ORDER BY workspace_id").format(self.registry)
        cursor = await conn.execute(query)
        return [str(row[0]) for row in await cursor.fetchall()]

    async def register(self, conn: Conn, workspace_id: str) -> tuple[Entry, int]:
        """The workspace's registry row (inserted when missing), locked for this transaction, and the version this
        transaction writes: the row's change counter, raised (`pg/replica.py`)."""
        statement = sql.SQL(
            "INSERT INTO {r} AS r (workspace_id, tbl) VALUES (%s, %s) ON CONFLICT (workspace_id) "
            "DO UPDATE SET version = r.version + 1 RETURNING tbl, dim, space, version"
        ).format(r=self.registry)
        row = await (await conn.execute(statement, [workspace_id, self.table_name(workspace_id)])).fetchone()
        assert row is not None
        return Entry(str(row[0]), row[1], parse_space(row[2])), int(row[3])

    async def set_space(self, conn: Conn, workspace_id: str, space: str) -> None:
        """Record the embedding space (JSON text) of the workspace's vectors."""
        query = sql.SQL("UPDATE {} SET space = %s WHERE workspace_id = %s").format(self.registry)
        await conn.execute(query, [space, workspace_id])

    async def set_dim(self, conn: Conn, workspace_id: str, dim: int | None, table: str | None = None) -> None:
        if table is None:
            await conn.execute(
                sql.SQL("UPDATE {} SET dim = %s WHERE workspace_id = %s").format(self.registry), [dim, workspace_id]
            )
        else:
            await conn.execute(
                sql.SQL("UPDATE {} SET dim = %s, tbl = %s WHERE workspace_id = %s").format(self.registry),
                [dim, table, workspace_id],
            )

    async def unregister(self, conn: Conn, workspace_id: str) -> None:
        await conn.execute(sql.SQL("DELETE FROM {} WHERE workspace_id = %s").format(self.registry), [workspace_id])

    # ----- workspace tables -----

    def table_name(self, workspace_id: str) -> str:
        digest = hashlib.sha256(workspace_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"{self.prefix}n{digest}_{np.base_repr(self._next_seq(), 36).lower()}"

    async def create_table(self, conn: Conn, table: str, dim: int) -> None:
        """A new workspace table, its primary key only: `index_table` adds the other indexes after the first rows
        (bulk builds are faster than growing an index row by row)."""
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {t} (id text PRIMARY KEY, seq bigint NOT NULL DEFAULT nextval({s}), "
                "content text NOT NULL, metadata jsonb NOT NULL, embedding vector({d}) NOT NULL, "
                "lex tsvector NOT NULL, ver bigint NOT NULL DEFAULT 0)"
            ).format(t=sql.Identifier(table), s=sql.Literal(f"{self.prefix}seq"), d=sql.Literal(int(dim)))
        )

    async def index_table(self, conn: Conn, table: str, dim: int, rows: int) -> bool:
        """The indexes of a table just filled with its first `rows` rows: the listing order, the rows' versions
        (`pg/replica.py`), the full-text side of hybrid search (`pg/hybrid.py`) and the HNSW index — built here, or,
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

    async def drop_table(self, conn: Conn, table: str) -> None:
        await cancel_builds(conn, table)  # else the DROP would wait for a graph about to be thrown away
        await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        await conn.execute(sql.SQL("DELETE FROM {} WHERE tbl = %s").format(self.deleted), [table])
