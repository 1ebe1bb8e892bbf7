"""pgvector hybrid search (`stores/pg/hybrid.py`, `stores/pg/terms.py`): the fusion computed in SQL ranks and scores
exactly as `lexical.fuse` does in numpy, and terms in more than a tenth of a table's rows — read from PostgreSQL's
statistics, which a search gathers for a big table never analysed — find no full-text candidates but still rank.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import psycopg
import pytest
from psycopg import sql

from reme_service.stores.lexical import fuse
from reme_service.stores.pg.hybrid import any_of, query_terms
from reme_service.stores.pg.store import PgvectorVectorStore
from reme_service.stores.pg.terms import ANALYZE_MIN_ROWS, COMMON_TERM_SHARE, common_of
from reme_service.testing.contract.support import make_node
from tests.contract.test_pgvector_index_builds import table_of
from tests.contract.test_pgvector_store import _drop_all, make_store
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

pytestmark = pytest.mark.anyio

WORDS = ["apple", "river", "stone", "cloud", "maple", "ember", "violet", "harbor", "candle", "meadow"]
# each in 1/12 of the rows of the big table
FILLER = ["amber", "basil", "cedar", "delta", "fjord", "grove", "heron", "iris", "juniper", "kelp", "lotus", "moss"]


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PgvectorVectorStore]:  # noqa: F811
    """A store that searches in PostgreSQL (no in-process copies: `pg/replica.py`)."""
    store = make_store(pg_dsn, replica_rows=0)
    await store.start()
    yield store
    await _drop_all(store)
    await store.close()


def text_of(i: int) -> str:
    """Two or three words of WORDS; several rows say the same (i and i + 30 among them), so they tie."""
    j = i % 30
    return " ".join(WORDS[k % len(WORDS)] for k in (j, j * 3 + 1, j * 7 + 2)[: 2 + j % 2])


async def test_fused_scores_and_order_equal_numpy(store: PgvectorVectorStore, pg_dsn: str) -> None:  # noqa: F811
    """With every row a candidate (fewer rows than candidates), the SQL fusion gives the scores numpy gives from the
    same cosines and ranks, to the bit, and breaks ties (equal texts) by listing order."""
    await store.upsert("ws", [make_node(f"n{i:02d}", text_of(i)) for i in range(45)])
    query = "apple stone near the harbor"
    hits = await store.search_hybrid("ws", query, top_k=12, lexical_weight=0.4)

    vector = (await store.embedder.embed([query]))[0]
    table = sql.Identifier(table_of(pg_dsn, store, "ws"))
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        statement = sql.SQL(
            "SELECT id, -(embedding <#> %s::vector), ts_rank(lex, to_tsquery('simple', %s)), seq FROM {} "
        ).format(table)
        text = "[" + ",".join(repr(float(x)) for x in vector) + "]"
        rows = await (await conn.execute(statement, [text, any_of(query_terms(query))])).fetchall()
    cosine = np.array([float(row[1]) for row in rows], np.float32)
    rank = np.array([float(row[2]) for row in rows], np.float32)
    scores = fuse(cosine, rank, 0.4)
    expected = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), int(rows[i][3])))[:12]

    assert [hit.node.unique_id for hit in hits] == [rows[i][0] for i in expected]
    assert [hit.score for hit in hits] == [min(max(float(scores[i]), 0.0), 1.0) for i in expected]
    tied = [hit.node.unique_id for hit in hits if hit.node.content == hits[0].node.content]
    assert len(tied) >= 2 and tied == sorted(tied)  # listing order


def test_common_of_reads_the_statistics_arrays() -> None:
    shares = [0.5, COMMON_TERM_SHARE, 0.09, 1.0, 0.02, 1.0, 0.0]  # the last three: min, max, nulls
    assert common_of(["alpha", "beta", "gamma", "delta"], shares) == {"alpha", "delta"}
    assert common_of(None, None) == frozenset()


async def test_common_terms_come_from_an_analysis_the_search_starts(
    store: PgvectorVectorStore,  # noqa: F811
    pg_dsn: str,  # noqa: F811
) -> None:
    """A big table never analysed: the first hybrid search analyses it in the background; then the terms in more
    than a tenth of its rows are known, a query of those alone still answers (by vector candidates, ranked with
    them), and a distinctive term still brings its row first."""
    rows = ANALYZE_MIN_ROWS + 100
    nodes = [
        make_node(f"r{i}", f"step {'river' if i % 4 == 0 else 'stone'} {FILLER[i % 12]} item{i}") for i in range(rows)
    ]
    await store.upsert("ws", nodes)
    table = table_of(pg_dsn, store, "ws")
    first = await store.search_hybrid("ws", "item17 step", top_k=3)
    assert first[0].node.unique_id == "r17"
    await store.wait_for_indexes()  # the analysis it started

    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        common = await store._common_terms.of(conn, table)
        analysed = await (
            await conn.execute("SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = %s", [table])
        ).fetchone()
    assert analysed == (True,)
    assert common == {"step", "river", "stone"}  # in 100 %, 25 % and 75 % of the rows; not the fillers (8 %)

    hits = await store.search_hybrid("ws", "item1236 step river", top_k=3)
    assert hits[0].node.unique_id == "r1236"
    only_common = await store.search_hybrid("ws", "step river", top_k=5, lexical_weight=0.5)
    assert len(only_common) == 5 and all("river" in hit.node.content for hit in only_common)
