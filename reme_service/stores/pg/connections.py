"""The pgvector store's connections to PostgreSQL: the pools, how a failure is told, and the shared workspace lock.

Availability: a database down at start does not stop the service. The request pool is made on first use after a
direct connection succeeded (that probe fails at once with libpq's reason when the server refuses, and prepares the
schema); a connection failure later drops the pools, so requests fail fast with 503 while the server is down and the
next request after it is back connects again.

`hold(workspace)`: a PostgreSQL session advisory lock on a connection of a separate small pool, held for the
section on top of the process's asyncio lock: a process that dies releases it with its session, and a waiter gives
up after `lock_wait` s (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from reme_service.errors import StoreError
from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.conn import Conn
from reme_service.stores.pg.vectors import VectorOids, register_vector_rows, vector_oids

T = TypeVar("T")


def advisory_key(prefix: str, name: str) -> int:
    """A 64-bit advisory-lock key for `name` under the table prefix `prefix`."""
    digest = hashlib.sha256(f"reme-pgvector\x00{prefix}\x00{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def connection_lost(exc: psycopg.Error) -> bool:
    """Whether the error means the connection (or the server) is gone, rather than one statement failing: client-side
    errors carry no SQLSTATE; class 08 is a connection exception; 57P01-57P03 a server shutting down or starting."""
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class _Unsent(Exception):
    """A write's connection broke before its transaction began: nothing of it reached the database."""

    def __init__(self, error: psycopg.Error) -> None:
        super().__init__(str(error))
        self.error = error


