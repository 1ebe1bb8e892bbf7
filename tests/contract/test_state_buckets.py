"""Rate limits under the state layer: with `postgres`, one bucket per API key in the `buckets` table, shared by
every node (`state/pg/buckets.py`); with `files`, each process's own buckets, as before (`auth/rate_limit.py`).

Two `StateLayer`s built from one config are two nodes on one database. The rates are tiny (one token per
1000 s), so no token comes back while a case runs: the counts are exact, with no clock in the assertions.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from reme_service.app import ReMeApp
from reme_service.auth.access import Access
from reme_service.auth.keyfile import create_key
from reme_service.auth.keyring import KeyRing
from reme_service.auth.rate_limit import RateLimiter
from reme_service.config.models import AppConfig, AuthConfig
from reme_service.errors import RateLimitedError, StoreError
from reme_service.server.http import create_http_app
from reme_service.state.admin import key_admin
from reme_service.state.layer import StateLayer
from reme_service.state.pg.buckets import PgRateLimiter
from reme_service.state.pg.db import StateDb
from reme_service.state.settings import StateTarget
from reme_service.testing.ports import free_port
from reme_service.testing.serve import serve_in_thread
from tests.conditions import until, until_sync
from tests.fakes.pg_server import pg_dsn, waits_on_lock  # noqa: F401 - fixture used by name

BURST = 5
LIMIT = {"requests_per_second": 0.001, "burst": BURST}


def _config(backend: str, tmp_path: Path, dsn: str) -> AppConfig:
    state: dict[str, object] = {"backend": backend}
    if backend == "postgres":
        state.update(dsn=dsn, table_prefix=f"t{secrets.token_hex(4)}_")
    auth = {"mode": "required", "rate_limit": LIMIT}
    return AppConfig(data_dir=str(tmp_path / "data"), state=state, auth=auth)  # type: ignore[arg-type]


@pytest.fixture
def nodes(request: pytest.FixtureRequest, tmp_path: Path, pg_dsn: str) -> Iterator[tuple[AppConfig, list[Access]]]:  # noqa: F811
    """Two nodes' `Access` (each with its own state layer) over one configuration: `request.param` is the backend."""
    config = _config(request.param, tmp_path, pg_dsn)
    layers = [StateLayer.build(config, Path(config.data_dir)) for _ in range(2)]
    try:
        yield (
            config,
            [
                Access(config.auth, layer.keyring, host="0.0.0.0", limiter=layer.limiter(config.auth))
                for layer in layers
            ],
        )
    finally:
        for layer in layers:
            asyncio.run(layer.stop())


async def _admit_all(nodes: list[Access], key: str, each: int) -> tuple[int, list[int]]:
    """`each` requests with `key` on every node at once: (how many passed, the Retry-After of the refused)."""
    outcomes = await asyncio.gather(*(_admit(node, key) for node in nodes for _ in range(each)))
    passed = sum(1 for outcome in outcomes if outcome is None)
    return passed, [outcome for outcome in outcomes if outcome is not None]


async def _admit(node: Access, key: str) -> int | None:
    try:
        await node.admit(key)
    except RateLimitedError as refused:
        return refused.retry_after
    return None


def _key(config: AppConfig, nodes: list[Access]) -> str:
    admin = key_admin(config)
    _, key = admin.create(workspaces=["ws"], scope="write", name="app")
    admin.close()
    for node in nodes:
        node.keyring.load()
        until_sync(lambda node=node: node.keyring.has_active_keys())  # type: ignore[misc]
    return key


@pytest.mark.parametrize("nodes", ["postgres"], indirect=True)
def test_nodes_on_one_database_share_each_keys_budget(nodes: tuple[AppConfig, list[Access]]) -> None:
    config, accesses = nodes
    assert all(isinstance(access.limiter, PgRateLimiter) for access in accesses)
    key = _key(config, accesses)
    passed, refused = asyncio.run(_admit_all(accesses, key, each=2 * BURST))
    assert passed == BURST  # not BURST per node
    assert len(refused) == 3 * BURST and all(seconds >= 1 for seconds in refused)
    other = _key(config, accesses)  # another key keeps its own budget
    assert asyncio.run(_admit_all(accesses, other, each=1))[0] == 2


