"""One contract, two backends: the state layer's keys, audit trail, history and job store behave the same on files
(one machine) and on PostgreSQL (many nodes), as the service uses them (`state/layer.py`, `state/admin.py`).

Each PostgreSQL case has tables of its own (a random `state.table_prefix`) on the tests' real server.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from reme_service.app import ReMeApp
from reme_service.audit.record import AuditRecord
from reme_service.auth.access import Access
from reme_service.auth.caller import Caller
from reme_service.config.models import AppConfig
from reme_service.errors import StoreError, UnauthorizedError
from reme_service.history.entry import HistoryEntry, Scrub
from reme_service.jobs.files import Cancellation, key_digest
from reme_service.jobs.record import Job
from reme_service.state.admin import KeyAdmin, audit_records, key_admin
from reme_service.state.layer import StateLayer
from reme_service.state.pg.db import StateDb
from reme_service.state.pg.keys import LOOKUPS_PER_SECOND, PgKeyRing
from reme_service.state.pg.schema import MIGRATIONS, migrate
from reme_service.state.settings import StateTarget
from reme_service.testing.ports import free_port
from tests.conditions import until, until_sync
from tests.fakes.pg_server import pg_dsn, waits_on_lock  # noqa: F401 - fixture used by name

WRITER = Caller(key_id="0123456789ab", name="w", scope="write", workspaces=("ws",))


def _config(backend: str, tmp_path: Path, dsn: str) -> AppConfig:
    state: dict[str, object] = {"backend": backend}
    if backend == "postgres":
        state.update(dsn=dsn, table_prefix=f"t{secrets.token_hex(4)}_")
    return AppConfig(data_dir=str(tmp_path / "data"), state=state)  # type: ignore[arg-type]


@pytest.fixture(params=["files", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path, pg_dsn: str) -> AppConfig:  # noqa: F811
    return _config(request.param, tmp_path, pg_dsn)


@pytest.fixture
def layer(config: AppConfig) -> Iterator[StateLayer]:
    built = StateLayer.build(config, Path(config.data_dir))
    yield built
    asyncio.run(built.stop())


def test_a_key_made_by_the_admin_authenticates_and_its_revocation_is_seen(config: AppConfig, layer: StateLayer) -> None:
    admin = key_admin(config)
    record, key = admin.create(workspaces=["ws"], scope="write", name="app")
    layer.keyring.load()
    until_sync(lambda: layer.keyring.has_active_keys())
    assert layer.keyring.authenticate(key) == record.caller()
    with pytest.raises(UnauthorizedError):
        layer.keyring.authenticate(key[:-1] + ("A" if key[-1] != "A" else "B"))
    admin.revoke(record.id)
    until_sync(lambda: layer.keyring.current(record.id) is None, limit=3)
    with pytest.raises(UnauthorizedError, match="revoked"):
        layer.keyring.authenticate(key)
    assert layer.keyring.has_keys() and not layer.keyring.has_active_keys()  # a revoked key keeps checking on
    listed = admin.list()
    assert [(r.id, r.active) for r, _ in listed] == [(record.id, False)]
    admin.close()


@contextmanager
def _deaf(config: AppConfig) -> Iterator[tuple[StateLayer, KeyAdmin]]:
    """A node's state layer whose key ring read the keys once (one key made before) and hears of no change since (a
    PostgreSQL ring's listener stopped, a key file checked every 60 s), and the key admin: a key made now is found
    only by looking it up."""
    config = config.model_copy(update={"auth": config.auth.model_copy(update={"reload_seconds": 60})})
    layer = StateLayer.build(config, Path(config.data_dir))
    admin = key_admin(config)
    try:
        admin.create(workspaces=["ws"], scope="write")
        layer.keyring.load()
        until_sync(lambda: layer.keyring.has_active_keys())
        if isinstance(layer.keyring, PgKeyRing):
            layer.keyring.close()
        yield layer, admin
    finally:
        admin.close()
        asyncio.run(layer.stop())


def test_a_key_made_after_the_rings_last_look_works_from_its_first_request(config: AppConfig) -> None:
    """The ring follows changes every reload interval (and, on PostgreSQL, by notification); a key it has not heard
    of yet is looked up at once, so a client handed a new key is never refused it (on any node)."""
    with _deaf(config) as (layer, admin):
        record, key = admin.create(workspaces=["other"], scope="read")
        assert layer.keyring.authenticate(key) == record.caller()
        with pytest.raises(UnauthorizedError, match="unknown API key"):
            layer.keyring.authenticate(key[:-1] + ("A" if key[-1] != "A" else "B"))


def test_made_up_keys_cost_a_node_at_most_its_lookups_per_second(tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    with _deaf(_config("postgres", tmp_path, pg_dsn)) as (layer, admin):
        assert layer.db is not None
        now = [0.0]
        ring = PgKeyRing(layer.db, reload_seconds=60, clock=lambda: now[0])
        ring.load()
        ring.close()  # no listener: only lookups can find a new key
        for _ in range(LOOKUPS_PER_SECOND):
            with pytest.raises(UnauthorizedError):
                ring.authenticate(f"rk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}")
        record, key = admin.create(workspaces=["ws"], scope="write")
        with pytest.raises(UnauthorizedError, match="unknown API key"):  # this second's lookups are spent
            ring.authenticate(key)
        now[0] += 1.0
        assert ring.authenticate(key) == record.caller()


def test_a_key_lookup_waiting_on_the_database_leaves_the_event_loop_free(tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    config = _config("postgres", tmp_path, pg_dsn)
    table = f"{config.state.table_prefix}keys"
    with _deaf(config) as (layer, admin):
        record, key = admin.create(workspaces=["ws"], scope="write")
        access = Access(config.auth, layer.keyring, host="0.0.0.0")  # this process's rate limit: never blocks
        with psycopg.connect(pg_dsn) as holder, psycopg.connect(pg_dsn, autocommit=True) as watcher:
            # a safety net, not an assertion: were the lookup run on the loop, the holder's session ends after 20 s
            holder.execute("SET idle_in_transaction_session_timeout = '20s'")

            async def scenario() -> None:
                holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                admitted = asyncio.ensure_future(access.admit(key))
                # the loop runs this while the lookup waits on the lock
                await until(lambda: waits_on_lock(watcher, f"FROM {table} WHERE id"))
                assert not admitted.done()
                holder.rollback()
                assert await admitted == record.caller()

            asyncio.run(scenario())


def test_when_a_key_was_last_used_is_listed(config: AppConfig, layer: StateLayer) -> None:
    admin = key_admin(config)
    record, key = admin.create(workspaces=["ws"], scope="read")
    layer.keyring.load()
    until_sync(lambda: layer.keyring.has_active_keys())
    layer.keyring.authenticate(key)
    layer.keyring.flush()
    [(_, used)] = admin.list()
    assert used is not None and abs((datetime.now(UTC) - used).total_seconds()) < 600
    admin.close()


def _audit(workspace: str, request_id: str, moment: datetime) -> AuditRecord:
    return AuditRecord(
        time=moment, request_id=request_id, workspace_id=workspace, flow="vector_store", action="insert", status="ok"
    )


def test_the_audit_trail_lists_what_was_appended_filtered(config: AppConfig, layer: StateLayer) -> None:
    assert layer.audit_log is not None
    start = datetime.now(UTC)
    records = [_audit("ws", "r1", start), _audit("other", "r2", start), _audit("ws", "r3", start + timedelta(1))]

    async def append() -> None:
        for record in records:
            await layer.audit_log.append(record)  # type: ignore[union-attr]

    asyncio.run(append())
    assert [r.request_id for r in audit_records(config)] == ["r1", "r2", "r3"]
    assert [r.request_id for r in audit_records(config, workspace="ws")] == ["r1", "r3"]
    assert [r.request_id for r in audit_records(config, until=start + timedelta(hours=1))] == ["r1", "r2"]


def test_history_keeps_entries_in_order_and_a_scrub_strips_their_text(layer: StateLayer) -> None:
    history = layer.history
    assert history is not None
    add = HistoryEntry(event="ADD", memory_id="m1", after={"content": "secret"})
    update = HistoryEntry(event="UPDATE", memory_id="m1", before={"content": "secret"}, after={"content": "new"})
    other = HistoryEntry(event="ADD", memory_id="m2", after={"content": "kept"})

    async def run() -> None:
        await history.write("ws", [add, other])
        await history.write("ws", [update])
        assert [e["event"] for e in await history.read("ws", "m1")] == ["ADD", "UPDATE"]
        assert await history.read("elsewhere", "m1") == []
        await history.write("ws", [Scrub(frozenset({"m1"})), HistoryEntry(event="DELETE", memory_id="m1")])
        entries = await history.read("ws", "m1")
        assert [e["event"] for e in entries] == ["ADD", "UPDATE", "DELETE"]
        assert all(e["before"] is None and e["after"] is None for e in entries)
        assert (await history.read("ws", "m2"))[0]["after"] == {"content": "kept"}

    asyncio.run(run())


def _job(key: str | None = None) -> Job:
    return Job(job_id=f"job_{secrets.token_hex(16)}", flow="f", workspace_id="ws", request={"a": 1}, caller=WRITER,
               idempotency_key=key)  # fmt: skip


def test_the_job_store_keeps_jobs_locks_them_and_names_one_job_per_key(layer: StateLayer) -> None:
    store = layer.jobs
    first, second = _job("k"), _job("k")
    saved, size = store.save(first)
    assert saved == first and size == store.size(first.job_id) > 0
    assert store.load(first.job_id) == first
    store.save(second)
    done = second.model_copy(update={"status": "done"})
    store.save(done)
    assert [j.job_id for j in store.load_all()] == [first.job_id, second.job_id]
    assert [j.job_id for j in store.load_open()] == [first.job_id]
    digest = key_digest(WRITER.key_id, "k")
    assert store.key_holder(digest) is None
    assert store.reserve_key(digest, first.job_id) == first.job_id
    assert store.reserve_key(digest, second.job_id) == first.job_id  # the key names one job
    assert store.key_holder(digest) == first.job_id
    held = store.claim(first.job_id)
    assert held is not None
    taken: list[int | None] = []
    thread = threading.Thread(target=lambda: taken.append(store.claim(first.job_id)))  # as another process would
    thread.start()
    thread.join()
    if layer.shared:  # a run lock is one per job for every node (files: per open descriptor, also in one process)
        assert taken == [None]
    store.release(held)
    again = store.claim(first.job_id)
    assert again is not None
    store.release(again)
    store.remove(first)
    assert store.load(first.job_id) is None and store.key_holder(digest) is None


def test_a_cancellation_holds_against_later_saves_and_erase_scrubs_finished_jobs(layer: StateLayer) -> None:
    store = layer.jobs
    running, finished, other = _job(), _job(), _job()
    other = other.model_copy(update={"workspace_id": "elsewhere"})
    for job in (running, finished, other):
        store.save(job)
    store.save(finished.model_copy(update={"status": "done", "result": {"answer": "secret text"}}))
    assert store.cancelled(running.job_id) is None and not store.began_writing(running.job_id)
    store.mark_writing(running.job_id)
    assert store.began_writing(running.job_id)

    revoked = Cancellation(reason="key revoked", http_status=403, result={"success": False})
    cancelled = store.cancel(running.job_id, revoked)
    assert cancelled is not None and cancelled.status == "cancelled" and cancelled.request == {}
    assert store.cancelled(running.job_id) == "key revoked"
    # the process running it saves it once more, as it finished: the cancellation wins, its request stays gone
    written, _ = store.save(running.model_copy(update={"status": "done", "result": {"answer": "late"}}))
    assert written.status == "cancelled" and written.reason == "key revoked"
    assert store.load(running.job_id) == written
    assert store.cancel(finished.job_id, revoked) is not None  # a finished job is left alone…
    assert store.load(finished.job_id).result == {"answer": "secret text"}  # type: ignore[union-attr]

    erased = store.erase_workspace("ws", Cancellation(reason="erased"))  # …unless its workspace is erased
    assert {job.job_id for job in erased} == {finished.job_id}  # the cancelled one holds no text already
    scrubbed = store.load(finished.job_id)
    assert scrubbed is not None and scrubbed.request == {} and scrubbed.result is None and scrubbed.reason == "erased"
    assert store.load(other.job_id) == other  # another workspace's job is untouched


# -- PostgreSQL only -------------------------------------------------------------------------------------------


def _target(dsn: str, prefix: str | None = None) -> StateTarget:
    return StateTarget("postgres", dsn, {}, prefix or f"t{secrets.token_hex(4)}_")


def test_nodes_migrating_at_once_make_one_schema(pg_dsn: str) -> None:  # noqa: F811
    target = _target(pg_dsn)
    versions: list[int] = []
    errors: list[BaseException] = []

    def node() -> None:
        try:
            with psycopg.connect(pg_dsn) as conn:
                versions.append(migrate(conn, target.prefix))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=node) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and versions == [len(MIGRATIONS)] * 6
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(f"SELECT version FROM {target.prefix}schema ORDER BY version").fetchall()  # noqa: S608
    assert rows == [(v,) for v in range(1, len(MIGRATIONS) + 1)]  # each migration applied once


def test_the_audit_table_refuses_changes(pg_dsn: str) -> None:  # noqa: F811
    db = StateDb(_target(pg_dsn))
    db.ready()
    db.run(lambda conn: conn.execute(f"INSERT INTO {db.table('audit')} (time, workspace_id, record) "  # noqa: S608
                                     "VALUES (now(), 'ws', '{}')"))  # fmt: skip
    with pytest.raises(StoreError, match="refused the write: .*append-only"):
        db.run(lambda conn: conn.execute(f"DELETE FROM {db.table('audit')}"))  # noqa: S608
    db.close()


def test_a_database_that_is_down_answers_store_unavailable() -> None:
    db = StateDb(_target(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"))
    with pytest.raises(StoreError) as caught:
        db.ready()
    assert caught.value.status == 503 and caught.value.code == "store_unavailable"


def test_a_node_whose_database_is_down_starts_and_fails_closed(tmp_path: Path) -> None:
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    config = AppConfig(data_dir=str(tmp_path), state={"backend": "postgres", "dsn": dead},  # type: ignore[arg-type]
                       auth={"mode": "required"}, http={"host": "0.0.0.0"})  # type: ignore[arg-type]  # fmt: skip
    app = ReMeApp(config=config)  # auth.mode=required: it would refuse to start if it thought there were no keys
    try:
        for key in ("rk_0123456789ab_" + "A" * 43, None):  # a key, and none: whether one is needed is unknown
            with pytest.raises(StoreError) as caught:
                app.access.caller(key)
            assert caught.value.status == 503  # never a 401 that could be a 200 after a revocation it cannot see
        report = asyncio.run(_health(app))
        assert report["status"] == "down" and report["state"]["postgres"]["status"] == "down"
    finally:
        asyncio.run(app.state.stop())


async def _health(app: ReMeApp) -> dict[str, Any]:
    async with app:
        return await app.health()
