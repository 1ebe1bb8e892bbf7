"""Which index terms are too common to search by, per workspace table, from PostgreSQL's own statistics.

The full-text side of a hybrid search (`pg/hybrid.py`) ranks every row matching any query term. A term found in a
large share of the rows makes that most of the table (a library whose memories all say "step" ranks all of them
for every query with "step"), and it tells rows apart no better than BM25 says: its inverse document frequency is
close to nothing. So the full-text candidates are found by the terms in at most `COMMON_TERM_SHARE` of the rows
only; the common ones still count when the candidates are ranked.

The shares are `pg_stats.most_common_elems` of the table's `lex` column, which `ANALYZE` fills (autovacuum runs it
as a table changes). A table searched before it was ever analysed, with at least `ANALYZE_MIN_ROWS` rows, is
analysed in the background, once at a time per table in this process; below that size ranking every match is
cheap. What a table's statistics say is kept for `TTL` seconds per process.
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


COMMON_TERM_SHARE = 0.1  # BM25's idf of such a term is at most ln(10): under a quarter of a term in one row of 10k
ANALYZE_MIN_ROWS = 2_000
TTL = 60.0
MAX_TABLES = 4_096  # cached entries; past it the cache starts over

# whether `lex` has statistics, its most common elements and their shares, and the rows the table holds as far as
# the server knows (`reltuples` is set by the index builds after a table's first rows, `n_live_tup` counts later ones)
_STATISTICS = (
    "SELECT s.attname IS NOT NULL, s.most_common_elems::text::text[], s.most_common_elem_freqs, "
    "greatest(c.reltuples, u.n_live_tup) FROM pg_class c JOIN pg_stat_user_tables u ON u.relid = c.oid "
    "LEFT JOIN pg_stats s ON s.schemaname = u.schemaname AND s.tablename = u.relname AND s.attname = 'lex' "
    "WHERE c.oid = to_regclass(%s)"
)


def common_of(elements: list[str] | None, shares: list[float] | None) -> frozenset[str]:
    """The elements whose share of rows exceeds `COMMON_TERM_SHARE` (the shares array ends with three figures of
    its own — minimum, maximum, nulls — which `zip` leaves out)."""
    if not elements or not shares:
        return frozenset()
    return frozenset(term for term, share in zip(elements, shares, strict=False) if share > COMMON_TERM_SHARE)


class CommonTerms:
    """The common terms of each table this process searches (module docstring)."""

    def __init__(self, connect: Callable[[], Awaitable[Conn]]) -> None:
        self._connect = connect
        self._known: dict[str, tuple[float, frozenset[str]]] = {}
        self._analyses: OnePerKey[str] = OnePerKey("analyse")

    async def of(self, conn: Conn, table_name: str) -> frozenset[str]:
        """The table's common terms, read with `conn` when not known (or known for longer than `TTL`)."""
        now = time.monotonic()
        known = self._known.get(table_name)
        if known is not None and known[0] > now:
            return known[1]
        table = sql.Identifier(table_name)
        name = table.as_string(conn)
        row = await (await conn.execute(_STATISTICS, [name])).fetchone()
        common: frozenset[str] = frozenset()
        if row is not None:
            analysed, elements, shares, rows = row
            common = common_of(elements, shares)
            if not analysed and int(rows or 0) >= ANALYZE_MIN_ROWS:
                self._analyses.start(table_name, lambda: self._analyse(table, table_name))
        if len(self._known) >= MAX_TABLES:
            self._known.clear()
        self._known[table_name] = (now + TTL, common)
        return common

    async def _analyse(self, table: sql.Identifier, name: str) -> None:
        try:
            conn = await self._connect()
        except Exception as exc:  # noqa: BLE001 - the store is down: a later search asks again
            logger.info("%s not analysed: no connection: %s", name, exc)
            return
        try:
            await conn.execute(sql.SQL("ANALYZE {} (lex)").format(table))  # the sample of `lex` only
            self._known.pop(name, None)  # the next search reads the new statistics
        except psycopg.Error as exc:
            logger.info("%s not analysed (its full-text side ranks every match): %s", name, str(exc).strip()[:300])
        finally:
            await conn.close()

    async def wait(self) -> None:
        """Until the analyses this process started have ended (tests, benchmarks)."""
        await self._analyses.wait()

    async def close(self) -> None:
        await self._analyses.close()
