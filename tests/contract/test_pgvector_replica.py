"""The pgvector store's in-process copies (`stores/pg/replica.py`): a process searching its copy sees every write
another process committed before the search began — inserts, replaced rows, deletions, an id deleted and written
again, a replaced or emptied workspace — by catching up from the change counter (not by loading the copy again),
reloads when the deletions it would need were trimmed, leaves a workspace over `replica_rows` to PostgreSQL, keeps
its copies within `replica_mb`, and works on the tables of an older store (no row versions yet).

Two store instances with the same table prefix stand for two service processes. An exact search in PostgreSQL
(`replica_rows: 0, index: exact`) is the oracle for the copies' vector searches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from reme_service.schema.vector_node import SearchHit
from reme_service.stores.inproc.resident import footprint
from reme_service.stores.inproc.workspace import WorkspaceState
from reme_service.stores.pg import store as pgvector_module
from reme_service.stores.pg.store import PgvectorVectorStore
from reme_service.testing.contract.support import WS, make_node, unit_vector
from tests.contract.test_pgvector_index_builds import table_of
from tests.contract.test_pgvector_store import _drop_all, make_store
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

pytestmark = pytest.mark.anyio

PROBES = [unit_vector(1000 + i) for i in range(12)]


class Trio:
    """A writer, a reader that searches its copies, and an oracle that searches PostgreSQL exactly."""

    def __init__(self, writer: PgvectorVectorStore, reader: PgvectorVectorStore, oracle: PgvectorVectorStore) -> None:
        self.writer, self.reader, self.oracle = writer, reader, oracle

    def copy(self, workspace_id: str = WS) -> WorkspaceState | None:
        copy = self.reader._replicas._copies.get(workspace_id)
        return None if copy is None else copy.state

    async def agree(self, workspace_id: str = WS, **search: Any) -> list[list[SearchHit]]:
        """The reader's searches equal the oracle's (ids in order, scores to float32 rounding)."""
        answers = []
        for probe in PROBES:
            mine = await self.reader.search_vector(workspace_id, probe, top_k=6, **search)
            truth = await self.oracle.search_vector(workspace_id, probe, top_k=6, **search)
            assert [hit.node.unique_id for hit in mine] == [hit.node.unique_id for hit in truth]
            assert [hit.node.content for hit in mine] == [hit.node.content for hit in truth]
            assert [hit.node.metadata for hit in mine] == [hit.node.metadata for hit in truth]
            np.testing.assert_allclose([hit.score for hit in mine], [hit.score for hit in truth], atol=1e-5)
            answers.append(mine)
        return answers


@pytest.fixture
async def trio(pg_dsn: str) -> AsyncIterator[Trio]:  # noqa: F811
    writer = make_store(pg_dsn, replica_rows=0)
    reader = make_store(pg_dsn, table_prefix=writer.prefix)
    oracle = make_store(pg_dsn, table_prefix=writer.prefix, replica_rows=0, index="exact")
    for store in (writer, reader, oracle):
        await store.start()
    yield Trio(writer, reader, oracle)
    await _drop_all(writer)
    for store in (reader, oracle, writer):
        await store.close()


def _nodes(start: int, stop: int, **metadata: Any) -> list[Any]:
    return [make_node(f"n{i:03d}", f"note {i}", vector=unit_vector(i), **metadata) for i in range(start, stop)]


async def test_a_copy_catches_up_with_every_kind_of_write(trio: Trio) -> None:
    await trio.writer.upsert(WS, _nodes(0, 40, kind="a"))
    await trio.agree()
    copy = trio.copy()
    assert copy is not None and copy.size == 40

    # the probes' best rows, so every change below moves the answers
    best = [hit.node.unique_id for hit in (await trio.oracle.search_vector(WS, PROBES[0], top_k=3))]
    await trio.writer.upsert(WS, _nodes(40, 60, kind="b"))  # new rows
    await trio.writer.upsert(WS, [make_node(best[0], "moved away", vector=unit_vector(9_999), kind="c")])  # replaced
    other = next(f"n{i:03d}" for i in range(40) if f"n{i:03d}" not in best)
    assert await trio.writer.delete_ids(WS, [best[1], other, "absent"]) == 2  # deleted
    await trio.writer.delete_ids(WS, [best[2]])
    await trio.writer.upsert(WS, [make_node(best[2], "back again", vector=PROBES[0], kind="d")])  # and written again
    answers = await trio.agree()
    assert answers[0][0].node.unique_id == best[2] and answers[0][0].node.content == "back again"
    await trio.agree(filter={"metadata.kind": "b"})
    assert trio.copy() is copy  # caught up, not loaded again
    assert copy.size == 40 + 20 - 2


async def test_a_replaced_emptied_or_deleted_workspace_is_copied_again(trio: Trio) -> None:
    await trio.writer.upsert(WS, _nodes(0, 10))
    await trio.agree()
    first = trio.copy()

    await trio.writer.replace_workspace(WS, _nodes(20, 25))
    await trio.agree()
    assert trio.copy() is not first and trio.copy() is not None

    assert await trio.writer.delete_ids(WS, [f"n{i:03d}" for i in range(20, 25)]) == 5  # emptied: table dropped
    assert await trio.reader.search_vector(WS, PROBES[0], top_k=3) == []
    await trio.writer.upsert(WS, _nodes(30, 33))
    await trio.agree()

    await trio.writer.delete_workspace(WS)
    assert await trio.reader.search_vector(WS, PROBES[0], top_k=3) == []
    assert trio.copy() is None


async def test_deletions_older_than_the_kept_versions_make_the_copy_load_again(
    trio: Trio, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgvector_module, "KEEP_VERSIONS", 2)
    await trio.writer.upsert(WS, _nodes(0, 10))
    await trio.agree()
    stale = trio.copy()
    for uid in ("n001", "n002", "n003"):  # the first deletion's record is trimmed by the third
        await trio.writer.delete_ids(WS, [uid])
    await trio.agree()
    assert trio.copy() is not stale
    copy = trio.copy()
    assert copy is not None and sorted(copy.rows) == [f"n{i:03d}" for i in range(10) if i not in (1, 2, 3)]


async def test_a_workspace_over_replica_rows_is_searched_in_postgres(pg_dsn: str) -> None:  # noqa: F811
    writer = make_store(pg_dsn, replica_rows=0)
    reader = make_store(pg_dsn, table_prefix=writer.prefix, replica_rows=5)
    oracle = make_store(pg_dsn, table_prefix=writer.prefix, replica_rows=0, index="exact")
    trio = Trio(writer, reader, oracle)
    for store in (writer, reader, oracle):
        await store.start()
    try:
        await writer.upsert(WS, _nodes(0, 6))
        hits = await reader.search_vector(WS, PROBES[0], top_k=3, exact=True)
        assert [h.node.unique_id for h in hits] == [h.node.unique_id for h in await oracle.search_vector(
            WS, PROBES[0], top_k=3)]  # fmt: skip
        assert trio.copy() is None and len(reader._replicas) == 0
        await writer.replace_workspace(WS, _nodes(10, 14))  # another table, small enough
        await trio.agree()
        assert trio.copy() is not None
        await writer.upsert(WS, _nodes(20, 22))  # grown past the limit by writes: PostgreSQL searches it again
        await trio.agree(exact=True)
        assert trio.copy() is None and len(reader._replicas) == 0
    finally:
        await _drop_all(writer)
        for store in (reader, oracle, writer):
            await store.close()


async def test_copies_stay_within_their_budget(trio: Trio) -> None:
    await trio.writer.upsert("one", _nodes(0, 30))
    await trio.writer.upsert("two", _nodes(30, 60))
    await trio.agree("one")
    one = trio.copy("one")
    assert one is not None
    trio.reader._replicas._resident.budget_bytes = trio.reader._replicas._resident.total  # room for this copy only
    await trio.agree("two")
    assert trio.copy("one") is None and trio.copy("two") is not None  # the least recently searched went
    await trio.agree("one")
    assert trio.copy("two") is None
    copies = (await trio.reader.health())["copies"]
    assert copies == {"workspaces": 1, "bytes": trio.reader._replicas._resident.total}  # what /health shows
    assert copies["bytes"] > 30 * 64 * 4  # the copy of "one": 30 vectors of 64 floats and more


async def test_hybrid_search_of_a_copy_ranks_as_the_in_process_stores(trio: Trio) -> None:
    """Cosine fused with BM25 over the copy (stemmed words: "painting" finds "paints")."""
    await trio.writer.upsert(
        WS,
        [
            make_node("p", "she paints landscapes on weekends", vector=unit_vector(1)),
            make_node("q", "he fixes bicycles", vector=unit_vector(2)),
            make_node("r", "they bake bread", vector=unit_vector(3)),
        ],
    )
    await trio.reader.search_vector(WS, unit_vector(1), top_k=1)  # the copy, without a BM25 index yet
    vector_only = trio.reader._replicas._resident.total
    hits = await trio.reader.search_hybrid(WS, "painting", top_k=3, lexical_weight=0.9)
    copy = trio.copy()
    assert hits[0].node.unique_id == "p" and copy is not None and copy.lexical is not None
    # the BM25 index this search built counts in the copies' budget at once (not at the next search)
    assert trio.reader._replicas._resident.total == footprint(copy) > vector_only


async def test_the_tables_of_an_older_store_are_given_row_versions(
    trio: Trio,
    pg_dsn: str,  # noqa: F811
) -> None:
    await trio.writer.upsert(WS, _nodes(0, 8))
    table = sql.Identifier(table_of(pg_dsn, trio.writer, WS))
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:  # as an older store left it
        await conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN ver").format(table))
        for column in ("version", "trimmed"):
            registry = sql.Identifier(f"{trio.writer.prefix}workspaces")
            await conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(registry, sql.Identifier(column)))
    upgraded = make_store(pg_dsn, table_prefix=trio.writer.prefix)
    await upgraded.start()
    try:
        await upgraded.upsert(WS, _nodes(8, 10))
        trio.reader = upgraded
        await trio.agree()
        await upgraded.delete_ids(WS, ["n000"])
        await trio.agree()
    finally:
        await upgraded.close()


async def test_a_catch_up_is_one_exclusive_step(trio: Trio, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deletions and writes since the copy's version are applied together, under the gate's exclusive side once:
    no search can run between them (and find an id deleted and written again missing)."""
    await trio.writer.upsert(WS, _nodes(0, 10))
    await trio.agree()
    copy = trio.copy()
    assert copy is not None
    await trio.writer.delete_ids(WS, ["n001", "n002"])
    await trio.writer.upsert(WS, [make_node("n001", "back again", vector=unit_vector(1)), *_nodes(10, 12)])
    steps: list[object] = []
    gate = type(copy.gate)
    exclusive = gate.run_exclusive

    async def counted(self: Any, fn: Any, *, inline: bool) -> Any:
        steps.append(self)
        return await exclusive(self, fn, inline=inline)

    monkeypatch.setattr(gate, "run_exclusive", counted)
    await trio.agree()
    assert steps == [copy.gate] and trio.copy() is copy
    assert sorted(copy.rows) == sorted(f"n{i:03d}" for i in range(12) if i != 2)


async def test_concurrent_searches_share_their_registry_reads(trio: Trio, monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches that ask at once read their workspaces' registry rows in one statement (`pg/heads.py`), and each
    still finds a write finished before it asked."""
    names = [f"w{i}" for i in range(8)]
    for name in names:
        await trio.writer.upsert(name, _nodes(0, 5))
    statements: list[int] = []
    heads = trio.reader._replicas.heads

    async def counted(conn: Any, workspace_ids: list[str]) -> Any:
        statements.append(len(workspace_ids))
        return await heads(conn, workspace_ids)

    monkeypatch.setattr(trio.reader._replicas, "heads", counted)
    for round_ in range(3):
        await trio.writer.upsert(names[round_], [make_node("new", "new", vector=unit_vector(500 + round_))])
        found = await asyncio.gather(
            *(trio.reader.search_vector(name, unit_vector(500 + round_), top_k=1) for name in names)
        )
        assert found[round_][0].node.unique_id == "new"
    assert sum(statements) == 3 * len(names) and max(statements) > 1 and len(statements) < 3 * len(names)
