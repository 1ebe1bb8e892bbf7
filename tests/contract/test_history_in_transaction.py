"""With a pgvector store and the state in its database, a write's history entries and a draft of its request's
audit record are committed in the memories' own transaction (`stores/joined.py`, `storage/audit.py`): never one
without the others.

Each case is an app in process on the tests' real PostgreSQL, with tables of its own (random prefixes). A failure
is forced with triggers PostgreSQL itself runs: one refusing a history row (the memories must roll back), one
refusing the memory at commit, after the history rows were inserted (the history must roll back).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from reme_service.app import ReMeApp
from reme_service.auth.caller import TRUSTED
from reme_service.schema.vector_node import VectorNode
from reme_service.state.pg.records import read_audit
from reme_service.storage.guarded import GuardedStore
from reme_service.storage.writer import Writer
from reme_service.stores.joined import same_database
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

WS = "ws"


def memory(memory_id: str, content: str) -> dict[str, Any]:
    return {"memory_id": memory_id, "when_to_use": f"when {memory_id} is needed", "content": content}


@contextlib.asynccontextmanager
async def running_app(tmp_path: Path, pg_dsn: str, *overrides: str) -> AsyncIterator[ReMeApp]:  # noqa: F811
    """A started app on a pgvector store with tables of its own, and its state in PostgreSQL (the store's database
    unless `overrides` name another)."""
    prefix = f"j{secrets.token_hex(4)}_"
    built = ReMeApp(
        f"data_dir={tmp_path / 'data'}",
        "embedding_model.default.backend=hash",
        "vector_store.default.backend=pgvector",
        f"vector_store.default.params.dsn={pg_dsn}",
        f"vector_store.default.params.table_prefix={prefix}",
        f"state.table_prefix={prefix}s_",
        *overrides,
        env={},
    )
    await built.start()
    try:
        yield built
    finally:
        await built.stop()


@pytest.fixture
async def app(tmp_path: Path, pg_dsn: str) -> AsyncIterator[ReMeApp]:  # noqa: F811
    async with running_app(tmp_path, pg_dsn) as built:
        yield built


async def insert(app: ReMeApp, *dicts: dict[str, Any]) -> dict[str, Any]:
    return await app.async_execute(name="vector_store", workspace_id=WS, action="insert", memory_dicts=list(dicts))


def history_rows(app: ReMeApp, dsn: str, memory_id: str) -> list[str]:
    table = f"{app.config.state.table_prefix}history"
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = f"SELECT entry->>'event' FROM {table} WHERE workspace_id = %s AND memory_id = %s ORDER BY seq"  # noqa: S608
        return [row[0] for row in conn.execute(query, (WS, memory_id)).fetchall()]


def refuse_rows(dsn: str, table: str, when: str, message: str, *, at_commit: bool = False) -> None:
    """A trigger on `table` that fails with `message` for each row `when` (SQL over NEW) holds: before the row is
    inserted, or (`at_commit`) at COMMIT, once every statement of the transaction went in (a deferred constraint
    trigger, on inserts and updates)."""
    fires = (
        f'CONSTRAINT TRIGGER refuse AFTER INSERT OR UPDATE ON "{table}" DEFERRABLE INITIALLY DEFERRED'
        if at_commit
        else f'TRIGGER refuse BEFORE INSERT ON "{table}"'
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{table}_refuse"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN '
            f"RAISE EXCEPTION '{message}'; END $$; "
            f'CREATE {fires} FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION "{table}_refuse"()'
        )


def store(app: ReMeApp) -> GuardedStore:
    assert app.services is not None
    return app.services.store()


async def stored(app: ReMeApp, memory_id: str) -> list[str]:
    return [node.unique_id for node in await store(app).get(WS, [memory_id])]


@pytest.mark.anyio
async def test_the_store_joins_the_history_and_each_entry_is_written_once(app: ReMeApp, pg_dsn: str) -> None:  # noqa: F811
    history = app.history
    assert history is not None and store(app).journal is app.state.journal  # same database: one transaction
    assert (await insert(app, memory("m1", "first")))["success"]
    assert (await insert(app, memory("m1", "second")))["success"]
    deleted = await app.async_execute(name="vector_store", workspace_id=WS, action="delete_ids", memory_ids=["m1"])
    assert deleted["success"], deleted
    assert history_rows(app, pg_dsn, "m1") == ["ADD", "UPDATE", "DELETE"]  # the recorder wrote none again
    entries = await history.read(WS, "m1")
    assert all(e.get("before") is None and e.get("after") is None for e in entries)  # the delete scrubbed them
    # each request's audit record was committed with its write, and not appended again by the recorder
    assert len(audit_rows(app, pg_dsn)) == 3
    records = list(read_audit(app.state.db))  # type: ignore[arg-type]
    assert [(r.action, r.ids_added, r.ids_changed, r.ids_deleted) for r in records] == [
        ("insert", ["m1"], [], []),
        ("insert", [], ["m1"], []),
        ("delete_ids", [], [], ["m1"]),
    ]


def audit_rows(app: ReMeApp, dsn: str) -> list[tuple[str, str | None]]:
    """(request id, trail token) of every row of the audit table, in order."""
    table = f"{app.config.state.table_prefix}audit"
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = f"SELECT record->>'request_id', trail FROM {table} ORDER BY seq"  # noqa: S608
        return [(str(row[0]), row[1]) for row in conn.execute(query).fetchall()]


@pytest.mark.anyio
async def test_a_request_of_two_writes_lists_its_final_record_once(app: ReMeApp, pg_dsn: str) -> None:  # noqa: F811
    trail = app.audit.new_trail("two-writes", "manage")
    app.audit.expect(trail, "manage", "two_writes", WS, TRUSTED)
    bound = store(app).bound(Writer(trail))
    await bound.upsert(WS, [VectorNode(unique_id="a", workspace_id=WS, content="first")])
    await bound.upsert(WS, [VectorNode(unique_id="b", workspace_id=WS, content="second")])
    assert [token for _, token in audit_rows(app, pg_dsn)] == [trail.token] * 2  # a draft with each write
    await app.audit.change("manage", "two_writes", WS, "two-writes", trail, None, TRUSTED)
    assert len(audit_rows(app, pg_dsn)) == 2  # the final record is the second draft: not appended again
    [record] = read_audit(app.state.db)  # type: ignore[arg-type]
    assert record.ids_added == ["a", "b"] and record.status == "ok"

    failed = app.audit.new_trail("fails-after", "manage")
    app.audit.expect(failed, "manage", "fails_after", WS, TRUSTED)
    await store(app).bound(Writer(failed)).upsert(WS, [VectorNode(unique_id="c", workspace_id=WS, content="third")])
    await app.audit.change("manage", "fails_after", WS, "fails-after", failed, "internal_error", TRUSTED)
    assert len(audit_rows(app, pg_dsn)) == 4  # its draft said ok: the error is appended, and is its record
    listed = {r.request_id: r for r in read_audit(app.state.db)}  # type: ignore[arg-type]
    assert list(listed) == ["two-writes", "fails-after"]
    assert listed["fails-after"].status == "error" and listed["fails-after"].ids_added == ["c"]


@pytest.mark.anyio
async def test_a_failed_history_insert_rolls_the_memories_back(app: ReMeApp, pg_dsn: str) -> None:  # noqa: F811
    assert (await insert(app, memory("fine", "kept")))["success"]
    table = f"{app.config.state.table_prefix}history"
    refuse_rows(pg_dsn, table, "NEW.memory_id = 'poison'", "history refused")
    answer = await insert(app, memory("poison", "never stored"), memory("neighbour", "never stored either"))
    assert not answer["success"]
    assert answer["metadata"]["error"]["code"] == "store_unavailable"
    assert await stored(app, "poison") == [] and await stored(app, "neighbour") == []
    assert history_rows(app, pg_dsn, "poison") == [] and history_rows(app, pg_dsn, "neighbour") == []
    assert await stored(app, "fine") == ["fine"]
    # the failed request has its record, written after (no draft was committed)
    assert [r.status for r in read_audit(app.state.db)] == ["ok", "error"]  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_memory_transaction_failing_at_commit_leaves_no_history(app: ReMeApp, pg_dsn: str) -> None:  # noqa: F811
    assert (await insert(app, memory("fine", "kept")))["success"]
    registry = f"{app.config.vector_store['default'].params['table_prefix']}workspaces"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT tbl FROM {registry} WHERE workspace_id = %s", (WS,)).fetchone()  # noqa: S608
    assert row is not None
    nodes = str(row[0])
    # checked at COMMIT, after the history rows went in: the whole transaction fails there
    refuse_rows(pg_dsn, nodes, "NEW.id = 'late'", "memory refused", at_commit=True)
    answer = await insert(app, memory("late", "refused at commit"))
    assert not answer["success"]
    assert await stored(app, "late") == []
    assert history_rows(app, pg_dsn, "late") == []
    assert history_rows(app, pg_dsn, "fine") == ["ADD"]


def test_only_the_same_database_as_the_same_user_joins() -> None:
    dsn = "postgresql://reme@127.0.0.1:5432/reme"
    assert same_database((dsn, {}), ("host=127.0.0.1 port=5432 dbname=reme user=reme", {}))
    assert same_database(("", {"host": "127.0.0.1", "port": 5432, "dbname": "reme", "user": "reme"}), (dsn, {}))
    assert not same_database((dsn, {}), ("postgresql://reme@127.0.0.1:5432/other", {}))
    assert not same_database((dsn, {}), ("postgresql://admin@127.0.0.1:5432/reme", {}))
    assert not same_database((dsn, {}), ("postgresql://reme@127.0.0.1:5433/reme", {}))
    assert not same_database((dsn, {}), ("not a dsn ===", {}))


def state_on_another_database(tmp_path: Path, pg_dsn: str) -> contextlib.AbstractAsyncContextManager[ReMeApp]:  # noqa: F811
    """A pgvector store, and the state (history, audit) on a database not known to be the store's."""
    other = pg_dsn.replace("127.0.0.1", "localhost")  # one server, named otherwise: not known to be the same
    return running_app(tmp_path, pg_dsn, f"state.dsn={other}")


