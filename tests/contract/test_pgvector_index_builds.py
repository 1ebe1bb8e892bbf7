"""pgvector: a big load is committed without its HNSW index, which is built in the background (`stores/pg/index.py`).

Searches are exact until the index is valid; a store that starts builds the indexes a stopped process left unbuilt
(none, or an INVALID one from a build that died); dropping a table cancels a build of it in any process, so the drop
never waits on the build. A build is stalled in these tests by a transaction that holds an old snapshot:
`CREATE INDEX CONCURRENTLY` waits for every such transaction before it finishes.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg import sql

from reme_service.schema.vector_node import VectorNode
from reme_service.stores.pg.store import PgvectorVectorStore
from reme_service.testing.contract.support import WS, ids, make_node, unit_vector
from tests.conditions import until
from tests.contract.test_pgvector_store import make_store
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

pytestmark = pytest.mark.anyio

ROWS = 40
BACKGROUND_ABOVE = 10  # index_background_rows of these stores: a load of ROWS builds in the background


def nodes(count: int = ROWS, seed: int = 0) -> list[VectorNode]:
    return [make_node(f"n{i}", vector=unit_vector(seed + i)) for i in range(count)]


def table_of(dsn: str, store: PgvectorVectorStore, workspace: str) -> str:
    registry = sql.Identifier(f"{store.prefix}workspaces")
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT tbl FROM {} WHERE workspace_id = %s").format(registry)
        row = conn.execute(query, [workspace]).fetchone()
    assert row is not None
    return str(row[0])


def index_state(dsn: str, table: str) -> bool | None:
    """None: no HNSW index; True: valid; False: invalid (a build that died)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
            [f"{table}_v"],
        ).fetchone()
    return None if row is None else bool(row[0])


def building(dsn: str, table: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_progress_create_index WHERE relid = to_regclass(%s)", [table]
        ).fetchone()
    return row is not None and row[0] > 0


@pytest.fixture
def old_snapshot(pg_dsn: str) -> Iterator[psycopg.Connection]:  # noqa: F811
    """A transaction holding a snapshot: a concurrent index build cannot finish while it is open."""
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        yield conn
        conn.rollback()


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PgvectorVectorStore]:  # noqa: F811
    store = make_store(pg_dsn, index_background_rows=BACKGROUND_ABOVE, replica_rows=0)  # searched in PostgreSQL
    await store.start()
    yield store
    for workspace in await store.list_workspaces():
        await store.delete_workspace(workspace)
    await store.close()


async def test_a_big_load_answers_at_once_and_is_indexed_in_the_background(
    store: PgvectorVectorStore,
    pg_dsn: str,  # noqa: F811
    old_snapshot: psycopg.Connection,
) -> None:
    await store.replace_workspace(WS, nodes())  # returns although the index build cannot finish yet
    table = table_of(pg_dsn, store, WS)
    await until(lambda: building(pg_dsn, table))
    hits = await store.search_vector(WS, unit_vector(7), top_k=3)  # meanwhile: exact
    assert hits[0].node.unique_id == "n7" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    await store.upsert(WS, [make_node("late", vector=unit_vector(1000))])  # writes go on during the build
    old_snapshot.rollback()
    await store.wait_for_indexes()
    assert index_state(pg_dsn, table) is True
    assert (await store.search_vector(WS, unit_vector(1000), top_k=1))[0].node.unique_id == "late"
    # a small first write builds its index in the same transaction
    await store.upsert("small", nodes(BACKGROUND_ABOVE))
    assert index_state(pg_dsn, table_of(pg_dsn, store, "small")) is True


async def test_dropping_a_table_cancels_its_build(
    store: PgvectorVectorStore,
    pg_dsn: str,  # noqa: F811
    old_snapshot: psycopg.Connection,
) -> None:
    await store.upsert(WS, nodes())
    table = table_of(pg_dsn, store, WS)
    await until(lambda: building(pg_dsn, table))
    other = make_store(pg_dsn, table_prefix=store.prefix, lock_wait=5)  # another service process
    try:
        # without the cancel the DROP would wait for the build, which waits for `old_snapshot`: never done
        await other.replace_workspace(WS, nodes(3, seed=50))  # (else a 503 after lock_wait)
        assert ids(await other.list_nodes(WS)) == ["n0", "n1", "n2"]
        await other.delete_workspace(WS)
    finally:
        await other.close()
    await store.wait_for_indexes()  # the cancelled build ended quietly
    assert not building(pg_dsn, table)


async def test_a_store_that_starts_builds_the_indexes_left_unbuilt(
    store: PgvectorVectorStore,
    pg_dsn: str,  # noqa: F811
    old_snapshot: psycopg.Connection,
) -> None:
    await store.replace_workspace(WS, nodes())
    table = table_of(pg_dsn, store, WS)
    await until(lambda: building(pg_dsn, table))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the build dies (as with its process): INVALID index
        conn.execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_progress_create_index WHERE relid = to_regclass(%s)", [table]
        )
    await store.wait_for_indexes()
    assert index_state(pg_dsn, table) is False
    old_snapshot.rollback()
    restarted = make_store(pg_dsn, table_prefix=store.prefix, index_background_rows=BACKGROUND_ABOVE, replica_rows=0)
    await restarted.start()
    try:
        await restarted.list_workspaces()  # the first use connects, and finds the table
        await restarted.wait_for_indexes()
        assert index_state(pg_dsn, table) is True
        hits = await restarted.search_vector(WS, unit_vector(3), top_k=1)
        assert hits[0].node.unique_id == "n3"
    finally:
        await restarted.close()


async def test_no_background_build_with_exact_search(pg_dsn: str) -> None:  # noqa: F811
    store = make_store(pg_dsn, index="exact", index_background_rows=0, table_prefix=f"t{secrets.token_hex(4)}_")
    await store.start()
    try:
        await store.replace_workspace(WS, nodes())
        await store.wait_for_indexes()
        assert index_state(pg_dsn, table_of(pg_dsn, store, WS)) is None
        assert (await store.search_vector(WS, unit_vector(5), top_k=1))[0].node.unique_id == "n5"
    finally:
        await store.delete_workspace(WS)
        await store.close()
