"""The cross-process workspace lock (`stores/shared_lock.py`) on each shared backend: a real `chroma run` server and
Elasticsearch (its protocol test server, or a real cluster with REME_TEST_ES_URL); and PostgreSQL's advisory locks
(the pgvector store, at the end). Each store below has its own
client connection, exactly as two service processes would; the service-level test with two real processes is
tests/service/test_multiprocess.py."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest

from reme_service.errors import StoreError
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.base import VectorStore
from reme_service.stores.chroma.store import ChromaVectorStore
from reme_service.stores.es.store import ElasticsearchVectorStore
from reme_service.stores.params import ChromaStoreParams, ElasticsearchStoreParams, PgvectorStoreParams
from reme_service.stores.pg.store import PgvectorVectorStore
from reme_service.stores.remote import RemoteVectorStore
from reme_service.stores.shared_lock import LeaseHolder
from tests.conditions import until
from tests.contract.test_es_store import es_url  # noqa: F401 - fixture used by name
from tests.fakes.chroma_server import ChromaServer, chroma_server  # noqa: F401
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

pytestmark = pytest.mark.anyio

StoreFactory = Callable[..., RemoteVectorStore]


@pytest.fixture(params=["chroma", "elasticsearch"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[StoreFactory]:
    """`make(**options)`: a new store (own connection) on the shared server under one collection/index prefix."""
    prefix = f"l{secrets.token_hex(4)}-"
    if request.param == "chroma":
        server: ChromaServer = request.getfixturevalue("chroma_server")
    else:
        url: str = request.getfixturevalue("es_url")
    async with AsyncExitStack() as stack:

        def make(**options: Any) -> RemoteVectorStore:
            store: RemoteVectorStore
            embedder = HashEmbeddingClient(dimensions=16)
            if request.param == "chroma":
                store = ChromaVectorStore(
                    ChromaStoreParams(host=server.host, port=server.port, collection_prefix=prefix, **options),
                    embedder=embedder,
                )
            else:
                store = ElasticsearchVectorStore(
                    ElasticsearchStoreParams(hosts=[url], index_prefix=prefix, **options), embedder=embedder
                )
            stack.push_async_callback(store.close)
            return store

        yield make


class HeldClaim:
    """Wraps a store's lease claims: once a claim has been refused (the store is polling for a held lease), the
    next claim is held back before it is sent until `release` is set (`held` is set meanwhile). `in_flight`
    counts the claims not yet answered; `won_late` says whether the held claim took the lease."""

    def __init__(self, store: RemoteVectorStore) -> None:
        assert store.shared_lock is not None
        backend = store.shared_lock.backend
        claim = backend.claim
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.in_flight = 0
        self.won_late = False
        refused = False

        async def watched(key: str, owner: str, expires: float) -> LeaseHolder | None:
            nonlocal refused
            self.in_flight += 1
            try:
                late = refused and not self.held.is_set()
                if late:
                    self.held.set()
                    await self.release.wait()
                holder = await claim(key, owner, expires)
            finally:
                self.in_flight -= 1
            won = holder is not None and holder.owner == owner
            refused = refused or not won
            self.won_late = self.won_late or (late and won)
            return holder

        setattr(backend, "claim", watched)  # noqa: B010 - replaces the bound method on this one instance


def queued(store: RemoteVectorStore, workspace_id: str) -> int:
    """How many sections of this store wait for the workspace's lock (the one holding it is not counted)."""
    assert store.shared_lock is not None
    return store.shared_lock._waiting.get(workspace_id, 0)


async def _lease_owner(store: RemoteVectorStore, workspace_id: str) -> str | None:
    assert store.shared_lock is not None
    holder = await store.shared_lock.backend.holder(workspace_id)  # type: ignore[attr-defined]
    return None if holder is None else holder.owner