@pytest.mark.parametrize("nodes", ["postgres"], indirect=True)
def test_a_take_waiting_on_the_database_leaves_the_event_loop_free(
    nodes: tuple[AppConfig, list[Access]],
    pg_dsn: str,  # noqa: F811
) -> None:
    config, accesses = nodes
    key = _key(config, accesses)
    key_id = key.split("_")[1]
    table = f"{config.state.table_prefix}buckets"
    with psycopg.connect(pg_dsn) as holder, psycopg.connect(pg_dsn, autocommit=True) as watcher:
        # a safety net, not an assertion: were the take run on the loop, the holder's session ends after 20 s
        holder.execute("SET idle_in_transaction_session_timeout = '20s'")

        async def scenario() -> None:
            await accesses[0].admit(key)  # the key's row exists
            holder.execute(f"SELECT * FROM {table} WHERE key_id = %s FOR UPDATE", (key_id,))  # noqa: S608
            take = asyncio.ensure_future(accesses[0].admit(key))
            # the loop runs this while the take waits on the row lock
            await until(lambda: waits_on_lock(watcher, f"INSERT INTO {table}"))
            assert not take.done()
            holder.rollback()
            assert (await take).key_id == key_id

        asyncio.run(scenario())


@pytest.mark.parametrize("nodes", ["files"], indirect=True)
def test_with_files_each_process_keeps_its_own_buckets(nodes: tuple[AppConfig, list[Access]]) -> None:
    config, accesses = nodes
    assert all(type(access.limiter) is RateLimiter for access in accesses)
    key = _key(config, accesses)
    passed, _ = asyncio.run(_admit_all(accesses, key, each=2 * BURST))
    assert passed == 2 * BURST  # BURST per process, as before the state layer


def test_concurrent_takes_on_two_connections_never_overdraw(pg_dsn: str) -> None:  # noqa: F811
    target = StateTarget("postgres", pg_dsn, prefix=f"t{secrets.token_hex(4)}_")
    dbs = [StateDb(target), StateDb(target)]
    limiters = [PgRateLimiter(db, 0.001, 20) for db in dbs]
    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            waits = list(pool.map(lambda i: limiters[i % 2].wait("k"), range(80)))
        assert sum(1 for wait in waits if wait == 0.0) == 20
        assert all(wait > 0 for wait in waits if wait != 0.0)
    finally:
        for db in dbs:
            db.close()


def test_a_refused_take_says_how_long_until_a_token_and_takes_nothing(pg_dsn: str) -> None:  # noqa: F811
    db = StateDb(StateTarget("postgres", pg_dsn, prefix=f"t{secrets.token_hex(4)}_"))
    try:
        limiter = PgRateLimiter(db, 0.5, 1)  # one token every 2 s
        assert limiter.wait("k") == 0.0
        first = limiter.wait("k")
        assert 0 < first <= 2.0
        until_sync(lambda: limiter.wait("k") == 0.0, limit=30)  # the refusals took nothing: the token comes back
    finally:
        db.close()


def test_a_shared_limit_whose_database_is_down_refuses_with_503(tmp_path: Path) -> None:
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    db = StateDb(StateTarget("postgres", dead))
    try:
        with pytest.raises(StoreError) as caught:
            PgRateLimiter(db, 1.0, 5).wait("k")
        assert caught.value.status == 503 and caught.value.code == "store_unavailable"
        path = tmp_path / "keys.json"
        _, key = create_key(path, workspaces=["ws"], scope="read")
        ring = KeyRing(path)
        ring.load()
        access = Access(AuthConfig(mode="required"), ring, host=None, limiter=PgRateLimiter(db, 1.0, 5))
        with pytest.raises(StoreError):  # fail closed: never let the key through unlimited
            asyncio.run(access.admit(key))
    finally:
        db.close()


def test_two_served_nodes_answer_429_once_the_keys_shared_budget_is_spent(tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    prefix = f"t{secrets.token_hex(4)}_"
    args = [
        "embedding_model.default.backend=hash", "state.backend=postgres", f"state.dsn={pg_dsn}",
        f"state.table_prefix={prefix}", "auth.mode=required", "auth.rate_limit.requests_per_second=0.001",
        f"auth.rate_limit.burst={BURST}",
    ]  # fmt: skip
    state = {"backend": "postgres", "dsn": pg_dsn, "table_prefix": prefix}
    config = AppConfig(data_dir=str(tmp_path / "admin"), state=state)  # type: ignore[arg-type]
    admin = key_admin(config)
    _, key = admin.create(workspaces=["ws"], scope="write", name="app")
    admin.close()
    apps = [ReMeApp(f"data_dir={tmp_path / node}", *args, env={}) for node in ("a", "b")]
    body = {"workspace_id": "ws", "action": "list"}
    try:
        with serve_in_thread(create_http_app(apps[0])) as a, serve_in_thread(create_http_app(apps[1])) as b:
            answers = [
                httpx.post(f"{url}/vector_store", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
                for _ in range(BURST)
                for url in (a, b)
            ]
    finally:
        for app in apps:
            asyncio.run(app.state.stop())
    assert [answer.status_code for answer in answers].count(200) == BURST
    refused = [answer for answer in answers if answer.status_code != 200]
    assert {answer.status_code for answer in refused} == {429}
    assert all(answer.json()["metadata"]["error"]["code"] == "rate_limited" for answer in refused)
    assert all(int(answer.headers["retry-after"]) >= 1 for answer in refused)
