"""The pgvector store's reads of workspace tables: listing, fetching, summaries and the searches PostgreSQL runs.

Every read goes through `read_table`, which finds the workspace's table from the registry row this process keeps
(`stores/pg/registry.py`) or reads it, and reads it again when the table was dropped meanwhile.

Searches in PostgreSQL: `ORDER BY embedding <#> q LIMIT k` (negative inner product; score `max(cos, 0)`).
Unfiltered searches use the HNSW index (approximate; `ef_search`, raised to `top_k`, with pgvector's strict-order
iterative scan so `k` rows come back whenever the workspace has them); filtered searches and `index: exact` rank
every matching row (exact). Hybrid searches fuse the nearest vectors with the best full-text matches in one
statement (`stores/pg/hybrid.py`). Filters become SQL (`stores/pg/filter.py`), every value a bound parameter and
every name an `sql.Identifier`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import orjson
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from reme_service.errors import DimensionMismatchError
from reme_service.schema.vector_node import SearchHit, VectorNode, trusted_hit, trusted_node
from reme_service.stores.filters import NodePredicate
from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.conn import Conn
from reme_service.stores.pg.connections import PgConnections
from reme_service.stores.pg.filter import PgWhere, storable
from reme_service.stores.pg.hybrid import HybridQuery, any_of, hybrid_statement
from reme_service.stores.pg.registry import Entry, RegistryCache
from reme_service.stores.pg.schema import PgSchema
from reme_service.stores.pg.terms import CommonTerms
from reme_service.stores.spaces import EmbeddingSpace, check_space, recorded_space
from reme_service.stores.summary import WorkspaceSummary
from reme_service.stores.vectors import QueryVector, as_query

T = TypeVar("T")
MAX_EF_SEARCH = 1_000  # pgvector's limit of hnsw.ef_search

#: a workspace table's summary (`summarize`): per memory type (`str(metadata.get("memory_type", "task"))` in SQL:
#: a JSON null is Python's "None"), the count and the latest `time_modified` in code point order
_SUMMARY = sql.SQL(
    "SELECT CASE WHEN jsonb_typeof(metadata) = 'object' AND metadata ? 'memory_type' "
    "THEN coalesce(metadata ->> 'memory_type', 'None') ELSE 'task' END AS kind, count(*), "
    "max(CASE WHEN jsonb_typeof(metadata) = 'object' AND metadata ? 'time_modified' "
    "THEN coalesce(metadata ->> 'time_modified', 'None') END COLLATE \"C\") "
    "FROM {} GROUP BY 1"
)


def vector_text(vector: NDArray[np.float32]) -> str:
    """pgvector's text form of a vector (PostgreSQL reads it back to the same float32s)."""
    return orjson.dumps(vector, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _parse_vector(text: str) -> NDArray[np.float32]:
    return np.asarray(orjson.loads(text), dtype=np.float32)


def _unit(score: Any) -> float:
    """A score clipped to [0, 1]."""
    return min(max(float(score), 0.0), 1.0)


def _node(workspace_id: str, row: Sequence[Any], *, with_vector: bool) -> VectorNode:
    metadata = orjson.loads(row[2])
    vector = _parse_vector(row[3]) if with_vector else None
    return trusted_node(row[0], workspace_id, row[1], metadata if isinstance(metadata, dict) else {}, vector)


def _kept(hits: list[SearchHit], predicate: NodePredicate | None) -> list[SearchHit]:
    return hits if predicate is None else [hit for hit in hits if predicate(hit.node)]


class PgReads:
    """Reads of one store's workspace tables. `space()` is the store's embedding space (its embedder's, now)."""

    def __init__(
        self,
        params: PgvectorStoreParams,
        conns: PgConnections,
        schema: PgSchema,
        rows: RegistryCache,
        common_terms: CommonTerms,
        space: Callable[[], EmbeddingSpace],
    ) -> None:
        self.params = params
        self._conns = conns
        self._schema = schema
        self._rows = rows
        self._common_terms = common_terms
        self._space = space

    async def vector_entry(self, conn: Conn, workspace_id: str, *, search: bool) -> Entry | None:
        """The workspace's registry row when it holds vectors, else None; for a `search`, refused (409) when those
        vectors are of another embedding space."""
        entry = await self._schema.entry(conn, workspace_id)
        if entry is None or entry.dim is None:
            return None
        if search:
            check_space(workspace_id, recorded_space(entry.space, entry.dim), self._space(), "search")
        return entry

    async def holds_vectors(self, workspace_id: str) -> bool:
        """Whether the workspace holds vectors: yes when its registry row is kept (a stale one is found out by the
        search), else one registry read (the row is kept when it may be)."""
        if self._rows.get(workspace_id) is not None:
            return True
        # the space is checked here, before the query is embedded
        entry = await self._conns.run(
            "reading a workspace", lambda conn: self.vector_entry(conn, workspace_id, search=True)
        )
        if entry is None:
            return False
        self._rows.remember(workspace_id, entry)
        return True

    async def read_table(
        self,
        action: str,
        workspace_id: str,
        read: Callable[[Conn, str, int], Awaitable[T]],
        empty: T,
        *,
        search: bool = False,
    ) -> T:
        """`read(conn, table, dim)` on the workspace's table; `empty` for an unknown workspace or one with no
        vectors. The registry row kept by this process is used when there is one (`pg/registry.py`), else read (and
        kept when it may be). A table dropped since the row was read or kept (a replace, a delete, in any process)
        makes the row be read again; so does a dimension that does not fit a kept row. A `search` is refused (409)
        when the workspace's vectors are of another embedding space (a kept row is of this store's space)."""

        async def work(conn: Conn) -> T:
            entry = self._rows.get(workspace_id)
            kept = entry is not None
            for attempt in range(4):  # the kept row, then up to three reads of a registry changing meanwhile
                if entry is None:
                    entry = await self.vector_entry(conn, workspace_id, search=search)
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

        return await self._conns.run(action, work)

    async def scan(self, workspace_id: str, native: PgWhere, *, with_vectors: bool) -> list[VectorNode]:
        """The rows matching `native`, in listing order."""
        columns = sql.SQL("id, content, metadata::text{}").format(sql.SQL(", embedding::text" if with_vectors else ""))
        where = native.where or sql.SQL("TRUE")

        async def read(conn: Conn, table_name: str, dim: int) -> list[VectorNode]:
            table = sql.Identifier(table_name)
            query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY seq").format(columns, table, where)
            rows = await (await conn.execute(query, native.params)).fetchall()
            return [_node(workspace_id, row, with_vector=with_vectors) for row in rows]

        return await self.read_table("listing nodes", workspace_id, read, [])

    async def fetch(self, workspace_id: str, ids: list[str]) -> list[VectorNode]:
        """The rows of these ids that exist, with their vectors."""
        ids = [uid for uid in ids if storable(uid)]
        if not ids:
            return []

        async def read(conn: Conn, table_name: str, dim: int) -> list[VectorNode]:
            table = sql.Identifier(table_name)
            query = sql.SQL("SELECT id, content, metadata::text, embedding::text FROM {} WHERE id = ANY(%s)").format(
                table
            )
            rows = await (await conn.execute(query, [ids])).fetchall()
            return [_node(workspace_id, row, with_vector=True) for row in rows]

        return await self.read_table("reading nodes", workspace_id, read, [])

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        """One aggregate in PostgreSQL (`_SUMMARY`): the rows grouped by their type, each group's count and latest
        time; three rows come back whatever the workspace's size (a sequential scan of the table, read where it
        lies: at 1M memories ~1 s of the server's time and nothing of this process's memory). It answers as the
        default for metadata whose `memory_type` and `time_modified` are strings (all the service writes), null or
        missing; times compare in the "C" collation, code point order like Python's."""

        async def read(conn: Conn, table_name: str, dim: int) -> WorkspaceSummary:
            query = _SUMMARY.format(sql.Identifier(table_name))
            rows = await (await conn.execute(query)).fetchall()
            counts = {str(kind): int(count) for kind, count, _ in rows}
            latest = max((str(modified) for _, _, modified in rows if modified is not None), default="")
            return WorkspaceSummary(sum(counts.values()), counts, latest or None)

        return await self.read_table("summarizing a workspace", workspace_id, read, WorkspaceSummary())

    # ----- searches -----

    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        top_k: int,
        native: PgWhere,
        predicate: NodePredicate | None,
        *,
        impossible: bool,
        exact: bool,
    ) -> list[SearchHit]:
        """The dimension check and the search on one connection; hits kept only when they pass `predicate`."""

        async def read(conn: Conn, table_name: str, dim: int) -> list[SearchHit]:
            table = sql.Identifier(table_name)
            query = as_query(vector, workspace_id, dim)
            if impossible:
                return []
            hits = await self.search_rows(conn, workspace_id, table, query, top_k, native, exact=exact)
            return _kept(hits, predicate)

        return await self.read_table("searching", workspace_id, read, [], search=True)

    async def search_native(
        self, workspace_id: str, query: NDArray[np.float32], top_k: int, native: PgWhere
    ) -> list[SearchHit]:
        async def read(conn: Conn, table_name: str, dim: int) -> list[SearchHit]:
            table = sql.Identifier(table_name)
            return await self.search_rows(conn, workspace_id, table, query, top_k, native)

        return await self.read_table("searching", workspace_id, read, [], search=True)

    async def search_rows(
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
        params = {**native.params, "q": vector_text(query)}
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
        return [trusted_hit(_node(workspace_id, row, with_vector=False), _unit(-float(row[3]))) for row in rows]

    async def search_hybrid(
        self,
        workspace_id: str,
        vector: QueryVector,
        terms: list[str],
        native: PgWhere,
        predicate: NodePredicate | None,
        *,
        top_k: int,
        candidates: int,
        weight: float,
    ) -> list[SearchHit]:
        """Nearest vectors and best full-text matches of `terms` (less the table's common ones), fused in one
        statement (`pg/hybrid.py`)."""

        async def read(conn: Conn, table_name: str, dim: int) -> list[SearchHit]:
            common = await self._common_terms.of(conn, table_name)
            searched = [term for term in terms if term not in common]
            spec = HybridQuery(
                vector=vector_text(as_query(vector, workspace_id, dim)),
                ranked=any_of(terms),
                searched=any_of(searched),
                candidates=candidates,
                top_k=top_k,
                weight=weight,
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
            hits = [trusted_hit(_node(workspace_id, row, with_vector=False), _unit(np.float32(row[3]))) for row in rows]
            return _kept(hits, predicate)

        return await self.read_table("searching", workspace_id, read, [], search=True)