async def test_read_modify_write_from_two_connections_loses_nothing(stores: StoreFactory) -> None:
    first, second = stores(), stores()
    node = VectorNode(unique_id="counter", workspace_id="ws", content="a counter", metadata={"n": 0})
    await first.upsert("ws", [node])

    async def increment(store: RemoteVectorStore) -> None:
        async with store.lock("ws"):
            (current,) = await store.get("ws", ["counter"])
            # Not synchronisation: a pause between the read and the write, so that without the lock the other
            # connection's increments would land in between and be lost.
            await asyncio.sleep(0.01)
            current.metadata["n"] += 1
            await store.upsert("ws", [current])

    await asyncio.gather(*(increment(store) for _ in range(12) for store in (first, second)))
    (final,) = await second.get("ws", ["counter"])
    assert final.metadata["n"] == 24
    assert await _lease_owner(first, "ws") is None  # every lease was released
    assert await first.list_workspaces() == ["ws"]  # the lock collection is not a workspace


async def test_a_waiter_gives_up_with_a_503_naming_the_workspace(stores: StoreFactory) -> None:
    holder, waiter = stores(), stores(lock_wait=0.3)
    await assert_waiter_gives_up(holder, waiter)


async def test_a_held_lease_is_renewed_and_a_dead_holders_lease_is_taken_over(
    stores: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    holder, waiter = stores(lock_ttl=0.6), stores(lock_ttl=0.6, lock_wait=0.2)
    async with holder.lock("ws"):
        await asyncio.sleep(1.5)  # longer than the ttl: only renewals keep the lease
        with pytest.raises(StoreError):
            async with waiter.lock("ws"):
                pass
    # a process that died holding the lock: its record stays, with an expiry in the past
    assert holder.shared_lock is not None
    dead = await holder.shared_lock.backend.claim("ws", "dead-process", time.time() - 1)
    assert dead is not None and dead.owner == "dead-process"
    patient = stores(lock_wait=30)
    with caplog.at_level(logging.WARNING, logger="reme_service.stores.shared_lock"):
        async with patient.lock("ws"):  # the dead holder never releases it: only a takeover can grant it
            assert await _lease_owner(patient, "ws") not in (None, "dead-process")
    assert "from a holder whose lease expired" in caplog.text
    assert await _lease_owner(patient, "ws") is None


async def test_a_cancelled_waiter_leaves_no_lease_behind(stores: StoreFactory) -> None:
    holder, waiter = stores(), stores()
    claims = HeldClaim(waiter)
    async with holder.lock("ws"):
        task = asyncio.ensure_future(waiter.lock("ws").__aenter__())
        await asyncio.wait_for(claims.held.wait(), timeout=10)  # the waiter polls; its next claim is in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    claims.release.set()  # the claim reaches the store after the holder let go: it takes the lease

    async def settled() -> bool:  # ... and the waiter's process releases it in the background
        return claims.in_flight == 0 and await _lease_owner(holder, "ws") is None

    await until(settled)
    assert claims.won_late
    third = stores(lock_wait=1)
    async with third.lock("ws"):
        pass


async def test_shared_locks_can_be_turned_off(stores: StoreFactory) -> None:
    local_only = stores(shared_lock=False)
    assert local_only.shared_lock is None
    async with local_only.lock("ws"):
        assert await _lease_owner(stores(), "ws") is None


async def test_an_embedded_chroma_cannot_share_locks(tmp_path: Path) -> None:
    embedded = ChromaVectorStore(ChromaStoreParams(store_dir=tmp_path), embedder=HashEmbeddingClient(dimensions=16))
    assert embedded.shared_lock is None
    with pytest.raises(ValueError, match="shared_lock needs a Chroma server"):
        ChromaVectorStore(
            ChromaStoreParams(store_dir=tmp_path, shared_lock=True), embedder=HashEmbeddingClient(dimensions=16)
        )


async def test_queued_sections_of_one_process_share_a_lease_within_the_handoff_limit(stores: StoreFactory) -> None:
    store = stores()
    assert store.shared_lock is not None
    store.shared_lock.max_handoffs = 3
    owners: list[str | None] = []

    async def section() -> None:
        async with store.lock("ws"):
            owners.append(await _lease_owner(store, "ws"))

    await asyncio.gather(*(section() for _ in range(7)))
    assert None not in owners
    runs = [len(list(group)) for _, group in itertools.groupby(owners)]
    assert runs == [3, 3, 1]  # handed on twice, then released and taken anew
    assert await _lease_owner(store, "ws") is None  # released once nobody waits


async def test_a_process_with_a_queue_lets_the_other_process_in(stores: StoreFactory) -> None:
    first, second = stores(), stores()
    for store in (first, second):
        assert store.shared_lock is not None
        store.shared_lock.max_handoffs = 2
    order: list[str] = []

    async def section(store: RemoteVectorStore, name: str) -> None:
        async with store.lock("ws"):
            order.append(name)
            await asyncio.sleep(0.01)  # not synchronisation: each section holds the lock a while, as real ones do

    await asyncio.gather(*(section(first, "a") for _ in range(6)), *(section(second, "b") for _ in range(6)))
    assert sorted(order) == ["a"] * 6 + ["b"] * 6
    assert len(list(itertools.groupby(order))) > 2  # turns alternate, nobody waits for all the rest


async def test_a_lease_kept_for_a_waiter_that_is_cancelled_is_released(stores: StoreFactory) -> None:
    store = stores()

    async def section() -> None:
        async with store.lock("ws"):
            pass

    async with store.lock("ws"):
        waiter = asyncio.ensure_future(section())

        async def waiting() -> bool:
            return queued(store, "ws") == 1  # the waiter is queued behind us: our lease will be kept for it

        await until(waiting)
    waiter.cancel()  # before it got to run
    with pytest.raises(asyncio.CancelledError):
        await waiter

    async def released() -> bool:
        return await _lease_owner(store, "ws") is None

    await until(released)


async def test_a_stale_holder_can_neither_release_nor_renew_the_new_holders_lease(stores: StoreFactory) -> None:
    store = stores()
    assert store.shared_lock is not None
    leases = store.shared_lock.backend
    stale = await leases.claim("k", "stalled", time.time() - 1)
    assert stale is not None and stale.owner == "stalled"
    await leases.drop("k", stale)  # the takeover: the expired lease is removed, a new one claimed
    fresh = await leases.claim("k", "new", time.time() + 30)
    assert fresh is not None and fresh.owner == "new"
    await leases.drop("k", stale)  # the stalled process wakes up and releases what it thinks it holds
    assert await leases.renew("k", stale, time.time() + 30) is None
    current = await leases.holder("k")  # type: ignore[attr-defined]
    assert current is not None and current.owner == "new"
    renewed = await leases.renew("k", fresh, time.time() + 60)
    assert renewed is not None and renewed.owner == "new"
    await leases.drop("k", renewed)
    assert await leases.holder("k") is None  # type: ignore[attr-defined]


# ----- PostgreSQL: advisory locks instead of lease records -----


@pytest.fixture
async def pg_stores(pg_dsn: str) -> AsyncIterator[Callable[..., PgvectorVectorStore]]:  # noqa: F811
    """`make(**options)`: a new pgvector store (own pools, as another process would have) under one prefix."""
    prefix = f"l{secrets.token_hex(4)}_"
    async with AsyncExitStack() as stack:

        def make(**options: Any) -> PgvectorVectorStore:
            params = PgvectorStoreParams(dsn=pg_dsn, table_prefix=prefix, **options)
            store = PgvectorVectorStore(params, embedder=HashEmbeddingClient(dimensions=16))
            stack.push_async_callback(store.close)
            return store

        yield make


def _advisory_locks(dsn: str) -> list[tuple[bool]]:
    """Whether each advisory lock request in the database is granted (waiters included)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT granted FROM pg_locks WHERE locktype = 'advisory'").fetchall()


async def test_pg_read_modify_write_from_two_stores_loses_nothing(
    pg_stores: Callable[..., PgvectorVectorStore],
    pg_dsn: str,  # noqa: F811
) -> None:
    first, second = pg_stores(), pg_stores()
    node = VectorNode(unique_id="counter", workspace_id="ws", content="a counter", metadata={"n": 0})
    await first.upsert("ws", [node])

    async def increment(store: PgvectorVectorStore) -> None:
        async with store.lock("ws"):
            (current,) = await store.get("ws", ["counter"])
            await asyncio.sleep(0.01)  # not synchronisation: without the lock the other store's writes land here
            current.metadata["n"] += 1
            await store.upsert("ws", [current])

    await asyncio.gather(*(increment(store) for _ in range(12) for store in (first, second)))
    (final,) = await second.get("ws", ["counter"])
    assert final.metadata["n"] == 24
    assert await asyncio.to_thread(_advisory_locks, pg_dsn) == []  # every lock was released


async def test_pg_a_waiter_gives_up_with_a_503_naming_the_workspace(
    pg_stores: Callable[..., PgvectorVectorStore],
) -> None:
    holder, waiter = pg_stores(), pg_stores(lock_wait=0.3)
    await assert_waiter_gives_up(holder, waiter)


async def test_pg_a_dead_holders_lock_is_free_at_once(
    pg_stores: Callable[..., PgvectorVectorStore],
    pg_dsn: str,  # noqa: F811
) -> None:
    waiter = pg_stores(lock_wait=5)
    key = waiter._key("workspace\x00ws")
    dead = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)  # a process holding the lock
    await dead.execute("SELECT pg_advisory_lock(%s)", [key])
    entered = asyncio.Event()

    async def section() -> None:
        async with waiter.lock("ws"):
            entered.set()

    task = asyncio.ensure_future(section())

    async def waiting() -> bool:
        return (False,) in await asyncio.to_thread(_advisory_locks, pg_dsn)

    await until(waiting)
    assert not entered.is_set()
    await dead.close()  # the process dies: its session ends, and its lock with it
    await asyncio.wait_for(task, timeout=5)
    assert entered.is_set()


async def test_pg_a_cancelled_waiter_leaves_no_lock_behind(
    pg_stores: Callable[..., PgvectorVectorStore],
    pg_dsn: str,  # noqa: F811
) -> None:
    holder, waiter = pg_stores(), pg_stores()
    async with holder.lock("ws"):
        task = asyncio.ensure_future(waiter.lock("ws").__aenter__())

        async def waiting() -> bool:
            return (False,) in await asyncio.to_thread(_advisory_locks, pg_dsn)

        await until(waiting)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def released() -> bool:
        return await asyncio.to_thread(_advisory_locks, pg_dsn) == []

    await until(released)
    third = pg_stores(lock_wait=1)
    async with third.lock("ws"):
        pass


async def test_pg_shared_locks_can_be_turned_off(
    pg_stores: Callable[..., PgvectorVectorStore],
    pg_dsn: str,  # noqa: F811
) -> None:
    local_only = pg_stores(shared_lock=False)
    async with local_only.lock("ws"):
        assert await asyncio.to_thread(_advisory_locks, pg_dsn) == []


async def assert_waiter_gives_up(holder: VectorStore, waiter: VectorStore) -> None:
    """`waiter` (lock_wait 0.3 s) gives up on a workspace `holder` holds with a 503 naming it; gets it once free."""
    async with holder.lock("busy"):
        started = time.monotonic()
        with pytest.raises(StoreError, match="workspace 'busy' stayed locked by another service process") as caught:
            async with waiter.lock("busy"):
                pytest.fail("the lock was granted twice")
        assert time.monotonic() - started >= 0.3  # it waited out its lock_wait (a hang is the per-test timeout's)
        assert caught.value.status == 503
    async with waiter.lock("busy"):  # free again once released
        pass
