"""The pgvector store's kept registry rows (`stores/pg/registry.py`) and its unchecked pooled connections.

Two store instances with the same table prefix stand for two service processes: each has its own pool and its own
kept rows. What one does to a workspace (replace, delete, recreate, empty, another dimension) must show in the
other's next search — no stale table, no error — and a search with a kept row must not read the registry at all.
A server restarted under a store's pooled connections costs no failed request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

from reme_service.errors import DimensionMismatchError, StoreError
from reme_service.schema.vector_node import SearchHit
from reme_service.stores.pg.store import PgvectorVectorStore
from reme_service.testing.contract.support import WS, make_node, unit_vector
from tests.contract.test_pgvector_store import _drop_all, make_store
from tests.fakes.chroma_server import free_port
from tests.fakes.pg_server import pg_dsn, running_postgres  # noqa: F401 - fixture used by name

pytestmark = pytest.mark.anyio

Search = Callable[[PgvectorVectorStore, str], Awaitable[list[SearchHit]]]


async def _plain(store: PgvectorVectorStore, query: str) -> list[SearchHit]:
    return await store.search(WS, query, top_k=5)


async def _hybrid(store: PgvectorVectorStore, query: str) -> list[SearchHit]:
    return await store.search_hybrid(WS, query, top_k=5)


@pytest.fixture(params=["postgres", "copied"])
async def pair(
    request: pytest.FixtureRequest,
    pg_dsn: str,  # noqa: F811
) -> AsyncIterator[tuple[PgvectorVectorStore, PgvectorVectorStore]]:
    """A writer and a reader sharing the database and the prefix, as two processes would; the reader searches in
    PostgreSQL, or in its copies (`pg/replica.py`)."""
    writer = make_store(pg_dsn, lock_wait=1)
    rows = 0 if request.param == "postgres" else 100
    reader = make_store(pg_dsn, table_prefix=writer.prefix, lock_wait=1, replica_rows=rows)
    await writer.start()
    await reader.start()
    yield writer, reader
    await _drop_all(writer)
    await reader.close()
    await writer.close()


def _ids(hits: list[SearchHit]) -> set[str]:
    return {hit.node.unique_id for hit in hits}


@pytest.mark.parametrize("search", [_plain, _hybrid], ids=["search", "hybrid"])
async def test_another_process_changing_a_workspace_shows_in_the_next_search(
    pair: tuple[PgvectorVectorStore, PgvectorVectorStore], search: Search
) -> None:
    writer, reader = pair
    await writer.upsert(WS, [make_node("first", "deploy the service with docker compose")])
    assert _ids(await search(reader, "deploy docker")) == {"first"}  # the reader keeps the row now

    await writer.replace_workspace(WS, [make_node("second", "deploy the service on kubernetes")])
    assert _ids(await search(reader, "deploy docker")) == {"second"}

    await writer.delete_workspace(WS)
    assert await search(reader, "deploy docker") == []

    await writer.upsert(WS, [make_node("third", "deploy the service with ansible")])  # recreated
    assert _ids(await search(reader, "deploy docker")) == {"third"}

    assert await writer.delete_ids(WS, ["third"]) == 1  # emptied: its table is dropped
    assert await search(reader, "deploy docker") == []

    await writer.upsert(WS, [make_node("fourth", "deploy the service by hand")])
    assert _ids(await search(reader, "deploy docker")) == {"fourth"}
    await writer.replace_workspace(WS, [make_node("narrow", "deploy", vector=unit_vector(2, dim=16))])
    with pytest.raises(DimensionMismatchError, match="dimension 16"):  # the current row's dimension, not the kept
        await search(reader, "deploy docker")
    hits = await reader.search_vector(WS, unit_vector(2, dim=16), top_k=5)
    assert _ids(hits) == {"narrow"}


@pytest.mark.parametrize("pair", ["postgres"], indirect=True)
async def test_a_kept_row_spares_the_registry_read(
    pair: tuple[PgvectorVectorStore, PgvectorVectorStore],
    pg_dsn: str,  # noqa: F811
) -> None:
    """(Searches of a copy read the registry row each time: its version says whether the copy is current.)"""
    writer, reader = pair
    await writer.upsert(WS, [make_node("a", "retry failed requests with backoff"), make_node("b", "parse yaml")])
    assert _ids(await reader.search_hybrid(WS, "retry requests", top_k=1)) == {"a"}
    fresh = make_store(pg_dsn, table_prefix=writer.prefix, lock_wait=0.5, replica_rows=0)  # keeps nothing yet
    await fresh.start()
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn, conn.transaction():
            registry = sql.Identifier(f"{writer.prefix}workspaces")
            await conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(registry))
            # a search that read the registry would wait for the lock: the fresh store's does, and gives up
            with pytest.raises(StoreError) as caught:
                await fresh.search_hybrid(WS, "retry requests", top_k=1)
            assert caught.value.status == 503
            # the reader's kept row needs no registry read: both kinds of search answer under the lock
            assert _ids(await reader.search_hybrid(WS, "retry requests", top_k=1)) == {"a"}
            assert _ids(await reader.search(WS, "parse yaml", top_k=1)) == {"b"}
    finally:
        await fresh.close()


async def test_a_restarted_server_costs_no_failed_request(tmp_path: Path) -> None:
    """Pooled connections are used unchecked: one the restart broke is replaced and the statement runs again (a
    read), or the write runs again (its transaction never began)."""
    port = free_port()
    with running_postgres(tmp_path / "pg", port) as dsn:
        store = make_store(dsn)
        await store.start()
        try:
            await store.upsert(WS, [make_node("a", "deploy the service with docker"), make_node("b", "deploy by hand")])
            assert _ids(await store.search_hybrid(WS, "deploy docker", top_k=5)) == {"a", "b"}
        except BaseException:
            await store.close()
            raise
    try:
        with running_postgres(tmp_path / "pg", port):  # restarted: the pool's connection is dead
            assert await store.delete_ids(WS, ["b"]) == 1  # a write first (its transaction is the first statement)
        with running_postgres(tmp_path / "pg", port):  # and again, now for a read first
            assert _ids(await store.search_hybrid(WS, "deploy docker", top_k=5)) == {"a"}
            assert (await store.health())["status"] == "ok"
            (node,) = await store.get(WS, ["a", "b"])
            assert node.unique_id == "a" and node.vector is not None and np.isfinite(node.vector).all()
    finally:
        await store.close()
