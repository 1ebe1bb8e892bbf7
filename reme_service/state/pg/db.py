"""`StateDb`: the state's PostgreSQL — a small pool of synchronous connections, used from worker threads.

The state's callers are synchronous code that already runs off the event loop (the file backends' work ran in
`asyncio.to_thread`), so the PostgreSQL backend keeps that shape: blocking psycopg calls in worker threads.

Availability: nothing connects in the constructor. The first use opens the pool and readies the schema
(`schema.migrate`); when PostgreSQL is down, every use fails fast with `StoreError` (503 `store_unavailable`) and
the next use after it is back connects again, so a node recovers by itself. A statement runs in one transaction:
it is committed whole or not at all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg import Connection
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from reme_service.errors import StoreError
from reme_service.state.pg.schema import migrate
from reme_service.state.settings import StateTarget

logger = logging.getLogger("reme_service.state")
T = TypeVar("T")
Conn = Connection[TupleRow]
CONNECT_TIMEOUT = 5


class StateDb:
    def __init__(self, target: StateTarget, *, max_size: int = 8) -> None:
        self.target = target
        self.prefix = target.prefix
        self._max_size = max_size
        self._pool: ConnectionPool[Conn] | None = None
        self._opening = threading.Lock()

    def connect(self, *, autocommit: bool = True) -> Conn:
        """A connection of its own (listeners, job run locks), outside the pool; StoreError when unreachable."""
        try:
            return psycopg.connect(
                self.target.dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT, **self.target.conn_kwargs
            )
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def _open(self) -> ConnectionPool[Conn]:
        with self._opening:
            if self._pool is not None:
                return self._pool
            with self.connect(autocommit=False) as probe:  # fails fast with libpq's reason when refused
                migrate(probe, self.prefix)
            kwargs = {"connect_timeout": CONNECT_TIMEOUT, **self.target.conn_kwargs}
            pool: ConnectionPool[Conn] = ConnectionPool(
                self.target.dsn, kwargs=kwargs, min_size=1, max_size=self._max_size, timeout=CONNECT_TIMEOUT,
                open=False, name="reme-state",
            )  # fmt: skip
            pool.open(wait=False)
            self._pool = pool
            return pool

    @property
    def opened(self) -> bool:
        """Whether the pool is open (the schema was migrated by this process)."""
        return self._pool is not None

    def ready(self) -> None:
        """Connect and ready the schema now (StoreError when PostgreSQL cannot be reached)."""
        self.run(lambda conn: None)

    def run(self, work: Callable[[Conn], T]) -> T:
        """`work(conn)` in one transaction (blocking: call it in a worker thread). StoreError when PostgreSQL is
        unreachable or refuses the work; the transaction is then rolled back (nothing half-written)."""
        try:
            pool = self._open()
            with pool.connection() as conn, conn.transaction():
                return work(conn)
        except PoolTimeout as exc:
            raise StoreError(f"the state database is unavailable: {exc}") from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise self._failure(exc) from None
        except psycopg.Error as exc:  # refused by the database itself (a trigger, a constraint, a full disk)
            raise StoreError(f"the state database refused the write: {_reason(exc)}") from None

    def _failure(self, exc: psycopg.Error) -> StoreError:
        return StoreError(f"the state database is unavailable: {_reason(exc)}")

    def table(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def close(self) -> None:
        with self._opening:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def notify(self, conn: Conn, channel: str, payload: str) -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (self.channel(channel), payload))

    def channel(self, name: str) -> str:
        return f"{self.prefix}{name}"


def _reason(exc: psycopg.Error) -> str:
    """The first line of the database's message (or the error's type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