@pytest.mark.anyio
async def test_history_on_another_database_keeps_its_own_transaction(tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    async with state_on_another_database(tmp_path, pg_dsn) as app:
        assert store(app).journal is None
        assert (await insert(app, memory("m1", "first")))["success"]
        assert history_rows(app, pg_dsn, "m1") == ["ADD"]  # written by the recorder, after the memories


@pytest.mark.anyio
async def test_on_another_database_a_requests_history_and_record_are_one_commit(tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    """The recorder writes a request's history entries and its audit record in one transaction (one flush): an
    audit row refused takes the request's history entries with it, never one without the other."""
    async with state_on_another_database(tmp_path, pg_dsn) as app:
        assert (await insert(app, memory("m1", "first")))["success"]
        table = f"{app.config.state.table_prefix}audit"
        refuse_rows(pg_dsn, table, "NEW.record::text LIKE '%poison%'", "audit refused")
        answer = await insert(app, memory("poison", "its record is refused"))
        assert not answer["success"]
        assert history_rows(app, pg_dsn, "poison") == []
        assert history_rows(app, pg_dsn, "m1") == ["ADD"]


@pytest.mark.anyio
async def test_a_write_to_an_unknown_workspace_still_gets_its_record(app: ReMeApp) -> None:
    """A delete in (or a drop of) a workspace that does not exist commits nothing, so no draft either: the
    recorder appends the request's record."""
    for action, extra in (("delete_ids", {"memory_ids": ["x"]}), ("delete", {})):
        answer = await app.async_execute(name="vector_store", workspace_id="never-made", action=action, **extra)
        assert answer["success"], answer
    records = list(read_audit(app.state.db))  # type: ignore[arg-type]
    assert [(r.workspace_id, r.action, r.status) for r in records] == [
        ("never-made", "delete_ids", "ok"),
        ("never-made", "delete", "ok"),
    ]