class PgConnections:
    """The pools of one store: requests (`run`, `write`) and workspace locks (`hold`). `prepare(conn)` readies
    the schema on the probe connection before the first pool is made; `opened()` is called once a pool exists."""

    def __init__(
        self,
        params: PgvectorStoreParams,
        *,
        prepare: Callable[[Conn], Awaitable[None]],
        opened: Callable[[], None],
    ) -> None:
        self.params = params
        self.prefix = params.table_prefix
        self._dsn, self._conn_kwargs = params.conninfo_parts()
        self.where = self._describe()
        self._prepare = prepare
        self._opened = opened
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._lock_pool: AsyncConnectionPool[Conn] | None = None
        self._connecting = asyncio.Lock()
        self._closing: set[asyncio.Task[Any]] = set()
        self._lock_wait_ms = f"{max(1, int(params.lock_wait * 1000))}ms"
        self._oids: VectorOids | None = None  # of `vector` and `vector[]` in the database, read once

    def _describe(self) -> str:
        """Where the database is, for messages (never the password)."""
        try:
            info = psycopg.conninfo.conninfo_to_dict(self._dsn, **self._conn_kwargs)
        except psycopg.Error as exc:
            raise ValueError(f"invalid dsn: {exc}") from exc
        host, port, db = info.get("host", "localhost"), info.get("port", 5432), info.get("dbname", "")
        return f"postgresql at {host}:{port}/{db}"

    def key(self, name: str) -> int:
        """A 64-bit advisory-lock key for `name` under this store's prefix."""
        return advisory_key(self.prefix, name)

    async def connect_direct(self) -> Conn:
        try:
            async with asyncio.timeout(self.params.timeout):
                return await AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=max(1, int(self.params.timeout)), **self._conn_kwargs
                )
        except TimeoutError as exc:
            raise StoreError(f"{self.where} did not answer within {self.params.timeout:g} s") from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.where} is unreachable: {type(exc).__name__}: {str(exc).strip()[:300]}") from exc

    async def pool(self) -> AsyncConnectionPool[Conn]:
        """The pool, made (after a probe connection that also prepares the schema) when there is none."""
        if self._pool is not None:
            return self._pool
        async with self._connecting:
            if self._pool is None:
                probe = await self.connect_direct()
                try:
                    await self.guarded("preparing the schema", self._prepare(probe))
                finally:
                    await probe.close()
                self._pool = await self._new_pool(self.params.pool_size, "reme-pgvector")
                self._opened()
            return self._pool

    async def _new_pool(
        self, size: int, name: str, reset: Callable[[Conn], Awaitable[None]] | None = None, *, check: bool = False
    ) -> Any:
        """A pool of autocommit connections. Its connections are checked before each use (a round trip) only with
        `check`: the request pool's are not, `run` retries on a connection found broken instead."""
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=size,
            open=False,
            name=name,
            timeout=self.params.timeout,
            reconnect_timeout=self.params.timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self.params.timeout)), **self._conn_kwargs},
            check=AsyncConnectionPool.check_connection if check else None,
            configure=self._configure,
            reset=reset,
        )
        await pool.open(wait=False)
        return pool

    async def _configure(self, conn: Conn) -> None:
        """Each new connection: HNSW scans look at `ef_search` candidates and return rows in exact distance order
        until the LIMIT is met (pgvector's strict-order iterative scan), so `k` rows come back whenever there are
        `k` (placeholders until the extension's library loads, which then takes them); and a statement waits at most
        `lock_wait` for a lock — a table, a row, a workspace's advisory lock — then fails (503)."""
        await conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', 'strict_order', false), "
            "set_config('lock_timeout', %s, false)",
            [str(self.params.ef_search), self._lock_wait_ms],
        )
        if self._oids is None:
            self._oids = await vector_oids(conn)
        register_vector_rows(conn, self._oids)

    def _drop_pools(self) -> None:
        """Forget the pools after a connection failure (closed in the background): the next request probes."""
        for pool in (self._pool, self._lock_pool):
            if pool is not None:
                task = asyncio.ensure_future(pool.close(timeout=1.0))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self._pool = self._lock_pool = None

    async def guarded(self, action: str, call: Awaitable[T]) -> T:
        """Await `call`; database failures become StoreError (503) naming the action and the reason."""
        try:
            return await call
        except psycopg.Error as exc:
            raise self._failure(action, exc) from exc

    def _failure(self, action: str, exc: psycopg.Error) -> StoreError:
        """The StoreError for a database failure; a lost connection also drops the pools (the next request probes)."""
        reason = str(exc).strip()[:300]
        if connection_lost(exc):
            self._drop_pools()
            return StoreError(f"{self.where} is unreachable ({action}): {type(exc).__name__}: {reason}")
        return StoreError(f"{self.where}: {action} failed: {type(exc).__name__}: {reason}")

    async def run(self, action: str, work: Callable[[Conn], Awaitable[T]], *, retry: bool = True) -> T:
        """`work` on a pooled connection (autocommit); database failures become StoreError (503).

        Pooled connections are not checked before use (that was a round trip per request). A connection found
        broken — the server restarted, or ended the session, since its last use — drops the pools, and `work` runs
        once more on a new connection (after a probe) when that cannot repeat a change: with `retry` (reads) or
        when the failure came before the transaction began (`_Unsent`, writes)."""
        for attempt in (0, 1):
            pool = await self.pool()
            try:
                async with pool.connection() as conn:
                    return await work(conn)
            except PoolTimeout as exc:
                raise await self._pool_timeout(action) from exc
            except _Unsent as unsent:
                if attempt == 1:
                    raise self._failure(action, unsent.error) from unsent.error
                self._drop_pools()
            except psycopg.Error as exc:
                if not retry or attempt == 1 or not connection_lost(exc):
                    raise self._failure(action, exc) from exc
                self._drop_pools()
        raise AssertionError("unreachable")

    async def _pool_timeout(self, action: str) -> StoreError:
        """No pooled connection in time: the server is down (then the pools go, and the reason is told) or busy."""
        try:
            probe = await self.connect_direct()
        except StoreError as down:
            self._drop_pools()
            return down
        await probe.close()
        return StoreError(f"{self.where}: no free connection within {self.params.timeout:g} s ({action})")

    async def write(self, action: str, work: Callable[[Conn], Awaitable[T]]) -> T:
        """`work` in one transaction (which waits at most `lock_wait` for a lock: `_configure`)."""

        async def transaction(conn: Conn) -> T:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    await stack.enter_async_context(conn.transaction())  # BEGIN: nothing is changed yet
                except psycopg.Error as exc:
                    if connection_lost(exc):
                        raise _Unsent(exc) from exc
                    raise
                return await work(conn)
            raise AssertionError("unreachable")  # (for mypy: the stack does not swallow exceptions)

        return await self.run(action, transaction, retry=False)

    async def close(self) -> None:
        for pool in (self._pool, self._lock_pool):
            if pool is not None:
                await pool.close()
        self._pool = self._lock_pool = None
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    # ----- the shared lock -----

    async def _get_lock_pool(self) -> AsyncConnectionPool[Conn]:
        await self.pool()
        if self._lock_pool is None:
            async with self._connecting:
                if self._lock_pool is None:

                    async def unlock_all(conn: Conn) -> None:  # a connection returned never keeps a lock
                        await conn.execute("SELECT pg_advisory_unlock_all()")

                    self._lock_pool = await self._new_pool(
                        self.params.pool_size, "reme-pgvector-locks", unlock_all, check=True
                    )
        assert self._lock_pool is not None
        return self._lock_pool

    @contextlib.asynccontextmanager
    async def hold(self, workspace_id: str, local: asyncio.Lock) -> AsyncIterator[None]:
        """The process's asyncio lock of the workspace, then PostgreSQL's advisory lock on a dedicated connection
        (released when the section ends, or by the server when the session ends)."""
        key = self.key(f"workspace\x00{workspace_id}")
        async with local:
            pool = await self._get_lock_pool()
            try:
                async with pool.connection() as conn:
                    await self._take(conn, key, workspace_id)
                    try:
                        yield
                    finally:
                        release = asyncio.ensure_future(conn.execute("SELECT pg_advisory_unlock(%s)", [key]))
                        with contextlib.suppress(psycopg.Error):  # a broken session released it already
                            await asyncio.shield(release)
            except PoolTimeout as exc:
                raise await self._pool_timeout(f"locking workspace {workspace_id!r}") from exc
            except psycopg.Error as exc:
                raise self._failure(f"locking workspace {workspace_id!r}", exc) from exc

    async def _take(self, conn: Conn, key: int, workspace_id: str) -> None:
        try:  # gives up after `lock_wait` (the connection's lock_timeout, `_configure`)
            await conn.execute("SELECT pg_advisory_lock(%s)", [key])
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreError(
                f"workspace {workspace_id!r} stayed locked by another service process for "
                f"{self.params.lock_wait:g} s ({self.where})",
                details={"workspace_id": workspace_id},
            ) from exc
